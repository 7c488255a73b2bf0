import { Worker, type Job } from "bullmq";
import { sendTemplate } from "./mailer";
import { followUpQueue, type EmailJob } from "./queues";
import { connection, redis } from "./redis";

export const emailWorker = new Worker<EmailJob>(
  "emails",
  async (job: Job<EmailJob>) => {
    // Make sure the same job never sends twice.
    const lockKey = `email-sent:${job.id}`;
    const first = await redis.set(lockKey, "1", "EX", 60, "NX");
    if (!first) {
      job.log("already sent, skipping");
      return { skipped: true };
    }

    const { to, template, vars, userId } = job.data;
    await sendTemplate(to, template, vars);

    if (template === "welcome") {
      // Nudge new users three days later.
      await followUpQueue.add(
        "trial-ending",
        { userId, to },
        { delay: 3 * 24 * 60 * 60 * 1000 },
      );
    }

    return { sent: true };
  },
  { connection, concurrency: 10 },
);

emailWorker.on("failed", (job, err) => {
  console.error(`email job ${job?.id} failed`, err);
});
