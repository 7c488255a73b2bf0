; Retry-loop candidates, for model::retry_loops (rules retry-loop-with-effect, unbounded-retry).
; The query locates candidates; Rust decides (does the body catch and go round again? is
; the callback the attempt of a retry library?).

; Counted and open loops: `for (let attempt = 0; ...)`, `while (true)`, `do { } while (...)`
(for_statement body: (_) @body) @loop
(while_statement body: (_) @body) @loop
(do_statement body: (_) @body) @loop

; Retry libraries and project retry helpers, with the attempt as the first argument:
; pRetry(async () => ...), retry(async (bail) => ...), utils.withRetry(() => ...)
(call_expression
  function: [
    (identifier) @callee
    (member_expression property: (property_identifier) @callee)
  ]
  arguments: (arguments . [(arrow_function) (function_expression) (generator_function)] @callback)
  (#match? @callee "(?i)retr(y|ies)|backoff")) @library
