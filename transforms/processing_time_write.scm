; Written columns and clock reads, for rules::processing_time_write (rule processing-time-write).
; The query locates candidates; Rust decides (is the call an update/upsert outside a guard?
; is the column a period/counter/credit? is the property in a filter or a create branch?
; does the value read the clock?).

; Columns a write sets: { currentPeriodEnd: addMonths(new Date(), 1) }, { "requests_used": 0 }
(pair key: (_) value: (_)) @property

; Columns set from a local of the same name: { expiresAt }
(shorthand_property_identifier) @property

; Clock calls by name: dayjs(), moment(), sequelize.fn('NOW'), fn('now')
(call_expression
  function: (identifier) @clock_name
  (#any-of? @clock_name "dayjs" "moment" "fn")) @clock

; Clock methods: Date.now(), DateTime.now(), DateTime.local(), knex.fn.now()
(call_expression
  function: (member_expression property: (property_identifier) @clock_name)
  (#any-of? @clock_name "now" "local" "fn")) @clock

; The same through a quoted member: Date["now"]()
(call_expression
  function: (subscript_expression index: (string (string_fragment) @clock_name))
  (#any-of? @clock_name "now" "local" "fn")) @clock

; Wrapped callees, named by what they wrap: (Date.now)(), dayjs!()
(call_expression
  function: [(parenthesized_expression) (non_null_expression) (as_expression) (satisfies_expression)
             (await_expression)]) @clock

; Fresh timestamps: new Date()
(new_expression
  constructor: (identifier) @clock_name
  (#eq? @clock_name "Date")) @clock

; SQL clock text: knex.raw("now() + interval '1 month'"), `CURRENT_TIMESTAMP`
([(string) (template_string)] @clock
  (#match? @clock "(?i)now\\(\\)|current_timestamp"))
