import type { Guard, GuardResult } from "./types.js";
import { GuardCommitError } from "./errors.js";
import { checkKey, claimStillHeldSql, ClaimConflict, DuplicateClaim, isRetryableConflict, isUniqueViolation, quoteTable, retryClaimConflicts } from "./util.js";

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
}

/**
 * A guard over a Prisma client (Prisma 7 with `@prisma/adapter-pg`, or any
 * PostgreSQL Prisma client): inserts the claim with `$executeRawUnsafe` and runs your
 * callback with the interactive transaction client `tx`, in one `$transaction`.
 */
export function prismaGuard<P extends PrismaLike>(prisma: P, options: PrismaGuardOptions = {}): Guard<PrismaTx<P>> {
  if (!prisma || typeof (prisma as any).$transaction !== "function") {
    throw new TypeError("@retrysafe/guard: prismaGuard(prisma) needs a PrismaClient (an object with $transaction)");
  }
  const table = quoteTable(options.table ?? "processed_events");
  const claimSql = `INSERT INTO ${table} (key) VALUES ($1) ON CONFLICT DO NOTHING`;
  const txOptions = options.transaction;
  const probeSql = claimStillHeldSql(table, "$1");

  return {
    async run<T>(key: string, fn: (tx: PrismaTx<P>) => Promise<T> | T): Promise<GuardResult<T>> {
      checkKey(key);
      return retryClaimConflicts(async () => {
        try {
          return await prisma.$transaction(async (tx: any) => {
            let inserted: number;
            try {
              inserted = Number(await tx.$executeRawUnsafe(claimSql, key));
            } catch (err) {
              if (isRetryableConflict(err)) throw new ClaimConflict(err);
              if (isUniqueViolation(err)) throw new DuplicateClaim();
              throw err;
            }
            if (inserted === 0) throw new DuplicateClaim(); // rolls back this transaction
            const result = await fn(tx as PrismaTx<P>);
            let held: unknown[];
            try {
              held = await tx.$queryRawUnsafe(probeSql, key);
            } catch (err) {
              throw new GuardCommitError(key, "the transaction was aborted by a statement error inside the callback (caught and ignored?)", err);
            }
            if (!Array.isArray(held) || held.length !== 1) throw new GuardCommitError(key, "the claim is gone from the transaction");
            return { status: "processed", result } as GuardResult<T>;
          }, txOptions);
        } catch (err) {
          if (err instanceof DuplicateClaim) return { status: "duplicate" } as GuardResult<T>;
          throw err;
        }
      });
    },
  };
}
