// The whole pipeline, without a web framework:
//   receiveWebhook  verify the signature, store the event durably, answer at once;
//   handleEvent     the inbox worker: grant the plan, queue the receipt, complete — one transaction;
//   sendEffect      the outbox dispatcher: send with the row's stable idempotency key;
//   entitlementCheck  reconciliation: local plans against the billing provider's view.
import { createHmac, timingSafeEqual } from "node:crypto";
import type pg from "pg";
import {
  createInbox,
  createOutbox,
  eventKey,
  statusFor,
  type ConsistencyCheck,
  type HttpAnswer,
  type InboxContext,
  type InboxEvent,
  type OutboxRow,
} from "@retrysafe/guard";

export interface App {
  pool: pg.Pool;
  inbox: ReturnType<typeof createInbox>;
  outbox: ReturnType<typeof createOutbox>;
  webhookSecret: string;
  /** The email API (Resend-like): takes an idempotency key. */
  emailUrl: string;
}

export function createApp(pool: pg.Pool, webhookSecret: string, emailUrl: string): App {
  return { pool, inbox: createInbox({ db: pool }), outbox: createOutbox({ db: pool }), webhookSecret, emailUrl };
}

/** Stripe's scheme: `Stripe-Signature: t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>.<body>")>`, within 5 minutes. */
export function verifyStripeSignature(rawBody: string, header: string | undefined, secret: string, now = Date.now()): boolean {
  if (!header) return false;
  const parts = Object.fromEntries(header.split(",").map((kv) => kv.split("=", 2) as [string, string]));
  const t = Number(parts.t);
  if (!Number.isFinite(t) || Math.abs(now / 1000 - t) > 300 || !parts.v1) return false;
  const expected = createHmac("sha256", secret).update(`${t}.${rawBody}`).digest();
  const given = Buffer.from(parts.v1, "hex");
  return given.length === expected.length && timingSafeEqual(given, expected);
}

/** The route: nothing but verification and durable acceptance, so it answers fast and a retry is a no-op. */
export async function receiveWebhook(app: App, rawBody: string, signature: string | undefined): Promise<HttpAnswer> {
  if (!verifyStripeSignature(rawBody, signature, app.webhookSecret)) {
    return { status: 400, headers: { "content-type": "text/plain" }, body: "bad signature" };
  }
  let event: { id?: string; type?: string };
  try {
    event = JSON.parse(rawBody);
  } catch {
    return { status: 400, headers: { "content-type": "text/plain" }, body: "malformed JSON" };
  }
  const accepted = await app.inbox.acceptEvent(eventKey.stripe(event), event, { kind: "stripe" });
  return statusFor(accepted); // accepted/duplicate -> 200, mismatch -> 422
}

/** The inbox worker's handler. No transaction is open while it runs; `complete` is the one transaction. */
export async function handleEvent(app: App, event: InboxEvent, ctx: InboxContext<pg.PoolClient>): Promise<void> {
  const e = event.payload as { id: string; type: string; data: { object: { metadata?: { account?: string; plan?: string } } } };
  if (e.type !== "checkout.session.completed") return; // completed without work
  const { account, plan } = e.data.object.metadata ?? {};
  if (!account || !plan) throw Object.assign(new Error(`event ${e.id}: metadata.account/plan missing`), { permanent: true });
  await ctx.complete(async (tx) => {
    await tx.query(
      `INSERT INTO accounts (id, plan, updated_by) VALUES ($1, $2, $3)
       ON CONFLICT (id) DO UPDATE SET plan = EXCLUDED.plan, updated_by = EXCLUDED.updated_by`,
      [account, plan, event.key],
    );
    await app.outbox.enqueue(tx, { kind: "send_receipt", key: `receipt:${e.id}`, payload: { account, plan } });
  });
}

/** The outbox dispatcher's send: the row's key is the provider idempotency key on every attempt. */
export async function sendEffect(app: App, row: OutboxRow, ctx: { idempotencyKey: string }): Promise<void> {
  const r = await fetch(`${app.emailUrl}/emails`, {
    method: "POST",
    headers: { "content-type": "application/json", "idempotency-key": ctx.idempotencyKey },
    body: JSON.stringify({ kind: row.kind, ...row.payload }),
  });
  if (!r.ok) throw Object.assign(new Error(`email API answered ${r.status}`), { status: r.status, headers: r.headers });
}

/** Reconciliation: every paid plan here must be active at the billing provider; repair by queuing a downgrade. */
export function entitlementCheck(app: App, billingPlanOf: (account: string) => Promise<string>): ConsistencyCheck {
  return {
    name: "entitlements",
    async run() {
      const { rows } = await app.pool.query<{ id: string; plan: string }>("SELECT id, plan FROM accounts WHERE plan <> 'free' ORDER BY id");
      const found = [];
      for (const a of rows) {
        const billed = await billingPlanOf(a.id);
        if (billed === a.plan) continue;
        found.push({
          subject: `account ${a.id}`,
          detail: `local plan ${a.plan}, billing provider ${billed}`,
          repair: { kind: "set_plan", key: `set_plan:${a.id}:${billed}`, payload: { account: a.id, plan: billed } },
        });
      }
      return found;
    },
  };
}
