; Candidate entry points of at-least-once deliveries, for model::handlers.
; The query only locates candidates; Rust code decides (webhook route? which provider?).
; model::queries implements it with a token scan (tests prove both find the same nodes).

; Route and consumer registrations: app.post(path, ...handler), router.route(p).post(h),
; queue.process(fn), consumer.run({ eachMessage }), channel.consume(q, fn),
; subscription.on('message', fn), inngest.createFunction(...), Deno.serve(fn), client.send(...),
; oRPC's procedure.route({ method, path }).handler(fn), a queue client's createRunner(queue, { run }),
; BullMQ's manual processing loop: const job = await worker.getNextJob(token)
; @hono/zod-openapi: app.openapi(createRoute({ method, path }), handler)
; sqs-consumer: Consumer.create({ queueUrl, handleMessage })
(call_expression
  function: (member_expression
    property: (property_identifier) @name)
  (#match? @name "^(?i:post|put|patch|all|route|process|run|consume|on|createFunction|task|schemaTask|serve|send|handler|createRunner|getNextJob|openapi|create|receiveMessage|receiveMessages)$")) @call

; Bare registrations: serve(fn), task({ run }), schemaTask({ run }),
; h3 route modules: export default defineEventHandler(async (event) => ...)
; payment SDK adapters: Webhooks({ webhookSecret, onOrderPaid }), webhooks({ webhookKey, onSubscriptionActive })
(call_expression
  function: (identifier) @name
  (#match? @name "^(serve|task|schemaTask|createFunction|defineEventHandler|eventHandler|Webhooks|webhooks)$")) @call

; Route modules and Lambda handlers: export async function POST, export default ..., export const handler
(export_statement) @export

; BullMQ: new Worker(name, processor); liteque: new Runner(queue, { run })
(new_expression
  constructor: (identifier) @ctor
  (#match? @ctor "^(Worker|Runner)$")) @new

; NestJS @Post() / @Process() methods (decorators precede the method in the class body;
; a sibling pattern, as `(class_body (decorator) . (method_definition))` misses a method
; with two decorators)
((decorator)
  .
  (method_definition) @method)

; BullMQ `process(job)` of a @Processor class, Cloudflare Workers' `export default { async queue(batch, env) {} }`
; and `export default { async fetch(request, env, ctx) {} }` (a webhook when it verifies a sender)
(method_definition
  name: (property_identifier) @method_name
  (#match? @method_name "^(queue|process|fetch)$")) @method

; CommonJS: exports.handler = ..., module.exports = handler, module.exports.handler = ...
(expression_statement
  (assignment_expression
    left: (member_expression) @left
    (#match? @left "^(module\\s*\\.\\s*)?exports\\b"))) @assignment

; @shopify/shopify-api webhook handlers: `{ deliveryMethod: DeliveryMethod.Http, callback: async (topic, shop, body, webhookId) => {} }`
; (Rust checks the `deliveryMethod` sibling), and Cloudflare Queues' consumer written as a
; property: `export default { fetch: app.fetch, queue: async (batch, env) => {} }`
(pair
  key: (property_identifier) @key
  value: [(arrow_function) (function_expression) (identifier)]
  (#match? @key "^(callback|queue)$")) @pair

; a Pub/Sub worker object handed to a shared subscriber: `{ subscription: "api.new-view",
; handler: async (message, con) => {} }` (Rust checks the `handler` sibling and the dependency)
(pair
  key: (property_identifier) @key
  value: (string)
  (#eq? @key "subscription")) @pair
