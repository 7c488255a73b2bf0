import { Resend } from "resend";

const resend = new Resend(process.env.RESEND_API_KEY ?? "re_test_example");

// The caller passes a key derived from the event, so Resend sends one email per event.
export async function sendWelcomeEmail(to: string, firstName: string | null, idempotencyKey: string) {
  const { error } = await resend.emails.send(
    {
      from: "Acme <hello@acme.dev>",
      to,
      subject: "Welcome to Acme",
      html: `<p>Hi ${firstName ?? "there"}, thanks for signing up!</p>`,
    },
    { idempotencyKey },
  );
  if (error) {
    throw new Error(`welcome email failed: ${error.message}`);
  }
}
