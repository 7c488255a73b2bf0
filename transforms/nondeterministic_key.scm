; Dedupe-key positions and random/time sources, for model::dedupe_keys (rules
; nondeterministic-key, wrong-event-field-as-key, queue-add-without-job-id, dedupe-ttl-short,
; retry-loop-with-effect). The query locates candidates; Rust decides (is the property a key
; of a queue/SDK call, not a DB column? is the call a random or clock source?).
; Key arguments (guard.run(key, ...), SET NX, marker inserts, Inngest) are decided per call
; by the effect classifier and are not located here.

; Key properties by name, case and separators aside (names ending in key or id):
; { idempotencyKey: key }, { "Idempotency-Key": k }, { jobId: `sync:${id}` }, { deduplication: { id } }
(pair
  key: [(property_identifier) (string)] @key
  (#match? @key "(?i)(k[-_]*e[-_]*y|i[-_]*d)[-_]*['\"]?$")) @property

; The same in shorthand: { jobId }, { MessageDeduplicationId }
((shorthand_property_identifier) @property
  (#match? @property "(?i)(k[-_]*e[-_]*y|i[-_]*d)[-_]*$"))

; Random and clock calls by name: uuid(), v4(), nanoid(), createId(), ulid()
(call_expression
  function: (identifier) @source_name
  (#any-of? @source_name "uuid" "v1" "v4" "v7" "uuidv4" "uuidV4" "uuidv7" "randomUUID" "nanoid" "cuid" "cuid2" "createId" "ulid" "randomBytes" "randomInt")) @source

; The same as methods: crypto.randomUUID(), Date.now(), Math.random(), process.hrtime.bigint()
(call_expression
  function: (member_expression property: (property_identifier) @source_name)
  (#any-of? @source_name "now" "random" "bigint" "uuid" "v1" "v4" "v7" "uuidv4" "uuidV4" "uuidv7" "randomUUID" "nanoid" "cuid" "cuid2" "createId" "ulid" "randomBytes" "randomInt")) @source

; The same through a quoted member: crypto["randomUUID"]()
(call_expression
  function: (subscript_expression index: (string (string_fragment) @source_name))
  (#any-of? @source_name "now" "random" "bigint" "uuid" "v1" "v4" "v7" "uuidv4" "uuidV4" "uuidv7" "randomUUID" "nanoid" "cuid" "cuid2" "createId" "ulid" "randomBytes" "randomInt")) @source

; Wrapped callees, named by what they wrap (a `<T>` assertion needs parentheses): (crypto.randomUUID as () => string)(), uuid!()
(call_expression
  function: [(parenthesized_expression) (non_null_expression) (as_expression) (satisfies_expression)
             (await_expression)]) @source

; Fresh timestamps and ids: new Date(), new ObjectId()
(new_expression
  constructor: (identifier) @source_name
  (#any-of? @source_name "Date" "ObjectId")) @source
