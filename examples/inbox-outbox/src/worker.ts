// The background process: the inbox worker and the outbox dispatcher, polling until SIGTERM.
import pg from "pg";
import { createApp, handleEvent, sendEffect } from "./app";

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const app = createApp(pool, "", process.env.EMAIL_API_URL ?? "http://127.0.0.1:4010");

const inboxWorker = app.inbox.start({ handle: (event, ctx) => handleEvent(app, event, ctx), leaseMs: 30_000, onError: console.error });
const dispatcher = app.outbox.start({
  send: (row, ctx) => sendEffect(app, row, ctx),
  // a plan change at the billing provider has no idempotency key: look before resending
  policies: { send_receipt: "idempotent", set_plan: "manual" },
  leaseMs: 30_000,
  onError: console.error,
});

process.on("SIGTERM", async () => {
  await Promise.all([inboxWorker.stop(), dispatcher.stop()]);
  await pool.end();
});
