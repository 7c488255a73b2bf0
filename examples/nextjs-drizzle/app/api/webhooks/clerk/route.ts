import { headers } from 'next/headers'
import { Webhook } from 'svix'
import type { WebhookEvent } from '@clerk/nextjs/server'
import { eq } from 'drizzle-orm'
import { db } from '@/db'
import { processedWebhooks, users } from '@/db/schema'
import { sendWelcomeEmail } from '@/lib/email'

export async function POST(req: Request) {
  const secret = process.env.CLERK_WEBHOOK_SECRET
  if (!secret) {
    throw new Error('CLERK_WEBHOOK_SECRET is not set')
  }

  const headerPayload = await headers()
  const svixId = headerPayload.get('svix-id')
  const svixTimestamp = headerPayload.get('svix-timestamp')
  const svixSignature = headerPayload.get('svix-signature')
  if (!svixId || !svixTimestamp || !svixSignature) {
    return new Response('Missing svix headers', { status: 400 })
  }

  const body = await req.text()
  let evt: WebhookEvent
  try {
    evt = new Webhook(secret).verify(body, {
      'svix-id': svixId,
      'svix-timestamp': svixTimestamp,
      'svix-signature': svixSignature,
    }) as WebhookEvent
  } catch (err) {
    console.error('Error verifying webhook', err)
    return new Response('Invalid signature', { status: 400 })
  }

  // Clerk retries failed deliveries: skip the ones we've already handled.
  const existing = await db
    .select()
    .from(processedWebhooks)
    .where(eq(processedWebhooks.svixId, svixId))
    .limit(1)
  if (existing.length > 0) {
    return new Response('Already processed', { status: 200 })
  }

  if (evt.type === 'user.created') {
    const { id, email_addresses, first_name } = evt.data
    const email = email_addresses[0]?.email_address
    if (email) {
      await db.insert(users).values({ id, email, firstName: first_name })
      await sendWelcomeEmail(email, first_name)
    }
  }

  if (evt.type === 'user.deleted' && evt.data.id) {
    await db.delete(users).where(eq(users.id, evt.data.id))
  }

  await db.insert(processedWebhooks).values({ svixId, type: evt.type })

  return new Response('OK', { status: 200 })
}
