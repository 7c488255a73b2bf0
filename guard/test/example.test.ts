// examples/inbox-outbox end to end against real PostgreSQL: signed deliveries (twice,
// concurrently, forged), the worker, the outbox dispatcher against a recording email API
// that loses one response, and a reconciliation repair.
import { createHmac } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { formatReconcileReport, reconcile } from "../src/index.ts";
import { createApp, entitlementCheck, handleEvent, receiveWebhook, sendEffect, type App } from "../../examples/inbox-outbox/src/app.ts";
import { DATABASE_URL, ensureSchema, uniq } from "./helpers.ts";
import { startFakeProvider, type FakeProvider } from "./fake-provider.ts";

const SECRET = "whsec_test_example";
let pool: pg.Pool;
let email: FakeProvider;
let app: App;

const sign = (body: string, t = Math.floor(Date.now() / 1000)) => `t=${t},v1=${createHmac("sha256", SECRET).update(`${t}.${body}`).digest("hex")}`;
const checkout = (account: string, plan: string) =>
  JSON.stringify({ id: uniq("evt"), type: "checkout.session.completed", data: { object: { metadata: { account, plan } } } });
// a failed event backs off for 30 s (random 0.5 of a 60 s ceiling): the test makes it due by hand
const work = () => app.inbox.process({ handle: (event, ctx) => handleEvent(app, event, ctx), leaseMs: 5000, baseDelayMs: 60_000, random: () => 0.5 });
const dispatch = () => app.outbox.dispatch({ send: (row, ctx) => sendEffect(app, row, ctx), random: () => 0, policies: { set_plan: "manual" } });
const planOf = async (account: string) => (await pool.query("SELECT plan FROM accounts WHERE id = $1", [account])).rows[0]?.plan;

beforeAll(async () => {
  await ensureSchema();
  pool = new pg.Pool({ connectionString: DATABASE_URL, max: 8 });
  await pool.query("CREATE TABLE IF NOT EXISTS accounts (id text PRIMARY KEY, plan text NOT NULL DEFAULT 'free', updated_by text)");
  await pool.query("TRUNCATE retrysafe_inbox, retrysafe_outbox, accounts");
  email = await startFakeProvider();
  app = createApp(pool, SECRET, email.url);
});
afterAll(async () => {
  await email?.close();
  await pool?.end();
});

describe("examples/inbox-outbox", () => {
  it("a delivery sent 5 times at once and once more later: 200 every time, one plan change, one receipt", async () => {
    const body = checkout("acct_a", "pro");
    const answers = await Promise.all(Array.from({ length: 5 }, () => receiveWebhook(app, body, sign(body))));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200]);
    expect(answers.filter((a) => a.body === "accepted")).toHaveLength(1);
    expect(await work()).toMatchObject({ claimed: 1, completed: 1 });
    expect((await receiveWebhook(app, body, sign(body))).body).toBe("duplicate");
    expect(await work()).toMatchObject({ claimed: 0 });
    expect(await dispatch()).toMatchObject({ completed: 1 });
    expect(await planOf("acct_a")).toBe("pro");
    const key = `receipt:${JSON.parse(body).id}`;
    expect(email.effects.get(key)).toBe(1);
  });

  it("a forged or stale signature is a 400 and stores nothing; a reused event id with another body is a 422", async () => {
    const body = checkout("acct_b", "pro");
    expect((await receiveWebhook(app, body, sign(body).replace(/v1=(.)/, (_, c: string) => `v1=${c === "0" ? "1" : "0"}`))).status).toBe(400);
    expect((await receiveWebhook(app, body, sign(body, Math.floor(Date.now() / 1000) - 3600))).status).toBe(400);
    expect(await app.inbox.get(`stripe:${JSON.parse(body).id}`)).toBeUndefined();
    expect((await receiveWebhook(app, body, sign(body))).status).toBe(200);
    const tampered = body.replace('"pro"', '"enterprise"');
    expect((await receiveWebhook(app, tampered, sign(tampered))).status).toBe(422);
    await work();
    expect(await planOf("acct_b")).toBe("pro");
  });

  it("a transaction that fails half-way leaves no plan change and no receipt; the retry does both once", async () => {
    const body = checkout("acct_c", "team");
    await receiveWebhook(app, body, sign(body));
    await pool.query("ALTER TABLE accounts ADD CONSTRAINT no_team_yet CHECK (plan <> 'team')");
    try {
      expect(await work()).toMatchObject({ claimed: 1, retried: 1 });
    } finally {
      await pool.query("ALTER TABLE accounts DROP CONSTRAINT no_team_yet");
    }
    expect(await planOf("acct_c")).toBeUndefined();
    const receipt = `receipt:${JSON.parse(body).id}`;
    expect((await pool.query("SELECT count(*)::int AS n FROM retrysafe_outbox WHERE key = $1", [receipt])).rows[0].n).toBe(0);
    expect((await app.inbox.get(`stripe:${JSON.parse(body).id}`))?.last_error).toMatch(/no_team_yet/);
    await pool.query("UPDATE retrysafe_inbox SET available_at = now()");
    expect(await work()).toMatchObject({ claimed: 1, completed: 1 });
    expect(await planOf("acct_c")).toBe("team");
    await dispatch();
    expect(email.effects.get(receipt)).toBe(1);
  });

  it("the email API loses a response: resent with the same key, one email", async () => {
    const body = checkout("acct_d", "pro");
    await receiveWebhook(app, body, sign(body));
    await work();
    const key = `receipt:${JSON.parse(body).id}`;
    email.script(key, "apply-then-drop");
    expect(await dispatch()).toEqual({ leased: 2, completed: 1, retried: 1, failed: 0, lost: 0, manual: 0 });
    expect(email.calls.get(key)).toBe(2);
    expect(email.effects.get(key)).toBe(1);
  });

  it("reconcile() finds a plan the billing provider no longer bills and queues one repair", async () => {
    const billing = new Map([["acct_a", "pro"], ["acct_b", "pro"], ["acct_c", "free"], ["acct_d", "pro"]]);
    const check = entitlementCheck(app, async (account) => billing.get(account) ?? "free");
    const report = await reconcile({ db: pool, inbox: app.inbox, outbox: app.outbox, checks: [check] });
    expect(report.discrepancies).toEqual([
      { check: "entitlements", subject: "account acct_c", detail: "local plan team, billing provider free", action: "repair-queued", repairKey: "set_plan:acct_c:free" },
    ]);
    expect(formatReconcileReport(report)).toContain("repair queued (set_plan:acct_c:free)");
    const again = await reconcile({ db: pool, outbox: app.outbox, checks: [check] });
    expect(again.repairsQueued).toBe(0);
  });
});
