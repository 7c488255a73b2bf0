//! order-dependence-assumed

use super::{Context, Diagnostic, FixAvailability, HandlerModel, Rule};
use crate::model::ast::{self, text};
use crate::model::reach::{self, Scope};
use crate::model::responses;
use crate::model::{EffectKind, Framework, effects, guards, markers};
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
  (`stripe.subscriptions.retrieve(id)`).
- A handler that acknowledges an event and drops it because a record it needs does not exist
  yet: `const user = await db.user.findUnique(...); if (!user) return res.json({ ok: true })`
  (or a bare `return` in a function the handler calls, or in a queue consumer), when the
  handler's own deliveries create or link that record (another event's branch inserts into the
  table, or writes the column the lookup filters on). A record the application creates before
  any event can exist (the signed-up user, a configured endpoint) is not reported: a miss there
  means the event is not about this application's data.

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
"#;

pub const RULE: Rule = Rule {
    id: "order-dependence-assumed",
    summary: "state from an out-of-order event is written without a version check (or an early event is dropped): a late delivery overwrites newer state",
    docs: DOCS,
    fix: FixAvailability::None,
    safe_fixes: false,
    preview: true,
    check,
};

static OUT_OF_ORDER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)^["'`][\w.]*(subscription|order|product|customer|price|plan|invoice|payment_method|membership)[\w]*[._/](updated?|deleted?|canceled|cancelled|paused|resumed|changed|past_due|expired|activated)["'`]$"#)
        .unwrap()
});
static REGION_FN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)subscription\w*(updat|delet|cancel|chang|sync|paus|resum)|(updat|sync|upsert|manage)\w*subscription|order\w*updat|(updat|sync)\w*order").unwrap()
});
static STATE_KEY: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(status|state|plan\w*|price\w*|quantity|seats|tier|cancel\w*|current_?period\w*|ends?_?at|renews?_?at|trial_?ends?_?at|subscription_?status|financial_?status|fulfillment_?status|active)$").unwrap()
});
static TIME_WORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)created|updated_?at|occurred_?at|event_?(time|at|created)|version|sequence|last_?event|timestamp")
        .unwrap()
});
static TIME_FILTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(created|updated_?at|occurred_?at|event_?\w*|version|sequence|timestamp)\w*\W{0,6}\{?\s*(lt|lte|gt|gte|\$lt|\$lte|\$gt|\$gte)\s*:").unwrap()
});
static SQL_STATE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\bset\b[^;]*\b(status|plan\w*|price_id|quantity|cancel\w*)\s*=\s*(\$\d|\?|:\w)").unwrap()
});

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        state_writes(cx, model, out);
        dropped(cx, model, out);
    }
}

/// Nodes (per scope index) that handle an out-of-order event.
fn regions<'a>(cx: &Context, model: &'a HandlerModel) -> Vec<(usize, Vec<Node<'a>>)> {
    let mut out: Vec<(usize, Vec<Node>)> = Vec::new();
    let mut whole: Vec<bool> =
        model.scopes.iter().map(|s| s.depth > 0 && REGION_FN.is_match(&s.function.name)).collect();
    for (i, scope) in model.scopes.iter().enumerate() {
        let Some(func) = scope.node() else { continue };
        let src = &scope.file().text;
        let mut nodes = Vec::new();
        ast::walk(func, &mut |n| {
            match n.kind() {
                "switch_case" => {
                    if n.child_by_field_name("value").is_some_and(|v| OUT_OF_ORDER.is_match(text(v, src))) {
                        // Empty cases fall through to the next case with a body.
                        let mut cur = Some(n);
                        while let Some(c) = cur {
                            nodes.push(c);
                            let has_body = ast::named_children(c)
                                .iter()
                                .any(|s| Some(*s) != c.child_by_field_name("value") && s.kind() != "comment");
                            if has_body {
                                break;
                            }
                            cur = c.next_named_sibling();
                        }
                    }
                }
                "if_statement" => {
                    if let Some(cond) = n.child_by_field_name("condition")
                        && ast::descendants_of_kind(cond, "string").iter().any(|s| OUT_OF_ORDER.is_match(text(*s, src)))
                        && !text(cond, src).contains("!==")
                        && let Some(cons) = n.child_by_field_name("consequence")
                    {
                        nodes.push(cons);
                    }
                }
                // A handler map: { "customer.subscription.updated": handleUpdated }
                "pair" => {
                    if n.child_by_field_name("key").is_some_and(|k| OUT_OF_ORDER.is_match(text(k, src)))
                        && let Some(v) = n.child_by_field_name("value")
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
                if node.kind() == "identifier" {
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
        if n.kind() == "binary_expression"
            && n.child_by_field_name("operator").is_some_and(|o| matches!(text(o, src), "<" | ">" | "<=" | ">="))
            && TIME_WORD.is_match(text(n, src))
        {
            found = true;
        }
        if n.kind() == "call_expression" && refetches(n, src) {
            found = true;
        }
        true
    });
    found
}

fn refetches(call: Node, src: &str) -> bool {
    let path = ast::callee_path(call, src);
    let lower: Vec<String> = path.iter().map(|p| p.trim_end_matches("()").to_ascii_lowercase()).collect();
    let Some(last) = lower.last() else { return false };
    let root = lower.first().map(String::as_str).unwrap_or("");
    let db = ["prisma", "db", "tx", "supabase", "knex", "redis", "cache", "repo", "this", "pool", "client"]
        .iter()
        .any(|r| root.contains(r) && !root.contains("stripe"));
    let provider = ["stripe", "paddle", "shopify", "lemon", "polar", "chargebee", "recurly", "braintree", "paypal"]
        .iter()
        .any(|p| lower.iter().any(|s| s.contains(p)));
    (provider && matches!(last.as_str(), "retrieve" | "get" | "fetch" | "getsubscription" | "retrievesubscription"))
        || (!db && lower.len() >= 2 && last == "retrieve")
        || (path.len() == 1 && (last.starts_with("getsubscription") || last.starts_with("fetchsubscription")))
}

/// An update/upsert (Prisma, Drizzle, SQL, Mongo, supabase-js): its label.
fn state_write(call: Node, src: &str) -> Option<String> {
    if let Some(effect) = effects::classify(call, src, false)
        && matches!(effect.kind, EffectKind::DbUpdate | EffectKind::DbUpsert)
    {
        return Some(effect.label);
    }
    // supabase-js chains end in a filter: `from(t).update(v).eq(...)`.
    if call.parent().is_some_and(|p| p.kind() == "member_expression") {
        return None;
    }
    let path = ast::callee_path(call, src);
    let supabase_write = path.iter().any(|p| p == "from()")
        && path.iter().any(|p| matches!(p.trim_end_matches("()"), "update" | "upsert"));
    supabase_write.then(|| path.join("."))
}

fn state_written(call: Node, src: &str) -> bool {
    if let Some(sql) = effects::sql_text(call, &ast::arguments(call), src) {
        return SQL_STATE.is_match(&sql);
    }
    let mut found = false;
    // Data built in a variable first: `const data = { status: sub.status }; upsert([data])`.
    let scope = ast::enclosing_function(call).unwrap_or(call);
    // Every link of the chain: `from(t).update({ status }).eq(...)`.
    let args: Vec<Node> = ast::calls_in(call, false).into_iter().flat_map(ast::arguments).collect();
    let mut roots = args.clone();
    // The data may be built outside a transaction callback: look in the enclosing functions too.
    let scopes: Vec<Node> =
        std::iter::once(scope).chain(ast::ancestors(scope).filter(|a| ast::is_function(*a))).collect();
    for arg in args {
        for id in ast::descendants_of_kind(arg, "identifier") {
            // `upsert([data])`, `{ ...data }`, or `{ update: data }`.
            let value_of_pair = id
                .parent()
                .is_some_and(|p| p.kind() == "pair" && p.child_by_field_name("value").is_some_and(|v| v == id));
            if (value_of_pair
                || id.parent().is_some_and(|p| matches!(p.kind(), "arguments" | "array" | "spread_element")))
                && let Some(init) =
                    scopes.iter().find_map(|f| ast::find_binding_init(*f, text(id, src), src, call.start_byte()))
                && init.kind() == "object"
            {
                roots.push(init);
            }
        }
    }
    for arg in roots {
        ast::walk(arg, &mut |n| {
            if found {
                return false;
            }
            if n.kind() == "pair"
                && let (Some(k), Some(v)) = (n.child_by_field_name("key"), n.child_by_field_name("value"))
            {
                let key = ast::string_value(k, src).unwrap_or_else(|| text(k, src).to_string());
                let literal = matches!(
                    v.kind(),
                    "string" | "number" | "true" | "false" | "null" | "undefined" | "object" | "new_expression"
                ) || (v.kind() == "template_string" && ast::string_value(v, src).is_some())
                    || is_named_constant(v, src);
                if STATE_KEY.is_match(&key) && !literal {
                    found = true;
                }
            }
            if n.kind() == "shorthand_property_identifier" && STATE_KEY.is_match(text(n, src)) {
                found = true;
            }
            true
        });
    }
    // `.set({ status })` in a Drizzle/Knex chain
    found
        || ast::calls_in(call, false).into_iter().any(|c| {
            c != call
                && ast::callee_name(c, src).as_deref() == Some("set")
                && ast::arguments(c).first().is_some_and(|a| text(*a, src).contains("status"))
        })
}

/// A member of an enum or constant object (`SubscriptionStatus.CANCELED`, `Plan.Free`): the
/// handler decides the value, it is not a snapshot carried by the event.
fn is_named_constant(value: Node, src: &str) -> bool {
    let value = ast::unwrap_expr(value);
    if value.kind() != "member_expression" {
        return false;
    }
    let path = ast::member_path(value, src);
    path.len() == 2
        && path.iter().all(|p| !p.ends_with("()"))
        && path[0].starts_with(|c: char| c.is_ascii_uppercase())
        && path[1].starts_with(|c: char| c.is_ascii_uppercase())
}

fn state_writes(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    let regions = regions(cx, model);
    if regions.is_empty() {
        return;
    }
    // A re-fetch or a version check anywhere on the handler's own path covers its regions.
    let root_ordered = model.scopes.first().and_then(|s| s.node().map(|n| ordered(n, &s.file().text))).unwrap_or(false);
    if root_ordered {
        return;
    }
    let mut seen = Vec::new();
    for (i, nodes) in regions {
        let scope = &model.scopes[i];
        let Some(func) = scope.node() else { continue };
        let file = scope.file();
        let src = &file.text;
        if ordered(func, src) {
            continue;
        }
        for node in nodes {
            for call in ast::calls_in(node, false) {
                if seen.contains(&(i, call.start_byte())) {
                    continue;
                }
                let Some(label) = state_write(call, src) else { continue };
                if !state_written(call, src) {
                    continue;
                }
                if guards::is_marker_insert(call, src) {
                    continue;
                }
                seen.push((i, call.start_byte()));
                out.push(diag(
                    model,
                    scope,
                    call,
                    format!(
                        "`{label}` writes state taken from an event that can arrive out of order, with no check of the event's time/version and no re-fetch: a late or retried older event overwrites newer state"
                    ),
                    "compare the event's time/version with the stored one in the write's filter, or re-fetch the object from the provider before writing",
                ));
            }
        }
    }
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
    if init.kind() != "call_expression" {
        return false;
    }
    let path = ast::callee_path(init, src);
    let last = path.last().map(|s| s.trim_end_matches("()").to_ascii_lowercase()).unwrap_or_default();
    let lookup = (last.starts_with("find") && !last.ends_with("orthrow") && last != "findmany")
        || matches!(last.as_str(), "single" | "maybesingle" | "first" | "findbypk" | "findoneby");
    // `items.find((i) => i.id === wanted)` searches data already in hand: a miss means the
    // event is not about this app's object, not that a record is yet to be created.
    let searches_in_memory = ast::arguments(init).first().is_some_and(|a| ast::is_function(*a));
    lookup && !searches_in_memory && !path.iter().any(|p| guards::is_marker_name(p.trim_end_matches("()")))
}

fn missing_subject<'t>(cond: Node<'t>, src: &str) -> Option<Node<'t>> {
    let mut c = cond;
    while c.kind() == "parenthesized_expression" {
        c = c.named_child(0)?;
    }
    let subject = match c.kind() {
        "unary_expression" if c.child(0).is_some_and(|o| text(o, src) == "!") => c.child_by_field_name("argument")?,
        "binary_expression" => {
            let op = text(c.child_by_field_name("operator")?, src);
            let r = text(c.child_by_field_name("right")?, src);
            if !(matches!(op, "===" | "==") && (r == "null" || r == "undefined")) {
                return None;
            }
            c.child_by_field_name("left")?
        }
        _ => return None,
    };
    (subject.kind() == "identifier").then_some(subject)
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
    let path = ast::callee_path(call, src);
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
    created: Vec<String>,
    columns: Vec<(String, String)>,
}

impl WrittenRecords {
    fn of(model: &HandlerModel) -> Self {
        let mut written = WrittenRecords::default();
        for scope in &model.scopes {
            let Some(func) = scope.node() else { continue };
            let src = &scope.file().text;
            for call in ast::calls_in(func, false) {
                let Some(effect) = effects::classify(call, src, false) else { continue };
                if !matches!(effect.kind, EffectKind::DbInsert | EffectKind::DbUpsert | EffectKind::DbUpdate) {
                    continue;
                }
                let Some(table) = table_named(call, src) else { continue };
                if effect.kind != EffectKind::DbUpdate && !written.created.contains(&table) {
                    written.created.push(table.clone());
                }
                for column in columns_named(call, src) {
                    if !QUERY_SHAPE_KEYS.contains(&column.as_str()) {
                        written.columns.push((table.clone(), column));
                    }
                }
            }
        }
        written
    }

    fn makes(&self, table: &str, filter: &[String]) -> bool {
        self.created.iter().any(|t| t == table) || self.columns.iter().any(|(t, c)| t == table && filter.contains(c))
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
        match n.kind() {
            "pair" => {
                if let Some(k) = n.child_by_field_name("key") {
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
                    } else if first.kind() == "member_expression"
                        && let Some(prop) = first.child_by_field_name("property")
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

/// Whether the record a lookup reads is one the handler's own deliveries create or link: the
/// lookup itself, or (one hop) the queries of a project helper it calls.
fn looks_up_written_record(
    cx: &Context,
    file: &std::sync::Arc<crate::source::SourceFile>,
    init: Node,
    written: &WrittenRecords,
) -> bool {
    let init = ast::unwrap_expr(init);
    if let Some(table) = table_named(init, &file.text) {
        return written.makes(&table, &columns_named(init, &file.text));
    }
    let Some(def) = reach::resolve_call(cx.project, file, init) else { return false };
    let Some(body) = def.node() else { return false };
    let src = &def.file.text;
    ast::calls_in(body, false)
        .into_iter()
        .any(|c| table_named(c, src).is_some_and(|t| written.makes(&t, &columns_named(c, src))))
}

fn dropped(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    // Built only when a handler drops an event on a missing record: most never do.
    let written = std::cell::OnceCell::new();
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
            let (Some(cond), Some(cons)) =
                (stmt.child_by_field_name("condition"), stmt.child_by_field_name("consequence"))
            else {
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
            let returns: Vec<Node> = if cons.kind() == "return_statement" {
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
                || !looks_up_written_record(cx, scope.file(), init, written.get_or_init(|| WrittenRecords::of(model)))
            {
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
