// A BullMQ worker whose dedupe goes through node-redis (not ioredis), in two flavours:
// APP_MODE=check-then-set reads the marker, sends, then writes it (two runs at once both send);
// APP_MODE=set-nx claims with SET NX before sending (a crash after the claim loses the email).
import { Worker } from "bullmq";
import { createClient } from "redis";

const url = process.env.REDIS_URL;
const redis = await createClient({ url }).connect();

new Worker(
  "jobs",
  async (job) => {
    const key = `sent:${job.id}`;
    if (process.env.APP_MODE === "set-nx") {
      if (!(await redis.set(key, "1", { NX: true }))) return "duplicate";
    } else if (await redis.get(key)) {
      return "duplicate";
    }
    const res = await fetch("https://api.sendgrid.com/v3/mail/send", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ to: job.data.to, template: "receipt" }),
    });
    if (!res.ok) throw new Error(`sendgrid: ${res.status}`);
    if (process.env.APP_MODE !== "set-nx") await redis.set(key, "1");
    return "sent";
  },
  { connection: { url, maxRetriesPerRequest: null }, concurrency: 4 },
);
