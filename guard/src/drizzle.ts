import type { Guard, GuardResult, GuardRunResult } from "./types.js";
import { describeKey, GuardCommitError, GuardError } from "./errors.js";
import { compareFingerprints, fingerprintFor, isMissingFingerprintColumn, missingFingerprintColumn, type RunOptions } from "./fingerprint.js";
import { quoteMysqlTable } from "./mysql.js";
import { checkKey, ClaimConflict, DuplicateClaim, isRetryableConflict, isUniqueViolation, loadDrizzleSql, quoteTable, retryClaimConflicts } from "./util.js";

/** The part of a Drizzle database the guard uses. */
export interface DrizzleLike {
  transaction(fn: (tx: any) => Promise<any>, config?: any): Promise<any>;
}

/** The transaction type of a Drizzle database (`NodePgTransaction<...>` for node-postgres). */
export type DrizzleTx<D> = D extends { transaction(fn: (tx: infer Tx) => Promise<any>, ...rest: any[]): Promise<any> } ? Tx : any;

export interface DrizzleGuardOptions {
  /** Claim table (default `processed_events`), optionally `schema.table`. */
  table?: string;
  /** Passed to `db.transaction(fn, config)`, e.g. `{ isolationLevel: "serializable" }`. */
  transaction?: Record<string, unknown>;
  /**
   * Drizzle's `sql` tag. By default the guard loads it from your `drizzle-orm`
   * (an optional peer dependency); pass it when a bundler cannot resolve that.
   */
  sql?: any;
  /** `"postgresql"` or `"mysql"` (MySQL / MariaDB through drizzle-orm/mysql2). Default: read from the db's dialect. */
  dialect?: "postgresql" | "mysql";
}

/** Drizzle marks its classes with a static entity kind ("MySqlDialect", "PgDialect", ...). */
function dialectOf(db: any): "postgresql" | "mysql" {
  const kind = db?.dialect?.constructor?.[Symbol.for("drizzle:entityKind")];
  return typeof kind === "string" && kind.startsWith("MySql") ? "mysql" : "postgresql";
}


/**
 * A guard over a Drizzle PostgreSQL database (node-postgres or postgres.js driver):
 * `db.transaction(async (tx) => { INSERT claim ON CONFLICT DO NOTHING RETURNING; your callback(tx) })`.
 */
export function drizzleGuard<D extends DrizzleLike>(db: D, options: DrizzleGuardOptions = {}): Guard<DrizzleTx<D>> {
  if (!db || typeof (db as any).transaction !== "function") {
    throw new TypeError("@retrysafe/guard: drizzleGuard(db) needs a Drizzle database (an object with transaction())");
  }
  const mysql = (options.dialect ?? dialectOf(db)) === "mysql";
  const table = mysql ? quoteMysqlTable(options.table ?? "processed_events") : quoteTable(options.table ?? "processed_events");

  // drizzle-orm/mysql2: execute() resolves to mysql2's [result, fields]
  async function runMysql<T>(sql: any, key: string, fn: (tx: DrizzleTx<D>) => Promise<T> | T, fingerprint: string | null): Promise<GuardResult<T>> {
    const first = (r: any): any => (Array.isArray(r) ? r[0] : r);
    return retryClaimConflicts(async () => {
      try {
        return await db.transaction(async (tx: any) => {
          try {
            const header = first(
              await tx.execute(
                fingerprint === null
                  ? sql`INSERT IGNORE INTO ${sql.raw(table)} (\`key\`) VALUES (${key})`
                  : sql`INSERT IGNORE INTO ${sql.raw(table)} (\`key\`, fingerprint) VALUES (${key}, ${fingerprint})`,
              ),
            );
            if (Number(header?.affectedRows) !== 1) throw new DuplicateClaim(); // rolls back this transaction
            if (Number(header?.warningStatus ?? 0) > 0) {
              throw new GuardError(`@retrysafe/guard: the claim for key ${describeKey(key)} was stored with warnings (is the key column narrower than VARBINARY(512)?)`, key);
            }
          } catch (err) {
            if (err instanceof DuplicateClaim || err instanceof GuardError) throw err;
            if (isRetryableConflict(err)) throw new ClaimConflict(err);
            if (isUniqueViolation(err)) throw new DuplicateClaim();
            if (fingerprint !== null && isMissingFingerprintColumn(err)) throw missingFingerprintColumn(key, table, err);
            throw err;
          }
          const result = await fn(tx as DrizzleTx<D>);
          const held = first(await tx.execute(sql`SELECT \`key\` FROM ${sql.raw(table)} WHERE \`key\` = ${key}`));
          if (!Array.isArray(held) || held.length !== 1) {
            throw new GuardCommitError(key, "the claim is gone from the transaction (a deadlock or ROLLBACK inside the callback rolled it back)");
          }
          return { status: "processed", result } as GuardResult<T>;
        }, options.transaction);
      } catch (err) {
        if (err instanceof DuplicateClaim) return { status: "duplicate" } as GuardResult<T>;
        throw err;
      }
    });
  }

  /** The fingerprint stored with an existing claim, read outside any transaction (the winner's commit is visible). */
  async function storedFingerprint(sql: any, key: string): Promise<unknown> {
    const r: any = await (db as any).execute(
      mysql ? sql`SELECT fingerprint FROM ${sql.raw(table)} WHERE \`key\` = ${key}` : sql`SELECT fingerprint FROM ${sql.raw(table)} WHERE key = ${key}`,
    );
    const rows = mysql ? (Array.isArray(r) ? r[0] : r) : Array.isArray(r) ? r : r?.rows;
    return Array.isArray(rows) ? rows[0]?.fingerprint : undefined;
  }

  return {
    async run<T>(key: string, fn: (tx: DrizzleTx<D>) => Promise<T> | T, runOptions?: RunOptions): Promise<GuardRunResult<T>> {
      checkKey(key);
      const fingerprint = fingerprintFor(runOptions);
      const sql = options.sql ?? (await loadDrizzleSql());
      const result = mysql ? await runMysql(sql, key, fn, fingerprint) : await runPostgres(sql, key, fn, fingerprint);
      if (result.status === "duplicate" && fingerprint !== null) {
        if (compareFingerprints(key, await storedFingerprint(sql, key), fingerprint, runOptions) === "mismatch") return { status: "mismatch" };
      }
      return result;
    },
  } as Guard<DrizzleTx<D>>;

  async function runPostgres<T>(sql: any, key: string, fn: (tx: DrizzleTx<D>) => Promise<T> | T, fingerprint: string | null): Promise<GuardResult<T>> {
    const rowsOf = (r: any): unknown[] => (Array.isArray(r) ? r : (r?.rows ?? []));
    return retryClaimConflicts(async () => {
      try {
        return await db.transaction(async (tx: any) => {
          let rows: unknown[];
          try {
            rows = rowsOf(
              await tx.execute(
                fingerprint === null
                  ? sql`INSERT INTO ${sql.raw(table)} (key) VALUES (${key}) ON CONFLICT DO NOTHING RETURNING key`
                  : sql`INSERT INTO ${sql.raw(table)} (key, fingerprint) VALUES (${key}, ${fingerprint}) ON CONFLICT DO NOTHING RETURNING key`,
              ),
            );
          } catch (err) {
            if (isRetryableConflict(err)) throw new ClaimConflict(err);
            if (isUniqueViolation(err)) throw new DuplicateClaim();
            if (fingerprint !== null && isMissingFingerprintColumn(err)) throw missingFingerprintColumn(key, table, err);
            throw err;
          }
          if (rows.length === 0) throw new DuplicateClaim(); // rolls back this transaction
          const result = await fn(tx as DrizzleTx<D>);
          let held: unknown[];
          try {
            held = rowsOf(await tx.execute(sql`SELECT key FROM ${sql.raw(table)} WHERE key = ${key}`));
          } catch (err) {
            throw new GuardCommitError(key, "the transaction was aborted by a statement error inside the callback (caught and ignored?)", err);
          }
          if (held.length !== 1) throw new GuardCommitError(key, "the claim is gone from the transaction");
          return { status: "processed", result } as GuardResult<T>;
        }, options.transaction);
      } catch (err) {
        if (err instanceof DuplicateClaim) return { status: "duplicate" } as GuardResult<T>;
        throw err;
      }
    });
  }
}
