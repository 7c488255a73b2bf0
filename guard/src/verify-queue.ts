/**
 * `retrysafe verify --queue bullmq:NAME`'s producer: it delivers jobs through the app's own
 * BullMQ client (resolved from the app's directory), so the job lands in Redis exactly as the
 * app's producers would put it there.
 *
 * Started by verify in the app's directory; reads one JSON request a line on stdin and answers
 * one JSON line on stdout:
 * - `{"op":"reset"}`: removes every job of the queue (and of `also`, queues the worker feeds);
 * - `{"op":"add","job":{"name","data","opts"}}`: adds the job;
 * - `{"op":"state","id"}`: `{"state","attemptsMade","failedReason"}`, `missing` when gone;
 * - `{"op":"retry","id"}`: moves a completed job back to wait (delivered again after success);
 * - `{"op":"stall","id","check":bool}`: the job's lock is lost, as when its worker was killed
 *   or blocked past the lock's duration: the lock is removed, the job is marked as a stall
 *   candidate (what the previous stalled check would have done) and the check's throttle is
 *   cleared; with `check`, BullMQ's own stalled check runs now, else the next worker to start
 *   runs it. BullMQ then moves the job back to wait by its own rules (`maxStalledCount`).
 */
import { createRequire } from "node:module";
import * as path from "node:path";
import * as readline from "node:readline";

type Request = { op: string; id?: string; job?: { name?: string; data?: unknown; opts?: Record<string, unknown> }; check?: boolean };

const appRequire = createRequire(path.join(process.cwd(), "__retrysafe_verify__.js"));

function fail(message: string): never {
  process.stdout.write(JSON.stringify({ error: message }) + "\n");
  process.exit(2);
}

async function main(): Promise<void> {
  const queueName = process.env.RETRYSAFE_VERIFY_QUEUE ?? "";
  const redisUrl = process.env.RETRYSAFE_VERIFY_REDIS_URL ?? "";
  const prefix = process.env.RETRYSAFE_VERIFY_QUEUE_PREFIX || "bull";
  const also = (process.env.RETRYSAFE_VERIFY_QUEUE_ALSO ?? "").split(",").map((q) => q.trim()).filter(Boolean);
  if (!queueName || !redisUrl) fail("RETRYSAFE_VERIFY_QUEUE and RETRYSAFE_VERIFY_REDIS_URL must be set");
  let bullmq: any;
  try {
    bullmq = appRequire("bullmq");
  } catch {
    fail(`bullmq is not installed in ${process.cwd()}`);
  }
  const connection = { url: redisUrl, maxRetriesPerRequest: null };
  const queue = new bullmq.Queue(queueName, { connection, prefix });
  const fed = also.map((name) => new bullmq.Queue(name, { connection, prefix }));
  await queue.waitUntilReady();
  const client = await queue.client;

  const handle = async (req: Request): Promise<unknown> => {
    switch (req.op) {
      case "reset":
        for (const q of [queue, ...fed]) {
          await q.obliterate({ force: true });
          await q.resume();
        }
        return { ok: true };
      case "add": {
        const job = req.job ?? {};
        const added = await queue.add(job.name ?? queueName, job.data ?? {}, job.opts ?? {});
        return { id: String(added.id) };
      }
      case "state": {
        const job = await queue.getJob(String(req.id));
        if (!job) return { state: "missing" };
        return { state: await job.getState(), attemptsMade: job.attemptsMade ?? 0, failedReason: job.failedReason ?? null };
      }
      case "retry": {
        const job = await queue.getJob(String(req.id));
        if (!job) return { error: `job ${req.id} is gone` };
        await job.retry("completed");
        return { ok: true };
      }
      case "stall": {
        const id = String(req.id);
        await client.del(`${queue.toKey(id)}:lock`);
        await client.sadd(queue.keys.stalled, id);
        await client.del(queue.keys["stalled-check"]);
        if (req.check) {
          // A worker that never runs (no processor, autorun off) is BullMQ's own stalled
          // checker, run once.
          const checker = new bullmq.Worker(queueName, undefined, { connection, prefix, autorun: false });
          try {
            await checker.waitUntilReady();
            await checker.moveStalledJobsToWait();
          } finally {
            await checker.close();
          }
        }
        return { ok: true };
      }
      case "close":
        await Promise.all([queue, ...fed].map((q) => q.close()));
        process.exit(0);
        break;
      default:
        return { error: `unknown op ${req.op}` };
    }
    return {};
  };

  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (!line.trim()) continue;
    let answer: unknown;
    try {
      answer = await handle(JSON.parse(line) as Request);
    } catch (err) {
      answer = { error: err instanceof Error ? err.message : String(err) };
    }
    process.stdout.write(JSON.stringify(answer) + "\n");
  }
  await Promise.all([queue, ...fed].map((q) => q.close()));
  process.exit(0);
}

main().catch((err) => fail(err instanceof Error ? err.message : String(err)));
