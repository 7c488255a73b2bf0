//! Hand-written dedupe: reads and writes of processed-event markers (a processed-events
//! table, a Redis key), the work a handler does around them, and the dedupe pattern a
//! function follows (check-then-insert, effect-before-record, record-before-effect).
//! The guard rules share this so that one handler is reported by the most specific rule.

use super::ast::{self, text};
use super::effects;
use super::guards;
use super::providers::{EventKey, Provider};
use super::reach::{self, Scope};
use super::unique_writes;
use crate::project::Project;
use crate::source::{SourceFile, Span};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::collections::HashSet;
use std::sync::Arc;
use tree_sitter::Node;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerOp {
    /// Reads the marker: `findUnique`, `exists`, `GET`, `SISMEMBER`, `SELECT`.
    Check,
    /// Writes the marker atomically and learns whether it was new: `SET NX`, an insert whose
    /// unique violation is caught, `ON CONFLICT DO NOTHING` with the result read.
    Claim,
    /// Writes the marker without learning anything: a plain insert, `SET`, `SADD`.
    Write,
    /// Deletes the marker (releases a lease).
    Release,
}

#[derive(Clone, Copy, Debug)]
pub struct Marker<'t> {
    pub op: MarkerOp,
    pub call: Node<'t>,
    /// A Redis key with an expiry (`EX`/`PX`).
    pub lease: bool,
}

/// The expressions inside the key's `${...}` substitutions, normalised.
fn key_exprs(key: &EventKey) -> Vec<String> {
    let re = crate::regex!(r"\$\{([^}]*)\}");
    re.captures_iter(&key.template).map(|c| normalise(&c[1])).filter(|s| !s.is_empty()).collect()
}

fn normalise(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).map(|c| if c == '\'' || c == '`' { '"' } else { c }).collect()
}

const KEYISH: &[&str] = &[
    "eventid",
    "event.id",
    "evt.id",
    "deliveryid",
    "messageid",
    "webhookid",
    "idempotencykey",
    "dedupekey",
    "dedupkey",
];

/// Whether `node` uses the event key: the key expression itself, a variable initialised from
/// it, the key's header name, or a conventionally named key variable.
pub fn mentions_key(node: Node, src: &str, func: Node, key: Option<&EventKey>) -> bool {
    let t = normalise(text(node, src));
    let lower = t.to_ascii_lowercase();
    if KEYISH.iter().any(|k| lower.contains(k)) {
        return true;
    }
    let Some(key) = key else { return false };
    let exprs = key_exprs(key);
    if exprs.iter().any(|e| t.contains(e.as_str())) {
        return true;
    }
    if key.provider.key_header().is_some_and(|h| lower.contains(h)) {
        return true;
    }
    // One hop: `const id = event.id; ... where: { id }`.
    let mut found = false;
    ast::walk(node, &mut |n| {
        if found {
            return false;
        }
        if matches!(n.kind_name(), "identifier" | "shorthand_property_identifier")
            && let Some(init) = ast::find_binding_init(func, text(n, src), src, node.start_byte())
        {
            let it = normalise(text(init, src));
            if exprs.iter().any(|e| it.contains(e.as_str())) {
                found = true;
            }
        }
        true
    });
    found
}

fn is_kv_root(lower: &[String]) -> bool {
    lower.iter().take(lower.len().saturating_sub(1)).any(|s| {
        s.contains("redis") || s == "kv" || s.contains("cache") || s.contains("upstash") || s.contains("valkey")
    })
}

/// Classifies one call as a marker operation.
pub fn classify<'t>(call: Node<'t>, src: &str, func: Node, key: Option<&EventKey>) -> Option<Marker<'t>> {
    let path = ast::callee_path_shared(call, src);
    let lower: Vec<String> = path.iter().map(|s| s.trim_end_matches("()").to_ascii_lowercase()).collect();
    let last = lower.last()?.clone();
    let marker = |op, lease| Some(Marker { op, call, lease });
    let args = ast::arguments(call);
    // The literal parts of the key argument: `processed:${id}` names a marker, `user:${event.x}` does not.
    let first_text = args
        .first()
        .map(|a| {
            let t = text(*a, src);
            crate::regex!(r"\$\{[^}]*\}").replace_all(t, "").to_ascii_lowercase()
        })
        .unwrap_or_default();
    let first_mentions = || {
        args.first().is_some_and(|a| mentions_key(*a, src, func, key))
            || ["processed", "dedup", "idempot", "webhook", "evt", "event", "seen", "handled", "delivery"]
                .iter()
                .any(|w| first_text.contains(w))
    };
    // Redis and other key-value stores.
    if is_kv_root(&lower) || last == "setnx" {
        if guards::caches_data(call, src) {
            return None;
        }
        let lease_text = text(call, src);
        let lease = lease_text.contains("EX") || lease_text.contains("PX") || lease_text.contains("expiration");
        return match last.as_str() {
            "set" | "setnx" | "setex" if guards::is_set_nx(call, src) => marker(MarkerOp::Claim, lease),
            "set" | "setex" | "hset" if first_mentions() => marker(MarkerOp::Write, lease || last == "setex"),
            "sadd" if first_mentions() || args.iter().any(|a| mentions_key(*a, src, func, key)) => {
                // `if (await redis.sadd(...) === 0) return` is an atomic claim.
                let used = ast::ancestors(call)
                    .take_while(|a| !ast::is_function(*a) && a.kind_name() != "expression_statement")
                    .any(|a| matches!(a.kind_name(), "variable_declarator" | "if_statement" | "binary_expression"));
                marker(if used { MarkerOp::Claim } else { MarkerOp::Write }, false)
            }
            "get" | "exists" | "sismember" | "hexists" | "hget" | "smismember" | "getdel"
                if first_mentions() || args.iter().any(|a| mentions_key(*a, src, func, key)) =>
            {
                marker(MarkerOp::Check, false)
            }
            "del" | "unlink" | "hdel" | "srem" if first_mentions() => marker(MarkerOp::Release, false),
            _ => None,
        };
    }
    if orm_claim_columns(&last, &args, src).is_some_and(|c| !c.is_empty())
        && super::stmts::result_tested_then_leaves(call, src)
    {
        return marker(MarkerOp::Claim, false);
    }
    let call_text = text(call, src);
    // SQL through a driver.
    if let Some(sql) = effects::sql_text(call, &args, src) {
        if !sql_claim_columns(&sql).is_empty() && super::stmts::result_tested_then_leaves(call, src) {
            return marker(MarkerOp::Claim, false);
        }
        let upper = sql.to_ascii_uppercase();
        let table = crate::regex!(r"(?i)\b(?:from|into|update)\s+[`\x22]?(\w+)")
            .captures(&sql)
            .map(|c| c[1].to_string())
            .unwrap_or_default();
        if !is_marker_table(&table, call, src, func, key) {
            let inserts = upper.trim_start_matches(['`', '"', '\'']).trim_start().starts_with("INSERT");
            let conflict_ignored =
                crate::regex!(r"(?i)\bON\s+CONFLICT\b[^;]*\bDO\s+NOTHING\b|\bINSERT\s+IGNORE\b").is_match(&sql);
            let claims = claims_by_violation(call, src)
                || (conflict_ignored && super::stmts::result_tested_then_leaves(call, src));
            return (inserts && claims).then_some(Marker { op: MarkerOp::Claim, call, lease: false });
        }
        let stmt = upper.trim_start_matches(['`', '"', '\'']).trim_start();
        return if stmt.starts_with("SELECT") {
            marker(MarkerOp::Check, false)
        } else if stmt.starts_with("INSERT") {
            marker(insert_op(call, src, upper.contains("ON CONFLICT") || upper.contains("INSERT IGNORE")), false)
        } else if stmt.starts_with("DELETE") {
            marker(MarkerOp::Release, false)
        } else {
            None
        };
    }
    if let Some(found) = supabase_chain(call, &path, src, func, key) {
        return found;
    }
    // Drizzle: db.select().from(t), db.insert(t), db.delete(t).
    let drizzle_table = |method: &str| {
        crate::regex!(r"\.(\w+)\(\s*(\w+)").captures_iter(call_text).find(|c| &c[1] == method).map(|c| c[2].to_string())
    };
    if lower.iter().any(|s| s == "from") && lower.iter().any(|s| s == "select") {
        let table = drizzle_table("from")?;
        return is_marker_table(&table, call, src, func, key).then_some(Marker {
            op: MarkerOp::Check,
            call,
            lease: false,
        });
    }
    if lower.first().is_some_and(|_| path.iter().any(|p| p == "insert()")) {
        let table = drizzle_table("insert")?;
        let handled = call_text.contains("onConflictDoNothing") || call_text.contains(".ignore()");
        if !is_marker_table(&table, call, src, func, key) {
            return (claims_by_violation(call, src) || (handled && super::stmts::result_tested_then_leaves(call, src)))
                .then_some(Marker { op: MarkerOp::Claim, call, lease: false });
        }
        return Some(Marker { op: insert_op(call, src, handled), call, lease: false });
    }
    // Kysely: db.insertInto("t").values(v).onConflict((oc) => oc.column("id").doNothing()).execute()
    if path.iter().any(|p| p == "insertInto()") && is_outermost_link(call) {
        let table = crate::regex!(r#"\.insertInto\(\s*['"`](\w+)"#).captures(call_text)?[1].to_string();
        let handled = call_text.contains("doNothing()") || call_text.contains(".ignore()");
        if !is_marker_table(&table, call, src, func, key) {
            return (claims_by_violation(call, src) || (handled && super::stmts::result_tested_then_leaves(call, src)))
                .then_some(Marker { op: MarkerOp::Claim, call, lease: false });
        }
        return Some(Marker { op: insert_op(call, src, handled), call, lease: false });
    }
    if path.iter().any(|p| p == "delete()") {
        let table = drizzle_table("delete")?;
        return is_marker_table(&table, call, src, func, key).then_some(Marker {
            op: MarkerOp::Release,
            call,
            lease: false,
        });
    }
    // ORM model calls: prisma.processedEvent.create, ProcessedEvent.findOne, repo.insert.
    if path.len() < 2 || trigger_dev_key(&lower, src) {
        return None;
    }
    // A provider's API named like a table (Stripe `stripe.billing.meterEvents.create(...)`): the
    // call is the effect, not a record of it.
    if effects::classify(call, src, false)
        .is_some_and(|e| e.kind.is_external() && e.kind != effects::EffectKind::Possible)
    {
        return None;
    }
    let mut model = path[path.len() - 2].trim_end_matches("()").to_string();
    if path[path.len() - 2].ends_with("()") {
        // Knex: knex("processed_events").insert(...) names the table in the inner call.
        let inner =
            call.field("function").and_then(|f| f.field("object")).filter(|o| o.kind_name() == "call_expression");
        if let Some(table) = inner.and_then(|i| ast::arguments(i).first().and_then(|a| ast::string_value(*a, src))) {
            model = table;
        }
    }
    if !is_marker_table(&model, call, src, func, key) {
        let inserts = matches!(last.as_str(), "create" | "insert" | "insertone" | "save");
        return (inserts && claims_by_violation(call, src)).then_some(Marker {
            op: MarkerOp::Claim,
            call,
            lease: false,
        });
    }
    let op = match last.as_str() {
        // `findUniqueOrThrow` asserts the row exists: it reads data, while a dedupe check
        // expects a miss for every new event.
        "findunique" | "findfirst" | "findone" | "findbyid" | "findbypk" | "count" | "exists" | "findoneby" => {
            MarkerOp::Check
        }
        "create" | "insert" | "insertone" | "createmany" | "save" => {
            let handled = call_text.contains("skipDuplicates") || call_text.contains("orIgnore");
            insert_op(call, src, handled)
        }
        "upsert" => MarkerOp::Write,
        "delete" | "deletemany" | "destroy" | "deleteone" | "remove" => MarkerOp::Release,
        _ => return None,
    };
    marker(op, false)
}

/// A chain whose `update({...})` sets only attempt bookkeeping (`attempt_count`, `retries`,
/// `last_attempt_at`): the row's completion is written elsewhere.
fn counts_attempts_only(chain: Node, src: &str) -> bool {
    let mut link = Some(chain);
    while let Some(call) = link.filter(|c| c.kind_name() == "call_expression") {
        if ast::callee_name(call, src).as_deref() == Some("update") {
            let Some(values) = ast::arguments(call).first().copied().filter(|a| a.kind_name() == "object") else {
                return false;
            };
            let keys: Vec<&str> = ast::named_children(values)
                .into_iter()
                .filter(|p| p.kind_name() != "comment")
                .map(|p| p.field("key").map_or_else(|| text(p, src), |k| text(k, src)))
                .collect();
            return !keys.is_empty()
                && keys.iter().all(|k| crate::regex!(r"(?i)attempt|retr(?:y|ies)|tries").is_match(k));
        }
        link = call.field("function").and_then(|f| f.field("object")).map(ast::unwrap_expr);
    }
    false
}

/// Trigger.dev's `idempotencyKeys.create(key)`: it derives a key (a hash of the key and the
/// run's scope) to hand to `trigger`, and stores nothing, so it neither reads nor writes a marker.
fn trigger_dev_key(lower: &[String], src: &str) -> bool {
    matches!(lower, [.., receiver, method] if receiver == "idempotencykeys" && method == "create")
        && src.contains("@trigger.dev/sdk")
}

/// supabase-js and PostgREST chains: `supabase.from("webhook_events").select().eq(...)`,
/// `.insert({...})`, `.upsert(...)`, `.update({ processed: true }).eq(...)`, `.delete().eq(...)`.
/// Only the outermost call of a chain answers (`Some(None)` for a chain on another table,
/// `None` when the call is no such chain), so each statement counts once.
fn supabase_chain<'t>(
    call: Node<'t>,
    path: &[String],
    src: &str,
    func: Node,
    key: Option<&EventKey>,
) -> Option<Option<Marker<'t>>> {
    let from_at = path.iter().position(|p| p == "from()")?;
    let verb = path[from_at + 1..]
        .iter()
        .map(|p| p.trim_end_matches("()"))
        .find(|p| matches!(*p, "select" | "insert" | "upsert" | "update" | "delete"))?;
    if ast::parent(call).is_some_and(|p| p.kind_name() == "member_expression") {
        return Some(None);
    }
    // The `from("table")` call inside the chain.
    let mut inner = call;
    let table = loop {
        let object = inner.field("function").and_then(|f| f.field("object"))?;
        let object = ast::unwrap_expr(object);
        if object.kind_name() != "call_expression" {
            return None;
        }
        if ast::callee_name(object, src).as_deref() == Some("from") {
            break ast::arguments(object).first().and_then(|a| ast::string_value(*a, src))?;
        }
        inner = object;
    };
    if !is_marker_table(&table, call, src, func, key) {
        let claim = verb == "insert" && claims_by_violation(call, src);
        return Some(claim.then_some(Marker { op: MarkerOp::Claim, call, lease: false }));
    }
    // `.update({ attempt_count: n })`: bookkeeping of tries, which says nothing about whether
    // the work was done.
    if verb == "update" && counts_attempts_only(call, src) {
        return Some(None);
    }
    let call_text = text(call, src);
    let op = match verb {
        "select" => MarkerOp::Check,
        "insert" => {
            // `const { error } = await supabase.from(t).insert(...); if (error?.code === "23505")`:
            // the unique violation is read back, so the insert is the claim.
            let after = &src[call.end_byte()..func.end_byte().max(call.end_byte())];
            let reads_violation = ast::ancestors(call)
                .take_while(|a| !ast::is_function(*a) && a.kind_name() != "expression_statement")
                .any(|a| a.kind_name() == "variable_declarator")
                && crate::regex!(r#"23505|duplicate|unique"#)
                    .is_match(after.get(..after.len().min(600)).unwrap_or(after));
            if reads_violation { MarkerOp::Claim } else { insert_op(call, src, false) }
        }
        "upsert" => insert_op(call, src, call_text.contains("ignoreDuplicates")),
        "update" => MarkerOp::Write,
        _ => MarkerOp::Release,
    };
    Some(Some(Marker { op, call, lease: false }))
}

fn is_marker_table(name: &str, call: Node, src: &str, func: Node, key: Option<&EventKey>) -> bool {
    if guards::is_processed_marker_name(name) {
        return true;
    }
    if !guards::is_marker_name(name) {
        return false;
    }
    // A bare `event` table is often the app's own (tracked events, a calendar): it holds
    // deliveries only where a column names the event id, or the query uses the delivery's own
    // key, not a value merely called `eventId`.
    if matches!(name.to_ascii_lowercase().as_str(), "event" | "events") {
        let t = text(call, src);
        return crate::regex!(r"(?i)\bevent_?id['\x22]?\s*:").is_match(t)
            || key.is_some_and(|k| key_exprs(k).iter().any(|e| normalise(t).contains(e.as_str())));
    }
    mentions_key(call, src, func, key)
}

/// An insert is a claim when the handler learns whether it was new: a caught unique
/// violation, or a conflict-ignoring insert whose result is read.
fn insert_op(call: Node, src: &str, conflict_ignored: bool) -> MarkerOp {
    let caught = ast::ancestors(call).take_while(|a| !ast::is_function(*a)).any(|a| {
        a.kind_name() == "try_statement"
            && a.field("handler").is_some_and(|h| {
                let t = text(h, src);
                ["P2002", "23505", "11000", "unique", "Unique", "duplicate", "Duplicate", "ER_DUP"]
                    .iter()
                    .any(|c| t.contains(c))
            })
    }) || is_followed_by_catch(call, src);
    let used = ast::ancestors(call)
        .take_while(|a| !ast::is_function(*a) && a.kind_name() != "expression_statement")
        .any(|a| {
            matches!(a.kind_name(), "variable_declarator" | "if_statement" | "binary_expression" | "return_statement")
        });
    if caught || (conflict_ignored && used) { MarkerOp::Claim } else { MarkerOp::Write }
}

/// An update that only matches a row still in the state it moves it out of, whose result the
/// code tests and leaves on: `findOneAndUpdate({ reference, status: "pending", processing: {
/// $ne: true } }, { $set: { processing: true } })` then `if (!tx) return`, Prisma `updateMany({
/// where: { id, status: "PENDING" }, data: { status: "PAID" } })` then `if (count === 0)
/// return`, SQL `UPDATE ... SET status = 'paid' WHERE id = $1 AND status = 'pending'` then a
/// `rowCount` test. The database decides which of two deliveries moves the row: an atomic claim.
fn conditional_update_claim(call: Node, src: &str) -> bool {
    claim_filter_columns(call, src).is_some_and(|columns| !columns.is_empty())
}

/// The state columns a conditional update filters on (`status`, `processing`), when it moves
/// the row out of that state and its result is tested (`conditional_update_claim`).
fn claim_filter_columns(call: Node, src: &str) -> Option<Vec<String>> {
    let last = ast::callee_name(call, src).map(|n| n.to_ascii_lowercase())?;
    let args = ast::arguments(call);
    let columns = match orm_claim_columns(&last, &args, src) {
        Some(columns) => columns,
        None => sql_claim_columns(&effects::sql_text(call, &args, src)?),
    };
    (!columns.is_empty() && super::stmts::result_tested_then_leaves(call, src)).then_some(columns)
}

/// An ORM update's state columns (`updateOne(filter, update)`, Prisma `updateMany({ where,
/// data })`): the filter's columns that must hold a state (a literal or a condition object),
/// when the update sets one of them; None for a call of another name.
fn orm_claim_columns(last: &str, args: &[Node], src: &str) -> Option<Vec<String>> {
    let (filter, update) = match last {
        "findoneandupdate" | "updateone" | "findoneandmodify" => (args.first().copied(), args.get(1).copied()),
        "updatemany" => match args.first().map(|a| ast::unwrap_expr(*a)).filter(|a| a.kind_name() == "object") {
            Some(arg) if ast::object_property(arg, "where", src).is_some() => {
                (ast::object_property(arg, "where", src), ast::object_property(arg, "data", src))
            }
            _ => (args.first().copied(), args.get(1).copied()),
        },
        _ => return None,
    };
    let (Some(filter), Some(update)) = (filter.map(ast::unwrap_expr), update.map(ast::unwrap_expr)) else {
        return Some(Vec::new());
    };
    if filter.kind_name() != "object" || update.kind_name() != "object" {
        return Some(Vec::new());
    }
    let columns: Vec<String> = ast::named_children(filter)
        .into_iter()
        .filter(|p| p.kind_name() == "pair")
        .filter_map(|p| {
            let key_node = p.field("key")?;
            let key = ast::string_value(key_node, src).unwrap_or_else(|| text(key_node, src).into());
            let value = ast::unwrap_expr(p.field("value")?);
            // A state the row must be in: a literal, or a condition object (`{ $ne: true }`).
            let state = matches!(value.kind_name(), "string" | "true" | "false" | "null" | "number" | "object")
                || value.kind_name() == "member_expression" && text(value, src).chars().any(|c| c.is_uppercase());
            (state && !matches!(key.as_str(), "id" | "_id")).then_some(key)
        })
        .collect();
    let set = ast::object_property(update, "$set", src).map(ast::unwrap_expr).filter(|s| s.kind_name() == "object");
    let sets = |column: &str| {
        ast::object_property(update, column, src).is_some()
            || set.is_some_and(|set| ast::object_property(set, column, src).is_some())
    };
    Some(if columns.iter().any(|c| sets(c)) { columns } else { Vec::new() })
}

/// `UPDATE t SET status = 'paid' WHERE id = $1 AND status = 'pending'`: the columns the
/// statement sets that its `WHERE` also tests.
fn sql_claim_columns(sql: &str) -> Vec<String> {
    let Some(parts) = crate::regex!(r"(?is)^\s*UPDATE\s+\S+\s+SET\s+(.*?)\s+WHERE\s+(.*)$").captures(sql) else {
        return Vec::new();
    };
    let where_clause = parts[2].to_ascii_lowercase();
    crate::regex!(r"(\w+)\s*=")
        .captures_iter(&parts[1])
        .map(|c| c[1].to_ascii_lowercase())
        .filter(|column| {
            column != "id"
                && crate::regex!(r"(\w+)\s*(?:=|<>|!=|\bin\b|\bis\b)")
                    .captures_iter(&where_clause)
                    .any(|w| &w[1] == column)
        })
        .collect()
}

/// A unique violation, as the code that reads one back names it.
fn unique_violation() -> &'static regex::Regex {
    crate::regex!(r"(?i)P2002|23505|\b11000\b|ER_DUP|unique.?(?:violation|constraint)|duplicate.?key|already_exists")
}

/// An insert whose unique violation the code handles: a `try` (also around the transaction
/// callback that holds it) whose catch tests for one, a `.catch` on the insert's promise that
/// does, or a `{ error }` read back and compared with one. The row is keyed by a unique
/// constraint, so a replay fails on it instead of duplicating the row.
pub fn unique_violation_handled(call: Node, src: &str) -> bool {
    if violation_caught(call, src) || is_followed_by_catch(call, src) || claims_by_violation(call, src) {
        return true;
    }
    super::stmts::bound_and_read_next(call, |n| unique_violation().is_match(text(n, src)))
}

/// A `try` around the insert (also around the transaction callback that holds it) whose catch
/// tests for a unique violation: the constraint decides a concurrent duplicate, not the lookup.
fn violation_caught(call: Node, src: &str) -> bool {
    enclosing_catches(call, 2).any(|h| unique_violation().is_match(text(h, src)))
}

/// The catch clauses of the `try`s whose block holds `call`, innermost first, looking out
/// through at most `callbacks` callbacks handed to a call (`db.transaction(async (tx) => ...)`).
fn enclosing_catches(call: Node, callbacks: usize) -> impl Iterator<Item = Node> {
    let mut crossed = 0;
    ast::ancestors(call)
        .take_while(move |a| {
            if ast::is_function(*a) {
                crossed += 1;
                return crossed <= callbacks && ast::parent(a).is_some_and(|p| p.kind_name() == "arguments");
            }
            true
        })
        .filter(move |a| a.kind_name() == "try_statement" && a.field("body").is_some_and(|b| ast::contains(b, call)))
        .filter_map(|t| t.field("handler"))
}

/// A claim on one of the handler's own business rows (an order, a purchase) rather than on a
/// marker table: the row is work as well as the claim, so a fix must keep it.
fn own_row_claim(call: Node, src: &str, func: Node, key: Option<&EventKey>) -> bool {
    let table = table_of(call, src).or_else(|| {
        let sql = effects::sql_text(call, &ast::arguments(call), src)?;
        crate::regex!(r"(?i)\binto\s+[`\x22]?(\w+)").captures(&sql).map(|c| c[1].to_string())
    });
    (claims_by_violation(call, src) || conditional_update_claim(call, src))
        && table.is_none_or(|t| !is_marker_table(&t, call, src, func, key))
}

/// An insert whose unique violation the function reads back and answers as a duplicate, by
/// leaving (`catch (e) { if (e.code === "P2002") return ... }`, `if (error?.code === "23505")
/// return`): the row is the claim on the event, whatever its table is called.
fn claims_by_violation(call: Node, src: &str) -> bool {
    let violation = unique_violation();
    // An `if` on the violation whose branch leaves the function.
    let leaves = |n: Node| {
        let ifs = std::iter::once(n)
            .filter(|n| n.kind_name() == "if_statement")
            .chain(ast::descendants_of_kind(n, "if_statement"));
        ifs.into_iter().any(|i| {
            i.field("condition").is_some_and(|c| violation.is_match(text(c, src)))
                && i.field("consequence").is_some_and(|b| {
                    (matches!(b.kind_name(), "return_statement" | "continue_statement")
                        || !ast::descendants_of_kind(b, "return_statement").is_empty()
                        || !ast::descendants_of_kind(b, "continue_statement").is_empty())
                        && !returns_row_read_back(b, src)
                })
        })
    };
    if enclosing_catches(call, 0).any(leaves) {
        return true;
    }
    // `.catch((e) => ...)` on the insert's promise.
    let caught = ast::parent(call)
        .filter(|p| p.kind_name() == "member_expression")
        .and_then(ast::parent)
        .filter(|g| g.kind_name() == "call_expression" && ast::callee_name(*g, src).as_deref() == Some("catch"));
    if let Some(c) = caught {
        return leaves(c);
    }
    // `const { error } = await insert(...); if (error) { if (error.code === "23505") return ... }`
    super::stmts::bound_and_read_next(call, |n| n.kind_name() == "if_statement" && leaves(n))
}

/// A violation branch that reads back the row which won the race and returns it (`const winner =
/// await findProject(slug); if (winner) return winner;`): a get-or-create of an entity, whose
/// caller carries on with the row either way, not a claim that skips an event already handled.
fn returns_row_read_back(branch: Node, src: &str) -> bool {
    let awaited_call = |n: Node| {
        let n = ast::unwrap_expr(n);
        let n =
            if n.kind_name() == "await_expression" { n.named_child(0).map(ast::unwrap_expr).unwrap_or(n) } else { n };
        n.kind_name() == "call_expression"
    };
    let returns: Vec<Node> = std::iter::once(branch)
        .filter(|b| b.kind_name() == "return_statement")
        .chain(ast::descendants_of_kind(branch, "return_statement"))
        .collect();
    !returns.is_empty()
        && returns.iter().all(|r| {
            let Some(value) = r.named_child(0).map(ast::unwrap_expr) else { return false };
            value.kind_name() == "identifier"
                && ast::find_binding_init(branch, text(value, src), src, r.start_byte()).is_some_and(awaited_call)
        })
}

/// The call is the last link of its chain: no method is called on its result.
fn is_outermost_link(call: Node) -> bool {
    ast::parent(call)
        .filter(|p| p.kind_name() == "member_expression")
        .and_then(ast::parent)
        .is_none_or(|g| g.kind_name() != "call_expression")
}

/// `.catch((e) => { if (e.code === 'P2002') ... })` on the insert's promise.
fn is_followed_by_catch(call: Node, src: &str) -> bool {
    ast::parent(call)
        .filter(|p| p.kind_name() == "member_expression")
        .and_then(ast::parent)
        .filter(|g| g.kind_name() == "call_expression")
        .is_some_and(|g| {
            let t = text(g, src);
            t.contains(".catch(") && ["P2002", "23505", "11000", "unique", "duplicate"].iter().any(|c| t.contains(c))
        })
}

/// Name-based classification of a helper that hides the marker: `isProcessed(id)`,
/// `markEventProcessed(id)`.
fn classify_by_name(name: &str) -> Option<MarkerOp> {
    let lower = name.to_ascii_lowercase();
    let about_marker = ["processed", "handled", "seen", "duplicate", "dedup"].iter().any(|w| lower.contains(w));
    if !about_marker {
        return None;
    }
    if ["is", "has", "was", "already", "check", "get", "find"].iter().any(|p| lower.starts_with(p)) {
        Some(MarkerOp::Check)
    } else if ["mark", "record", "save", "set", "store", "add", "insert", "remember"]
        .iter()
        .any(|p| lower.starts_with(p))
    {
        Some(MarkerOp::Write)
    } else {
        None
    }
}

/// What a function finally does, computed once per call site: marker op, work, or nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Marker(MarkerOp),
    Work,
}

/// The ordered marker operations and work of one function (including nested callbacks),
/// looking through project helpers: a helper that only touches the marker counts as that
/// marker operation, a helper that reaches an effect counts as work.
pub struct FunctionSteps<'t> {
    pub steps: Vec<(Step, Node<'t>, bool)>,
}

pub fn steps<'t>(
    project: &Project,
    file: &'t Arc<SourceFile>,
    func: Node<'t>,
    key: Option<&EventKey>,
) -> FunctionSteps<'t> {
    // Three questions about every scope of a handler (hand-written dedupe, its patterns,
    // whether a replay stops) read the same steps: they are found once per analysis and
    // remembered with the function's tree.
    #[derive(Hash, PartialEq, Eq)]
    struct StepsOf {
        at: u32,
        src: (usize, usize),
        key: Option<(Provider, String)>,
        wrappers: u64,
    }
    let src: &'t str = &file.text;
    let steps = crate::syntax::node_index::NodeIndex::remembered(
        func,
        |at| StepsOf {
            at,
            src: (src.as_ptr() as usize, src.len()),
            key: key.map(|k| (k.provider, k.template.clone())),
            wrappers: effects::wrappers_generation(),
        },
        || steps_once(project, file, func, key).steps,
        |index, (step, call, lease)| Some((*step, index.position_of(*call)?, *lease)),
        |index, (step, call, lease)| (step, index.node_at(call, func), lease),
    );
    FunctionSteps { steps }
}

fn steps_once<'t>(
    project: &Project,
    file: &'t Arc<SourceFile>,
    func: Node<'t>,
    key: Option<&EventKey>,
) -> FunctionSteps<'t> {
    let src: &'t str = &file.text;
    let mut steps = Vec::new();
    for call in ast::calls_in(func, false) {
        if let Some(m) = classify(call, src, func, key) {
            steps.push((Step::Marker(m.op), call, m.lease));
            continue;
        }
        if let Some(step) = call_step(project, file, call, 0, &mut HashSet::new()) {
            steps.push((step, call, false));
        }
    }
    // A state move after the work (`status: "processing"` → `"accepted"`) finishes the work
    // rather than claiming it: it is work like any other write.
    if let Some(first_work) = steps.iter().position(|(step, _, _)| *step == Step::Work) {
        for (step, call, _) in steps.iter_mut().skip(first_work + 1) {
            if *step == Step::Marker(MarkerOp::Claim) && conditional_update_claim(*call, src) {
                *step = Step::Work;
            }
        }
    }
    FunctionSteps { steps }
}

/// A call's step: an effect (work), a helper summarised by what it does, or None.
pub fn call_step(
    project: &Project,
    file: &Arc<SourceFile>,
    call: Node,
    depth: usize,
    visited: &mut HashSet<(std::path::PathBuf, usize)>,
) -> Option<Step> {
    let src = &file.text;
    let resolved = reach::resolve_call(project, file, call);
    if resolved.is_none() {
        if let Some(effect) = effects::classify(call, src, false) {
            return is_work_effect(&effect, src).then_some(Step::Work);
        }
        let name = ast::callee_name(call, src)?;
        return classify_by_name(name.trim_end_matches("()")).map(Step::Marker);
    }
    if let Some(effect) = effects::classify(call, src, true) {
        return is_work_effect(&effect, src).then_some(Step::Work);
    }
    let def = resolved?;
    if depth >= 4 || !visited.insert((def.file.path.clone(), def.span.start)) {
        return None;
    }
    // A logging helper's own dedupe (`logErrorWithDedupe` claiming a key so a message is
    // logged once per window) is about log lines, not about the event.
    let own_name = def.name.rsplit('.').next().unwrap_or(&def.name);
    if super::best_effort::words(own_name).first().is_some_and(|w| w == "log") {
        return None;
    }
    let body = def.node()?;
    let mut ops = Vec::new();
    let mut work = false;
    let mut released_finally = false;
    for inner in ast::calls_in(body, false) {
        let op = match classify(inner, &def.file.text, body, None) {
            Some(m) => Some(m.op),
            None => match call_step(project, &def.file, inner, depth + 1, visited) {
                Some(Step::Work) => {
                    work = true;
                    None
                }
                Some(Step::Marker(op)) => Some(op),
                None => None,
            },
        };
        let releases = op == Some(MarkerOp::Release)
            || ast::callee_name(inner, &def.file.text).is_some_and(|n| {
                let n = n.to_ascii_lowercase();
                n == "del" || ["release", "clear", "unlock", "delete", "free"].iter().any(|w| n.starts_with(w))
            });
        if releases && ast::ancestors(inner).take_while(|a| *a != body).any(|a| ast::kind(a) == "finally_clause") {
            released_finally = true;
        }
        ops.extend(op);
    }
    if work {
        return Some(Step::Work);
    }
    // Claimed, then released in `finally` whatever happens: a lock held while the caller's
    // work runs (`withLock({ keys, fn })`), not a record that the event was processed.
    if released_finally && ops.contains(&MarkerOp::Claim) {
        return None;
    }
    let name = def.name.as_str();
    if ops.contains(&MarkerOp::Claim) {
        Some(Step::Marker(MarkerOp::Claim))
    } else if ops.contains(&MarkerOp::Write) {
        Some(Step::Marker(MarkerOp::Write))
    } else if ops.contains(&MarkerOp::Check) {
        // A helper that looks a row up is a dedupe check only where its answer decides whether
        // to go on (`if (await wasProcessed(id)) return`): a lookup whose rows are then used
        // (`for (const action of await actionsOf(event.id))`) reads data.
        decides(call, src).then_some(Step::Marker(MarkerOp::Check))
    } else if ops.contains(&MarkerOp::Release) {
        Some(Step::Marker(MarkerOp::Release))
    } else {
        classify_by_name(name).map(Step::Marker)
    }
}

/// The value of `call` decides the way on: it is (part of) a condition, or bound to a name the
/// next statements test and leave on.
fn decides(call: Node, src: &str) -> bool {
    let in_condition = ast::ancestors(call).take_while(|a| !ast::is_function(*a)).any(|a| {
        ast::parent(a).is_some_and(|p| {
            matches!(ast::kind(p), "if_statement" | "while_statement" | "ternary_expression")
                && p.field("condition") == Some(a)
        })
    });
    in_condition || super::stmts::result_tested_then_leaves(call, src)
}

/// Effects that are work to protect (every classified effect: reads are never classified).
fn is_work_effect(_effect: &effects::Effect, _src: &str) -> bool {
    true
}

/// Whether any call under `node` is work (an effect or a helper that reaches one).
pub fn contains_work(
    project: &Project,
    file: &Arc<SourceFile>,
    node: Node,
    func: Node,
    key: Option<&EventKey>,
) -> bool {
    ast::calls_in(node, false).into_iter().any(|c| {
        classify(c, &file.text, func, key).is_none()
            && call_step(project, file, c, 0, &mut HashSet::new()) == Some(Step::Work)
    })
}

/// Whether `node` contains a marker operation of the given kinds.
pub fn contains_marker(node: Node, src: &str, func: Node, key: Option<&EventKey>, ops: &[MarkerOp]) -> bool {
    ast::calls_in(node, false).into_iter().any(|c| classify(c, src, func, key).is_some_and(|m| ops.contains(&m.op)))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternKind {
    CheckThenInsert,
    RecordBeforeEffect,
    EffectBeforeRecord,
}

impl PatternKind {
    /// Lower is more specific. A handler shows one kind of racy dedupe: a check-then-insert
    /// also writes its marker after the work, which is the whole of the defect, not a second one.
    fn specificity(self) -> u8 {
        match self {
            PatternKind::CheckThenInsert => 0,
            PatternKind::RecordBeforeEffect => 1,
            PatternKind::EffectBeforeRecord => 2,
        }
    }
}

/// The patterns of `kind` that are the most specific kind among the handler's patterns on the
/// same marker: which rule describes a handler's hand-written dedupe is a fact of the handler,
/// decided here once, whichever rules are enabled.
pub fn most_specific(patterns: &[Pattern], kind: PatternKind) -> impl Iterator<Item = &Pattern> {
    patterns.iter().filter(move |p| {
        let top = patterns.iter().filter(|q| q.marker == p.marker).map(|q| q.kind.specificity()).min();
        p.kind == kind && top == Some(kind.specificity())
    })
}

const OWN_ROW_FIX: &str = "the marker is one of the handler's own rows, which the work needs: keep its write, and \
     move it into one transaction with the work (or write it last), or let a guard `run` claim the event around both";

/// A racy hand-written dedupe found in one scope.
#[derive(Clone, Debug)]
pub struct Pattern {
    pub kind: PatternKind,
    pub scope: usize,
    /// Byte range to report (the check or the marker write).
    pub at: (usize, usize),
    /// The marker calls of this pattern (checks, writes), in the scope's file.
    pub calls: Vec<(usize, usize)>,
    /// Why the fix cannot be the guard wrap that removes the marker calls: the marker is one
    /// of the handler's own rows, which the work needs.
    pub manual_fix: Option<&'static str>,
    /// For a business row's status used as the marker, the node reported (the status test of
    /// a race, the status write of a record-first); `None` for a marker table or key. A race
    /// and a write before the work on one status are two defects, both reported.
    pub marker: Option<(usize, usize)>,
}

/// The nearest transaction/guard callback around `node`.
fn transaction_callback<'t>(node: Node<'t>, src: &str) -> Option<Node<'t>> {
    ast::ancestors(node).find(|anc| {
        ast::is_function(*anc)
            && anc
                .parent()
                .filter(|p| p.kind_name() == "arguments")
                .and_then(ast::parent)
                .is_some_and(|c| c.kind_name() == "call_expression" && guards::guard_call_kind(c, src).is_some())
    })
}

/// A release of the marker on failure: a delete in a `catch`/`finally` or a `.catch(...)`, or
/// one followed by a `throw` in its block (`if (error) { await release(); throw error }`, the
/// shape of clients that return their errors).
fn releases_on_failure(steps: &FunctionSteps, src: &str) -> bool {
    steps.steps.iter().any(|(step, call, _)| {
        *step == Step::Marker(MarkerOp::Release)
            && (ast::enclosing_statement(*call).is_some_and(ast::followed_by_throw)
                || ast::ancestors(*call).any(|a| {
                    matches!(a.kind_name(), "catch_clause" | "finally_clause")
                        || (a.kind_name() == "arguments"
                            && ast::parent(a).is_some_and(|c| {
                                c.kind_name() == "call_expression"
                                    && ast::callee_name(c, src).is_some_and(|n| n == "catch" || n == "finally")
                            }))
                }))
    })
}

/// The update sets a working state (`processing: true`, `status: "executing"`): a lock taken
/// to do the work, not the business change itself.
fn takes_lock(call: Node, src: &str) -> bool {
    crate::regex!(
        r#"(?i)\b(processing|locked|claimed|in_?progress|executing|running)['"]?\s*:\s*true\b|:\s*['"](processing|executing|in[_ ]?progress|running|claimed|locked)['"]"#
    )
    .is_match(text(call, src))
}

/// A catch after `claim` that writes the row's lock back (`locked: false`) and leaves its other
/// state columns alone, so the next delivery's update matches again. One that also moves the
/// row elsewhere (`status = "failed"`) strands the event: the retry matches nothing.
fn gives_back_on_failure(func: Node, claim: Node, src: &str) -> bool {
    let Some(columns) = claim_filter_columns(claim, src) else { return false };
    let written = |body: &str, column: &str| {
        let column = regex::escape(column);
        regex::Regex::new(&format!(r#"(?i)\b{column}['"]?\s*(?::|=[^=])"#)).is_ok_and(|re| re.is_match(body))
    };
    ast::descendants_of_kind(func, "catch_clause").into_iter().any(|clause| {
        let body = text(clause, src);
        let lock_written = columns.iter().any(|c| takes_lock_column(c) && written(body, c));
        clause.start_byte() > claim.end_byte()
            && lock_written
            && columns.iter().all(|c| takes_lock_column(c) || !written(body, c))
    })
}

/// A column that holds a working lock rather than the business state.
fn takes_lock_column(column: &str) -> bool {
    crate::regex!(r"(?i)^(is_?)?(processing|locked|claimed|in_?progress|executing|running|lock\w*)$").is_match(column)
}

/// A marker row written in a not-yet-done state: `processed: false`, `status: 'received'`.
fn records_unfinished(marker: Node, src: &str) -> bool {
    let t = text(marker, src);
    crate::regex!(r#"(?i)\b(processed|done|completed|handled)\w*['"]?\s*:\s*false\b"#).is_match(t)
        || crate::regex!(r#"(?i)\bstatus['"]?\s*:\s*['"](received|pending|processing|started|in_?progress|queued)['"]"#)
            .is_match(t)
}

/// The `if` that tests what the check read (`if (existing?.processed) return ...`).
fn skip_decision<'t>(check: Node<'t>, func: Node<'t>, src: &str) -> Option<Node<'t>> {
    let declarator =
        ast::ancestors(check).take_while(|a| *a != func).find(|a| a.kind_name() == "variable_declarator")?;
    let mut names = Vec::new();
    ast::bound_names(declarator.field("name")?, src, &mut names);
    ast::descendants_of_kind(func, "if_statement").into_iter().find(|i| {
        i.start_byte() > declarator.end_byte()
            && i.field("condition").is_some_and(|c| {
                ast::descendants_of_kind(c, "identifier").iter().any(|id| names.iter().any(|n| n == text(*id, src)))
            })
    })
}

/// The dedupe pattern of each scope of a handler (at most one per scope, most specific first).
pub fn patterns(project: &Project, scopes: &[Scope]) -> Vec<Pattern> {
    let mut out = Vec::new();
    for (index, scope) in scopes.iter().enumerate() {
        let Some(func) = scope.node() else { continue };
        let file = scope.file();
        let src = &file.text;
        if scope.guarded.is_some_and(|g| g.dedupes()) {
            continue;
        }
        let st = steps(project, file, func, scope.event_key.as_ref());
        let in_guard = |n: Node| scope.guard_at(n).is_some_and(|g| g.dedupes());
        let s: Vec<(Step, Node, bool)> = st.steps.iter().copied().filter(|(_, c, _)| !in_guard(*c)).collect();
        let is = |step: &Step, ops: &[MarkerOp]| matches!(step, Step::Marker(op) if ops.contains(op));
        let first_work = s.iter().position(|(step, _, _)| *step == Step::Work);
        let Some(first_work) = first_work else { continue };
        let work_nodes: Vec<Node> = s.iter().filter(|(step, _, _)| *step == Step::Work).map(|(_, c, _)| *c).collect();
        let range = |n: Node| (n.start_byte(), n.end_byte());
        // check → work → marker write
        let check = s[..first_work].iter().find(|(step, _, _)| is(step, &[MarkerOp::Check]));
        let claim_before = s[..first_work].iter().find(|(step, _, _)| is(step, &[MarkerOp::Claim, MarkerOp::Write]));
        let write_after = s[first_work..].iter().find(|(step, _, _)| is(step, &[MarkerOp::Claim, MarkerOp::Write]));
        if let (Some(check), None, Some(write)) = (check, claim_before, write_after) {
            out.push(Pattern {
                kind: PatternKind::CheckThenInsert,
                scope: index,
                at: range(check.1),
                calls: vec![range(check.1), range(write.1)],
                marker: None,
                manual_fix: None,
            });
            continue;
        }
        // check → "received" row → work → "processed": the row written first records an
        // unfinished state and the check skips only finished events, so a failed attempt is
        // retried (nothing is lost); what stays open is the race between check and row, as in
        // check-then-insert. Reported at the decision that skips finished events.
        if let (Some(check), Some(&(Step::Marker(MarkerOp::Write), marker, _))) = (check, claim_before)
            && check.1.start_byte() < marker.start_byte()
            && records_unfinished(marker, src)
        {
            let decision = skip_decision(check.1, func, src).unwrap_or(check.1);
            out.push(Pattern {
                kind: PatternKind::CheckThenInsert,
                scope: index,
                at: range(decision),
                calls: std::iter::once(check.1).chain([marker]).chain(write_after.map(|w| w.1)).map(range).collect(),
                marker: None,
                manual_fix: None,
            });
            continue;
        }
        // marker → work, not in one transaction, not released on failure
        if let Some(&(_, marker, _)) = claim_before {
            let tx = transaction_callback(marker, src);
            let outside: Vec<&Node> = work_nodes
                .iter()
                .filter(|w| w.start_byte() > marker.start_byte())
                .filter(|w| tx.is_none_or(|t| !ast::contains(t, **w)))
                .collect();
            // A state move that is itself the business change (`enabled: false`, `status:
            // "canceled"`) leaves nothing to lose but what follows it; only a lock taken to do
            // the work (`processing: true`) strands the event when the work fails.
            let state_move = conditional_update_claim(marker, src);
            let released = releases_on_failure(&st, src)
                || state_move && (!takes_lock(marker, src) || gives_back_on_failure(func, marker, src));
            if !outside.is_empty() && !released {
                let mut calls = vec![range(marker)];
                if let Some(c) = check {
                    calls.push(range(c.1));
                }
                let own_row = own_row_claim(marker, src, func, scope.event_key.as_ref());
                out.push(Pattern {
                    kind: PatternKind::RecordBeforeEffect,
                    scope: index,
                    at: range(marker),
                    calls,
                    marker: None,
                    manual_fix: own_row.then_some(OWN_ROW_FIX),
                });
            }
            continue;
        }
        // work → marker write, not in one transaction
        if check.is_none()
            && let Some(&(_, marker, _)) = write_after
        {
            let tx = transaction_callback(marker, src);
            let same_tx = tx.is_some_and(|t| {
                work_nodes
                    .iter()
                    .filter(|w| w.start_byte() < marker.start_byte())
                    .all(|w| ast::contains(t, *w) && effects::classify(*w, src, true).is_none_or(|e| e.kind.is_db()))
            });
            if !same_tx {
                out.push(Pattern {
                    kind: PatternKind::EffectBeforeRecord,
                    scope: index,
                    at: range(marker),
                    calls: vec![range(marker)],
                    marker: None,
                    manual_fix: None,
                });
            }
            continue;
        }
        // The business row is the marker: it is looked up and inserted only when missing
        // (`const [paid] = select(payments)...; if (!paid) insert(payments)`). Nothing makes
        // the lookup and the insert atomic, so two concurrent deliveries both insert. The
        // insert is the handler's work, so the fix keeps it (no marker calls to remove).
        if s.iter().any(|(step, _, _)| matches!(step, Step::Marker(_))) {
            continue;
        }
        if let Some(decision) = existence_checked_insert(project, file, func, src)
            .or_else(|| upserted_then_first_time_work(project, file, func, src))
        {
            out.push(Pattern {
                kind: PatternKind::CheckThenInsert,
                scope: index,
                at: range(decision),
                calls: vec![],
                marker: None,
                manual_fix: None,
            });
            continue;
        }
        // Each status field is its own marker, so a handler can show both kinds.
        for status in status_markers(project, file, func, src) {
            let (kind, at, manual_fix) = match status {
                StatusMarker::Race { decision } => (PatternKind::CheckThenInsert, decision, None),
                StatusMarker::RecordFirst { at } => (PatternKind::RecordBeforeEffect, at, Some(OWN_ROW_FIX)),
            };
            out.push(Pattern { kind, scope: index, at: range(at), calls: vec![], marker: Some(range(at)), manual_fix });
        }
    }
    out
}

/// `x == null`, `rows.length === 0`, `row === undefined`.
static EMPTY_COMPARISON: std::sync::LazyLock<regex::Regex> =
    std::sync::LazyLock::new(|| regex::Regex::new(r"(?:==+\s*(?:null|undefined|0)\b)").unwrap());

/// `const row = await select().from(t)...; await upsert(t, ...); if (!row) { work }`: the upsert
/// lets every concurrent delivery through (none fails on the key), and each one read "no row"
/// before any of them wrote it, so each does the first-time work. The lookup is the check.
/// A lookup that locks the row (`FOR UPDATE`, `.forUpdate()`) serialises them and is left out.
fn upserted_then_first_time_work<'t>(
    project: &Project,
    file: &Arc<SourceFile>,
    func: Node<'t>,
    src: &str,
) -> Option<Node<'t>> {
    let locks = crate::regex!(r#"forupdate|for update|for\s*\(\s*["'`]update|lock"#);
    let calls = ast::calls_in(func, false);
    let upserts = calls
        .iter()
        .filter(|c| effects::classify(**c, src, false).is_some_and(|e| e.kind == effects::EffectKind::DbUpsert));
    for upsert in upserts {
        let Some(table) = table_of(*upsert, src) else { continue };
        for stmt in ast::descendants_of_kind(func, "if_statement") {
            if stmt.start_byte() < upsert.end_byte() {
                continue;
            }
            let (Some(cond), Some(cons)) = (stmt.field("condition"), stmt.field("consequence")) else {
                continue;
            };
            let cond = ast::unwrap_expr(cond);
            let negated = (cond.kind_name() == "unary_expression"
                && cond.child(0).is_some_and(|o| text(o, src) == "!"))
            .then(|| cond.field("argument"))
            .flatten()
            .filter(|a| a.kind_name() == "identifier");
            let Some(subject) = negated else { continue };
            let Some(lookup) = ast::find_binding_init(func, text(subject, src), src, upsert.start_byte())
                .map(ast::unwrap_expr)
                .map(|i| if i.kind_name() == "await_expression" { i.named_child(0).unwrap_or(i) } else { i })
                .filter(|i| i.kind_name() == "call_expression")
            else {
                continue;
            };
            let lookup_text = text(lookup, src).to_ascii_lowercase();
            if lookup.end_byte() > upsert.start_byte()
                || !is_row_lookup(lookup, src)
                || table_of(lookup, src).as_deref() != Some(table.as_str())
                || locks.is_match(&lookup_text)
            {
                continue;
            }
            if contains_work(project, file, cons, func, None) {
                return Some(lookup);
            }
        }
    }
    None
}

/// Where an insert stands (its file and span): its row is judged against the schema only when a
/// lookup guards it.
type RowInsert = (Arc<SourceFile>, Span);

/// The lookup whose row lets an insert run only when the same table had no row: an `if` around
/// the insert with the lookup negated (`if (!row)`, `if (rows.length === 0)`), or before it
/// leaving the function when the row exists (`if (row) return`).
fn existence_checked_insert<'t>(
    project: &Project,
    file: &Arc<SourceFile>,
    func: Node<'t>,
    src: &str,
) -> Option<Node<'t>> {
    let unguarded_insert = |c: &Node, src: &str| {
        effects::classify(*c, src, false).is_some_and(|e| e.kind == effects::EffectKind::DbInsert)
            && !violation_caught(*c, src)
    };
    let calls = ast::calls_in(func, false);
    // Each insert (or the call that reaches it) with its table and the insert itself, in its file.
    let mut inserts: Vec<(Node, String, Option<RowInsert>)> = calls
        .iter()
        .filter(|c| unguarded_insert(c, src))
        .filter_map(|c| Some((*c, table_of(*c, src)?, Some((file.clone(), Span::of(*c))))))
        .collect();
    // The insert can sit in a helper the handler calls after the check (`addCredits(...)`
    // inserting the ledger row it looked up): the helper's call stands for it.
    for call in &calls {
        let Some(def) = reach::resolve_call(project, file, *call) else { continue };
        let Some(body) = def.node() else { continue };
        let def_src = &def.file.text;
        if let Some((table, row_insert)) = ast::calls_in(body, false)
            .into_iter()
            .filter(|c| unguarded_insert(c, def_src))
            .find_map(|c| Some((table_of(c, def_src)?, Some((def.file.clone(), Span::of(c))))))
        {
            inserts.push((*call, table, row_insert));
        }
    }
    // A provider's resource created after looking for it (`issues.listComments` then
    // `issues.createComment`): the provider's list or search is the lookup.
    for call in &calls {
        if let Some(resource) = api_resource_created(*call, src).filter(|_| !violation_caught(*call, src)) {
            inserts.push((*call, resource, None));
        }
    }
    if inserts.is_empty() {
        return None;
    }
    let ifs = ast::descendants_of_kind(func, "if_statement");
    for (insert, table, row_insert) in &inserts {
        for stmt in ifs.iter().filter(|i| i.start_byte() < insert.start_byte()) {
            let Some(cond) = stmt.field("condition") else { continue };
            let Some(cons) = stmt.field("consequence") else { continue };
            let around = ast::contains(cons, *insert);
            let leaves = !around && stmt.end_byte() < insert.start_byte() && exits(cons);
            if !around && !leaves {
                continue;
            }
            let cond_text = text(cond, src);
            let compares_empty = EMPTY_COMPARISON.is_match(cond_text);
            let lookup = ast::descendants_of_kind(cond, "identifier").into_iter().find_map(|id| {
                let name = text(id, src);
                let negated = cond_text.contains(&format!("!{name}")) || compares_empty;
                if negated != around {
                    return None;
                }
                let init = ast::find_binding_init(func, name, src, stmt.start_byte())
                    .or_else(|| ast::find_destructured_init(func, name, src, stmt.start_byte()));
                let init = init.map(ast::unwrap_expr).filter(|i| i.kind_name() == "call_expression")?;
                if let Some(resource) = table.strip_prefix(API_RESOURCE) {
                    return api_lookup(func, init, resource, src, stmt.start_byte());
                }
                Some(init).filter(|lookup| {
                    effects::classify(*lookup, src, false).is_none()
                        && is_row_lookup(*lookup, src)
                        && table_of(*lookup, src).as_deref() == Some(table.as_str())
                })
            });
            // An `if` around the insert is the check-then-insert itself and is reported; with
            // an early exit the lookup is the check (as a marker table's check is), the `if`
            // only its exit. A provider resource is checked by listing and searching it, often
            // lines above the `if`: the search is the check.
            if let Some(lookup) = lookup {
                // The schema is read only for an insert a lookup guards.
                let by_unique_key =
                    row_insert.as_ref().and_then(|(f, at)| Some((f, f.node_at(*at)?))).is_some_and(|(f, c)| {
                        unique_writes::prisma_unique_sets_set(project, f, c)
                            .iter()
                            .any(|set| looks_up_by(lookup, set, src))
                    });
                if unique_lookup_then_bare_insert(lookup, *insert, by_unique_key, &calls, src)
                    || looks_up_a_fixed_row(lookup, src)
                {
                    continue;
                }
                return Some(if around && !table.starts_with(API_RESOURCE) { *stmt } else { lookup });
            }
        }
    }
    None
}

/// A Prisma `findUnique` (its `where` names a unique field), a lookup by the primary key the
/// insert then sets to the same value, or a lookup by the fields of a unique key the insert's
/// row then sets (`@@unique([userId, albumId])`, the insert also in a helper), and then the
/// insert, with no work between them: two concurrent deliveries both insert, the unique
/// constraint fails the second one, and its retry finds the row; nothing ran twice.
fn unique_lookup_then_bare_insert(lookup: Node, insert: Node, by_unique_key: bool, calls: &[Node], src: &str) -> bool {
    let unique = by_unique_key
        || ast::callee_name(lookup, src).is_some_and(|n| n.starts_with("findUnique"))
        || same_primary_key(lookup, insert, src);
    unique
        && !calls.iter().any(|c| {
            c.start_byte() > lookup.end_byte()
                && c.end_byte() < insert.start_byte()
                && effects::classify(*c, src, false).is_some_and(|e| e.kind != effects::EffectKind::Possible)
        })
}

/// Whether a Prisma-style lookup filters on every field of `set` (`where: { userId, albumId }`).
fn looks_up_by(lookup: Node, set: &[String], src: &str) -> bool {
    let Some(filter) = ast::arguments(lookup)
        .first()
        .filter(|a| a.kind_name() == "object")
        .and_then(|o| ast::object_property(*o, "where", src))
        .map(ast::unwrap_expr)
        .filter(|w| w.kind_name() == "object")
    else {
        return false;
    };
    let named = unique_writes::row_fields(filter, src);
    set.iter().all(|f| named.contains(f))
}

/// A lookup that names no row of the event: no filter at all (`settings.findMany()`, the one
/// settings row) or one by constants only (`findFirst({ where: { name: "frontend" } })`). The
/// get-or-create around it makes an installation's fixed row once, whatever the delivery.
fn looks_up_a_fixed_row(lookup: Node, src: &str) -> bool {
    let mut filters = Vec::new();
    let mut cur = Some(lookup);
    while let Some(c) = cur.filter(|c| c.kind_name() == "call_expression") {
        let name = ast::callee_name(c, src).unwrap_or_default();
        let args = ast::arguments(c);
        if !matches!(name.as_str(), "from" | "table" | "select" | "selectFrom" | "limit" | "take" | "orderBy" | "order")
        {
            filters.extend(args);
        }
        let callee = c.field("function");
        cur = callee.filter(|f| f.kind_name() == "member_expression").and_then(|f| f.field("object"));
    }
    filters.into_iter().map(ast::unwrap_expr).all(|arg| {
        let filter = if arg.kind_name() == "object" { ast::object_property(arg, "where", src) } else { None };
        filter.map(ast::unwrap_expr).is_some_and(|w| w.kind_name() == "object" && only_constants(w))
    })
}

/// Whether every value in an object (nested objects included) is a literal.
fn only_constants(object: Node) -> bool {
    ast::named_children(object).into_iter().all(|pair| match pair.kind_name() {
        "pair" => pair.field("value").map(ast::unwrap_expr).is_some_and(|v| match v.kind_name() {
            "string" | "number" | "true" | "false" | "null" => true,
            "object" => only_constants(v),
            _ => false,
        }),
        "comment" => true,
        _ => false,
    })
}

/// `findFirst({ where: { id: X, ... } })` then `create({ data: { id: X, ... } })`: the insert
/// names the row's primary key, the value the lookup looked for.
fn same_primary_key(lookup: Node, insert: Node, src: &str) -> bool {
    let field = |call: Node, options: &str| {
        let arg = ast::arguments(call).into_iter().next().filter(|a| a.kind_name() == "object")?;
        let id = ast::object_property(ast::object_property(arg, options, src)?, "id", src)?;
        Some(text(id, src).split_whitespace().collect::<String>())
    };
    field(lookup, "where").is_some_and(|looked| field(insert, "data").is_some_and(|set| set == looked))
}

/// Whether a branch ends by leaving: its last statement returns, throws or continues.
fn exits(branch: Node) -> bool {
    ast::last_statement(branch)
        .is_some_and(|n| matches!(n.kind_name(), "return_statement" | "throw_statement" | "continue_statement"))
}

/// What a status test followed by a write of the same status field amounts to.
#[derive(Clone, Copy, Debug)]
enum StatusMarker<'t> {
    /// `if (order.status === PAID) return`, the work, then the status set on its own (not a
    /// compare-and-set): two concurrent deliveries both read the old status and both work.
    Race { decision: Node<'t> },
    /// The status a retry stops on is written first and the work follows outside any
    /// transaction with it: when the work fails, the retry finds the status and stops, and
    /// the event is lost. `at` is the write, or the transaction that holds it.
    RecordFirst { at: Node<'t> },
}

/// The test `if (<record>.<field> === <value>) return` (or `!==`), where the record was read
/// from the database before it; a local alias of the field (`const before = row.status`)
/// counts as the field.
struct StatusTest<'t> {
    decision: Node<'t>,
    field: String,
    value: String,
    /// `===`: the exit is taken when the field holds `value`; `!==`: when it holds anything else.
    equal: bool,
}

fn status_tests<'t>(func: Node<'t>, src: &str) -> Vec<StatusTest<'t>> {
    let field_test =
        crate::regex!(r"^\(?\s*\(?\s*([A-Za-z_$][\w$]*)(?:\??\.(\w+))?\s*(===?|!==?)\s*([\w.$'\x22]+)\s*\)?\s*\)?$");
    let field_alias = crate::regex!(r"^([A-Za-z_$][\w$]*)\??\.(\w+)$");
    let read_before = |name: &str, at: usize| {
        ast::find_binding_init(func, name, src, at)
            .or_else(|| ast::find_destructured_init(func, name, src, at))
            .is_some_and(|init| text(init, src).trim_start().starts_with("await"))
    };
    let mut out = Vec::new();
    for stmt in ast::descendants_of_kind(func, "if_statement") {
        let (Some(cond), Some(cons)) = (stmt.field("condition"), stmt.field("consequence")) else {
            continue;
        };
        if !exits(cons) || stmt.field("alternative").is_some() {
            continue;
        }
        let Some(caps) = field_test.captures(text(cond, src)) else { continue };
        let (record, field) = match caps.get(2) {
            Some(field) => (caps[1].to_string(), field.as_str().to_string()),
            // `const before = row.status; if (before === incoming) return`
            None => {
                let Some(init) = ast::find_binding_init(func, &caps[1], src, stmt.start_byte()) else { continue };
                let Some(m) = field_alias.captures(text(init, src).trim()) else {
                    continue;
                };
                (m[1].to_string(), m[2].to_string())
            }
        };
        if !is_status_field(&field) || !read_before(&record, stmt.start_byte()) {
            continue;
        }
        out.push(StatusTest { decision: stmt, field, value: caps[4].to_string(), equal: caps[3].starts_with('=') });
    }
    out
}

fn is_status_field(field: &str) -> bool {
    let lower = field.to_ascii_lowercase();
    lower.ends_with("status") || lower == "state" || matches!(lower.as_str(), "paid" | "processed")
}

/// A write that sets `field`: the value it sets (`data: { status: X }`, `.set({ status: X })`,
/// `values({ status: X })`) and whether it is a compare-and-set on that field (`where: { id,
/// status: "PENDING" }`, `.where(and(eq(t.id, id), eq(t.status, "PENDING")))`).
fn status_write(write: Node, field: &str, src: &str) -> Option<(String, bool)> {
    let in_where = |n: Node| {
        ast::ancestors(n).take_while(|a| a.id() != write.id()).any(|a| {
            (a.kind_name() == "pair" && a.field("key").is_some_and(|k| text(k, src) == "where"))
                || (a.kind_name() == "arguments"
                    && ast::parent(a).is_some_and(|c| ast::callee_name(c, src).as_deref() == Some("where")))
        })
    };
    let mut value = None;
    let mut cas = false;
    for pair in ast::descendants_of_kind(write, "pair") {
        let Some(key) = pair.field("key") else { continue };
        let name = text(key, src).trim_matches(['"', '\'']);
        if name == field {
            if in_where(pair) {
                cas = true;
            } else if value.is_none() {
                value = pair.field("value").map(|v| text(v, src).to_string());
            }
        }
    }
    for shorthand in ast::descendants_of_kind(write, "shorthand_property_identifier") {
        if text(shorthand, src) == field {
            if in_where(shorthand) {
                cas = true;
            } else if value.is_none() {
                value = Some(field.to_string());
            }
        }
    }
    cas |= ast::descendants_of_kind(write, "member_expression")
        .into_iter()
        .any(|m| m.field("property").is_some_and(|p| text(p, src) == field) && in_where(m));
    value.map(|v| (v, cas))
}

fn status_markers<'t>(project: &Project, file: &Arc<SourceFile>, func: Node<'t>, src: &str) -> Vec<StatusMarker<'t>> {
    let writes: Vec<Node> = ast::calls_in(func, false)
        .into_iter()
        .filter(|c| {
            effects::classify(*c, src, false)
                .is_some_and(|e| matches!(e.kind, effects::EffectKind::DbUpdate | effects::EffectKind::DbUpsert))
        })
        .collect();
    let calls = ast::calls_in(func, false);
    let mut out = Vec::new();
    for test in status_tests(func, src) {
        let after = test.decision.end_byte();
        let Some((write, value, cas)) = writes
            .iter()
            .filter(|w| w.start_byte() > after)
            .find_map(|w| status_write(*w, &test.field, src).map(|(v, cas)| (*w, v, cas)))
        else {
            continue;
        };
        let outside_write = |c: &Node| c.id() != write.id() && !ast::contains(write, *c);
        // Work between the test and the status write (the write itself aside).
        let is_work = |c: &Node| {
            classify(*c, src, func, None).is_none()
                && call_step(project, file, *c, 0, &mut HashSet::new()) == Some(Step::Work)
        };
        let work_before = calls
            .iter()
            .filter(|c| c.start_byte() > after && c.end_byte() <= write.end_byte())
            .any(|c| outside_write(c) && is_work(c));
        // The test is a marker only when a retry stops on the written value: `=== X` then `X`
        // written, `!== X` then another value.
        let stops_retry = if test.equal { value == test.value } else { value != test.value };
        if !stops_retry {
            continue;
        }
        if work_before && !cas {
            out.push(StatusMarker::Race { decision: test.decision });
        }
        let tx = transaction_callback(write, src);
        let region_end = tx.map_or(write.end_byte(), |t| t.end_byte());
        let work_after =
            calls.iter().filter(|c| c.start_byte() >= region_end && !ast::exclusive_branches(write, **c)).any(is_work);
        // Setting the field back on failure (`catch { status: previous }`) releases it.
        let released = writes.iter().any(|w| {
            w.start_byte() > write.end_byte()
                && status_write(*w, &test.field, src).is_some()
                && ast::ancestors(*w).any(|a| matches!(a.kind_name(), "catch_clause" | "finally_clause"))
        });
        if work_after && !released {
            let at = tx.and_then(|t| ast::ancestors(t).find(|a| a.kind_name() == "call_expression")).unwrap_or(write);
            out.push(StatusMarker::RecordFirst { at });
        }
    }
    out
}

const API_RESOURCE: &str = "api:";

/// `octokit.rest.issues.createComment(...)`, `context.github.issues.create(...)`: a create on a
/// provider's API (not a database), named by its namespace (`api:octokit.rest.issues`).
fn api_resource_created(call: Node, src: &str) -> Option<String> {
    let effect = effects::classify(call, src, false)?;
    if effect.kind.is_db() {
        return None;
    }
    let path = ast::callee_path_shared(call, src);
    let (last, namespace) = path.split_last()?;
    (last.starts_with("create") && namespace.len() >= 2 && namespace.iter().all(|p| !p.ends_with("()")))
        .then(|| format!("{API_RESOURCE}{}", namespace.join(".")))
}

/// The tested value's lookup, for a resource created on a provider's API: a list or search on
/// the same namespace, directly or through the element found in its result (`const found =
/// comments.data.find(...)`, reported there), or a helper named for the duplicate it looks for.
fn api_lookup<'t>(func: Node<'t>, init: Node<'t>, resource: &str, src: &str, before: usize) -> Option<Node<'t>> {
    let is_lookup = |call: Node| {
        let path = ast::callee_path_shared(call, src);
        let Some((last, namespace)) = path.split_last() else { return false };
        let lower = last.to_ascii_lowercase();
        let reads = ["list", "search", "get", "find"].iter().any(|v| lower.starts_with(v));
        (reads && namespace.join(".") == resource)
            || (namespace.is_empty() && (lower.contains("duplicate") || lower.contains("exist")))
    };
    if is_lookup(init) {
        return Some(init);
    }
    // `comments.data.find(...)`: one hop to the call that produced `comments`.
    if matches!(ast::callee_name(init, src).as_deref(), Some("find" | "some" | "filter")) {
        let root = ast::callee_path(init, src).first()?.clone();
        let source = ast::find_binding_init(func, &root, src, before).map(ast::unwrap_expr)?;
        return (source.kind_name() == "call_expression" && is_lookup(source)).then_some(init);
    }
    None
}

/// A read of rows: `findFirst`/`findUnique`/`findOne`, `select(...)...`, `maybeSingle`.
fn is_row_lookup(call: Node, src: &str) -> bool {
    ast::callee_path(call, src).iter().any(|p| {
        let p = p.trim_end_matches("()").to_ascii_lowercase();
        p.starts_with("find") || matches!(p.as_str(), "select" | "maybesingle" | "single" | "first" | "where")
    })
}

/// The table a query builder or ORM call names: the argument of `from`/`insert`/`into`/
/// `table`/`insertInto` in the chain, or the model of `client.model.op(...)`.
pub fn table_of(call: Node, src: &str) -> Option<String> {
    let mut cur = Some(call);
    while let Some(c) = cur.filter(|c| c.kind_name() == "call_expression") {
        let callee = c.field("function")?;
        let name = ast::callee_name(c, src).unwrap_or_default();
        if matches!(name.as_str(), "from" | "insert" | "into" | "table" | "insertInto" | "insertOnUpdate")
            && let Some(arg) = ast::arguments(c).first()
        {
            return Some(ast::string_value(*arg, src).unwrap_or_else(|| text(*arg, src).to_string()));
        }
        cur = (callee.kind_name() == "member_expression").then(|| callee.field("object")).flatten();
    }
    let path = ast::callee_path_shared(call, src);
    (path.len() >= 3 && path.iter().all(|p| !p.ends_with("()")))
        .then(|| path[path.len() - 2].to_ascii_lowercase())
        .filter(|m| !m.starts_with('$'))
}

/// Whether any scope of the handler reads or writes a processed-event marker (hand-written
/// dedupe): the marker rules own such handlers.
pub fn has_hand_written_dedupe(project: &Project, scopes: &[Scope]) -> bool {
    scopes.iter().any(|scope| {
        let Some(func) = scope.node() else { return false };
        steps(project, scope.file(), func, scope.event_key.as_ref())
            .steps
            .iter()
            .any(|(step, _, _)| matches!(step, Step::Marker(MarkerOp::Check | MarkerOp::Claim | MarkerOp::Write)))
    })
}

/// Whether a sequential redelivery of the same event stops before the handler's work: some
/// scope checks or claims the processed marker, or writes it before its first work (a unique
/// marker row then fails the replay). What the marker leaves open — the concurrent duplicate,
/// the crash between marker and work — is the marker rules' to report, not every effect's.
pub fn stops_sequential_replays(project: &Project, scopes: &[Scope]) -> bool {
    scopes.iter().any(|scope| {
        let Some(func) = scope.node() else { return false };
        let st = steps(project, scope.file(), func, scope.event_key.as_ref());
        let first_work = st.steps.iter().position(|(step, _, _)| *step == Step::Work).unwrap_or(st.steps.len());
        st.steps.iter().enumerate().any(|(i, (step, _, _))| match step {
            Step::Marker(MarkerOp::Check | MarkerOp::Claim) => true,
            Step::Marker(MarkerOp::Write) => i < first_work,
            _ => false,
        })
    })
}

/// A marker named by a constant: the call runs after `if (labels.includes(SENT_LABEL)) return;`
/// (directly or through a local bound to that test) and the same function later writes that
/// constant (`await addLabel(issue, SENT_LABEL)`). Tags, labels and flags on the provider's
/// own object serve as the processed marker: a sequential replay finds it and stops before the
/// call; the window two concurrent deliveries leave open is `check-then-insert-race`'s.
pub fn skipped_when_marked(call: Node, func: Node, src: &str) -> bool {
    let marker_tested = |cond: Node| -> Vec<String> {
        let mut tests = vec![cond];
        for id in ast::descendants_of_kind(cond, "identifier") {
            if let Some(init) = ast::find_binding_init(func, text(id, src), src, cond.start_byte()) {
                tests.push(init);
            }
        }
        tests
            .into_iter()
            .flat_map(|t| ast::calls_in(t, true))
            .filter(|c| ast::callee_name(*c, src).is_some_and(|n| matches!(n.as_str(), "includes" | "has" | "some")))
            .flat_map(|c| constants_in(c, src))
            .collect()
    };
    let written_after = |constant: &str| {
        ast::calls_in(func, true).into_iter().any(|later| {
            later.start_byte() > call.end_byte()
                && !super::best_effort::is_logging_call(later, src)
                && ast::arguments(later).iter().any(|a| constants_in(*a, src).iter().any(|c| c == constant))
        })
    };
    ast::guard_clauses_before(call, func).into_iter().any(|clause| {
        clause.field("condition").is_some_and(|cond| marker_tested(cond).iter().any(|c| written_after(c)))
    })
}

fn constants_in(node: Node, src: &str) -> Vec<String> {
    let mut out = Vec::new();
    ast::walk(node, &mut |n| match marker_constant(n, src) {
        Some(c) => {
            out.push(c);
            false
        }
        None => true,
    });
    out
}

/// A constant that can name a marker: `STATE_LABELS.INVITE_SENT`, `WELCOME_SENT`, or a string
/// literal of a few letters (`"welcome-sent"`).
fn marker_constant(node: Node, src: &str) -> Option<String> {
    let screaming =
        |s: &str| s.len() >= 3 && s.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    match node.kind_name() {
        "member_expression" => {
            node.field("property").filter(|p| screaming(text(*p, src))).map(|_| text(node, src).to_string())
        }
        "identifier"
            if screaming(text(node, src)) && ast::parent(node).is_none_or(|p| p.kind_name() != "member_expression") =>
        {
            Some(text(node, src).to_string())
        }
        "string" => ast::string_value(node, src)
            .filter(|s| s.len() >= 4 && s.chars().any(|c| c.is_ascii_alphabetic()))
            .map(|s| format!("'{s}'")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Provider;
    use crate::source::{Dialect, SourceFile};
    use std::path::PathBuf;

    fn ops(code: &str) -> Vec<Option<MarkerOp>> {
        let file = SourceFile::new(
            PathBuf::from("t.ts"),
            code.to_string(),
            Dialect::for_path(std::path::Path::new("t.ts")).unwrap(),
        )
        .unwrap();
        let func = ast::descendants_of_kind(file.root(), "arrow_function")[0];
        let key = EventKey::new(Provider::Stripe, "${event.id}");
        ast::calls_in(func, false)
            .into_iter()
            .filter(|c| ast::callee_name(*c, &file.text).is_some_and(|n| n != "knex"))
            .map(|c| classify(c, &file.text, func, Some(&key)).map(|m| m.op))
            .collect()
    }

    /// The marker operations among a function's calls.
    fn marked(ops: Vec<Option<MarkerOp>>) -> Vec<MarkerOp> {
        ops.into_iter().flatten().collect()
    }

    #[test]
    fn attempt_bookkeeping_and_provider_apis_are_no_markers() {
        // Bumping the try counter of a deliveries row says nothing about the outcome.
        assert_eq!(
            marked(ops(
                "const f = async () => { await supabase.from('webhook_deliveries').update({ attempt_count: n + 1 }).eq('id', event.id) }"
            )),
            Vec::<MarkerOp>::new()
        );
        assert_eq!(
            marked(ops(
                "const f = async () => { await supabase.from('webhook_deliveries').update({ status: 'success' }).eq('id', event.id) }"
            )),
            vec![MarkerOp::Write]
        );
        // Stripe's meter events API is named like an events table; it is the effect.
        assert_eq!(
            marked(ops(
                "const f = async () => { await stripe.billing.meterEvents.create({ event_name: 'bytes', identifier: id }) }"
            )),
            Vec::<MarkerOp>::new()
        );
        // A raw conflict-ignoring insert whose result is tested and left on claims the event.
        assert_eq!(
            marked(ops(
                "const f = async () => { const row = await t.oneOrNone(`INSERT INTO purchases (session_id) VALUES ($1) ON CONFLICT (session_id) DO NOTHING RETURNING id`, [id]); if (!row) { return; } }"
            )),
            vec![MarkerOp::Claim]
        );
    }

    #[test]
    fn marker_reads_and_writes() {
        assert_eq!(
            ops("const f = async () => { await prisma.stripeEvent.findUnique({ where: { id: event.id } }) }"),
            vec![Some(MarkerOp::Check)]
        );
        assert_eq!(
            ops("const f = async () => { await redis.set(`evt:${event.id}`, '1', 'EX', 60, 'NX') }"),
            vec![Some(MarkerOp::Claim)]
        );
        assert_eq!(
            ops("const f = async () => { await redis.get(`customer:${event.data.object.customer}`) }"),
            vec![None]
        );
        assert_eq!(
            ops("const f = async () => { await prisma.webhookLog.create({ data: { payload: body } }) }"),
            vec![None]
        );
        assert_eq!(
            ops("const f = async () => { await prisma.processedEvent.create({ data: { id: event.id } }) }"),
            vec![Some(MarkerOp::Write)]
        );
        assert_eq!(
            ops(
                "const f = async () => { try { await prisma.processedEvent.create({ data: { id: event.id } }) } catch (e) { if (e.code === 'P2002') return } }"
            ),
            vec![Some(MarkerOp::Claim)]
        );
        assert_eq!(
            ops("const f = async () => { await knex('webhook_events').insert({ id: event.id }) }"),
            vec![Some(MarkerOp::Write)]
        );
    }
}
