import { Redis } from "ioredis";

// BullMQ needs maxRetriesPerRequest: null on its connection.
export const connection = new Redis(process.env.REDIS_URL ?? "redis://localhost:6379", {
  maxRetriesPerRequest: null,
});

export const redis = new Redis(process.env.REDIS_URL ?? "redis://localhost:6379");
