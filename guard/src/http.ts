import type { AcceptResult } from "./inbox.js";
import type { GuardResult } from "./types.js";

/** What to answer the provider for a guard result or an inbox acceptance. */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface StatusOptions {
  /** `Retry-After` seconds sent with 409 in-progress (default 5). */
  retryAfterSeconds?: number;
}

type Answerable = GuardResult<unknown> | AcceptResult | { status: "mismatch" };

/**
 * processed / duplicate / accepted -> 200 (the provider stops retrying);
 * in-progress -> 409 with Retry-After (retry later); mismatch -> 422 (the same key came with
 * another payload: a key-derivation bug to fix, not to retry into).
 */
export function statusFor(result: Answerable, options: StatusOptions = {}): HttpAnswer {
  switch (result?.status) {
    case "processed":
    case "duplicate":
    case "accepted":
      return { status: 200, headers: { "content-type": "text/plain; charset=utf-8" }, body: result.status };
    case "in-progress":
      return {
        status: 409,
        headers: { "content-type": "text/plain; charset=utf-8", "retry-after": String(options.retryAfterSeconds ?? 5) },
        body: "in progress",
      };
    case "mismatch":
      return { status: 422, headers: { "content-type": "text/plain; charset=utf-8" }, body: "key reused with a different payload" };
    default:
      throw new TypeError(`@retrysafe/guard: statusFor: not a guard or inbox result: ${JSON.stringify(result)}`);
  }
}

/** A Fetch `Response` (Next.js route handlers, Hono, Remix, SvelteKit, Deno, Workers). */
export function toResponse(result: Answerable, options?: StatusOptions): Response {
  const a = statusFor(result, options);
  return new Response(a.body, { status: a.status, headers: a.headers });
}

/**
 * Answer through a Node framework's response object: Express `res` (and NestJS with
 * `@Res()` on Express) or Fastify `reply` (and NestJS on Fastify).
 */
export function sendStatus(res: any, result: Answerable, options?: StatusOptions): unknown {
  const a = statusFor(result, options);
  if (typeof res?.code === "function" && typeof res?.header === "function") {
    // Fastify reply
    for (const [k, v] of Object.entries(a.headers)) res.header(k, v);
    return res.code(a.status).send(a.body);
  }
  if (typeof res?.status === "function" && typeof res?.set === "function") {
    // Express response
    return res.status(a.status).set(a.headers).send(a.body);
  }
  if (typeof res?.writeHead === "function") {
    // node:http ServerResponse
    res.writeHead(a.status, a.headers);
    return res.end(a.body);
  }
  throw new TypeError("@retrysafe/guard: sendStatus needs an Express res, a Fastify reply or a node:http ServerResponse");
}

/** Hono: `return honoStatus(c, result)` (uses `c.body`). */
export function honoStatus(c: { body(data: string, status?: any, headers?: Record<string, string>): Response }, result: Answerable, options?: StatusOptions): Response {
  const a = statusFor(result, options);
  return c.body(a.body, a.status, a.headers);
}
