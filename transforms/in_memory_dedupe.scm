; In-memory dedupe stores and their uses, for rules::in_memory_dedupe (rule in-memory-dedupe).
; The query locates candidates; Rust decides (is the initializer a Set/Map/LRU/empty
; array or object? is the use a check in an `if` followed by an insert? is it a dedupe store?).

; Module-level bindings: const seen = new Set<string>(), let processed: string[] = []
(program
  [(lexical_declaration (variable_declarator name: (identifier) @name value: (_) @init))
   (variable_declaration (variable_declarator name: (identifier) @name value: (_) @init))])

; Exported module-level bindings: export const handled = new Map()
(program
  (export_statement
    declaration: [(lexical_declaration (variable_declarator name: (identifier) @name value: (_) @init))
                  (variable_declaration (variable_declarator name: (identifier) @name value: (_) @init))]))

; Process globals: global.seen = global.seen || new Set()
(assignment_expression
  left: (member_expression object: (_) @global)
  (#any-of? @global "global" "globalThis")) @assign

; Process globals: globalThis.seen ??= new Map()
(augmented_assignment_expression
  left: (member_expression object: (_) @global)
  (#any-of? @global "global" "globalThis")) @augmented

; Fields of singleton services: private readonly seen = new Set<string>()
(public_field_definition name: (_) @field value: (_) @init)

; Checks and inserts of a store: seen.has(event.id), this.cache.get(id), seen.add(event.id)
(call_expression
  function: (member_expression property: (property_identifier) @method)
  (#any-of? @method "has" "get" "includes" "indexOf" "some" "add" "set" "push" "unshift")) @call

; The same through a quoted member: seen["has"](event.id)
(call_expression
  function: (subscript_expression index: (string (string_fragment) @method))
  (#any-of? @method "has" "get" "includes" "indexOf" "some" "add" "set" "push" "unshift")) @call

; The same through parentheses: (seen.has)(event.id)
(call_expression
  function: (parenthesized_expression (member_expression property: (property_identifier) @method))
  (#any-of? @method "has" "get" "includes" "indexOf" "some" "add" "set" "push" "unshift")) @call

; Object stores: if (seen[event.id]) return, if (event.id in seen) return
(subscript_expression object: (_)) @read
(binary_expression operator: "in") @read

; Object store inserts: seen[event.id] = true
(assignment_expression left: (subscript_expression object: (_))) @write
