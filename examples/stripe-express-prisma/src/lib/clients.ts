import { PrismaClient } from "@prisma/client";
import { Resend } from "resend";
import Stripe from "stripe";

export const prisma = new PrismaClient();

export const stripe = new Stripe(process.env.STRIPE_SECRET_KEY!, {
  apiVersion: "2024-10-28.acacia",
});

export const resend = new Resend(process.env.RESEND_API_KEY);
