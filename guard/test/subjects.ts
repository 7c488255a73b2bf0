// The guards under test, each with a business write and a way to count its effect.
// Shared by the contract suite and the crash child process.
import pg from "pg";
import { drizzle } from "drizzle-orm/node-postgres";
import { eq, sql } from "drizzle-orm";
import { integer, pgTable, serial, text } from "drizzle-orm/pg-core";
import IORedis from "ioredis";
import IORedis5 from "ioredis5";
import { createClient as createRedis6 } from "redis";
import { createClient as createRedis5 } from "redis5";
import { createClient as createRedis4 } from "redis4";
import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "./generated/prisma/client.ts";
import { drizzleGuard, postgresGuard, prismaGuard, redisGuard, type Guard, type RedisGuardOptions } from "../src/index.ts";
import { DATABASE_URL, REDIS_URL } from "./helpers.ts";

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
export const REDIS_KINDS = ["ioredis", "ioredis-v5", "node-redis-v6", "node-redis-v5", "node-redis-v4"] as const;
export type Kind = (typeof DB_KINDS)[number] | (typeof REDIS_KINDS)[number];

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
    const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: DATABASE_URL, max: 10 }) });
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
    const txOptions = { transaction: { maxWait: 20_000, timeout: 20_000 } };
    return {
      kind, lease: false,
      guard: prismaGuard(prisma, txOptions),
      withOptions: (o) => prismaGuard(prisma, { ...txOptions, ...o }),
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
    const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
    const db = drizzle(pool);
    const countPool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
    return {
      kind, lease: false,
      guard: drizzleGuard(db),
      withOptions: (o) => drizzleGuard(db, o),
      async write(tx: typeof db, key) {
        await tx.insert(ledger).values({ eventKey: key, amount: 1 });
        await tx
          .insert(counters)
          .values({ name: key, value: 1 })
          .onConflictDoUpdate({ target: counters.name, set: { value: sql`${counters.value} + 1` } });
        void eq;
      },
      effects: (key) => pgCount(countPool, key),
      claimed: (key) => pgClaimed(countPool, key),
      close: async () => {
        await pool.end();
        await countPool.end();
      },
    };
  }
  // Redis: the "effect" is an INCR that cannot roll back.
  const effectKey = (key: string) => `effects:${key}`;
  if (kind === "ioredis" || kind === "ioredis-v5") {
    const Ctor: typeof IORedis = kind === "ioredis" ? IORedis : (IORedis5 as any);
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
    kind === "node-redis-v4" ? (createRedis4 as any) : kind === "node-redis-v5" ? (createRedis5 as any) : (createRedis6 as any);
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
