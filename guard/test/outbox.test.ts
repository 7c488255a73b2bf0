import pg from "pg";
import { PrismaPg } from "@prisma/adapter-pg";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { drizzle } from "drizzle-orm/node-postgres";
import { backoffMs, classifyError, createOutbox, drizzleGuard, postgresGuard, prismaGuard, retryAfterMs } from "../src/index.ts";
import { ledger } from "./subjects.ts";
import { PrismaClient } from "./generated/prisma/client.ts";
import { HttpError, makeSend, startFakeProvider, type FakeProvider } from "./fake-provider.ts";
import { DATABASE_URL, ensureSchema, sleep, spawnTs, uniq } from "./helpers.ts";
import { makeQueueBackend, QUEUE_BACKENDS, rawAccess, type QueueBackend } from "./backends.ts";
import { makeSubject, MYSQL_KINDS } from "./subjects.ts";

let pool: pg.Pool;
let provider: FakeProvider;
const outbox = () => createOutbox({ db: pool });

async function rowOf(key: string) {
  const r = await pool.query(
    `SELECT state, attempts, last_error, lease_until,
            (extract(epoch FROM (available_at - now())) * 1000)::float8 AS due_in_ms
       FROM retrysafe_outbox WHERE key = $1`,
    [key],
  );
  return r.rows[0] as { state: string; attempts: number; last_error: string | null; due_in_ms: number; lease_until: Date | null };
}

async function enqueueKeys(keys: string[]) {
  const ob = outbox();
  for (const key of keys) expect(await ob.enqueue(pool, { kind: "send_receipt", key, payload: { key } })).toBe(true);
}

beforeAll(async () => {
  await ensureSchema();
  pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
  provider = await startFakeProvider();
});
afterAll(async () => {
  await provider?.close();
  await pool?.end();
});
beforeEach(async () => {
  await pool.query("TRUNCATE retrysafe_outbox");
});

describe("outbox.enqueue inside the guard's transaction", () => {
  it("commits with the claim and the business write (pg)", async () => {
    const guard = postgresGuard(pool);
    const ob = outbox();
    const event = uniq("evt");
    const r = await guard.run(`stripe:${event}`, async (tx) => {
      await tx.query("INSERT INTO ledger (event_key, amount) VALUES ($1, 1)", [event]);
      return ob.enqueue(tx, { kind: "send_receipt", key: `receipt:${event}`, payload: { event } });
    });
    expect(r).toEqual({ status: "processed", result: true });
    expect(await rowOf(`receipt:${event}`)).toMatchObject({ state: "pending", attempts: 0 });
    // enqueuing the same key again is a no-op
    expect(await ob.enqueue(pool, { kind: "send_receipt", key: `receipt:${event}` })).toBe(false);
  });

  it("rolls back with the transaction when the callback throws (pg)", async () => {
    const guard = postgresGuard(pool);
    const ob = outbox();
    const event = uniq("evt");
    await expect(
      guard.run(`stripe:${event}`, async (tx) => {
        await ob.enqueue(tx, { kind: "send_receipt", key: `receipt:${event}` });
        throw new Error("later failure");
      }),
    ).rejects.toThrow("later failure");
    expect(await rowOf(`receipt:${event}`)).toBeUndefined();
  });

  it("works with a Prisma interactive transaction, and dispatches through a Prisma client", async () => {
    const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: DATABASE_URL }) });
    try {
      const guard = prismaGuard(prisma);
      const ob = createOutbox({ db: prisma });
      const event = uniq("evt");
      const r = await guard.run(`stripe:${event}`, async (tx) => {
        await tx.ledger.create({ data: { eventKey: event, amount: 1 } });
        await ob.enqueue(tx, { kind: "send_receipt", key: `receipt:${event}`, payload: { n: 1 } });
        return "ok";
      });
      expect(r).toEqual({ status: "processed", result: "ok" });
      await expect(
        guard.run(`stripe:${event}-b`, async (tx) => {
          await ob.enqueue(tx, { kind: "send_receipt", key: `receipt:${event}-b` });
          throw new Error("nope");
        }),
      ).rejects.toThrow("nope");
      expect(await rowOf(`receipt:${event}-b`)).toBeUndefined();
      const stats = await ob.dispatch({ send: makeSend(provider.url) });
      expect(stats).toEqual({ leased: 1, completed: 1, retried: 0, failed: 0, lost: 0, manual: 0 });
      expect(provider.effects.get(`receipt:${event}`)).toBe(1);
      expect(await rowOf(`receipt:${event}`)).toMatchObject({ state: "completed", attempts: 1 });
    } finally {
      await prisma.$disconnect();
    }
  });

  it("works with a Drizzle transaction, and dispatches through a Drizzle db", async () => {
    const db = drizzle(pool);
    const guard = drizzleGuard(db);
    const ob = createOutbox({ db });
    const event = uniq("evt");
    const r = await guard.run(`stripe:${event}`, async (tx) => {
      await tx.insert(ledger).values({ eventKey: event, amount: 1 });
      return ob.enqueue(tx, { kind: "send_receipt", key: `receipt:${event}`, payload: { quote: "it's $1" } });
    });
    expect(r).toEqual({ status: "processed", result: true });
    await expect(
      guard.run(`stripe:${event}-b`, async (tx) => {
        await ob.enqueue(tx, { kind: "send_receipt", key: `receipt:${event}-b` });
        throw new Error("nope");
      }),
    ).rejects.toThrow("nope");
    expect(await rowOf(`receipt:${event}-b`)).toBeUndefined();
    const payloads: unknown[] = [];
    const send = makeSend(provider.url);
    const stats = await ob.dispatch({ send: (row, ctx) => (payloads.push(row.payload), send(row, ctx)) });
    expect(stats).toEqual({ leased: 1, completed: 1, retried: 0, failed: 0, lost: 0, manual: 0 });
    expect(payloads).toEqual([{ quote: "it's $1" }]);
    expect(await rowOf(`receipt:${event}`)).toMatchObject({ state: "completed", attempts: 1 });
  });
});

describe("outbox.enqueue inside the guard's transaction on MySQL / MariaDB", () => {
  for (const kind of MYSQL_KINDS) {
    it(`${kind}: commits with the claim and the business write, rolls back with them, and dispatches`, async () => {
      const s = await makeSubject(kind);
      const backend = await makeQueueBackend(kind === "mysql" ? "mysql" : kind === "drizzle-mysql" ? "drizzle-mysql" : "prisma-mysql", 2);
      try {
        await backend.reset();
        const ob = createOutbox({ db: backend.db });
        const event = uniq("evt");
        const enqueueOnly = createOutbox(); // no db: the dialect comes from the transaction it is given
        const r = await s.guard.run(`stripe:${event}`, async (tx) => {
          await s.write(tx, event);
          expect(await enqueueOnly.enqueue(tx, { kind: "audit", key: `audit:${event}` })).toBe(true);
          return ob.enqueue(tx, { kind: "send_receipt", key: `receipt:${event}`, payload: { quote: "it's $1 ? or not" } });
        });
        expect(r).toEqual({ status: "processed", result: true });
        expect(await rawAccess(backend).outboxRow(`audit:${event}`)).toMatchObject({ state: "pending" });
        expect(await ob.enqueue(backend.db, { kind: "send_receipt", key: `receipt:${event}` })).toBe(false); // same key: a no-op
        await expect(
          s.guard.run(`stripe:${event}-b`, async (tx) => {
            await ob.enqueue(tx, { kind: "send_receipt", key: `receipt:${event}-b` });
            throw new Error("later failure");
          }),
        ).rejects.toThrow("later failure");
        expect(await rawAccess(backend).outboxRow(`receipt:${event}-b`)).toBeUndefined();
        const payloads: unknown[] = [];
        const send = makeSend(provider.url);
        const stats = await ob.dispatch({ kinds: ["send_receipt"], send: (row, ctx) => (payloads.push(row.payload), send(row, ctx)) });
        expect(stats).toMatchObject({ completed: 1, retried: 0, failed: 0, lost: 0 });
        expect(payloads).toContainEqual({ quote: "it's $1 ? or not" });
        expect(await rawAccess(backend).outboxRow(`receipt:${event}`)).toMatchObject({ state: "completed", attempts: 1 });
        expect(provider.effects.get(`receipt:${event}`)).toBe(1);
      } finally {
        await s.close();
        await backend.close();
      }
    });
  }
});

for (const backendName of QUEUE_BACKENDS) describe(`outbox.dispatch on ${backendName}`, () => {
  let b: QueueBackend;
  const outbox = () => createOutbox({ db: b.db });
  const rowOf = async (key: string) => (await rawAccess(b).outboxRow(key))!;
  async function enqueueKeys(keys: string[]) {
    const ob = outbox();
    for (const key of keys) expect(await ob.enqueue(b.db, { kind: "send_receipt", key, payload: { key } })).toBe(true);
  }
  const makeDue = (key: string) =>
    rawAccess(b).query("UPDATE retrysafe_outbox SET available_at = now() WHERE key = $1", "UPDATE retrysafe_outbox SET available_at = NOW(6) WHERE `key` = ?", [key]);
  beforeAll(async () => {
    b = await makeQueueBackend(backendName);
  });
  afterAll(async () => {
    await b?.close();
  });
  beforeEach(async () => {
    await b.reset();
  });

    it("a dispatcher killed with SIGKILL mid-send: rows resume after the lease and each key takes effect once", async () => {
      const keys = Array.from({ length: 5 }, (_, i) => uniq(`crash${i}`));
      await enqueueKeys(keys);
      const child = spawnTs("test/fixtures/dispatch-child.ts", [provider.url, keys[2]!, "1500", backendName]);
      const { signal } = await child.exited;
      expect(signal, child.output()).toBe("SIGKILL");
      expect(child.output()).toContain("KILLING");

      expect((await rowOf(keys[0]!)).state).toBe("completed");
      expect((await rowOf(keys[1]!)).state).toBe("completed");
      expect((await rowOf(keys[2]!)).state).toBe("leased"); // sent, completion never recorded
      // while the dead dispatcher's lease holds, nobody takes its rows
      const ob = outbox();
      const send = makeSend(provider.url);
      expect(await ob.dispatch({ send, leaseMs: 5000 })).toMatchObject({ leased: 0 });
      await sleep(1800); // the dead dispatcher's 1500 ms lease has expired
      const stats = await ob.dispatch({ send, leaseMs: 5000 });
      expect(stats).toEqual({ leased: 3, completed: 3, retried: 0, failed: 0, lost: 0, manual: 0 });

      for (const k of keys) {
        expect((await rowOf(k)).state).toBe("completed");
        expect(provider.effects.get(k)).toBe(1); // one effect per idempotency key
      }
      expect(provider.calls.get(keys[2]!)).toBe(2); // resent with the same key
      expect(provider.calls.get(keys[3]!)).toBe(1);
      expect([...provider.effects.keys()].filter((k) => keys.includes(k))).toHaveLength(5);
    });

    it("two concurrent dispatchers never send the same row twice (SKIP LOCKED)", async () => {
      const keys = Array.from({ length: 20 }, (_, i) => uniq(`par${i}`));
      await enqueueKeys(keys);
      const ob = outbox();
      const send = makeSend(provider.url);
      const [a, b] = await Promise.all([ob.dispatch({ send, batchSize: 3 }), ob.dispatch({ send, batchSize: 3 })]);
      expect(a.completed + b.completed).toBe(20);
      for (const k of keys) expect(provider.calls.get(k)).toBe(1);
    });

    it("retries transient failures with backoff, then parks the row as terminal_failure after maxAttempts", async () => {
      const key = uniq("flaky");
      await enqueueKeys([key]);
      provider.script(key, { status: 503 }, { status: 503 }, { status: 503 }, { status: 503 });
      const ob = outbox();
      const send = makeSend(provider.url);
      // random() = 0.5 -> half of the ceiling: 5000 ms after attempt 1
      let stats = await ob.dispatch({ send, maxAttempts: 3, baseDelayMs: 10_000, random: () => 0.5 });
      expect(stats).toEqual({ leased: 1, completed: 0, retried: 1, failed: 0, lost: 0, manual: 0 });
      let row = await rowOf(key);
      expect(row).toMatchObject({ state: "pending", attempts: 1 });
      expect(row.last_error).toMatch(/transient.*503/);
      expect(row.due_in_ms).toBeGreaterThan(4000);
      expect(row.due_in_ms).toBeLessThanOrEqual(5000);
      expect(await ob.dispatch({ send, maxAttempts: 3 })).toMatchObject({ leased: 0 }); // not due yet

      // make it due; jitter 0 -> immediate retries until the budget is spent
      await makeDue(key);
      stats = await ob.dispatch({ send, maxAttempts: 3, baseDelayMs: 10_000, random: () => 0 });
      expect(stats).toEqual({ leased: 2, completed: 0, retried: 1, failed: 1, lost: 0, manual: 0 });
      row = await rowOf(key);
      expect(row).toMatchObject({ state: "terminal_failure", attempts: 3, lease_until: null });
      expect(row.last_error).toMatch(/503/);
      expect(provider.calls.get(key)).toBe(3);
      expect(await ob.dispatch({ send, maxAttempts: 3 })).toMatchObject({ leased: 0 });
    });

    it("a permanent 4xx goes to terminal_failure at once", async () => {
      const key = uniq("bad");
      await enqueueKeys([key]);
      provider.script(key, { status: 422 });
      const stats = await outbox().dispatch({ send: makeSend(provider.url), maxAttempts: 5, random: () => 0 });
      expect(stats).toEqual({ leased: 1, completed: 0, retried: 0, failed: 1, lost: 0, manual: 0 });
      const row = await rowOf(key);
      expect(row).toMatchObject({ state: "terminal_failure", attempts: 1 });
      expect(row.last_error).toMatch(/permanent.*422/);
      expect(provider.calls.get(key)).toBe(1);
    });

    it("honours Retry-After (seconds and HTTP date) over the jittered backoff", async () => {
      const k1 = uniq("ra-secs");
      const k2 = uniq("ra-date");
      await enqueueKeys([k1, k2]);
      provider.script(k1, { status: 429, headers: { "retry-after": "1" } });
      provider.script(k2, { status: 503, headers: { "retry-after": new Date(Date.now() + 30_000).toUTCString() } });
      const ob = outbox();
      const send = makeSend(provider.url);
      const stats = await ob.dispatch({ send, random: () => 0, baseDelayMs: 1 });
      expect(stats).toEqual({ leased: 2, completed: 0, retried: 2, failed: 0, lost: 0, manual: 0 });
      const r1 = await rowOf(k1);
      expect(r1.due_in_ms).toBeGreaterThan(700);
      expect(r1.due_in_ms).toBeLessThanOrEqual(1000);
      const r2 = await rowOf(k2);
      expect(r2.due_in_ms).toBeGreaterThan(25_000);
      expect(r2.due_in_ms).toBeLessThanOrEqual(31_000);
      expect(await ob.dispatch({ send })).toMatchObject({ leased: 0 });
      await sleep(1200);
      expect(await ob.dispatch({ send })).toEqual({ leased: 1, completed: 1, retried: 0, failed: 0, lost: 0, manual: 0 });
      expect((await rowOf(k1)).state).toBe("completed");
      expect((await rowOf(k2)).state).toBe("pending");
    });

    it("an ambiguous outcome (response lost) is retried with the same key and takes effect once", async () => {
      const key = uniq("lost");
      await enqueueKeys([key]);
      provider.script(key, "apply-then-drop");
      const ob = outbox();
      const stats = await ob.dispatch({ send: makeSend(provider.url), random: () => 0 });
      expect(stats).toEqual({ leased: 2, completed: 1, retried: 1, failed: 0, lost: 0, manual: 0 });
      expect(provider.calls.get(key)).toBe(2);
      expect(provider.effects.get(key)).toBe(1);
      expect(await rowOf(key)).toMatchObject({ state: "completed", attempts: 2, last_error: null });
    });

    it("a dispatcher whose lease expired cannot complete a row another dispatcher took over", async () => {
      const key = uniq("slow");
      await enqueueKeys([key]);
      const ob = outbox();
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let slowSent!: () => void;
      const sentSlow = new Promise<void>((r) => (slowSent = r));
      const slow = ob.dispatch({
        leaseMs: 300,
        send: async () => {
          slowSent();
          await gate;
          throw Object.assign(new Error("late failure"), { status: 500 });
        },
      });
      await sentSlow;
      await sleep(600);
      const fast = await ob.dispatch({ send: makeSend(provider.url) });
      expect(fast).toMatchObject({ leased: 1, completed: 1 });
      release();
      await slow;
      expect(await rowOf(key)).toMatchObject({ state: "completed", attempts: 2, last_error: null });
    });

    it("a row whose dispatchers keep crashing goes terminal once the attempt budget is spent", async () => {
      const key = uniq("poison");
      await enqueueKeys([key]);
      // as if 3 dispatchers leased it and died
      await rawAccess(b).query(
        "UPDATE retrysafe_outbox SET state = 'leased', attempts = 3, lease_until = now() - interval '1 second' WHERE key = $1",
        "UPDATE retrysafe_outbox SET state = 'leased', attempts = 3, lease_until = NOW(6) - INTERVAL 1 SECOND WHERE `key` = ?",
        [key],
      );
      const stats = await outbox().dispatch({ send: makeSend(provider.url), maxAttempts: 3 });
      expect(stats).toEqual({ leased: 1, completed: 0, retried: 0, failed: 1, lost: 0, manual: 0 });
      const row = await rowOf(key);
      expect(row).toMatchObject({ state: "terminal_failure", attempts: 4 });
      expect(row.last_error).toMatch(/attempts exhausted \(3\).*lease expired/);
      expect(provider.calls.get(key)).toBeUndefined();
    });

    it("start() polls until stopped", async () => {
      const key = uniq("poll");
      const ob = outbox();
      const worker = ob.start({ send: makeSend(provider.url), pollMs: 50 });
      await enqueueKeys([key]);
      for (let i = 0; i < 100 && (await rowOf(key)).state !== "completed"; i++) await sleep(50);
      await worker.stop();
      expect((await rowOf(key)).state).toBe("completed");
    });
});

describe("failure classification", () => {
  it("classifies transient, permanent and ambiguous failures", () => {
    expect(classifyError({ status: 429 })).toBe("transient");
    for (const s of [500, 502, 503, 504, 408]) expect(classifyError({ status: s })).toBe("transient");
    for (const s of [400, 401, 403, 404, 409, 422]) expect(classifyError({ statusCode: s })).toBe("permanent");
    expect(classifyError({ response: { status: 503 } })).toBe("transient");
    expect(classifyError(Object.assign(new Error("reset"), { code: "ECONNRESET" }))).toBe("transient");
    expect(classifyError(Object.assign(new Error("t"), { code: "ETIMEDOUT" }))).toBe("transient");
    expect(classifyError(Object.assign(new Error("aborted"), { name: "TimeoutError" }))).toBe("transient");
    expect(classifyError(new TypeError("fetch failed", { cause: { code: "UND_ERR_SOCKET" } }))).toBe("transient");
    expect(classifyError(new Error("response lost"))).toBe("ambiguous");
    expect(classifyError({ status: 503, retryable: false })).toBe("permanent");
    expect(classifyError({ status: 400, retryable: true })).toBe("transient");
  });

  it("parses Retry-After and computes bounded full-jitter backoff", () => {
    const now = Date.parse("2026-01-01T00:00:00Z");
    expect(retryAfterMs({ retryAfter: 3 }, now)).toBe(3000);
    expect(retryAfterMs({ retryAfter: "7" }, now)).toBe(7000);
    expect(retryAfterMs({ retryAfter: new Date(now + 5000) }, now)).toBe(5000);
    expect(retryAfterMs({ headers: { "retry-after": "Thu, 01 Jan 2026 00:00:10 GMT" } }, now)).toBe(10_000);
    expect(retryAfterMs({ headers: new Headers({ "Retry-After": "2" }) }, now)).toBe(2000);
    expect(retryAfterMs({}, now)).toBeUndefined();
    expect(backoffMs(1, 100, 10_000, () => 0.999)).toBe(99);
    expect(backoffMs(4, 100, 10_000, () => 0.5)).toBe(400);
    expect(backoffMs(30, 100, 10_000, () => 0.5)).toBe(5000); // bounded by maxDelayMs
    expect(backoffMs(3, 100, 10_000, () => 0)).toBe(0);
  });
});
