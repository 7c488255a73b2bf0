// The inbox (durable acceptance + a leasing worker) against real PostgreSQL and MariaDB
// (mysql2, Drizzle and Prisma on MySQL): concurrent acceptance, states, leases, SIGKILLed
// workers, racing workers, and the six crash points of seed 2, each replayed and checked
// against the business invariant.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createInbox, createOutbox, GuardMismatchError, InboxLeaseLostError, statusFor, type InboxEvent } from "../src/index.ts";
import { ensureSchema, sleep, spawnTs, uniq } from "./helpers.ts";
import { makeSend, startFakeProvider, type FakeProvider } from "./fake-provider.ts";
import { callProvider } from "./inbox-scenario.ts";
import { makeQueueBackend, QUEUE_BACKENDS, type QueueBackend } from "./backends.ts";

let provider: FakeProvider;

beforeAll(async () => {
  await ensureSchema();
  provider = await startFakeProvider();
});
afterAll(async () => {
  await provider?.close();
});

for (const backendName of QUEUE_BACKENDS) describe(`inbox on ${backendName}`, () => {
  let b: QueueBackend;
  const inbox = () => createInbox({ db: b.db });
  const outbox = () => createOutbox({ db: b.db });
  const entitlements = (key: string) => b.entitlements(key);

  beforeAll(async () => {
    b = await makeQueueBackend(backendName);
  });
  afterAll(async () => {
    await b?.close();
  });
  beforeEach(async () => {
    await b.reset();
  });

  /** The worker of the scenario: notify the partner (idempotent), then grant the plan, queue the receipt and complete together. */
  const handle = async (event: InboxEvent, ctx: { complete: (fn: (tx: any) => Promise<void>) => Promise<unknown> }) => {
    await callProvider(provider.url, `notify:${event.key}`);
    await ctx.complete((tx) => b.applyEntitlement(tx, outbox(), event));
  };

  /** Replay what the provider and the background jobs do next, then check the business invariant. */
  async function finishAndCheck(key: string) {
    await inbox().process({ handle, leaseMs: 5000 });
    await outbox().dispatch({ send: makeSend(provider.url) });
    expect(await entitlements(key)).toBe(1); // one entitlement transition
    expect(provider.effects.get(`receipt:${key}`)).toBe(1); // one receipt
    expect(provider.effects.get(`notify:${key}`)).toBe(1); // one partner notification
    expect((await inbox().get(key))?.state).toBe("completed");
    expect(await b.outboxState(`receipt:${key}`)).toBe("completed");
  }

  describe("inbox.acceptEvent", () => {
    it("32 concurrent deliveries of one event: 1 accepted, 31 duplicate, 1 row", async () => {
      const key = uniq("stripe:evt");
      const results = await Promise.all(Array.from({ length: 32 }, () => inbox().acceptEvent(key, { account: "a", plan: "pro" })));
      expect(results.filter((r) => r.status === "accepted")).toHaveLength(1);
      expect(results.filter((r) => r.status === "duplicate" && r.duplicate)).toHaveLength(31);
      expect(await b.inboxRows(key)).toBe(1);
      expect(await inbox().get(key)).toMatchObject({ state: "pending", attempts: 0, payload: { account: "a", plan: "pro" } });
    });

    it("the same key with another payload is a mismatch (422), never a silent duplicate; key order does not matter", async () => {
      const key = uniq("stripe:evt");
      expect(await inbox().acceptEvent(key, { a: 1, b: [1, 2] })).toEqual({ status: "accepted", duplicate: false });
      expect(await inbox().acceptEvent(key, { b: [1, 2], a: 1 })).toEqual({ status: "duplicate", duplicate: true });
      const other = await inbox().acceptEvent(key, { a: 2, b: [1, 2] });
      expect(other).toEqual({ status: "mismatch", duplicate: true });
      expect(statusFor(other).status).toBe(422);
      await expect(inbox().acceptEvent(key, { a: 3 }, { onMismatch: "throw" })).rejects.toBeInstanceOf(GuardMismatchError);
      await expect(inbox().acceptEvent(key, { a: 3 }, { onMismatch: "throw" })).rejects.toThrow(key);
      expect((await inbox().get(key))?.payload).toEqual({ a: 1, b: [1, 2] }); // the first payload is kept
    });

    it("keeps non-ASCII payloads, kinds and error messages intact", async () => {
      const key = uniq("intl:注文");
      const payload = { name: "Zoë Ångström", note: "注文 🎉" };
      expect(await inbox().acceptEvent(key, payload, { kind: "commande-reçue" })).toMatchObject({ status: "accepted" });
      const failing = async () => {
        throw Object.assign(new Error("échec: ユーザー不明 🚫"), { status: 422 });
      };
      expect(await inbox().process({ kinds: ["commande-reçue"], handle: failing })).toMatchObject({ claimed: 1, failed: 1 });
      const row = await inbox().get(key);
      expect(row).toMatchObject({ key, kind: "commande-reçue", payload, state: "terminal_failure" });
      expect(row?.last_error).toContain("échec: ユーザー不明 🚫");
    });

    it("refuses bad keys by name", async () => {
      await expect(inbox().acceptEvent("x-\uD800", {})).rejects.toThrow(/lone surrogate/);
    });
  });

  describe("inbox.process", () => {
    it("pending -> leased -> completed, with lease_until and attempts, and no transaction open while the handler runs", async () => {
      const key = uniq("evt");
      await inbox().acceptEvent(key, { account: "acct", plan: "pro" });
      let seen: any;
      let openTransactions = -1;
      const stats = await inbox().process({
        leaseMs: 10_000,
        handle: async (event, ctx) => {
          seen = await inbox().get(event.key);
          openTransactions = await b.openTransactions();
          await ctx.complete((tx) => b.applyEntitlement(tx, outbox(), event));
        },
      });
      expect(stats).toEqual({ claimed: 1, completed: 1, retried: 0, failed: 0, lost: 0 });
      expect(seen).toMatchObject({ state: "leased", attempts: 1 });
      expect(seen.lease_until.getTime()).toBeGreaterThan(Date.now() + 5000);
      expect(openTransactions).toBe(0);
      expect(await inbox().get(key)).toMatchObject({ state: "completed", attempts: 1, lease_until: null });
      expect(await entitlements(key)).toBe(1);
      expect(await inbox().process({ handle })).toMatchObject({ claimed: 0 });
    });

    it("failures back off and end in terminal_failure after maxAttempts; a permanent failure at once", async () => {
      const flaky = uniq("flaky");
      const bad = uniq("bad");
      await inbox().acceptEvent(flaky, {});
      await inbox().acceptEvent(bad, {});
      const failing = async (event: InboxEvent) => {
        if (event.key === bad) throw Object.assign(new Error("invalid payload"), { status: 422 });
        throw Object.assign(new Error("upstream down"), { status: 503 });
      };
      let stats = await inbox().process({ handle: failing, maxAttempts: 2, baseDelayMs: 60_000, random: () => 0.5 });
      expect(stats).toEqual({ claimed: 2, completed: 0, retried: 1, failed: 1, lost: 0 });
      expect(await inbox().get(bad)).toMatchObject({ state: "terminal_failure", attempts: 1 });
      expect((await inbox().get(bad))?.last_error).toMatch(/permanent.*invalid payload/);
      const row = await inbox().get(flaky);
      expect(row).toMatchObject({ state: "pending", attempts: 1 });
      expect(row?.last_error).toMatch(/transient.*503/);
      expect(await inbox().process({ handle: failing, maxAttempts: 2 })).toMatchObject({ claimed: 0 }); // backing off
      await b.makeInboxDue(flaky);
      stats = await inbox().process({ handle: failing, maxAttempts: 2 });
      expect(stats).toEqual({ claimed: 1, completed: 0, retried: 0, failed: 1, lost: 0 });
      expect(await inbox().get(flaky)).toMatchObject({ state: "terminal_failure", attempts: 2 });
    });

    it("a worker whose lease was taken over cannot complete: its writes roll back (fencing)", async () => {
      const key = uniq("slow");
      await inbox().acceptEvent(key, { account: "acct", plan: "pro" });
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let started!: () => void;
      const slowStarted = new Promise<void>((r) => (started = r));
      const slow = inbox().process({
        leaseMs: 300,
        handle: async (event, ctx) => {
          started();
          await gate;
          await ctx.complete((tx) => b.applyEntitlement(tx, outbox(), event));
        },
      });
      await slowStarted;
      await sleep(500);
      expect(await inbox().process({ handle, leaseMs: 5000 })).toMatchObject({ claimed: 1, completed: 1 });
      release();
      expect(await slow).toEqual({ claimed: 1, completed: 0, retried: 0, failed: 0, lost: 1 });
      expect(await entitlements(key)).toBe(1);
      expect(await inbox().get(key)).toMatchObject({ state: "completed", attempts: 2 });
      expect(new InboxLeaseLostError(key).message).toContain(key);
    });

    it("a stale worker cannot complete while the new owner still holds the event (lease-token fencing)", async () => {
      const key = uniq("stale");
      await inbox().acceptEvent(key, { account: "acct", plan: "pro" });
      const gate = () => {
        let open!: () => void;
        const opened = new Promise<void>((r) => (open = r));
        let started!: () => void;
        const began = new Promise<void>((r) => (started = r));
        return { open, opened, started, began };
      };
      const a = gate();
      const stale = inbox().process({
        leaseMs: 300,
        handle: async (event, ctx) => {
          a.started();
          await a.opened;
          await ctx.complete((tx) => b.applyEntitlement(tx, outbox(), event));
        },
      });
      await a.began;
      await sleep(500); // the stale worker's lease has expired
      const next = gate();
      const owner = inbox().process({
        leaseMs: 20_000,
        handle: async (event, ctx) => {
          next.started();
          await next.opened;
          await ctx.complete((tx) => b.applyEntitlement(tx, outbox(), event));
        },
      });
      await next.began; // the event is leased again, to the new owner
      a.open();
      expect(await stale).toEqual({ claimed: 1, completed: 0, retried: 0, failed: 0, lost: 1 });
      expect(await entitlements(key)).toBe(0);
      expect(await inbox().get(key)).toMatchObject({ state: "leased", attempts: 2 });
      next.open();
      expect(await owner).toEqual({ claimed: 1, completed: 1, retried: 0, failed: 0, lost: 0 });
      expect(await entitlements(key)).toBe(1);
      expect(await inbox().get(key)).toMatchObject({ state: "completed", attempts: 2 });
    });

    it("two workers racing over 40 events: each event handled once (SKIP LOCKED)", async () => {
      const keys = Array.from({ length: 40 }, (_, i) => uniq(`race${i}`));
      for (const k of keys) await inbox().acceptEvent(k, { account: k, plan: "pro" });
      const other = await makeQueueBackend(backendName, 4); // a second worker with its own connections
      try {
        const handled = new Map<string, number>();
        const counting = async (event: InboxEvent, ctx: any) => {
          handled.set(event.key, (handled.get(event.key) ?? 0) + 1);
          await sleep(5);
          await ctx.complete((tx: any) => b.applyEntitlement(tx, outbox(), event));
        };
        const [first, second] = await Promise.all([inbox().process({ handle: counting }), createInbox({ db: other.db }).process({ handle: counting })]);
        expect(first.completed + second.completed).toBe(40);
        expect(first.completed).toBeGreaterThan(0);
        expect(second.completed).toBeGreaterThan(0);
        for (const k of keys) expect(handled.get(k), k).toBe(1);
        expect(await b.totalEntitlements()).toBe(40);
      } finally {
        await other.close();
      }
    });
  });

  // Prisma on MySQL runs the same store statements as mysql2 and Drizzle (only the client
  // differs, and the tests above cover it); its crash children would add half a minute.
  describe.runIf(backendName !== "prisma-mysql")("the six crash points of seed 2, each replayed with the business invariant checked", () => {
    const LEASE = 1200;

    it("1. killed before the inbox insert: nothing stored; the redelivery is accepted and processed once", async () => {
      const key = uniq("cp1");
      const child = spawnTs("test/fixtures/inbox-child.ts", ["accept", key, "before-insert", provider.url, String(LEASE), backendName]);
      expect((await child.exited).signal, child.output()).toBe("SIGKILL");
      expect(await inbox().get(key)).toBeUndefined();
      expect(await inbox().acceptEvent(key, { account: "acct_1", plan: "pro" })).toMatchObject({ status: "accepted" });
      await finishAndCheck(key);
    });

    it("2. killed after the insert, before the response: the redelivery is a duplicate (2xx) and the event runs once", async () => {
      const key = uniq("cp2");
      const child = spawnTs("test/fixtures/inbox-child.ts", ["accept", key, "after-insert", provider.url, String(LEASE), backendName]);
      expect((await child.exited).signal, child.output()).toBe("SIGKILL");
      expect(await inbox().get(key)).toMatchObject({ state: "pending" });
      const again = await inbox().acceptEvent(key, { account: "acct_1", plan: "pro" });
      expect(again).toMatchObject({ status: "duplicate" });
      expect(statusFor(again).status).toBe(200);
      await finishAndCheck(key);
    });

    it("3. worker killed after claiming, before the side effect: the event is claimed again after the lease, once", async () => {
      const key = uniq("cp3");
      await inbox().acceptEvent(key, { account: "acct_1", plan: "pro" });
      const child = spawnTs("test/fixtures/inbox-child.ts", ["work", key, "after-claim", provider.url, String(LEASE), backendName]);
      expect((await child.exited).signal, child.output()).toBe("SIGKILL");
      expect(await inbox().get(key)).toMatchObject({ state: "leased", attempts: 1 });
      expect(await inbox().process({ handle })).toMatchObject({ claimed: 0 }); // the dead worker's lease holds
      await sleep(LEASE + 200);
      await finishAndCheck(key);
      expect((await inbox().get(key))?.attempts).toBe(2);
    });

    it("4. worker killed after the side effect, before completion is recorded: resent with the same key, applied once", async () => {
      for (const point of ["after-remote-effect", "before-commit"]) {
        const key = uniq(`cp4-${point}`);
        await inbox().acceptEvent(key, { account: "acct_1", plan: "pro" });
        const child = spawnTs("test/fixtures/inbox-child.ts", ["work", key, point, provider.url, String(LEASE), backendName]);
        expect((await child.exited).signal, child.output()).toBe("SIGKILL");
        expect(provider.effects.get(`notify:${key}`)).toBe(1);
        expect(await entitlements(key)).toBe(0); // the killed transaction never committed
        await sleep(LEASE + 200);
        await finishAndCheck(key);
        expect(provider.calls.get(`notify:${key}`)).toBe(2); // called again, deduplicated by its key
      }
    });

    it("5. dispatcher killed during outbox dispatch, after the provider accepted: one receipt", async () => {
      const key = uniq("cp5");
      await inbox().acceptEvent(key, { account: "acct_1", plan: "pro" });
      await inbox().process({ handle });
      const child = spawnTs("test/fixtures/dispatch-child.ts", [provider.url, `receipt:${key}`, String(LEASE), backendName]);
      expect((await child.exited).signal, child.output()).toBe("SIGKILL");
      expect(await b.outboxState(`receipt:${key}`)).toBe("leased");
      await sleep(LEASE + 200);
      await finishAndCheck(key);
      expect(provider.calls.get(`receipt:${key}`)).toBe(2);
    });

    it("6. two workers race on the same event while it is redelivered: one entitlement, one receipt", async () => {
      const key = uniq("cp6");
      const other = await makeQueueBackend(backendName, 4);
      try {
        const accepted = await Promise.all(Array.from({ length: 8 }, (_, i) => createInbox({ db: i % 2 ? other.db : b.db }).acceptEvent(key, { account: "acct_1", plan: "pro" })));
        expect(accepted.filter((r) => r.status === "accepted")).toHaveLength(1);
        const [first, second] = await Promise.all([inbox().process({ handle }), createInbox({ db: other.db }).process({ handle })]);
        expect(first.claimed + second.claimed).toBe(1);
        await finishAndCheck(key);
      } finally {
        await other.close();
      }
    });
  });
});
