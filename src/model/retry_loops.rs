//! In-code retry loops: `for`/`while`/`do` loops that catch a failure and go round again,
//! retry-library calls (`p-retry`, `async-retry`, `exponential-backoff`, `promise-retry`), and
//! functions that call themselves again from their own `catch`.

use super::ast::{self, text};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryKind {
    /// `for (let attempt = 0; ...) { try { ...; return } catch { ... } }`
    Loop,
    /// `pRetry(async () => ..., opts)`, `retry(async (bail) => ..., opts)`
    Library,
    /// `catch (e) { return send(payload) }` inside `send` itself.
    Recursion,
}

#[derive(Clone, Copy, Debug)]
pub struct RetryLoop<'t> {
    pub kind: RetryKind,
    /// The loop statement, the library call, or the recursive function.
    pub node: Node<'t>,
    /// What runs on every attempt: the loop body, the callback, the function.
    pub body: Node<'t>,
}

impl<'t> RetryLoop<'t> {
    /// The statement a value computed once for all attempts goes before.
    pub fn statement(&self) -> Option<Node<'t>> {
        match self.kind {
            RetryKind::Loop => Some(self.node),
            RetryKind::Library => ast::enclosing_statement(self.node),
            RetryKind::Recursion => None,
        }
    }
}

const LIBRARIES: &[&str] = &[
    "pRetry",
    "retry",
    "asyncRetry",
    "promiseRetry",
    "backOff",
    "withRetry",
    "withRetries",
    "retryAsync",
    "retryWithBackoff",
    "exponentialBackoff",
    "retryPromise",
];

/// Retry loops written in `func` (nested callbacks included).
pub fn find<'t>(func: Node<'t>, src: &str) -> Vec<RetryLoop<'t>> {
    // Two rules ask about every scope, and the query cursor behind this is costly: the loops
    // of a function are found once per analysis and remembered with its tree.
    #[derive(Hash, PartialEq, Eq)]
    struct LoopsOf {
        at: u32,
        src: (usize, usize),
    }
    crate::syntax::node_index::NodeIndex::remembered(
        func,
        |at| LoopsOf { at, src: (src.as_ptr() as usize, src.len()) },
        || find_once(func, src),
        |index, l| Some((l.kind, index.position_of(l.node)?, index.position_of(l.body)?)),
        |index, (kind, node, body)| RetryLoop {
            kind,
            node: index.node_at(node, func),
            body: index.node_at(body, func),
        },
    )
}

fn find_once<'t>(func: Node<'t>, src: &str) -> Vec<RetryLoop<'t>> {
    let mut out = Vec::new();
    for candidate in candidates(func, src) {
        match candidate {
            Candidate::Loop { node, body } => {
                if is_retry_loop(node, src) {
                    out.push(RetryLoop { kind: RetryKind::Loop, node, body });
                }
            }
            Candidate::Library { node, callee, callback } => {
                if is_retry_library(node, text(callee, src), src) {
                    out.push(RetryLoop { kind: RetryKind::Library, node, body: callback });
                }
            }
        }
    }
    if let Some(name) = function_name(func, src)
        && recurses_on_failure(func, &name, src)
    {
        out.push(RetryLoop { kind: RetryKind::Recursion, node: func, body: func });
    }
    out
}

enum Candidate<'t> {
    Loop { node: Node<'t>, body: Node<'t> },
    Library { node: Node<'t>, callee: Node<'t>, callback: Node<'t> },
}

/// The matches of transforms/retry_loops.scm in `func`, in the order a query cursor yields
/// them (a match is complete at its last capture: a loop's body, a call's callback). A
/// query cursor moving through every scope cost more than the rest of the rule; this reads
/// the tree's node list instead, and a test holds it to the query.
fn candidates<'t>(func: Node<'t>, src: &str) -> Vec<Candidate<'t>> {
    let index = crate::syntax::node_index::built_for(func);
    let wanted = |_, kind| matches!(kind, "for_statement" | "while_statement" | "do_statement" | "call_expression");
    let Some(nodes) = index.subtree_with_parents(func, wanted) else { return Vec::new() };
    let retry_name = crate::regex!(r"(?i)retr(y|ies)|backoff");
    let mut found: Vec<(usize, Candidate<'t>)> = Vec::new();
    for (_, node, _) in nodes {
        match ast::kind(node) {
            "for_statement" | "while_statement" | "do_statement" => {
                if let Some(body) = node.field("body").filter(|b| b.is_named() && !b.is_error()) {
                    found.push((body.start_byte(), Candidate::Loop { node, body }));
                }
            }
            "call_expression" => {
                let callee = node.field("function").and_then(|f| match ast::kind(f) {
                    "identifier" => Some(f),
                    "member_expression" => f.field("property").filter(|p| ast::kind(*p) == "property_identifier"),
                    _ => None,
                });
                let callback = node
                    .field("arguments")
                    .filter(|a| ast::kind(*a) == "arguments")
                    .and_then(|a| a.named_child(0))
                    .filter(|c| {
                        matches!(ast::kind(*c), "arrow_function" | "function_expression" | "generator_function")
                    });
                if let (Some(callee), Some(callback)) = (callee, callback)
                    && retry_name.is_match(text(callee, src))
                {
                    found.push((callback.start_byte(), Candidate::Library { node, callee, callback }));
                }
            }
            _ => {}
        }
    }
    // Stable: candidates completing at the same byte keep their tree order.
    found.sort_by_key(|(completes, _)| *completes);
    found.into_iter().map(|(_, c)| c).collect()
}

/// A retry library or project retry helper called as `name(...)` or `object.name(...)`.
fn is_retry_library(call: Node, name: &str, src: &str) -> bool {
    (LIBRARIES.contains(&name) || retry_helper_name(name)) && ast::callee_path(call, src).len() <= 2
}

/// A project helper named for retrying its callback: `retryStripeCall(fn)`, `withRetryPolicy(fn)`,
/// `retryRec(fn)`; not hooks or predicates (`onRetry`, `shouldRetry`, `scheduleRetry`).
fn retry_helper_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    (lower.contains("retry") || lower.contains("retries") || lower.contains("backoff"))
        && ![
            "on", "should", "is", "can", "get", "set", "has", "max", "handle", "schedule", "log", "record", "mark",
            "count", "enqueue", "queue", "add", "create", "parse", "compute", "calc",
        ]
        .iter()
        .any(|p| lower.starts_with(p))
}

/// A loop (not `for...of` over items) whose body catches a failure and goes round again
/// until an attempt succeeds.
pub fn is_retry_loop(node: Node, src: &str) -> bool {
    if !matches!(node.kind_name(), "for_statement" | "while_statement" | "do_statement") {
        return false;
    }
    let Some(body) = node.field("body") else { return false };
    let tries: Vec<Node> = own_descendants(body, "try_statement");
    let header = header_text(node, src);
    let attempt_named = crate::regex!(r"(?i)attempt|retr(y|ies)|tries|tried").is_match(&header);
    tries.into_iter().any(|t| {
        let Some(block) = t.field("body") else { return false };
        let Some(handler) = t.field("handler") else { return false };
        let continues = handler.field("body").is_none_or(|b| {
            ast::named_children(b)
                .into_iter()
                .rfind(|s| s.kind_name() != "comment")
                .is_none_or(|s| !matches!(s.kind_name(), "throw_statement" | "break_statement" | "return_statement"))
        });
        let exits = !own_descendants(block, "return_statement").is_empty()
            || !own_descendants(block, "break_statement").is_empty()
            || assigns_condition_flag(block, node, src);
        let cond = node.field("condition").map(|c| text(c, src).trim().to_string()).unwrap_or_default();
        let cond = cond.trim_matches(|c| c == '(' || c == ')' || c == ';').trim().to_string();
        let catch_text = text(handler, src);
        let signal = attempt_named
            || cond.is_empty()
            || cond == "true"
            || assigns_condition_flag(block, node, src)
            || crate::regex!(r"(?i)attempt|retr(y|ies)|tries|backoff|sleep|delay|wait|setTimeout|\bcontinue\b")
                .is_match(catch_text)
            || crate::regex!(r"(?i)<=?\s*\d+\s*$|max|retries|attempts").is_match(&cond);
        continues && ((exits && signal) || attempt_named)
    })
}

/// `while (!done) { try { ...; done = true } catch {} }`
fn assigns_condition_flag(block: Node, lp: Node, src: &str) -> bool {
    let Some(cond) = lp.field("condition") else { return false };
    let mut names = Vec::new();
    ast::walk(cond, &mut |n| {
        if n.kind_name() == "identifier" {
            names.push(text(n, src).to_string());
        }
        true
    });
    let mut found = false;
    ast::walk(block, &mut |n| {
        if n.kind_name() == "assignment_expression"
            && n.field("left").is_some_and(|l| names.iter().any(|x| x == text(l, src)))
        {
            found = true;
        }
        !found
    });
    found
}

fn header_text(node: Node, src: &str) -> String {
    let mut out = String::new();
    for field in ["initializer", "condition", "increment"] {
        if let Some(f) = node.child_by_field_name(field) {
            out.push_str(text(f, src));
            out.push(' ');
        }
    }
    out
}

/// Descendants of `kind` not inside a nested function (nor, for a `break` or a `try`, a nested
/// loop: a `try` in an inner loop over items isolates each item, it does not retry the outer
/// loop's pass).
fn own_descendants<'t>(node: Node<'t>, kind: &str) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    ast::walk(node, &mut |n| {
        if n != node
            && (ast::is_function(n)
                || (matches!(kind, "break_statement" | "try_statement")
                    && matches!(
                        n.kind_name(),
                        "for_statement" | "for_in_statement" | "while_statement" | "do_statement" | "switch_statement"
                    )))
        {
            return false;
        }
        if n.kind_name() == kind {
            out.push(n);
        }
        true
    });
    out
}

fn function_name(func: Node, src: &str) -> Option<String> {
    if let Some(n) = func.field("name") {
        return Some(text(n, src).to_string());
    }
    let decl = ast::parent(func).filter(|p| p.kind_name() == "variable_declarator")?;
    decl.field("name").filter(|n| n.kind_name() == "identifier").map(|n| text(n, src).to_string())
}

/// The function calls itself from a `catch` clause or a `.catch(...)` callback.
fn recurses_on_failure(func: Node, name: &str, src: &str) -> bool {
    let mut found = false;
    ast::walk(func, &mut |n| {
        if found {
            return false;
        }
        let failure_path = n.kind_name() == "catch_clause"
            || (n.kind_name() == "call_expression"
                && ast::callee_name(n, src).is_some_and(|c| c == "catch")
                && n.field("function").is_some_and(|f| f.kind_name() == "member_expression"));
        if failure_path {
            let scan = if n.kind_name() == "catch_clause" { n } else { n.field("arguments").unwrap_or(n) };
            found = ast::calls_in(scan, false).into_iter().any(|c| {
                let path = ast::callee_path_shared(c, src);
                (path.len() == 1 && path[0] == name || path.len() == 2 && path[0] == "this" && path[1] == name)
                    && !falls_back_to_fixed_input(c, scan, src)
            });
        }
        true
    });
    found
}

/// A recursive call with a fixed input under a test that rules that input out
/// (`if (timezone !== "UTC") return getFormatter("UTC")`): one step to a default, not a retry.
/// Also a call, under a test of one failure, with an input the failure branch builds afresh
/// from a fixed text (`if (error.status === 410) { const fresh = \`${base}/delta\`; return
/// this.sync(data, fresh) }`): a different request to fall back to, not the failed one again.
fn falls_back_to_fixed_input(call: Node, within: Node, src: &str) -> bool {
    let literals: Vec<&str> = ast::arguments(call)
        .into_iter()
        .map(ast::unwrap_expr)
        .filter(|a| matches!(a.kind_name(), "string" | "number"))
        .map(|a| text(a, src))
        .collect();
    let under_test = |matches: &dyn Fn(&str) -> bool| {
        ast::ancestors(call)
            .take_while(|a| a.id() != within.id())
            .any(|a| a.kind_name() == "if_statement" && a.field("condition").is_some_and(|c| matches(text(c, src))))
    };
    if !literals.is_empty() && under_test(&|cond| literals.iter().any(|l| cond.contains(l))) {
        return true;
    }
    let built_afresh = ast::arguments(call).into_iter().map(ast::unwrap_expr).any(|a| {
        a.kind_name() == "identifier"
            && ast::find_binding_init(within, text(a, src), src, call.start_byte())
                .map(ast::unwrap_expr)
                .is_some_and(|init| matches!(init.kind_name(), "string" | "template_string"))
    });
    built_afresh && under_test(&|_| true)
}

/// Whether the retrying stops after a number of attempts.
pub fn has_cap(lp: &RetryLoop, src: &str) -> bool {
    match lp.kind {
        RetryKind::Library => {
            let opts =
                ast::arguments(lp.node).into_iter().skip(1).map(|a| text(a, src).to_string()).collect::<String>();
            let unbounded = crate::regex!(
                r"(?i)(retries|numOfAttempts|maxAttempts|attempts)\s*:\s*(Infinity|Number\.MAX_SAFE_INTEGER|Number\.POSITIVE_INFINITY)|forever\s*:\s*true"
            );
            !unbounded.is_match(&opts)
        }
        RetryKind::Loop => {
            let cond = lp.node.field("condition").map(|c| text(c, src)).unwrap_or("");
            relational(cond) || body_checks_count(lp.body, src)
        }
        RetryKind::Recursion => body_checks_count(lp.body, src),
    }
}

fn relational(t: &str) -> bool {
    crate::regex!(r"[^=!<>]<=?[^=<]|[^=>]>=?[^=>]|===?\s*\d|\d\s*===?").is_match(t)
}

/// An `if (attempt >= max) throw/break/return` inside the body, the comparison written in the
/// condition or in a flag it tests (`const willRetry = retry < MAX; if (willRetry) ...`). A
/// clock against a deadline (`if (Date.now() >= deadline) throw`) bounds the tries as well.
fn body_checks_count(body: Node, src: &str) -> bool {
    ast::descendants_of_kind(body, "if_statement").into_iter().any(|i| {
        let cond = i.field("condition").map(|c| flag_value(c, body, src)).unwrap_or("");
        let cons = i.field("consequence");
        relational(cond)
            && crate::regex!(r"(?i)attempt|retr|tries|tried|count|max|deadline|elapsed|Date\.now\(\)|\bi\b|\bn\b")
                .is_match(cond)
            && cons.is_some_and(|c| {
                let t = text(c, src);
                t.contains("throw") || t.contains("return") || t.contains("break")
            })
    })
}

/// The condition's text, or, when it tests a flag (`willRetry`, `!exhausted`) declared in the
/// body, the flag's initializer: that is where the attempt count is compared.
fn flag_value<'s>(cond: Node, body: Node, src: &'s str) -> &'s str {
    let mut inner = ast::unwrap_expr(cond);
    while inner.kind_name() == "parenthesized_expression" || inner.kind_name() == "unary_expression" {
        match inner.named_child(0) {
            Some(n) => inner = ast::unwrap_expr(n),
            None => break,
        }
    }
    if inner.kind_name() == "identifier" {
        let name = text(inner, src);
        let init = ast::descendants_of_kind(body, "variable_declarator").into_iter().find_map(|d| {
            d.field("name").filter(|n| n.kind_name() == "identifier" && text(*n, src) == name).and(d.field("value"))
        });
        if let Some(init) = init {
            return text(init, src);
        }
    }
    text(cond, src)
}

/// Whether an attempt waits before the next one.
pub fn has_backoff(lp: &RetryLoop, src: &str) -> bool {
    if lp.kind == RetryKind::Library {
        return true;
    }
    let mut found = false;
    ast::walk(lp.body, &mut |n| {
        if found {
            return false;
        }
        if n.kind_name() == "await_expression" || n.kind_name() == "call_expression" {
            let t = text(n, src);
            let inner = ast::unwrap_expr(n);
            let name = if inner.kind_name() == "call_expression" {
                ast::callee_name(inner, src).unwrap_or_default().to_ascii_lowercase()
            } else {
                String::new()
            };
            // A call handed to another call or set as a property (`signal: AbortSignal.timeout(ms)`)
            // bounds a request; only a call that is itself waited on pauses between attempts.
            let pauses = inner.kind_name() == "call_expression"
                && ast::parent(inner).is_none_or(|p| !matches!(p.kind_name(), "arguments" | "pair"));
            if (n.kind_name() == "await_expression" && t.contains("setTimeout"))
                || pauses
                    && ["sleep", "delay", "wait", "backoff", "pause", "timeout"].iter().any(|w| name.contains(w))
                    && !name.starts_with("waitfor")
            {
                found = true;
            }
            // `setTimeout(() => self(), ms)` in a recursive retry
            if lp.kind == RetryKind::Recursion && name == "settimeout" {
                found = true;
            }
        }
        true
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Dialect, SourceFile};
    use std::path::PathBuf;

    #[test]
    fn candidates_are_the_query_matches_in_query_order() {
        let src = r#"
async function a(items) {
  for (let attempt = 0; attempt < 3; attempt++) { try { await send(); break; } catch (e) { await sleep(attempt); } }
  while (await retry(async () => { return x(); }, { retries: 3 })) { await pRetry(() => f()); }
  do { await utils.withBackoff(function () { return 1; }); } while (again);
  await client.RETRIES(/* first */ () => 1);
  await obj.retry.call(() => 1);
  await retryLater(function* () {}, 1);
  for (;;) while (b) for (const x of items) { y(); }
  const g = () => pRetry(async (bail) => { for (let i = 0; ; i++) {} });
}
"#;
        for dialect in [Dialect::TypeScript, Dialect::Tsx] {
            let f = SourceFile::new(PathBuf::from("x.ts"), src.to_string(), dialect).unwrap();
            crate::syntax::node_index::forget();
            let func = f.root().named_child(0).unwrap();
            let by_query: Vec<(usize, usize)> = crate::model::queries::RETRY_LOOPS
                .matches(func, &f.text)
                .iter()
                .filter_map(|m| {
                    let node = m.get("loop").or_else(|| m.get("library"))?;
                    let body = m.get("body").or_else(|| m.get("callback"))?;
                    Some((node.id(), body.id()))
                })
                .collect();
            let by_walk: Vec<(usize, usize)> = candidates(func, &f.text)
                .iter()
                .map(|c| match c {
                    Candidate::Loop { node, body } => (node.id(), body.id()),
                    Candidate::Library { node, callback, .. } => (node.id(), callback.id()),
                })
                .collect();
            assert_eq!(by_walk.len(), 11);
            assert_eq!(by_walk, by_query);
            crate::syntax::node_index::forget();
        }
    }

    fn loops(src: &str) -> Vec<(RetryKind, bool, bool)> {
        let f = SourceFile::new(PathBuf::from("x.ts"), src.to_string(), Dialect::TypeScript).unwrap();
        let root = f.root();
        let mut out = Vec::new();
        ast::walk(root, &mut |n| {
            if ast::is_function(n) {
                for l in find(n, &f.text) {
                    out.push((l.kind, has_cap(&l, &f.text), has_backoff(&l, &f.text)));
                }
                return false;
            }
            true
        });
        out
    }

    #[test]
    fn capped_loop_with_backoff() {
        let l = loops(
            "async function f() { for (let attempt = 1; attempt <= 3; attempt++) { try { return await send(); } catch (e) { await sleep(2 ** attempt * 100); } } }",
        );
        assert_eq!(l, vec![(RetryKind::Loop, true, true)]);
    }

    #[test]
    fn a_request_deadline_is_not_a_pause() {
        let l = loops(
            "async function f() { for (let attempt = 0; attempt < 3; attempt++) { try { await fetch(u, { signal: AbortSignal.timeout(5000) }); break; } catch (e) { log(e); } } }",
        );
        assert_eq!(l, vec![(RetryKind::Loop, true, false)]);
        let l = loops(
            "async function f() { for (let attempt = 0; attempt < 3; attempt++) { try { await send(withTimeout(5000)); break; } catch (e) { await delay(100 * attempt); } } }",
        );
        assert_eq!(l, vec![(RetryKind::Loop, true, true)]);
    }

    #[test]
    fn a_deadline_caps_the_tries() {
        let l = loops(
            "async function f() { const deadline = Date.now() + 30000; while (true) { try { await take(); return; } catch (e) { if (!isConflict(e) || Date.now() >= deadline) throw e; } await sleep(250); } }",
        );
        assert_eq!(l, vec![(RetryKind::Loop, true, true)]);
        let l = loops(
            "async function f() { while (true) { try { await take(); return; } catch (e) { if (!isConflict(e)) throw e; } await sleep(250); } }",
        );
        assert_eq!(l, vec![(RetryKind::Loop, false, true)]);
    }

    #[test]
    fn while_true_without_delay() {
        let l = loops(
            "async function f() { while (true) { try { await send(); break; } catch (e) { console.error(e); } } }",
        );
        assert_eq!(l, vec![(RetryKind::Loop, false, false)]);
    }

    #[test]
    fn items_loops_are_not_retries() {
        assert!(
            loops("async function f(xs) { for (const x of xs) { try { await send(x); } catch (e) { log(e); } } }")
                .is_empty()
        );
        assert!(
            loops("async function f(xs) { for (let i = 0; i < xs.length; i++) { try { await send(xs[i]); } catch (e) { log(e); } } }")
                .is_empty()
        );
    }

    #[test]
    fn pagination_is_not_a_retry() {
        assert!(
            loops("async function f() { while (hasMore) { try { const p = await next(); if (!p) break; } catch (e) { log(e); } } }")
                .is_empty()
        );
    }

    #[test]
    fn an_item_loop_inside_a_batch_loop_is_not_a_retry() {
        let batches = "async function f() { let attempted = 0; while (attempted < LIMIT) { const rows = await page(); \
                       if (rows.length === 0) break; attempted += rows.length; \
                       for (const r of rows) { try { await remove(r); } catch (e) { log(e); } } } }";
        assert!(loops(batches).is_empty());
        let retried = "async function f() { let attempts = 0; while (attempts < 3) { try { await post(); break; } \
                       catch (e) { attempts++; } } }";
        assert_eq!(loops(retried).len(), 1);
    }

    #[test]
    fn a_fallback_to_a_fixed_input_is_not_a_retry() {
        let fallback = "function fmt(zone) { try { return make(zone); } catch (e) { if (zone !== \"UTC\") { return fmt(\"UTC\"); } throw e; } }";
        assert!(loops(fallback).is_empty());
        let same = "function fmt(zone) { try { return make(zone); } catch (e) { return fmt(zone); } }";
        assert_eq!(loops(same).len(), 1);
    }

    #[test]
    fn recursion_and_libraries() {
        let l = loops("async function send(p) { try { return await post(p); } catch { return send(p); } }");
        assert_eq!(l, vec![(RetryKind::Recursion, false, false)]);
        let l = loops(
            "async function send(p, retry = 0) { try { return await post(p); } catch (e) { const again = retry < MAX; if (again) { return send(p, retry + 1); } throw e; } }",
        );
        assert_eq!(l, vec![(RetryKind::Recursion, true, false)]);
        let l = loops("async function f() { await pRetry(async () => { await post(); }, { retries: 5 }); }");
        assert_eq!(l.len(), 1);
        assert!(l[0].1 && l[0].2);
    }
}
