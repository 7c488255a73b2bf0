import express from "express";
import type Stripe from "stripe";
import { resend, stripe } from "./clients.ts";
import { guard } from "./guard.ts";

const app = express();

app.post("/webhooks/stripe", express.raw({ type: "application/json" }), async (req, res) => {
  let event: Stripe.Event;
  try {
    event = stripe.webhooks.constructEvent(req.body, req.headers["stripe-signature"] as string, process.env.STRIPE_WEBHOOK_SECRET!);
  } catch {
    return res.status(400).send("invalid signature");
  }

  // The claim and the order commit together; a crash rolls both back, so the redelivery
  // runs again, and the email's idempotency key makes Resend send it once.
  await guard.run(`stripe:${event.id}`, async (tx) => {
    if (event.type !== "checkout.session.completed") return;
    const session = event.data.object as Stripe.Checkout.Session;
    const order = await tx.order.create({
      data: { stripeSessionId: session.id, amountTotal: session.amount_total ?? 0, email: session.customer_email ?? "" },
    });
    const { error } = await resend.emails.send(
      {
        from: "Acme <orders@acme.dev>",
        to: order.email,
        subject: "Your order",
        html: `<p>Thanks! We received ${(order.amountTotal / 100).toFixed(2)}.</p>`,
      },
      { idempotencyKey: `order-email/${event.id}` },
    );
    // Resend reports failures in the result: throw, so the transaction rolls back and Stripe retries.
    if (error) throw new Error(`resend: ${error.message}`);
  });
  res.json({ received: true });
});

app.listen(Number(process.env.PORT ?? 3000), "127.0.0.1");
