import { randomBytes } from "node:crypto";
import { checkKey, loadDrizzleSql, pollUntilStopped, quoteTable } from "./util.js";
import { quoteMysqlTable } from "./mysql.js";
import { mysqlExec, mysqlJson, mysqlKindsFilter, mysqlText, mysqlTransaction, sqlDialectOf, type SqlDialect } from "./dialect.js";

export type OutboxState = "pending" | "leased" | "completed" | "terminal_failure" | "manual_review";

/**
 * How a kind of effect may be retried after an ambiguous outcome (the request may have
 * taken effect: a lost response, or a dispatcher that died mid-send):
 * - `idempotent`: send again with the same key (the provider deduplicates, or repeating is harmless);
 * - `reconcilable`: ask `checkRemote(row)` first: done -> completed, not-done -> send again, unknown -> manual_review;
 * - `manual`: park the row in `manual_review` for a person; never resend blindly.
 */
export type EffectPolicy = "idempotent" | "reconcilable" | "manual";

/** What the provider says about a row whose outcome was ambiguous. */
export type RemoteState = "done" | "not-done" | "unknown";

export interface OutboxMessage {
  /** What to do, e.g. "send_receipt". */
  kind: string;
  /** The stable key of this logical operation, e.g. `receipt:${event.id}`; sent as the provider idempotency key. */
  key: string;
  /** JSON payload. */
  payload?: unknown;
}

export interface OutboxRow {
  id: string;
  kind: string;
  key: string;
  payload: any;
  state: OutboxState;
  /** Attempts so far, this one included. */
  attempts: number;
  last_error: string | null;
}

const IN_FLIGHT = "in flight: attempt ";

export type FailureClass = "transient" | "permanent" | "ambiguous";

export interface DispatchOptions {
  /** Perform the effect. Pass `idempotencyKey` to the provider; throw to fail. */
  send: (row: OutboxRow, ctx: { idempotencyKey: string; attempt: number }) => Promise<unknown> | unknown;
  /** Attempts before a row becomes terminal_failure (default 5). */
  maxAttempts?: number;
  /** First backoff ceiling in ms (default 1000); doubles per attempt, full jitter. */
  baseDelayMs?: number;
  /** Largest backoff ceiling in ms (default 5 minutes). Retry-After is honoured even above it. */
  maxDelayMs?: number;
  /** How long a leased row is reserved for one dispatcher (default 60 s). Keep it above your send timeout. */
  leaseMs?: number;
  /** Rows leased per round trip (default 10). */
  batchSize?: number;
  /** Only these kinds (default all). */
  kinds?: string[];
  /** Override the failure classification. */
  classify?: (err: unknown) => FailureClass;
  /** Random source in [0, 1) for the jitter (default Math.random). */
  random?: () => number;
  /** Stop after this many rounds of leasing (default: until no row is due). */
  maxRounds?: number;
  /** Per-kind retry policy after an ambiguous outcome (default `idempotent` for every kind). */
  policies?: Record<string, EffectPolicy>;
  /** For `reconcilable` kinds: look the effect up at the provider before sending again. */
  checkRemote?: (row: OutboxRow) => Promise<RemoteState> | RemoteState;
}

export interface DispatchStats {
  /** Rows this call reserved. */
  leased: number;
  /** Sent and recorded as completed by this call. */
  completed: number;
  /** Failed and rescheduled (transient or ambiguous). */
  retried: number;
  /** Moved to terminal_failure by this call. */
  failed: number;
  /** Reserved but taken over by another dispatcher before this one could start or record it (never counted above). */
  lost: number;
  /** Moved to manual_review (ambiguous outcome of a `manual` kind, or a `reconcilable` one the check could not settle). */
  manual: number;
}

/** pg Pool/Client/PoolClient (`query`), Prisma client or tx (`$queryRawUnsafe`), Drizzle db or tx (`execute`). */
export type OutboxDb = object;

export interface OutboxOptions {
  /** Outbox table (default `retrysafe_outbox`), optionally `schema.table`. */
  table?: string;
  /**
   * Where `dispatch()` leases rows: a pg or mysql2/promise `Pool`, a Prisma client or a
   * Drizzle db (PostgreSQL or MySQL / MariaDB). Not needed for `enqueue` only.
   */
  db?: OutboxDb;
  /** `"postgresql"` or `"mysql"`; default: read from `db` (or, without one, from each `enqueue`'s `tx`). */
  dialect?: SqlDialect;
  /** Drizzle's `sql` tag, when a bundler cannot resolve `drizzle-orm` for the guard. */
  sql?: any;
}

export type Query = (sql: string, params: unknown[]) => Promise<any[]>;

export function queryOf(db: any, what: string, drizzleSql?: any): Query {
  if (db && typeof db.$queryRawUnsafe === "function") {
    return (sql, params) => db.$queryRawUnsafe(sql, ...params);
  }
  if (db && typeof db.query === "function" && typeof db.execute !== "function") {
    return async (sql, params) => (await db.query(sql, params)).rows;
  }
  if (db && typeof db.execute === "function") {
    // Drizzle: rebuild "$1" placeholders as sql`${param}` chunks
    return async (text, params) => {
      const sql = drizzleSql ?? (await loadDrizzleSql());
      const parts = text.split(/\$(\d+)/);
      const chunks: any[] = [];
      parts.forEach((part, i) => chunks.push(i % 2 === 0 ? sql.raw(part) : sql`${params[Number(part) - 1]}`));
      const r = await db.execute(sql.join(chunks));
      return Array.isArray(r) ? r : (r?.rows ?? []);
    };
  }
  throw new TypeError(`@retrysafe/guard: outbox ${what} needs a pg client/pool (query), a Prisma client/tx ($queryRawUnsafe) or a Drizzle db/tx (execute)`);
}

function statusOf(err: any): number | undefined {
  const s = err?.status ?? err?.statusCode ?? err?.response?.status ?? err?.response?.statusCode;
  const n = typeof s === "string" ? Number(s) : s;
  return typeof n === "number" && Number.isInteger(n) ? n : undefined;
}

const TRANSIENT_CODES = new Set([
  "ETIMEDOUT", "ECONNRESET", "ECONNREFUSED", "ECONNABORTED", "EPIPE", "EAI_AGAIN", "ENETUNREACH",
  "EHOSTUNREACH", "ENOTFOUND", "UND_ERR_CONNECT_TIMEOUT", "UND_ERR_HEADERS_TIMEOUT", "UND_ERR_BODY_TIMEOUT", "UND_ERR_SOCKET",
]);

/**
 * transient: timeouts, connection errors, 408/425/429 and 5xx (except 501/505);
 * permanent: other 4xx, 501/505, or `err.permanent === true`;
 * ambiguous: anything else (e.g. the response was lost): retried with the same key.
 * `err.retryable === false` makes an error permanent, `true` transient.
 */
export function classifyError(err: unknown): FailureClass {
  const e: any = err;
  if (e?.permanent === true || e?.retryable === false) return "permanent";
  if (e?.retryable === true) return "transient";
  const status = statusOf(e);
  if (status !== undefined && status >= 400) {
    if (status === 408 || status === 425 || status === 429) return "transient";
    if (status >= 500) return status === 501 || status === 505 ? "permanent" : "transient";
    return "permanent";
  }
  const code = e?.code ?? e?.cause?.code;
  if (typeof code === "string" && TRANSIENT_CODES.has(code)) return "transient";
  if (e?.name === "AbortError" || e?.name === "TimeoutError") return "transient";
  return "ambiguous";
}

/** Retry-After in ms from `err.retryAfter` (seconds, HTTP date or Date) or a `retry-after` response header. */
export function retryAfterMs(err: unknown, now: number = Date.now()): number | undefined {
  const e: any = err;
  let v: unknown = e?.retryAfter;
  if (v === undefined) {
    const h = e?.headers ?? e?.response?.headers;
    if (h && typeof h.get === "function") v = h.get("retry-after");
    else if (h && typeof h === "object") v = h["retry-after"] ?? h["Retry-After"];
  }
  if (v === undefined || v === null || v === "") return undefined;
  if (v instanceof Date) return Math.max(0, v.getTime() - now);
  if (typeof v === "number") return Number.isFinite(v) && v >= 0 ? Math.round(v * 1000) : undefined;
  if (typeof v === "string") {
    if (/^\s*\d+(\.\d+)?\s*$/.test(v)) return Math.round(Number(v) * 1000);
    const t = Date.parse(v);
    if (!Number.isNaN(t)) return Math.max(0, t - now);
  }
  return undefined;
}

/** Full jitter: a random delay in [0, min(maxDelayMs, baseDelayMs * 2^(attempt-1))). */
export function backoffMs(attempt: number, baseDelayMs: number, maxDelayMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxDelayMs, baseDelayMs * 2 ** Math.max(0, attempt - 1));
  return Math.floor(random() * ceiling);
}

export function describeError(err: unknown): string {
  if (err instanceof Error) {
    const status = statusOf(err);
    const code = (err as any).code;
    return [err.name + ": " + err.message, status !== undefined ? `status=${status}` : "", code ? `code=${code}` : ""]
      .filter(Boolean)
      .join(" ")
      .slice(0, 2000);
  }
  return String(err).slice(0, 2000);
}

export interface Outbox {
  /** The table's SQL name (quoted). */
  readonly table: string;
  /** The SQL dialect of `db` (PostgreSQL when neither `db` nor `dialect` was given). */
  readonly dialect: SqlDialect;
  /**
   * Insert a message inside your transaction (`tx` = the guard's pg client or Prisma tx).
   * Enqueuing the same key twice is a no-op. Resolves to true when a row was inserted.
   */
  enqueue(tx: OutboxDb, message: OutboxMessage): Promise<boolean>;
  /** Lease due rows and send them until none is due. */
  dispatch(options: DispatchOptions): Promise<DispatchStats>;
  /** Run `dispatch` every `pollMs` (default 1000) until `stop()` is awaited. */
  start(options: DispatchOptions & { pollMs?: number; onError?: (err: unknown) => void }): { stop(): Promise<void> };
}

/** A row as the start of its attempt returns it: `last_error` is the previous attempt's. */
type StartedRow = { id: string; kind: string; key: string; payload: any; state: OutboxState; attempts: number | string; last_error: string | null };

/** How an attempt ended, fenced by the reservation's token. */
type Outcome =
  | { state: "completed" }
  | { state: "terminal_failure" | "manual_review"; message: string }
  | { state: "pending"; message: string; delayMs: number };

/** The statements of one SQL dialect; the dispatch state machine is shared. */
interface OutboxStore {
  enqueue(tx: object, message: OutboxMessage): Promise<boolean>;
  /** Reserve up to `batchSize` due rows (SKIP LOCKED) for `token`; their ids. */
  reserve(token: string, leaseMs: number, batchSize: number, kinds: string[] | null): Promise<string[]>;
  /** Count the attempt and renew the lease, if the row is still this token's; marks it in flight. */
  start(id: string, token: string, leaseMs: number): Promise<StartedRow | undefined>;
  /** Record an outcome; false when another dispatcher took the row over. */
  record(id: string, token: string, outcome: Outcome): Promise<boolean>;
}

function postgresOutboxStore(table: string, db: object | undefined, drizzleSql: any): OutboxStore {
  const q = (what: string) => queryOf(db, what, drizzleSql);
  return {
    async enqueue(tx, message) {
      const rows = await queryOf(tx, "enqueue()", drizzleSql)(
        `INSERT INTO ${table} (kind, key, payload) VALUES ($1, $2, $3::jsonb) ON CONFLICT (key) DO NOTHING RETURNING id::text AS id`,
        [message.kind, message.key, JSON.stringify(message.payload ?? null)],
      );
      return rows.length > 0;
    },
    async reserve(token, leaseMs, batchSize, kinds) {
      const rows = await q("dispatch()")(
        `UPDATE ${table} SET state = 'leased', lease_token = $1,
           lease_until = now() + ($2::bigint * interval '1 millisecond'), updated_at = now()
         WHERE id IN (
           SELECT id FROM ${table}
           WHERE ((state = 'pending' AND available_at <= now()) OR (state = 'leased' AND lease_until <= now()))
             AND ($4::text[] IS NULL OR kind = ANY($4::text[]))
           ORDER BY available_at, id
           LIMIT $3
           FOR UPDATE SKIP LOCKED)
         RETURNING id::text AS id`,
        [token, leaseMs, batchSize, kinds],
      );
      return rows.map((r) => String(r.id));
    },
    async start(id, token, leaseMs) {
      const rows = await q("dispatch()")(
        `UPDATE ${table} AS t SET attempts = t.attempts + 1, updated_at = now(),
           lease_until = now() + ($3::bigint * interval '1 millisecond'),
           last_error = '${IN_FLIGHT}' || (t.attempts + 1)::text
         FROM (SELECT id, last_error AS previous_error FROM ${table} WHERE id = $1::bigint) AS old
         WHERE t.id = old.id AND t.lease_token = $2 AND t.state = 'leased'
         RETURNING t.id::text AS id, t.kind, t.key, t.payload, t.state, t.attempts, old.previous_error AS last_error`,
        [id, token, leaseMs],
      );
      return rows[0];
    },
    async record(id, token, outcome) {
      const run = q("dispatch()");
      let rows: any[];
      if (outcome.state === "completed") {
        rows = await run(
          `UPDATE ${table} SET state = 'completed', completed_at = now(), lease_until = NULL, lease_token = NULL,
             last_error = NULL, updated_at = now() WHERE id = $1::bigint AND lease_token = $2 RETURNING id`,
          [id, token],
        );
      } else if (outcome.state === "pending") {
        rows = await run(
          `UPDATE ${table} SET state = 'pending', lease_until = NULL, lease_token = NULL, updated_at = now(),
             available_at = now() + ($3::bigint * interval '1 millisecond'), last_error = $4
           WHERE id = $1::bigint AND lease_token = $2 RETURNING id`,
          [id, token, outcome.delayMs, outcome.message],
        );
      } else {
        rows = await run(
          `UPDATE ${table} SET state = '${outcome.state}', lease_until = NULL, lease_token = NULL, updated_at = now(),
             last_error = $3 WHERE id = $1::bigint AND lease_token = $2 RETURNING id`,
          [id, token, outcome.message],
        );
      }
      return rows.length === 1;
    },
  };
}

/** How many times a MySQL reservation whose candidates were all taken meanwhile looks again. */
const RESERVE_ROUNDS = 8;

/** MySQL 8 / MariaDB 10.6+: reservations and attempt starts are short transactions (no UPDATE ... RETURNING). */
function mysqlOutboxStore(table: string, db: object | undefined, drizzleSql: any): OutboxStore {
  const lease = "NOW(6) + INTERVAL ? MICROSECOND";
  const needDb = () => {
    if (!db) throw new TypeError("@retrysafe/guard: createOutbox({ db }) is needed for dispatch()");
    return db;
  };
  return {
    async enqueue(tx, message) {
      const n = await mysqlExec(tx, "enqueue()", drizzleSql).affected(
        `INSERT IGNORE INTO ${table} (kind, \`key\`, payload) VALUES (?, ?, ?)`,
        [message.kind, message.key, JSON.stringify(message.payload ?? null)],
      );
      return n === 1;
    },
    async reserve(token, leaseMs, batchSize, kinds) {
      const filter = mysqlKindsFilter(kinds);
      const due = `((state = 'pending' AND available_at <= NOW(6)) OR (state = 'leased' AND lease_until <= NOW(6)))`;
      const x = mysqlExec(needDb(), "dispatch()", drizzleSql);
      // Candidates first, without locks; then lock those by primary key. A locking read with
      // ORDER BY ... LIMIT would lock every row InnoDB sorts, so a second dispatcher would
      // skip them all and stop as if nothing were due.
      for (let round = 0; round < RESERVE_ROUNDS; round++) {
        const candidates = await x.rows(
          `SELECT id FROM ${table} WHERE ${due}${filter.clause} ORDER BY available_at, id LIMIT ${Math.max(1, Math.floor(batchSize))}`,
          filter.params,
        );
        if (candidates.length === 0) return [];
        const ids = await mysqlTransaction(needDb(), drizzleSql, async (_tx, t) => {
          const marks = candidates.map(() => "?").join(", ");
          const locked = await t.rows(`SELECT id FROM ${table} WHERE id IN (${marks}) AND ${due} FOR UPDATE SKIP LOCKED`, candidates.map((r) => r.id));
          if (locked.length === 0) return [];
          const lockedIds = locked.map((r) => String(r.id));
          await t.affected(
            `UPDATE ${table} SET state = 'leased', lease_token = ?, lease_until = ${lease}, updated_at = NOW(6)
             WHERE id IN (${lockedIds.map(() => "?").join(", ")})`,
            [token, leaseMs * 1000, ...lockedIds],
          );
          return lockedIds;
        });
        if (ids.length > 0) return ids;
        // every candidate was taken while we looked: look again
      }
      return [];
    },
    start(id, token, leaseMs) {
      return mysqlTransaction(needDb(), drizzleSql, async (_tx, t) => {
        const rows = await t.rows(
          `SELECT id, kind, \`key\`, CAST(payload AS CHAR) AS payload, state, attempts, last_error FROM ${table}
           WHERE id = ? AND lease_token = ? AND state = 'leased' FOR UPDATE`,
          [id, token],
        );
        if (rows.length === 0) return undefined;
        const old = rows[0];
        const attempts = Number(old.attempts) + 1;
        await t.affected(
          `UPDATE ${table} SET attempts = ?, updated_at = NOW(6), lease_until = ${lease}, last_error = ? WHERE id = ?`,
          [attempts, leaseMs * 1000, `${IN_FLIGHT}${attempts}`, id],
        );
        return {
          id: String(old.id), kind: mysqlText(old.kind)!, key: mysqlText(old.key)!, payload: mysqlJson(old.payload),
          state: "leased", attempts, last_error: mysqlText(old.last_error),
        };
      });
    },
    async record(id, token, outcome) {
      const x = mysqlExec(needDb(), "dispatch()", drizzleSql);
      if (outcome.state === "completed") {
        return (
          (await x.affected(
            `UPDATE ${table} SET state = 'completed', completed_at = NOW(6), lease_until = NULL, lease_token = NULL,
               last_error = NULL, updated_at = NOW(6) WHERE id = ? AND lease_token = ?`,
            [id, token],
          )) === 1
        );
      }
      if (outcome.state === "pending") {
        return (
          (await x.affected(
            `UPDATE ${table} SET state = 'pending', lease_until = NULL, lease_token = NULL, updated_at = NOW(6),
               available_at = ${lease}, last_error = ? WHERE id = ? AND lease_token = ?`,
            [outcome.delayMs * 1000, outcome.message, id, token],
          )) === 1
        );
      }
      return (
        (await x.affected(
          `UPDATE ${table} SET state = ?, lease_until = NULL, lease_token = NULL, updated_at = NOW(6), last_error = ?
           WHERE id = ? AND lease_token = ?`,
          [outcome.state, outcome.message, id, token],
        )) === 1
      );
    },
  };
}

/**
 * A transactional outbox (rows: pending -> leased -> completed | terminal_failure).
 * `enqueue` inside the guard's transaction; `dispatch` leases rows with
 * `FOR UPDATE SKIP LOCKED`, sends each with its stable key as the idempotency key,
 * retries transient/ambiguous failures with bounded exponential backoff and full
 * jitter (honouring Retry-After), and parks exhausted or permanent ones as
 * `terminal_failure` with the last error. A crashed dispatcher's rows are leased
 * again once `lease_until` passes.
 */
export function createOutbox(options: OutboxOptions = {}): Outbox {
  const fixed = options.dialect ?? (options.db ? sqlDialectOf(options.db) : undefined);
  if (fixed !== undefined && fixed !== "postgresql" && fixed !== "mysql") throw new TypeError(`@retrysafe/guard: createOutbox dialect must be "postgresql" or "mysql", got ${JSON.stringify(fixed)}`);
  const name = options.table ?? "retrysafe_outbox";
  const stores = {
    postgresql: () => postgresOutboxStore(quoteTable(name), options.db, options.sql),
    mysql: () => mysqlOutboxStore(quoteMysqlTable(name), options.db, options.sql),
  };
  const dialect: SqlDialect = fixed ?? "postgresql";
  const store = stores[dialect]();
  // without a db, each enqueue's transaction tells the dialect
  const storeFor = (tx: object): OutboxStore => (fixed !== undefined ? store : sqlDialectOf(tx) === "mysql" ? (mysqlStore ??= stores.mysql()) : store);
  let mysqlStore: OutboxStore | undefined;
  const table = dialect === "mysql" ? quoteMysqlTable(name) : quoteTable(name);

  async function dispatch(opts: DispatchOptions): Promise<DispatchStats> {
    if (typeof opts?.send !== "function") throw new TypeError("@retrysafe/guard: outbox.dispatch needs { send }");
    if (!options.db) throw new TypeError("@retrysafe/guard: createOutbox({ db }) is needed for dispatch()");
    const maxAttempts = opts.maxAttempts ?? 5;
    const baseDelayMs = opts.baseDelayMs ?? 1000;
    const maxDelayMs = opts.maxDelayMs ?? 5 * 60_000;
    const leaseMs = opts.leaseMs ?? 60_000;
    const batchSize = opts.batchSize ?? 10;
    const classify = opts.classify ?? classifyError;
    const random = opts.random ?? Math.random;
    const stats: DispatchStats = { leased: 0, completed: 0, retried: 0, failed: 0, lost: 0, manual: 0 };
    const policyOf = (kind: string): EffectPolicy => opts.policies?.[kind] ?? "idempotent";
    for (const [kind, p] of Object.entries(opts.policies ?? {})) {
      if (p !== "idempotent" && p !== "reconcilable" && p !== "manual") throw new TypeError(`@retrysafe/guard: outbox policy for ${JSON.stringify(kind)} must be idempotent, reconcilable or manual, got ${JSON.stringify(p)}`);
      if (p === "reconcilable" && typeof opts.checkRemote !== "function") throw new TypeError(`@retrysafe/guard: kind ${JSON.stringify(kind)} is reconcilable: dispatch needs { checkRemote }`);
    }
    const kinds = opts.kinds && opts.kinds.length > 0 ? opts.kinds : null;

    for (let round = 0; opts.maxRounds === undefined || round < opts.maxRounds; round++) {
      const token = randomBytes(12).toString("hex");
      // The batch only reserves rows; each row's attempt (and a fresh lease) starts when its
      // own send starts, so a row waiting behind slow sends is never sent by two dispatchers.
      const reserved = await store.reserve(token, leaseMs, batchSize, kinds);
      if (reserved.length === 0) break;
      stats.leased += reserved.length;

      // UPDATE ... RETURNING gives no order: send oldest first
      const ids = reserved.sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0));
      for (const id of ids) {
        // last_error says "in flight" until an outcome is recorded: a later dispatcher that
        // finds it knows this attempt died mid-send, an ambiguous outcome
        const raw = await store.start(id, token, leaseMs);
        if (!raw) {
          stats.lost++; // our reservation expired and another dispatcher has the row
          continue;
        }
        const row: OutboxRow = { ...raw, id: String(raw.id), attempts: Number(raw.attempts) };
        const diedMidSend = typeof row.last_error === "string" && row.last_error.startsWith(IN_FLIGHT);
        if (diedMidSend) row.last_error = `ambiguous: the dispatcher of attempt ${row.last_error!.slice(IN_FLIGHT.length)} died or timed out mid-send (lease expired)`;
        const record = async (outcome: Outcome, counter: "completed" | "retried" | "failed" | "manual") => {
          if (await store.record(row.id, token, outcome)) stats[counter]++;
          else stats.lost++; // fenced: another dispatcher took the row over while we sent
        };
        if (row.attempts > maxAttempts) {
          // the previous holder's lease expired (it crashed or hung) and the budget is spent
          await record(
            { state: "terminal_failure", message: `attempts exhausted (${maxAttempts}); last: ${row.last_error ?? "lease expired (dispatcher crashed or timed out)"}`.slice(0, 2000) },
            "failed",
          );
          continue;
        }
        const park = (why: string) => record({ state: "manual_review", message: why.slice(0, 2000) }, "manual");
        const markCompleted = () => record({ state: "completed" }, "completed");
        /** After an ambiguous outcome: may this row be sent (again)? Parks or completes it otherwise. */
        const settleAmbiguous = async (why: string): Promise<"send" | "settled"> => {
          const policy = policyOf(row.kind);
          if (policy === "idempotent") return "send";
          if (policy === "manual") {
            await park(`manual_review: ${why}`);
            return "settled";
          }
          let remote: RemoteState;
          try {
            remote = await opts.checkRemote!(row);
          } catch (err) {
            await park(`manual_review: ${why}; checkRemote failed: ${describeError(err)}`);
            return "settled";
          }
          if (remote === "done") {
            await markCompleted();
            return "settled";
          }
          if (remote === "not-done") return "send";
          await park(`manual_review: ${why}; checkRemote could not tell`);
          return "settled";
        };
        if (diedMidSend && (await settleAmbiguous(row.last_error!)) === "settled") continue;
        try {
          await opts.send(row, { idempotencyKey: row.key, attempt: row.attempts });
        } catch (err) {
          const cls = classify(err);
          const message = `${cls}: ${describeError(err)}`;
          if (cls === "ambiguous" && policyOf(row.kind) !== "idempotent") {
            if ((await settleAmbiguous(message)) === "settled") continue;
            // checkRemote says it did not happen: an ordinary retry below
          }
          if (cls === "permanent" || row.attempts >= maxAttempts) {
            await record({ state: "terminal_failure", message }, "failed");
          } else {
            const after = retryAfterMs(err);
            const delay = after !== undefined ? after : backoffMs(row.attempts, baseDelayMs, maxDelayMs, random);
            await record({ state: "pending", message, delayMs: delay }, "retried");
          }
          continue;
        }
        await markCompleted();
      }
    }
    return stats;
  }

  return {
    table,
    dialect,
    async enqueue(tx, message) {
      if (!message || typeof message.kind !== "string" || !message.kind) throw new TypeError("@retrysafe/guard: outbox.enqueue needs a kind");
      checkKey(message.key);
      return storeFor(tx).enqueue(tx, message);
    },
    dispatch,
    start: (opts) => pollUntilStopped(() => dispatch(opts), opts),
  };
}
