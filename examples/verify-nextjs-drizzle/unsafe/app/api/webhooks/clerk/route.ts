import { Webhook } from "svix";
import { eq } from "drizzle-orm";
import { db } from "@/db";
import { processedWebhooks, users } from "@/db/schema";
import { sendWelcomeEmail } from "@/lib/email";

type UserCreated = {
  type: "user.created";
  data: { id: string; first_name: string | null; email_addresses: { email_address: string }[] };
};

export async function POST(req: Request) {
  const svixId = req.headers.get("svix-id");
  const svixTimestamp = req.headers.get("svix-timestamp");
  const svixSignature = req.headers.get("svix-signature");
  if (!svixId || !svixTimestamp || !svixSignature) {
    return new Response("Missing svix headers", { status: 400 });
  }

  const body = await req.text();
  let evt: UserCreated;
  try {
    evt = new Webhook(process.env.CLERK_WEBHOOK_SECRET!).verify(body, {
      "svix-id": svixId,
      "svix-timestamp": svixTimestamp,
      "svix-signature": svixSignature,
    }) as UserCreated;
  } catch {
    return new Response("Invalid signature", { status: 400 });
  }

  // Clerk retries failed deliveries: skip the ones we've already handled.
  const existing = await db.select().from(processedWebhooks).where(eq(processedWebhooks.svixId, svixId)).limit(1);
  if (existing.length > 0) {
    return new Response("Already processed", { status: 200 });
  }

  if (evt.type === "user.created") {
    const email = evt.data.email_addresses[0]?.email_address;
    if (email) {
      await db.insert(users).values({ id: evt.data.id, email, firstName: evt.data.first_name });
      await sendWelcomeEmail(email, evt.data.first_name, `welcome/${svixId}`);
    }
  }

  await db.insert(processedWebhooks).values({ svixId, type: evt.type });
  return new Response("OK", { status: 200 });
}
