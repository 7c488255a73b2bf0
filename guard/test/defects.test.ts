// Regression tests for the defects an independent suite found in 0.1 (issue #11), each
// against the real servers. Every test here failed on 0.1.
import net from "node:net";
import pg from "pg";
import IORedis from "ioredis";
import { createClient as createRedis6 } from "redis";
import { createClient as createRedis4 } from "redis4";
import { createClient as createRedis5 } from "redis5";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOutbox, GuardCommitError, GuardKeyError, GuardTimeoutError, redisGuard, MAX_KEY_BYTES } from "../src/index.ts";
import { DATABASE_URL, ensureSchema, REDIS_URL, sleep, uniq } from "./helpers.ts";
import { DB_KINDS, makeSubject, MYSQL_KINDS, REDIS_KINDS, type Kind, type Subject } from "./subjects.ts";
import { makeSend, startFakeProvider } from "./fake-provider.ts";

beforeAll(async () => {
  await ensureSchema();
});

describe("defect 1: a transaction aborted by a swallowed error is never reported as processed", () => {
  for (const kind of DB_KINDS) {
    it(`${kind}: the callback catches a unique violation; run() rejects with GuardCommitError and nothing is claimed`, async () => {
      const s = await makeSubject(kind);
      try {
        const key = uniq(`aborted-${kind}`);
        const taken = uniq("taken");
        const direct = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
        await direct.query("INSERT INTO unique_things (id) VALUES ($1)", [taken]);
        await direct.end();
        const attempt = s.guard.run(key, async (tx) => {
          await s.write(tx, key);
          try {
            await s.exec!(tx, `INSERT INTO unique_things (id) VALUES ('${taken}')`); // the "idempotent insert"
          } catch {
            /* swallowed, as user code often does */
          }
          return "looks fine";
        });
        await expect(attempt).rejects.toBeInstanceOf(GuardCommitError);
        await expect(attempt).rejects.toThrow(key);
        expect(await s.claimed(key)).toBe(false);
        expect(await s.effects(key)).toBe(0);
        // the provider's retry processes the event for real
        expect(await s.guard.run(key, async (tx) => (await s.write(tx, key), "retried"))).toEqual({ status: "processed", result: "retried" });
        expect(await s.effects(key)).toBe(1);
        expect(await s.claimed(key)).toBe(true);
      } finally {
        await s.close();
      }
    });
  }
});

describe("defect 1 on MySQL / MariaDB", () => {
  for (const kind of MYSQL_KINDS) {
    it(`${kind}: a swallowed duplicate-key error does not abort an InnoDB transaction: processed is true and the work committed`, async () => {
      const s = await makeSubject(kind);
      try {
        const key = uniq("mysql-swallow");
        const taken = uniq("taken");
        await s.guard.run(uniq("setup"), async (tx) => s.exec!(tx, `INSERT INTO unique_things (id) VALUES ('${taken}')`));
        const r = await s.guard.run(key, async (tx) => {
          await s.write(tx, key);
          await s.exec!(tx, `INSERT INTO unique_things (id) VALUES ('${taken}')`).catch(() => {});
          return "ok";
        });
        expect(r).toEqual({ status: "processed", result: "ok" });
        expect(await s.claimed(key)).toBe(true);
        expect(await s.effects(key)).toBe(1);
      } finally {
        await s.close();
      }
    });

    it(`${kind}: a callback that ends the transaction itself (ROLLBACK) is a GuardCommitError, and nothing is claimed`, async () => {
      const s = await makeSubject(kind);
      try {
        const key = uniq("mysql-rollback");
        const attempt = s.guard.run(key, async (tx) => {
          await s.write(tx, key);
          await s.exec!(tx, "ROLLBACK");
        });
        await expect(attempt).rejects.toBeInstanceOf(GuardCommitError);
        await expect(attempt).rejects.toThrow(/claim is gone/);
        expect(await s.claimed(key)).toBe(false);
        expect(await s.effects(key)).toBe(0);
      } finally {
        await s.close();
      }
    });

    it(`${kind}: keys differing only in case or trailing spaces stay distinct (VARBINARY keys)`, async () => {
      const s = await makeSubject(kind);
      try {
        const base = uniq("Case");
        for (const k of [base, base.toLowerCase(), `${base} `]) expect(await s.guard.run(k, async () => k)).toMatchObject({ status: "processed" });
        expect(await s.guard.run(base, async () => 1)).toEqual({ status: "duplicate" });
      } finally {
        await s.close();
      }
    });
  }
});

describe("defect 2: REPEATABLE READ and SERIALIZABLE give duplicate, not 40001, to concurrent claimers", () => {
  for (const kind of [...DB_KINDS, ...MYSQL_KINDS]) {
    for (const level of ["repeatable read", "serializable"] as const) {
      it(`${kind}, ${level}: 32 concurrent calls on one key give 1 processed and 31 duplicate`, async () => {
        const s = await makeSubject(kind);
        try {
          const g = s.withIsolation!(level);
          const key = uniq(`iso-${kind}`);
          let calls = 0;
          const results = await Promise.allSettled(
            Array.from({ length: 32 }, () =>
              g.run(key, async (tx) => {
                calls++;
                await s.write(tx, key);
                await sleep(100);
                return "ok";
              }),
            ),
          );
          const rejected = results.filter((r) => r.status === "rejected").map((r) => String((r as PromiseRejectedResult).reason));
          expect(rejected).toEqual([]);
          const statuses = results.map((r) => (r as PromiseFulfilledResult<any>).value.status);
          expect(statuses.filter((st) => st === "processed")).toHaveLength(1);
          expect(statuses.filter((st) => st === "duplicate")).toHaveLength(31);
          expect(calls).toBe(1);
          expect(await s.effects(key)).toBe(1);
        } finally {
          await s.close();
        }
      });
    }
  }
});

describe("defect 3: a lease that expired with no takeover still records completion", () => {
  for (const kind of REDIS_KINDS) {
    it(`${kind}: renew off, 300 ms lease, 700 ms callback: processed, then duplicate`, async () => {
      const s = await makeSubject(kind);
      try {
        const lost: string[] = [];
        const g = s.withOptions({ leaseSeconds: 0.3, renew: false, onLeaseLost: (k: string) => lost.push(k) });
        const key = uniq(`late-${kind}`);
        const r = await g.run(key, async (tx) => {
          await s.write(tx, key);
          await sleep(700);
          return "late";
        });
        expect(r).toEqual({ status: "processed", result: "late" });
        expect(lost).toEqual([]);
        expect(await s.redisRaw!.get(`retrysafe:${key}`)).toMatch(/^done:/);
        expect(await g.run(key, async (tx) => s.write(tx, key))).toEqual({ status: "duplicate" });
        expect(await s.effects(key)).toBe(1);
      } finally {
        await s.close();
      }
    });

    it(`${kind}: renewal on, the event loop blocked for longer than the lease: processed, then duplicate`, async () => {
      const s = await makeSubject(kind);
      try {
        const g = s.withOptions({ leaseSeconds: 0.3 });
        const key = uniq(`blocked-${kind}`);
        const r = await g.run(key, async (tx) => {
          await s.write(tx, key);
          const until = Date.now() + 700;
          while (Date.now() < until) {
            /* a synchronous CPU burst: no timer can renew the lease */
          }
          await sleep(150); // let a late renewal tick run
          return "blocked";
        });
        expect(r).toEqual({ status: "processed", result: "blocked" });
        expect(await s.redisRaw!.get(`retrysafe:${key}`)).toMatch(/^done:/);
        expect(await g.run(key, async (tx) => s.write(tx, key))).toEqual({ status: "duplicate" });
        expect(await s.effects(key)).toBe(1);
      } finally {
        await s.close();
      }
    });
  }
});

describe("defect 4: outbox rows late in a batch are not sent twice when the batch outlives the lease", () => {
  it("10 rows, leaseMs 600, 150 ms per send, a second dispatcher arriving later: each row sent once, attempts 1, stats exact", async () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 6 });
    const provider = await startFakeProvider();
    try {
      const table = "late_batch_outbox";
      await pool.query(`DROP TABLE IF EXISTS ${table}`);
      await pool.query(`CREATE TABLE ${table} (LIKE retrysafe_outbox INCLUDING ALL)`);
      const ob = createOutbox({ db: pool, table });
      const keys = Array.from({ length: 10 }, (_, i) => uniq(`late${i}`));
      for (const key of keys) await ob.enqueue(pool, { kind: "send_receipt", key, payload: {} });
      const fast = makeSend(provider.url);
      const send = async (row: any, ctx: any) => {
        await sleep(150);
        return fast(row, ctx);
      };
      const first = ob.dispatch({ send, leaseMs: 600, batchSize: 10 });
      await sleep(700);
      const second = ob.dispatch({ send, leaseMs: 600, batchSize: 10 });
      const [a, b] = await Promise.all([first, second]);
      for (const k of keys) expect(provider.calls.get(k), k).toBe(1);
      expect(a.completed + b.completed).toBe(10);
      const rows = (await pool.query(`SELECT state, attempts FROM ${table}`)).rows;
      expect(rows.map((r) => `${r.state}/${r.attempts}`)).toEqual(Array(10).fill("completed/1"));
      await pool.query(`DROP TABLE ${table}`);
    } finally {
      await provider.close();
      await pool.end();
    }
  });
});

describe("defects 5 and 6: keys a store cannot keep, or keys that collide, are refused by name", () => {
  const bad: [string, string, RegExp][] = [
    ["over the length limit", "k:" + Buffer.from(Array.from({ length: 2400 }, (_, i) => (i * 7919) % 251)).toString("base64"), /over the 512-byte limit/],
    ["U+0000", "stripe:evt_\u0000x", /U\+0000/],
    ["a lone high surrogate", "x-\uD800", /lone surrogate/],
    ["a lone low surrogate", "x-\uDC00y", /lone surrogate/],
    ["whitespace only", " \t ", /whitespace only/],
  ];
  for (const kind of [...DB_KINDS, ...MYSQL_KINDS, "ioredis"] as Kind[]) {
    it(`${kind}: refuses keys with a GuardKeyError before touching the store; accepts a ${MAX_KEY_BYTES}-byte key and surrogate pairs`, async () => {
      const s: Subject = await makeSubject(kind);
      try {
        for (const [what, key, reason] of bad) {
          let ran = false;
          const attempt = s.guard.run(key, async () => {
            ran = true;
          });
          await expect(attempt, what).rejects.toBeInstanceOf(GuardKeyError);
          await expect(attempt, what).rejects.toThrow(reason);
          expect(ran).toBe(false);
        }
        const head = uniq("max") + "-";
        const wide = "é".repeat(Math.floor((MAX_KEY_BYTES - head.length) / 2)); // 2 bytes each
        const exact = head + wide + "x".repeat(MAX_KEY_BYTES - Buffer.byteLength(head + wide));
        expect(Buffer.byteLength(exact)).toBe(MAX_KEY_BYTES);
        expect(await s.guard.run(exact, async () => 1)).toEqual({ status: "processed", result: 1 });
        expect(await s.guard.run(exact, async () => 1)).toEqual({ status: "duplicate" });
        const base = uniq("emoji");
        expect(await s.guard.run(`${base}-\u{1F600}`, async () => 1)).toMatchObject({ status: "processed" });
        expect(await s.guard.run(`${base}-\u{1F601}`, async () => 2)).toMatchObject({ status: "processed" });
      } finally {
        await s.close();
      }
    });
  }
  it("the outbox refuses the same keys when enqueuing", async () => {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
    try {
      for (const [what, key] of bad) {
        await expect(createOutbox().enqueue(pool, { kind: "k", key }), what).rejects.toBeInstanceOf(GuardKeyError);
      }
    } finally {
      await pool.end();
    }
  });
});

/** A TCP proxy in front of the real Redis that can be cut to simulate an outage. */
async function startCuttableProxy(target: URL) {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port), target.hostname);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const drop = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    /** Stop accepting and drop every connection: the client sees Redis go away. */
    cut: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

describe("defect 7: a Redis outage makes run() reject with GuardTimeoutError, with default client options", () => {
  const clients: [string, (url: string) => Promise<{ client: any; drop: () => Promise<void> }>][] = [
    ["ioredis", async (url) => {
      const client = new IORedis(url);
      client.on("error", () => {});
      await client.ping();
      return { client, drop: async () => client.disconnect() };
    }],
    ...([["node-redis-v6", createRedis6], ["node-redis-v5", createRedis5], ["node-redis-v4", createRedis4]] as const).map(
      ([name, create]) =>
        [name, async (url: string) => {
          const client: any = (create as any)({ url });
          client.on("error", () => {});
          await client.connect();
          return { client, drop: async () => void (await Promise.resolve(client.destroy ? client.destroy() : client.disconnect()).catch(() => {})) };
        }] as [string, (url: string) => Promise<{ client: any; drop: () => Promise<void> }>],
    ),
  ];
  for (const [name, connect] of clients) {
    it(`${name}: rejects within the command timeout, naming the key`, async () => {
      const proxy = await startCuttableProxy(new URL(REDIS_URL));
      const { client, drop } = await connect(proxy.url);
      try {
        const g = redisGuard(client, { commandTimeoutMs: 800 });
        expect(await g.run(uniq("up"), async () => 1)).toMatchObject({ status: "processed" });
        await proxy.cut();
        await sleep(300); // the client has noticed and is reconnecting
        const key = uniq(`outage-${name}`);
        const started = Date.now();
        let ran = false;
        const err = await g.run(key, async () => {
          ran = true;
        }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(GuardTimeoutError);
        expect(String((err as Error).message)).toContain(key);
        expect((err as Error).message.length).toBeGreaterThan(20);
        expect(Date.now() - started).toBeLessThan(5000);
        expect(ran).toBe(false);
      } finally {
        await drop();
      }
    });
  }
});
