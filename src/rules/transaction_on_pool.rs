//! transaction-on-pool

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::{Edit, Fix, text as fixtext};
use crate::model::ast::{self, text};
use crate::model::pg_pool::{self, Receiver};
use crate::model::{effects, reach, stmts};
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
`BEGIN` sent through a node-postgres `Pool` (`pool.query('BEGIN')`), followed by the
transaction's statements and `COMMIT` on the same pool. A receiver counts as a pool when it is
bound to `new Pool(...)` / `new pg.Pool(...)` (in the file, or exported by a project module
such as `db.ts`), typed `Pool`, or named `pool` with no other binding. A client from
`await pool.connect()`, a `Client`, or a client passed into a helper as a parameter is not a
pool. A project wrapper that forwards to a pool (`module.exports = { query: (text, params) =>
pool.query(text, params) }`, `export async function query(...) { return pool.query(...) }`, the
node-postgres docs' layout) is reported too, with a display-only fix. A single multi-statement string (`'BEGIN; ...; COMMIT'`) runs on one connection and is
not reported.

## Why retries break it
`pool.query` checks out a connection per call: `BEGIN`, the inserts and `COMMIT` can each run
on a different connection. Nothing is atomic: a crash part-way leaves half the writes
committed, the redelivery then runs into the half-written state (duplicate claim rows, partial
fulfilment), and a connection can be returned to the pool inside an open transaction, where a
later unrelated request's writes are silently held or rolled back.

## Bad
```ts
await pool.query("BEGIN");
await pool.query("INSERT INTO processed_events (id) VALUES ($1)", [event.id]);
await pool.query("UPDATE orders SET status = 'paid' WHERE id = $1", [orderId]);
await pool.query("COMMIT");
```

## Good
```ts
const client = await pool.connect();
try {
  await client.query("BEGIN");
  // ... every statement on `client`
  await client.query("COMMIT");
} catch (err) {
  await client.query("ROLLBACK");
  throw err;
} finally {
  client.release();
}
```

## Fix (unsafe)
Checks out one client (`const client = await pool.connect()`) before the statement holding
`BEGIN`, wraps everything up to the statement holding the last `COMMIT`/`ROLLBACK` in
`try { ... } finally { client.release() }`, and sends every `pool.query` in that range through
`client`. Review: helpers that receive `pool` as an argument inside the range still use the
pool; pass them the client. Display-only when the function is not `async`, when no
`COMMIT`/`ROLLBACK` follows, or when a declaration inside the range is used after it.
"#;

pub const RULE: Rule = Rule {
    id: "transaction-on-pool",
    summary: "BEGIN/COMMIT through a pg Pool: each statement may use another connection, nothing is atomic on crash or retry",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for (model, scope, func) in cx.scopes() {
        let file = scope.file();
        let src = &file.text;
        let mut reported: Vec<Node> = Vec::new();
        for call in ast::calls_in(func, false) {
            let sql = begin_sql(call, src);
            if !pg_pool::is_begin(&sql) {
                continue;
            }
            let Some(owner) = ast::enclosing_function(call) else { continue };
            if reported.contains(&owner) {
                continue;
            }
            let receiver = query_receiver(call, src);
            let kind = match receiver {
                Some(r) => pg_pool::receiver_kind(cx.project, file, r),
                // `query('BEGIN')`: a project helper forwarding to `pool.query`
                None => match reach::resolve_call(cx.project, file, call) {
                    Some(def) if def.node().is_some_and(|f| pg_pool::wraps_pool(cx.project, &def.file, f, 0)) => {
                        Receiver::PoolWrapper
                    }
                    _ => Receiver::Unknown,
                },
            };
            let through = match (kind, receiver) {
                (Receiver::Pool, Some(r)) => format!("the pool `{}`", text(r, src)),
                (Receiver::PoolWrapper, Some(r)) => format!("`{}.query` (it forwards to a pool)", text(r, src)),
                (Receiver::PoolWrapper, None) => {
                    format!("`{}` (it forwards to a pool)", ast::callee_path(call, src).join("."))
                }
                _ => continue,
            };
            reported.push(owner);
            let message = format!(
                "`BEGIN` is sent through {through}: each `query` may run on a different connection, so the transaction is not atomic; a crash part-way leaves partial writes that a retry then runs into"
            );
            let fix = || match (kind, receiver) {
                (Receiver::Pool, Some(r)) => fix(file, owner, call, r),
                _ => manual(
                    "export a way to check out one client (`getClient = () => pool.connect()`), run BEGIN … COMMIT on that client and release it in `finally`",
                ),
            };
            out.push(
                Diagnostic::new(RULE.id, file, call, message)
                    .in_handler(model, scope)
                    .help("check out one client with `await pool.connect()` and run BEGIN … COMMIT on it, releasing it in `finally`")
                    .with_fix(cx, fix),
            );
        }
    }
}

/// The SQL of a `x.query(...)` or bare `query(...)` call.
fn begin_sql(call: Node, src: &str) -> String {
    let is_query = ast::callee_name(call, src).is_some_and(|n| n == "query");
    if !is_query {
        return String::new();
    }
    match ast::arguments(call).first() {
        Some(a) if matches!(a.kind_name(), "string" | "template_string") => text(*a, src).to_string(),
        _ => effects::sql_text(call, &ast::arguments(call), src).unwrap_or_default(),
    }
}

/// The receiver of `x.query(...)`.
fn query_receiver<'t>(call: Node<'t>, src: &str) -> Option<Node<'t>> {
    let func = call.field("function")?;
    if func.kind_name() != "member_expression" || func.field("property").map(|p| text(p, src)) != Some("query") {
        return None;
    }
    func.field("object")
}

fn manual(reason: &str) -> Fix {
    Fix::display_only("run the transaction on one client from `pool.connect()`", reason.to_string())
}

fn fix(file: &SourceFile, owner: Node, begin: Node, receiver: Node) -> Fix {
    let src = &file.text;
    let is_async = (0..owner.child_count()).filter_map(|i| owner.child(i)).any(|c| c.kind_name() == "async");
    if !is_async {
        return manual("the function is not async: `await pool.connect()` cannot be added here");
    }
    let recv = text(receiver, src);
    let queries: Vec<Node> = ast::calls_in(owner, false)
        .into_iter()
        .filter(|c| query_receiver(*c, src).is_some_and(|r| text(r, src) == recv))
        .filter(|c| c.start_byte() >= begin.start_byte())
        .collect();
    let Some(end) = queries
        .iter()
        .rev()
        .find(|c| pg_pool::is_end(&effects::sql_text(**c, &ast::arguments(**c), src).unwrap_or_default()))
        .copied()
    else {
        return manual("no COMMIT/ROLLBACK follows the BEGIN in this function");
    };
    let Some(block) = ast::ancestors(begin)
        .take_while(|a| *a != owner)
        .find(|a| a.kind_name() == "statement_block" && ast::contains(*a, end))
    else {
        return manual("BEGIN and COMMIT are not in one block");
    };
    let (Some(first), Some(last)) = (stmts::child_containing(block, begin), stmts::child_containing(block, end)) else {
        return manual("BEGIN and COMMIT are not in one block");
    };
    let range: Vec<Node> = ast::named_children(block)
        .into_iter()
        .filter(|c| c.start_byte() >= first.start_byte() && c.end_byte() <= last.end_byte())
        .collect();
    let declared: Vec<String> = range.iter().flat_map(|s| stmts::declared_names(*s, src)).collect();
    let after: Vec<Node> =
        ast::named_children(block).into_iter().filter(|c| c.start_byte() > last.end_byte()).collect();
    if after.iter().any(|s| stmts::mentions_any(*s, src, &declared)) {
        return manual("a declaration inside the transaction is used after it: move it out before wrapping");
    }
    let Some(client) =
        ["client", "pgClient", "txClient"].into_iter().find(|n| !ast::mentions_identifier(owner, src, n))
    else {
        return manual("no free name for the client");
    };
    let style = file.style();
    let semi = style.semi();
    let eol = style.eol;
    let indent = file.indent_at(first.start_byte());
    let unit = &style.indent_unit;
    let open = format!("const {client} = await {recv}.connect(){semi}{eol}{indent}try {{");
    let close = format!("}} finally {{{eol}{indent}{unit}{client}.release(){semi}{eol}{indent}}}");
    let single_try = first == last
        && first.kind_name() == "try_statement"
        && first.field("finalizer").is_none()
        && first.field("handler").is_some();
    let mut edits = if single_try {
        // try { BEGIN … COMMIT } catch { ROLLBACK }: add the release as its `finally`.
        let line = file.line_start(first.start_byte());
        vec![
            Edit::insert(line, format!("{indent}const {client} = await {recv}.connect(){semi}{eol}")),
            Edit::insert(
                first.end_byte(),
                format!(" finally {{{eol}{indent}{unit}{client}.release(){semi}{eol}{indent}}}"),
            ),
        ]
    } else {
        fixtext::wrap_statements(file, block, first, last, &open, &close)
    };
    for q in queries.iter().filter(|q| q.end_byte() <= last.end_byte()) {
        if let Some(r) = query_receiver(*q, src) {
            edits.push(Edit::replace(r.start_byte(), r.end_byte(), client));
        }
    }
    let passes_pool = range
        .iter()
        .any(|s| ast::calls_in(*s, false).iter().any(|c| ast::arguments(*c).iter().any(|a| text(*a, src) == recv)));
    let mut note = format!(
        "one client from `{recv}.connect()` runs BEGIN … COMMIT and is released in `finally`; a failed transaction still needs its ROLLBACK before release"
    );
    if passes_pool {
        note.push_str(&format!(
            "; helpers called with `{recv}` inside the transaction still use the pool: pass `{client}`"
        ));
    }
    Fix::unsafe_(format!("run the transaction on one `{client}` from `{recv}.connect()`"), edits).with_note(note)
}
