// The databases the inbox, the outbox and reconcile() run on, each with the scenario's
// business write (the entitlement of test/inbox-scenario.ts) and the raw reads the tests check it with.
// Shared by the inbox suite and its crash children; client libraries load per backend.
import pg from "pg";
import type { InboxEvent, Outbox } from "../src/index.ts";
import { DATABASE_URL, MYSQL_URL } from "./helpers.ts";

export const QUEUE_BACKENDS = ["pg", "mysql", "drizzle-mysql", "prisma-mysql"] as const;
export type QueueBackendName = (typeof QUEUE_BACKENDS)[number];

export interface QueueBackend {
  name: QueueBackendName;
  /** What createInbox / createOutbox / reconcile get as `db`. */
  db: object;
  /** The scenario's local write inside ctx.complete(tx): one entitlement row and the receipt in the outbox. */
  applyEntitlement(tx: any, outbox: Outbox, event: InboxEvent): Promise<void>;
  reset(): Promise<void>;
  entitlements(key: string): Promise<number>;
  totalEntitlements(): Promise<number>;
  inboxRows(key: string): Promise<number>;
  outboxState(key: string): Promise<string | undefined>;
  /** Make a backed-off inbox event due now. */
  makeInboxDue(key: string): Promise<void>;
  /** Transactions open on the server right now, other than this reader's. */
  openTransactions(): Promise<number>;
  /** One raw statement in the backend's own dialect ($n on pg, ? on MySQL); its rows. */
  raw(text: string, params?: unknown[]): Promise<any[]>;
  close(): Promise<void>;
}

export async function makeQueueBackend(name: QueueBackendName, connections = 12): Promise<QueueBackend> {
  if (name === "pg") {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: connections });
    const one = async (text: string, params: unknown[] = []) => (await pool.query(text, params)).rows[0];
    return {
      name, db: pool,
      async applyEntitlement(tx: pg.PoolClient, outbox, event) {
        await tx.query("INSERT INTO entitlement_log (event_key, account, plan) VALUES ($1, $2, $3)", [event.key, event.payload.account, event.payload.plan]);
        await outbox.enqueue(tx, { kind: "send_receipt", key: `receipt:${event.key}`, payload: event.payload });
      },
      reset: async () => void (await pool.query("TRUNCATE retrysafe_inbox, retrysafe_outbox, entitlement_log")),
      entitlements: async (key) => (await one("SELECT count(*)::int AS n FROM entitlement_log WHERE event_key = $1", [key])).n,
      totalEntitlements: async () => (await one("SELECT count(*)::int AS n FROM entitlement_log")).n,
      inboxRows: async (key) => (await one("SELECT count(*)::int AS n FROM retrysafe_inbox WHERE key = $1", [key])).n,
      outboxState: async (key) => (await one("SELECT state FROM retrysafe_outbox WHERE key = $1", [key]))?.state,
      makeInboxDue: async (key) => void (await pool.query("UPDATE retrysafe_inbox SET available_at = now() WHERE key = $1", [key])),
      openTransactions: async () =>
        (await one(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%'`)).n,
      raw: async (text, params = []) => (await pool.query(text, params)).rows,
      close: () => pool.end(),
    };
  }
  const mysql = (await import("mysql2/promise")).default;
  const raw = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 3 });
  const one = async (text: string, params: unknown[] = []) => ((await raw.query(text, params)) as any)[0][0];
  const reads = {
    reset: async () => {
      for (const t of ["retrysafe_inbox", "retrysafe_outbox", "entitlement_log"]) await raw.query(`TRUNCATE ${t}`);
    },
    entitlements: async (key: string) => Number((await one("SELECT count(*) AS n FROM entitlement_log WHERE event_key = ?", [key])).n),
    totalEntitlements: async () => Number((await one("SELECT count(*) AS n FROM entitlement_log")).n),
    inboxRows: async (key: string) => Number((await one("SELECT count(*) AS n FROM retrysafe_inbox WHERE `key` = ?", [key])).n),
    outboxState: async (key: string) => (await one("SELECT state FROM retrysafe_outbox WHERE `key` = ?", [key]))?.state as string | undefined,
    makeInboxDue: async (key: string) => void (await raw.query("UPDATE retrysafe_inbox SET available_at = NOW(6) WHERE `key` = ?", [key])),
    // InnoDB lists every open transaction that has read or written; the reader's own autocommit SELECT is not one
    openTransactions: async () => Number((await one("SELECT count(*) AS n FROM information_schema.innodb_trx WHERE trx_mysql_thread_id <> CONNECTION_ID()")).n),
    raw: async (text: string, params: unknown[] = []) => {
      const [r] = (await raw.query(text, params)) as any;
      return Array.isArray(r) ? r : [];
    },
  };
  const insertEntitlement = "INSERT INTO entitlement_log (event_key, account, plan) VALUES (?, ?, ?)";
  if (name === "mysql") {
    const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: connections });
    return {
      name, db: pool, ...reads,
      async applyEntitlement(tx, outbox, event) {
        await tx.query(insertEntitlement, [event.key, event.payload.account, event.payload.plan]);
        await outbox.enqueue(tx, { kind: "send_receipt", key: `receipt:${event.key}`, payload: event.payload });
      },
      close: async () => {
        await pool.end();
        await raw.end();
      },
    };
  }
  if (name === "drizzle-mysql") {
    const { drizzle } = await import("drizzle-orm/mysql2");
    const { sql } = await import("drizzle-orm");
    const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: connections });
    const db = drizzle({ client: pool });
    return {
      name, db, ...reads,
      async applyEntitlement(tx: typeof db, outbox, event) {
        await tx.execute(sql`INSERT INTO entitlement_log (event_key, account, plan) VALUES (${event.key}, ${event.payload.account}, ${event.payload.plan})`);
        await outbox.enqueue(tx, { kind: "send_receipt", key: `receipt:${event.key}`, payload: event.payload });
      },
      close: async () => {
        await pool.end();
        await raw.end();
      },
    };
  }
  const { PrismaMariaDb } = await import("@prisma/adapter-mariadb");
  const { PrismaClient } = await import("./generated/prisma-mysql/client.ts");
  const { mariadbConfig } = await import("./subjects.ts");
  const prisma = new PrismaClient({ adapter: new PrismaMariaDb(mariadbConfig(MYSQL_URL, connections)) });
  return {
    name, db: prisma, ...reads,
    async applyEntitlement(tx, outbox, event) {
      await tx.$executeRawUnsafe(insertEntitlement, event.key, event.payload.account, event.payload.plan);
      await outbox.enqueue(tx, { kind: "send_receipt", key: `receipt:${event.key}`, payload: event.payload });
    },
    close: async () => {
      await prisma.$disconnect();
      await raw.end();
    },
  };
}

/** An outbox row as the outbox tests read it. */
export interface OutboxRowView {
  state: string;
  attempts: number;
  last_error: string | null;
  /** available_at - now, in ms (negative when due). */
  due_in_ms: number;
  lease_until: Date | null;
}

/** Raw reads and writes the outbox and reconcile suites need, per dialect. */
export function rawAccess(b: QueueBackend) {
  return {
    /** One statement, written for each dialect. */
    query: (pgSql: string, mysqlSql: string, params: unknown[] = []) => b.raw(b.name === "pg" ? pgSql : mysqlSql, params),
    async outboxRow(key: string): Promise<OutboxRowView | undefined> {
      const rows: any[] = await b.raw(
        b.name === "pg"
          ? `SELECT state, attempts, last_error, extract(epoch FROM lease_until)::float8 AS lease_until,
               (extract(epoch FROM (available_at - now())) * 1000)::float8 AS due_in_ms FROM retrysafe_outbox WHERE key = $1`
          : "SELECT state, attempts, last_error, UNIX_TIMESTAMP(lease_until) AS lease_until, TIMESTAMPDIFF(MICROSECOND, NOW(6), available_at) / 1000 AS due_in_ms FROM retrysafe_outbox WHERE `key` = ?",
        [key],
      );
      const r = rows[0];
      if (!r) return undefined;
      return {
        state: r.state,
        attempts: Number(r.attempts),
        last_error: r.last_error === null ? null : String(r.last_error),
        due_in_ms: Number(r.due_in_ms),
        lease_until: r.lease_until === null ? null : new Date(Number(r.lease_until) * 1000),
      };
    },
  };
}
