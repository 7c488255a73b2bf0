import { Queue } from "bullmq";
import { connection } from "./redis";

export type EmailJob = {
  userId: string;
  to: string;
  template: "welcome" | "trial-ending" | "receipt";
  vars: Record<string, string>;
};

export const emailQueue = new Queue<EmailJob>("emails", {
  connection,
  defaultJobOptions: { attempts: 5, backoff: { type: "exponential", delay: 10_000 } },
});

export const followUpQueue = new Queue("follow-ups", { connection });
