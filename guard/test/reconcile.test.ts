// Ambiguous outcomes by policy (idempotent | reconcilable | manual) and reconcile(),
// against real PostgreSQL and MariaDB (mysql2, Drizzle and Prisma on MySQL).
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { createInbox, createOutbox, formatReconcileReport, reconcile, type OutboxRow } from "../src/index.ts";
import { ensureSchema, uniq } from "./helpers.ts";
import { makeQueueBackend, QUEUE_BACKENDS, rawAccess, type QueueBackend } from "./backends.ts";

for (const backendName of QUEUE_BACKENDS) describe(`on ${backendName}`, () => {
  let b: QueueBackend;
  let pool: object; // the backend's client: what the outbox, the inbox and reconcile() get
  beforeAll(async () => {
    await ensureSchema();
    b = await makeQueueBackend(backendName, 4);
    pool = b.db;
  });
  afterAll(async () => {
    await b?.close();
  });
  beforeEach(async () => {
    await b.reset();
  });

  const sql = (pgSql: string, mysqlSql: string, params: unknown[]) => rawAccess(b).query(pgSql, mysqlSql, params);
  const stateOf = async (key: string) => {
    const r = await rawAccess(b).outboxRow(key);
    if (!r) throw new Error(`no outbox row ${key}`);
    return { state: r.state, attempts: r.attempts, last_error: r.last_error };
  };
  /** As if a dispatcher started sending `key` and died: leased, lease expired, outcome never recorded. */
  async function diedMidSend(key: string) {
    await sql(
      `UPDATE retrysafe_outbox SET state = 'leased', attempts = 1, lease_token = 'dead', lease_until = now() - interval '1 second',
         last_error = 'in flight: attempt 1' WHERE key = $1`,
      "UPDATE retrysafe_outbox SET state = 'leased', attempts = 1, lease_token = 'dead', lease_until = NOW(6) - INTERVAL 1 SECOND, last_error = 'in flight: attempt 1' WHERE `key` = ?",
      [key],
    );
  }

  describe("ambiguous outcomes follow the kind's policy", () => {
    it("manual: a lost response or a dispatcher that died mid-send parks the row in manual_review, never resent", async () => {
      const ob = createOutbox({ db: pool });
      const lost = uniq("sms-lost");
      const dead = uniq("sms-dead");
      await ob.enqueue(pool, { kind: "send_sms", key: lost });
      await ob.enqueue(pool, { kind: "send_sms", key: dead });
      await diedMidSend(dead);
      const sent: string[] = [];
      const stats = await ob.dispatch({
        policies: { send_sms: "manual" },
        send: async (row) => {
          sent.push(row.key);
          throw new Error("socket hang up after the request was written"); // ambiguous
        },
      });
      expect(stats).toEqual({ leased: 2, completed: 0, retried: 0, failed: 0, lost: 0, manual: 2 });
      expect(sent).toEqual([lost]); // the dead dispatcher's row was not sent again
      expect(await stateOf(lost)).toMatchObject({ state: "manual_review", attempts: 1 });
      expect((await stateOf(lost)).last_error).toMatch(/manual_review: ambiguous: Error: socket hang up/);
      expect((await stateOf(dead)).last_error).toMatch(/manual_review: ambiguous: the dispatcher of attempt 1 died/);
      expect(await ob.dispatch({ send: async () => {} })).toMatchObject({ leased: 0 }); // stays parked
    });

    it("reconcilable: checkRemote decides: done -> completed, not-done -> resent, unknown -> manual_review", async () => {
      const ob = createOutbox({ db: pool });
      const keys = { done: uniq("refund-done"), notDone: uniq("refund-notdone"), unknown: uniq("refund-unknown") };
      for (const key of Object.values(keys)) {
        await ob.enqueue(pool, { kind: "refund", key });
        await diedMidSend(key);
      }
      const asked: string[] = [];
      const sent: string[] = [];
      const stats = await ob.dispatch({
        policies: { refund: "reconcilable" },
        checkRemote: (row: OutboxRow) => {
          asked.push(row.key);
          return row.key === keys.done ? "done" : row.key === keys.notDone ? "not-done" : "unknown";
        },
        send: async (row) => void sent.push(row.key),
      });
      expect(asked.sort()).toEqual(Object.values(keys).sort());
      expect(sent).toEqual([keys.notDone]);
      expect(stats).toMatchObject({ completed: 2, manual: 1 });
      expect((await stateOf(keys.done)).state).toBe("completed");
      expect((await stateOf(keys.notDone)).state).toBe("completed");
      expect((await stateOf(keys.unknown)).state).toBe("manual_review");
    });

    it("idempotent (the default): resent with the same key", async () => {
      const ob = createOutbox({ db: pool });
      const key = uniq("email");
      await ob.enqueue(pool, { kind: "send_email", key });
      await diedMidSend(key);
      const keysSent: string[] = [];
      expect(await ob.dispatch({ send: async (_row, ctx) => void keysSent.push(ctx.idempotencyKey) })).toMatchObject({ completed: 1, manual: 0 });
      expect(keysSent).toEqual([key]);
    });

    it("a reconcilable policy without checkRemote is refused up front", async () => {
      await expect(createOutbox({ db: pool }).dispatch({ policies: { refund: "reconcilable" }, send: async () => {} })).rejects.toThrow(/checkRemote/);
    });
  });

  describe("reconcile()", () => {
    it("lists stuck inbox events, failed and manual-review rows, and turns check findings into repairs or alerts", async () => {
      const inbox = createInbox({ db: pool });
      const outbox = createOutbox({ db: pool });
      const stuck = uniq("evt-stuck");
      const fresh = uniq("evt-fresh");
      await inbox.acceptEvent(stuck, { n: 1 });
      await inbox.acceptEvent(fresh, { n: 2 });
      await sql(
        "UPDATE retrysafe_inbox SET state = 'leased', attempts = 3, lease_until = now() - interval '10 minutes' WHERE key = $1",
        "UPDATE retrysafe_inbox SET state = 'leased', attempts = 3, lease_until = NOW(6) - INTERVAL 10 MINUTE WHERE `key` = ?",
        [stuck],
      );
      await sql(
        "UPDATE retrysafe_inbox SET state = 'leased', attempts = 1, lease_until = now() + interval '10 minutes' WHERE key = $1",
        "UPDATE retrysafe_inbox SET state = 'leased', attempts = 1, lease_until = NOW(6) + INTERVAL 10 MINUTE WHERE `key` = ?",
        [fresh],
      );
      const parked = uniq("sms");
      await outbox.enqueue(pool, { kind: "send_sms", key: parked });
      await sql(
        "UPDATE retrysafe_outbox SET state = 'manual_review', attempts = 1, last_error = 'manual_review: ambiguous' WHERE key = $1",
        "UPDATE retrysafe_outbox SET state = 'manual_review', attempts = 1, last_error = 'manual_review: ambiguous' WHERE `key` = ?",
        [parked],
      );

      const local = new Map([["acct_1", "pro"], ["acct_2", "pro"], ["acct_3", "free"]]);
      const provider = new Map([["acct_1", "pro"], ["acct_2", "cancelled"], ["acct_3", "pro"]]);
      const checks = [
        {
          name: "entitlements",
          run: () =>
            [...local].flatMap(([account, plan]) => {
              const remote = provider.get(account);
              if (remote === plan) return [];
              if (remote === "cancelled") return [{ subject: `account ${account}`, detail: `local ${plan}, provider ${remote}`, repair: { kind: "revoke_plan", key: `revoke:${account}`, payload: { account } } }];
              return [{ subject: `account ${account}`, detail: `local ${plan}, provider ${remote}` }];
            }),
        },
        { name: "broken", run: () => Promise.reject(new Error("provider API down")) },
      ];
      const report = await reconcile({ db: pool, inbox, outbox, checks });
      expect(report.stuckInbox.map((r) => r.key)).toEqual([stuck]);
      expect(report.stuckInbox[0]!.leaseExpiredForMs).toBeGreaterThan(9 * 60_000);
      expect(report.outbox).toEqual([{ key: parked, kind: "send_sms", state: "manual_review", attempts: 1, lastError: "manual_review: ambiguous" }]);
      expect(report.discrepancies.map((d) => [d.subject, d.action])).toEqual([
        ["account acct_2", "repair-queued"],
        ["account acct_3", "alert"],
        ["(check)", "alert"],
      ]);
      expect(report.repairsQueued).toBe(1);
      expect(report.ok).toBe(false);
      expect((await stateOf("revoke:acct_2")).state).toBe("pending"); // the repair is an ordinary outbox row
      const text = formatReconcileReport(report);
      expect(text).toContain(`inbox  stuck    ${stuck}`);
      expect(text).toMatch(/acct_3: local free, provider pro -> ALERT/);
      expect(text.split("\n").at(-1)).toMatch(/^reconcile: attention needed: 1 stuck, 0 failed, 1 for review, 3 discrepancies \(1 repairs queued, 4 alerts\)$/);
      expect(JSON.parse(JSON.stringify(report))).toEqual(report);

      // a second pass does not queue the same repair twice
      const again = await reconcile({ db: pool, outbox, checks: [checks[0]!] });
      expect(again.discrepancies[0]).toMatchObject({ action: "repair-already-queued", repairKey: "revoke:acct_2" });
      expect(again.repairsQueued).toBe(0);
    });

    it("reports ok when nothing is wrong", async () => {
      const report = await reconcile({ db: pool, inbox: createInbox({ db: pool }), outbox: createOutbox({ db: pool }), checks: [{ name: "none", run: () => [] }] });
      expect(report).toMatchObject({ ok: true, alerts: 0, repairsQueued: 0 });
      expect(formatReconcileReport(report)).toMatch(/^reconcile: ok: 0 stuck/);
    });
  });
});

describe("reconcile() across dialects", () => {
  it("refuses an inbox or outbox made for another database, by name", async () => {
    const pg = await makeQueueBackend("pg", 1);
    const my = await makeQueueBackend("mysql", 1);
    try {
      await expect(reconcile({ db: pg.db, inbox: createInbox({ db: my.db }) })).rejects.toThrow(/reconcile\(\) on postgresql got an inbox made for mysql/);
      await expect(reconcile({ db: my.db, outbox: createOutbox({ db: pg.db }) })).rejects.toThrow(/reconcile\(\) on mysql got an outbox made for postgresql/);
    } finally {
      await pg.close();
      await my.close();
    }
  });
});
