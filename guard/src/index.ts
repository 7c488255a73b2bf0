export type { Guard, GuardResult } from "./types.js";
export { postgresGuard } from "./postgres.js";
export type { PostgresGuardOptions, PgClientLike, PgPoolLike, PoolClientOf } from "./postgres.js";
export { prismaGuard } from "./prisma.js";
export type { PrismaGuardOptions, PrismaLike, PrismaTx } from "./prisma.js";
export { drizzleGuard } from "./drizzle.js";
export type { DrizzleGuardOptions, DrizzleLike, DrizzleTx } from "./drizzle.js";
export { redisGuard } from "./redis.js";
export type { RedisGuardOptions, RedisLike } from "./redis.js";
export { eventKey, readHeader } from "./event-key.js";
export type { HeadersLike } from "./event-key.js";
export { createOutbox, classifyError, retryAfterMs, backoffMs } from "./outbox.js";
export type {
  Outbox, OutboxOptions, OutboxMessage, OutboxRow, OutboxState, OutboxDb, DispatchOptions, DispatchStats, FailureClass,
} from "./outbox.js";
