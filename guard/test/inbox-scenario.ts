// The business of the inbox tests: a paid checkout grants a plan (one entitlement
// transition per event, written per database in test/backends.ts), queues a receipt (the
// outbox) and notifies a partner API that honours idempotency keys.
export async function callProvider(url: string, idempotencyKey: string): Promise<void> {
  const r = await fetch(`${url}/notify`, { method: "POST", headers: { "idempotency-key": idempotencyKey }, body: "{}" });
  if (!r.ok) throw Object.assign(new Error(`provider answered ${r.status}`), { status: r.status });
}
