import { Worker, type Job } from "bullmq";
import { connection, followUpQueue, redis, resend } from "./clients.ts";
import { guard } from "@/lib/guard";

type WelcomeJob = { userId: string; to: string; firstName: string };

export const welcomeWorker = new Worker<WelcomeJob>(
  "emails",
  async (job: Job<WelcomeJob>) => {
    const { userId, to, firstName } = job.data;
    const result = await guard.run(`bullmq:${job.id}`, async () => {
      const { error } = await resend.emails.send(
        { from: "Acme <hello@acme.dev>", to, subject: "Welcome to Acme", html: `<p>Hi ${firstName}!</p>` },
        { idempotencyKey: `welcome/${job.id}` },
      );
      if (error) throw new Error(`resend: ${error.message}`);

      // Nudge new users three days later.
      await followUpQueue.add("trial-ending", { userId, to }, { jobId: `trial-ending-${job.id}`, delay: 3 * 24 * 60 * 60 * 1000 });
    });
    if (result.status === "in-progress") throw new Error("another attempt is still processing this delivery; retry later");
    return { sent: true };
  },
  { connection, concurrency: 10 },
);
