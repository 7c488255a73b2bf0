import { randomBytes } from "node:crypto";
import { canonicalJson, payloadFingerprint } from "./fingerprint.js";
import { GuardCommitError, GuardError, GuardMismatchError } from "./errors.js";
import { backoffMs, classifyError, describeError, queryOf, type FailureClass } from "./outbox.js";
import { checkKey, pollUntilStopped, quoteTable } from "./util.js";
import { quoteMysqlTable } from "./mysql.js";
import { mysqlExec, mysqlJson, mysqlKindsFilter, mysqlText, mysqlTransaction, sqlDialectOf, type SqlDialect } from "./dialect.js";

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
  /**
   * Where events are stored and claimed: a pg Pool, a mysql2/promise Pool, a Prisma client
   * or a Drizzle db (PostgreSQL or MySQL / MariaDB).
   */
  db: object;
  /** `"postgresql"` or `"mysql"`; default: read from `db`. */
  dialect?: SqlDialect;
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
  /** The SQL dialect of its database. */
  readonly dialect: SqlDialect;
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

/** A claimed event as stored, before `attempts` is a number. */
type ClaimedRow = { key: string; kind: string | null; payload: any; state: InboxState; attempts: number | string; last_error: string | null };

/** The statements of one SQL dialect; the state machine in createInbox is shared. */
interface InboxStore {
  /** Insert unless the key exists; true when this call stored it. */
  insert(tx: object, key: string, kind: string | null, payloadJson: string, fingerprint: string | null): Promise<boolean>;
  storedFingerprint(tx: object, key: string): Promise<unknown>;
  /** Lease the next due event (SKIP LOCKED), counting the attempt. */
  claim(token: string, leaseMs: number, kinds: string[] | null): Promise<ClaimedRow | undefined>;
  /** Fenced by the lease token: false when another worker holds the event now. */
  fail(key: string, token: string, message: string): Promise<boolean>;
  retry(key: string, token: string, delayMs: number, message: string): Promise<boolean>;
  /** In one transaction: mark completed (fenced), run fn, prove the completion is still there. */
  complete<R>(key: string, token: string, fn: ((tx: any) => Promise<R> | R) | undefined): Promise<R | undefined>;
  get(key: string): Promise<InboxRow | undefined>;
}

/** After the caller's writes, still inside the transaction: the completion must still be there. */
async function proveCompleted(key: string, check: () => Promise<boolean>): Promise<void> {
  let still: boolean;
  try {
    still = await check();
  } catch (err) {
    throw new GuardCommitError(key, "the transaction was aborted by a statement error inside complete() (caught and ignored?)", err);
  }
  if (!still) throw new GuardCommitError(key, "the inbox completion is gone from the transaction");
}

function postgresInboxStore(table: string, db: object, drizzleSql: any): InboxStore {
  const q = queryOf(db, "process()", drizzleSql);
  return {
    async insert(tx, key, kind, payloadJson, fingerprint) {
      const rows = await queryOf(tx, "acceptEvent()", drizzleSql)(
        `INSERT INTO ${table} (key, kind, payload, fingerprint) VALUES ($1, $2, $3::jsonb, $4)
         ON CONFLICT (key) DO NOTHING RETURNING key`,
        [key, kind, payloadJson, fingerprint],
      );
      return rows.length === 1;
    },
    async storedFingerprint(tx, key) {
      return (await queryOf(tx, "acceptEvent()", drizzleSql)(`SELECT fingerprint FROM ${table} WHERE key = $1`, [key]))[0]?.fingerprint;
    },
    async claim(token, leaseMs, kinds) {
      const rows = await q(
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
      return rows[0];
    },
    async fail(key, token, message) {
      const rows = await q(
        `UPDATE ${table} SET state = 'terminal_failure', lease_until = NULL, lease_token = NULL, updated_at = now(), last_error = $3
         WHERE key = $1 AND lease_token = $2 RETURNING key`,
        [key, token, message],
      );
      return rows.length === 1;
    },
    async retry(key, token, delayMs, message) {
      const rows = await q(
        `UPDATE ${table} SET state = 'pending', lease_until = NULL, lease_token = NULL, updated_at = now(),
           available_at = now() + ($3::bigint * interval '1 millisecond'), last_error = $4
         WHERE key = $1 AND lease_token = $2 RETURNING key`,
        [key, token, delayMs, message],
      );
      return rows.length === 1;
    },
    complete(key, token, fn) {
      return withTransaction(db, drizzleSql, async (tx, txq) => {
        const marked = await txq(
          `UPDATE ${table} SET state = 'completed', completed_at = now(), lease_until = NULL, lease_token = NULL,
             last_error = NULL, updated_at = now() WHERE key = $1 AND lease_token = $2 AND state = 'leased' RETURNING key`,
          [key, token],
        );
        if (marked.length !== 1) throw new InboxLeaseLostError(key);
        const result = fn ? await fn(tx) : undefined;
        await proveCompleted(key, async () => (await txq(`SELECT key FROM ${table} WHERE key = $1 AND state = 'completed'`, [key])).length === 1);
        return result;
      });
    },
    async get(key) {
      const rows = await q(
        `SELECT key, kind, payload, fingerprint, state, attempts, last_error, lease_until, received_at, completed_at FROM ${table} WHERE key = $1`,
        [key],
      );
      return rows[0] ? { ...rows[0], attempts: Number(rows[0].attempts) } : undefined;
    },
  };
}

/**
 * MySQL 8 / MariaDB 10.6+ (SKIP LOCKED). No UPDATE ... RETURNING there: a claim reads due
 * candidates without locks, then is a short transaction (one candidate locked by primary key
 * with FOR UPDATE SKIP LOCKED, UPDATE, read back); fenced updates count the rows they matched.
 */
/** Due events read per claim attempt on MySQL, and how many times a fully contended read is repeated. */
const CLAIM_CANDIDATES = 16;
const CLAIM_ROUNDS = 8;

function mysqlInboxStore(table: string, db: object, drizzleSql: any): InboxStore {
  const x = mysqlExec(db, "process()", drizzleSql);
  const lease = "NOW(6) + INTERVAL ? MICROSECOND";
  const columns = "`key`, kind, CAST(payload AS CHAR) AS payload, state, attempts, last_error";
  const fromRow = (r: any): ClaimedRow => ({ ...r, key: mysqlText(r.key)!, payload: mysqlJson(r.payload), attempts: Number(r.attempts) });
  return {
    async insert(tx, key, kind, payloadJson, fingerprint) {
      const n = await mysqlExec(tx, "acceptEvent()", drizzleSql).affected(
        `INSERT IGNORE INTO ${table} (\`key\`, kind, payload, fingerprint) VALUES (?, ?, ?, ?)`,
        [key, kind, payloadJson, fingerprint],
      );
      return n === 1;
    },
    async storedFingerprint(tx, key) {
      return (await mysqlExec(tx, "acceptEvent()", drizzleSql).rows(`SELECT fingerprint FROM ${table} WHERE \`key\` = ?`, [key]))[0]?.fingerprint;
    },
    async claim(token, leaseMs, kinds) {
      const filter = mysqlKindsFilter(kinds);
      const due = `((state = 'pending' AND available_at <= NOW(6)) OR (state = 'leased' AND lease_until <= NOW(6)))`;
      // Candidates first, without locks; then lock one of them by primary key. A locking read
      // with ORDER BY ... LIMIT 1 would lock every row InnoDB sorts, and a second worker
      // would skip them all and find "nothing due".
      for (let round = 0; round < CLAIM_ROUNDS; round++) {
        const candidates = await x.rows(
          `SELECT \`key\` FROM ${table} WHERE ${due}${filter.clause} ORDER BY available_at, received_at LIMIT ${CLAIM_CANDIDATES}`,
          filter.params,
        );
        if (candidates.length === 0) return undefined;
        const claimed = await mysqlTransaction(db, drizzleSql, async (_tx, t) => {
          for (const candidate of candidates) {
            const locked = await t.rows(`SELECT \`key\` FROM ${table} WHERE \`key\` = ? AND ${due} FOR UPDATE SKIP LOCKED`, [candidate.key]);
            if (locked.length === 0) continue; // another worker has it, or it is no longer due
            await t.affected(
              `UPDATE ${table} SET state = 'leased', attempts = attempts + 1, lease_token = ?, lease_until = ${lease}, updated_at = NOW(6)
               WHERE \`key\` = ?`,
              [token, leaseMs * 1000, candidate.key],
            );
            const rows = await t.rows(`SELECT ${columns} FROM ${table} WHERE \`key\` = ?`, [candidate.key]);
            return rows[0] ? fromRow(rows[0]) : undefined;
          }
          return undefined;
        });
        if (claimed) return claimed;
        // every candidate was taken while we looked: look again
      }
      return undefined;
    },
    async fail(key, token, message) {
      return (
        (await x.affected(
          `UPDATE ${table} SET state = 'terminal_failure', lease_until = NULL, lease_token = NULL, updated_at = NOW(6), last_error = ?
           WHERE \`key\` = ? AND lease_token = ?`,
          [message, key, token],
        )) === 1
      );
    },
    async retry(key, token, delayMs, message) {
      return (
        (await x.affected(
          `UPDATE ${table} SET state = 'pending', lease_until = NULL, lease_token = NULL, updated_at = NOW(6),
             available_at = ${lease}, last_error = ? WHERE \`key\` = ? AND lease_token = ?`,
          [delayMs * 1000, message, key, token],
        )) === 1
      );
    },
    complete(key, token, fn) {
      return mysqlTransaction(db, drizzleSql, async (tx, t) => {
        const marked = await t.affected(
          `UPDATE ${table} SET state = 'completed', completed_at = NOW(6), lease_until = NULL, lease_token = NULL,
             last_error = NULL, updated_at = NOW(6) WHERE \`key\` = ? AND lease_token = ? AND state = 'leased'`,
          [key, token],
        );
        if (marked !== 1) throw new InboxLeaseLostError(key);
        const result = fn ? await fn(tx) : undefined;
        // InnoDB rolls the whole transaction back on a deadlock: a swallowed one leaves no completion
        await proveCompleted(key, async () => (await t.rows(`SELECT \`key\` FROM ${table} WHERE \`key\` = ? AND state = 'completed'`, [key])).length === 1);
        return result;
      });
    },
    async get(key) {
      // epoch seconds: every client (mysql2, Drizzle's string dates, Prisma) reads them the same, whatever the session time zone
      const rows = await x.rows(
        `SELECT ${columns}, fingerprint, UNIX_TIMESTAMP(lease_until) AS lease_until, UNIX_TIMESTAMP(received_at) AS received_at,
           UNIX_TIMESTAMP(completed_at) AS completed_at FROM ${table} WHERE \`key\` = ?`,
        [key],
      );
      const r = rows[0];
      if (!r) return undefined;
      const date = (v: unknown) => (v === null || v === undefined ? null : new Date(Math.round(Number(String(v)) * 1000)));
      return { ...fromRow(r), attempts: Number(r.attempts), fingerprint: mysqlText(r.fingerprint), lease_until: date(r.lease_until), received_at: date(r.received_at)!, completed_at: date(r.completed_at) };
    },
  };
}

/**
 * A durable inbox (seed 2): `acceptEvent` stores the event under its unique key in the
 * request, so the route can answer 2xx at once; `process` claims stored events with
 * explicit states pending -> leased -> completed | terminal_failure, `lease_until`,
 * `attempts` and `FOR UPDATE SKIP LOCKED`, and never holds a transaction open while your
 * handler runs. A crashed worker's event is claimed again once its lease expires.
 * PostgreSQL, or MySQL 8 / MariaDB 10.6+ (a mysql2 pool, Prisma or Drizzle on MySQL).
 */
export function createInbox(options: InboxOptions): Inbox {
  if (!options || !options.db) throw new TypeError("@retrysafe/guard: createInbox({ db }) needs a pg or mysql2 Pool, a Prisma client or a Drizzle db");
  const db = options.db;
  const dialect = options.dialect ?? sqlDialectOf(db);
  if (dialect !== "postgresql" && dialect !== "mysql") throw new TypeError(`@retrysafe/guard: createInbox dialect must be "postgresql" or "mysql", got ${JSON.stringify(dialect)}`);
  const table = dialect === "mysql" ? quoteMysqlTable(options.table ?? "retrysafe_inbox") : quoteTable(options.table ?? "retrysafe_inbox");
  const store = dialect === "mysql" ? mysqlInboxStore(table, db, options.sql) : postgresInboxStore(table, db, options.sql);
  const useFingerprint = options.fingerprint ?? true;

  async function acceptEvent(key: string, payload: unknown, opts: AcceptOptions = {}): Promise<AcceptResult> {
    checkKey(key);
    const tx = opts.tx ?? db;
    const fp = useFingerprint ? payloadFingerprint(payload) : null;
    const body = payload instanceof Uint8Array ? Buffer.from(payload).toString("utf8") : payload;
    if (await store.insert(tx, key, opts.kind ?? null, JSON.stringify(body ?? null), fp)) return { status: "accepted", duplicate: false };
    if (fp !== null) {
      const stored = mysqlText(await store.storedFingerprint(tx, key));
      if (stored !== null && stored !== fp) {
        if (opts.onMismatch === "throw") throw new GuardMismatchError(key);
        return { status: "mismatch", duplicate: true };
      }
    }
    return { status: "duplicate", duplicate: true };
  }

  async function processEvents<Tx>(opts: ProcessOptions<Tx>): Promise<ProcessStats> {
    if (typeof opts?.handle !== "function") throw new TypeError("@retrysafe/guard: inbox.process needs { handle }");
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
      const claimed = await store.claim(token, leaseMs, kinds);
      if (!claimed) break;
      stats.claimed++;
      const event: InboxEvent = { ...claimed, attempts: Number(claimed.attempts) };
      const count = (matched: boolean, counter: "retried" | "failed") => {
        if (matched) stats[counter]++;
        else stats.lost++;
      };
      const fail = async (message: string) => count(await store.fail(event.key, token, message.slice(0, 2000)), "failed");
      if (event.attempts > maxAttempts) {
        await fail(`attempts exhausted (${maxAttempts}); last: ${event.last_error ?? "lease expired (worker crashed or timed out)"}`);
        continue;
      }

      let completed = false;
      const complete = async <R>(fn?: (tx: Tx) => Promise<R> | R): Promise<R | undefined> => {
        if (completed) throw new GuardError(`@retrysafe/guard: inbox event ${JSON.stringify(event.key)}: complete() called twice`, event.key);
        completed = true;
        return store.complete(event.key, token, fn);
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
          count(await store.retry(event.key, token, backoffMs(event.attempts, baseDelayMs, maxDelayMs, random), message), "retried");
        }
      }
    }
    return stats;
  }

  return {
    table,
    dialect,
    acceptEvent,
    process: processEvents,
    start: (opts) => pollUntilStopped(() => processEvents(opts), opts),
    get: (key) => store.get(key),
  };
}
