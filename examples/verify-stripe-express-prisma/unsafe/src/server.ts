import express from "express";
import type Stripe from "stripe";
import { prisma, resend, stripe } from "./clients.ts";

const app = express();

app.post("/webhooks/stripe", express.raw({ type: "application/json" }), async (req, res) => {
  let event: Stripe.Event;
  try {
    event = stripe.webhooks.constructEvent(req.body, req.headers["stripe-signature"] as string, process.env.STRIPE_WEBHOOK_SECRET!);
  } catch {
    return res.status(400).send("invalid signature");
  }

  // Skip events we've already seen.
  const seen = await prisma.seenEvent.findFirst({ where: { eventId: event.id } });
  if (seen) return res.json({ received: true, duplicate: true });

  if (event.type === "checkout.session.completed") {
    const session = event.data.object as Stripe.Checkout.Session;
    const order = await prisma.order.create({
      data: { stripeSessionId: session.id, amountTotal: session.amount_total ?? 0, email: session.customer_email ?? "" },
    });
    // Everything the email says comes from the event or from fields the insert copied from
    // it: the generated `order.id` would differ on every attempt, and no idempotency key can
    // make a repeat of a different email a no-op.
    await resend.emails.send({
      from: "Acme <orders@acme.dev>",
      to: order.email,
      subject: `Your order ${session.id}`,
      html: `<p>Thanks! We received ${(order.amountTotal / 100).toFixed(2)}.</p>`,
    });
  }

  await prisma.seenEvent.create({ data: { eventId: event.id } });
  res.json({ received: true });
});

app.listen(Number(process.env.PORT ?? 3000), "127.0.0.1");
