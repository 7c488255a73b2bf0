import { redisGuard } from "@retrysafe/guard";
import { redis } from "../clients.ts";

// A lease per job: released when the job throws, kept for a week once it succeeds. A worker
// that dies mid-job holds its lease for leaseSeconds; BullMQ's retry after that runs the job.
export const guard = redisGuard(redis, { ttlSeconds: 7 * 24 * 60 * 60, leaseSeconds: 3 });
