import { PrismaPg } from "@prisma/adapter-pg";
import { Resend } from "resend";
import Stripe from "stripe";
import { PrismaClient } from "../../generated/prisma/client.ts";

export const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: process.env.DATABASE_URL! }) });
export const stripe = new Stripe(process.env.STRIPE_SECRET_KEY ?? "sk_test_example");
export const resend = new Resend(process.env.RESEND_API_KEY ?? "re_test_example");
