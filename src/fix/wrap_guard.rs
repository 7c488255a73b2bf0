//! The central codemod: wrap a handler's work in `guard.run(key, async (tx) => { ... })`
//! (docs/rules.md, "What a fix may do"). Verification, parsing and the final response stay
//! outside; the statements that do the work move into the callback, re-indented with every
//! comment kept. Where the move would change what the code means (an early `return res...` inside the
//! work, a `break` out of it, a variable the response reads), the fix is display-only and
//! says why: a wrong rewrite of payment code is worse than none.

use super::{Edit, Fix, GuardSpec, guard_module, imports, text as ftext};
use crate::facts::{Context, HandlerModel};
use crate::model::ast::{self, text};
use crate::model::effects;
use crate::model::guards::{self, GuardKind};
use crate::model::markers;
use crate::model::payload;
use crate::model::{EventKey, Framework, Scope};
use crate::model::{providers, reach};
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::sync::Arc;
use tree_sitter::Node;

pub const TITLE: &str = "wrap the handler's work in the guard `run`";

/// Joins adjacent whole-line deletions, and drops one of the two blank lines a deletion
/// between blank lines would leave.
fn merge_deletions(file: &SourceFile, mut deletes: Vec<Edit>) -> Vec<Edit> {
    let src = &file.text;
    deletes.sort_by_key(|e| e.start);
    let mut merged: Vec<Edit> = Vec::new();
    for d in deletes {
        match merged.last_mut() {
            Some(last) if last.end == d.start => last.end = d.end,
            Some(last) if last.end > d.start => last.end = last.end.max(d.end),
            _ => merged.push(d),
        }
    }
    for d in &mut merged {
        let whole_lines = d.start == file.line_start(d.start) && (d.end == src.len() || src[..d.end].ends_with('\n'));
        if !whole_lines || d.start == 0 || d.end >= src.len() {
            continue;
        }
        let prev_line = src[file.line_start(d.start - 1)..d.start].trim();
        let prev_blank = prev_line.is_empty() || prev_line.ends_with('{');
        let after = src[d.end..].find('\n').map_or(src.len(), |i| d.end + i + 1);
        if prev_blank && src[d.end..after].trim().is_empty() {
            d.end = after;
        }
    }
    merged
}

/// `if (msg)`, `if (msg !== null)`, `if (msg != undefined)`: the condition tests that `name`
/// holds a value.
fn tests_presence(condition: Node, src: &str, name: &str) -> bool {
    let condition = ast::unwrap_expr(condition);
    let is_name = |n: Option<Node>| {
        n.map(ast::unwrap_expr).is_some_and(|n| n.kind_name() == "identifier" && text(n, src) == name)
    };
    match condition.kind_name() {
        "identifier" => text(condition, src) == name,
        "binary_expression" => {
            let operator = condition.field("operator").map(|o| text(o, src));
            let (left, right) = (condition.field("left"), condition.field("right"));
            let nothing = |n: Option<Node>| n.is_some_and(|n| matches!(text(n, src), "null" | "undefined"));
            matches!(operator, Some("!==" | "!="))
                && ((is_name(left) && nothing(right)) || (is_name(right) && nothing(left)))
        }
        _ => false,
    }
}

/// The `x.ack(...)` calls under `node` (manual acknowledgement of a consumed message).
fn ack_calls_in<'t>(node: Node<'t>, src: &str) -> Vec<Node<'t>> {
    ast::calls_in(node, false)
        .into_iter()
        .filter(|c| ast::callee_path(*c, src).last().is_some_and(|m| m == "ack"))
        .collect()
}

/// What the guard module builds, read from its source when it resolves to a project file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuardFlavor {
    Prisma,
    Postgres,
    Drizzle,
    /// A lease guard (`redisGuard`): the callback takes no transaction client.
    Lease,
    Unknown,
}

/// The note of the display-only fix shown when no guard is configured.
pub fn no_guard_note() -> String {
    "no guard is configured: create lib/guard.ts with `import { prismaGuard } from \"@retrysafe/guard\"; \
     export const guard = prismaGuard(prisma)` (or postgresGuard/drizzleGuard/redisGuard) and run \
     `retrysafe fix --guard \"@/lib/guard#guard\"` (or set `guard` in the config)"
        .to_string()
}

/// Whether `node` runs inside a guard `run` callback (the configured guard's name, or any
/// object the model recognises as a guard), or a claim transaction.
pub fn is_protected(scope: &Scope, node: Node, spec: Option<&GuardSpec>) -> bool {
    if scope.guard_at(node).is_some_and(GuardKind::dedupes) {
        return true;
    }
    in_named_guard_run(node, &scope.file().text, spec)
}

/// Inside a callback passed to `<guard>.run(...)` where `<guard>` is the configured local name.
pub fn in_named_guard_run(node: Node, src: &str, spec: Option<&GuardSpec>) -> bool {
    ast::ancestors(node).any(|anc| {
        ast::is_function(anc)
            && anc
                .parent()
                .filter(|p| p.kind_name() == "arguments")
                .and_then(ast::parent)
                .filter(|c| c.kind_name() == "call_expression")
                .is_some_and(|call| {
                    let path = ast::callee_path(call, src);
                    guards::guard_call_kind(call, src) == Some(GuardKind::Guard)
                        || (path.len() == 2 && path[1] == "run" && spec.is_some_and(|s| path[0] == s.local_name()))
                })
    })
}

/// The fix that wraps `model`'s work in the guard. `remove` holds byte ranges of marker calls
/// (in the handler's file) whose statements the guard replaces: a racy check, a marker write.
/// `include` holds byte ranges (in the handler's function) the wrapped region must cover,
/// besides the effects: a read-modify-write and the load it starts from.
pub fn wrap_fix(cx: &Context, model: &HandlerModel, remove: &[(usize, usize)], include: &[(usize, usize)]) -> Fix {
    let Some(spec) = cx.guard else {
        return Fix::display_only(TITLE, no_guard_note());
    };
    let Some(key) = model.handler.event_key.as_ref() else {
        return Fix::display_only(
            TITLE,
            "the event key of this handler could not be determined: pass the provider's event id as the \
             guard key by hand (retrysafe does not guess keys)",
        );
    };
    match plan(cx, model, spec, key, remove, include) {
        Ok(fix) => fix,
        Err(why) => Fix::display_only(TITLE, why),
    }
}

fn plan(
    cx: &Context,
    model: &HandlerModel,
    spec: &GuardSpec,
    key: &EventKey,
    remove: &[(usize, usize)],
    include: &[(usize, usize)],
) -> Result<Fix, String> {
    let file = &model.handler.file;
    let src = file.text.as_str();
    let func = model.handler.node().ok_or("the handler could not be re-read")?;
    // Never wrap twice: what is still unguarded next to an existing `run` (e.g. an effect in
    // its `catch`) needs a human, and re-wrapping would nest guards on every fix pass.
    if ast::calls_in(func, false).into_iter().any(|c| guards::guard_call_kind(c, src) == Some(GuardKind::Guard)) {
        return Err("the handler already calls the guard's `run`: move the remaining work into that callback \
                    (or give it its own key) by hand"
            .into());
    }
    // Bull's `(job, done)`: a duplicate would return without calling `done` (the job hangs
    // until it stalls) and an in-progress throw after the callback style is uncaught.
    if model.handler.framework == Framework::Bullmq
        && let Some(done) = super::callbacks::done_callback(func, src)
    {
        return Err(format!(
            "the processor completes through `{done}`: drop the callback (return a promise) first, then wrap its \
             work in the guard, so a duplicate completes and an in-progress delivery fails the job"
        ));
    }
    let body = ast::function_body(func)
        .filter(|b| b.kind_name() == "statement_block")
        .ok_or("the handler has an expression body: give it a block body, then wrap its work in the guard")?;
    if !is_async(func) {
        return Err("the handler is not async: make it async, then wrap its work in `await guard.run(...)`".into());
    }
    let deletions: Vec<Node> = removal_statements(func, src, remove);
    let deleted = |n: Node| deletions.iter().any(|d| d.id() == n.id());
    let key_fn = Some(key);
    // A marker row the handler goes on using (`update({ where: { eventId }, data: { processedAt } })`
    // after the insert): with the insert gone that call finds no row and fails every delivery.
    if let Some(other) = marker_row_reused(func, src, &deletions, key_fn) {
        // `db\n  .update(t)` reads as `db.update(t)`
        let joined: String = text(other, src).split_whitespace().collect();
        let shown = joined.find(['(', '{']).map_or(joined.as_str(), |i| &joined[..i]);
        return Err(format!(
            "the handler goes on using the marker row it inserts (`{shown}`, line {}): without the insert that \
             call finds no row; replace the marker and its later updates with the guard by hand",
            other.start_position().row + 1
        ));
    }

    // The block whose statements are the work: the handler body, a `for (const record of
    // event.Records)` body that binds the key, or a `try` block around the work.
    let mut container = key_container(func, src, key).unwrap_or(body);
    // `records.forEach(async (record) => { work })`: nothing awaits the callback, so the guard's
    // in-progress failure thrown there would be an unhandled rejection, not a retry.
    if let Some(cb) = ast::enclosing_function(container).filter(|f| f.id() != func.id())
        && let Some(call) = ast::parent(cb).filter(|a| a.kind_name() == "arguments").and_then(ast::parent)
        && ast::callee_name(call, src).is_some_and(|n| n == "forEach")
    {
        return Err("the work runs in a `forEach` callback nobody awaits: turn it into `for (const ... of ...)` \
                    first (see ack-timing), then wrap the loop body in the guard"
            .into());
    }
    let (first, last) = loop {
        // `try { verify; work } catch { answer 400 }`: the work is inside the try that verifies.
        let stmts = statements(container);
        if let Some(v) = stmts.iter().rev().find(|s| verifies(cx, file, **s)).copied()
            && v.kind_name() == "try_statement"
            && let Some(inner) = v.field("body")
            && statements(inner).iter().any(|s| verifies(cx, file, *s))
            && statements(inner).iter().any(|s| markers::contains_work(cx.project, file, *s, func, key_fn))
            && !stmts
                .iter()
                .any(|s| s.start_byte() > v.end_byte() && markers::contains_work(cx.project, file, *s, func, key_fn))
        {
            container = inner;
            continue;
        }
        // `if (req.method === "POST") { verify; work } else { answer 405 }`: the same, one level down.
        if let Some(v) = stmts.iter().rev().find(|s| verifies(cx, file, **s)).copied()
            && v.kind_name() == "if_statement"
            && let Some(inner) = v.field("consequence").filter(|c| c.kind_name() == "statement_block")
            && statements(inner).iter().any(|s| verifies(cx, file, *s))
            && statements(inner).iter().any(|s| markers::contains_work(cx.project, file, *s, func, key_fn))
            && v.field("alternative").is_none_or(|a| !markers::contains_work(cx.project, file, a, func, key_fn))
            && !stmts
                .iter()
                .any(|s| s.start_byte() > v.end_byte() && markers::contains_work(cx.project, file, *s, func, key_fn))
        {
            container = inner;
            continue;
        }
        let preamble_end = statements(container)
            .into_iter()
            .filter(|s| verifies(cx, file, *s))
            .map(|s| s.end_byte())
            .max()
            .unwrap_or(0);
        let work: Vec<Node> = statements(container)
            .into_iter()
            .filter(|s| !deleted(*s) && s.start_byte() >= preamble_end)
            .filter(|s| {
                include.iter().any(|&(a, b)| s.start_byte() <= a && b <= s.end_byte())
                    || markers::contains_work(cx.project, file, *s, func, key_fn)
            })
            .collect();
        let (Some(first), Some(last)) = (work.first().copied(), work.last().copied()) else {
            return Err("no work to wrap was found in the handler body".into());
        };
        if first.id() == last.id()
            && first.kind_name() == "try_statement"
            && let Some(inner) = first.field("body")
        {
            container = inner;
            continue;
        }
        // `if (req.method === "POST") { verify; work } else { answer 405 }`, `if (relevant.has(type))
        // { work } else { answer }`: the work is the branch; the other deliveries do nothing worth
        // recording (and an answer of theirs inside the guard would be recorded as processed).
        if first.id() == last.id()
            && first.kind_name() == "if_statement"
            && let Some(branch) = first.field("consequence").filter(|c| c.kind_name() == "statement_block")
            && let Some(other) = first.field("alternative")
            && !markers::contains_work(cx.project, file, other, func, key_fn)
            && first.field("condition").is_none_or(|c| !markers::contains_work(cx.project, file, c, func, key_fn))
        {
            container = branch;
            continue;
        }
        // `if (msg !== null) { work }`: the key reads what the condition tests, so computing
        // it before the check would throw on the value the check excludes.
        if first.id() == last.id()
            && first.kind_name() == "if_statement"
            && first.field("alternative").is_none()
            && let Some(branch) = first.field("consequence").filter(|c| c.kind_name() == "statement_block")
            && let Some(condition) = first.field("condition")
            && !markers::contains_work(cx.project, file, condition, func, key_fn)
            && key.roots().iter().any(|r| tests_presence(condition, src, r))
        {
            container = branch;
            continue;
        }
        break (first, last);
    };
    // A transaction begun and committed by hand around the work (`await conn.beginTransaction()`
    // ... `await conn.commit()`): with only the work wrapped, the guard would record the event
    // before the commit (a failed commit is then never retried) and a duplicate would leave the
    // transaction open. The guard takes the whole begin..commit span.
    let (first, mut last) = {
        let siblings = statements(container);
        let at = |n: Node| siblings.iter().position(|s| s.id() == n.id());
        let begin = at(first).and_then(|i| siblings[..i].iter().rposition(|s| manual_tx_statement(*s, src, true)));
        let commit = at(last).and_then(|j| {
            siblings[j + 1..].iter().position(|s| manual_tx_statement(*s, src, false)).map(|k| j + 1 + k)
        });
        match (begin, commit) {
            (Some(b), Some(c)) => (siblings[b], siblings[c]),
            _ => (first, last),
        }
    };
    // Consumers that acknowledge by hand (amqplib, Pub/Sub) must acknowledge a duplicate too,
    // or the broker redelivers it for ever: the ack has to run after the guard.
    let manual_ack = matches!(model.handler.framework, Framework::Amqp | Framework::Pubsub);
    let ack_calls = |n| ack_calls_in(n, src);
    let handler_ack = if manual_ack { ack_calls(func).first().copied() } else { None };
    if manual_ack {
        let siblings = statements(container);
        let region_acks = siblings
            .iter()
            .filter(|s| s.start_byte() >= first.start_byte() && s.end_byte() <= last.end_byte())
            .flat_map(|s| ack_calls(*s))
            .count();
        let last_is_ack =
            last.kind_name() == "expression_statement" && ack_calls(last).len() == 1 && first.id() != last.id();
        if region_acks > 0 {
            if region_acks == 1 && last_is_ack {
                let at = siblings.iter().position(|s| s.id() == last.id()).unwrap_or(0);
                last = siblings[at.saturating_sub(1)];
            } else {
                return Err("the work acknowledges the message inside: a duplicate would skip the ack and the broker                             would redeliver it for ever; move the ack after the guard (for processed and duplicate)                             by hand"
                    .into());
            }
        }
    }
    if in_named_guard_run(first, src, Some(spec)) || guards::guard_at(first, src).is_some_and(GuardKind::dedupes) {
        return Err("the work is already inside a guard run".into());
    }
    // A hand-written claim left before the work would still swallow the retries of a failed
    // attempt: it must go.
    for &(start, end) in remove {
        let kept = func.descendant_for_byte_range(start, end).filter(|c| {
            ast::contains(func, *c)
                && c.start_byte() < first.start_byte()
                && !deletions.iter().any(|d| ast::contains(*d, *c))
                && !is_check(cx, file, *c, func, key_fn)
        });
        if let Some(c) = kept {
            return Err(format!(
                "the hand-written claim `{}` could not be removed mechanically: replace it and its early exit with \
                 the guard by hand",
                first_line(text(c, src))
            ));
        }
    }
    if markers::contains_marker(first, src, func, key_fn, &[markers::MarkerOp::Check]) && !deleted(first) {
        return Err("the work starts with a hand-written dedupe check that could not be removed mechanically".into());
    }

    // The key must be computed before the work starts.
    for root in key.roots() {
        let declared_inside = ast::descendants_of_kind(func, "variable_declarator").into_iter().any(|d| {
            d.field("name").is_some_and(|n| text(n, src) == root)
                && d.start_byte() >= first.start_byte()
                && d.end_byte() <= last.end_byte()
        });
        if declared_inside {
            return Err(format!("the event key reads `{root}`, which is computed inside the work: move it before"));
        }
    }

    // A variable declared by the work and read later: take the reader in too, unless it is
    // the response.
    let siblings = statements(container);
    let mut index = siblings.iter().position(|s| s.id() == last.id()).unwrap_or(0);
    loop {
        let region: Vec<Node> = siblings
            .iter()
            .copied()
            .filter(|s| s.start_byte() >= first.start_byte() && s.end_byte() <= last.end_byte())
            .collect();
        let names = declared_names(&region, src);
        let Some(next) = siblings.get(index + 1).copied() else { break };
        let reads = names.iter().find(|n| !deleted(next) && ast::mentions_identifier(next, src, n));
        match reads {
            Some(name) if has_return(next) || is_response(next, src) => {
                return Err(format!(
                    "the work declares `{name}`, which the response reads: return it from the guard callback \
                     (`result.result`) by hand"
                ));
            }
            Some(_) => {
                last = next;
                index += 1;
            }
            None => {
                // Later readers further down still matter.
                let later = siblings[index + 1..]
                    .iter()
                    .find(|s| !deleted(**s) && names.iter().any(|n| ast::mentions_identifier(**s, src, n)));
                match later {
                    Some(reader) if has_return(*reader) || is_response(*reader, src) => {
                        return Err(
                            "a variable declared by the work is read by the response: return it from the guard \
                             callback by hand"
                                .into(),
                        );
                    }
                    Some(reader) => {
                        index = siblings.iter().position(|s| s.id() == reader.id()).unwrap_or(index);
                        last = *reader;
                    }
                    None => break,
                }
            }
        }
    }
    let region: Vec<Node> = siblings
        .iter()
        .copied()
        .filter(|s| s.start_byte() >= first.start_byte() && s.end_byte() <= last.end_byte())
        .collect();
    if container.id() != body.id() {
        let names = declared_names(&region, src);
        let after = container.end_byte();
        let outside = ast::named_children(body).into_iter().filter(|s| s.start_byte() >= after);
        for s in outside {
            if let Some(n) = names.iter().find(|n| ast::mentions_identifier(s, src, n)) {
                return Err(format!("the work declares `{n}`, which code after it reads: wrap it by hand"));
            }
        }
    }
    let tail = siblings.iter().rev().find(|s| !deleted(**s)).is_some_and(|s| s.id() == last.id());
    let tail_of_handler = tail && container.id() == body.id();
    let mode = early_return_mode(model);
    let mut carried = false;
    for stmt in &region {
        if deleted(*stmt) {
            continue;
        }
        control_flow_ok(*stmt, src, tail_of_handler, &mode, &mut carried)?;
    }

    // Database guards: the callback's DB calls go through the transaction client. A guard
    // module that does not exist yet is created from the client the work writes through.
    let mut module_note = None;
    let mut created = None;
    let mut client_root = None;
    let flavor = match guard_module::plan(cx.project, file, spec, &region) {
        Ok(Some(planned)) => {
            module_note = Some(if planned.create {
                format!(
                    "`{}` does not exist: it is created ({}) from `{}`, the client the work writes through",
                    spec.module,
                    planned.path.file_name().map_or(String::new(), |n| n.to_string_lossy().to_string()),
                    planned.client
                )
            } else {
                format!("`{}` is the guard module this run creates", spec.module)
            });
            if !planned.client.is_empty() {
                client_root = Some(planned.client.clone());
            }
            if planned.create {
                created = Some((planned.path, planned.text));
            }
            planned.flavor
        }
        Ok(None) => guard_flavor(cx, file, spec),
        // A wrap importing a module that does not exist would not compile.
        Err(why) => return Err(why),
    };
    let used_names: Vec<&str> = ["result", "guarded", "guardResult", "outcome"].to_vec();
    let result_name = used_names
        .into_iter()
        .find(|n| !ast::mentions_identifier(func, src, n))
        .ok_or("no free name for the result")?;
    let tx_name = if ast::mentions_identifier(func, src, "tx") { "guardTx" } else { "tx" };
    let (rewrites, rewrite_note) = db_rewrites(cx, file, spec, flavor, &region, src, tx_name, client_root.as_deref());
    let rewritten = !rewrites.is_empty();
    let placements = effect_placements(&region, src, flavor, rewritten);

    let style = file.style();
    let q = style.quote;
    let semi = style.semi();
    let eol = style.eol;
    let indent = file.indent_at(first.start_byte()).to_string();
    let param = if rewrites.is_empty() { "()".to_string() } else { format!("({tx_name})") };
    let local = spec.local_name();
    let open = format!("const {result_name} = await {local}.run({}, async {param} => {{", key.guard_key());
    let in_progress = format!("{result_name}.status === {q}in-progress{q}");
    let nest = (model.handler.framework == Framework::Nest).then(|| nest_conflict(file, func)).flatten();
    let status_line = match model.handler.framework.is_http().then(|| model.handler.respond(409)).flatten() {
        Some(r) if r.matches(';').count() > 1 || r.matches("return").count() > 1 || !r.starts_with("return") => {
            format!("if ({in_progress}) {{ {r} }}")
        }
        Some(r) => format!("if ({in_progress}) {r}"),
        // a listener's rejection is nobody's to handle: hand the message back instead
        None if manual_ack => match handler_ack.and_then(|ack| Some((ack.field("function")?, ack))) {
            Some((callee, ack)) => {
                let callee = text(callee, src);
                let receiver = callee.strip_suffix("ack").unwrap_or(callee);
                let args = ack.field("arguments").map_or("()", |a| text(a, src));
                format!("if ({in_progress}) {{ {receiver}nack{args}{semi} return{semi} }}")
            }
            None => format!("if ({in_progress}) return{semi}"),
        },
        None if nest.is_some() => format!(
            "if ({in_progress}) throw new {}({q}another attempt is still processing this delivery; retry later{q}){semi}",
            nest.as_ref().map_or("", |(exception, _)| exception.as_str())
        ),
        None => format!(
            "if ({in_progress}) throw new Error({q}another attempt is still processing this delivery; retry later{q}){semi}"
        ),
    };
    // Already answered before the work (ack first): nobody hears a 409, so no status check.
    let answered = statements(body)
        .into_iter()
        .take_while(|s| s.start_byte() < first.start_byte())
        .any(|s| s.kind_name() == "expression_statement" && is_response(s, src));
    let (open, close) = if answered {
        (open.replacen(&format!("const {result_name} = "), "", 1), format!("}}){semi}"))
    } else {
        let carry = match (&mode, carried) {
            (_, false) | (EarlyReturn::Forbidden, _) => String::new(),
            (EarlyReturn::Value, true) => format!(
                "{eol}{indent}if ({result_name}.status === {q}processed{q} && {result_name}.result) return {result_name}.result{semi}"
            ),
            (EarlyReturn::Sent(res), true) => format!("{eol}{indent}if ({res}.headersSent) return{semi}"),
            (EarlyReturn::Reply(reply), true) => format!("{eol}{indent}if ({reply}.sent) return {reply}{semi}"),
        };
        (open, format!("}}){semi}{eol}{indent}{status_line}{carry}"))
    };
    let wrap = ftext::wrap_statements(file, container, first, last, &open, &close);

    let deletes = merge_deletions(file, deletions.iter().map(|d| deletion(file, *d)).collect());
    let mut edits: Vec<Edit> = wrap
        .into_iter()
        .filter(|e| !(e.start == e.end && deletes.iter().any(|d| d.start <= e.start && e.start < d.end)))
        .collect();
    edits.extend(deletes);
    edits.extend(rewrites);
    if let Some(import) = imports::ensure_import(file, spec) {
        edits.push(import);
    }
    if !answered && let Some((_, Some(import))) = nest {
        edits.push(import);
    }
    let mut notes = vec![format!(
        "review: the work now runs once per event key {} (duplicates and in-progress retries skip it)",
        key.guard_key()
    )];
    if !deletions.is_empty() {
        notes.push("the hand-written dedupe check/marker is removed: the guard records the event".into());
    }
    if let Some(n) = module_note {
        notes.push(n);
    }
    if let Some(n) = rewrite_note {
        notes.push(n);
    }
    notes.extend(placements.iter().map(|p| p.why.clone()));
    if model.handler.provider == Some(providers::Provider::Amqp) {
        notes.push(
            "`properties.messageId` is set only by a publisher that passes `{ messageId }`: without it every \
             message shares one key and all but the first are skipped as duplicates"
                .into(),
        );
    }
    let title = match (flavor, placements.is_empty()) {
        (GuardFlavor::Unknown, _) => TITLE.to_string(),
        (_, true) => format!("{TITLE} ({})", flavor_summary(flavor, rewritten)),
        (_, false) => format!(
            "{TITLE} ({}; {})",
            flavor_summary(flavor, rewritten),
            placements.iter().map(|p| p.short.as_str()).collect::<Vec<_>>().join(", ")
        ),
    };
    let mut fix = Fix::unsafe_(title, edits).with_note(notes.join("; "));
    fix.target = Some(file.path.clone());
    fix.new_files.extend(created);
    Ok(fix)
}

/// NestJS answers a thrown `ConflictException` with 409 (a plain `Error` is a 500, which
/// providers count as a failure): the exception as the file names it and the edit that
/// adds it to the existing `@nestjs/common` named imports. None when the method answers
/// through `@Res()` or the import cannot be extended in place.
fn nest_conflict(file: &SourceFile, func: Node) -> Option<(String, Option<Edit>)> {
    let src = &file.text;
    const EXCEPTION: &str = "ConflictException";
    let params = func.field("parameters").map_or("", |p| text(p, src));
    if params.contains("@Res(") || params.contains("@Response(") {
        return None;
    }
    let root = file.root();
    let mut named: Option<Node> = None;
    let mut imported = false;
    for stmt in ast::named_children(root).into_iter().filter(|s| s.kind_name() == "import_statement") {
        let source = stmt.field("source").and_then(|s| ast::string_value(s, src));
        if source.as_deref() != Some("@nestjs/common") || text(stmt, src).starts_with("import type") {
            continue;
        }
        imported = true;
        let Some(clause) = ast::named_children(stmt).into_iter().find(|c| c.kind_name() == "import_clause") else {
            continue;
        };
        for part in ast::named_children(clause) {
            match part.kind_name() {
                "namespace_import" => {
                    let ns = ast::named_children(part).into_iter().find(|n| n.kind_name() == "identifier")?;
                    return Some((format!("{}.{EXCEPTION}", text(ns, src)), None));
                }
                "named_imports" => {
                    named = named.or(Some(part));
                    for spec in ast::named_children(part) {
                        if spec.field("name").is_some_and(|n| text(n, src) == EXCEPTION) {
                            let local = spec.field("alias").unwrap_or(spec);
                            let local = if local == spec { EXCEPTION } else { text(local, src) };
                            return Some((local.to_string(), None));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    // Another binding of the name, or an import that is not a named-import list.
    if ast::mentions_identifier(root, src, EXCEPTION) || (imported && named.is_none()) {
        return None;
    }
    let Some(named) = named else {
        if src.contains("@nestjs/common") {
            return None; // `require` or `import type` only: no list to extend
        }
        let spec = GuardSpec { module: "@nestjs/common".into(), export: EXCEPTION.into() };
        return Some((EXCEPTION.to_string(), imports::ensure_import(file, &spec)));
    };
    // `{ Controller, Post }` → `{ Controller, Post, ConflictException }`, trailing comma and
    // multi-line lists kept.
    let close = named.end_byte() - 1;
    let before = src[named.start_byte()..close].trim_end();
    let at = named.start_byte() + before.len();
    let last = ast::named_children(named).into_iter().next_back();
    let insert = match last {
        // One name a line: a new line like the last one's.
        Some(last) if before.contains('\n') => {
            let indent = file.indent_at(last.start_byte());
            let comma = if before.ends_with(',') { "," } else { "" };
            if comma.is_empty() {
                format!(",{}{indent}{EXCEPTION}", file.style().eol)
            } else {
                format!("{}{indent}{EXCEPTION}{comma}", file.style().eol)
            }
        }
        _ if before.ends_with(',') || before.ends_with('{') => format!(" {EXCEPTION}"),
        _ => format!(", {EXCEPTION}"),
    };
    Some((EXCEPTION.to_string(), Some(Edit::insert(at, insert))))
}

/// Signature verification (inline, or through a project helper): it stays before the work.
fn verifies(cx: &Context, file: &Arc<SourceFile>, stmt: Node) -> bool {
    providers::verifies_signature(text(stmt, &file.text))
        || ast::calls_in(stmt, false).into_iter().any(|c| {
            reach::resolve_call(cx.project, file, c)
                .and_then(|def| def.node().map(|n| providers::verifies_signature(text(n, &def.file.text))))
                .unwrap_or(false)
        })
}

fn is_check(cx: &Context, file: &Arc<SourceFile>, call: Node, func: Node, key: Option<&EventKey>) -> bool {
    let check = markers::Step::Marker(markers::MarkerOp::Check);
    markers::classify(call, &file.text, func, key).is_some_and(|m| m.op == markers::MarkerOp::Check)
        || markers::call_step(cx.project, file, call, 0, &mut Default::default()) == Some(check)
}

fn is_async(func: Node) -> bool {
    (0..func.child_count()).filter_map(|i| func.child(i)).any(|c| c.kind_name() == "async")
}

fn statements(block: Node) -> Vec<Node> {
    ast::named_children(block).into_iter().filter(|c| c.kind_name() != "comment").collect()
}

/// The loop or callback body that binds the key's root when it is not visible in the
/// handler body (`for (const record of event.Records)`, `Records.map(async (r) => ...)`).
fn key_container<'t>(func: Node<'t>, src: &str, key: &EventKey) -> Option<Node<'t>> {
    let params = ast::parameter_names(func, src);
    for root in key.roots() {
        if params.contains(&root) {
            continue;
        }
        let mut found = None;
        ast::walk(func, &mut |n| {
            if found.is_some() {
                return false;
            }
            if n.kind_name() == "for_in_statement"
                && let Some(left) = n.field("left")
            {
                let mut names = Vec::new();
                ast::bound_names(left, src, &mut names);
                if names.contains(&root) {
                    found = n.field("body").filter(|b| b.kind_name() == "statement_block");
                }
            } else if n != func && ast::is_function(n) && ast::parameter_names(n, src).contains(&root) {
                found = ast::function_body(n).filter(|b| b.kind_name() == "statement_block");
            }
            true
        });
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Names declared by the top-level declarations of `stmts`.
fn declared_names(stmts: &[Node], src: &str) -> Vec<String> {
    let mut out = Vec::new();
    for s in stmts {
        match s.kind_name() {
            "lexical_declaration" | "variable_declaration" => {
                for d in ast::named_children(*s).into_iter().filter(|d| d.kind_name() == "variable_declarator") {
                    if let Some(n) = d.field("name") {
                        ast::bound_names(n, src, &mut out);
                    }
                }
            }
            "function_declaration" | "class_declaration" => {
                if let Some(n) = s.field("name") {
                    out.push(text(n, src).to_string());
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether a statement returns from the enclosing function (not from a nested one).
fn has_return(stmt: Node) -> bool {
    let mut found = false;
    ast::walk(stmt, &mut |n| {
        if found || (n != stmt && ast::is_function(n)) {
            return false;
        }
        if n.kind_name() == "return_statement" {
            found = true;
        }
        true
    });
    found
}

fn is_response(stmt: Node, src: &str) -> bool {
    let t = text(stmt, src);
    ["res.", "reply.", "ctx.body", "ctx.status", "Response", "response.", "c.json", "c.text", "c.body"]
        .iter()
        .any(|m| t.contains(m))
}

/// Statements whose meaning changes inside a callback: `return` with a value (the response),
/// a bare `return` that is not at the end of the handler, `break`/`continue` leaving the
/// wrapped region, `yield`.
/// How an early `return <response>` inside the work can be carried out of the callback.
#[derive(Clone, Debug, PartialEq, Eq)]
enum EarlyReturn {
    Forbidden,
    /// Fetch-style handlers (and Hono): the callback returns the Response, the handler returns it.
    Value,
    /// Express/pages: the response is sent inside the callback; the handler stops if it was.
    Sent(String),
    /// Fastify: as `Sent`, through `reply.sent`.
    Reply(String),
}

fn early_return_mode(model: &HandlerModel) -> EarlyReturn {
    use crate::model::Framework;
    let h = &model.handler;
    match h.framework {
        f if f.returns_response() => EarlyReturn::Value,
        Framework::Hono | Framework::H3 => EarlyReturn::Value,
        Framework::Express | Framework::NextPagesApi => {
            h.response.clone().map_or(EarlyReturn::Forbidden, EarlyReturn::Sent)
        }
        Framework::Fastify => h.response.clone().map_or(EarlyReturn::Forbidden, EarlyReturn::Reply),
        _ => EarlyReturn::Forbidden,
    }
}

/// A status outside 2xx written in a response expression.
fn non_2xx(expr: &str) -> Option<u16> {
    let re = crate::regex!(r"(?:status\(|status:\s*|code\(|sendStatus\(|,\s*)(\d{3})\b");
    re.captures_iter(expr).filter_map(|c| c[1].parse::<u16>().ok()).find(|s| !(200..300).contains(s))
}

fn control_flow_ok(
    stmt: Node,
    src: &str,
    tail_of_handler: bool,
    mode: &EarlyReturn,
    carried: &mut bool,
) -> Result<(), String> {
    let mut problem: Option<String> = None;
    ast::walk(stmt, &mut |n| {
        if problem.is_some() || (n != stmt && ast::is_function(n)) {
            return false;
        }
        match n.kind_name() {
            "return_statement" => {
                let bare = n.named_child(0).is_none_or(|c| c.kind_name() == "comment");
                let expr = n.named_child(0).map(|c| text(c, src)).unwrap_or("");
                let carriable = match mode {
                    EarlyReturn::Forbidden => false,
                    EarlyReturn::Value => true,
                    EarlyReturn::Sent(res) | EarlyReturn::Reply(res) => expr.starts_with(&format!("{res}.")),
                };
                if !bare && carriable {
                    if let Some(status) = non_2xx(expr) {
                        problem = Some(format!(
                            "the work answers {status} early (`{}`): inside the guard that delivery would count as \
                             processed and never be retried; throw instead, then wrap",
                            first_line(text(n, src))
                        ));
                    } else {
                        *carried = true;
                    }
                } else if !bare {
                    problem = Some(format!(
                        "the work answers early (`{}`): inside the guard callback that return would not reach \
                         the client; restructure the early exits, then wrap",
                        first_line(text(n, src))
                    ));
                } else if !tail_of_handler {
                    problem = Some("the work contains a bare `return` that would only leave the guard callback".into());
                }
            }
            "break_statement" | "continue_statement" => {
                let labelled = n.named_child(0).is_some_and(|c| c.kind_name() == "statement_identifier");
                let is_break = n.kind_name() == "break_statement";
                let target_inside =
                    ast::ancestors(n).take_while(|a| a.id() != stmt.id()).chain(std::iter::once(stmt)).any(|a| {
                        matches!(
                            a.kind_name(),
                            "for_statement" | "for_in_statement" | "while_statement" | "do_statement"
                        ) || (is_break && a.kind_name() == "switch_statement")
                    });
                if labelled || !target_inside {
                    problem = Some(format!("`{}` would leave the guard callback", text(n, src)));
                }
            }
            "yield_expression" => problem = Some("the work yields: a generator cannot be wrapped".into()),
            _ => {}
        }
        true
    });
    problem.map_or(Ok(()), Err)
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s).trim_end_matches('{').trim()
}

/// `await conn.beginTransaction()` / `await client.query("BEGIN")` (`begin`), or the matching
/// `await conn.commit()` / `await client.query("COMMIT")`, as a statement of its own.
fn manual_tx_statement(stmt: Node, src: &str, begin: bool) -> bool {
    if stmt.kind_name() != "expression_statement" {
        return false;
    }
    let t = text(stmt, src);
    if begin {
        crate::regex!(r#"^(await\s+)?[\w$.]+\.(beginTransaction|startTransaction)\(\s*\)"#).is_match(t)
            || crate::regex!(r#"^(await\s+)?[\w$.]+\.query\(\s*['"`](BEGIN|START TRANSACTION)\b"#).is_match(t)
    } else {
        crate::regex!(r#"^(await\s+)?[\w$.]+\.commit\(\s*\)"#).is_match(t)
            || crate::regex!(r#"^(await\s+)?[\w$.]+\.query\(\s*['"`]COMMIT\b"#).is_match(t)
    }
}

/// `try { await marker.create(...) } catch (e) { if (e.code !== 11000) log(e) }`: the `try`
/// exists only for the marker write (its catch tolerates the duplicate-key error), so it goes
/// with it rather than leaving an empty `try {}` and a catch about a write that is gone.
fn sole_statement_try(stmt: Node) -> Option<Node> {
    let block = ast::parent(stmt).filter(|b| b.kind_name() == "statement_block")?;
    let try_stmt = ast::parent(block).filter(|t| t.kind_name() == "try_statement")?;
    let only = ast::named_children(block).into_iter().all(|n| n.id() == stmt.id());
    (only
        && try_stmt.field("body").is_some_and(|b| b.id() == block.id())
        && try_stmt.field("finalizer").is_none()
        && ast::parent(try_stmt).is_some_and(|p| p.kind_name() == "statement_block"))
    .then_some(try_stmt)
}

/// The statements to delete for the marker calls in `remove`: the `if (await check) return`
/// statement, a `const seen = await check` with the `if (seen) return` after it, a marker
/// write statement. A shape that cannot be removed cleanly is left in place.
fn removal_statements<'t>(func: Node<'t>, src: &str, remove: &[(usize, usize)]) -> Vec<Node<'t>> {
    let mut out: Vec<Node> = Vec::new();
    for &(start, end) in remove {
        if start < func.start_byte() || end > func.end_byte() {
            continue;
        }
        let Some(call) = func.descendant_for_byte_range(start, end) else { continue };
        let Some(stmt) = ast::enclosing_statement(call) else { continue };
        if ast::parent(stmt).is_none_or(|p| p.kind_name() != "statement_block") || !ast::contains(func, stmt) {
            continue;
        }
        match stmt.kind_name() {
            "if_statement"
                if stmt.field("alternative").is_none()
                    && stmt.field("condition").is_some_and(|c| ast::contains(c, call))
                    && exits_only(stmt, src) =>
            {
                out.push(stmt)
            }
            "expression_statement" => {
                let expr = stmt.named_child(0).map(ast::unwrap_expr);
                if expr.is_some_and(|e| {
                    ast::contains(e, call) && text(e, src).starts_with(text(call, src).split('(').next().unwrap_or(""))
                }) {
                    out.push(sole_statement_try(stmt).unwrap_or(stmt));
                }
            }
            "lexical_declaration" | "variable_declaration" => {
                let decls: Vec<Node> =
                    ast::named_children(stmt).into_iter().filter(|d| d.kind_name() == "variable_declarator").collect();
                let [decl] = decls.as_slice() else { continue };
                let Some(pattern) = decl.field("name") else { continue };
                let mut names = Vec::new();
                ast::bound_names(pattern, src, &mut names);
                if names.is_empty() {
                    continue;
                }
                let next = stmt.next_named_sibling().filter(|n| n.kind_name() != "comment");
                let gate = next.filter(|n| {
                    n.kind_name() == "if_statement"
                        && n.field("alternative").is_none()
                        && n.field("condition")
                            .is_some_and(|c| names.iter().any(|name| ast::mentions_identifier(c, src, name)))
                        && exits_only(*n, src)
                });
                let readers = ast::descendants_of_kind(func, "identifier")
                    .into_iter()
                    .filter(|i| names.iter().any(|n| n == text(*i, src)) && !ast::contains(stmt, *i))
                    .filter(|i| gate.is_none_or(|g| !ast::contains(g, *i)))
                    .count();
                if readers == 0 {
                    out.push(stmt);
                    if let Some(g) = gate {
                        out.push(g);
                    }
                }
            }
            _ => {}
        }
    }
    // A `const id = req.headers.get(...)` read only by the removed code goes too.
    let mut extra = Vec::new();
    for decl in ast::descendants_of_kind(func, "lexical_declaration") {
        let decls: Vec<Node> =
            ast::named_children(decl).into_iter().filter(|d| d.kind_name() == "variable_declarator").collect();
        let ([d], Some(parent)) = (decls.as_slice(), ast::parent(decl)) else { continue };
        if parent.kind_name() != "statement_block" || out.iter().any(|o| o.id() == decl.id()) {
            continue;
        }
        let (Some(name), Some(init)) = (d.field("name"), d.field("value")) else {
            continue;
        };
        let init_text = text(init, src);
        let pure = name.kind_name() == "identifier"
            && !init_text.contains("await")
            && ast::calls_in(init, false)
                .iter()
                .all(|c| ast::callee_name(*c, src).is_some_and(|n| matches!(n.as_str(), "get" | "header" | "String")));
        if !pure {
            continue;
        }
        let name = text(name, src);
        let readers: Vec<Node> = ast::descendants_of_kind(func, "identifier")
            .into_iter()
            .filter(|i| text(*i, src) == name && !ast::contains(decl, *i))
            .collect();
        if !readers.is_empty() && readers.iter().all(|r| out.iter().any(|o| ast::contains(*o, *r))) {
            extra.push(decl);
        }
    }
    out.extend(extra);
    // A `try` every statement of which goes (`try { const seen = await check(); if (seen) return }
    // catch (e) { warn(e) }`) goes whole, rather than leaving `try {}` and a catch about nothing.
    let emptied: Vec<Node> = ast::descendants_of_kind(func, "try_statement")
        .into_iter()
        .filter(|t| {
            t.field("finalizer").is_none()
                && ast::parent(t).is_some_and(|p| p.kind_name() == "statement_block")
                && t.field("body").is_some_and(|b| {
                    let stmts: Vec<Node> =
                        ast::named_children(b).into_iter().filter(|n| n.kind_name() != "comment").collect();
                    !stmts.is_empty() && stmts.iter().all(|st| out.iter().any(|o| o.id() == st.id()))
                })
        })
        .collect();
    out.retain(|o| !emptied.iter().any(|t| ast::contains(*t, *o)));
    out.extend(emptied);
    out.sort_by_key(|n| n.start_byte());
    out.dedup_by_key(|n| n.id());
    out
}

/// A call outside the deleted statements that names the table of a marker write they delete.
fn marker_row_reused<'t>(
    func: Node<'t>,
    src: &str,
    deletions: &[Node<'t>],
    key: Option<&EventKey>,
) -> Option<Node<'t>> {
    let in_deleted = |n: Node| deletions.iter().any(|d| ast::contains(*d, n));
    let tables: Vec<String> = deletions
        .iter()
        .flat_map(|d| ast::calls_in(*d, false))
        .filter(|c| markers::classify(*c, src, func, key).is_some_and(|m| m.op != markers::MarkerOp::Check))
        .filter_map(|c| markers::table_of(c, src))
        .collect();
    if tables.is_empty() {
        return None;
    }
    // Drizzle's `db.update(table)` / `db.delete(table)` name the table as their argument.
    let named = |c: Node| {
        markers::table_of(c, src).or_else(|| {
            crate::regex!(r"\.(?:update|delete)\(\s*([A-Za-z_$][\w$]*)\s*\)")
                .captures(text(c, src))
                .map(|m| m[1].to_string())
        })
    };
    ast::calls_in(func, false)
        .into_iter()
        .find(|c| !in_deleted(*c) && named(*c).is_some_and(|t| tables.iter().any(|m| m.eq_ignore_ascii_case(&t))))
}

/// An `if` whose consequence only answers and returns (or is a bare return).
fn exits_only(stmt: Node, src: &str) -> bool {
    let Some(cons) = stmt.field("consequence") else { return false };
    let inner = statements(cons);
    let stmts = if cons.kind_name() == "statement_block" { inner } else { vec![cons] };
    stmts.last().is_some_and(|s| s.kind_name() == "return_statement")
        && stmts
            .iter()
            .all(|s| s.kind_name() == "return_statement" || is_response(*s, src) || text(*s, src).contains("log"))
}

/// Deletes a statement with its line(s) when it stands alone on them.
fn deletion(file: &SourceFile, stmt: Node) -> Edit {
    let src = &file.text;
    let line_start = file.line_start(stmt.start_byte());
    let alone_before = src[line_start..stmt.start_byte()].trim().is_empty();
    let line_end = ftext::line_end(file, stmt.end_byte());
    let alone_after = src[stmt.end_byte()..line_end].trim().is_empty();
    if alone_before && alone_after {
        let next_line = |at: usize| src[at..].find('\n').map_or(src.len(), |i| at + i + 1);
        let mut start = line_start;
        // The block of line comments directly above describes the statement: it goes with it.
        let mut above = stmt.prev_sibling();
        while let Some(prev) = above.filter(|p| p.kind_name() == "comment" && text(*p, src).starts_with("//"))
            && prev.end_byte() <= start
            && file.line_col(prev.start_byte()).0 + 1 == file.line_col(start).0
            && src[file.line_start(prev.start_byte())..prev.start_byte()].trim().is_empty()
        {
            start = file.line_start(prev.start_byte());
            above = prev.prev_sibling();
        }
        Edit::delete(start, next_line(line_end))
    } else {
        Edit::delete(stmt.start_byte(), stmt.end_byte())
    }
}

/// What the guard module builds, from its source (`prismaGuard(prisma)` ...).
pub fn guard_flavor(cx: &Context, file: &SourceFile, spec: &GuardSpec) -> GuardFlavor {
    guard_source(cx, file, spec).map_or(GuardFlavor::Unknown, |t| flavor_of(&t))
}

/// The guard module's text: the project file it resolves to, or the one this run creates.
fn guard_source(cx: &Context, file: &SourceFile, spec: &GuardSpec) -> Option<String> {
    match cx.project.resolve(&file.path, &spec.module) {
        Some(path) => Some(cx.project.load(&path).ok()?.text.clone()),
        None => cx.project.virtual_text(&cx.project.planned_module_path(&file.path, &spec.module)?),
    }
}

pub(crate) fn flavor_of(t: &str) -> GuardFlavor {
    if t.contains("prismaGuard") {
        GuardFlavor::Prisma
    } else if t.contains("postgresGuard") {
        GuardFlavor::Postgres
    } else if t.contains("drizzleGuard") {
        GuardFlavor::Drizzle
    } else if t.contains("redisGuard") {
        GuardFlavor::Lease
    } else {
        GuardFlavor::Unknown
    }
}

fn flavor_summary(flavor: GuardFlavor, rewritten: bool) -> &'static str {
    match (flavor, rewritten) {
        (GuardFlavor::Lease, _) => "a Redis lease: nothing here rolls back",
        (_, true) => "claim and writes in one transaction, on `tx`",
        (_, false) => "the claim in its own transaction",
    }
}

/// Where an effect that cannot roll back stands once the work is wrapped, and why.
struct Placement {
    short: String,
    why: String,
}

/// Effects that cannot roll back are never trusted to the database transaction: a keyed
/// provider call is made harmless by its key; a keyless one inside a transaction belongs in
/// the outbox (its send would be repeated after a rollback and holds the transaction open).
fn effect_placements(region: &[Node], src: &str, flavor: GuardFlavor, in_transaction: bool) -> Vec<Placement> {
    let mut out: Vec<Placement> = Vec::new();
    for stmt in region {
        for call in ast::calls_in(*stmt, false) {
            let Some(e) = effects::classify(call, src, false) else { continue };
            if !e.kind.is_external()
                || e.kind == effects::EffectKind::Possible
                || e.kind == effects::EffectKind::Enqueue
            {
                continue;
            }
            let label = e.label.clone();
            if out.iter().any(|p| p.short.starts_with(&format!("`{label}`"))) {
                continue;
            }
            // A key cannot make a repeat of another request a no-op: such a call is placed as
            // if it took no key (effect-missing-idempotency-key declines it too).
            let per_attempt = if e.key.is_none() { payload::per_attempt_value(&e, src) } else { None };
            let unkeyable = per_attempt.as_ref().map_or(String::new(), |v| {
                format!(", and no idempotency key can protect it: its payload reads {}", v.sentence())
            });
            let unkeyed = per_attempt
                .as_ref()
                .map_or(String::new(), |v| format!(" (no key: `{}` is new on every attempt)", v.shown));
            let placement = if e.key.is_some() {
                Placement {
                    short: format!("`{label}` keyed"),
                    why: format!(
                        "`{label}` cannot roll back: its provider idempotency key makes a repeat after a rolled-back attempt a no-op"
                    ),
                }
            } else if e.sdk.accepts_key() && per_attempt.is_none() {
                Placement {
                    short: format!("`{label}` needs its idempotency key"),
                    why: format!(
                        "`{label}` cannot roll back: it takes a provider idempotency key (effect-missing-idempotency-key adds one); with it a repeat is a no-op"
                    ),
                }
            } else if flavor == GuardFlavor::Lease {
                Placement {
                    short: format!("`{label}` under the lease{unkeyed}"),
                    why: format!(
                        "`{label}` cannot roll back: the lease keeps a concurrent duplicate from sending it twice; a crash between it and the guard's record repeats it{unkeyable}"
                    ),
                }
            } else if in_transaction
                || matches!(flavor, GuardFlavor::Prisma | GuardFlavor::Postgres | GuardFlavor::Drizzle)
            {
                Placement {
                    short: format!("`{label}` → outbox{unkeyed}"),
                    why: format!(
                        "`{label}` cannot roll back and now runs inside the database transaction (held open over the network; a failure after it rolls back and repeats it){unkeyable}: enqueue it with `createOutbox` from @retrysafe/guard through `tx` and send it from the dispatcher"
                    ),
                }
            } else {
                continue;
            };
            out.push(placement);
        }
    }
    out
}

/// `prismaGuard(client`: the guard module's own name for the client it wraps (one pattern per
/// guard function, compiled once).
fn client_argument(fn_name: &str) -> &'static regex::Regex {
    match fn_name {
        "prismaGuard" => crate::regex!(r"prismaGuard\(\s*([A-Za-z_$][\w$]*)"),
        "drizzleGuard" => crate::regex!(r"drizzleGuard\(\s*([A-Za-z_$][\w$]*)"),
        _ => crate::regex!(r"postgresGuard\(\s*([A-Za-z_$][\w$]*)"),
    }
}

/// Rewrites of the root client to the transaction client inside the wrapped region.
#[allow(clippy::too_many_arguments)]
fn db_rewrites(
    cx: &Context,
    file: &SourceFile,
    spec: &GuardSpec,
    flavor: GuardFlavor,
    region: &[Node],
    src: &str,
    tx: &str,
    client_root: Option<&str>,
) -> (Vec<Edit>, Option<String>) {
    let (fn_name, mut roots): (&str, Vec<String>) = match flavor {
        GuardFlavor::Prisma => ("prismaGuard", vec!["prisma".into(), "db".into()]),
        GuardFlavor::Drizzle => ("drizzleGuard", vec!["db".into()]),
        GuardFlavor::Postgres => ("postgresGuard", vec!["pool".into(), "db".into()]),
        GuardFlavor::Lease | GuardFlavor::Unknown => return (Vec::new(), None),
    };
    if let Some(t) = guard_source(cx, file, spec)
        && let Some(c) = client_argument(fn_name).captures(&t)
    {
        roots.push(c[1].to_string());
    }
    roots.extend(client_root.map(str::to_string));
    let nested_tx = region.iter().any(|s| {
        ast::calls_in(*s, false).into_iter().any(|c| {
            matches!(guards::guard_call_kind(c, src), Some(GuardKind::Transaction | GuardKind::ClaimTransaction))
        })
    });
    if nested_tx {
        return (
            Vec::new(),
            Some("the work opens its own transaction: move its statements onto the guard's `tx` by hand".into()),
        );
    }
    let mut edits = Vec::new();
    for stmt in region {
        ast::walk(*stmt, &mut |n| {
            if n.kind_name() != "identifier" || !roots.iter().any(|r| r == text(n, src)) {
                return true;
            }
            let Some(member) = ast::parent(n).filter(|p| p.kind_name() == "member_expression") else { return true };
            if member.field("object").is_none_or(|o| o.id() != n.id()) {
                return true;
            }
            let prop = member.field("property").map(|p| text(p, src)).unwrap_or("");
            let ok = match flavor {
                GuardFlavor::Prisma => {
                    (!prop.starts_with('$') || prop.starts_with("$executeRaw") || prop.starts_with("$queryRaw"))
                        && ast::parent(member)
                            .is_some_and(|g| matches!(g.kind_name(), "member_expression" | "call_expression"))
                }
                GuardFlavor::Drizzle => {
                    matches!(prop, "insert" | "update" | "delete" | "select" | "selectDistinct" | "query" | "execute")
                }
                GuardFlavor::Postgres => prop == "query",
                _ => false,
            };
            if ok {
                edits.push(Edit::replace(n.start_byte(), n.end_byte(), tx));
            }
            true
        });
    }
    let note = (!edits.is_empty()).then(|| {
        "database calls written in this handler now use the guard's transaction client; helpers it calls still use \
         the root client: pass `tx` to them"
            .to_string()
    });
    (edits, note)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flavors() {
        assert_eq!(flavor_of("export const guard = prismaGuard(prisma)"), GuardFlavor::Prisma);
        assert_eq!(flavor_of("export default redisGuard(redis, { ttlSeconds: 60 })"), GuardFlavor::Lease);
        assert_eq!(flavor_of("export const guard = makeGuard()"), GuardFlavor::Unknown);
    }
}
