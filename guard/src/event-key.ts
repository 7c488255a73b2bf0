/**
 * Header shapes accepted by the header-based helpers: a WHATWG `Headers` (fetch,
 * Next.js App Router, Hono), Node's `IncomingHttpHeaders` (`req.headers`, lower-case
 * keys, `string | string[]`), or a plain object with any capitalisation.
 */
export type HeadersLike =
  | { get(name: string): string | null | undefined }
  | Record<string, string | string[] | number | undefined | null>;

function fail(provider: string, field: string): never {
  throw new Error(`@retrysafe/guard: eventKey.${provider}: missing ${field}`);
}

function str(v: unknown): string | undefined {
  if (Array.isArray(v)) v = v[0];
  if (typeof v === "number" || typeof v === "bigint") return String(v);
  if (typeof v === "string" && v.trim() !== "" && v !== "undefined" && v !== "null") return v.trim();
  return undefined;
}

/** Read one header from any supported header shape, case-insensitively. */
export function readHeader(headers: HeadersLike | null | undefined, name: string): string | undefined {
  if (!headers || typeof headers !== "object") return undefined;
  const lower = name.toLowerCase();
  if (typeof (headers as any).get === "function") {
    return str((headers as any).get(name) ?? (headers as any).get(lower));
  }
  const h = headers as Record<string, unknown>;
  if (lower in h) return str(h[lower]);
  if (name in h) return str(h[name]);
  for (const k of Object.keys(h)) if (k.toLowerCase() === lower) return str(h[k]);
  return undefined;
}

function header(provider: string, headers: HeadersLike, ...names: string[]): string {
  if (!headers || typeof headers !== "object") fail(provider, `headers (got ${headers === null ? "null" : typeof headers})`);
  for (const n of names) {
    const v = readHeader(headers, n);
    if (v !== undefined) return `${provider}:${v}`;
  }
  return fail(provider, names.length === 1 ? `header ${names[0]}` : `header ${names.join(" or ")}`);
}

function field(provider: string, value: unknown, path: string): string {
  const v = str(value);
  if (v === undefined) fail(provider, path);
  return v;
}

function obj(provider: string, value: unknown, what: string): any {
  if (!value || typeof value !== "object") fail(provider, `${what} (got ${value === null ? "null" : typeof value})`);
  return value;
}

/**
 * Event keys per provider: the id that is the same on every redelivery of one event,
 * prefixed with the provider name. Each throws an Error naming the provider and the
 * missing field rather than returning "undefined".
 */
export const eventKey = {
  /** Stripe: `event.id` (evt_...). */
  stripe(event: { id?: string }): string {
    return `stripe:${field("stripe", obj("stripe", event, "event").id, "event.id")}`;
  },
  /** GitHub: the `X-GitHub-Delivery` header. */
  github(headers: HeadersLike): string {
    return header("github", headers, "x-github-delivery");
  },
  /** Shopify: the `X-Shopify-Webhook-Id` header (or `options.header`, e.g. "x-shopify-event-id"). */
  shopify(headers: HeadersLike, options: { header?: string } = {}): string {
    return header("shopify", headers, options.header ?? "x-shopify-webhook-id");
  },
  /** Svix senders (Clerk, Resend, ...): `svix-id`, or `webhook-id` when white-labelled. */
  svix(headers: HeadersLike): string {
    return header("svix", headers, "svix-id", "webhook-id");
  },
  /** Paystack: `${event}:${data.id}` (there is no event id). */
  paystack(body: { event?: string; data?: { id?: string | number } }): string {
    const b = obj("paystack", body, "body");
    return `paystack:${field("paystack", b.event, "body.event")}:${field("paystack", b.data?.id, "body.data.id")}`;
  },
  /** Flutterwave (v3): `${event}:${data.id}`. */
  flutterwave(body: { event?: string; data?: { id?: string | number } }): string {
    const b = obj("flutterwave", body, "body");
    return `flutterwave:${field("flutterwave", b.event, "body.event")}:${field("flutterwave", b.data?.id, "body.data.id")}`;
  },
  /** Paddle Billing: body `event_id`. */
  paddle(body: { event_id?: string }): string {
    return `paddle:${field("paddle", obj("paddle", body, "body").event_id, "body.event_id")}`;
  },
  /** Razorpay: the `x-razorpay-event-id` header. */
  razorpay(headers: HeadersLike): string {
    return header("razorpay", headers, "x-razorpay-event-id");
  },
  /** PayPal: body `id` (WH-...). */
  paypal(body: { id?: string }): string {
    return `paypal:${field("paypal", obj("paypal", body, "body").id, "body.id")}`;
  },
  /** Square: body `event_id`. */
  square(body: { event_id?: string }): string {
    return `square:${field("square", obj("square", body, "body").event_id, "body.event_id")}`;
  },
  /** Slack Events API: body `event_id`. */
  slack(body: { event_id?: string }): string {
    return `slack:${field("slack", obj("slack", body, "body").event_id, "body.event_id")}`;
  },
  /** Linear: the `Linear-Delivery` header. */
  linear(headers: HeadersLike): string {
    return header("linear", headers, "linear-delivery");
  },
  /** SQS: `record.messageId` (Lambda `SQSRecord`) or `MessageId` (`ReceiveMessageCommand`). */
  sqs(record: { messageId?: string; MessageId?: string }): string {
    const r = obj("sqs", record, "record");
    return `sqs:${field("sqs", r.messageId ?? r.MessageId, "record.messageId")}`;
  },
  /** BullMQ / Bull: `job.id`. */
  bullmq(job: { id?: string | number | null }): string {
    return `bullmq:${field("bullmq", obj("bullmq", job, "job").id, "job.id")}`;
  },
  /** Google Pub/Sub: `message.id` (client library) or `message.messageId` (push body; pass `body.message`). */
  pubsub(message: { id?: string; messageId?: string; message_id?: string }): string {
    const m = obj("pubsub", message, "message");
    return `pubsub:${field("pubsub", m.id ?? m.messageId ?? m.message_id, "message.id")}`;
  },
  /** Kafka (kafkajs `eachMessage` payload): `${topic}:${partition}:${message.offset}`. */
  kafka(payload: { topic?: string; partition?: number; message?: { offset?: string | number } }): string {
    const p = obj("kafka", payload, "payload");
    const topic = field("kafka", p.topic, "topic");
    const partition = field("kafka", p.partition, "partition");
    const offset = field("kafka", p.message?.offset, "message.offset");
    return `kafka:${topic}:${partition}:${offset}`;
  },
  /** RabbitMQ (amqplib): `msg.properties.messageId` (the publisher must set it). */
  amqp(msg: { properties?: { messageId?: string } }): string {
    return `amqp:${field("amqp", obj("amqp", msg, "msg").properties?.messageId, "msg.properties.messageId")}`;
  },
  /** Inngest: `event.id`. */
  inngest(event: { id?: string }): string {
    return `inngest:${field("inngest", obj("inngest", event, "event").id, "event.id")}`;
  },
  /** Trigger.dev: `ctx.run.id` (stable across attempts). */
  trigger(ctx: { run?: { id?: string } }): string {
    return `trigger:${field("trigger", obj("trigger", ctx, "ctx").run?.id, "ctx.run.id")}`;
  },
};
