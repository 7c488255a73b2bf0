//! in-memory-dedupe

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::{Applicability, Fix, wrap_guard};
use crate::model::ast::{self, text};
use crate::model::{best_effort, guards, queries};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A process-memory collection used as the dedupe store of a handler: a module-level (or
singleton-service field, or process-global `global.seen = global.seen || new Set()`)
`new Set()`, `new Map()`, `new LRUCache(...)` / `new LRU(...)`,
`new NodeCache()`, or `[]`, checked with `.has(key)` / `.get(key)` / `.includes(key)` in an
`if` and then filled with `.add(key)` / `.set(key, ...)` / `.push(key)` in the same function.

A `Map`/cache counts as a dedupe store when the value stored is a flag or a timestamp, the
store is named like one (`seen`, `processed`, `handled`, `dedupe`, `idempotency`...), or the key
is an event/delivery/message id. A memo cache (`if (cache.has(k)) return cache.get(k)`) is
not reported.

Interaction: the same code also has the shape `check-then-insert-race` looks for; an in-memory
store is the more specific diagnosis (it fails even without any race), so this rule names it and
`check-then-insert-race` is about persistent stores.

## Why retries break it
The memory is lost on every deploy, restart and crash, and is not shared between instances
or serverless invocations: a redelivery that lands on another instance, or after a restart,
runs the work again. It also marks the key before the work finishes without any crash
safety: a crash part-way leaves nothing to retry on this instance, and nothing recorded on the
others.

## Bad
```ts
const seen = new Set<string>();
app.post("/webhooks/stripe", async (req, res) => {
  if (seen.has(event.id)) return res.sendStatus(200);
  seen.add(event.id);
  await fulfil(event);
});
```

## Good
```ts
const result = await guard.run(`stripe:${event.id}`, async (tx) => fulfil(event, tx));
```

## Fix (unsafe)
When the check is a plain `if (store.has(key)) return ...` (or `continue`) and the insert a
plain statement of the handler itself, the shared guard transform wraps the handler's work in
`guard.run(eventKey, async (tx) => ...)`, removes the check and the insert, and deletes the
store's declaration when nothing else uses it. The guard's claim is durable, shared by every
instance and released on failure. Otherwise (the store is used in a callee, the check wraps the
work, no guard configured, no event key) the fix is display-only and explains the same change.
"#;

pub const RULE: Rule = Rule {
    id: "in-memory-dedupe",
    summary: "in-memory Set/Map/LRU as the dedupe store: lost on restart, not shared between instances",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Store {
    Set,
    Map,
    Array,
    /// `const seen: Record<string, boolean> = {}` used as `if (seen[id])` / `seen[id] = true`.
    Object,
}

/// Module-level and class-field stores of a file: (name as referenced, kind).
fn stores(root: Node, src: &str) -> Vec<(String, Store)> {
    let found = queries::IN_MEMORY_DEDUPE.matches_of(root, src, &["declarator", "global", "field"]);
    let group = |capture: &str| {
        let mut nodes: Vec<Node> = found.iter().filter_map(|m| m.get(capture)).collect();
        queries::tree_order(&mut nodes);
        nodes
    };
    let mut out = Vec::new();
    let module_level = |d: Node| {
        ast::parent(d).filter(|p| matches!(p.kind_name(), "lexical_declaration" | "variable_declaration")).is_some_and(
            |decl| {
                ast::parent(decl).is_some_and(|p| {
                    p.kind_name() == "program"
                        || (p.kind_name() == "export_statement"
                            && p.field("declaration") == Some(decl)
                            && ast::parent(p).is_some_and(|r| r.kind_name() == "program"))
                })
            },
        )
    };
    for d in group("declarator").into_iter().filter(|d| module_level(*d)) {
        if let (Some(n), Some(v)) = (d.field("name"), d.field("value"))
            && n.kind_name() == "identifier"
            && let Some(kind) = store_kind(v, src)
        {
            out.push((text(n, src).to_string(), kind));
        }
    }
    // Process globals: `global.seen = global.seen || new Set()`, `globalThis.seen ??= new Map()`.
    let assignments: Vec<Node> = group("global")
        .into_iter()
        .filter_map(|g| {
            let member =
                ast::parent(g).filter(|m| m.kind_name() == "member_expression" && m.field("object") == Some(g))?;
            ast::parent(member).filter(|a| {
                matches!(a.kind_name(), "assignment_expression" | "augmented_assignment_expression")
                    && a.field("left") == Some(member)
            })
        })
        .collect();
    let (plain, augmented): (Vec<Node>, Vec<Node>) =
        assignments.into_iter().partition(|a| a.kind_name() == "assignment_expression");
    for a in plain.into_iter().chain(augmented) {
        let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
            continue;
        };
        let target = text(left, src);
        let right = ast::unwrap_expr(right);
        let init = if right.kind_name() == "binary_expression"
            && right.field("left").is_some_and(|l| text(l, src) == target)
        {
            right.field("right")
        } else {
            Some(right)
        };
        if let Some(kind) = init.and_then(|i| store_kind(i, src))
            && !out.iter().any(|(n, _)| n == target)
        {
            out.push((target.to_string(), kind));
        }
    }
    // Fields of classes (singleton services): `private seen = new Set<string>()`.
    let fields = group("field").into_iter().filter_map(|f| Some((f.field("name")?, f.field("value")?)));
    for (name, v) in fields {
        if let Some(kind) = store_kind(v, src) {
            out.push((format!("this.{}", text(name, src)), kind));
        }
    }
    out
}

fn store_kind(init: Node, src: &str) -> Option<Store> {
    let init = ast::unwrap_expr(init);
    match init.kind_name() {
        "array" if init.named_child_count() == 0 => Some(Store::Array),
        "object" if init.named_child_count() == 0 => Some(Store::Object),
        "new_expression" => {
            let ctor = init.field("constructor").map(|c| text(c, src))?;
            match ctor {
                "Set" => Some(Store::Set),
                "Map" | "LRUCache" | "LRU" | "QuickLRU" | "NodeCache" | "TTLCache" => Some(Store::Map),
                _ => None,
            }
        }
        _ => None,
    }
}

fn dedupe_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    guards::is_marker_name(name)
        || ["seen", "dedup", "idempot", "processed", "handled", "done"].iter().any(|w| lower.contains(w))
}

fn key_like(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    ["event", "evt", "delivery", "messageid", "message_id", "webhook", "svix", ".id", "jobid", "job.id"]
        .iter()
        .any(|w| lower.contains(w))
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    // Stores are per file; the scopes of the handlers mostly share a few files.
    let mut per_file: Vec<(*const crate::source::SourceFile, Vec<(String, Store)>)> = Vec::new();
    for (model, scope, func) in cx.scopes() {
        let file = scope.file();
        let src = &file.text;
        let known = match per_file.iter().find(|(f, _)| std::ptr::eq(*f, std::sync::Arc::as_ptr(file))) {
            Some((_, known)) => known.clone(),
            None => {
                let known = stores(file.root(), src);
                per_file.push((std::sync::Arc::as_ptr(file), known.clone()));
                known
            }
        };
        // A store is used by its name: a function that never spells one cannot use it.
        let body = text(func, src);
        if !known.iter().any(|(name, _)| body.contains(name.trim_start_matches("this."))) {
            continue;
        }
        for (name, _) in known.iter().filter(|(n, k)| *k == Store::Object && !n.starts_with("this.")) {
            object_store(cx, model, scope, func, name, out);
        }
        let mut calls: Vec<Node> = queries::IN_MEMORY_DEDUPE
            .matches_of(func, src, &["method"])
            .iter()
            .filter_map(|m| queries::call_of_callee_name(m.get("method")?))
            .filter(|c| c.kind_name() == "call_expression" && ast::contains(func, *c))
            .collect();
        queries::tree_order(&mut calls);
        for check_call in &calls {
            let path = ast::callee_path_shared(*check_call, src);
            let Some((method, object)) = path.split_last() else { continue };
            let object = object.join(".");
            let Some((name, kind)) = known.iter().find(|(n, _)| *n == object) else { continue };
            let is_check = match kind {
                Store::Set => method == "has",
                Store::Map => method == "has" || method == "get",
                Store::Array => method == "includes" || method == "indexOf" || method == "some",
                Store::Object => false,
            };
            let Some(if_stmt) = in_if_condition(*check_call) else { continue };
            if !is_check {
                continue;
            }
            let key = ast::arguments(*check_call).first().map(|k| text(*k, src).to_string()).unwrap_or_default();
            let insert = calls.iter().find(|c| {
                c.start_byte() > check_call.end_byte() && {
                    let p = ast::callee_path(**c, src);
                    p.split_last().is_some_and(|(m, o)| {
                        o.join(".") == *name
                            && match kind {
                                Store::Set => m == "add",
                                Store::Map => m == "set",
                                Store::Array => m == "push" || m == "unshift",
                                Store::Object => false,
                            }
                    })
                }
            });
            let Some(insert) = insert else { continue };
            let consequence = if_stmt.field("consequence").map(|c| text(c, src)).unwrap_or("");
            if consequence.contains(&format!("{name}.get(")) {
                continue; // a memo cache returning the stored value
            }
            if warns_once(if_stmt, *insert, src) {
                continue;
            }
            let stored = ast::arguments(*insert).get(1).map(|v| text(*v, src).to_string()).unwrap_or_default();
            let flag_value =
                ["true", "1", "Date.now()", "new Date()", "'processed'", "\"processed\"", "'done'", "\"done\""]
                    .contains(&stored.as_str());
            let dedupe = match kind {
                Store::Set => true,
                Store::Map => flag_value || dedupe_name(name) || key_like(&key),
                Store::Array | Store::Object => dedupe_name(name) || key_like(&key),
            };
            if !dedupe {
                continue;
            }
            let message = format!(
                "`{name}` is an in-memory dedupe store: it is lost on every restart, deploy and crash and not shared between instances, so a redelivery after a restart or on another instance runs the work again"
            );
            let manual = || {
                Fix::display_only(
                    "replace the in-memory store with the guard `run`",
                    format!(
                        "wrap the work in `guard.run(key, async (tx) => ...)` keyed by the event key and delete `{name}`; the claim is then durable, shared and released on failure"
                    ),
                )
            };
            // The guard replaces the check and the insert when both are plain statements
            // of the handler itself: `if (seen.has(k)) return ...;` and `seen.add(k);`.
            let replaceable = scope.depth == 0
                && std::sync::Arc::ptr_eq(file, cx.file)
                && exits_only(if_stmt, src)
                && ast::enclosing_statement(*insert).is_some_and(|s| {
                    s.kind_name() == "expression_statement"
                        && ast::unwrap_expr(s.named_child(0).unwrap_or(s)) == *insert
                });
            let fix = || {
                if replaceable {
                    let remove =
                        [(check_call.start_byte(), check_call.end_byte()), (insert.start_byte(), insert.end_byte())];
                    let mut fix = wrap_guard::wrap_fix(cx, model, &remove, &[]);
                    if fix.applicability == Applicability::DisplayOnly {
                        manual()
                    } else {
                        if let Some(edit) = unused_declaration(file, name, &[*check_call, *insert])
                            .or_else(|| unused_global_init(file, name, &[*check_call, *insert]))
                        {
                            fix.edits.push(edit);
                            fix.edits.sort_by_key(|e| (e.start, e.end));
                        }
                        fix
                    }
                } else {
                    manual()
                }
            };
            out.push(
                Diagnostic::new(RULE.id, file, *check_call, message)
                    .in_handler(model, scope)
                    .help("claim the event key in a durable store shared by all instances: the guard `run` (DB claim in the work's transaction, or a Redis lease)")
                    .with_fix(cx, fix),
            );
        }
    }
}

/// `if (seen[key]) return` (or `key in seen`) followed by `seen[key] = ...`.
fn object_store(
    cx: &Context,
    model: &super::HandlerModel,
    scope: &crate::model::Scope,
    func: Node,
    name: &str,
    out: &mut Vec<Diagnostic>,
) {
    let file = scope.file();
    let src = &file.text;
    let reads = |n: Node| {
        (n.kind_name() == "subscript_expression" && n.field("object").is_some_and(|o| text(o, src) == name))
            || (n.kind_name() == "binary_expression"
                && n.field("operator").is_some_and(|o| text(o, src) == "in")
                && n.field("right").is_some_and(|r| text(r, src) == name))
    };
    let found = queries::IN_MEMORY_DEDUPE.matches_of(func, src, &["read", "write"]);
    let mut reads_found: Vec<Node> = found.iter().filter_map(|m| m.get("read")).collect();
    queries::tree_order(&mut reads_found);
    let Some(check) = reads_found.into_iter().find(|n| reads(*n) && in_if_condition(*n).is_some()) else { return };
    let key =
        check.field("index").or_else(|| check.field("left")).map(|k| text(k, src).to_string()).unwrap_or_default();
    let inserted = found.iter().filter_map(|m| m.get("write")).any(|a| {
        a.start_byte() > check.end_byte()
            && a.field("left").is_some_and(|l| {
                l.kind_name() == "subscript_expression" && l.field("object").is_some_and(|o| text(o, src) == name)
            })
    });
    if !inserted || !(dedupe_name(name) || key_like(&key)) {
        return;
    }
    let message = format!(
        "`{name}` is an in-memory dedupe store: it is lost on every restart, deploy and crash and not shared between instances, so a redelivery after a restart or on another instance runs the work again"
    );
    out.push(
        Diagnostic::new(RULE.id, file, check, message)
            .in_handler(model, scope)
            .help("claim the event key in a durable store shared by all instances: the guard `run` (DB claim in the work's transaction, or a Redis lease)")
            .with_fix(cx, || Fix::display_only(
                "replace the in-memory store with the guard `run`",
                format!("wrap the work in `guard.run(key, async (tx) => ...)` keyed by the event key and delete `{name}`"),
            )),
    );
}

/// Deletes `const seen = new Set()` when the check and the insert were its only uses.
fn unused_declaration(file: &crate::source::SourceFile, name: &str, uses: &[Node]) -> Option<crate::fix::Edit> {
    let src = &file.text;
    let root = file.root();
    let mut decl = None;
    let mut others = 0;
    ast::walk(root, &mut |n| {
        if n.kind_name() == "identifier" && text(n, src) == name {
            let parent = ast::parent(n);
            if parent.is_some_and(|p| p.kind_name() == "variable_declarator" && p.field("name") == Some(n)) {
                decl = parent.and_then(ast::parent);
            } else if !uses.iter().any(|u| ast::contains(*u, n)) {
                others += 1;
            }
        }
        true
    });
    let decl = decl.filter(|d| d.named_child_count() == 1 && ast::parent(d) == Some(root))?;
    if others > 0 || !crate::model::stmts::owns_its_lines(file, decl) {
        return None;
    }
    let start = file.line_start(decl.start_byte());
    Some(crate::fix::Edit::delete(start, crate::model::stmts::line_end_with_break(file, decl.end_byte())))
}

/// Deletes `global.seen = global.seen || new Set();` when the check and the insert were the
/// global's only other uses.
fn unused_global_init(file: &crate::source::SourceFile, name: &str, uses: &[Node]) -> Option<crate::fix::Edit> {
    if !name.starts_with("global") {
        return None;
    }
    let src = &file.text;
    let mut init = None;
    let mut others = 0;
    ast::walk(file.root(), &mut |n| {
        if n.kind_name() == "member_expression" && text(n, src) == name {
            let assigned = ast::parent(n).filter(|p| {
                matches!(p.kind_name(), "assignment_expression" | "augmented_assignment_expression")
                    && p.field("left") == Some(n)
            });
            if let Some(a) = assigned {
                init = ast::parent(a).filter(|s| s.kind_name() == "expression_statement");
            } else if !uses.iter().any(|u| ast::contains(*u, n)) && !init.is_some_and(|s| ast::contains(s, n)) {
                others += 1;
            }
            return false;
        }
        true
    });
    let init = init?;
    if others > 0 || !crate::model::stmts::owns_its_lines(file, init) {
        return None;
    }
    let start = file.line_start(init.start_byte());
    Some(crate::fix::Edit::delete(start, crate::model::stmts::line_end_with_break(file, init.end_byte())))
}

/// `if (...) return ...;` / `continue;`: a consequence that only leaves.
/// `if (!warned.has(name)) { warned.add(name); logger.warn(...) }`: the store only keeps a log
/// line from repeating; no work waits on it.
fn warns_once(if_stmt: Node, insert: Node, src: &str) -> bool {
    let negated = if_stmt
        .field("condition")
        .map(ast::unwrap_expr)
        .and_then(|c| if ast::kind(c) == "parenthesized_expression" { c.named_child(0) } else { Some(c) })
        .is_some_and(|c| ast::kind(c) == "unary_expression" && text(c, src).starts_with('!'));
    let Some(branch) = if_stmt.field("consequence") else { return false };
    let calls = ast::calls_in(branch, false);
    let logs: Vec<Node> = calls.iter().copied().filter(|c| best_effort::is_logging_call(*c, src)).collect();
    // Calls inside a log call's arguments (`logger.warn(describe(name))`) are part of the line.
    negated && !logs.is_empty() && calls.iter().all(|c| *c == insert || logs.iter().any(|l| ast::contains(*l, *c)))
}

fn exits_only(if_stmt: Node, _src: &str) -> bool {
    if if_stmt.field("alternative").is_some() {
        return false;
    }
    let Some(cons) = if_stmt.field("consequence") else { return false };
    let stmts: Vec<Node> = if cons.kind_name() == "statement_block" {
        ast::named_children(cons).into_iter().filter(|c| c.kind_name() != "comment").collect()
    } else {
        vec![cons]
    };
    stmts.len() == 1 && matches!(stmts[0].kind_name(), "return_statement" | "continue_statement")
}

/// The `if` statement whose condition holds `node`.
fn in_if_condition(node: Node) -> Option<Node> {
    let mut child = node;
    for anc in ast::ancestors(node) {
        if ast::is_function(anc) || anc.kind_name() == "statement_block" {
            return None;
        }
        if anc.kind_name() == "if_statement" {
            return (anc.field("condition") == Some(child)).then_some(anc);
        }
        child = anc;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_level_global_and_field_stores() {
        let text = "export const handled = new Map();\nconst seen: Set<string> = new Set();\nfunction f() { const local = new Set(); }\nglobal.done = global.done || new Set();\nglobalThis.ids ??= [];\nclass S { private processed = new Set<string>(); }\n";
        for dialect in [crate::source::Dialect::TypeScript, crate::source::Dialect::Tsx] {
            let file = crate::source::SourceFile::new("a.ts".into(), text.into(), dialect).unwrap();
            let found = stores(file.root(), &file.text);
            assert_eq!(
                found,
                [
                    ("handled".to_string(), Store::Map),
                    ("seen".to_string(), Store::Set),
                    ("global.done".to_string(), Store::Set),
                    ("globalThis.ids".to_string(), Store::Array),
                    ("this.processed".to_string(), Store::Set),
                ],
                "{dialect:?}"
            );
        }
    }
}
