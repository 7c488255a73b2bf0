import { Webhook } from "svix";
import { eq } from "drizzle-orm";
import { db } from "@/db";
import { processedWebhooks, users } from "@/db/schema";
import { sendWelcomeEmail } from "@/lib/email";
import { guard } from "@/lib/guard";

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

  const result = await guard.run(`svix:${svixId}`, async (tx) => {
    if (evt.type === "user.created") {
      const email = evt.data.email_addresses[0]?.email_address;
      if (email) {
        await tx.insert(users).values({ id: evt.data.id, email, firstName: evt.data.first_name });
        await sendWelcomeEmail(email, evt.data.first_name, `welcome/${svixId}`);
      }
    }
  });
  if (result.status === "in-progress") return new Response(null, { status: 409 });

  return new Response("OK", { status: 200 });
}
