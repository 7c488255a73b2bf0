// `npm run reconcile [-- --json]`: one pass of the repair loop; exits 1 when attention is needed.
import pg from "pg";
import { formatReconcileReport, reconcile } from "@retrysafe/guard";
import { createApp, entitlementCheck } from "./app";

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const app = createApp(pool, "", process.env.EMAIL_API_URL ?? "http://127.0.0.1:4010");
const billingUrl = process.env.BILLING_API_URL ?? "http://127.0.0.1:4011";

const billingPlanOf = async (account: string): Promise<string> => {
  const r = await fetch(`${billingUrl}/accounts/${encodeURIComponent(account)}/plan`);
  if (!r.ok) throw new Error(`billing API answered ${r.status}`);
  return ((await r.json()) as { plan: string }).plan;
};

const report = await reconcile({ db: pool, inbox: app.inbox, outbox: app.outbox, checks: [entitlementCheck(app, billingPlanOf)] });
console.log(process.argv.includes("--json") ? JSON.stringify(report, null, 2) : formatReconcileReport(report));
await pool.end();
process.exitCode = report.ok ? 0 : 1;
