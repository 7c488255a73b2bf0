import type Stripe from "stripe";
import { prisma, resend, stripe } from "@/lib/clients";

export async function handleCheckoutCompleted(event: Stripe.Event) {
  const session = event.data.object as Stripe.Checkout.Session;
  const user = await prisma.user.findUniqueOrThrow({
    where: { stripeCustomerId: session.customer as string },
  });

  const order = await prisma.order.create({
    data: {
      userId: user.id,
      stripeSessionId: session.id,
      amountTotal: session.amount_total ?? 0,
      currency: session.currency ?? "usd",
    },
  });

  await resend.emails.send({
    from: "Acme <orders@acme.dev>",
    to: user.email,
    subject: `Your order ${order.id}`,
    html: `<p>Thanks! We received ${(order.amountTotal / 100).toFixed(2)} ${order.currency.toUpperCase()}.</p>`,
  });
}

export async function handleCreditsPurchased(event: Stripe.Event) {
  const intent = event.data.object as Stripe.PaymentIntent;
  const credits = Number(intent.metadata.credits ?? 0);
  if (!credits) return;

  await prisma.wallet.update({
    where: { userId: intent.metadata.userId },
    data: { credits: { increment: credits } },
  });
}

export async function handleDisputeCreated(event: Stripe.Event) {
  const dispute = event.data.object as Stripe.Dispute;
  // Small disputes aren't worth fighting: refund right away.
  if (dispute.amount < 2000) {
    await stripe.refunds.create({
      charge: dispute.charge as string,
      reason: "requested_by_customer",
    });
  }
}
