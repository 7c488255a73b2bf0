; Header names that are not the delivery's key, for rules::wrong_event_field_as_key (rule
; wrong-event-field-as-key). The query locates candidates; Rust decides (is the string in the
; key expression, outside callbacks? is the Shopify event id the configured key header?).
; (check-then-insert-race has no query: every call of a handler is a candidate step there.)

; Shared or per-attempt header names, any case: req.headers['x-github-hook-id'],
; request.headers.get('svix-timestamp'), c.req.header('X-Shopify-Event-Id')
((string_fragment) @header_name
  (#match? @header_name "^(?i:x-github-hook-id|x-shopify-event-id|x-shopify-triggered-at|svix-timestamp|webhook-timestamp|paypal-transmission-id|x-slack-retry-num)$"))
