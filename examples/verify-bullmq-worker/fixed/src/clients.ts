import { Queue } from "bullmq";
import { Redis } from "ioredis";
import { Resend } from "resend";

const url = process.env.REDIS_URL ?? "redis://127.0.0.1:6379";
// BullMQ needs maxRetriesPerRequest: null on its connection.
export const connection = new Redis(url, { maxRetriesPerRequest: null });
export const redis = new Redis(url);
export const resend = new Resend(process.env.RESEND_API_KEY ?? "re_test_example");
export const followUpQueue = new Queue("follow-ups", { connection });
