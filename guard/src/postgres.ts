import type { Guard, GuardRunResult } from "./types.js";
import { GuardCommitError } from "./errors.js";
import { compareFingerprints, fingerprintFor, isMissingFingerprintColumn, missingFingerprintColumn, type RunOptions } from "./fingerprint.js";
import { checkKey, claimStillHeldSql, ClaimConflict, isRetryableConflict, isUniqueViolation, quoteTable, retryClaimConflicts } from "./util.js";

/** The part of a node-postgres client the guard uses. */
export interface PgClientLike {
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null; rows: any[] }>;
  release(err?: Error | boolean): void;
}

/** The part of a node-postgres `Pool` the guard uses. */
export interface PgPoolLike {
  connect(): Promise<PgClientLike> | Promise<any>;
}

/** The client type a pool's `connect()` hands out (pg's `PoolClient` for a `pg.Pool`). */
export type PoolClientOf<P> = P extends {
  connect(callback: (err: any, client: infer C, done: any) => void): void;
}
  ? unknown extends C
    ? P extends { connect(): Promise<infer D> }
      ? D
      : PgClientLike
    : Exclude<C, undefined>
  : P extends { connect(): Promise<infer C> }
    ? C
    : PgClientLike;

export interface PostgresGuardOptions {
  /** Claim table (default `processed_events`), optionally `schema.table`. */
  table?: string;
  /** Optional `SET TRANSACTION ISOLATION LEVEL ...` (default: the server's, READ COMMITTED). */
  isolationLevel?: "read committed" | "repeatable read" | "serializable";
}

/**
 * A guard over a node-postgres `Pool`: takes one client from `pool.connect()`, runs
 * BEGIN; INSERT claim ON CONFLICT DO NOTHING; your callback(client); COMMIT.
 * A concurrent claimer blocks on the primary key until the first transaction ends,
 * then sees `duplicate` (first committed) or proceeds (first rolled back).
 */
export function postgresGuard<P extends PgPoolLike>(pool: P, options: PostgresGuardOptions = {}): Guard<PoolClientOf<P>> {
  if (!pool || typeof (pool as any).connect !== "function") {
    throw new TypeError("@retrysafe/guard: postgresGuard(pool) needs a pg Pool (an object with connect())");
  }
  const table = quoteTable(options.table ?? "processed_events");
  const claimSql = `INSERT INTO ${table} (key) VALUES ($1) ON CONFLICT DO NOTHING RETURNING key`;
  // only with { payload }: a 0.1 table without the column keeps working for plain run()
  const claimWithFingerprintSql = `INSERT INTO ${table} (key, fingerprint) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING key`;
  const storedFingerprintSql = `SELECT fingerprint FROM ${table} WHERE key = $1`;
  const begin = options.isolationLevel ? `BEGIN ISOLATION LEVEL ${options.isolationLevel.toUpperCase()}` : "BEGIN";
  if (options.isolationLevel && !/^(read committed|repeatable read|serializable)$/.test(options.isolationLevel)) {
    throw new Error(`@retrysafe/guard: invalid isolationLevel ${JSON.stringify(options.isolationLevel)}`);
  }

  const probeSql = claimStillHeldSql(table, "$1");

  async function attempt<T>(key: string, fn: (tx: PoolClientOf<P>) => Promise<T> | T, fingerprint: string | null, runOptions?: RunOptions): Promise<GuardRunResult<T>> {
    const client = (await pool.connect()) as PgClientLike;
    let broken: Error | undefined;
    try {
      await client.query(begin);
      let claimed: boolean;
      try {
        const r = fingerprint === null ? await client.query(claimSql, [key]) : await client.query(claimWithFingerprintSql, [key, fingerprint]);
        claimed = (r.rowCount ?? r.rows.length) > 0;
      } catch (err) {
        if (isRetryableConflict(err)) throw new ClaimConflict(err);
        if (fingerprint !== null && isMissingFingerprintColumn(err)) throw missingFingerprintColumn(key, table, err);
        if (!isUniqueViolation(err)) throw err;
        claimed = false;
      }
      if (!claimed) {
        await client.query("ROLLBACK");
        if (fingerprint !== null) {
          // out of the transaction: a fresh snapshot that sees the winner's committed claim
          const stored = (await client.query(storedFingerprintSql, [key])).rows[0]?.fingerprint;
          if (compareFingerprints(key, stored, fingerprint, runOptions) === "mismatch") return { status: "mismatch" };
        }
        return { status: "duplicate" };
      }
      const result = await fn(client as PoolClientOf<P>);
      let held: { rows: unknown[] };
      try {
        held = await client.query(probeSql, [key]);
      } catch (err) {
        throw new GuardCommitError(key, "the transaction was aborted by a statement error inside the callback (caught and ignored?)", err);
      }
      if (held.rows.length !== 1) throw new GuardCommitError(key, "the claim is gone from the transaction (did the callback run COMMIT or ROLLBACK?)");
      let committed: { command?: string };
      try {
        committed = (await client.query("COMMIT")) as { command?: string };
      } catch (err) {
        throw new GuardCommitError(key, "COMMIT failed", err);
      }
      // PostgreSQL answers COMMIT of an aborted transaction with ROLLBACK and no error
      if (committed?.command === "ROLLBACK") throw new GuardCommitError(key, "PostgreSQL rolled the transaction back at COMMIT");
      return { status: "processed", result };
    } catch (err) {
      try {
        await client.query("ROLLBACK");
      } catch (rollbackErr) {
        // the connection is unusable: destroy it instead of returning it to the pool
        broken = rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr));
      }
      throw err;
    } finally {
      client.release(broken);
    }
  }

  return {
    async run<T>(key: string, fn: (tx: PoolClientOf<P>) => Promise<T> | T, runOptions?: RunOptions): Promise<GuardRunResult<T>> {
      checkKey(key);
      const fingerprint = fingerprintFor(runOptions);
      return retryClaimConflicts(() => attempt(key, fn, fingerprint, runOptions));
    },
  } as Guard<PoolClientOf<P>>;
}
