// One contract, run against every guard with real PostgreSQL and Redis servers.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GuardMismatchError, statusFor } from "../src/index.ts";
import { ensureSchema, sleep, spawnTs, uniq } from "./helpers.ts";
import { DB_KINDS, isDbKind, makeSubject, MYSQL_KINDS, REDIS_KINDS, type Kind, type Subject } from "./subjects.ts";

const LEASE_S = 0.5; // lease guards in these tests: 500 ms leases

const KINDS: Kind[] = [...DB_KINDS, ...MYSQL_KINDS, ...REDIS_KINDS];

beforeAll(async () => {
  await ensureSchema();
});

for (const kind of KINDS) {
  describe(`guard contract: ${kind}`, () => {
    let s: Subject;
    beforeAll(async () => {
      s = await makeSubject(kind, { leaseSeconds: LEASE_S });
    });
    afterAll(async () => {
      await s?.close();
    });

    it("32 concurrent run() with one key: exactly one processed, the write applied once", async () => {
      const key = uniq(`conc-${kind}`);
      let calls = 0;
      const results = await Promise.all(
        Array.from({ length: 32 }, () =>
          s.guard.run(key, async (tx) => {
            calls++;
            await s.write(tx, key);
            await sleep(100); // hold the claim while the others arrive
            return "ok";
          }),
        ),
      );
      const processed = results.filter((r) => r.status === "processed");
      expect(processed).toHaveLength(1);
      expect(processed[0]).toMatchObject({ status: "processed", result: "ok" });
      expect(calls).toBe(1);
      const others = results.filter((r) => r.status !== "processed").map((r) => r.status);
      expect(others).toHaveLength(31);
      if (s.lease) {
        for (const st of others) expect(["in-progress", "duplicate"]).toContain(st);
      } else {
        // database claimers block on the primary key, then see the committed claim
        for (const st of others) expect(st).toBe("duplicate");
      }
      expect(await s.effects(key)).toBe(1);
      expect(await s.claimed(key)).toBe(true);
    });

    it("a retry after success is a duplicate and does not run the callback", async () => {
      const key = uniq(`retry-${kind}`);
      const first = await s.guard.run(key, async (tx) => {
        await s.write(tx, key);
        return 42;
      });
      expect(first).toEqual({ status: "processed", result: 42 });
      let ran = false;
      const second = await s.guard.run(key, async () => {
        ran = true;
      });
      expect(second).toEqual({ status: "duplicate" });
      expect(ran).toBe(false);
      expect(await s.effects(key)).toBe(1);
    });

    it("a callback that throws: the error propagates, nothing is claimed, the next attempt processes", async () => {
      const key = uniq(`throw-${kind}`);
      const boom = new Error("boom");
      await expect(
        s.guard.run(key, async (tx) => {
          await s.write(tx, key);
          throw boom;
        }),
      ).rejects.toBe(boom);
      expect(await s.claimed(key)).toBe(false);
      // a database guard rolls the write back with the claim; a lease guard cannot
      expect(await s.effects(key)).toBe(s.lease ? 1 : 0);
      const next = await s.guard.run(key, async (tx) => {
        await s.write(tx, key);
        return "second";
      });
      expect(next).toEqual({ status: "processed", result: "second" });
      expect(await s.effects(key)).toBe(s.lease ? 2 : 1);
      expect(await s.guard.run(key, async () => "x")).toEqual({ status: "duplicate" });
    });

    it("a process killed with SIGKILL inside the callback: the next attempt processes exactly once", { timeout: 120_000 }, async () => {
      const key = uniq(`crash-${kind}`);
      const child = spawnTs("test/fixtures/crash-child.ts", [kind, key, String(LEASE_S)]);
      try {
        await child.waitFor("WROTE");
      } finally {
        child.proc.kill("SIGKILL");
      }
      const { signal } = await child.exited;
      expect(signal).toBe("SIGKILL");
      const killedAt = Date.now();

      if (!s.lease) {
        // the write was in the killed transaction: nothing committed
        expect(await s.effects(key)).toBe(0);
        expect(await s.claimed(key)).toBe(false);
        const next = await s.guard.run(key, async (tx) => {
          await s.write(tx, key);
          return "after-crash";
        });
        expect(next).toEqual({ status: "processed", result: "after-crash" });
        expect(await s.effects(key)).toBe(1);
      } else {
        // the effect happened once in the child; its lease blocks retries until it expires
        expect(await s.effects(key)).toBe(1);
        let ran = false;
        const during = await s.guard.run(key, async () => {
          ran = true;
        });
        if (Date.now() - killedAt < LEASE_S * 1000 - 50) {
          expect(during).toEqual({ status: "in-progress" });
          expect(ran).toBe(false);
        }
        await sleep(LEASE_S * 1000 + 300);
        expect(await s.claimed(key)).toBe(false); // the lease expired: the key is free
        const next = await s.guard.run(key, async (tx) => {
          await s.write(tx, key);
          return "after-crash";
        });
        expect(next).toEqual({ status: "processed", result: "after-crash" });
        expect(await s.effects(key)).toBe(2); // once in the killed attempt, once after
      }
      expect(await s.guard.run(key, async () => "again")).toEqual({ status: "duplicate" });
    });

    it("payload fingerprint: the same key with another payload is a mismatch (or a GuardMismatchError), never a duplicate", async () => {
      const key = uniq(`fp-${kind}`);
      const payload = { id: "evt_1", amount: 100, lines: [{ sku: "a", qty: 1 }] };
      const first = await s.guard.run(key, async (tx) => {
        await s.write(tx, key);
        return "first";
      }, { payload });
      expect(first).toEqual({ status: "processed", result: "first" });
      let ran = 0;
      const again = () => void ran++;
      // the provider re-serialised the same event (other key order): a redelivery
      expect(await s.guard.run(key, again, { payload: { lines: [{ qty: 1, sku: "a" }], amount: 100, id: "evt_1" } })).toEqual({ status: "duplicate" });
      const other = await s.guard.run(key, again, { payload: { ...payload, amount: 200 } });
      expect(other).toEqual({ status: "mismatch" });
      expect(statusFor(other).status).toBe(422);
      const thrown = await s.guard.run(key, again, { payload: "another body", onMismatch: "throw" }).catch((e: unknown) => e);
      expect(thrown).toBeInstanceOf(GuardMismatchError);
      expect((thrown as GuardMismatchError).key).toBe(key);
      // without a payload there is nothing to compare
      expect(await s.guard.run(key, again)).toEqual({ status: "duplicate" });
      expect(ran).toBe(0);
      expect(await s.effects(key)).toBe(1);
    });

    it("payload fingerprint: a key claimed without a payload stays a duplicate for any payload", async () => {
      const key = uniq(`fp-none-${kind}`);
      expect(await s.guard.run(key, async (tx) => s.write(tx, key))).toMatchObject({ status: "processed" });
      expect(await s.guard.run(key, async () => 1, { payload: { any: "thing" } })).toEqual({ status: "duplicate" });
      // a failed attempt leaves no fingerprint behind: the next payload claims afresh
      const key2 = uniq(`fp-fail-${kind}`);
      await expect(s.guard.run(key2, async () => Promise.reject(new Error("boom")), { payload: { v: 1 } })).rejects.toThrow("boom");
      expect(await s.guard.run(key2, async (tx) => s.write(tx, key2), { payload: { v: 2 } })).toMatchObject({ status: "processed" });
      expect(await s.guard.run(key2, async () => 1, { payload: { v: 1 } })).toEqual({ status: "mismatch" });
    });

    it("payload fingerprint under concurrency: 16 deliveries of payload A and 16 of B on one key: 1 processed, every other-payload call a mismatch", async () => {
      const key = uniq(`fp-conc-${kind}`);
      let calls = 0;
      const payloads = Array.from({ length: 32 }, (_, i) => ({ event: i % 2 === 0 ? "A" : "B" }));
      const results = await Promise.all(
        payloads.map((payload) =>
          s.guard.run(key, async (tx) => {
            calls++;
            await s.write(tx, key);
            await sleep(100);
            return payload.event;
          }, { payload }),
        ),
      );
      const processed = results.filter((r) => r.status === "processed") as { status: "processed"; result: string }[];
      expect(processed).toHaveLength(1);
      expect(calls).toBe(1);
      const winner = processed[0]!.result;
      results.forEach((r, i) => {
        if (r.status === "processed") return;
        if (payloads[i]!.event === winner) expect(s.lease ? ["in-progress", "duplicate"] : ["duplicate"]).toContain(r.status);
        else expect(r.status).toBe("mismatch");
      });
      expect(results.filter((r) => r.status === "mismatch")).toHaveLength(16);
      expect(await s.effects(key)).toBe(1);
    });

    it("rejects empty or undefined keys", async () => {
      await expect(s.guard.run("", async () => 1)).rejects.toThrow(/non-empty string/);
      await expect(s.guard.run(undefined as any, async () => 1)).rejects.toThrow(/non-empty string/);
    });

    if (isDbKind(kind)) {
      it("uses a configurable claim table", async () => {
        const key = uniq(`table-${kind}`);
        const g = s.withOptions({ table: "custom_claims" });
        expect(await g.run(key, async (tx) => s.write(tx, key))).toMatchObject({ status: "processed" });
        expect(await g.run(key, async () => 1)).toEqual({ status: "duplicate" });
        expect(await s.claimed(key)).toBe(false); // not in processed_events
        expect(() => s.withOptions({ table: "bad; drop table x" })).toThrow(/invalid table name/);
      });

      it("a 0.1 claim table (no fingerprint column) works without a payload; with one, the error names the migration", async () => {
        const key = uniq(`fp-old-${kind}`);
        const g = s.withOptions({ table: "custom_claims" });
        expect(await g.run(key, async (tx) => s.write(tx, key))).toMatchObject({ status: "processed" });
        expect(await g.run(key, async () => 1)).toEqual({ status: "duplicate" });
        await expect(g.run(uniq(`fp-old2-${kind}`), async () => 1, { payload: { a: 1 } })).rejects.toThrow(/needs a fingerprint column in .*custom_claims.*ALTER TABLE/);
      });

      it("a failed business write inside the callback rolls back the claim too", async () => {
        const key = uniq(`sqlerr-${kind}`);
        await expect(
          s.guard.run(key, async (tx) => {
            await s.write(tx, key);
            await s.write(tx, null as any); // NOT NULL violation
          }),
        ).rejects.toThrow();
        expect(await s.claimed(key)).toBe(false);
        expect(await s.effects(key)).toBe(0);
      });
    }

    if (REDIS_KINDS.includes(kind as any)) {
      it("renews the lease while a long callback runs", async () => {
        const key = uniq(`renew-${kind}`);
        const g = s.withOptions({ leaseSeconds: 0.3 });
        const long = g.run(key, async () => {
          await sleep(1200); // four leases long
          return "long";
        });
        await sleep(800);
        expect(await g.run(key, async () => "other")).toEqual({ status: "in-progress" });
        expect(await long).toEqual({ status: "processed", result: "long" });
        expect(await g.run(key, async () => "other")).toEqual({ status: "duplicate" });
      });

      it("stale-owner fencing: an expired owner cannot complete or release the new owner's lease", async () => {
        const raw = s.redisRaw!;
        const lost: string[] = [];
        const g = s.withOptions({ leaseSeconds: 0.3, renew: false, onLeaseLost: (k: string) => lost.push(k) });

        // A completes late
        const key = uniq(`fence-${kind}`);
        let releaseA!: () => void;
        const gateA = new Promise<void>((r) => (releaseA = r));
        const a = g.run(key, async () => {
          await gateA;
          return "A";
        });
        await sleep(700); // A's lease (300 ms) has expired
        let releaseB!: () => void;
        const gateB = new Promise<void>((r) => (releaseB = r));
        const bStarted = new Promise<void>((started) => {
          void g.run(key, async () => {
            started();
            await gateB;
            return "B";
          }).then((r) => bResult.push(r));
        });
        const bResult: any[] = [];
        await bStarted;
        const bLease = await raw.get(`retrysafe:${key}`);
        expect(bLease).toMatch(/^lease:/);
        releaseA();
        expect(await a).toEqual({ status: "processed", result: "A", leaseLost: true });
        expect(lost).toEqual([key]);
        expect(await raw.get(`retrysafe:${key}`)).toBe(bLease); // A did not mark B's lease done
        expect(await g.run(key, async () => "C")).toEqual({ status: "in-progress" });
        releaseB();
        while (bResult.length === 0) await sleep(10);
        expect(bResult[0]).toEqual({ status: "processed", result: "B" });
        expect(await g.run(key, async () => "D")).toEqual({ status: "duplicate" });

        // A fails late: its release must not delete B's lease
        const key2 = uniq(`fence2-${kind}`);
        let failA!: () => void;
        const gateA2 = new Promise<void>((r) => (failA = r));
        const a2 = g.run(key2, async () => {
          await gateA2;
          throw new Error("A failed late");
        });
        await sleep(700);
        let releaseB2!: () => void;
        const gateB2 = new Promise<void>((r) => (releaseB2 = r));
        let b2Started!: () => void;
        const b2s = new Promise<void>((r) => (b2Started = r));
        const b2 = g.run(key2, async () => {
          b2Started();
          await gateB2;
          return "B2";
        });
        await b2s;
        const b2Lease = await raw.get(`retrysafe:${key2}`);
        failA();
        await expect(a2).rejects.toThrow("A failed late");
        expect(await raw.get(`retrysafe:${key2}`)).toBe(b2Lease);
        expect(await g.run(key2, async () => "C2")).toEqual({ status: "in-progress" });
        releaseB2();
        expect(await b2).toEqual({ status: "processed", result: "B2" });
      });

      it("keeps the completed marker for TTLs above 2^31 ms (30 days)", async () => {
        const key = uniq(`ttl-${kind}`);
        const g = s.withOptions({ ttlSeconds: 30 * 24 * 60 * 60, leaseSeconds: 5 });
        expect(await g.run(key, async () => 1)).toEqual({ status: "processed", result: 1 });
        const pttl = await s.redisRaw!.pttl(`retrysafe:${key}`);
        expect(pttl).toBeGreaterThan(2 ** 31);
        expect(pttl).toBeLessThanOrEqual(30 * 24 * 60 * 60 * 1000);
        expect(await g.run(key, async () => 2)).toEqual({ status: "duplicate" });
      });

      it("default completed-marker TTL is 7 days", async () => {
        const key = uniq(`ttl7-${kind}`);
        expect(await s.guard.run(key, async () => 1)).toMatchObject({ status: "processed" });
        const pttl = await s.redisRaw!.pttl(`retrysafe:${key}`);
        expect(pttl).toBeGreaterThan(7 * 24 * 3600 * 1000 - 60_000);
        expect(pttl).toBeLessThanOrEqual(7 * 24 * 3600 * 1000);
      });
    }
  });
}
