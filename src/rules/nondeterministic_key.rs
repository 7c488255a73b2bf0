//! nondeterministic-key

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::Fix;
use crate::model::ast::{self, text};
use crate::model::dedupe_keys::{self, KeySite};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A dedupe key (a guard `run` key, a processed-event marker id, a Redis `SET NX` key, an
`idempotencyKey`, a BullMQ `jobId`, a FIFO `MessageDeduplicationId`, a Cloud Tasks task name
built with `client.taskPath(project, location, queue, id)`) that contains a value
that differs on every run: `Date.now()`, `new Date()`, `Math.random()`, `uuid()`/`v4()`/
`uuidv4()`, `crypto.randomUUID()`, `nanoid()`, `cuid()`/`createId()`, `ulid()`, `randomBytes`,
written in the key or in a local variable the key reads (`const key = uuid(); ...
idempotencyKey: key`).

## Why retries break it
A redelivery of the same event computes a new key, so the provider, the queue or the marker
table sees a new request and does the work again: the key deduplicates nothing. A key made
of a timestamp also merges distinct events that happen to share a millisecond.

## Bad
```ts
await stripe.refunds.create({ charge }, { idempotencyKey: crypto.randomUUID() });
```

## Good
```ts
await stripe.refunds.create({ charge }, { idempotencyKey: `refund:${event.id}` });
```

## Fix (safe)
Replaces the random or time value with the handler's event key (inside a template literal,
only that substitution changes, so `refund:` stays). When the value lives in a local
`const`, the initializer is rewritten, so every use of the variable agrees.
Display-only when no event key is known in the function, when the key already names the event
(the random part must simply be dropped: a reviewer decides what stays), inside a loop over
items (the key must also name the item), or when the random value is module-level state.
Not reported: a value read back from storage (`existing?.key ?? uuid()`, or a `let` that is
reassigned), which is stable per event; a `MessageDeduplicationId` on a standard (non-FIFO)
queue, which never deduplicates anyway.
"#;

pub const RULE: Rule = Rule {
    id: "nondeterministic-key",
    summary: "dedupe key contains a random or time value: every retry gets a new key and runs again",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: true,
    preview: false,
    check,
};

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for (model, scope, func) in cx.scopes() {
        let file = scope.file();
        let src = &file.text;
        for key in dedupe_keys::find(func, src) {
            if key.site == KeySite::DeduplicationId && !text(key.call, src).contains("MessageGroupId") {
                continue;
            }
            // A marker row that also records the event key dedupes on that column.
            if key.site == KeySite::MarkerInsert
                && scope.event_key.as_ref().is_some_and(|k| dedupe_keys::reads_event_key(key.call, k, src))
            {
                continue;
            }
            // A fresh id of a row in a table of events or deliveries (`events.create({ data: {
            // id_event: uuidv4(), ... } })`) names a log or outbox row; nothing is deduplicated
            // on it. A table named for processed events keyed that way is the defect.
            if key.site == KeySite::MarkerInsert
                && !crate::model::guards::is_processed_marker_insert(key.call, src)
                && !checked_before_insert(key.value, key.call, func, src, scope)
            {
                continue;
            }
            let Some(random) = random_part(key.value, src, 0) else { continue };
            let message = format!(
                "{} contains `{}`, which differs on every run: a redelivery of the same event gets a new key and the work runs again",
                key.site.label(),
                text(random, src)
            );
            let in_items_loop = dedupe_keys::items_loop(key.value, func, src, scope.event_key.as_ref()).is_some()
                || dedupe_keys::items_loop(random, func, src, scope.event_key.as_ref()).is_some();
            let fix = || match &scope.event_key {
                None => Fix::display_only(
                    "derive the key from the event",
                    "no event key is known in this function: pass the event (or its key) in and use it",
                ),
                Some(_) if !ast::contains(func, random) => Fix::display_only(
                    "derive the key from the event",
                    "the random value is module-level state: compute the key from the event inside the handler",
                ),
                Some(_) if in_items_loop => Fix::display_only(
                    "derive the key from the event and the item",
                    "the key is computed in a loop: it must name the item as well as the event",
                ),
                Some(k) if dedupe_keys::reads_event_key(key.value, k, src) => Fix::display_only(
                    "drop the random part of the key",
                    "the key already names the event: remove the random/time part",
                ),
                Some(k) => Fix::safe(
                    format!("key on `{}`", dedupe_keys::bare_key(k)),
                    vec![crate::fix::edits::key_replacement(random, k)],
                ),
            };
            out.push(
                Diagnostic::new(RULE.id, file, random, message)
                    .in_handler(model, scope)
                    .help("derive the key from the event (e.g. `refund:${event.id}`) so every retry reuses it")
                    .with_fix(cx, fix),
            );
        }
    }
}

/// The insert's key is a local the same function looked the marker up by first (`select ...
/// .eq("webhook_id", webhookId)`, then `insert({ webhook_id: webhookId })`): the row is the
/// dedupe record, whatever its table is called.
fn checked_before_insert(value: Node, insert: Node, func: Node, src: &str, scope: &crate::model::Scope) -> bool {
    let value = ast::unwrap_expr(value);
    let name = match value.kind_name() {
        "identifier" | "shorthand_property_identifier" => text(value, src),
        _ => return false,
    };
    let table = crate::model::markers::table_of(insert, src);
    ast::calls_in(func, false).into_iter().any(|call| {
        call.end_byte() <= insert.start_byte()
            && ast::mentions_identifier(call, src, name)
            && (crate::model::markers::classify(call, src, func, scope.event_key.as_ref())
                .is_some_and(|m| m.op == crate::model::markers::MarkerOp::Check)
                || table.is_some()
                    && crate::model::markers::table_of(call, src) == table
                    && ast::callee_path_shared(call, src).iter().any(|p| {
                        matches!(p.trim_end_matches("()"), "select" | "findFirst" | "findUnique" | "findOne" | "exists")
                    }))
    })
}

/// The random/time call a key expression contains, directly or through local `const`s.
fn random_part<'t>(value: Node<'t>, src: &str, depth: usize) -> Option<Node<'t>> {
    let value = ast::unwrap_expr(value);
    if is_read_back(value, src) {
        return None;
    }
    if let Some(call) = dedupe_keys::nondeterministic_call(value, src) {
        return Some(call);
    }
    if depth >= 3 {
        return None;
    }
    let mut ids = Vec::new();
    ast::walk(value, &mut |n| {
        if ast::is_function(n) {
            return false;
        }
        if matches!(n.kind_name(), "identifier" | "shorthand_property_identifier")
            && ast::parent(n).is_none_or(|p| p.kind_name() != "member_expression" || p.field("object") == Some(n))
        {
            ids.push(n);
        }
        true
    });
    for id in ids {
        if reassigned(id, src) {
            continue;
        }
        if let Some(init) = dedupe_keys::initializer(id, src)
            && let Some(found) = random_part(init, src, depth + 1)
        {
            return Some(found);
        }
    }
    None
}

/// `stored ?? uuid()`, `row?.key || nanoid()`: the random value is the fallback of a stored one.
fn is_read_back(value: Node, src: &str) -> bool {
    value.kind_name() == "binary_expression"
        && value.field("operator").is_some_and(|o| matches!(text(o, src), "??" | "||"))
}

/// A `let` that is assigned again (typically: read back from storage, generated only once).
fn reassigned(id: Node, src: &str) -> bool {
    let name = text(id, src);
    let Some(func) = ast::enclosing_function(id) else { return false };
    let mut found = false;
    ast::walk(func, &mut |n| {
        if found {
            return false;
        }
        if matches!(n.kind_name(), "assignment_expression" | "augmented_assignment_expression")
            && n.field("left").is_some_and(|l| l.kind_name() == "identifier" && text(l, src) == name)
        {
            found = true;
        }
        true
    });
    found
}
