// The business of the inbox tests: a paid checkout grants a plan (one entitlement
// transition per event), queues a receipt (the outbox) and notifies a partner API that
// honours idempotency keys.
import type pg from "pg";
import type { InboxEvent, Outbox } from "../src/index.ts";

export async function applyEntitlement(tx: pg.PoolClient, outbox: Outbox, event: InboxEvent): Promise<void> {
  await tx.query("INSERT INTO entitlement_log (event_key, account, plan) VALUES ($1, $2, $3)", [event.key, event.payload.account, event.payload.plan]);
  await outbox.enqueue(tx, { kind: "send_receipt", key: `receipt:${event.key}`, payload: event.payload });
}

export async function callProvider(url: string, idempotencyKey: string): Promise<void> {
  const r = await fetch(`${url}/notify`, { method: "POST", headers: { "idempotency-key": idempotencyKey }, body: "{}" });
  if (!r.ok) throw Object.assign(new Error(`provider answered ${r.status}`), { status: r.status });
}
