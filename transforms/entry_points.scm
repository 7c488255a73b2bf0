; Candidate entry points of at-least-once deliveries, for model::handlers.
; The query only locates candidates; Rust code decides (webhook route? which provider?).

; Route and consumer registrations: app.post(path, ...handler), router.route(p).post(h),
; queue.process(fn), consumer.run({ eachMessage }), channel.consume(q, fn),
; subscription.on('message', fn), inngest.createFunction(...), Deno.serve(fn), client.send(...)
(call_expression
  function: (member_expression
    property: (property_identifier) @name)
  (#match? @name "^(?i:post|put|patch|all|route|process|run|consume|on|createFunction|task|schemaTask|serve|send)$")) @call

; Bare registrations: serve(fn), task({ run }), schemaTask({ run }),
; h3 route modules: export default defineEventHandler(async (event) => ...)
(call_expression
  function: (identifier) @name
  (#match? @name "^(serve|task|schemaTask|createFunction|defineEventHandler|eventHandler)$")) @call

; Route modules and Lambda handlers: export async function POST, export default ..., export const handler
(export_statement) @export

; new Worker(name, processor)
(new_expression) @new

; NestJS @Post() / @Process() methods, object methods passed as handlers,
; Cloudflare Workers' `export default { async queue(batch, env, ctx) {} }`
(method_definition) @method

; CommonJS: exports.handler = ..., module.exports = handler
(expression_statement
  (assignment_expression)) @assignment
