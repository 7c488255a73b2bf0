import { redisGuard } from "@retrysafe/guard";
import { redis } from "../redis";

// A lease per job: released when the job throws, kept for a week once it succeeds.
export const guard = redisGuard(redis, { ttlSeconds: 7 * 24 * 60 * 60 });
