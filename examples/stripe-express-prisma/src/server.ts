import express from "express";
import type Stripe from "stripe";
import { prisma, stripe } from "@/lib/clients";
import {
  handleCheckoutCompleted,
  handleCreditsPurchased,
  handleDisputeCreated,
} from "@/webhooks/stripe";

const app = express();

app.post("/webhooks/stripe", express.raw({ type: "application/json" }), async (req, res) => {
  let event: Stripe.Event;
  try {
    event = stripe.webhooks.constructEvent(
      req.body,
      req.headers["stripe-signature"] as string,
      process.env.STRIPE_WEBHOOK_SECRET!,
    );
  } catch (err) {
    console.error("stripe signature verification failed", err);
    return res.status(400).send("invalid signature");
  }

  // Skip events we've already seen.
  const seen = await prisma.processedEvent.findFirst({ where: { eventId: event.id } });
  if (seen) {
    return res.json({ received: true, duplicate: true });
  }

  try {
    switch (event.type) {
      case "checkout.session.completed":
        await handleCheckoutCompleted(event);
        break;
      case "payment_intent.succeeded":
        await handleCreditsPurchased(event);
        break;
      case "charge.dispute.created":
        await handleDisputeCreated(event);
        break;
      default:
        console.log(`unhandled event type ${event.type}`);
    }
    await prisma.processedEvent.create({ data: { eventId: event.id, type: event.type } });
  } catch (err) {
    // Don't make Stripe retry: we log it and look at it later.
    console.error(`failed to handle ${event.type}`, err);
  }

  res.json({ received: true });
});

app.use(express.json());

app.get("/health", (_req, res) => {
  res.send("ok");
});

app.listen(Number(process.env.PORT ?? 3000), () => {
  console.log("listening");
});
