//! retry-loop-with-effect

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::edits::merge_property;
use crate::fix::{Edit, Fix, text as fixtext};
use crate::model::ast::{self, text};
use crate::model::dedupe_keys;
use crate::model::effects::operation_name;
use crate::model::payload;
use crate::model::retry_loops::{self, RetryLoop};
use crate::model::{Effect, EffectKind, EventKey, Sdk, effects, reach};
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
An external effect inside an in-code retry loop (a `for`/`while`/`do` loop that catches the
failure and tries again, `p-retry`/`pRetry(fn)`, `async-retry`'s `retry(async (bail) => ...)`,
`exponential-backoff`'s `backOff(fn)`, a project helper named for retrying its callback
(`withRetry(fn)`, `retryStripeCall(fn)`; not hooks such as `onRetry`/`shouldRetry`/
`scheduleRetry`), a function that calls itself from its `catch`) that
either has no stable key (a Stripe/Resend/Square/... call without an idempotency key, a
BullMQ add without `jobId`, a FIFO send without `MessageDeduplicationId`, a POST without an
`Idempotency-Key` header, an email/SMS/chat send), or whose key is computed INSIDE the loop
body from a random or time value (`const idempotencyKey = uuid()` per attempt).
Calls whose repetition ends in the state one attempt leaves (Stripe `update`, `cancel`, `del`:
absolute values and deletions) need no key and are not reported.

## Why retries break it
A timeout does not mean the call failed: the provider may have charged, sent or enqueued
before the connection dropped. The next attempt then does it again, unless it carries the
same key as the first attempt, which lets the provider answer with the first result.

## Bad
```ts
for (let attempt = 1; attempt <= 3; attempt++) {
  try {
    return await stripe.refunds.create({ charge }, { idempotencyKey: randomUUID() });
  } catch (err) {
    await sleep(attempt * 500);
  }
}
```

## Good
```ts
const idempotencyKey = `refund:${event.id}`;
for (let attempt = 1; attempt <= 3; attempt++) {
  try {
    return await stripe.refunds.create({ charge }, { idempotencyKey });
  } catch (err) {
    await sleep(attempt * 500);
  }
}
```

## Fix (safe)
Hoists the key out of the loop: a key computed in the loop body (a `const` declaration, or an
expression written in the call) moves, unchanged, to a `const` just before the loop (or the
statement holding the `pRetry`/`retry` call) and the call reads it, so every attempt sends the
same key. A call without a key gets `const idempotencyKey = `<op>:${eventKey}`` (a `jobId` for
BullMQ) before the loop and passes it in the SDK's syntax. Display-only when the key reads
names that only exist inside the loop, when no event key is known, in recursive retries, and
for APIs that take no key (email/SMS/chat SDKs, HTTP POSTs: the note says what to do).
Not reported: a key computed once outside the loop and passed on every attempt; database
writes (a failed transaction did not commit); effects of unresolved project-style names.
"#;

pub const RULE: Rule = Rule {
    id: "retry-loop-with-effect",
    summary: "effect retried in a loop without a stable key: an attempt that timed out after succeeding is repeated",
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
        let mut seen: Vec<usize> = Vec::new();
        for lp in retry_loops::find(func, src) {
            let mut names: Vec<String> = Vec::new();
            for call in ast::calls_in(lp.body, false) {
                if seen.contains(&call.start_byte()) {
                    continue;
                }
                let local = reach::resolve_call(cx.project, file, call).is_some();
                let Some(effect) = effects::classify(call, src, local) else { continue };
                // An absolute update or a cancel that went through ends in the same state
                // when the attempt is repeated: no key is needed to make the retry safe.
                if effect.kind.is_db() || effect.kind == EffectKind::Possible || effect.replays_harmlessly(src) {
                    continue;
                }
                let finding = match effect.key {
                    Some(key) => key_in_loop(key, &lp, src)
                        .map(|inner| hoist_existing(file, func, &lp, &effect, key, inner, &mut names)),
                    None => missing_key(file, func, &lp, &effect, scope.event_key.as_ref(), &mut names),
                };
                if let Some((message, fix)) = finding {
                    seen.push(call.start_byte());
                    out.push(
                        Diagnostic::new(RULE.id, file, call, message)
                            .in_handler(model, scope)
                            .help("compute the key once, before the loop, from the event; pass the same key on every attempt")
                            .with_fix(cx, || fix),
                    );
                }
            }
        }
    }
}

/// The part of a key that is random and computed in the loop body, if any.
fn key_in_loop<'t>(key: Node<'t>, lp: &RetryLoop<'t>, src: &str) -> Option<Node<'t>> {
    let value = ast::unwrap_expr(key);
    if value.kind_name() != "shorthand_property_identifier"
        && dedupe_keys::nondeterministic_call(value, src).is_some()
        && ast::contains(lp.body, value)
    {
        return Some(value);
    }
    let mut found = None;
    ast::walk(value, &mut |n| {
        if found.is_some() {
            return false;
        }
        if matches!(n.kind_name(), "identifier" | "shorthand_property_identifier")
            && let Some(init) = dedupe_keys::initializer(n, src)
            && ast::contains(lp.body, init)
            && dedupe_keys::nondeterministic_call(init, src).is_some()
        {
            found = Some(init);
        }
        true
    });
    found
}

fn hoist_existing(
    file: &SourceFile,
    func: Node,
    lp: &RetryLoop,
    effect: &Effect,
    key: Node,
    inner: Node,
    names: &mut Vec<String>,
) -> (String, Fix) {
    let src = &file.text;
    let message = format!(
        "the key of `{}` is computed inside the retry loop from `{}`: every attempt sends a new key, so an attempt that timed out after succeeding is repeated",
        effect.label,
        text(dedupe_keys::nondeterministic_call(inner, src).unwrap_or(inner), src)
    );
    let display = |why: &str| Fix::display_only("compute the key once, before the loop", why.to_string());
    let Some(stmt) = lp.statement() else {
        return (message, display("the retry is a recursive call: compute the key in the caller and pass it in"));
    };
    if reads_loop_names(inner, lp, src) {
        return (message, display("the key reads values of the loop body: compute it from the event before the loop"));
    }
    let indent = file.indent_at(stmt.start_byte()).to_string();
    let eol = file.style().eol;
    let semi = file.style().semi();
    let at = file.line_start(stmt.start_byte());
    if inner != ast::unwrap_expr(key) {
        // `const key = uuid()` inside the body: move the declaration before the loop.
        let Some(decl) = ast::enclosing_statement(inner).filter(|d| single_declaration(*d, inner)) else {
            return (message, display("the key's declaration declares other names too"));
        };
        let start = file.line_start(decl.start_byte());
        let end = fixtext::line_end(file, decl.end_byte());
        if src[start..decl.start_byte()].trim() != "" || src[decl.end_byte()..end].trim() != "" {
            return (message, display("the key's declaration shares its line with other code"));
        }
        let end = if src[end..].starts_with("\r\n") {
            end + 2
        } else if src[end..].starts_with('\n') {
            end + 1
        } else {
            end
        };
        let moved = format!("{indent}{}{eol}", text(decl, src));
        let fix =
            Fix::safe("hoist the key out of the retry loop", vec![Edit::insert(at, moved), Edit::delete(start, end)]);
        return (message, fix);
    }
    // The key is written in the call: bind it once before the loop.
    let prop = ast::parent(key).filter(|p| p.kind_name() == "pair").and_then(|p| p.field("key"));
    let base =
        prop.map(|k| text(k, src).trim_matches(['"', '\'']).to_string()).unwrap_or_else(|| "idempotencyKey".into());
    let base = if is_identifier(&base) { base } else { "idempotencyKey".to_string() };
    let name = fresh_name(func, &base, names, src);
    let decl = format!("{indent}const {name} = {}{semi}{eol}", text(key, src));
    let pair = ast::parent(key).filter(|p| p.kind_name() == "pair" && prop.is_some_and(|k| text(k, src) == name));
    let replace = match pair {
        Some(p) => Edit::replace(p.start_byte(), p.end_byte(), name),
        None => Edit::replace(key.start_byte(), key.end_byte(), name),
    };
    let fix = Fix::safe("hoist the key out of the retry loop", vec![Edit::insert(at, decl), replace]);
    (message, fix)
}

fn is_identifier(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
        && s.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '$')
}

/// `const key = ...;` declaring only the binding whose initializer is `init`.
fn single_declaration(decl: Node, init: Node) -> bool {
    matches!(decl.kind_name(), "lexical_declaration" | "variable_declaration")
        && ast::named_children(decl).iter().filter(|c| c.kind_name() == "variable_declarator").count() == 1
        && ast::parent(init).is_some_and(|d| d.kind_name() == "variable_declarator")
}

/// Whether `node` reads a name declared by the loop (its header or body).
fn reads_loop_names(node: Node, lp: &RetryLoop, src: &str) -> bool {
    let mut declared = Vec::new();
    ast::walk(lp.node, &mut |n| {
        if n.kind_name() == "variable_declarator"
            && let Some(name) = n.field("name")
        {
            ast::bound_names(name, src, &mut declared);
        }
        if ast::is_function(n) && n != lp.node {
            declared.extend(ast::parameter_names(n, src));
        }
        true
    });
    let mut reads = false;
    ast::walk(node, &mut |n| {
        if n.kind_name() == "identifier" && declared.iter().any(|d| d == text(n, src)) {
            let is_member_prop =
                ast::parent(n).is_some_and(|p| p.kind_name() == "member_expression" && p.field("property") == Some(n));
            reads |= !is_member_prop;
        }
        true
    });
    reads
}

fn fresh_name(func: Node, base: &str, names: &mut Vec<String>, src: &str) -> String {
    let root = ast::root_above(func).unwrap_or(func);
    let taken = |n: &str| names.iter().any(|x| x == n) || ast::mentions_identifier(root, src, n);
    let mut name = base.to_string();
    let mut i = 2;
    while taken(&name) {
        name = format!("{base}{i}");
        i += 1;
    }
    names.push(name.clone());
    name
}

fn missing_key(
    file: &SourceFile,
    func: Node,
    lp: &RetryLoop,
    effect: &Effect,
    event_key: Option<&EventKey>,
    names: &mut Vec<String>,
) -> Option<(String, Fix)> {
    let src = &file.text;
    let fifo = effect.sdk != Sdk::Sqs || text(effect.call, src).contains("MessageGroupId");
    let keyed = (effect.sdk.accepts_key() || effect.sdk == Sdk::Bullmq) && fifo && effect.sdk != Sdk::TriggerDev;
    let message = format!(
        "`{}` is retried in a loop without an idempotency key: an attempt that timed out after the {} went through is repeated",
        effect.label,
        effect.kind.noun()
    );
    if !keyed {
        let note = match effect.kind {
            EffectKind::Http => {
                "send an `Idempotency-Key` header computed once before the loop, if the API honours one; otherwise retry only errors that prove nothing was done"
            }
            _ => {
                "this API takes no idempotency key: retry only errors that prove nothing was sent (e.g. a 4xx/429 response), or let the provider's redelivery retry under a lease"
            }
        };
        return Some((message, Fix::display_only("make the retried call idempotent", note)));
    }
    let display = |why: &str| {
        Some((message.clone(), Fix::display_only("pass a key computed once before the loop", why.to_string())))
    };
    let Some(stmt) = lp.statement() else {
        return display("the retry is a recursive call: compute the key in the caller and pass it in");
    };
    let Some(key) = event_key else {
        return display("no event key is known in this function: pass the event (or its key) in");
    };
    if dedupe_keys::items_loop(stmt, func, src, Some(key)).is_some() {
        return display("the retry runs in a loop over items: the key must name the item as well as the event");
    }
    if let Some(value) = payload::per_attempt_value(effect, src) {
        return Some((
            message.clone(),
            Fix::display_only(
                format!("make the payload retry-stable (`{}` is new on every attempt), then pass a key", value.shown),
                value.key_note(),
            ),
        ));
    }
    let (prop, base, value) = if effect.sdk == Sdk::Bullmq {
        let name = ast::arguments(effect.call)
            .first()
            .and_then(|a| ast::string_value(*a, src))
            .map(|n| n.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '-' }).collect::<String>())
            .unwrap_or_else(|| "job".into());
        ("jobId", "jobId", key.job_id(&name))
    } else if effect.sdk == Sdk::Inngest {
        ("id", "idempotencyKey", key.operation_key("send"))
    } else if effect.sdk == Sdk::Sqs {
        ("MessageDeduplicationId", "deduplicationId", key.operation_key("send"))
    } else {
        ("idempotencyKey", "idempotencyKey", key.operation_key(&operation_name(&effect.label)))
    };
    let name = fresh_name(func, base, names, src);
    let Some(pass) = pass_key(effect, prop, &name, src) else {
        names.retain(|n| *n != name);
        return display("the call's options are not object literals: pass the key where they are built");
    };
    let indent = file.indent_at(stmt.start_byte()).to_string();
    let decl = format!("{indent}const {name} = {value}{}{}", file.style().semi(), file.style().eol);
    let fix = Fix::safe(
        format!("pass `{name}`, computed once before the retry loop"),
        vec![Edit::insert(file.line_start(stmt.start_byte()), decl), pass],
    );
    Some((message, fix))
}

/// Puts `prop: name` (shorthand when they match) where the SDK reads its key.
fn pass_key(effect: &Effect, prop: &str, name: &str, src: &str) -> Option<Edit> {
    let args = ast::arguments(effect.call);
    let entry = if prop == name { name.to_string() } else { format!("{prop}: {name}") };
    let merge = |object: Node| -> Edit {
        let edit = merge_property(object, prop, name, src);
        if prop == name {
            Edit { replacement: edit.replacement.replacen(&format!("{prop}: {name}"), name, 1), ..edit }
        } else {
            edit
        }
    };
    let append = |after: Node| Edit::insert(after.end_byte(), format!(", {{ {entry} }}"));
    let nth = |i: usize| -> Option<Edit> {
        match args.get(i) {
            Some(a) if a.kind_name() == "object" => Some(merge(*a)),
            Some(_) => None,
            None if args.len() == i && i > 0 => Some(append(*args.last()?)),
            None => None,
        }
    };
    match effect.sdk {
        Sdk::Stripe => {
            let last = *args.last()?;
            let options = last.kind_name() == "object"
                && args.len() > 1
                && ast::named_children(last).iter().all(|p| {
                    let k = p.field("key").map(|k| text(k, src)).unwrap_or_else(|| text(*p, src));
                    matches!(k, "idempotencyKey" | "stripeAccount" | "apiVersion" | "maxNetworkRetries" | "timeout")
                });
            if options { Some(merge(last)) } else { Some(append(last)) }
        }
        Sdk::Resend | Sdk::Adyen | Sdk::Svix | Sdk::TriggerDev => nth(effect.options_index(src)?),
        Sdk::Square | Sdk::Paypal | Sdk::Inngest => {
            args.first().filter(|a| a.kind_name() == "object").map(|a| merge(*a))
        }
        Sdk::Bullmq => {
            let first = args.first()?;
            if matches!(first.kind_name(), "string" | "template_string") { nth(2) } else { nth(1) }
        }
        Sdk::Sqs => {
            let cmd = args.first().filter(|a| a.kind_name() == "new_expression")?;
            let input = cmd.field("arguments").and_then(|a| a.named_child(0)).filter(|i| i.kind_name() == "object")?;
            Some(merge(input))
        }
        _ => None,
    }
}
