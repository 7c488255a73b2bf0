; Dedupe-key positions and random/time sources, for model::dedupe_keys (rules
; nondeterministic-key, wrong-event-field-as-key, queue-add-without-job-id, dedupe-ttl-short,
; retry-loop-with-effect). The query locates candidates; Rust decides (is the property a key
; of a queue/SDK call, not a DB column? is the call a random or clock source?).
; Key arguments (guard.run(key, ...), SET NX, marker inserts, Inngest) are decided per call
; by the effect classifier and are not located here. Patterns are single nodes (cheap to
; compile); Rust climbs from the name to the property or the call.

; Key property names, case and separators aside (names ending in key or id):
; { idempotencyKey: key }, { jobId: `sync:${id}` }, { deduplication: { id } }
((property_identifier) @key_name
  (#match? @key_name "(?i)(k[-_]*e[-_]*y|i[-_]*d)[-_]*$"))

; The same quoted: { "Idempotency-Key": k }, headers: { 'PayPal-Request-Id': id }
((string_fragment) @key_name
  (#match? @key_name "(?i)(k[-_]*e[-_]*y|i[-_]*d)[-_]*$"))

; The same in shorthand: { jobId }, { MessageDeduplicationId }
((shorthand_property_identifier) @property
  (#match? @property "(?i)(k[-_]*e[-_]*y|i[-_]*d)[-_]*$"))

; Random and clock sources by callee name: uuid(), v4(), crypto.randomUUID(), nanoid(),
; Date.now(), Math.random(), process.hrtime.bigint(), new Date(), new ObjectId()
((identifier) @source_name
  (#any-of? @source_name "Date" "ObjectId" "uuid" "v1" "v4" "v7" "uuidv4" "uuidV4" "uuidv7" "randomUUID" "nanoid" "cuid" "cuid2" "createId" "ulid" "randomBytes" "randomInt"))

; The same as methods: crypto.randomUUID(), Date.now(), Math.random()
((property_identifier) @source_name
  (#any-of? @source_name "now" "random" "bigint" "uuid" "v1" "v4" "v7" "uuidv4" "uuidV4" "uuidv7" "randomUUID" "nanoid" "cuid" "cuid2" "createId" "ulid" "randomBytes" "randomInt"))

; The same through a quoted member: crypto["randomUUID"]()
((string_fragment) @source_name
  (#any-of? @source_name "now" "random" "bigint" "uuid" "v1" "v4" "v7" "uuidv4" "uuidV4" "uuidv7" "randomUUID" "nanoid" "cuid" "cuid2" "createId" "ulid" "randomBytes" "randomInt"))
