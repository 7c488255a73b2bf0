//! wrong-event-field-as-key

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::{Edit, Fix};
use crate::model::ast::{self, text};
use crate::model::dedupe_keys::{self, DedupeKey, KeySite};
use crate::model::{Provider, queries};
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A dedupe key (a guard `run` key, the id of a processed-event marker, a Redis `SET NX` key, an
`idempotencyKey`, a BullMQ `jobId`, an SQS `MessageDeduplicationId`) built from the id of the
object an event is about instead of the id of the event: Stripe `event.data.object.id` (also
through `const session = event.data.object`, or a parameter typed `Stripe.Invoice`), Clerk
`evt.data.id`, Resend `data.email_id`, Paddle/Square/Linear `data.id`, Paystack `data.id`
without the event name, `data.reference`, Flutterwave `tx_ref`/`flw_ref`, GitHub
`payload.issue.id`/`pull_request.id`/`installation.id`/`X-GitHub-Hook-ID`, Shopify's
`payload.id`/`admin_graphql_api_id`/`X-Shopify-Event-Id` (unless the config chose that header
with `providers.shopify.keyHeader`), Razorpay `payload.payment.entity.id`, PayPal
`resource.id`/`PAYPAL-TRANSMISSION-ID`, Slack `event.ts`/`client_msg_id`/`X-Slack-Retry-Num`, SQS
`receiptHandle`, Pub/Sub `ackId`, Svix timestamps.

## Why retries break it
An object receives many events (`invoice.created`, `invoice.paid`, `invoice.payment_failed`;
`user.created` then `user.updated`): keyed on the object, the second event is dropped as a
"duplicate" and never processed. Per-delivery values (receipt handles, retry counters,
timestamps) change on every retry, so the retry is not deduplicated at all. A key that pairs
the object id with the object's own sequence number (`${invoice.id}-${invoice.attempt_count}`,
a `version`) names one event and is not reported.

## Bad
```ts
const session = event.data.object as Stripe.Checkout.Session;
await guard.run(`stripe:${session.id}`, async (tx) => { ... });
```

## Good
```ts
await guard.run(`stripe:${event.id}`, async (tx) => { ... });
```

## Fix (unsafe: review)
Replaces the object field with the provider's event key (docs/providers.md) in the key
expression: inside a template literal only the substitution changes, so a prefix such as
`refund:` stays. When the object id comes through a local variable that other code also
reads, the key expression at the site is replaced instead, so the variable keeps its value.
The fix needs review because deduplication changes meaning: events already recorded under the
old key are no longer recognised. Where no event key is known, the fix is display-only.
Not reported: a provider idempotency key that names its operation on the object
(`${charge.id}_payout`, `refund:${charge.id}`: once per object, on purpose), Paystack/Flutterwave keys that combine the event name with `data.id` (those
providers have no event id), keys that also contain the event key (an item within an event).
"#;

pub const RULE: Rule = Rule {
    id: "wrong-event-field-as-key",
    summary: "dedupe key built from the object id, not the event id: later events about the object are dropped",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    let shopify_header =
        cx.config.providers.get("shopify").and_then(|p| p.key_header.as_deref()).map(str::to_ascii_lowercase);
    for model in cx.handlers {
        let provider = model.handler.provider;
        for scope in &model.scopes {
            let Some(func) = scope.node() else { continue };
            let file = scope.file();
            let src = &file.text;
            for key in dedupe_keys::find(func, src) {
                if key.site == KeySite::DeduplicationId && !text(key.call, src).contains("MessageGroupId") {
                    continue;
                }
                // Which event field a service's own dedupe key should name is the service's business.
                if key.site == KeySite::NamedKey {
                    continue;
                }
                // A provider key that names its operation on the object (`${charge.id}_payout`,
                // `refund:${charge.id}`) says "once per object" on purpose: a later event about
                // the object is still processed, only this call is not repeated.
                if key.site == KeySite::IdempotencyKey && names_operation(key.value, src) {
                    continue;
                }
                let Some(wrong) = wrong_part(&key, provider, shopify_header.as_deref(), src) else {
                    continue;
                };
                if scope.event_key.as_ref().is_some_and(|k| dedupe_keys::reads_event_key(key.value, k, src))
                    || reads_right_field(key.value, provider, src)
                {
                    continue;
                }
                let message = format!(
                    "{} is built from `{}` ({}), not from the event: {}",
                    key.site.label(),
                    text(wrong.node, src),
                    wrong.what,
                    wrong.consequence
                );
                let fix = || match &scope.event_key {
                    None => Fix::display_only(
                        "key on the provider's event id",
                        "no event key is known in this function: use the provider's event id (docs/providers.md lists them)",
                    ),
                    Some(event_key) => {
                        let mut edit = if ast::contains(key.value, wrong.node) {
                            crate::fix::edits::key_replacement(wrong.node, event_key)
                        } else {
                            replace_site(&key, event_key, src)
                        };
                        // A header read is typed `string | string[] | undefined` (Node) or
                        // `string | null` (fetch): a key option wants a string.
                        let as_string = format!("`{}`", event_key.template);
                        if let Some((name, value)) = edit.replacement.split_once(": ")
                            && is_header_read(value)
                        {
                            edit.replacement = format!("{name}: {as_string}");
                        } else if is_header_read(&edit.replacement) {
                            edit.replacement = as_string;
                        }
                        Fix::unsafe_(format!("key on `{}`", dedupe_keys::bare_key(event_key)), vec![edit]).with_note(
                            "events already recorded under the old key are no longer recognised as duplicates",
                        )
                    }
                };
                out.push(
                    Diagnostic::new(RULE.id, file, wrong_anchor(&key, wrong.node), message)
                        .in_handler(model, scope)
                        .help("dedupe on the event (Stripe `event.id`, `svix-id`, `x-github-delivery`, ...), not on the object it is about")
                        .with_fix(cx, fix),
                );
            }
        }
    }
}

fn is_header_read(expr: &str) -> bool {
    !expr.starts_with('`') && expr.to_ascii_lowercase().contains("header")
}

/// Report at the key itself when the wrong field is in an initializer elsewhere.
fn wrong_anchor<'t>(key: &DedupeKey<'t>, wrong: Node<'t>) -> Node<'t> {
    if ast::contains(key.value, wrong) { wrong } else { key.value }
}

fn replace_site(key: &DedupeKey, event_key: &crate::model::EventKey, src: &str) -> Edit {
    let value = if key.site == KeySite::GuardRun { event_key.guard_key() } else { dedupe_keys::bare_key(event_key) };
    let node = key.value;
    if node.kind_name() == "shorthand_property_identifier" {
        Edit::replace(node.start_byte(), node.end_byte(), format!("{}: {value}", text(node, src)))
    } else {
        Edit::replace(node.start_byte(), node.end_byte(), value)
    }
}

struct Wrong<'t> {
    node: Node<'t>,
    what: &'static str,
    consequence: &'static str,
}

const SHARED: &str = "every later event about the same object is dropped as a duplicate";
const PER_ATTEMPT: &str = "it changes on every delivery attempt, so a retry is not recognised as a duplicate";

fn wrong_part<'t>(
    key: &DedupeKey<'t>,
    provider: Option<Provider>,
    shopify_header: Option<&str>,
    src: &str,
) -> Option<Wrong<'t>> {
    let expanded = dedupe_keys::expand(key.value, src);
    // Paystack/Flutterwave have no event id: `${event}:${data.id}` is their key.
    let names_event = expanded.iter().any(|n| {
        dedupe_keys::paths_in(*n, src).iter().any(|(_, p)| p.last().is_some_and(|l| l == "event" || l == "event_type"))
    });
    // `${invoice.id}-${invoice.attempt_count}`: the object's own sequence number tells its
    // events apart, so the pair names one event.
    let names_sequence = expanded.iter().any(|n| {
        dedupe_keys::paths_in(*n, src).iter().any(|(_, p)| {
            p.last().is_some_and(|l| matches!(l.as_str(), "attempt_count" | "version" | "sequence" | "sequence_number"))
        })
    });
    for node in &expanded {
        for s in strings_in(*node, src) {
            let Some(value) = ast::string_value(s, src) else { continue };
            if let Some((what, consequence)) = wrong_header(&value.to_ascii_lowercase(), shopify_header) {
                return Some(Wrong { node: header_read(s).unwrap_or(s), what, consequence });
            }
        }
        for (n, path) in dedupe_keys::paths_in(*node, src) {
            if let Some((what, consequence)) = wrong_path(&path, provider, names_event)
                && !(names_sequence && consequence == SHARED)
            {
                return Some(Wrong { node: n, what, consequence });
            }
        }
    }
    None
}

/// The header read a header-name string belongs to: `req.headers['x']`, `h.get('x')`, `c.req.header('x')`.
fn header_read(s: Node) -> Option<Node> {
    let parent = ast::parent(s)?;
    if parent.kind_name() == "subscript_expression" {
        return Some(parent);
    }
    if parent.kind_name() == "arguments" {
        return ast::parent(parent).filter(|c| c.kind_name() == "call_expression");
    }
    None
}

/// The header-name strings of a key expression, outside callbacks, in tree order.
fn strings_in<'t>(node: Node<'t>, src: &str) -> Vec<Node<'t>> {
    let mut out: Vec<Node<'t>> =
        queries::WRONG_EVENT_FIELD.matches(node, src).iter().filter_map(|m| m.get("header_name")?.parent()).collect();
    queries::tree_order(&mut out);
    out.retain(|s| queries::reached_outside_functions(*s, node));
    out
}

fn wrong_header(h: &str, shopify_header: Option<&str>) -> Option<(&'static str, &'static str)> {
    match h {
        "x-github-hook-id" => Some(("the webhook's id, shared by every delivery of that hook", SHARED)),
        "x-shopify-event-id" if shopify_header != Some("x-shopify-event-id") => Some((
            "Shopify's event id, shared by the deliveries to every subscription; the default key is `x-shopify-webhook-id` (set `providers.shopify.keyHeader` to choose the event id)",
            "two subscriptions of the same event dedupe each other",
        )),
        "x-shopify-triggered-at" | "svix-timestamp" | "webhook-timestamp" => Some(("a timestamp header", PER_ATTEMPT)),
        "paypal-transmission-id" => Some(("a per-transmission id", PER_ATTEMPT)),
        "x-slack-retry-num" => Some(("the retry counter", PER_ATTEMPT)),
        _ => None,
    }
}

fn ends(path: &[String], suffix: &[&str]) -> bool {
    path.len() > suffix.len() && path.iter().rev().zip(suffix.iter().rev()).all(|(a, b)| a == b)
}

fn wrong_path(path: &[String], provider: Option<Provider>, names_event: bool) -> Option<(&'static str, &'static str)> {
    use Provider::*;
    let last = path.last()?.as_str();
    if path.windows(2).any(|w| w[0] == "data" && w[1] == "object") && !ends(path, &["data", "object"]) {
        return Some(("a field of the event's object, shared by all its events", SHARED));
    }
    let queue = matches!(provider, Some(Sqs | Bullmq | Kafka | Amqp | Pubsub | Inngest | Trigger));
    if matches!(
        last,
        "receiptHandle" | "ReceiptHandle" | "md5OfBody" | "MD5OfBody" | "ackId" | "deliveryAttempt" | "attemptsMade"
    ) || (last == "ApproximateReceiveCount")
    {
        return Some(("a per-delivery value", PER_ATTEMPT));
    }
    if queue {
        return None;
    }
    if ends(path, &["data", "id"]) {
        if matches!(provider, Some(Paystack | Flutterwave)) && names_event {
            return None;
        }
        return Some(("the id of the object the event is about", SHARED));
    }
    match provider {
        Some(Svix) if last == "email_id" => Some(("the email's id, shared by all its events", SHARED)),
        Some(Paystack) if ends(path, &["data", "reference"]) || ends(path, &["customer", "id"]) => {
            Some(("a transaction field, shared by all its events", SHARED))
        }
        Some(Flutterwave) if matches!(last, "tx_ref" | "flw_ref") => {
            Some(("the transaction reference, shared by all its events", SHARED))
        }
        Some(Github)
            if ["issue", "pull_request", "installation", "comment", "check_run", "workflow_run", "hook"]
                .iter()
                .any(|o| ends(path, &[o, "id"])) =>
        {
            Some(("the id of the object the event is about", SHARED))
        }
        Some(Shopify)
            if (last == "admin_graphql_api_id"
                || (last == "id"
                    && path.len() <= 3
                    && (path.iter().any(|p| p == "body")
                        || ["payload", "data", "order", "product", "webhook", "event", "evt", "json"]
                            .contains(&path[0].as_str()))))
                && !path.iter().any(|p| p == "headers") =>
        {
            Some(("the resource's id (the order, product, ...), shared by all its events", SHARED))
        }
        Some(Razorpay) if ends(path, &["entity", "id"]) || matches!(last, "order_id" | "payment_id") => {
            Some(("the payment's id, shared by all its events", SHARED))
        }
        Some(Paypal) if ends(path, &["resource", "id"]) => {
            Some(("the resource's id, shared by all its events", SHARED))
        }
        Some(Paddle) if last == "notification_id" => {
            Some(("the notification id, one per destination", "each destination processes the event again"))
        }
        Some(Slack) if ends(path, &["event", "ts"]) || matches!(last, "client_msg_id" | "event_ts") => {
            Some(("the message timestamp, shared by its events", SHARED))
        }
        _ => None,
    }
}

/// A key that reads the provider's real event key as well (an item within an event) is fine.
fn reads_right_field(node: Node, provider: Option<Provider>, src: &str) -> bool {
    dedupe_keys::expand_to_delivery(node, src).iter().any(|n| {
        dedupe_keys::paths_in(*n, src).iter().any(|(_, p)| {
            let last = p.last().map(String::as_str).unwrap_or("");
            matches!(last, "event_id" | "eventId" | "messageId" | "MessageId" | "offset")
                || (provider == Some(Provider::Stripe) && p.len() == 2 && last == "id")
        }) || strings_in(*n, src).iter().any(|s| {
            let v = ast::string_value(*s, src).unwrap_or_default().to_ascii_lowercase();
            matches!(
                v.as_str(),
                "x-github-delivery"
                    | "svix-id"
                    | "webhook-id"
                    | "x-shopify-webhook-id"
                    | "x-razorpay-event-id"
                    | "linear-delivery"
            )
        })
    })
}

/// A template key with literal text beside its substitutions: `${chargeId}_creator_payout`.
fn names_operation(value: Node, src: &str) -> bool {
    let value = ast::unwrap_expr(value);
    value.kind_name() == "template_string"
        && crate::regex!(r"\$\{[^}]*\}")
            .replace_all(text(value, src).trim_matches('`'), "")
            .chars()
            .any(|c| c.is_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::ast::Fields as _;

    fn p(s: &str) -> Vec<String> {
        s.split('.').map(String::from).collect()
    }

    #[test]
    fn object_ids_are_wrong() {
        assert!(wrong_path(&p("event.data.object.id"), Some(Provider::Stripe), false).is_some());
        assert!(wrong_path(&p("evt.data.id"), Some(Provider::Svix), false).is_some());
        assert!(wrong_path(&p("event.id"), Some(Provider::Stripe), false).is_none());
        assert!(wrong_path(&p("event.data.object"), Some(Provider::Stripe), false).is_none());
    }

    #[test]
    fn paystack_event_name_plus_data_id_is_the_key() {
        assert!(wrong_path(&p("body.data.id"), Some(Provider::Paystack), true).is_none());
        assert!(wrong_path(&p("body.data.id"), Some(Provider::Paystack), false).is_some());
    }

    #[test]
    fn queue_payload_ids_are_not_judged() {
        assert!(wrong_path(&p("job.data.id"), Some(Provider::Bullmq), false).is_none());
    }

    #[test]
    fn header_names_any_case_outside_callbacks() {
        let text = "const k = `${req.headers['X-GitHub-Hook-Id']}:${req.headers['x-github-delivery']}:${f(() => h.get('svix-timestamp'))}`;\n";
        for dialect in [crate::source::Dialect::TypeScript, crate::source::Dialect::Tsx] {
            let file = crate::source::SourceFile::new("a.ts".into(), text.into(), dialect).unwrap();
            let value = file.root().named_child(0).unwrap().named_child(0).unwrap().field("value").unwrap();
            let found: Vec<&str> = strings_in(value, &file.text).iter().map(|s| ast::text(*s, &file.text)).collect();
            assert_eq!(found, ["'X-GitHub-Hook-Id'"], "{dialect:?}");
        }
    }
}
