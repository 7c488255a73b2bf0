export type { Guard, GuardResult, GuardRunResult } from "./types.js";
export type { RunOptions } from "./fingerprint.js";
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
  Outbox, OutboxOptions, OutboxMessage, OutboxRow, OutboxState, OutboxDb, DispatchOptions, DispatchStats, FailureClass, EffectPolicy, RemoteState,
} from "./outbox.js";
export { GuardError, GuardKeyError, GuardCommitError, GuardTimeoutError, GuardMismatchError } from "./errors.js";
export { MAX_KEY_BYTES } from "./util.js";
export { createInbox, InboxLeaseLostError } from "./inbox.js";
export { payloadFingerprint, canonicalJson } from "./fingerprint.js";
export type { Inbox, InboxOptions, InboxEvent, InboxRow, InboxState, InboxContext, AcceptResult, AcceptOptions, ProcessOptions, ProcessStats } from "./inbox.js";
export { statusFor, toResponse, sendStatus, honoStatus } from "./http.js";
export type { HttpAnswer, StatusOptions } from "./http.js";
export { reconcile, formatReconcileReport } from "./reconcile.js";
export type { ReconcileOptions, ReconcileReport, ConsistencyCheck, Discrepancy } from "./reconcile.js";
export { mysqlGuard, quoteMysqlTable } from "./mysql.js";
export type { MysqlGuardOptions, MysqlPoolLike, MysqlConnectionLike, MysqlConnectionOf } from "./mysql.js";
