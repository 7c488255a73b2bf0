; In-memory dedupe stores and their uses, for rules::in_memory_dedupe (rule in-memory-dedupe).
; The query locates candidates; Rust decides (is the declarator module-level and its
; initializer a Set/Map/LRU/empty array or object? is the use a check in an `if` followed by
; an insert? is it a dedupe store?). Patterns are single nodes (cheap to compile, see
; model::queries::call_of_callee_name); Rust climbs to the declaration or the call.

; Bindings, of which Rust keeps the module-level ones: const seen = new Set<string>(),
; export const handled = new Map(), let processed: string[] = []
(variable_declarator) @declarator

; Process globals: global.seen = global.seen || new Set(), globalThis.seen ??= new Map()
((identifier) @global
  (#any-of? @global "global" "globalThis"))

; Fields of singleton services: private readonly seen = new Set<string>()
(public_field_definition) @field

; Check and insert methods of a store: seen.has(event.id), this.cache.get(id), seen.add(id)
((property_identifier) @method
  (#any-of? @method "has" "get" "includes" "indexOf" "some" "add" "set" "push" "unshift"))

; The same through a quoted member: seen["has"](event.id)
((string_fragment) @method
  (#any-of? @method "has" "get" "includes" "indexOf" "some" "add" "set" "push" "unshift"))

; Object stores: if (seen[event.id]) return, if (event.id in seen) return
(subscript_expression) @read
(binary_expression) @read

; Object store inserts: seen[event.id] = true
(assignment_expression) @write
