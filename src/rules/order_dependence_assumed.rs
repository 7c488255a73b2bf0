//! order-dependence-assumed

use super::{Context, Diagnostic, FixAvailability, HandlerModel, Rule};
use crate::model::ast::{self, text};
use crate::model::reach::{self, Scope};
use crate::model::responses;
use crate::model::{EffectKind, Framework, effects, guards, markers};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use regex::Regex;
use std::sync::LazyLock;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
- A handler for events that can arrive out of order (Stripe `customer.subscription.*`,
  `invoice.updated`, Paddle `subscription.updated`, Lemon Squeezy `subscription_updated`,
  Shopify `orders/updated`, `products/update`, ...) that writes state taken from the event
  (status, plan, price, quantity, period end, cancellation) with an update/upsert, without
  comparing the event's time or version with the stored one (`event.created`, `updated_at`,
  `occurred_at`, a version column) and without re-fetching the object from the provider
  (`stripe.subscriptions.retrieve(id)`). Event names are matched as strings or as constants
  by their last name (`case EVENTS.ACCOUNT_UPDATED:`), and RevenueCat's types (`RENEWAL`,
  `PRODUCT_CHANGE`, `EXPIRATION`, ...) are included.
- The same write made through a project function named for writing billing state
  (`updateUserSubscription({ status: sub.status })`, `ctx.runMutation(api.users.updateSubscription,
  { ...fields(sub) })`, `repo.createOrUpdateSubscription(id, event.data.object.cancel_at)`):
  reported at that call, where the event's values are handed over; the writes inside the
  function are not reported again.
- A status the event's type picks, written over a status another event's branch writes, with
  no look at the stored one: `payment_intent.payment_failed` sets the order `FAILED` while
  `payment_intent.succeeded` sets it `PAID`, `charge.success` sets the escrow `funded` while
  `refund.processed` sets it `refunded`, or a dunning flag raised when the event carries
  `past_due` and lowered when it carries `active` (`isPastDue: true` / `false`). A late or
  retried delivery of the earlier event undoes the later transition.
- A handler that acknowledges an event and drops it because a record it needs does not exist
  yet: `const user = await db.user.findUnique(...); if (!user) return res.json({ ok: true })`
  (or a bare `return` in a function the handler calls, or in a queue consumer), when the
  handler's own deliveries create or link that record (another event's branch inserts into the
  table, or writes the column the lookup filters on). A record the application creates before
  any event can exist (the signed-up user, a configured endpoint, a row holding the id of a
  provider customer the application created itself with `customers.create`) is not reported: a
  miss there means the event is not about this application's data.

## Why retries break it
Providers do not guarantee order, and retries reorder events further: an `updated` event
delivered late (its first attempt failed) overwrites the state a newer event wrote, so a
cancelled subscription becomes active again, or a downgrade is undone. And when the event that
creates the record (checkout completed, user created) arrives after the one that needs it,
acknowledging the early one loses it for good.

## Bad
```ts
case "customer.subscription.updated":
  await db.subscription.update({ where: { id: sub.id }, data: { status: sub.status } });
```

## Good
```ts
case "customer.subscription.updated": {
  // re-fetch: the provider's current state, whatever the delivery order
  const fresh = await stripe.subscriptions.retrieve(sub.id);
  await db.subscription.update({ where: { id: fresh.id }, data: { status: fresh.status } });
}
// or compare versions: update ... where: { id, eventCreatedAt: { lt: event.created } }
```
and, for a missing prerequisite, answer 5xx (or throw) so the provider retries later, or
create the record from the event.

## Fix
None: the right remedy (re-fetch, a version column, a conditional update, or retrying until
the prerequisite exists) depends on the data model.

## Decisions
- A check or a re-fetch counts only when it precedes the write on the write's own path: the
  write's filter, an enclosing `if`, an earlier statement of an enclosing block (of a branch or
  a loop before it, only its condition), or, for a function the handler calls, every call site
  that reaches it. A re-fetch in another event's branch does not cover this one; reading the
  customer (`customers.retrieve`) is not a re-fetch of the subscription, and neither is a
  synchronous helper that reads the event in hand (`getSubscriptionPriceId(sub)`).
- State is a key whose trailing words name it (`status`, `stripeSubscriptionStatus`,
  `subscription_tier`, `current_period_end`, `cancel_at_period_end`, `planId`, `quantity`,
  `active`). A value the handler decides is not a snapshot: a literal, an enum member, a choice
  between two literals (`sub.status === "active" ? "granted" : "revoked"`), or a `const` bound
  to one.
- Such a value is a transition, reported when all of these hold: the column is a status, a
  state or a dunning flag (`isPastDue`); the branch writing it is picked by the delivered event
  (its type, or a status it carries compared with a string; not an object the handler read
  itself, such as a re-fetched payment); another event's branch, on another path, writes the
  same column of the same table with another value; the value is not final (`refunded`,
  `cancelled`, `expired`, ...) and the event is not one that ends its object (`*.deleted`,
  `charge.refunded`, `EXPIRATION`); and nothing on the write's path looks at the stored state:
  the write's filter names the column (`where: { id, status: "pending" }`), an earlier
  condition reads it from a stored record (`if (order.status === PAID) return`), an earlier
  compare-and-set update filters on it, or an earlier `if (existing) return` leaves when the
  record is already stored (what follows creates it). Branches that map one event's snapshot
  (`if (account.payouts_enabled) ... else ...`) are one event, not a transition.
- A record that mirrors the provider's state is left to the snapshot writes: when some write
  copies the provider's value into the same column (`paymentStatus: map(session.payment_status)`)
  or copies state into the record on an out-of-order event, the literal shortcuts of other
  events (`status: "past_due"` on `invoice.payment_failed`) are not reported. The copy is
  where order matters, its remedy (a version column) covers the record, and the object's next
  `*.updated` re-syncs it.
- When the written data is an object built in a variable above the write, the finding sits at
  that object.
- Not reported: a write that sets the status to a final state (`status: "cancelled"`,
  `"refunded"`, `"expired"`) with whatever timestamps beside it: no later event legitimately
  follows it.
- Not reported: a write behind a comparison of two named times read from two objects
  (`if (data.periodStart < team.periodStart) return;`): the event's time against the stored
  one. A provider listing (`stripe.subscriptions.list({ customer })`) is a re-fetch in a
  function that does not read the delivered event (a sync helper handed only ids); beside the
  event's own object it is not, since that object is what gets written. A value counted from
  the application's own rows (`await prisma.member.count(...)`) is not the event's state. A
  call to a function imported from an installed package (`updateSubscriptionItem` from a
  provider SDK) writes the provider's object, not this application's state. A status compared
  on what the handler read (also a part of it held in another variable: `const link =
  answer.result`) does not pick an event's branch.
- A prerequisite counts as linked by the handler's deliveries only through the columns a write
  sets to a value: the filter of that write (`where: { storeDomain }`) and a column set to
  `null` (an uninstall clearing the link) link nothing.
- A dropped advance notice (`customer.subscription.trial_will_end`, `invoice.upcoming`) is not
  reported: a reminder about a record that does not exist yet changes nothing. Nor is a lookup
  that is only the fallback for an id the event carries (`if (payment.metadata?.ownerId) return
  it;` before the query): an event with neither is not about this application's data. Nor is a
  conditional update that matches only while a field is unset (`findOneAndUpdate({ _id,
  sentAt: null }, ...)`): null there means another delivery claimed the record first.
"#;

pub const RULE: Rule = Rule {
    id: "order-dependence-assumed",
    summary: "state from an out-of-order event is written without a version check (or an early event is dropped): a late delivery overwrites newer state",
    docs: DOCS,
    fix: FixAvailability::None,
    safe_fixes: false,
    preview: false,
    check,
};

/// An event name (quotes stripped, or a constant's last name: `EVENTS.ACCOUNT_UPDATED`) for
/// an object whose state a later event can change: its updates can arrive out of order.
static OUT_OF_ORDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)^[\w.]*(subscription|order|product|customer|price|plan|invoice|payment_method|membership|account)[\w]*[._/](updated?|deleted?|canceled|cancelled|uncanceled|paused|resumed|changed|past_due|expired|activated|revoked)$"#)
        .unwrap()
});
/// An advance notice (`customer.subscription.trial_will_end`, `invoice.upcoming`): a reminder
/// that changes no state.
static NOTICE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)[._](will_[a-z_]+|upcoming|expiring|reminder)$").unwrap());
/// RevenueCat's event types that change an existing subscription (upper case, as sent).
static STORE_EVENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(RENEWAL|PRODUCT_CHANGE|CANCELLATION|UNCANCELLATION|EXPIRATION|BILLING_ISSUE|SUBSCRIPTION_PAUSED|SUBSCRIPTION_EXTENDED)$").unwrap()
});
static REGION_FN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)subscription\w*(updat|delet|cancel|chang|sync|paus|resum)|(updat|sync|upsert|manage)\w*subscription|order\w*updat|(updat|sync)\w*order").unwrap()
});
/// A state column, matched against every trailing run of a key's words: `stripeSubscriptionStatus`
/// ends in `status`, `stripe_current_period_end` in `current_period_end`.
static STATE_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(status|state|plan\w*|price\w*|quantity|seats|tier|cancel\w*|current_?period\w*|ends?_?at|renews?_?at|trial_?ends?_?at|active)$").unwrap()
});
/// A project function named for writing billing state (`updateUserSubscription`,
/// `createOrUpdateSubscription`, `updateUserPaymentDetails`): a call to it is the write.
static WRAPPER_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(create_?or_?update|update|upsert|save|sync|patch|apply|store|persist|set)_?[a-z0-9_]*(subscription|plan|tier|status|membership|billing|payment|entitlement)").unwrap()
});
/// A column a transition moves: a status, or a flag mirroring the provider's dunning status
/// (`isPastDue`).
static TRANSITION_KEY: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^(status|state|past_?due|unpaid|delinquent)$").unwrap());
/// A state nothing legitimately follows: a late write of it loses nothing newer.
static TERMINAL: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(refunded|cancell?ed|deleted|expired|revoked|ended|closed|archived|voided?|terminated|removed)$")
        .unwrap()
});
/// An event that ends its object: the state it writes is final.
static ENDING_EVENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(^|[._/])(deleted?|cancell?ed|cancellation|expired?|expiration|refunded|revoked|ended|closed|voided)$",
    )
    .unwrap()
});
/// What a branch on the delivered event compares: its type, or the status it carries.
static STATUS_OR_TYPE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?i)^(status|state|type|event)$").unwrap());
/// An event type as sent: words joined by `.`, `_`, `/` or `:`, no spaces.
static EVENT_TYPE: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^[A-Za-z]\w*([./:]\w+|_[A-Za-z]\w*)+$").unwrap());
static TIME_WORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)created|updated_?at|occurred_?at|event_?(time|at|created)|version|sequence|last_?event|timestamp")
        .unwrap()
});
/// A word run naming a point in time or a version (`currentPeriodStart`, `subscriptionStartsAt`,
/// `lastEventDate`), matched against a name's trailing words.
static TIME_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(at|start|starts|end|ends|date|time|timestamp|created|version|sequence)$").unwrap()
});
static TIME_FILTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(created|updated_?at|occurred_?at|event_?\w*|version|sequence|timestamp)\w*\W{0,6}\{?\s*(lt|lte|gt|gte|\$lt|\$lte|\$gt|\$gte)\s*:").unwrap()
});
static SQL_STATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bset\b[^;]*\b(status|plan\w*|price_id|quantity|cancel\w*)\s*=\s*(\$\d|\?|:\w)").unwrap()
});

/// Whether a key names state: the key or one of its trailing word runs matches `STATE_KEY`.
fn is_state_key(key: &str) -> bool {
    key_matches(key, &STATE_KEY)
}

/// Whether the key or one of its trailing word runs (camel or snake case) matches `pattern`.
fn key_matches(key: &str, pattern: &Regex) -> bool {
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    for c in key.chars() {
        if c == '_' || c == '-' || c == '.' {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if c.is_ascii_uppercase() && cur.chars().last().is_some_and(|p| p.is_ascii_lowercase() || p.is_ascii_digit()) {
            words.push(std::mem::take(&mut cur));
        }
        cur.push(c.to_ascii_lowercase());
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    (0..words.len()).any(|k| pattern.is_match(&words[k..].join("_")))
}

/// The event name a switch-case value or a compared string gives: the string, or a constant's
/// last name (`EVENTS.ACCOUNT_UPDATED`).
fn event_name(value: Node, src: &str) -> Option<String> {
    let name = match ast::string_value(value, src) {
        Some(s) => s,
        None => match ast::unwrap_expr(value).kind_name() {
            "member_expression" | "identifier" => ast::member_path(value, src).pop().filter(|p| !p.ends_with("()"))?,
            _ => return None,
        },
    };
    (!name.is_empty()).then_some(name)
}

/// Whether a switch-case value or a compared string names an out-of-order event.
fn names_out_of_order(value: Node, src: &str) -> bool {
    event_name(value, src).is_some_and(|n| OUT_OF_ORDER.is_match(&n) || STORE_EVENT.is_match(&n))
}

/// Whether it names an advance notice (`customer.subscription.trial_will_end`,
/// `invoice.upcoming`): a reminder about a record, which changes none of its state, so one that
/// arrives before the record exists loses nothing when it is dropped.
fn names_notice(value: Node, src: &str) -> bool {
    event_name(value, src).is_some_and(|n| NOTICE.is_match(&n))
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        state_writes(cx, model, out);
        transitions(cx, model, out);
        dropped(cx, model, out);
    }
}

/// Nodes (per scope index) that handle an event `names` accepts (a switch case, an `if` on
/// the event name, a handler-map entry, and the functions they call); with `by_fn_name`,
/// also the functions named for updating a subscription or an order.
fn regions<'a>(
    cx: &Context,
    model: &'a HandlerModel,
    names: fn(Node, &str) -> bool,
    by_fn_name: bool,
) -> Vec<(usize, Vec<Node<'a>>)> {
    let mut out: Vec<(usize, Vec<Node>)> = Vec::new();
    let mut whole: Vec<bool> =
        model.scopes.iter().map(|s| by_fn_name && s.depth > 0 && REGION_FN.is_match(&s.function.name)).collect();
    for (i, scope) in model.scopes.iter().enumerate() {
        let Some(func) = scope.node() else { continue };
        let src = &scope.file().text;
        let mut nodes = Vec::new();
        ast::walk(func, &mut |n| {
            match n.kind_name() {
                "switch_case" => {
                    if n.field("value").is_some_and(|v| names(v, src)) {
                        // Empty cases fall through to the next case with a body.
                        let mut cur = Some(n);
                        while let Some(c) = cur {
                            nodes.push(c);
                            let has_body = ast::named_children(c)
                                .iter()
                                .any(|s| Some(*s) != c.field("value") && s.kind_name() != "comment");
                            if has_body {
                                break;
                            }
                            cur = c.next_named_sibling();
                        }
                    }
                }
                "if_statement" => {
                    if let Some(cond) = n.field("condition")
                        && ast::descendants_of_kind(cond, "string").iter().any(|s| names(*s, src))
                        && !text(cond, src).contains("!==")
                        && let Some(cons) = n.field("consequence")
                    {
                        nodes.push(cons);
                    }
                }
                // A handler map: { "customer.subscription.updated": handleUpdated }
                "pair" => {
                    if n.field("key").is_some_and(|k| k.kind_name() == "string" && names(k, src))
                        && let Some(v) = n.field("value")
                    {
                        nodes.push(v);
                    }
                }
                _ => {}
            }
            true
        });
        if !nodes.is_empty() {
            out.push((i, nodes));
        }
    }
    // Functions called from a region are regions too (transitively).
    let mut changed = true;
    while changed {
        changed = false;
        let mut calls: Vec<(std::sync::Arc<crate::source::SourceFile>, crate::source::Span)> = Vec::new();
        for (i, scope) in model.scopes.iter().enumerate() {
            let Some(func) = scope.node() else { continue };
            let file = scope.file();
            let region_nodes: Vec<Node> = if whole[i] {
                vec![func]
            } else {
                out.iter().filter(|(j, _)| *j == i).flat_map(|(_, n)| n.clone()).collect()
            };
            for node in region_nodes {
                for call in ast::calls_in(node, false) {
                    if let Some(def) = reach::resolve_call(cx.project, file, call) {
                        calls.push((def.file.clone(), def.span));
                    }
                }
                if node.kind_name() == "identifier" {
                    let name = text(node, &file.text);
                    if let Some(def) = crate::project::local_function(file, name) {
                        calls.push((def.file.clone(), def.span));
                    }
                }
            }
        }
        for (j, scope) in model.scopes.iter().enumerate() {
            if !whole[j] && calls.iter().any(|(f, s)| f.path == scope.file().path && *s == scope.function.span) {
                whole[j] = true;
                changed = true;
            }
        }
    }
    for (i, w) in whole.iter().enumerate() {
        if *w && let Some(func) = model.scopes[i].node() {
            out.push((i, vec![func]));
        }
    }
    out
}

/// Whether `node`'s text shows a version/time comparison or a provider re-fetch.
fn ordered(node: Node, src: &str) -> bool {
    if TIME_FILTER.is_match(text(node, src)) {
        return true;
    }
    let mut found = false;
    ast::walk(node, &mut |n| {
        if found {
            return false;
        }
        if n.kind_name() == "binary_expression"
            && n.field("operator").is_some_and(|o| matches!(text(o, src), "<" | ">" | "<=" | ">="))
            && (TIME_WORD.is_match(text(n, src)) || compares_two_times(n, src))
        {
            found = true;
        }
        if n.kind_name() == "call_expression" && refetches(n, src) {
            found = true;
        }
        true
    });
    found
}

/// Whether a relational comparison sets two named times against each other, each read from its
/// own object (`data.currentPeriodStart < organization.subscriptionStartsAt`): the event's time
/// compared with the stored one. A clock (`Date.now()`) is a call, not a named time.
fn compares_two_times(cmp: Node, src: &str) -> bool {
    let side = |field: &str| {
        let n = ast::unwrap_expr(cmp.child_by_field_name(field)?);
        if !matches!(n.kind_name(), "member_expression" | "identifier") {
            return None;
        }
        let path = ast::member_path(n, src);
        if path.iter().any(|p| p.ends_with("()")) {
            return None;
        }
        let last = path.last()?.clone();
        key_matches(&last, &TIME_NAME).then(|| path.first().cloned().unwrap_or_default())
    };
    matches!((side("left"), side("right")), (Some(a), Some(b)) if a != b)
}

/// A read of the object's current state from the provider (`stripe.subscriptions.retrieve(id)`,
/// an awaited `getSubscription(id)` or `getExpandedSubscription(id)` helper, or a service's: `subscriptionsServices.getSubscription`). The customer (`customers.retrieve`) is not the
/// object whose state is written, and a synchronous helper (`getSubscriptionPriceId(sub)`)
/// reads the event, not the provider.
fn refetches(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    let lower: Vec<String> = path.iter().map(|p| p.trim_end_matches("()").to_ascii_lowercase()).collect();
    let Some(last) = lower.last() else { return false };
    if lower.len() >= 2 && lower[lower.len() - 2].starts_with("customer") {
        return false;
    }
    let root = lower.first().map(String::as_str).unwrap_or("");
    let db = ["prisma", "db", "tx", "supabase", "knex", "redis", "cache", "repo", "this", "pool", "client"]
        .iter()
        .any(|r| root.contains(r) && !root.contains("stripe"));
    let provider = ["stripe", "paddle", "shopify", "lemon", "polar", "chargebee", "recurly", "braintree", "paypal"]
        .iter()
        .any(|p| lower.iter().any(|s| s.contains(p)));
    let awaited = ast::is_awaited_call(call);
    (provider && matches!(last.as_str(), "retrieve" | "get" | "fetch" | "getsubscription" | "retrievesubscription"))
        || (provider && matches!(last.as_str(), "list" | "search") && !reads_delivered_event(call, src))
        || (!db && lower.len() >= 2 && last == "retrieve")
        || (awaited
            && (path.len() == 1 || lower[lower.len() - 2].contains("service"))
            && (last.starts_with("getsubscription")
                || last.starts_with("fetchsubscription")
                || ["get", "fetch", "retrieve", "load"].iter().any(|verb| last.starts_with(verb))
                    && last.ends_with("subscription")))
}

/// Whether the function making `call` reads the delivered event (an `event`/`evt` variable, or a
/// `.data.object`): a listing there (`subscriptions.list({ customer })`, for a quota) sits beside
/// the event's own object, which is what gets written. A sync function handed only ids has no
/// other source than what it lists.
fn reads_delivered_event(call: Node, src: &str) -> bool {
    let Some(func) = ast::enclosing_function(call) else { return true };
    let mut found = false;
    ast::walk(func, &mut |n| {
        if found {
            return false;
        }
        found = match n.kind_name() {
            "identifier" | "shorthand_property_identifier_pattern" => {
                matches!(text(n, src), "event" | "evt" | "webhookEvent" | "stripeEvent")
            }
            "member_expression" => text(n, src).ends_with(".data.object"),
            _ => false,
        };
        true
    });
    found
}

/// What must precede a write on its own path for it to be safe: `at_write` holds for the write
/// itself (its filter), `check` for an enclosing condition or an earlier statement. Both are
/// given the node and its file's text, since a path can run through callers in other files.
struct PathTest<'f> {
    at_write: &'f dyn Fn(Node, &str) -> bool,
    check: &'f dyn Fn(Node, &str) -> bool,
}

/// A time/version comparison or a provider re-fetch.
const ORDERED: PathTest<'static> = PathTest { at_write: &|n, src| TIME_FILTER.is_match(text(n, src)), check: &ordered };

/// Whether `test` holds before `node` on its own path through `func`: the node itself, the
/// condition of an enclosing `if`, or an earlier statement of an enclosing block (never another
/// `case` of the switch, or the other branch of an `if`).
fn checked_before(node: Node, func: Node, src: &str, test: &PathTest) -> bool {
    if (test.at_write)(node, src) {
        return true;
    }
    let mut cur = node;
    while let Some(parent) = ast::parent(cur) {
        match parent.kind_name() {
            "if_statement" => {
                if parent.field("condition").is_some_and(|c| c != cur && (test.check)(c, src)) {
                    return true;
                }
            }
            "statement_block" | "switch_case" | "program" => {
                let mut sib = cur.prev_named_sibling();
                while let Some(s) = sib {
                    if (parent.kind_name() != "switch_case" || Some(s) != parent.field("value"))
                        && checked_statement(s, src, test)
                    {
                        return true;
                    }
                    sib = s.prev_named_sibling();
                }
            }
            _ => {}
        }
        if parent == func {
            break;
        }
        cur = parent;
    }
    false
}

/// Whether an earlier statement checks on every path through it: a branch or a loop body may
/// not run (`if (event.type === "checkout...") { retrieve(...) }`), so only its condition
/// counts; a nested function runs only when called.
fn checked_statement(stmt: Node, src: &str, test: &PathTest) -> bool {
    match stmt.kind_name() {
        "if_statement" | "while_statement" => stmt.field("condition").is_some_and(|c| (test.check)(c, src)),
        "switch_statement" => stmt.field("value").is_some_and(|c| (test.check)(c, src)),
        "for_statement" | "for_in_statement" | "do_statement" | "function_declaration" | "class_declaration" => false,
        "try_statement" => stmt.field("body").is_some_and(|b| (test.check)(b, src)),
        _ => (test.check)(stmt, src),
    }
}

/// Whether every path to `node` in scope `i` passes `test`: in the scope itself, or (for a
/// function the handler calls) at every call site that reaches it.
fn path_checked(cx: &Context, model: &HandlerModel, i: usize, node: Node, depth: usize, test: &PathTest) -> bool {
    let scope = &model.scopes[i];
    let Some(func) = scope.node() else { return false };
    if checked_before(node, func, &scope.file().text, test) {
        return true;
    }
    if i == 0 || depth > 4 {
        return false;
    }
    let mut sites = 0;
    for (j, caller) in model.scopes.iter().enumerate() {
        if j == i {
            continue;
        }
        let Some(cfunc) = caller.node() else { continue };
        for call in ast::calls_in(cfunc, false) {
            let Some(def) = reach::resolve_call(cx.project, caller.file(), call) else { continue };
            if def.file.path != scope.file().path || def.span != scope.function.span {
                continue;
            }
            sites += 1;
            if !path_checked(cx, model, j, call, depth + 1, test) {
                return false;
            }
        }
    }
    sites > 0
}

/// An update/upsert (Prisma, Drizzle, SQL, Mongo, supabase-js, Directus): its label.
fn state_write(call: Node, src: &str) -> Option<String> {
    if let Some(effect) = effects::classify(call, src, false) {
        if matches!(effect.kind, EffectKind::DbUpdate | EffectKind::DbUpsert) {
            return Some(effect.label);
        }
        // An update that also increments a counter still writes the state beside it.
        if effect.kind == EffectKind::DbIncrement
            && matches!(ast::callee_name(call, src).as_deref(), Some("update" | "upsert" | "updateMany"))
        {
            return Some(effect.label);
        }
    }
    let path = ast::callee_path_shared(call, src);
    // Directus: `updateItem("subscriptions", id, data)`, handed to `client.request(...)`.
    if path.len() == 1
        && matches!(path[0].as_str(), "updateItem" | "updateItems")
        && ast::arguments(call).first().is_some_and(|a| ast::string_value(*a, src).is_some())
        && ast::arguments(call).len() >= 3
    {
        return Some(path[0].clone());
    }
    // A Prisma delegate behind a longer path: `this.client.model.subscription.upsert({ where, ... })`.
    if path.len() >= 4
        && matches!(path.last().map(String::as_str), Some("update" | "upsert" | "updateMany"))
        && path.iter().all(|p| !p.ends_with("()"))
        && ast::arguments(call)
            .first()
            .is_some_and(|a| a.kind_name() == "object" && ast::object_property(*a, "where", src).is_some())
    {
        return Some(path.join("."));
    }
    // supabase-js chains end in a filter: `from(t).update(v).eq(...)`.
    if ast::parent(call).is_some_and(|p| p.kind_name() == "member_expression") {
        return None;
    }
    let supabase_write = path.iter().any(|p| p == "from()")
        && path.iter().any(|p| matches!(p.trim_end_matches("()"), "update" | "upsert"));
    supabase_write.then(|| path.join("."))
}

/// Whether a value is decided by the handler rather than copied from the event: a literal, a
/// named constant, a choice between literals (`x ? "active" : "canceled"`), or a `const`
/// bound to one of those.
fn handler_chosen(value: Node, scopes: &[Node], before: usize, src: &str) -> bool {
    let v = ast::unwrap_expr(value);
    let literal = |n: Node| {
        let n = ast::unwrap_expr(n);
        matches!(
            n.kind_name(),
            "string" | "number" | "true" | "false" | "null" | "undefined" | "object" | "new_expression"
        ) || (n.kind_name() == "template_string" && ast::string_value(n, src).is_some())
            || is_named_constant(n, src)
    };
    let chosen = |n: Node| {
        let n = ast::unwrap_expr(n);
        literal(n)
            || (n.kind_name() == "ternary_expression"
                && ["consequence", "alternative"].iter().all(|f| n.child_by_field_name(f).is_some_and(literal)))
    };
    if chosen(v) {
        return true;
    }
    matches!(v.kind_name(), "identifier" | "shorthand_property_identifier")
        && scopes
            .iter()
            .find_map(|f| ast::find_binding_init(*f, text(v, src), src, before))
            .is_some_and(|init| chosen(init) || counts_stored_rows(init, src))
}

/// A count of the application's own rows (`await prisma.member.count({ where })`,
/// `countDocuments`, `aggregate`): the handler's own state, not a snapshot carried by the event.
fn counts_stored_rows(init: Node, src: &str) -> bool {
    let init = ast::unwrap_expr(init);
    init.kind_name() == "call_expression"
        && ast::callee_path(init, src).len() >= 2
        && ast::callee_name(init, src).is_some_and(|n| matches!(n.as_str(), "count" | "countDocuments" | "aggregate"))
}

fn state_written<'t>(call: Node<'t>, src: &str) -> Option<Node<'t>> {
    if let Some(sql) = effects::sql_text(call, &ast::arguments(call), src) {
        return SQL_STATE.is_match(&sql).then_some(call);
    }
    // Every link of the chain: `from(t).update({ status }).eq(...)`.
    let args: Vec<Node> = ast::calls_in(call, false).into_iter().flat_map(ast::arguments).collect();
    carries_state(call, &args, src)
}

/// Whether the write sets its status to a state nothing legitimately follows (`status:
/// "cancelled"`, `state: "refunded"`).
fn writes_terminal_status(call: Node, src: &str) -> bool {
    ast::descendants_of_kind(call, "pair").into_iter().any(|p| {
        p.field("key").is_some_and(|k| TRANSITION_KEY.is_match(text(k, src).trim_matches(['"', '\''])))
            && p.field("value")
                .and_then(|v| ast::string_value(ast::unwrap_expr(v), src))
                .is_some_and(|v| TERMINAL.is_match(&v))
    })
}

/// The functions enclosing `node`, innermost first.
fn enclosing_functions(node: Node) -> Vec<Node> {
    let scope = ast::enclosing_function(node).unwrap_or(node);
    std::iter::once(scope).chain(ast::ancestors(scope).filter(|a| ast::is_function(*a))).collect()
}

/// Whether the arguments `args` of `call` write a state key with a value taken from the event;
/// the node to report: the call, or the object built in a variable above it.
fn carries_state<'t>(call: Node<'t>, args: &[Node<'t>], src: &str) -> Option<Node<'t>> {
    let scopes = enclosing_functions(call);
    let mut roots: Vec<(Node, bool)> = args.iter().map(|a| (*a, false)).collect();
    for arg in args {
        for id in ast::descendants_of_kind(*arg, "identifier") {
            // `upsert([data])`, `{ ...data }`, or `{ update: data }`.
            let value_of_pair =
                ast::parent(id).is_some_and(|p| p.kind_name() == "pair" && p.field("value").is_some_and(|v| v == id));
            if (value_of_pair
                || ast::parent(id).is_some_and(|p| matches!(p.kind_name(), "arguments" | "array" | "spread_element")))
                && let Some(init) =
                    scopes.iter().find_map(|f| ast::find_binding_init(*f, text(id, src), src, call.start_byte()))
                && init.kind_name() == "object"
            {
                roots.push((init, true));
            }
        }
    }
    for (root, bound) in roots {
        let local_scopes: Vec<Node> = if bound { enclosing_functions(root) } else { scopes.clone() };
        let mut found = false;
        ast::walk(root, &mut |n| {
            if found {
                return false;
            }
            if n.kind_name() == "pair"
                && let (Some(k), Some(v)) = (n.field("key"), n.field("value"))
            {
                let key = ast::string_value(k, src).unwrap_or_else(|| text(k, src).to_string());
                if is_state_key(&key) && !handler_chosen(v, &local_scopes, n.start_byte(), src) {
                    found = true;
                }
            }
            if n.kind_name() == "shorthand_property_identifier"
                && is_state_key(text(n, src))
                && !handler_chosen(n, &local_scopes, n.start_byte(), src)
            {
                found = true;
            }
            true
        });
        if found {
            return Some(if bound { root } else { call });
        }
    }
    None
}

/// A member of an enum or constant object (`SubscriptionStatus.CANCELED`, `Plan.Free`): the
/// handler decides the value, it is not a snapshot carried by the event.
fn is_named_constant(value: Node, src: &str) -> bool {
    let value = ast::unwrap_expr(value);
    if value.kind_name() != "member_expression" {
        return false;
    }
    let path = ast::member_path(value, src);
    path.len() == 2
        && path.iter().all(|p| !p.ends_with("()"))
        && path[0].starts_with(|c: char| c.is_ascii_uppercase())
        && path[1].starts_with(|c: char| c.is_ascii_uppercase())
}

/// A call to a project function named for writing billing state (`updateUserSubscription(...)`,
/// `ctx.runMutation(api.users.updateSubscription, { ... })`, `service.createOrUpdateSubscription(...)`):
/// its name and the arguments holding the data. A call the model classifies (an SDK, a query)
/// is not one.
fn wrapper_call<'t>(
    file: &std::sync::Arc<crate::source::SourceFile>,
    call: Node<'t>,
) -> Option<(String, Vec<Node<'t>>)> {
    let src = &file.text;
    if let Some(effect) = effects::classify(call, src, false)
        && effect.kind != EffectKind::Possible
    {
        return None;
    }
    let args = ast::arguments(call);
    let name = ast::callee_name(call, src)?;
    if WRAPPER_NAME.is_match(&name) {
        return Some((name, args));
    }
    // A dispatcher handed the write function: `runMutation(api.users.updateSubscription, args)`.
    if args.len() >= 2
        && ast::unwrap_expr(args[0]).kind_name() == "member_expression"
        && let Some(target) = ast::member_path(args[0], src).pop().filter(|p| !p.ends_with("()"))
        && WRAPPER_NAME.is_match(&target)
    {
        return Some((target, args[1..].to_vec()));
    }
    None
}

/// Whether a call names a function imported from an installed package
/// (`import { updateSubscriptionItem } from "@lemonsqueezy/lemonsqueezy.js"`): an SDK call that
/// writes to the provider, not a project function writing the application's state.
fn package_function(cx: &Context, file: &std::sync::Arc<crate::source::SourceFile>, call: Node) -> bool {
    let src = &file.text;
    let Some(callee) = call.field("function").map(ast::unwrap_expr) else { return false };
    if callee.kind_name() != "identifier" {
        return false;
    }
    let name = text(callee, src);
    crate::project::imports(file).iter().any(|imp| {
        imp.local == name
            && !imp.source.starts_with('.')
            && cx.project.resolve(&file.path, &imp.source).is_none()
            && reach::resolve_call(cx.project, file, call).is_none()
    })
}

/// Whether a wrapper call (`wrapper_call`) is given state from the event: the node to report.
fn wrapper_write<'t>(
    cx: &Context,
    file: &std::sync::Arc<crate::source::SourceFile>,
    call: Node<'t>,
    data: &[Node<'t>],
) -> Option<Node<'t>> {
    let src = &file.text;
    if let Some(node) = carries_state(call, data, src) {
        return Some(node);
    }
    // A spread of a local helper's result: `{ userId, ...subscriptionUpdate(sub) }`.
    for arg in data {
        for spread in ast::descendants_of_kind(*arg, "spread_element") {
            let Some(inner) = spread.named_child(0).map(ast::unwrap_expr) else { continue };
            if inner.kind_name() != "call_expression" {
                continue;
            }
            let Some(def) = reach::resolve_call(cx.project, file, inner) else { continue };
            let Some(body) = def.node() else { continue };
            let dsrc = &def.file.text;
            for ret in ast::descendants_of_kind(body, "return_statement") {
                if let Some(obj) = ret.named_child(0).map(ast::unwrap_expr)
                    && obj.kind_name() == "object"
                    && carries_state(obj, &[obj], dsrc).is_some()
                {
                    return Some(call);
                }
            }
        }
    }
    // Positional state: `createOrUpdateSubscription(id, event.data.object.cancel_at)`.
    let positional = data.iter().any(|a| {
        let a = ast::unwrap_expr(*a);
        matches!(a.kind_name(), "member_expression" | "identifier")
            && ast::member_path(a, src).pop().is_some_and(|p| !p.ends_with("()") && is_state_key(&p))
            && !handler_chosen(a, &enclosing_functions(call), call.start_byte(), src)
    });
    positional.then_some(call)
}

/// Whether object arguments name a state key, whatever its value (`{ state: State.Ended }`).
fn names_state(args: &[Node], src: &str) -> bool {
    args.iter().any(|a| {
        let mut found = false;
        ast::walk(*a, &mut |n| {
            if found || ast::is_function(n) {
                return false;
            }
            found = match n.kind_name() {
                "pair" => n.field("key").is_some_and(|k| {
                    is_state_key(&ast::string_value(k, src).unwrap_or_else(|| text(k, src).to_string()))
                }),
                "shorthand_property_identifier" => is_state_key(text(n, src)),
                _ => false,
            };
            true
        });
        found
    })
}

/// The functions a reported wrapper call reaches (its own writes are the wrapper's).
fn wrapped_functions(
    cx: &Context,
    file: &std::sync::Arc<crate::source::SourceFile>,
    call: Node,
    out: &mut Vec<(std::path::PathBuf, crate::source::Span)>,
    depth: usize,
) {
    let Some(def) = reach::resolve_call(cx.project, file, call) else { return };
    let key = (def.file.path.clone(), def.span);
    if out.contains(&key) {
        return;
    }
    out.push(key);
    if depth >= 3 {
        return;
    }
    let Some(body) = def.node() else { return };
    for inner in ast::calls_in(body, false) {
        wrapped_functions(cx, &def.file, inner, out, depth + 1);
    }
}

fn state_writes(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    let regions = regions(cx, model, names_out_of_order, true);
    if regions.is_empty() {
        return;
    }
    let mut seen = Vec::new();
    // (scope, call, label, report node, through a wrapper)
    let mut found: Vec<(usize, Node, String, Node, bool)> = Vec::new();
    let mut wrapped = Vec::new();
    for (i, nodes) in &regions {
        let scope = &model.scopes[*i];
        let file = scope.file();
        let src = &file.text;
        for node in nodes {
            for call in ast::calls_in(*node, false) {
                if seen.contains(&(*i, call.start_byte())) {
                    continue;
                }
                if let Some(label) = state_write(call, src) {
                    let Some(at) = state_written(call, src) else { continue };
                    // `status: "cancelled"` with its `canceledAt`: the object's final state,
                    // which no later event legitimately follows.
                    if guards::is_marker_insert(call, src) || writes_terminal_status(call, src) {
                        continue;
                    }
                    seen.push((*i, call.start_byte()));
                    found.push((*i, call, label, at, false));
                } else if let Some((label, data)) = wrapper_call(file, call)
                    && !package_function(cx, file, call)
                {
                    // The wrapper's own writes are reported at its calls, with the values given
                    // there; a call that hands it no state (`updateSubscription(event)`) leaves
                    // the writes inside to be judged where they are.
                    let at = wrapper_write(cx, file, call, &data);
                    if at.is_some() || names_state(&data, src) {
                        wrapped_functions(cx, file, call, &mut wrapped, 0);
                    }
                    if let Some(at) = at {
                        seen.push((*i, call.start_byte()));
                        found.push((*i, call, label, at, true));
                    }
                }
            }
        }
    }
    // A write inside a wrapper is reported at the wrapper's call, with the values given there.
    for (i, call, label, at, through_wrapper) in found {
        let scope = &model.scopes[i];
        if wrapped.iter().any(|(p, s)| *p == scope.file().path && *s == scope.function.span) {
            continue;
        }
        if path_checked(cx, model, i, call, 0, &ORDERED) {
            continue;
        }
        let what = if through_wrapper { "writes (through this project function) state" } else { "writes state" };
        out.push(diag(
            model,
            scope,
            at,
            format!(
                "`{label}` {what} taken from an event that can arrive out of order, with no check of the event's time/version and no re-fetch: a late or retried older event overwrites newer state"
            ),
            "compare the event's time/version with the stored one in the write's filter, or re-fetch the object from the provider before writing",
        ));
    }
}

/// A status the event type picks (`status: "funded"` on `charge.success`), written over a status
/// another event's branch writes (`"refunded"` on `refund.processed`), with no look at the stored
/// one: a late or retried delivery of the earlier event undoes the later transition. A state
/// nothing legitimately follows (`refunded`, `cancelled`) is not reported: writing it late loses
/// nothing newer.
fn transitions(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    let writes = column_writes(model);
    if writes.iter().all(|w| w.value.is_none()) {
        return;
    }
    let branches = EventBranches::of(model, regions(cx, model, names_event, false));
    let endings = EventBranches::of(model, regions(cx, model, names_ending_event, false));
    let mirrored_columns = mirrored_columns(model);
    let mirrored_records = snapshot_records(cx, model);
    let mut reported: Vec<(usize, usize)> = Vec::new();
    for w in &writes {
        let Some(value) = &w.value else { continue };
        if TERMINAL.is_match(value) || reported.contains(&(w.scope, w.call.start_byte())) {
            continue;
        }
        // The write an ending event (`*.deleted`, `charge.refunded`) makes is the object's
        // final state, whatever its word: nothing legitimately follows it.
        if !endings.around(model, w).is_empty() {
            continue;
        }
        // A record that copies the provider's state (this column anywhere, or any state on an
        // out-of-order event) mirrors the provider's object: the copy is where the order
        // matters (the snapshot half of the rule, whose remedy covers the record), and the
        // object's next `*.updated` re-syncs what a late literal wrote.
        let same_table = |table: &Option<String>| table.is_none() || w.table.is_none() || *table == w.table;
        if mirrored_columns.iter().any(|(table, column)| *column == w.column && same_table(table))
            || mirrored_records.iter().any(|table| w.table.as_ref() == Some(table))
        {
            continue;
        }
        // The value must be picked by which event arrived (its type, or the status it carries),
        // and another event's branch must write something else.
        let mine = branches.around(model, w);
        if mine.is_empty() {
            continue;
        }
        let Some(other) = writes.iter().find(|o| {
            o.column == w.column
                && o.value.as_ref() != Some(value)
                && same_table(&o.table)
                && on_other_path(model, w, o)
                && {
                    let theirs = branches.around(model, o);
                    mine.iter().any(|b| !theirs.contains(b)) && theirs.iter().any(|b| !mine.contains(b))
                }
        }) else {
            continue;
        };
        let column = w.column.clone();
        let stored = PathTest {
            at_write: &|n, src| filters_on_column(n, src, &column),
            check: &|n, src| {
                reads_stored_column(n, src, &column)
                    || leaves_when_stored(n, src)
                    || ast::calls_in(n, false).into_iter().any(|c| filters_on_column(c, src, &column))
            },
        };
        if path_checked(cx, model, w.scope, w.call, 0, &ORDERED) || path_checked(cx, model, w.scope, w.call, 0, &stored)
        {
            continue;
        }
        reported.push((w.scope, w.call.start_byte()));
        let scope = &model.scopes[w.scope];
        let theirs = other.value.as_deref().map(|v| format!("`{v}`")).unwrap_or_else(|| "another value".to_string());
        out.push(diag(
            model,
            scope,
            w.call,
            format!(
                "`{}` is set to `{value}` for this event without looking at the stored one, while another event's branch sets it to {theirs}: deliveries are not ordered, so a late or retried earlier event undoes the newer transition",
                w.key
            ),
            "make the write conditional on the stored state (`where: { id, status: <expected> }`), or compare the event's time with the stored one",
        ));
    }
}

/// The branches (switch cases, `if`s on the event, the functions they call) that a set of
/// event names selects, as (file, start byte, end byte).
struct EventBranches(Vec<(std::path::PathBuf, usize, usize)>);

impl EventBranches {
    fn of(model: &HandlerModel, regions: Vec<(usize, Vec<Node>)>) -> Self {
        let mut out = Vec::new();
        for (j, nodes) in regions {
            for n in nodes {
                let range = (model.scopes[j].file().path.clone(), n.start_byte(), n.end_byte());
                if !out.contains(&range) {
                    out.push(range);
                }
            }
        }
        EventBranches(out)
    }

    /// The branches a write sits in.
    fn around(&self, model: &HandlerModel, w: &ColumnWrite) -> Vec<&(std::path::PathBuf, usize, usize)> {
        let path = &model.scopes[w.scope].file().path;
        self.0
            .iter()
            .filter(|(p, start, end)| p == path && *start <= w.pair.start_byte() && w.pair.end_byte() <= *end)
            .collect()
    }
}

/// An event that ends its object (`customer.subscription.deleted`, `charge.refunded`,
/// RevenueCat's `EXPIRATION`).
fn names_ending_event(value: Node, src: &str) -> bool {
    event_name(value, src).is_some_and(|n| ENDING_EVENT.is_match(&n))
}

/// The tables the snapshot half covers: written with state copied from the event on an
/// out-of-order event (`status: sub.status` on `customer.subscription.updated`).
fn snapshot_records(cx: &Context, model: &HandlerModel) -> Vec<String> {
    let mut out = Vec::new();
    for (i, nodes) in regions(cx, model, names_out_of_order, true) {
        let src = &model.scopes[i].file().text;
        for node in nodes {
            for call in ast::calls_in(node, false) {
                if state_write(call, src).is_some()
                    && state_written(call, src).is_some()
                    && !guards::is_marker_insert(call, src)
                    && let Some(table) = written_table(outermost_link(call), src)
                    && !out.contains(&table)
                {
                    out.push(table);
                }
            }
        }
    }
    out
}

/// An event type as sent (`charge.success`, `payment_intent.payment_failed`, `orders/paid`,
/// `EVENTS.ACCOUNT_UPDATED`, a RevenueCat type), or a provider status compared the same way
/// (`sub.status === "past_due"`): a branch the delivered event picks.
fn names_event(value: Node, src: &str) -> bool {
    event_name(value, src).is_some_and(|n| EVENT_TYPE.is_match(&n) || STORE_EVENT.is_match(&n))
        || compared_with_status(value, src)
}

/// Whether a string is compared with a status or type the event carries (`sub.status ===
/// "active"`). An object the handler read itself (`const payment = await getPayment(id)`, a
/// re-fetch or a stored record) is not what the delivered event says.
fn compared_with_status(value: Node, src: &str) -> bool {
    let Some(cmp) = ast::parent(value).filter(|p| p.kind_name() == "binary_expression") else { return false };
    if !cmp.field("operator").is_some_and(|o| matches!(text(o, src), "===" | "==")) {
        return false;
    }
    let other = if cmp.field("left") == Some(value) { "right" } else { "left" };
    cmp.child_by_field_name(other).map(ast::unwrap_expr).is_some_and(|o| {
        o.kind_name() == "member_expression"
            && o.field("property").is_some_and(|p| key_matches(text(p, src), &STATUS_OR_TYPE))
            && !read_by_handler(o, src)
    })
}

/// Whether a member's root variable holds what the handler read (an awaited or called
/// function's result), rather than the delivered event or a part of it.
fn read_by_handler(member: Node, src: &str) -> bool {
    read_by_handler_at(member, src, 0)
}

/// `read_by_handler`, following a variable bound to a part of another (`const data =
/// result.data`, where `result` holds an awaited query) up to three hops.
fn read_by_handler_at(member: Node, src: &str, depth: usize) -> bool {
    let Some(root) = ast::member_path(member, src).into_iter().next() else { return false };
    if root.ends_with("()") {
        return true;
    }
    let Some(init) = enclosing_functions(member)
        .into_iter()
        .find_map(|f| binding_init(f, &root, src, member.start_byte()))
        .map(ast::unwrap_expr)
    else {
        return false;
    };
    match init.kind_name() {
        // Past the first hop, the call must be a read, not the one that yields the delivery
        // itself (`const event = constructEvent(...)`, `await req.json()`).
        "call_expression" => {
            depth == 0 || ast::callee_name(init, src).is_none_or(|name| !DELIVERY_READ.is_match(&name))
        }
        "member_expression" if depth < 3 => read_by_handler_at(init, src, depth + 1),
        _ => false,
    }
}

/// A call that yields the delivered event: its verification or parsing.
static DELIVERY_READ: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)construct|verify|validate|parse|unwrap|^(json|text|body|formData)$|webhook|event").unwrap()
});

/// One state column an update writes.
struct ColumnWrite<'t> {
    scope: usize,
    /// The whole write (the outermost call of a query chain).
    call: Node<'t>,
    /// The `key: value` pair (or shorthand) that writes the column.
    pair: Node<'t>,
    table: Option<String>,
    /// The key as written, and compared loosely (`name_key`).
    key: String,
    column: String,
    /// The value, when the handler picks it (a literal, an enum member, a `const` bound to one).
    value: Option<String>,
}

/// Every write of a transition column (`TRANSITION_KEY`) by an update in the handler's scopes.
fn column_writes<'t>(model: &'t HandlerModel) -> Vec<ColumnWrite<'t>> {
    let mut out: Vec<ColumnWrite> = Vec::new();
    let mut seen: Vec<(std::path::PathBuf, usize)> = Vec::new();
    for (i, scope) in model.scopes.iter().enumerate() {
        let Some(func) = scope.node() else { continue };
        let src = &scope.file().text;
        for call in ast::calls_in(func, false) {
            if state_write(call, src).is_none() || guards::is_marker_insert(call, src) {
                continue;
            }
            let whole = outermost_link(call);
            let table = written_table(whole, src);
            for (pair, key, value) in assigned_pairs(whole, src) {
                if !key_matches(&key, &TRANSITION_KEY) {
                    continue;
                }
                let at = (scope.file().path.clone(), pair.start_byte());
                if seen.contains(&at) {
                    continue;
                }
                seen.push(at);
                out.push(ColumnWrite {
                    scope: i,
                    call: whole,
                    pair,
                    table: table.clone(),
                    column: name_key(&key),
                    value: chosen_literal(value, &enclosing_functions(pair), pair.start_byte(), src, 0),
                    key,
                });
            }
        }
    }
    out
}

/// A call that writes a record: a database insert/update/upsert, or a project function named
/// for one (`createMeeting({ ... })`, `saveOrder(...)`).
static RECORD_WRITE_NAME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(create|insert|add|save|update|upsert|set|sync|record|store|persist)([A-Z_]|$)").unwrap()
});

/// The transition columns (table, loose name) some write copies from a provider's object
/// (`status: sub.status`, `stripePaymentStatus: mapStatus(session.payment_status)`, `{ status }`).
fn mirrored_columns(model: &HandlerModel) -> Vec<(Option<String>, String)> {
    let mut out = Vec::new();
    for scope in &model.scopes {
        let Some(func) = scope.node() else { continue };
        let src = &scope.file().text;
        for call in ast::calls_in(func, false) {
            let db_write = effects::classify(call, src, false)
                .is_some_and(|e| matches!(e.kind, EffectKind::DbInsert | EffectKind::DbUpdate | EffectKind::DbUpsert));
            let named_write = ast::callee_name(call, src).is_some_and(|n| RECORD_WRITE_NAME.is_match(&n));
            if !db_write && !named_write && state_write(call, src).is_none() {
                continue;
            }
            let whole = outermost_link(call);
            for (pair, key, value) in assigned_pairs(whole, src) {
                if key_matches(&key, &TRANSITION_KEY)
                    && chosen_literal(value, &enclosing_functions(pair), pair.start_byte(), src, 0).is_none()
                    && copies_state(value, src)
                {
                    out.push((written_table(whole, src), name_key(&key)));
                }
            }
        }
    }
    out
}

/// Whether a value reads someone's state: a member or a variable named for it (`sub.status`,
/// `mapStatus(session.payment_status)`, a shorthand `status`).
fn copies_state(value: Node, src: &str) -> bool {
    let mut found = false;
    ast::walk(value, &mut |n| {
        if found || ast::is_function(n) {
            return false;
        }
        found = match n.kind_name() {
            "member_expression" => n.field("property").is_some_and(|p| is_state_key(text(p, src))),
            "identifier" | "shorthand_property_identifier" => is_state_key(text(n, src)),
            _ => false,
        };
        true
    });
    found
}

/// The outermost call of a query chain (`db.update(t).set(v).where(c)` for any of its links).
fn outermost_link(call: Node) -> Node {
    let mut cur = call;
    while let Some(member) = ast::parent(cur).filter(|p| p.kind_name() == "member_expression")
        && let Some(outer) = ast::parent(member).filter(|p| p.kind_name() == "call_expression")
    {
        cur = outer;
    }
    cur
}

/// The calls of a query chain, outermost first.
fn chain_links(call: Node) -> Vec<Node> {
    let mut out = Vec::new();
    let mut cur = Some(call);
    while let Some(c) = cur.filter(|c| c.kind_name() == "call_expression") {
        out.push(c);
        cur = c
            .field("function")
            .filter(|f| f.kind_name() == "member_expression")
            .and_then(|f| f.field("object"))
            .map(ast::unwrap_expr);
    }
    out
}

/// The table an update writes: the argument of `from(t)` / `into(t)` in the chain, else of
/// `update(t)` (Drizzle; supabase's `update(data)` follows a `from`), else the model of a
/// delegate (`tx.order.update`).
fn written_table(call: Node, src: &str) -> Option<String> {
    let links = chain_links(call);
    let argument_of = |names: &[&str]| {
        links.iter().find_map(|link| {
            let name = ast::callee_name(*link, src)?;
            if !names.contains(&name.as_str()) {
                return None;
            }
            let arg = ast::arguments(*link).first().copied().filter(|a| a.kind_name() != "object")?;
            let table = ast::string_value(arg, src)
                .or_else(|| ast::member_path(arg, src).pop())
                .unwrap_or_else(|| text(arg, src).to_string());
            Some(table_key(&table))
        })
    };
    argument_of(&["from", "into", "table", "insertInto", "updateTable"])
        .or_else(|| argument_of(&["update"]))
        .or_else(|| links.iter().find_map(|l| table_named(*l, src)))
}

/// The `key: value` pairs an update writes: its object arguments (or an object bound to a
/// variable it takes), outside the filter, the selection and nested functions.
fn assigned_pairs<'t>(call: Node<'t>, src: &str) -> Vec<(Node<'t>, String, Node<'t>)> {
    let mut out = Vec::new();
    for link in chain_links(call) {
        if matches!(ast::callee_name(link, src).as_deref(), Some("where" | "eq" | "match" | "filter")) {
            continue;
        }
        for arg in ast::arguments(link) {
            let arg = ast::unwrap_expr(arg);
            let object = match arg.kind_name() {
                "object" => arg,
                "identifier" => match enclosing_functions(link)
                    .iter()
                    .find_map(|f| ast::find_binding_init(*f, text(arg, src), src, link.start_byte()))
                    .map(ast::unwrap_expr)
                {
                    Some(init) if init.kind_name() == "object" => init,
                    _ => continue,
                },
                _ => continue,
            };
            written_pairs(object, src, false, &mut |pair, key, value| out.push((pair, key, value)));
        }
    }
    out
}

/// The value the handler picks for a column, as text: a literal, an enum member's name
/// (`OrderStatus.FAILED` is `FAILED`), or what a `const` is bound to. `None` for anything else
/// (the event's own value, a computation).
fn chosen_literal(value: Node, scopes: &[Node], before: usize, src: &str, depth: usize) -> Option<String> {
    let v = ast::unwrap_expr(value);
    match v.kind_name() {
        "string" | "template_string" => ast::string_value(v, src),
        "true" | "false" | "number" | "null" => Some(text(v, src).to_string()),
        "member_expression" if is_named_constant(v, src) => ast::member_path(v, src).pop(),
        "identifier" | "shorthand_property_identifier" if depth == 0 => scopes
            .iter()
            .find_map(|f| ast::find_binding_init(*f, text(v, src), src, before))
            .and_then(|init| chosen_literal(init, scopes, before, src, 1)),
        _ => None,
    }
}

/// Whether two writes of a column sit on different paths: in different functions, or each in
/// its own branch below the point where their paths part (`if`/`else`, `case`s, two `if`s in a
/// row). Two writes one after the other on the same path are steps of one event, not a
/// transition another event undoes.
fn on_other_path(model: &HandlerModel, a: &ColumnWrite, b: &ColumnWrite) -> bool {
    if a.pair == b.pair {
        return false;
    }
    if model.scopes[a.scope].file().path != model.scopes[b.scope].file().path {
        return true;
    }
    let above_a: Vec<usize> = ast::ancestors(a.pair).map(|n| n.id()).collect();
    let Some(meet) = ast::ancestors(b.pair).find(|n| above_a.contains(&n.id())) else { return true };
    conditional_below(a.pair, meet) && conditional_below(b.pair, meet)
}

/// Whether `node` runs only on some paths through `top`: it sits in a branch, a `case`, or a
/// function of its own (not a callback handed to a call, which runs in place).
fn conditional_below(node: Node, top: Node) -> bool {
    let mut cur = node;
    while let Some(parent) = ast::parent(cur) {
        let branch = match parent.kind_name() {
            "if_statement" | "ternary_expression" => parent.field("condition") != Some(cur),
            "else_clause" => true,
            "switch_case" | "switch_default" => parent.field("value") != Some(cur),
            _ => ast::is_function(parent) && ast::parent(parent).is_none_or(|p| p.kind_name() != "arguments"),
        };
        if branch {
            return true;
        }
        if parent == top {
            return false;
        }
        cur = parent;
    }
    false
}

/// Whether an update's filter names the column: a conditional transition
/// (`where: { id, status: "pending" }`, `.where(and(eq(t.id, id), eq(t.status, "pending")))`).
fn filters_on_column(call: Node, src: &str, column: &str) -> bool {
    if call.kind_name() != "call_expression" {
        return false;
    }
    let mut filters: Vec<Node> = Vec::new();
    for link in chain_links(outermost_link(call)) {
        if matches!(ast::callee_name(link, src).as_deref(), Some("where" | "eq" | "match" | "filter")) {
            filters.extend(ast::arguments(link));
        }
        for arg in ast::arguments(link) {
            if ast::unwrap_expr(arg).kind_name() == "object"
                && let Some(filter) = ast::object_property(ast::unwrap_expr(arg), "where", src)
            {
                filters.push(filter);
            }
        }
    }
    filters.into_iter().any(|f| {
        columns_named(f, src).iter().any(|c| c == column)
            || ast::descendants_of_kind(f, "member_expression")
                .iter()
                .any(|m| m.field("property").is_some_and(|p| name_key(text(p, src)) == column))
    })
}

/// Whether `cond` is the condition of an `if` that leaves when a stored record exists
/// (`const [existing] = await db.select()...; if (existing) return existing;`): what follows
/// runs only for a record not yet stored, so it creates the record and overwrites nothing.
fn leaves_when_stored(cond: Node, src: &str) -> bool {
    let Some(stmt) = ast::parent(cond).filter(|p| p.kind_name() == "if_statement") else { return false };
    if stmt.field("condition") != Some(cond) || stmt.field("alternative").is_some() {
        return false;
    }
    let exits = stmt.field("consequence").is_some_and(|c| {
        let only = if c.kind_name() == "statement_block" {
            let statements: Vec<Node> =
                ast::named_children(c).into_iter().filter(|s| s.kind_name() != "comment").collect();
            (statements.len() == 1).then(|| statements[0])
        } else {
            Some(c)
        };
        only.is_some_and(|s| matches!(s.kind_name(), "return_statement" | "throw_statement"))
    });
    let tested = ast::unwrap_expr(cond);
    exits
        && tested.kind_name() == "identifier"
        && enclosing_functions(tested)
            .into_iter()
            .find_map(|f| binding_init(f, text(tested, src), src, tested.start_byte()))
            .map(ast::unwrap_expr)
            .is_some_and(|init| {
                init.kind_name() == "call_expression"
                    && ast::callee_name(init, src).is_some_and(|name| STORED_READ.is_match(&name))
            })
}

/// A call that reads a stored record: a query (`findFirst`, `select ... limit(1)`) or a project
/// helper named for reading one (`getOrder(id)`).
static STORED_READ: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(get|find|fetch|load|read|select|query|retrieve|lookup)|^(first|single|maybe_?single|limit|execute|one)$").unwrap()
});

/// Whether `node` reads the column from a stored record (`order.status === OrderStatus.PAID`,
/// `existingWorkspace.isPastDue`): a member of a variable bound to a record read, not to the
/// event.
fn reads_stored_column(node: Node, src: &str, column: &str) -> bool {
    ast::descendants_of_kind(node, "member_expression").into_iter().any(|m| {
        let names_column = m.field("property").is_some_and(|p| name_key(text(p, src)) == column);
        if !names_column {
            return false;
        }
        let Some(root) = ast::member_path(m, src).into_iter().next().filter(|r| !r.ends_with("()")) else {
            return false;
        };
        let init = enclosing_functions(m)
            .into_iter()
            .find_map(|f| binding_init(f, &root, src, m.start_byte()))
            .map(ast::unwrap_expr);
        init.is_some_and(|init| {
            init.kind_name() == "call_expression"
                && ast::callee_name(init, src).is_some_and(|name| STORED_READ.is_match(&name))
        })
    })
}

fn diag(model: &HandlerModel, scope: &Scope, node: Node, msg: String, help: &str) -> Diagnostic {
    Diagnostic::new(RULE.id, scope.file(), node, msg).in_handler(model, scope).help(help)
}

/// The initializer of `name`, also when it is destructured (`const { data: user } = ...`).
fn binding_init<'t>(func: Node<'t>, name: &str, src: &str, before: usize) -> Option<Node<'t>> {
    ast::find_binding_init(func, name, src, before).or_else(|| ast::find_destructured_init(func, name, src, before))
}

fn is_lookup(init: Node, src: &str) -> bool {
    let init = ast::unwrap_expr(init);
    if init.kind_name() != "call_expression" {
        return false;
    }
    let path = ast::callee_path_shared(init, src);
    let last = path.last().map(|s| s.trim_end_matches("()").to_ascii_lowercase()).unwrap_or_default();
    let lookup = (last.starts_with("find") && !last.ends_with("orthrow") && last != "findmany")
        || matches!(last.as_str(), "single" | "maybesingle" | "first" | "findbypk" | "findoneby");
    // `items.find((i) => i.id === wanted)` searches data already in hand: a miss means the
    // event is not about this app's object, not that a record is yet to be created.
    let searches_in_memory = ast::arguments(init).first().is_some_and(|a| ast::is_function(*a));
    lookup
        && !searches_in_memory
        && !conditional_claim(init, &last, src)
        && !path.iter().any(|p| guards::is_marker_name(p.trim_end_matches("()")))
}

/// `findOneAndUpdate({ _id, qrEmailSentAt: null }, { $set: { qrEmailSentAt: new Date() } })`:
/// an update that matches only while a field is unset claims the record; null means another
/// delivery claimed it first, not that the record is yet to be created.
fn conditional_claim(call: Node, callee: &str, src: &str) -> bool {
    matches!(callee, "findoneandupdate" | "findandmodify" | "findoneandreplace")
        && ast::arguments(call).first().is_some_and(|filter| {
            filter.kind_name() == "object"
                && ast::named_children(*filter).into_iter().any(|pair| {
                    pair.field("value").is_some_and(|v| {
                        let v = text(v, src);
                        v == "null" || v.contains("$exists") || v.contains("$ne")
                    })
                })
        })
}

fn missing_subject<'t>(cond: Node<'t>, src: &str) -> Option<Node<'t>> {
    let mut c = cond;
    while c.kind_name() == "parenthesized_expression" {
        c = c.named_child(0)?;
    }
    let subject = match c.kind_name() {
        "unary_expression" if c.child(0).is_some_and(|o| text(o, src) == "!") => c.field("argument")?,
        "binary_expression" => {
            let op = text(c.field("operator")?, src);
            let r = text(c.field("right")?, src);
            if !(matches!(op, "===" | "==") && (r == "null" || r == "undefined")) {
                return None;
            }
            c.field("left")?
        }
        _ => return None,
    };
    (subject.kind_name() == "identifier").then_some(subject)
}

/// A table or column name compared without case or underscores: `stripe_customer_id` and
/// `stripeCustomerId` are one column.
fn name_key(name: &str) -> String {
    name.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase()
}

/// A table name compared loosely: `users`, `User` and `user` are one table.
fn table_key(name: &str) -> String {
    let key = name_key(name);
    key.strip_suffix('s').map(str::to_string).unwrap_or(key)
}

/// The table an ORM or query-builder call names: the chain's `from`/`insert` argument, the
/// model of `client.model.op()`, or the model class of `Model.op()`.
fn table_named(call: Node, src: &str) -> Option<String> {
    if let Some(t) = markers::table_of(call, src) {
        return Some(table_key(&t));
    }
    let path = ast::callee_path_shared(call, src);
    (path.len() == 2 && path[0].starts_with(|c: char| c.is_ascii_uppercase()) && !path[0].ends_with("()"))
        .then(|| table_key(&path[0]))
}

/// Where the handler's own deliveries put records: the tables it inserts into, and per table
/// the columns it writes. A record this event stream creates or links (the subscription row
/// `checkout.session.completed` inserts, the `stripeCustomerId` it sets on the user) can be
/// missing because that event is late; a record the application made before any event could
/// exist (the signed-up user, the configured endpoint) cannot, so a miss there means the event
/// is not about this application's data.
#[derive(Default)]
struct WrittenRecords {
    /// Tables rows are inserted into, with where: the scope and the write's byte range.
    created: Vec<(String, Site)>,
    /// Columns set to a value, by table, with where.
    columns: Vec<(String, String, Site)>,
    /// The files of those writes.
    files: Vec<std::sync::Arc<crate::source::SourceFile>>,
}

/// Where a write sits: its scope's index in the handler model and its byte range.
type Site = (usize, std::ops::Range<usize>);

impl WrittenRecords {
    fn of(model: &HandlerModel) -> Self {
        let mut written = WrittenRecords::default();
        for (i, scope) in model.scopes.iter().enumerate() {
            let Some(func) = scope.node() else { continue };
            let src = &scope.file().text;
            for call in ast::calls_in(func, false) {
                let Some(effect) = effects::classify(call, src, false) else { continue };
                if !matches!(effect.kind, EffectKind::DbInsert | EffectKind::DbUpsert | EffectKind::DbUpdate) {
                    continue;
                }
                let Some(table) = table_named(call, src) else { continue };
                let site = (i, call.byte_range());
                if !written.files.iter().any(|f| std::sync::Arc::ptr_eq(f, scope.file())) {
                    written.files.push(scope.file().clone());
                }
                if effect.kind != EffectKind::DbUpdate {
                    written.created.push((table.clone(), site.clone()));
                }
                for column in linked_columns(call, src) {
                    if !QUERY_SHAPE_KEYS.contains(&column.as_str()) {
                        written.columns.push((table.clone(), column, site.clone()));
                    }
                }
            }
        }
        written
    }

    /// Whether some write creates the table's row or sets a column the lookup filters on,
    /// other than those `already_ran` says the delivery made on its way to the miss.
    fn makes(&self, table: &str, filter: &[String], already_ran: &dyn Fn(&Site) -> bool) -> bool {
        self.created.iter().any(|(t, site)| t == table && !already_ran(site))
            || self.columns.iter().any(|(t, c, site)| t == table && filter.contains(c) && !already_ran(site))
    }
}

/// Keys of a query's own shape, never a column: `{ where, data }`, `{ create, update }`, and
/// `id`, which every table has.
const QUERY_SHAPE_KEYS: &[&str] =
    &["id", "where", "data", "create", "update", "select", "include", "set", "values", "and", "or", "not"];

/// The column names a query names: object keys, `eq("col", v)` arguments and `eq(t.col, v)`
/// members, compared without case or underscores.
fn columns_named(call: Node, src: &str) -> Vec<String> {
    let mut out = Vec::new();
    ast::walk(call, &mut |n| {
        match n.kind_name() {
            "pair" => {
                if let Some(k) = n.field("key") {
                    out.push(name_key(&ast::string_value(k, src).unwrap_or_else(|| text(k, src).to_string())));
                }
            }
            "shorthand_property_identifier" => out.push(name_key(text(n, src))),
            "call_expression" => {
                if matches!(ast::callee_name(n, src).as_deref(), Some("eq" | "match" | "where" | "filter"))
                    && let Some(first) = ast::arguments(n).first()
                {
                    if let Some(col) = ast::string_value(*first, src) {
                        out.push(name_key(&col));
                    } else if first.kind_name() == "member_expression"
                        && let Some(prop) = first.field("property")
                    {
                        out.push(name_key(text(prop, src)));
                    }
                }
            }
            _ => {}
        }
        true
    });
    out
}

/// The columns a write gives a value that can link a record: the keys it writes, outside its
/// filter (`where`, `eq(...)`: a row found by a column is not linked by it) and its selection,
/// and not set to `null` (`{ shopifyStoreId: null }` unlinks: no later lookup finds the row by it).
fn linked_columns(call: Node, src: &str) -> Vec<String> {
    let mut out = Vec::new();
    written_pairs(call, src, true, &mut |_, key, value| {
        if !matches!(ast::unwrap_expr(value).kind_name(), "null" | "undefined") {
            out.push(name_key(&key));
        }
    });
    out
}

/// The `key: value` pairs (and shorthand properties, their own value) written under `root`:
/// not inside nested functions, nor under the keys that filter or select rather than write
/// (`where`, `select`, ...), nor, with `skip_filter_calls`, inside filter calls (`eq(...)`).
fn written_pairs<'t>(
    root: Node<'t>,
    src: &str,
    skip_filter_calls: bool,
    found: &mut dyn FnMut(Node<'t>, String, Node<'t>),
) {
    const NOT_WRITTEN: &[&str] = &["where", "select", "include", "orderBy", "returning", "filter"];
    ast::walk(root, &mut |n| {
        if ast::is_function(n) {
            return false;
        }
        match n.kind_name() {
            "pair" => {
                let (Some(k), Some(v)) = (n.field("key"), n.field("value")) else {
                    return true;
                };
                let key = ast::string_value(k, src).unwrap_or_else(|| text(k, src).to_string());
                if NOT_WRITTEN.contains(&key.as_str()) {
                    return false;
                }
                found(n, key, v);
            }
            "shorthand_property_identifier" => found(n, text(n, src).to_string(), n),
            "call_expression"
                if skip_filter_calls
                    && matches!(ast::callee_name(n, src).as_deref(), Some("eq" | "match" | "where" | "filter")) =>
            {
                return false;
            }
            _ => {}
        }
        true
    });
}

/// Whether the record a lookup reads is one the handler's own deliveries create or link: the
/// lookup itself, or (one hop) the queries of a project helper it calls.
fn looks_up_written_record(
    cx: &Context,
    file: &std::sync::Arc<crate::source::SourceFile>,
    init: Node,
    written: &WrittenRecords,
    already_ran: &dyn Fn(&Site) -> bool,
) -> bool {
    let init = ast::unwrap_expr(init);
    if let Some(table) = table_named(init, &file.text) {
        let filter = columns_named(init, &file.text);
        let files: Vec<_> = std::iter::once(file).chain(&written.files).collect();
        return written.makes(&table, &filter, already_ran) && !app_made_the_object(&files, &filter);
    }
    let Some(def) = reach::resolve_call(cx.project, file, init) else { return false };
    let Some(body) = def.node() else { return false };
    let src = &def.file.text;
    let Some(query) = ast::calls_in(body, false)
        .into_iter()
        .find(|c| table_named(*c, src).is_some_and(|t| written.makes(&t, &columns_named(*c, src), &|_| false)))
    else {
        return false;
    };
    // `const owner = event.metadata?.ownerId; if (owner) return owner;` before the query: the
    // event names its record itself, and the query is a fallback for events that do not; a
    // miss there means the event is not about this application's data.
    !returns_parameter_value_before(body, query, src)
        && !app_made_the_object(
            &[file, &def.file].into_iter().chain(&written.files).collect::<Vec<_>>(),
            &columns_named(query, src),
        )
}

/// Whether one of `files` has the provider make the object itself and stores the id it hands
/// back in a column the lookup filters on (`const customer = await stripe.customers.create(...)`,
/// then `update({ data: { stripeCustomerId: customer.id } })`; `const { messageId } = await
/// mailer.send(...)`, then `create({ data: { messageId } })`): the link exists before any event
/// about that object can, so a miss means an object this application did not make.
fn app_made_the_object(files: &[&std::sync::Arc<crate::source::SourceFile>], filter: &[String]) -> bool {
    files.iter().any(|file| {
        let src = &file.text;
        let root = file.root();
        ast::calls_in(root, false).into_iter().any(|call| {
            let path = ast::callee_path_shared(call, src);
            // `customers.create`, `mailer.send`, `deliverEmail`: the call makes the object.
            let made = path.last().is_some_and(|last| {
                crate::model::best_effort::words(last.trim_end_matches("()"))
                    .first()
                    .is_some_and(|w| matches!(w.as_str(), "create" | "send" | "deliver" | "post" | "publish"))
            });
            let pattern = ast::ancestors(call)
                .take_while(|a| !ast::is_function(*a))
                .find(|a| a.kind_name() == "variable_declarator")
                .and_then(|d| d.field("name"));
            let body = ast::enclosing_function(call).and_then(|f| f.field("body"));
            let (true, Some(pattern), Some(body)) = (made, pattern, body) else {
                return false;
            };
            // `customer` → `customer.id`; `{ messageId }` → `messageId`.
            let ids: Vec<String> = match pattern.kind_name() {
                "identifier" => vec![format!("{}.id", text(pattern, src))],
                "object_pattern" => {
                    let mut names = Vec::new();
                    ast::bound_names(pattern, src, &mut names);
                    names.into_iter().filter(|n| n.to_ascii_lowercase().ends_with("id")).collect()
                }
                _ => Vec::new(),
            };
            let mut stored = false;
            written_pairs(body, src, true, &mut |_, key, value| {
                stored |= ids.iter().any(|id| text(value, src) == id) && filter.contains(&name_key(&key));
            });
            stored
        })
    })
}

/// Whether `write` ran on the way to `stmt`, the check that `subject` is missing: it sits in
/// (or is) an earlier statement of a block that also holds `stmt`, that statement never leaves
/// the function, and if it is a branch, the branch is taken on the same miss (`if (!email)
/// { ...link... }`). A write in another event's branch (`if (event.type === "checkout...")`),
/// `case`, or a branch ending in its own `return` did not.
fn precedes_on_path(write: Node, stmt: Node, subject: &str, src: &str) -> bool {
    let func = ast::enclosing_function(stmt);
    let leaves = |a: Node| {
        ["return_statement", "throw_statement"]
            .iter()
            .flat_map(|kind| ast::descendants_of_kind(a, kind))
            .any(|exit| ast::enclosing_function(exit) == func)
    };
    std::iter::once(write).chain(ast::ancestors(write)).any(|a| {
        a.end_byte() <= stmt.start_byte()
            && ast::parent(a).is_some_and(|p| {
                matches!(p.kind_name(), "statement_block" | "program") && ast::ancestors(stmt).any(|s| s == p)
            })
            && !leaves(a)
            && match a.kind_name() {
                "if_statement" => a.field("condition").is_some_and(|c| {
                    ast::descendants_of_kind(c, "identifier").iter().any(|i| text(*i, src) == subject)
                }),
                "switch_statement" => false,
                _ => true,
            }
    })
}

/// Whether `func` returns a value read from one of its parameters before `before` starts.
fn returns_parameter_value_before(func: Node, before: Node, src: &str) -> bool {
    let params = ast::parameter_names(func, src);
    ast::descendants_of_kind(func, "return_statement").into_iter().any(|ret| {
        if ret.start_byte() >= before.start_byte() || ast::enclosing_function(ret) != Some(func) {
            return false;
        }
        let Some(value) = ret.named_child(0).map(ast::unwrap_expr) else { return false };
        let value = if value.kind_name() == "identifier" {
            match ast::find_binding_init(func, text(value, src), src, ret.start_byte()) {
                Some(init) => ast::unwrap_expr(init),
                None => return false,
            }
        } else {
            value
        };
        matches!(value.kind_name(), "member_expression" | "subscript_expression")
            && ast::member_path(value, src).first().is_some_and(|root| params.contains(root))
    })
}

fn dropped(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    // Built only when a handler drops an event on a missing record: most never do.
    let written = std::cell::OnceCell::new();
    let notices = std::cell::OnceCell::new();
    let fw = model.handler.framework;
    let http = fw.is_http();
    let acks_2xx = !http
        || model.scopes.first().and_then(|s| s.node().map(|n| (n, s))).is_some_and(|(n, s)| {
            responses::responses_in(n, &s.file().text, &responses::handler_names(&model.handler), false)
                .iter()
                .any(|r| r.is_2xx())
        });
    for (i, scope) in model.scopes.iter().enumerate() {
        let Some(func) = scope.node() else { continue };
        let src = &scope.file().text;
        let names = if i == 0 { responses::handler_names(&model.handler) } else { Vec::new() };
        for stmt in ast::descendants_of_kind(func, "if_statement") {
            if ast::enclosing_function(stmt) != Some(func) {
                continue;
            }
            let (Some(cond), Some(cons)) = (stmt.field("condition"), stmt.field("consequence")) else {
                continue;
            };
            let Some(subject) = missing_subject(cond, src) else { continue };
            let name = text(subject, src);
            let Some(init) = binding_init(func, name, src, stmt.start_byte()) else { continue };
            if !is_lookup(init, src) {
                continue;
            }
            if !ast::descendants_of_kind(cons, "throw_statement").is_empty() {
                continue;
            }
            let mut resps = responses::responses_in(cons, src, &names, true);
            // h3 / Nest: `if (!user) return;` answers 2xx (a returned value is the answer)
            if i == 0 && matches!(fw, Framework::H3 | Framework::Nest) {
                resps.extend(
                    responses::returned_values(func, src, &names, fw == Framework::Nest)
                        .into_iter()
                        .filter(|r| ast::contains(cons, r.node)),
                );
            }
            let returns: Vec<Node> = if cons.kind_name() == "return_statement" {
                vec![cons]
            } else {
                ast::descendants_of_kind(cons, "return_statement")
                    .into_iter()
                    .filter(|r| ast::enclosing_function(*r) == Some(func))
                    .collect()
            };
            let acked = if i == 0 && http {
                !resps.is_empty() && resps.iter().all(|r| r.is_2xx())
            } else {
                resps.is_empty()
                    && !returns.is_empty()
                    && returns.iter().all(|r| {
                        r.named_child(0)
                            .is_none_or(|v| matches!(text(v, src), "null" | "undefined" | "false" | "void 0"))
                    })
                    && acks_2xx
                    && (http || i > 0 || !returns.is_empty())
            };
            if !acked
                || !looks_up_written_record(
                    cx,
                    scope.file(),
                    init,
                    written.get_or_init(|| WrittenRecords::of(model)),
                    // the delivery's own fallback that links the row it then looks for
                    // (`if (email) update({ data: { sesEmailId } })` before `if (!email) return`)
                    // ran already when the lookup missed
                    &|(j, range): &Site| {
                        *j == i
                            && func
                                .descendant_for_byte_range(range.start, range.end)
                                .is_some_and(|write| precedes_on_path(write, stmt, name, src))
                    },
                )
            {
                continue;
            }
            // A reminder (`trial_will_end`) about a record that does not exist yet has nothing to apply.
            let in_notice = notices
                .get_or_init(|| regions(cx, model, names_notice, false))
                .iter()
                .any(|(j, nodes)| *j == i && nodes.iter().any(|n| ast::contains(*n, stmt)));
            if in_notice {
                continue;
            }
            let node = resps.first().map(|r| r.node).or(returns.first().copied()).unwrap_or(stmt);
            out.push(diag(
                model,
                scope,
                node,
                format!(
                    "the event is acknowledged and dropped when `{name}` does not exist yet: if the event that creates it arrives later (deliveries are not ordered), this one is lost"
                ),
                "answer 5xx / throw so the provider retries later, or create the record from this event",
            ));
        }
    }
}
