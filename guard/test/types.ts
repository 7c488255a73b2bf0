// Compile-time checks (npm run typecheck): the call shapes the retrysafe codemod writes.
import pg from "pg";
import { drizzle } from "drizzle-orm/node-postgres";
import IORedis from "ioredis";
import { PrismaPg } from "@prisma/adapter-pg";
import { PrismaClient } from "./generated/prisma/client.ts";
import { drizzleGuard, eventKey, postgresGuard, prismaGuard, redisGuard } from "../src/index.ts";

const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: "postgres://x" }) });
export const guard = prismaGuard(prisma);

declare const res: { status(n: number): { end(): void } };
declare const event: { id: string; data: { object: { customer: string } } };

export async function stripeHandler() {
  const result = await guard.run(eventKey.stripe(event), async (tx) => {
    await tx.ledger.create({ data: { eventKey: event.id, amount: 1 } });
    // @ts-expect-error: the transaction client has no $transaction
    void tx.$transaction;
    return "done" as const;
  });
  if (result.status === "in-progress") return res.status(409).end();
  if (result.status === "processed") {
    const r: "done" = result.result;
    void r;
  }
  return res.status(200).end();
}

export async function pgHandler(pool: pg.Pool) {
  const g = postgresGuard(pool);
  const result = await g.run("k", async (tx) => {
    const client: pg.PoolClient = tx;
    return (await client.query("select 1 as n")).rows[0].n as number;
  });
  if (result.status === "in-progress") return 409;
  return result.status === "processed" ? result.result : 0;
}

export async function drizzleHandler(pool: pg.Pool) {
  const db = drizzle(pool);
  const g = drizzleGuard(db);
  const result = await g.run("k", async (tx) => {
    await tx.execute("select 1");
    return 1;
  });
  if (result.status === "in-progress") return 409;
  return 200;
}

export async function redisHandler(redis: IORedis) {
  const g = redisGuard(redis, { ttlSeconds: 7 * 24 * 3600 });
  const result = await g.run(eventKey.github({ "x-github-delivery": "d" }), async () => 1);
  if (result.status === "in-progress") return 409;
  return 200;
}

export async function poolLikeHandler() {
  const pool = { connect: async () => ({ query: async (_sql: string) => ({ rowCount: 1, rows: [] as any[] }), release() {} }) };
  const g = postgresGuard(pool);
  const result = await g.run("k", async (tx) => {
    await tx.query("select 1");
    return 1;
  });
  if (result.status === "in-progress") return 409;
  return 200;
}

import type { IncomingHttpHeaders } from "node:http";
export function headerShapes(node: IncomingHttpHeaders, web: Headers, plain: Record<string, string>) {
  return [eventKey.github(node), eventKey.svix(web), eventKey.shopify(plain, { header: "x-shopify-event-id" })];
}

export async function fingerprintResultTypes(pool: pg.Pool) {
  const g = postgresGuard(pool);
  const plain = await g.run("k", async () => 1);
  // @ts-expect-error: without { payload } a run cannot answer mismatch
  void (plain.status === "mismatch");
  const checked = await g.run("k", async () => 1, { payload: { id: "evt_1" }, onMismatch: "return" });
  if (checked.status === "mismatch") return 422;
  return checked.status === "processed" ? checked.result : 200;
}

import { PrismaMariaDb } from "@prisma/adapter-mariadb";
import { PrismaClient as MysqlPrismaClient } from "./generated/prisma-mysql/client.ts";

export async function prismaOnMysql() {
  const mysqlPrisma = new MysqlPrismaClient({ adapter: new PrismaMariaDb("mariadb://root@127.0.0.1:3306/app") });
  const g = prismaGuard(mysqlPrisma, { dialect: "mysql" });
  const result = await g.run("k", async (tx) => (await tx.ledger.create({ data: { eventKey: "k", amount: 1 } })).id);
  return result.status === "processed" ? result.result : 0;
}

export async function optionalRunOptions(pool: pg.Pool, options: { payload: unknown } | undefined) {
  const r = await postgresGuard(pool).run("k", async () => 1, options);
  return r.status === "mismatch" ? 422 : 200;
}
