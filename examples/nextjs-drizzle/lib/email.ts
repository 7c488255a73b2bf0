import { Resend } from 'resend'

const resend = new Resend(process.env.RESEND_API_KEY)

export async function sendWelcomeEmail(to: string, firstName: string | null) {
  const { error } = await resend.emails.send({
    from: 'Acme <hello@acme.dev>',
    to,
    subject: 'Welcome to Acme',
    html: `<p>Hi ${firstName ?? 'there'}, thanks for signing up!</p>`,
  })
  if (error) {
    throw new Error(`welcome email failed: ${error.message}`)
  }
}
