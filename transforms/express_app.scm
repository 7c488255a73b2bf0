; Express middleware and route registrations, for model::express_app (rule
; raw-body-not-preserved). The query locates candidates; Rust decides (is it `X.use(...)` with
; a JSON body parser among its arguments, or a router mounted by name? is it a route
; registration with a path and the handler last?). Patterns are single nodes (cheap to
; compile); Rust climbs from the method name to its call.

; Middleware mounts and route registrations: app.use(express.json()), app.use(bodyParser.json()),
; app.use('/api', router), app.post('/webhooks/stripe', express.raw({ type: 'application/json' }), handler)
((property_identifier) @method
  (#match? @method "^(?i:use|post|put|patch|all)$"))

; The same through a quoted member: app["use"](express.json())
((string_fragment) @method
  (#match? @method "^(?i:use|post|put|patch|all)$"))
