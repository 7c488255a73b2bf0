import { loadDrizzleSql } from "./util.js";

/** The SQL family of a client: decides the inbox's, outbox's and reconcile()'s statements. */
export type SqlDialect = "postgresql" | "mysql";

/**
 * Which database a client talks to: a mysql2 pool or connection, a Prisma client (or its
 * transaction client) generated for MySQL, or a Drizzle MySQL database or transaction is
 * "mysql"; anything else is PostgreSQL.
 */
export function sqlDialectOf(db: any): SqlDialect {
  if (!db || typeof db !== "object") return "postgresql";
  if (typeof db.getConnection === "function") return "mysql"; // mysql2 Pool
  if (typeof db.beginTransaction === "function" && typeof db.execute === "function" && "connection" in db) return "mysql"; // mysql2 Connection
  if (typeof db.$queryRawUnsafe === "function") return db._activeProvider === "mysql" || db._engineConfig?.activeProvider === "mysql" ? "mysql" : "postgresql";
  const kind = db.dialect?.constructor?.[Symbol.for("drizzle:entityKind")];
  if (typeof kind === "string" && kind.startsWith("MySql")) return "mysql";
  return "postgresql";
}

/** Statements with `?` placeholders on any MySQL client. */
export interface MysqlExec {
  rows(text: string, params: unknown[]): Promise<any[]>;
  /** Rows matched by an UPDATE / INSERT (mysql2 and mariadb report matched rows: CLIENT_FOUND_ROWS). */
  affected(text: string, params: unknown[]): Promise<number>;
}

function isMysql2(db: any): boolean {
  return typeof db.getConnection === "function" || (typeof db.beginTransaction === "function" && "connection" in db);
}

/** Run `?`-placeholder SQL through a mysql2 pool/connection, a Prisma MySQL client/tx or a Drizzle MySQL db/tx. */
export function mysqlExec(db: any, what: string, drizzleSql?: any): MysqlExec {
  if (db && typeof db.$queryRawUnsafe === "function") {
    return {
      rows: (text, params) => db.$queryRawUnsafe(text, ...params),
      affected: async (text, params) => Number(await db.$executeRawUnsafe(text, ...params)),
    };
  }
  if (db && isMysql2(db)) {
    return {
      rows: async (text, params) => {
        const [r] = await db.query(text, params);
        return Array.isArray(r) ? r : [];
      },
      affected: async (text, params) => Number((await db.query(text, params))[0]?.affectedRows ?? 0),
    };
  }
  if (db && typeof db.execute === "function") {
    // Drizzle: rebuild "?" placeholders as sql`${param}` chunks; execute() resolves to mysql2's [result, fields]
    const run = async (text: string, params: unknown[]) => {
      const sql = drizzleSql ?? (await loadDrizzleSql());
      const parts = text.split("?");
      const chunks: any[] = [];
      parts.forEach((part, i) => {
        chunks.push(sql.raw(part));
        if (i < parts.length - 1) chunks.push(sql`${params[i]}`);
      });
      const r = await db.execute(sql.join(chunks));
      return Array.isArray(r) ? r[0] : r;
    };
    return {
      rows: async (text, params) => {
        const r = await run(text, params);
        return Array.isArray(r) ? r : [];
      },
      affected: async (text, params) => Number((await run(text, params))?.affectedRows ?? 0),
    };
  }
  throw new TypeError(`@retrysafe/guard: ${what} on MySQL needs a mysql2/promise pool or connection, a Prisma MySQL client or a Drizzle MySQL db`);
}

/**
 * One transaction on a MySQL client: a mysql2 pool (one connection, START TRANSACTION /
 * COMMIT), a Prisma client (`$transaction`) or a Drizzle db (`transaction`). A bare mysql2
 * connection is refused: it may already be inside the caller's transaction, and MySQL's
 * START TRANSACTION would silently commit that one.
 */
export async function mysqlTransaction<R>(db: any, drizzleSql: any, fn: (tx: any, exec: MysqlExec) => Promise<R>): Promise<R> {
  if (db && typeof db.$transaction === "function") return db.$transaction((tx: any) => fn(tx, mysqlExec(tx, "transaction")));
  if (db && typeof db.getConnection === "function") {
    const conn = await db.getConnection();
    let broken = false;
    try {
      await conn.query("START TRANSACTION");
      const result = await fn(conn, mysqlExec(conn, "transaction"));
      await conn.query("COMMIT");
      return result;
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
  if (db && typeof db.transaction === "function" && typeof db.execute === "function") {
    return db.transaction((tx: any) => fn(tx, mysqlExec(tx, "transaction", drizzleSql)));
  }
  throw new TypeError("@retrysafe/guard: a MySQL transaction needs a mysql2/promise Pool, a Prisma MySQL client or a Drizzle MySQL db (not a single connection)");
}

/** A VARBINARY value (mysql2: Buffer, Prisma: Uint8Array) or text, as a string. */
export function mysqlText(v: unknown): string | null {
  if (v === null || v === undefined) return null;
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString("utf8");
  return String(v);
}

/** A JSON column read as text (`CAST(payload AS CHAR)`), parsed. */
export function mysqlJson(v: unknown): any {
  const text = mysqlText(v);
  return text === null ? null : JSON.parse(text);
}

/** `kind IN (?, ?)` for a kinds filter, or nothing. */
export function mysqlKindsFilter(kinds: string[] | null): { clause: string; params: string[] } {
  if (!kinds) return { clause: "", params: [] };
  return { clause: ` AND kind IN (${kinds.map(() => "?").join(", ")})`, params: kinds };
}
