// A recording fake of an outbound provider API that honours idempotency keys, like
// Stripe or Resend: the first request with a key applies the effect; a repeat returns
// the stored response without applying it again.
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { OutboxRow } from "../src/index.ts";

export type Scripted = { status: number; headers?: Record<string, string> } | "apply-then-drop";

export interface FakeProvider {
  url: string;
  /** Requests received per idempotency key. */
  calls: Map<string, number>;
  /** Effects applied per key (never more than 1 when keys are honoured). */
  effects: Map<string, number>;
  /** Queue scripted answers for a key (consumed one per request); default 200. */
  script(key: string, ...answers: Scripted[]): void;
  close(): Promise<void>;
}

export async function startFakeProvider(): Promise<FakeProvider> {
  const calls = new Map<string, number>();
  const effects = new Map<string, number>();
  const scripts = new Map<string, Scripted[]>();
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      const key = String(req.headers["idempotency-key"] ?? "");
      if (!key) {
        res.writeHead(400).end("missing Idempotency-Key");
        return;
      }
      calls.set(key, (calls.get(key) ?? 0) + 1);
      const next = scripts.get(key)?.shift();
      if (next && next !== "apply-then-drop" && next.status >= 400) {
        res.writeHead(next.status, next.headers ?? {}).end(JSON.stringify({ error: next.status }));
        return;
      }
      if (!effects.has(key)) effects.set(key, 1); // idempotent: applied once per key
      if (next === "apply-then-drop") {
        req.socket.destroy(); // the effect happened, the response is lost
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ id: `eff_${key}` }));
    });
  });
  server.keepAliveTimeout = 1;
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    calls,
    effects,
    script: (key, ...answers) => scripts.set(key, [...(scripts.get(key) ?? []), ...answers]),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections?.();
        server.close(() => r());
      }),
  };
}

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly headers: Headers,
  ) {
    super(`provider answered ${status}`);
    this.name = "HttpError";
  }
}

/** A `send` for outbox.dispatch that POSTs to the fake provider with the row's key. */
export function makeSend(url: string) {
  return async (row: OutboxRow, ctx: { idempotencyKey: string }) => {
    const r = await fetch(`${url}/send`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": ctx.idempotencyKey },
      body: JSON.stringify({ kind: row.kind, payload: row.payload }),
    });
    if (!r.ok) throw new HttpError(r.status, r.headers);
    return r.json();
  };
}
