import { randomBytes } from "node:crypto";
import { canonicalJson, payloadFingerprint } from "./fingerprint.js";
import { GuardCommitError, GuardError, GuardMismatchError } from "./errors.js";
import { backoffMs, classifyError, describeError, queryOf, type FailureClass } from "./outbox.js";
import { checkKey, quoteTable } from "./util.js";

export { canonicalJson, payloadFingerprint };
import { withTransaction } from "./transaction.js";

export type InboxState = "pending" | "leased" | "completed" | "terminal_failure";

/** One accepted event as the worker sees it. */
export interface InboxEvent {
  key: string;
  kind: string | null;
  payload: any;
  state: InboxState;
  /** Attempts so far, this one included. */
  attempts: number;
  last_error: string | null;
}

export interface AcceptResult {
  /** accepted: stored now; duplicate: stored before (same payload); mismatch: stored before with a different payload. */
  status: "accepted" | "duplicate" | "mismatch";
  /** true for duplicate and mismatch: the event was not stored by this call. */
  duplicate: boolean;
}

export interface AcceptOptions {
  /** A routing label stored with the event (e.g. "stripe"); `process({ kinds })` filters on it. */
  kind?: string;
  /** Insert through this client or transaction instead of the inbox's `db` (e.g. inside your own transaction). */
  tx?: object;
  /** A key that comes back with another payload: `"return"` `{ status: "mismatch" }` (default) or `"throw"` a GuardMismatchError. */
  onMismatch?: "return" | "throw";
}

export interface InboxContext<Tx = any> {
  attempt: number;
  /**
   * Record completion in one transaction with your local writes (and outbox rows):
   * the completion update is fenced by this worker's lease token, so a worker whose
   * lease was taken over has its writes rolled back. Call it at most once; if `handle`
   * returns without calling it, the worker records completion alone.
   */
  complete<R>(fn?: (tx: Tx) => Promise<R> | R): Promise<R | undefined>;
}

export interface ProcessOptions<Tx = any> {
  /** Process one event. Throw to fail (classified like outbox sends); no transaction is open while it runs. */
  handle: (event: InboxEvent, ctx: InboxContext<Tx>) => Promise<unknown> | unknown;
  /** How long a claimed event is reserved for this worker (default 60 s). Keep it above your handler's worst case. */
  leaseMs?: number;
  /** Attempts before an event becomes terminal_failure (default 5). */
  maxAttempts?: number;
  /** Backoff ceiling after the first failure in ms (default 1000), doubling per attempt, full jitter. */
  baseDelayMs?: number;
  /** Largest backoff ceiling in ms (default 5 minutes). */
  maxDelayMs?: number;
  /** Only these kinds (default all). */
  kinds?: string[];
  classify?: (err: unknown) => FailureClass;
  random?: () => number;
  /** Stop after this many events (default: until none is due). */
  maxEvents?: number;
}

export interface ProcessStats {
  /** Events this call claimed. */
  claimed: number;
  completed: number;
  retried: number;
  failed: number;
  /** Claimed, but the lease was taken over before completion could be recorded (writes rolled back). */
  lost: number;
}

export interface InboxOptions {
  /** Where events are stored and claimed: a pg Pool, a Prisma client or a Drizzle db. */
  db: object;
  /** Inbox table (default `retrysafe_inbox`), optionally `schema.table`. */
  table?: string;
  /** Store a SHA-256 of the payload and answer `mismatch` when a key comes back with another payload (default true). */
  fingerprint?: boolean;
  /** Drizzle's `sql` tag, when a bundler cannot resolve `drizzle-orm`. */
  sql?: any;
}

export interface InboxRow extends InboxEvent {
  fingerprint: string | null;
  lease_until: Date | null;
  received_at: Date;
  completed_at: Date | null;
}

export interface Inbox {
  readonly table: string;
  /** Record the event under its unique key, durably, in the request; answer 2xx for accepted and duplicate. */
  acceptEvent(key: string, payload: unknown, options?: AcceptOptions): Promise<AcceptResult>;
  /** Claim due events one at a time (`FOR UPDATE SKIP LOCKED`, leases) and run `handle` until none is due. */
  process<Tx = any>(options: ProcessOptions<Tx>): Promise<ProcessStats>;
  /** Run `process` every `pollMs` (default 1000) until `stop()` is awaited. */
  start<Tx = any>(options: ProcessOptions<Tx> & { pollMs?: number; onError?: (err: unknown) => void }): { stop(): Promise<void> };
  /** The stored row for a key, or undefined. */
  get(key: string): Promise<InboxRow | undefined>;
}

/** The worker's lease was taken over: its completion (and the writes in `complete`) rolled back. */
export class InboxLeaseLostError extends GuardError {
  constructor(key: string) {
    super(`@retrysafe/guard: inbox event ${JSON.stringify(key)}: the lease was taken over by another worker; this attempt's writes were rolled back`, key);
    this.name = "InboxLeaseLostError";
  }
}

/**
 * A durable inbox (seed 2): `acceptEvent` stores the event under its unique key in the
 * request, so the route can answer 2xx at once; `process` claims stored events with
 * explicit states pending -> leased -> completed | terminal_failure, `lease_until`,
 * `attempts` and `FOR UPDATE SKIP LOCKED`, and never holds a transaction open while your
 * handler runs. A crashed worker's event is claimed again once its lease expires.
 */
export function createInbox(options: InboxOptions): Inbox {
  if (!options || !options.db) throw new TypeError("@retrysafe/guard: createInbox({ db }) needs a pg Pool, Prisma client or Drizzle db");
  const table = quoteTable(options.table ?? "retrysafe_inbox");
  const db = options.db;
  const useFingerprint = options.fingerprint ?? true;

  async function acceptEvent(key: string, payload: unknown, opts: AcceptOptions = {}): Promise<AcceptResult> {
    checkKey(key);
    const q = queryOf(opts.tx ?? db, "acceptEvent()", options.sql);
    const fp = useFingerprint ? payloadFingerprint(payload) : null;
    const body = payload instanceof Uint8Array ? Buffer.from(payload).toString("utf8") : payload;
    const inserted = await q(
      `INSERT INTO ${table} (key, kind, payload, fingerprint) VALUES ($1, $2, $3::jsonb, $4)
       ON CONFLICT (key) DO NOTHING RETURNING key`,
      [key, opts.kind ?? null, JSON.stringify(body ?? null), fp],
    );
    if (inserted.length === 1) return { status: "accepted", duplicate: false };
    if (fp !== null) {
      const existing = await q(`SELECT fingerprint FROM ${table} WHERE key = $1`, [key]);
      const stored = existing[0]?.fingerprint ?? null;
      if (stored !== null && stored !== fp) {
        if (opts.onMismatch === "throw") throw new GuardMismatchError(key);
        return { status: "mismatch", duplicate: true };
      }
    }
    return { status: "duplicate", duplicate: true };
  }

  async function processEvents<Tx>(opts: ProcessOptions<Tx>): Promise<ProcessStats> {
    if (typeof opts?.handle !== "function") throw new TypeError("@retrysafe/guard: inbox.process needs { handle }");
    const q = queryOf(db, "process()", options.sql);
    const leaseMs = opts.leaseMs ?? 60_000;
    const maxAttempts = opts.maxAttempts ?? 5;
    const baseDelayMs = opts.baseDelayMs ?? 1000;
    const maxDelayMs = opts.maxDelayMs ?? 5 * 60_000;
    const classify = opts.classify ?? classifyError;
    const random = opts.random ?? Math.random;
    const kinds = opts.kinds && opts.kinds.length > 0 ? opts.kinds : null;
    const stats: ProcessStats = { claimed: 0, completed: 0, retried: 0, failed: 0, lost: 0 };

    for (let n = 0; opts.maxEvents === undefined || n < opts.maxEvents; n++) {
      const token = randomBytes(12).toString("hex");
      const claimed = await q(
        `UPDATE ${table} SET state = 'leased', attempts = attempts + 1, lease_token = $1,
           lease_until = now() + ($2::bigint * interval '1 millisecond'), updated_at = now()
         WHERE key IN (
           SELECT key FROM ${table}
           WHERE ((state = 'pending' AND available_at <= now()) OR (state = 'leased' AND lease_until <= now()))
             AND ($3::text[] IS NULL OR kind = ANY($3::text[]))
           ORDER BY available_at, received_at
           LIMIT 1
           FOR UPDATE SKIP LOCKED)
         RETURNING key, kind, payload, state, attempts, last_error`,
        [token, leaseMs, kinds],
      );
      if (claimed.length === 0) break;
      stats.claimed++;
      const event: InboxEvent = { ...claimed[0], attempts: Number(claimed[0].attempts) };
      const fenced = async (sql: string, params: unknown[], counter: "retried" | "failed") => {
        const r = await q(sql, params);
        if (r.length === 1) stats[counter]++;
        else stats.lost++;
      };
      const fail = (message: string) =>
        fenced(
          `UPDATE ${table} SET state = 'terminal_failure', lease_until = NULL, lease_token = NULL, updated_at = now(), last_error = $3
           WHERE key = $1 AND lease_token = $2 RETURNING key`,
          [event.key, token, message.slice(0, 2000)],
          "failed",
        );
      if (event.attempts > maxAttempts) {
        await fail(`attempts exhausted (${maxAttempts}); last: ${event.last_error ?? "lease expired (worker crashed or timed out)"}`);
        continue;
      }

      let completed = false;
      const complete = async <R>(fn?: (tx: Tx) => Promise<R> | R): Promise<R | undefined> => {
        if (completed) throw new GuardError(`@retrysafe/guard: inbox event ${JSON.stringify(event.key)}: complete() called twice`, event.key);
        completed = true;
        return withTransaction(db, options.sql, async (tx, txq) => {
          const marked = await txq(
            `UPDATE ${table} SET state = 'completed', completed_at = now(), lease_until = NULL, lease_token = NULL,
               last_error = NULL, updated_at = now() WHERE key = $1 AND lease_token = $2 AND state = 'leased' RETURNING key`,
            [event.key, token],
          );
          if (marked.length !== 1) throw new InboxLeaseLostError(event.key);
          const result = fn ? await fn(tx as Tx) : undefined;
          try {
            const still = await txq(`SELECT key FROM ${table} WHERE key = $1 AND state = 'completed'`, [event.key]);
            if (still.length !== 1) throw new GuardCommitError(event.key, "the inbox completion is gone from the transaction");
          } catch (err) {
            if (err instanceof GuardCommitError) throw err;
            throw new GuardCommitError(event.key, "the transaction was aborted by a statement error inside complete() (caught and ignored?)", err);
          }
          return result;
        });
      };

      try {
        await opts.handle(event, { attempt: event.attempts, complete });
        if (!completed) await complete();
        stats.completed++;
      } catch (err) {
        if (err instanceof InboxLeaseLostError) {
          stats.lost++;
          continue;
        }
        const cls = classify(err);
        const message = `${cls}: ${describeError(err)}`;
        if (cls === "permanent" || event.attempts >= maxAttempts) {
          await fail(message);
        } else {
          await fenced(
            `UPDATE ${table} SET state = 'pending', lease_until = NULL, lease_token = NULL, updated_at = now(),
               available_at = now() + ($3::bigint * interval '1 millisecond'), last_error = $4
             WHERE key = $1 AND lease_token = $2 RETURNING key`,
            [event.key, token, backoffMs(event.attempts, baseDelayMs, maxDelayMs, random), message],
            "retried",
          );
        }
      }
    }
    return stats;
  }

  return {
    table,
    acceptEvent,
    process: processEvents,
    start(opts) {
      const pollMs = opts.pollMs ?? 1000;
      let stopped = false;
      let wake: (() => void) | undefined;
      const loop = (async () => {
        while (!stopped) {
          try {
            await processEvents(opts);
          } catch (err) {
            opts.onError?.(err);
          }
          if (stopped) break;
          await new Promise<void>((resolve) => {
            const t = setTimeout(resolve, pollMs);
            wake = () => {
              clearTimeout(t);
              resolve();
            };
          });
        }
      })();
      return {
        async stop() {
          stopped = true;
          wake?.();
          await loop;
        },
      };
    },
    async get(key) {
      const q = queryOf(db, "get()", options.sql);
      const rows = await q(
        `SELECT key, kind, payload, fingerprint, state, attempts, last_error, lease_until, received_at, completed_at FROM ${table} WHERE key = $1`,
        [key],
      );
      return rows[0] ? { ...rows[0], attempts: Number(rows[0].attempts) } : undefined;
    },
  };
}

