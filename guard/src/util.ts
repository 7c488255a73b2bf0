import { GuardKeyError } from "./errors.js";

const IDENT = /^[A-Za-z_][A-Za-z0-9_$]*$/;

/** Quote a table name, optionally schema-qualified ("schema.table"). Throws on anything else. */
export function quoteTable(name: string): string {
  if (typeof name !== "string" || name.length === 0) throw new Error("@retrysafe/guard: table name must be a non-empty string");
  const parts = name.split(".");
  if (parts.length > 2 || !parts.every((p) => IDENT.test(p))) {
    throw new Error(`@retrysafe/guard: invalid table name ${JSON.stringify(name)} (use letters, digits, _ and an optional schema prefix)`);
  }
  return parts.map((p) => `"${p}"`).join(".");
}

/** The longest key any guard accepts, in UTF-8 bytes (PostgreSQL's btree limit is ~2.7 KB, MySQL's index prefix 3072 bytes). */
export const MAX_KEY_BYTES = 512;

// a high surrogate not followed by a low one, or a low one not preceded by a high one
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * Refuse keys a store cannot keep or compare exactly: they would fail on every retry
 * (U+0000, over the length limit) or collide with another key (lone surrogates both
 * become U+FFFD in UTF-8).
 */
export function checkKey(key: unknown): string {
  if (typeof key !== "string") throw new GuardKeyError(key, `a key must be a non-empty string, got ${key === null ? "null" : typeof key}`);
  if (key.length === 0) throw new GuardKeyError(key, "a key must be a non-empty string");
  if (key === "undefined" || key === "null") throw new GuardKeyError(key, "a key must be a non-empty string, not the text of a missing value");
  if (key.trim().length === 0) throw new GuardKeyError(key, "a key must be a non-empty string, not whitespace only");
  if (key.includes("\u0000")) throw new GuardKeyError(key, "contains U+0000, which PostgreSQL text cannot store");
  const lone = LONE_SURROGATE.exec(key);
  if (lone) throw new GuardKeyError(key, `contains a lone surrogate at index ${lone.index} (it would collide with other keys as U+FFFD)`);
  const bytes = Buffer.byteLength(key, "utf8");
  if (bytes > MAX_KEY_BYTES) throw new GuardKeyError(key, `is ${bytes} UTF-8 bytes, over the ${MAX_KEY_BYTES}-byte limit (hash long keys, e.g. sha256)`);
  return key;
}

/** A unique violation from pg (23505), MySQL (1062), Prisma (P2002, or a raw query's driver adapter error) or Drizzle (wrapped in .cause). */
export function isUniqueViolation(err: unknown): boolean {
  let e: any = err;
  for (let i = 0; i < 4 && e; i++) {
    if (e.code === "23505" || e.code === "P2002" || e.code === "ER_DUP_ENTRY" || e.errno === 1062) return true;
    const adapter = e.meta?.driverAdapterError?.cause;
    if (e.meta && (e.meta.code === "23505" || adapter?.originalCode === "23505" || adapter?.originalCode === "1062" || adapter?.kind === "UniqueConstraintViolation")) return true;
    e = e.cause;
  }
  return false;
}

/** A serialization failure or deadlock (40001 / 40P01, Prisma P2034, MySQL 1213): the transaction may be retried from the start. */
export function isRetryableConflict(err: unknown): boolean {
  let e: any = err;
  for (let i = 0; i < 4 && e; i++) {
    const code = e.code ?? e.meta?.code;
    if (code === "40001" || code === "40P01" || code === "P2034" || code === "ER_LOCK_DEADLOCK" || e.errno === 1213) return true;
    const original = e.meta?.driverAdapterError?.cause?.originalCode;
    if (original === "40001" || original === "40P01" || original === "1213") return true;
    if (typeof e.message === "string" && /\bCode: `(40001|40P01|1213)`/.test(e.message)) return true;
    e = e.cause;
  }
  return false;
}

/** Thrown inside the claim's transaction when the claim hit a serialization conflict before the callback ran. */
export class ClaimConflict extends Error {
  constructor(readonly original: unknown) {
    super("@retrysafe/guard: claim conflict (internal; retried)");
    this.name = "ClaimConflict";
  }
}

/** How many times a claim that hit a serialization conflict is tried again before the error propagates. */
export const CLAIM_CONFLICT_RETRIES = 8;

/** A short random pause before retrying a conflicted claim, so retries do not collide again in lockstep. */
export function conflictPause(attempt: number): Promise<void> {
  const ms = Math.random() * Math.min(200, 5 * 2 ** attempt);
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * Run one claim attempt, again after a serialization conflict on the claim (REPEATABLE
 * READ / SERIALIZABLE: a concurrent claimer committed the key after this snapshot). The
 * fresh snapshot then sees the committed claim, so the caller gets `duplicate`. Only the
 * claim is retried: ClaimConflict is thrown before the callback runs.
 */
export async function retryClaimConflicts<R>(attempt: () => Promise<R>): Promise<R> {
  for (let n = 0; ; n++) {
    try {
      return await attempt();
    } catch (err) {
      if (!(err instanceof ClaimConflict)) throw err;
      if (n >= CLAIM_CONFLICT_RETRIES) throw err.original;
      await conflictPause(n);
    }
  }
}

/**
 * After the callback returned, still inside its transaction: prove the transaction is
 * alive and still holds the claim. In PostgreSQL an error the callback swallowed leaves
 * the transaction aborted and COMMIT silently rolls back; this query then fails (25P02).
 * A raw ROLLBACK/COMMIT issued by the callback leaves no claim row to see.
 */
export function claimStillHeldSql(table: string, placeholder: string): string {
  return `SELECT key FROM ${table} WHERE key = ${placeholder}`;
}

/** Thrown inside a transaction to roll it back when the claim already exists. */
export class DuplicateClaim extends Error {
  constructor() {
    super("@retrysafe/guard: duplicate claim (internal; rolled back)");
    this.name = "DuplicateClaim";
  }
}

let sqlTag: Promise<any> | undefined;
/** Drizzle's `sql` tag from the user's drizzle-orm (an optional peer dependency), loaded on first use. */
export function loadDrizzleSql(): Promise<any> {
  sqlTag ??= import("drizzle-orm").then((m: any) => m.sql ?? m.default?.sql);
  return sqlTag;
}

/**
 * Runs `pass` every `pollMs` (default 1 s) until `stop()`, which wakes a sleeping loop and
 * resolves once the pass in flight has finished. A pass that throws goes to `onError` and the
 * loop goes on (the inbox's and the outbox's `start`).
 */
export function pollUntilStopped(
  pass: () => Promise<unknown>,
  opts: { pollMs?: number; onError?: (err: unknown) => void },
): { stop(): Promise<void> } {
  const pollMs = opts.pollMs ?? 1000;
  let stopped = false;
  let wake: (() => void) | undefined;
  const loop = (async () => {
    while (!stopped) {
      try {
        await pass();
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
}
