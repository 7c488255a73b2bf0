import type { Guard, GuardResult, GuardRunResult } from "./types.js";
import { describeKey, GuardCommitError, GuardError } from "./errors.js";
import { compareFingerprints, fingerprintFor, isMissingFingerprintColumn, missingFingerprintColumn, type RunOptions } from "./fingerprint.js";
import { quoteMysqlTable } from "./mysql.js";
import { checkKey, ClaimConflict, DuplicateClaim, isRetryableConflict, isUniqueViolation, quoteTable, retryClaimConflicts } from "./util.js";

/** The part of a Prisma client the guard uses (interactive `$transaction`). */
export interface PrismaLike {
  $transaction(fn: (tx: any) => Promise<any>, options?: any): Promise<any>;
}

/** Prisma's transaction client: the client without `$connect`, `$transaction`, ... (as `Prisma.TransactionClient`). */
export type PrismaTx<P> = Omit<P, "$connect" | "$disconnect" | "$on" | "$transaction" | "$extends" | "$use">;

export interface PrismaGuardOptions {
  /** Claim table (default `processed_events`), optionally `schema.table`. */
  table?: string;
  /** Passed to `prisma.$transaction(fn, options)`: `{ maxWait, timeout, isolationLevel }`. */
  transaction?: { maxWait?: number; timeout?: number; isolationLevel?: string };
  /**
   * `"postgresql"` or `"mysql"` (MySQL 8 / MariaDB, e.g. through `@prisma/adapter-mariadb`).
   * Default: the client's own provider (`provider` in `schema.prisma`).
   */
  dialect?: "postgresql" | "mysql";
}

/** The generated client records its datasource provider ("postgresql", "mysql", ...). */
function providerOf(prisma: any): "postgresql" | "mysql" {
  const provider = prisma?._activeProvider ?? prisma?._engineConfig?.activeProvider;
  return provider === "mysql" ? "mysql" : "postgresql";
}

interface Dialect {
  table: string;
  claim: string;
  claimWithFingerprint: string;
  held: string;
  storedFingerprint: string;
}

function dialectSql(mysql: boolean, tableName: string): Dialect {
  if (mysql) {
    const table = quoteMysqlTable(tableName);
    // A plain INSERT, not INSERT IGNORE: Prisma does not show the statement's warnings, and
    // IGNORE would turn a truncated key into a warning. InnoDB rolls back only the failed
    // statement, so the duplicate-key error leaves the transaction usable.
    return {
      table,
      claim: `INSERT INTO ${table} (\`key\`) VALUES (?)`,
      claimWithFingerprint: `INSERT INTO ${table} (\`key\`, fingerprint) VALUES (?, ?)`,
      held: `SELECT \`key\` FROM ${table} WHERE \`key\` = ?`,
      storedFingerprint: `SELECT fingerprint FROM ${table} WHERE \`key\` = ?`,
    };
  }
  const table = quoteTable(tableName);
  return {
    table,
    claim: `INSERT INTO ${table} (key) VALUES ($1) ON CONFLICT DO NOTHING`,
    claimWithFingerprint: `INSERT INTO ${table} (key, fingerprint) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
    held: `SELECT key FROM ${table} WHERE key = $1`,
    storedFingerprint: `SELECT fingerprint FROM ${table} WHERE key = $1`,
  };
}

/**
 * A guard over a Prisma client (Prisma 7 with a driver adapter: `@prisma/adapter-pg` for
 * PostgreSQL, `@prisma/adapter-mariadb` for MySQL / MariaDB): inserts the claim with
 * `$executeRawUnsafe` and runs your callback with the interactive transaction client `tx`,
 * in one `$transaction`.
 */
export function prismaGuard<P extends PrismaLike>(prisma: P, options: PrismaGuardOptions = {}): Guard<PrismaTx<P>> {
  if (!prisma || typeof (prisma as any).$transaction !== "function") {
    throw new TypeError("@retrysafe/guard: prismaGuard(prisma) needs a PrismaClient (an object with $transaction)");
  }
  if (options.dialect !== undefined && options.dialect !== "postgresql" && options.dialect !== "mysql") {
    throw new Error(`@retrysafe/guard: prismaGuard dialect must be "postgresql" or "mysql", got ${JSON.stringify(options.dialect)}`);
  }
  const mysql = (options.dialect ?? providerOf(prisma)) === "mysql";
  const sql = dialectSql(mysql, options.table ?? "processed_events");
  const txOptions = options.transaction;

  async function attempt<T>(key: string, fn: (tx: PrismaTx<P>) => Promise<T> | T, fingerprint: string | null): Promise<GuardResult<T>> {
    try {
      return await prisma.$transaction(async (tx: any) => {
        let inserted: number;
        try {
          inserted = Number(fingerprint === null ? await tx.$executeRawUnsafe(sql.claim, key) : await tx.$executeRawUnsafe(sql.claimWithFingerprint, key, fingerprint));
        } catch (err) {
          if (isRetryableConflict(err)) throw new ClaimConflict(err);
          if (isUniqueViolation(err)) throw new DuplicateClaim();
          if (fingerprint !== null && isMissingFingerprintColumn(err)) throw missingFingerprintColumn(key, sql.table, err);
          throw err;
        }
        if (inserted === 0) throw new DuplicateClaim(); // rolls back this transaction
        if (mysql) {
          // without strict mode MySQL stores a key too long for its column cut short: refuse it
          const stored = await tx.$queryRawUnsafe(sql.held, key);
          if (!Array.isArray(stored) || stored.length !== 1) {
            throw new GuardError(`@retrysafe/guard: the claim for key ${describeKey(key)} was not stored as given (is the key column narrower than VARBINARY(512)?)`, key);
          }
        }
        const result = await fn(tx as PrismaTx<P>);
        let held: unknown[];
        try {
          held = await tx.$queryRawUnsafe(sql.held, key);
        } catch (err) {
          throw new GuardCommitError(key, "the transaction was aborted by a statement error inside the callback (caught and ignored?)", err);
        }
        if (!Array.isArray(held) || held.length !== 1) {
          throw new GuardCommitError(key, mysql ? "the claim is gone from the transaction (a deadlock or ROLLBACK inside the callback rolled it back)" : "the claim is gone from the transaction");
        }
        return { status: "processed", result } as GuardResult<T>;
      }, txOptions);
    } catch (err) {
      if (err instanceof DuplicateClaim) return { status: "duplicate" } as GuardResult<T>;
      throw err;
    }
  }

  return {
    async run<T>(key: string, fn: (tx: PrismaTx<P>) => Promise<T> | T, runOptions?: RunOptions): Promise<GuardRunResult<T>> {
      checkKey(key);
      const fingerprint = fingerprintFor(runOptions);
      const result = await retryClaimConflicts(() => attempt(key, fn, fingerprint));
      if (result.status === "duplicate" && fingerprint !== null) {
        // after the rolled-back attempt, outside any transaction: sees the winner's committed claim
        const rows = await (prisma as any).$queryRawUnsafe(sql.storedFingerprint, key);
        if (compareFingerprints(key, rows?.[0]?.fingerprint, fingerprint, runOptions) === "mismatch") return { status: "mismatch" };
      }
      return result;
    },
  } as Guard<PrismaTx<P>>;
}
