import { GuardCommitError } from "./errors.js";
import { queryOf, type Query } from "./outbox.js";

/**
 * Run `fn` in one transaction of the user's client: a pg Pool (one client, BEGIN/COMMIT),
 * a Prisma client (`$transaction`) or a Drizzle db (`transaction`). `txq` queries inside it
 * with `$n` placeholders.
 */
export async function withTransaction<R>(db: any, drizzleSql: any, fn: (tx: any, txq: Query) => Promise<R>): Promise<R> {
  if (db && typeof db.$transaction === "function") {
    return db.$transaction((tx: any) => fn(tx, queryOf(tx, "transaction", drizzleSql)));
  }
  if (db && typeof db.transaction === "function" && typeof db.execute === "function") {
    return db.transaction((tx: any) => fn(tx, queryOf(tx, "transaction", drizzleSql)));
  }
  if (db && typeof db.connect === "function" && typeof db.query === "function" && "totalCount" in db) {
    const client = await db.connect();
    let broken: Error | undefined;
    try {
      return await pgTransaction(client, fn);
    } catch (err) {
      broken = (err as any)?.rollbackFailed;
      throw err;
    } finally {
      client.release(broken);
    }
  }
  if (db && typeof db.query === "function") return pgTransaction(db, fn);
  throw new TypeError("@retrysafe/guard: a transaction needs a pg Pool/client, a Prisma client or a Drizzle db");
}

async function pgTransaction<R>(client: any, fn: (tx: any, txq: Query) => Promise<R>): Promise<R> {
  await client.query("BEGIN");
  try {
    const result = await fn(client, queryOf(client, "transaction"));
    const committed = await client.query("COMMIT");
    if (committed?.command === "ROLLBACK") throw new GuardCommitError("(transaction)", "PostgreSQL rolled the transaction back at COMMIT");
    return result;
  } catch (err) {
    try {
      await client.query("ROLLBACK");
    } catch (rollbackErr) {
      if (err && typeof err === "object") (err as any).rollbackFailed = rollbackErr;
    }
    throw err;
  }
}
