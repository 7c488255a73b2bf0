// Refunds a disputed charge through stripe-node (which calls https.request): REFUND_KEY=event
// passes a key derived from the event id, REFUND_KEY=none passes none.
import http from "node:http";
import Stripe from "stripe";

const stripe = new Stripe("sk_test_retrysafe_verify", { maxNetworkRetries: 0 });
const keyed = process.env.REFUND_KEY === "event";

http
  .createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", async () => {
      let event;
      try {
        event = stripe.webhooks.constructEvent(Buffer.concat(chunks), req.headers["stripe-signature"], process.env.STRIPE_WEBHOOK_SECRET);
      } catch {
        return res.writeHead(400).end();
      }
      try {
        const refund = await stripe.refunds.create(
          { charge: event.data.object.charge },
          keyed ? { idempotencyKey: `refund-${event.id}` } : undefined,
        );
        res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ refund: refund.id }));
      } catch (err) {
        console.error(err);
        res.writeHead(500).end();
      }
    });
  })
  .listen(Number(process.env.PORT), "127.0.0.1");
