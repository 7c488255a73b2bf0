import { Worker, type Job } from "bullmq";
import { connection, followUpQueue, redis, resend } from "./clients.ts";

type WelcomeJob = { userId: string; to: string; firstName: string };

export const welcomeWorker = new Worker<WelcomeJob>(
  "emails",
  async (job: Job<WelcomeJob>) => {
    // Make sure the same job never sends twice.
    const lockKey = `email-sent:${job.id}`;
    const first = await redis.set(lockKey, "1", "EX", 60, "NX");
    if (!first) {
      return { skipped: true };
    }

    const { userId, to, firstName } = job.data;
    const { error } = await resend.emails.send(
      { from: "Acme <hello@acme.dev>", to, subject: "Welcome to Acme", html: `<p>Hi ${firstName}!</p>` },
      { idempotencyKey: `welcome/${job.id}` },
    );
    if (error) throw new Error(`resend: ${error.message}`);

    // Nudge new users three days later.
    await followUpQueue.add("trial-ending", { userId, to }, { delay: 3 * 24 * 60 * 60 * 1000 });
    return { sent: true };
  },
  { connection, concurrency: 10 },
);
