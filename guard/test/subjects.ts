// The guards under test, each with a business write and a way to count its effect.
// Shared by the contract suite and the crash child process.
// Client libraries are imported per kind, so a crash child loads only the one it needs.
import pg from "pg";
import { integer, pgTable, serial, text } from "drizzle-orm/pg-core";
import type IORedis from "ioredis";
import { drizzleGuard, mysqlGuard, postgresGuard, prismaGuard, redisGuard, type Guard, type RedisGuardOptions } from "../src/index.ts";
import { DATABASE_URL, MYSQL_URL, REDIS_URL } from "./helpers.ts";

export const ledger = pgTable("ledger", {
  id: serial("id").primaryKey(),
  eventKey: text("event_key").notNull(),
  amount: integer("amount").notNull(),
});
export const counters = pgTable("counters", {
  name: text("name").primaryKey(),
  value: integer("value").notNull().default(0),
});

export const DB_KINDS = ["prisma", "pg", "drizzle"] as const;
/** Guards over MySQL / MariaDB. */
export const MYSQL_KINDS = ["mysql", "drizzle-mysql", "prisma-mysql"] as const;
export const REDIS_KINDS = ["ioredis", "ioredis-v5", "node-redis-v6", "node-redis-v5", "node-redis-v4"] as const;
export type Kind = (typeof DB_KINDS)[number] | (typeof MYSQL_KINDS)[number] | (typeof REDIS_KINDS)[number];
/** Database guards (the claim commits with the work): PostgreSQL and MySQL. */
export const isDbKind = (kind: Kind) => (DB_KINDS as readonly string[]).includes(kind) || (MYSQL_KINDS as readonly string[]).includes(kind);

export interface Subject {
  kind: Kind;
  lease: boolean;
  guard: Guard<any>;
  /** The business write, inside the callback. */
  write(tx: any, key: string): Promise<void>;
  /** How many times the business write took effect (committed) for `key`. */
  effects(key: string): Promise<number>;
  /** Is the key claimed (DB: committed claim row; Redis: any value)? */
  claimed(key: string): Promise<boolean>;
  /** A guard with other options (Redis: lease options; DB: { table }). */
  withOptions(options: any): Guard<any>;
  /** DB kinds: run one raw SQL statement inside the callback's transaction. */
  exec?(tx: any, sqlText: string): Promise<unknown>;
  /** DB kinds: a guard whose transactions use this isolation level. */
  withIsolation?(level: "repeatable read" | "serializable"): Guard<any>;
  redisRaw?: { get(k: string): Promise<string | null>; pttl(k: string): Promise<number> };
  close(): Promise<void>;
}

async function pgCount(pool: pg.Pool, key: string): Promise<number> {
  const r = await pool.query("SELECT count(*)::int AS n FROM ledger WHERE event_key = $1", [key]);
  return r.rows[0].n;
}
async function pgClaimed(pool: pg.Pool, key: string, table = "processed_events"): Promise<boolean> {
  const r = await pool.query(`SELECT 1 FROM ${table} WHERE key = $1`, [key]);
  return r.rowCount === 1;
}

export async function makeSubject(kind: Kind, redisOptions: RedisGuardOptions = {}): Promise<Subject> {
  if (kind === "pg") {
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
    return {
      kind, lease: false,
      guard: postgresGuard(pool),
      withOptions: (o) => postgresGuard(pool, o),
      exec: (tx: pg.PoolClient, text) => tx.query(text),
      withIsolation: (level) => postgresGuard(pool, { isolationLevel: level }),
      async write(tx: pg.PoolClient, key) {
        await tx.query("INSERT INTO ledger (event_key, amount) VALUES ($1, 1)", [key]);
        await tx.query("INSERT INTO counters (name, value) VALUES ($1, 1) ON CONFLICT (name) DO UPDATE SET value = counters.value + 1", [key]);
      },
      effects: (key) => pgCount(pool, key),
      claimed: (key) => pgClaimed(pool, key),
      close: () => pool.end(),
    };
  }
  if (kind === "prisma") {
    const { PrismaPg } = await import("@prisma/adapter-pg");
    const { PrismaClient } = await import("./generated/prisma/client.ts");
    const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: DATABASE_URL, max: 10 }) });
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
    const txOptions = { transaction: { maxWait: 20_000, timeout: 20_000 } };
    return {
      kind, lease: false,
      guard: prismaGuard(prisma, txOptions),
      withOptions: (o) => prismaGuard(prisma, { ...txOptions, ...o }),
      exec: (tx, text) => tx.$executeRawUnsafe(text),
      withIsolation: (level) =>
        prismaGuard(prisma, { transaction: { ...txOptions.transaction, isolationLevel: level === "serializable" ? "Serializable" : "RepeatableRead" } }),
      async write(tx, key) {
        await tx.ledger.create({ data: { eventKey: key, amount: 1 } });
        await tx.counter.upsert({ where: { name: key }, create: { name: key, value: 1 }, update: { value: { increment: 1 } } });
      },
      effects: (key) => pgCount(pool, key),
      claimed: (key) => pgClaimed(pool, key),
      close: async () => {
        await prisma.$disconnect();
        await pool.end();
      },
    };
  }
  if (kind === "drizzle") {
    const { drizzle } = await import("drizzle-orm/node-postgres");
    const { sql } = await import("drizzle-orm");
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
    const db = drizzle(pool);
    const countPool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
    return {
      kind, lease: false,
      guard: drizzleGuard(db),
      withOptions: (o) => drizzleGuard(db, o),
      exec: (tx: typeof db, text) => tx.execute(sql.raw(text)),
      withIsolation: (level) => drizzleGuard(db, { transaction: { isolationLevel: level } }),
      async write(tx: typeof db, key) {
        await tx.insert(ledger).values({ eventKey: key, amount: 1 });
        await tx
          .insert(counters)
          .values({ name: key, value: 1 })
          .onConflictDoUpdate({ target: counters.name, set: { value: sql`${counters.value} + 1` } });
      },
      effects: (key) => pgCount(countPool, key),
      claimed: (key) => pgClaimed(countPool, key),
      close: async () => {
        await pool.end();
        await countPool.end();
      },
    };
  }
  if (kind === "mysql") {
    const mysql = (await import("mysql2/promise")).default;
    const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 10 });
    const count = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 2 });
    return {
      kind, lease: false,
      guard: mysqlGuard(pool),
      withOptions: (o) => mysqlGuard(pool, o),
      exec: (tx, text) => tx.query(text),
      withIsolation: (level) => mysqlGuard(pool, { isolationLevel: level }),
      async write(tx, key) {
        await tx.query("INSERT INTO ledger (event_key, amount) VALUES (?, 1)", [key]);
        await tx.query("INSERT INTO counters (name, value) VALUES (?, 1) ON DUPLICATE KEY UPDATE value = value + 1", [key]);
      },
      effects: async (key) => Number(((await count.query("SELECT count(*) AS n FROM ledger WHERE event_key = ?", [key])) as any)[0][0].n),
      claimed: async (key) => ((await count.query("SELECT 1 FROM processed_events WHERE `key` = ?", [key])) as any)[0].length === 1,
      close: async () => {
        await pool.end();
        await count.end();
      },
    };
  }
  if (kind === "drizzle-mysql") {
    const mysql = (await import("mysql2/promise")).default;
    const { drizzle } = await import("drizzle-orm/mysql2");
    const { sql } = await import("drizzle-orm");
    const { int, mysqlTable, varchar, varbinary } = await import("drizzle-orm/mysql-core");
    const mysqlLedger = mysqlTable("ledger", { id: int("id").autoincrement().primaryKey(), eventKey: varchar("event_key", { length: 600 }).notNull(), amount: int("amount").notNull() });
    const mysqlCounters = mysqlTable("counters", { name: varbinary("name", { length: 512 }).primaryKey(), value: int("value").notNull().default(0) });
    const pool = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 10 });
    const count = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 2 });
    const db = drizzle({ client: pool });
    return {
      kind, lease: false,
      guard: drizzleGuard(db),
      withOptions: (o) => drizzleGuard(db, o),
      exec: (tx: typeof db, text) => tx.execute(sql.raw(text)),
      withIsolation: (level) => drizzleGuard(db, { transaction: { isolationLevel: level } }),
      async write(tx: typeof db, key) {
        await tx.insert(mysqlLedger).values({ eventKey: key, amount: 1 });
        await tx.insert(mysqlCounters).values({ name: key, value: 1 }).onDuplicateKeyUpdate({ set: { value: sql`${mysqlCounters.value} + 1` } });
      },
      effects: async (key) => Number(((await count.query("SELECT count(*) AS n FROM ledger WHERE event_key = ?", [key])) as any)[0][0].n),
      claimed: async (key) => ((await count.query("SELECT 1 FROM processed_events WHERE `key` = ?", [key])) as any)[0].length === 1,
      close: async () => {
        await pool.end();
        await count.end();
      },
    };
  }
  if (kind === "prisma-mysql") {
    const mysql = (await import("mysql2/promise")).default;
    const { PrismaMariaDb } = await import("@prisma/adapter-mariadb");
    const { PrismaClient } = await import("./generated/prisma-mysql/client.ts");
    const prisma = new PrismaClient({ adapter: new PrismaMariaDb(mariadbConfig(MYSQL_URL, 10)) });
    const count = mysql.createPool({ uri: MYSQL_URL, connectionLimit: 2 });
    const txOptions = { transaction: { maxWait: 20_000, timeout: 20_000 } };
    return {
      kind, lease: false,
      guard: prismaGuard(prisma, txOptions),
      withOptions: (o) => prismaGuard(prisma, { ...txOptions, ...o }),
      exec: (tx, text) => tx.$executeRawUnsafe(text),
      withIsolation: (level) =>
        prismaGuard(prisma, { transaction: { ...txOptions.transaction, isolationLevel: level === "serializable" ? "Serializable" : "RepeatableRead" } }),
      async write(tx, key) {
        await tx.ledger.create({ data: { eventKey: key, amount: 1 } });
        const name = Buffer.from(key, "utf8");
        await tx.counter.upsert({ where: { name }, create: { name, value: 1 }, update: { value: { increment: 1 } } });
      },
      effects: async (key) => Number(((await count.query("SELECT count(*) AS n FROM ledger WHERE event_key = ?", [key])) as any)[0][0].n),
      claimed: async (key) => ((await count.query("SELECT 1 FROM processed_events WHERE `key` = ?", [key])) as any)[0].length === 1,
      close: async () => {
        await prisma.$disconnect();
        await count.end();
      },
    };
  }
  // Redis: the "effect" is an INCR that cannot roll back.
  const effectKey = (key: string) => `effects:${key}`;
  if (kind === "ioredis" || kind === "ioredis-v5") {
    const Ctor: typeof IORedis = kind === "ioredis" ? (await import("ioredis")).default : ((await import("ioredis5")).default as any);
    const redis = new Ctor(REDIS_URL, { lazyConnect: false, maxRetriesPerRequest: 2 });
    return {
      kind, lease: true,
      guard: redisGuard(redis, redisOptions),
      withOptions: (o) => redisGuard(redis, o),
      async write(_tx, key) {
        await redis.incr(effectKey(key));
      },
      effects: async (key) => Number((await redis.get(effectKey(key))) ?? 0),
      claimed: async (key) => (await redis.exists(`retrysafe:${key}`)) === 1,
      redisRaw: { get: (k) => redis.get(k), pttl: (k) => redis.pttl(k) },
      close: async () => {
        await redis.quit();
      },
    };
  }
  const create: (o: { url: string }) => any =
    kind === "node-redis-v4"
      ? ((await import("redis4")).createClient as any)
      : kind === "node-redis-v5"
        ? ((await import("redis5")).createClient as any)
        : ((await import("redis")).createClient as any);
  const client: any = create({ url: REDIS_URL });
  client.on("error", () => {});
  await client.connect();
  return {
    kind, lease: true,
    guard: redisGuard(client, redisOptions),
    withOptions: (o) => redisGuard(client, o),
    async write(_tx, key) {
      await client.incr(effectKey(key));
    },
    effects: async (key) => Number((await client.get(effectKey(key))) ?? 0),
    claimed: async (key) => Number(await client.exists(`retrysafe:${key}`)) === 1,
    redisRaw: { get: (k) => client.get(k), pttl: (k) => client.pTTL(k) },
    close: async () => {
      await client.quit();
    },
  };
}

/** The mariadb driver's pool options for a mysql:// URL (the adapter takes no mysql2 URI). */
export function mariadbConfig(url: string, connectionLimit: number) {
  const u = new URL(url);
  return {
    host: u.hostname,
    port: Number(u.port || 3306),
    user: decodeURIComponent(u.username || "root"),
    password: decodeURIComponent(u.password),
    database: u.pathname.replace(/^\//, ""),
    connectionLimit,
  };
}
