// A Stripe subscription webhook with its state in a file (`cat`-able as --state), in two
// versions: APP_MODE=unsafe dedupes by the object id and lets an older event overwrite a newer
// one; APP_MODE=safe dedupes by the event id and skips events older than the stored state.
import http from "node:http";
import crypto from "node:crypto";
import fs from "node:fs";

const secret = process.env.STRIPE_WEBHOOK_SECRET;
const stateFile = process.env.STATE_FILE;
const safe = process.env.APP_MODE === "safe";

function load() {
  try {
    return JSON.parse(fs.readFileSync(stateFile, "utf8"));
  } catch {
    return { seen: [], status: null, created: 0 };
  }
}

function verified(body, header) {
  const parts = Object.fromEntries(String(header).split(",").map((p) => p.split("=")));
  const want = crypto.createHmac("sha256", secret).update(`${parts.t}.${body}`).digest("hex");
  return parts.v1 && want.length === parts.v1.length && crypto.timingSafeEqual(Buffer.from(want), Buffer.from(parts.v1));
}

http
  .createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      if (!verified(body, req.headers["stripe-signature"])) return res.writeHead(400).end();
      const event = JSON.parse(body);
      const subscription = event.data.object;
      const state = load();
      const key = safe ? event.id : subscription.id;
      if (!state.seen.includes(key)) {
        state.seen.push(key);
        if (!safe || event.created >= state.created) {
          state.status = subscription.status;
          state.created = event.created;
        }
        fs.writeFileSync(stateFile, JSON.stringify(state));
      }
      res.writeHead(200).end("{}");
    });
  })
  .listen(Number(process.env.PORT), "127.0.0.1");
