; Written columns and clock reads, for rules::processing_time_write (rule processing-time-write).
; The query locates candidates; Rust decides (is the call an update/upsert outside a guard?
; is the column a period/counter/credit? is the property in a filter or a create branch?
; does the value read the clock?). Patterns are single nodes (cheap to compile); Rust climbs
; from a callee name to its call.

; Columns a write sets: { currentPeriodEnd: addMonths(new Date(), 1) }, { "requests_used": 0 }
(pair) @property

; Columns set from a local of the same name: { expiresAt }
(shorthand_property_identifier) @property

; Clock callees by name: dayjs(), moment(), fn('now'), new Date()
((identifier) @clock_name
  (#any-of? @clock_name "dayjs" "moment" "fn" "Date"))

; Clock methods: Date.now(), DateTime.now(), DateTime.local(), knex.fn.now(), sequelize.fn('NOW')
((property_identifier) @clock_name
  (#any-of? @clock_name "now" "local" "fn"))

; The same through a quoted member: Date["now"]()
((string_fragment) @clock_name
  (#any-of? @clock_name "now" "local" "fn"))

; SQL clock text: knex.raw("now() + interval '1 month'"), `CURRENT_TIMESTAMP`
((string) @clock
  (#match? @clock "(?i)now\\(\\)|current_timestamp"))
((template_string) @clock
  (#match? @clock "(?i)now\\(\\)|current_timestamp"))
