// The webhook route (Express): raw body for the signature, then durable acceptance.
import express from "express";
import pg from "pg";
import { createApp, receiveWebhook } from "./app";

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const app = createApp(pool, process.env.STRIPE_WEBHOOK_SECRET ?? "", process.env.EMAIL_API_URL ?? "http://127.0.0.1:4010");

const server = express();
server.post("/webhooks/stripe", express.text({ type: "*/*" }), async (req, res) => {
  const answer = await receiveWebhook(app, req.body, req.header("stripe-signature"));
  res.status(answer.status).set(answer.headers).send(answer.body);
});
server.listen(Number(process.env.PORT ?? 3000), "127.0.0.1");
