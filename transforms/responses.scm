; Answering statements and calls of HTTP handlers, for model::responses (rules
; swallowed-error-returns-2xx, permanent-error-returns-5xx, ack-timing, response-missing,
; duplicate-not-2xx, in-progress-not-retryable, order-dependence-assumed).
; The query locates candidates; Rust decides (is the root a response or context object of the
; handler? which status does the chain, init object or exception carry? is a `return` an h3 or
; Nest answer?). Patterns are single nodes (cheap to compile); Rust climbs from a callee name
; to its call, from a field to its assignment.

; Chain ends and context answers: res.status(400).json(x), res.sendStatus(500), reply.code(409).send(),
; c.json(x, 401), c.text('ok'), ctx.throw(400), NextResponse.json(x), Response.redirect(url)
((property_identifier) @callee_name
  (#any-of? @callee_name "json" "send" "end" "sendStatus" "jsonp" "redirect" "text" "body" "html" "newResponse" "throw" "callNotFound"))

; The same through a quoted member: res["json"]({ ok: true })
((string_fragment) @callee_name
  (#any-of? @callee_name "json" "send" "end" "sendStatus" "jsonp" "redirect" "text" "body" "html" "newResponse" "throw" "callNotFound"))

; Bare helpers: json(data, { status: 400 }) (Remix, SvelteKit), setResponseStatus(event, 409), sendNoContent(event)
((identifier) @callee_name
  (#any-of? @callee_name "json" "setResponseStatus" "sendNoContent"))

; Fetch responses: new Response(null, { status: 503 }), new NextResponse(body)
((identifier) @constructor
  (#any-of? @constructor "Response" "NextResponse"))

; Koa answers: ctx.status = 202, ctx.body = { ok: true }, ctx.response.status = 400
((property_identifier) @field
  (#any-of? @field "status" "body"))

; The same through a quoted member: ctx["status"] = 400
((string_fragment) @field
  (#any-of? @field "status" "body"))

; Thrown answers: throw new BadRequestException(), throw createError({ statusCode: 400 })
(throw_statement) @throw

; h3 and Nest answer with the handler's return: return { ok: true }
(return_statement) @return

; Functions, so Rust knows which function a candidate belongs to (nested callbacks answer
; for themselves): async (req, res) => { ... }, function handler(event) { ... }, async POST() { ... }
[(function_declaration) (function_expression) (arrow_function) (method_definition)
 (generator_function_declaration) (generator_function)] @function
