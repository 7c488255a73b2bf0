import express from "express";
import type Stripe from "stripe";
import { prisma, resend, stripe } from "./clients.ts";
import { guard } from "@/lib/guard";

const app = express();

app.post("/webhooks/stripe", express.raw({ type: "application/json" }), async (req, res) => {
  let event: Stripe.Event;
  try {
    event = stripe.webhooks.constructEvent(req.body, req.headers["stripe-signature"] as string, process.env.STRIPE_WEBHOOK_SECRET!);
  } catch {
    return res.status(400).send("invalid signature");
  }

  const result = await guard.run(`stripe:${event.id}`, async (tx) => {
    if (event.type === "checkout.session.completed") {
      const session = event.data.object as Stripe.Checkout.Session;
      const order = await tx.order.create({
        data: { stripeSessionId: session.id, amountTotal: session.amount_total ?? 0, email: session.customer_email ?? "" },
      });
      // Everything the email says comes from the event or from fields the insert copied from
      // it: the generated `order.id` would differ on every attempt, and no idempotency key can
      // make a repeat of a different email a no-op.
      const { error } = await resend.emails.send({
        from: "Acme <orders@acme.dev>",
        to: order.email,
        subject: `Your order ${session.id}`,
        html: `<p>Thanks! We received ${(order.amountTotal / 100).toFixed(2)}.</p>`,
      }, { idempotencyKey: `email:${event.id}` });
      if (error) throw error;
    }
  });
  if (result.status === "in-progress") return res.status(409).end();

  res.json({ received: true });
});

app.listen(Number(process.env.PORT ?? 3000), "127.0.0.1");
