import type { Guard, GuardRunResult } from "./types.js";
import { describeKey, GuardCommitError, GuardError } from "./errors.js";
import { compareFingerprints, fingerprintFor, isMissingFingerprintColumn, missingFingerprintColumn, type RunOptions } from "./fingerprint.js";
import { checkKey, ClaimConflict, isRetryableConflict, isUniqueViolation, retryClaimConflicts } from "./util.js";

/** A mysql2 connection from `pool.getConnection()` (mysql2/promise). */
export interface MysqlConnectionLike {
  query(sql: string, values?: unknown[]): Promise<any>;
  release(): void;
}

/** A mysql2/promise `Pool` (`mysql.createPool(...)` from "mysql2/promise", or `pool.promise()`). */
export interface MysqlPoolLike {
  getConnection(): Promise<any>;
}

export interface MysqlGuardOptions {
  /** Claim table (default `processed_events`), optionally `database.table`. */
  table?: string;
  /** `SET TRANSACTION ISOLATION LEVEL ...` before each claim (default: the server's, REPEATABLE READ on MySQL/MariaDB). */
  isolationLevel?: "read committed" | "repeatable read" | "serializable";
}

const IDENT = /^[A-Za-z_][A-Za-z0-9_$]*$/;

/** Quote a MySQL table name (`db`.`table`); throws on anything but letters, digits, `_` and `$`. */
export function quoteMysqlTable(name: string): string {
  const parts = typeof name === "string" ? name.split(".") : [];
  if (parts.length < 1 || parts.length > 2 || !parts.every((p) => IDENT.test(p))) {
    throw new Error(`@retrysafe/guard: invalid table name ${JSON.stringify(name)} (use letters, digits, _ and an optional database prefix)`);
  }
  return parts.map((p) => `\`${p}\``).join(".");
}

/**
 * A guard over a mysql2/promise pool (MySQL 8 or MariaDB 10.5+): one connection,
 * START TRANSACTION; INSERT IGNORE the claim (0 affected rows on a duplicate); your
 * callback(connection); COMMIT. A concurrent claimer blocks on the primary key until the
 * first transaction ends, then sees the duplicate.
 */
export function mysqlGuard<P extends MysqlPoolLike>(pool: P, options: MysqlGuardOptions = {}): Guard<MysqlConnectionOf<P>> {
  if (!pool || typeof (pool as any).getConnection !== "function") {
    throw new TypeError("@retrysafe/guard: mysqlGuard(pool) needs a mysql2/promise Pool (an object with getConnection())");
  }
  const table = quoteMysqlTable(options.table ?? "processed_events");
  if (options.isolationLevel && !/^(read committed|repeatable read|serializable)$/.test(options.isolationLevel)) {
    throw new Error(`@retrysafe/guard: invalid isolationLevel ${JSON.stringify(options.isolationLevel)}`);
  }
  // INSERT IGNORE: 0 affected rows on a duplicate whatever the client's FOUND_ROWS flag
  // (mysql2 sets it, which makes ON DUPLICATE KEY UPDATE report 1 either way). IGNORE also
  // turns a truncation into a warning, so a claim stored with warnings is refused below.
  const claimSql = `INSERT IGNORE INTO ${table} (\`key\`) VALUES (?)`;
  // only with { payload }: a 0.1 table without the column keeps working for plain run()
  const claimWithFingerprintSql = `INSERT IGNORE INTO ${table} (\`key\`, fingerprint) VALUES (?, ?)`;
  const storedFingerprintSql = `SELECT fingerprint FROM ${table} WHERE \`key\` = ?`;
  const probeSql = `SELECT \`key\` FROM ${table} WHERE \`key\` = ?`;

  async function attempt<T>(key: string, fn: (tx: MysqlConnectionOf<P>) => Promise<T> | T, fingerprint: string | null, runOptions?: RunOptions): Promise<GuardRunResult<T>> {
    const conn = (await pool.getConnection()) as MysqlConnectionLike & { destroy?: () => void };
    let broken = false;
    try {
      if (options.isolationLevel) await conn.query(`SET TRANSACTION ISOLATION LEVEL ${options.isolationLevel.toUpperCase()}`);
      await conn.query("START TRANSACTION");
      let claimed: boolean;
      try {
        const [r] = fingerprint === null ? await conn.query(claimSql, [key]) : await conn.query(claimWithFingerprintSql, [key, fingerprint]);
        claimed = Number(r?.affectedRows) === 1;
        if (claimed && Number(r?.warningStatus ?? 0) > 0) {
          throw new GuardError(`@retrysafe/guard: the claim for key ${describeKey(key)} was stored with warnings (is the key column narrower than VARBINARY(512)?)`, key);
        }
      } catch (err) {
        if (err instanceof GuardError) throw err;
        if (isRetryableConflict(err)) throw new ClaimConflict(err);
        if (fingerprint !== null && isMissingFingerprintColumn(err)) throw missingFingerprintColumn(key, table, err);
        if (!isUniqueViolation(err)) throw err;
        claimed = false;
      }
      if (!claimed) {
        await conn.query("ROLLBACK");
        if (fingerprint !== null) {
          // autocommit now: this read sees the winner's committed claim
          const [rows] = await conn.query(storedFingerprintSql, [key]);
          if (compareFingerprints(key, rows?.[0]?.fingerprint, fingerprint, runOptions) === "mismatch") return { status: "mismatch" };
        }
        return { status: "duplicate" };
      }
      const result = await fn(conn as MysqlConnectionOf<P>);
      // InnoDB rolls the whole transaction back on a deadlock: a swallowed one leaves no claim
      const [held] = await conn.query(probeSql, [key]);
      if (!Array.isArray(held) || held.length !== 1) {
        throw new GuardCommitError(key, "the claim is gone from the transaction (a deadlock or ROLLBACK inside the callback rolled it back)");
      }
      try {
        await conn.query("COMMIT");
      } catch (err) {
        throw new GuardCommitError(key, "COMMIT failed", err);
      }
      return { status: "processed", result };
    } catch (err) {
      try {
        await conn.query("ROLLBACK");
      } catch {
        broken = true;
      }
      throw err;
    } finally {
      if (broken && typeof conn.destroy === "function") conn.destroy();
      else conn.release();
    }
  }

  return {
    async run<T>(key: string, fn: (tx: MysqlConnectionOf<P>) => Promise<T> | T, runOptions?: RunOptions): Promise<GuardRunResult<T>> {
      checkKey(key);
      const fingerprint = fingerprintFor(runOptions);
      return retryClaimConflicts(() => attempt(key, fn, fingerprint, runOptions));
    },
  } as Guard<MysqlConnectionOf<P>>;
}

/** The connection type a mysql2 pool's `getConnection()` resolves to. */
export type MysqlConnectionOf<P> = P extends { getConnection(): Promise<infer C> } ? C : MysqlConnectionLike;
