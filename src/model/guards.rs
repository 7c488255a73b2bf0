//! What protects a piece of handler code: a guard `run` callback, a transaction that also
//! writes the claim, or a plain transaction. Also recognises the claims and processed-event
//! markers that hand-written dedupe uses.

use super::ast::{self, text};
use super::effects::{self, EffectKind};
use crate::syntax::ast::KindName;
use serde::Serialize;
use tree_sitter::Node;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GuardKind {
    /// Inside `guard.run(key, async (tx) => ...)` (or an idempotency library's equivalent).
    Guard,
    /// Inside a transaction that also writes a claim (processed-event insert).
    ClaimTransaction,
    /// Inside a transaction without a claim.
    Transaction,
}

impl GuardKind {
    /// Whether the work here commits once per event (guard or claim transaction).
    pub fn dedupes(self) -> bool {
        matches!(self, GuardKind::Guard | GuardKind::ClaimTransaction)
    }
}

/// The kind of call that opens a callback context, if `call` is one.
pub fn guard_call_kind(call: Node, src: &str) -> Option<GuardKind> {
    let path = ast::callee_path_shared(call, src);
    let lower: Vec<String> = path.iter().map(|s| s.trim_end_matches("()").to_ascii_lowercase()).collect();
    let last = lower.last()?.as_str();
    let is_guard_object = lower.iter().any(|s| s.contains("guard") || s.contains("idempot") || s.contains("dedup"));
    if (last == "run" || last == "once" || last == "execute" || last == "process") && is_guard_object {
        return Some(GuardKind::Guard);
    }
    // AWS Lambda Powertools `makeIdempotent(fn, { persistenceStore })`: the function runs once
    // per payload key, recorded in-progress then completed by a conditional write.
    if last == "makeidempotent" {
        return Some(GuardKind::Guard);
    }
    // Inngest `step.run(id, fn)`: a step's result is memoised, so a retried function does not
    // repeat a step that completed, and duplicate events are dropped by event id.
    if last == "run" && lower.len() >= 2 && lower[lower.len() - 2] == "step" {
        return Some(GuardKind::Guard);
    }
    if matches!(last, "$transaction" | "transaction" | "withtransaction" | "begintransaction" | "tx")
        || (last == "execute" && lower.iter().any(|s| s == "transaction"))
    {
        let callback = ast::arguments(call).into_iter().find(|a| ast::is_function(*a));
        let claims = callback.is_some_and(|cb| contains_claim(cb, src));
        return Some(if claims { GuardKind::ClaimTransaction } else { GuardKind::Transaction });
    }
    None
}

/// The nearest guard or transaction callback around `node`, or a manual pg transaction
/// (`client.query('BEGIN')` earlier in the same function, on a client that is not a pool).
pub fn guard_at(node: Node, src: &str) -> Option<GuardKind> {
    for anc in ast::ancestors(node) {
        if ast::is_function(anc)
            && let Some(args) = ast::parent(anc).filter(|p| p.kind_name() == "arguments")
            && let Some(call) = ast::parent(args).filter(|c| c.kind_name() == "call_expression")
            && let Some(kind) = guard_call_kind(call, src)
        {
            return Some(kind);
        }
    }
    let func = ast::enclosing_function(node)?;
    // Manual transactions are rare: skip the scan unless the function could open one.
    let body = ast::text(func, src);
    if !(body.contains("BEGIN")
        || body.contains("begin")
        || body.contains("START TRANSACTION")
        || body.contains("start transaction"))
    {
        return None;
    }
    let mut begun = None;
    for call in ast::calls_in(func, true) {
        if call.start_byte() >= node.start_byte() {
            break;
        }
        let path = ast::callee_path_shared(call, src);
        let sql = effects::sql_text(call, &ast::arguments(call), src).unwrap_or_default().to_ascii_uppercase();
        let on_pool = path.first().is_some_and(|r| r.to_ascii_lowercase().contains("pool"));
        let stmt = sql.trim_start_matches(['`', '"', '\'']).trim_start();
        if (stmt.starts_with("BEGIN") || stmt.starts_with("START TRANSACTION")) && !on_pool {
            begun = Some(GuardKind::Transaction);
        } else if (stmt.starts_with("COMMIT") || stmt.starts_with("ROLLBACK")) && !in_exit_branch(call, func) {
            begun = None;
        } else if begun.is_some() && is_claim(call, src) {
            begun = Some(GuardKind::ClaimTransaction);
        }
    }
    begun
}

/// A ROLLBACK in a `catch` or in an early-exit branch (`if (dup) { ROLLBACK; return }`) does
/// not end the transaction for the code after that branch.
fn in_exit_branch(call: Node, func: Node) -> bool {
    ast::ancestors(call).take_while(|a| a.id() != func.id()).any(|a| {
        a.kind_name() == "catch_clause"
            || (a.kind_name() == "statement_block"
                && ast::parent(a).is_some_and(|p| !ast::is_function(p))
                && a.named_children(&mut a.walk())
                    .filter(|c| c.kind_name() != "comment")
                    .last()
                    .is_some_and(|l| matches!(l.kind_name(), "return_statement" | "throw_statement")))
    })
}

/// Names of tables/models that hold processed-event markers.
pub fn is_marker_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase().replace(['_', '-'], "");
    // An injected TypeORM / Mongoose handle names its table: `eventRepo`, `processedEventsRepository`
    let lower = ["repository", "repo"]
        .iter()
        .find_map(|s| lower.strip_suffix(s).filter(|t| !t.is_empty()))
        .map(str::to_string)
        .unwrap_or(lower);
    [
        "processed",
        "handled",
        "seen",
        "dedup",
        "idempot",
        "inbox",
        "webhookevent",
        "eventlog",
        "receivedevent",
        "deliveries",
        "delivery",
    ]
    .iter()
    .any(|m| lower.contains(m))
        || lower.ends_with("events")
        || lower.ends_with("event")
}

/// A write that records "this event was processed": an insert into a marker table/model, or a
/// Redis `SET ... NX`.
pub fn is_claim(call: Node, src: &str) -> bool {
    is_marker_insert(call, src) || is_set_nx(call, src)
}

pub fn is_marker_insert(call: Node, src: &str) -> bool {
    inserts_into_table_named(call, src, is_marker_name)
}

/// An insert into a table whose name says it records processed or deduplicated events
/// (`processed_events`, `WebhookDedup`, `idempotency_keys`), not only that it holds events or
/// deliveries (`events`, `webhook_delivery_attempts`, which are as often logs and outboxes).
pub fn is_processed_marker_insert(call: Node, src: &str) -> bool {
    inserts_into_table_named(call, src, is_processed_marker_name)
}

/// Marker-table words strong enough on their own (without the event key in the call).
pub fn is_processed_marker_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase().replace(['_', '-'], "");
    ["processed", "handled", "dedup", "idempot", "inbox", "receivedevent", "seenevent"]
        .iter()
        .any(|m| lower.contains(m))
}

fn inserts_into_table_named(call: Node, src: &str, named: impl Fn(&str) -> bool) -> bool {
    let Some(effect) = effects::classify(call, src, true) else {
        return false;
    };
    if !matches!(effect.kind, EffectKind::DbInsert | EffectKind::DbUpsert) {
        return false;
    }
    let t = text(call, src);
    let path = ast::callee_path_shared(call, src);
    let model_named = path.iter().any(|p| named(p.trim_end_matches("()")));
    let sql_named = crate::regex!(r"(?i)insert\s+into\s+[`\x22]?(\w+)").captures(t).is_some_and(|c| named(&c[1]));
    let drizzle_named = crate::regex!(r"insert\(\s*(\w+)").captures(t).is_some_and(|c| named(&c[1]));
    // supabase-js: `supabase.from("processed_events").insert(...)`.
    let supabase_named = crate::regex!(r#"\bfrom\(\s*['"`](\w+)['"`]\s*\)"#).captures(t).is_some_and(|c| named(&c[1]));
    model_named || sql_named || drizzle_named || supabase_named
}

/// `redis.set(key, v, 'NX', ...)`, `set(k, v, { NX: true })`, `setnx`, v5 `condition: 'NX'`,
/// on a key that can tell events apart: the same constant key for every event
/// (`set(BATCH_LOCK_KEY, "1", "PX", 30000, "NX")`) is a mutex around a batch, not a claim.
pub fn is_set_nx(call: Node, src: &str) -> bool {
    is_conditional_set(call, src)
        && !ast::arguments(call).first().is_some_and(|k| constant_key(*k, src))
        && !caches_data(call, src)
}

/// A key-value write (`set`, `setnx`, `setex`) whose value is data the code computed,
/// serialised (`JSON.stringify(result)`, directly or through a variable): a cache of that data,
/// not a marker or a claim, whose value is a flag, a state or a small record written in place
/// (`JSON.stringify({ status: "processing" })`).
pub fn caches_data(call: Node, src: &str) -> bool {
    let Some(name) = ast::callee_name(call, src).map(|n| n.to_ascii_lowercase()) else { return false };
    let at = match name.as_str() {
        "set" | "setnx" => 1,
        "setex" => 2,
        _ => return false,
    };
    let Some(value) = ast::arguments(call).get(at).map(|v| ast::unwrap_expr(*v)) else { return false };
    let value = match value.kind_name() {
        "identifier" => ast::enclosing_function(call)
            .and_then(|f| ast::find_binding_init(f, text(value, src), src, call.start_byte()))
            .map(ast::unwrap_expr)
            .unwrap_or(value),
        _ => value,
    };
    value.kind_name() == "call_expression"
        && ast::callee_path(value, src).join(".") == "JSON.stringify"
        && ast::arguments(value).first().is_some_and(|a| ast::unwrap_expr(*a).kind_name() != "object")
}

/// The key is the same for every event: a literal without substitutions, or a name bound
/// to one (a `const` in the file, or an imported `SCREAMING_CASE` constant).
fn constant_key(key: Node, src: &str) -> bool {
    let key = ast::unwrap_expr(key);
    if ast::string_value(key, src).is_some() {
        return true;
    }
    if key.kind_name() != "identifier" {
        return false;
    }
    let name = text(key, src);
    let scope = ast::root_above(key).unwrap_or(key);
    match ast::find_binding_init(scope, name, src, key.start_byte()) {
        Some(init) => ast::string_value(ast::unwrap_expr(init), src).is_some(),
        None => name.len() > 1 && name.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'),
    }
}

fn is_conditional_set(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    let Some(last) = path.last().map(|s| s.to_ascii_lowercase()) else {
        return false;
    };
    if last == "setnx" {
        return true;
    }
    if last != "set" || path.len() < 2 {
        return false;
    }
    ast::arguments(call).iter().skip(2).any(|a| {
        let t = text(*a, src);
        t.contains("NX") || t.contains("nx")
    })
}

/// Whether a subtree writes a claim.
pub fn contains_claim(node: Node, src: &str) -> bool {
    ast::calls_in(node, false).into_iter().any(|c| is_claim(c, src))
}
