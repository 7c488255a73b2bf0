import { describe, expect, it } from "vitest";
import { eventKey, readHeader } from "../src/index.ts";

describe("eventKey", () => {
  it("stripe: event.id", () => {
    expect(eventKey.stripe({ id: "evt_123" })).toBe("stripe:evt_123");
    expect(() => eventKey.stripe({} as any)).toThrow(/eventKey\.stripe: missing event\.id/);
    expect(() => eventKey.stripe(undefined as any)).toThrow(/eventKey\.stripe: missing event/);
  });

  it("reads headers from WHATWG Headers, Node IncomingHttpHeaders and plain objects of any case", () => {
    expect(eventKey.github(new Headers({ "X-GitHub-Delivery": "d-1" }))).toBe("github:d-1");
    expect(eventKey.github({ "x-github-delivery": "d-2" })).toBe("github:d-2");
    expect(eventKey.github({ "X-GitHub-Delivery": "d-3" })).toBe("github:d-3");
    expect(eventKey.github({ "X-GITHUB-DELIVERY": ["d-4", "d-5"] })).toBe("github:d-4");
    expect(() => eventKey.github({})).toThrow(/eventKey\.github: missing header x-github-delivery/);
    expect(() => eventKey.github({ "x-github-delivery": "" })).toThrow(/github/);
    expect(() => eventKey.github(undefined as any)).toThrow(/eventKey\.github: missing headers/);
    expect(readHeader({ "Content-Type": "a" }, "content-type")).toBe("a");
  });

  it("shopify: X-Shopify-Webhook-Id by default, configurable header", () => {
    const h = { "x-shopify-webhook-id": "wh-1", "x-shopify-event-id": "ev-1" };
    expect(eventKey.shopify(h)).toBe("shopify:wh-1");
    expect(eventKey.shopify(h, { header: "X-Shopify-Event-Id" })).toBe("shopify:ev-1");
    expect(() => eventKey.shopify({ "x-shopify-event-id": "ev-1" })).toThrow(/shopify: missing header x-shopify-webhook-id/);
  });

  it("svix: svix-id, or webhook-id when white-labelled", () => {
    expect(eventKey.svix(new Headers({ "svix-id": "msg_1" }))).toBe("svix:msg_1");
    expect(eventKey.svix({ "webhook-id": "msg_2" })).toBe("svix:msg_2");
    expect(() => eventKey.svix({})).toThrow(/svix: missing header svix-id or webhook-id/);
  });

  it("paystack and flutterwave: event + data.id", () => {
    expect(eventKey.paystack({ event: "charge.success", data: { id: 302961 } })).toBe("paystack:charge.success:302961");
    expect(eventKey.flutterwave({ event: "charge.completed", data: { id: 285959875 } })).toBe("flutterwave:charge.completed:285959875");
    expect(() => eventKey.paystack({ event: "charge.success" } as any)).toThrow(/paystack: missing body\.data\.id/);
    expect(() => eventKey.flutterwave({ data: { id: 1 } } as any)).toThrow(/flutterwave: missing body\.event/);
  });

  it("queues: sqs, bullmq, pubsub, kafka, amqp", () => {
    expect(eventKey.sqs({ messageId: "m-1" })).toBe("sqs:m-1");
    expect(eventKey.sqs({ MessageId: "m-2" })).toBe("sqs:m-2");
    expect(() => eventKey.sqs({ receiptHandle: "x" } as any)).toThrow(/sqs: missing record\.messageId/);
    expect(eventKey.bullmq({ id: "42" })).toBe("bullmq:42");
    expect(eventKey.bullmq({ id: 7 as any })).toBe("bullmq:7");
    expect(() => eventKey.bullmq({ id: undefined })).toThrow(/bullmq: missing job\.id/);
    expect(eventKey.pubsub({ id: "p-1" })).toBe("pubsub:p-1");
    expect(eventKey.pubsub({ messageId: "p-2" })).toBe("pubsub:p-2");
    expect(eventKey.kafka({ topic: "orders", partition: 0, message: { offset: "17" } })).toBe("kafka:orders:0:17");
    expect(() => eventKey.kafka({ topic: "orders", partition: 0, message: {} })).toThrow(/kafka: missing message\.offset/);
    expect(eventKey.amqp({ properties: { messageId: "a-1" } })).toBe("amqp:a-1");
    expect(() => eventKey.amqp({ properties: {} })).toThrow(/amqp: missing msg\.properties\.messageId/);
  });

  it("other providers", () => {
    expect(eventKey.paddle({ event_id: "evt_01" })).toBe("paddle:evt_01");
    expect(eventKey.razorpay({ "X-Razorpay-Event-Id": "rz-1" })).toBe("razorpay:rz-1");
    expect(eventKey.paypal({ id: "WH-1" })).toBe("paypal:WH-1");
    expect(eventKey.square({ event_id: "sq-1" })).toBe("square:sq-1");
    expect(eventKey.slack({ event_id: "Ev1" })).toBe("slack:Ev1");
    expect(eventKey.linear(new Headers({ "Linear-Delivery": "ld-1" }))).toBe("linear:ld-1");
    expect(eventKey.inngest({ id: "01H" })).toBe("inngest:01H");
    expect(eventKey.trigger({ run: { id: "run_1" } })).toBe("trigger:run_1");
    for (const [name, fn] of [
      ["paddle", () => eventKey.paddle({})],
      ["razorpay", () => eventKey.razorpay({})],
      ["paypal", () => eventKey.paypal({})],
      ["square", () => eventKey.square({})],
      ["slack", () => eventKey.slack({})],
      ["linear", () => eventKey.linear({})],
      ["inngest", () => eventKey.inngest({})],
      ["trigger", () => eventKey.trigger({})],
    ] as const) {
      expect(fn).toThrow(new RegExp(`eventKey\\.${name}: missing`));
    }
  });

  it("never returns a key containing 'undefined'", () => {
    expect(() => eventKey.stripe({ id: "undefined" })).toThrow();
    expect(() => eventKey.github({ "x-github-delivery": "undefined" })).toThrow();
  });
});
