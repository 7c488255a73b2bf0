//! in-progress-not-retryable

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::Fix;
use crate::model::ast::{self, text};
use crate::model::claims::{DUPLICATE, NxKind, literal_test, nx_failed, nx_kind};
use crate::model::responses::{self, Response};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use regex::Regex;
use std::sync::LazyLock;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
An HTTP handler that finds another attempt of the same delivery still running and answers
2xx: a guard result `status === "in-progress"` (or a status column `processing`/`running`),
a lease that is held (`SET key NX EX <short ttl>` returned null), or Slack's
`x-slack-retry-num` header. Also a queue consumer (or a function it calls) that returns, so the
message is acknowledged, when the record's status is one the same function writes while it
works (`if (job.status !== "queued") return null;` before `updateStatus(id, "running")` ...
`updateStatus(id, "completed")`): every status it writes but the last counts as in progress.

## Why retries break it
Concurrent duplicates mostly come from timeouts: the provider gave up waiting for the first
attempt and sent the event again. When the retry answers 2xx because "someone is already
working on it", the provider records the event as delivered. If the first attempt then
crashes or fails, its answer goes nowhere and nothing ever retries the event.

## Bad
```ts
const result = await guard.run(key, work);
if (result.status === "in-progress") return res.status(200).json({ ok: true });
```

## Good
```ts
if (result.status === "in-progress") return res.status(409).json({ ok: true });
```

## Fix (safe)
Changes the status to 409 (keeping the body): the provider retries later and, by then, the
first attempt has either finished (the retry is answered as a duplicate) or released its
lease (the retry does the work). When the same branch also handles completed duplicates
(`status === "duplicate" || status === "in-progress"`, or a `SET NX` key that is both the
lease and the done marker), the fix is display-only: the branch must first tell "done"
(answer 200) from "still running" (answer 409), for example by reading the key's value.

Decisions: `processing` / `running` / `locked` count only when compared with a value read
from the dedupe store (a query, lookup, guard or lock result), never with the event's own
fields (a WooCommerce order is "processing"); `in-progress` always counts. A `SET NX` whose TTL is at most 15 minutes, or whose key is deleted on failure, is
a lease; a key that is later overwritten with a done value is ambiguous. Handlers that use a
longer-lived NX key as a done marker are `duplicate-not-2xx`'s concern.
"#;

pub const RULE: Rule = Rule {
    id: "in-progress-not-retryable",
    summary: "a delivery that finds another attempt still running answers 2xx: if that attempt fails, nothing retries; answer 409",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: true,
    preview: false,
    check,
};

static IN_PROGRESS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"(?i)^["'`](in[-_ ]?progress|processing|running|locked|pending_processing)["'`]$"#).unwrap()
});

/// Statuses that end a run rather than mark one under way.
static FINISHED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(completed?|done|finished|succeeded|success(ful)?|processed|failed|failure|errored|error|cancell?ed|skipped|paid|sent|delivered)$").unwrap()
});

static EXPLICIT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"(?i)^["'`]in[-_ ]?progress["'`]$"#).unwrap());

/// `processing` / `running` / `locked` are also ordinary business statuses (a WooCommerce
/// order is "processing"): they mean another attempt only when the compared value was read
/// from the dedupe store (a query, a lookup, a guard or lock call), not from the event.
fn compares_stored_state(cond: Node, func: Node, src: &str) -> bool {
    ast::descendants_of_kind(cond, "member_expression").into_iter().any(|m| {
        let path = ast::member_path(m, src);
        let Some(root) = path.first() else { return false };
        let Some(init) = ast::find_binding_init(func, root, src, cond.start_byte())
            .or_else(|| ast::find_destructured_init(func, root, src, cond.start_byte()))
        else {
            return false;
        };
        let t = text(init, src).to_ascii_lowercase();
        !t.contains("req.")
            && !t.contains("request.")
            && !t.contains("body")
            && !t.contains("payload")
            && ["query", "find", ".get(", "select", "guard", ".run(", "rows", "redis", "claim", "acquire", "lock"]
                .iter()
                .any(|w| t.contains(w))
    })
}

enum Reason {
    Status,
    Combined,
    Lease,
    Ambiguous,
    Slack,
}

fn slack_retry(cond: Node, func: Node, src: &str) -> bool {
    if text(cond, src).to_ascii_lowercase().contains("x-slack-retry") {
        return true;
    }
    ast::descendants_of_kind(cond, "identifier").into_iter().any(|id| {
        ast::find_binding_init(func, text(id, src), src, cond.start_byte())
            .is_some_and(|i| text(i, src).to_ascii_lowercase().contains("x-slack-retry"))
    })
}

fn reason(resp: &Response, func: Node, src: &str) -> Option<Reason> {
    for (cond, positive) in responses::branch_conditions(resp.node, func) {
        if let Some(eq) = literal_test(cond, &IN_PROGRESS, src)
            && eq == positive
            && (literal_test(cond, &EXPLICIT, src).is_some() || compares_stored_state(cond, func, src))
        {
            let combined = literal_test(cond, &DUPLICATE, src).is_some();
            return Some(if combined { Reason::Combined } else { Reason::Status });
        }
        if let Some(call) = nx_failed(cond, positive, func, src) {
            return match nx_kind(call, src) {
                NxKind::Lease => Some(Reason::Lease),
                NxKind::Ambiguous => Some(Reason::Ambiguous),
                NxKind::Done => None,
            };
        }
        if positive && slack_retry(cond, func, src) {
            return Some(Reason::Slack);
        }
    }
    None
}

/// The value a status test gives for `status` (`s.status !== "queued" && s.status !== "failed"`),
/// or None when the test reads anything but status literals.
fn status_test(cond: Node, status: &str, src: &str) -> Option<bool> {
    let cond = ast::unwrap_expr(cond);
    match cond.kind_name() {
        "parenthesized_expression" => status_test(cond.named_child(0)?, status, src),
        "unary_expression" if cond.field("operator").is_some_and(|o| text(o, src) == "!") => {
            status_test(cond.field("argument")?, status, src).map(|v| !v)
        }
        "binary_expression" => {
            let op = text(cond.field("operator")?, src);
            let (left, right) = (cond.field("left")?, cond.field("right")?);
            match op {
                "&&" => Some(status_test(left, status, src)? && status_test(right, status, src)?),
                "||" => Some(status_test(left, status, src)? || status_test(right, status, src)?),
                "===" | "==" | "!==" | "!=" => {
                    let (field, literal) =
                        if left.kind_name() == "member_expression" { (left, right) } else { (right, left) };
                    let named_status = ast::member_path(field, src)
                        .last()
                        .is_some_and(|f| matches!(f.to_ascii_lowercase().as_str(), "status" | "state"));
                    let value = ast::string_value(literal, src).filter(|_| named_status)?;
                    Some((value == status) == op.starts_with('='))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Status literals the function writes on its way through the work, with where, in order:
/// `updateStatus(id, "running")`, `{ status: "running" }`; writes in a `catch` (the failure's
/// status) are not on that way.
fn status_writes(func: Node, src: &str) -> Vec<(usize, String)> {
    let in_catch = |c: Node| ast::ancestors(c).take_while(|a| *a != func).any(|a| a.kind_name() == "catch_clause");
    let mut out = Vec::new();
    for call in ast::calls_in(func, false).into_iter().filter(|c| !in_catch(*c)) {
        let name = ast::callee_name(call, src).unwrap_or_default().to_ascii_lowercase();
        let writes_status = name.contains("status") || name.contains("state");
        let literal =
            if writes_status && (name.starts_with("update") || name.starts_with("set") || name.starts_with("mark")) {
                ast::arguments(call).iter().rev().find_map(|a| ast::string_value(*a, src))
            } else {
                ast::descendants_of_kind(call, "pair").into_iter().find_map(|p| {
                    let key = p.field("key").map(|k| text(k, src).to_ascii_lowercase())?;
                    if key != "status" && key != "state" {
                        return None;
                    }
                    ast::string_value(p.field("value")?, src)
                })
            };
        out.extend(literal.map(|l| (call.start_byte(), l)));
    }
    out
}

/// A queue consumer that skips the message when the record's status is one this very function
/// writes while it works (`retrieving`, `generating`, then `completed`): the redelivery that
/// follows an attempt which died part-way finds it and acknowledges the message.
fn queue_skips_in_progress(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers.iter().filter(|m| !m.handler.framework.is_http()) {
        for scope in &model.scopes {
            let Some(func) = scope.node() else { continue };
            let src = &scope.file().text;
            let mut writes: Option<Vec<(usize, String)>> = None;
            for stmt in ast::descendants_of_kind(func, "if_statement") {
                if ast::enclosing_function(stmt) != Some(func) {
                    continue;
                }
                let (Some(cond), Some(then)) = (stmt.field("condition"), stmt.field("consequence")) else {
                    continue;
                };
                let body: Vec<Node> = if then.kind_name() == "statement_block" {
                    ast::named_children(then).into_iter().filter(|n| n.kind_name() != "comment").collect()
                } else {
                    vec![then]
                };
                let acknowledges = matches!(body.as_slice(), [ret] if ret.kind_name() == "return_statement"
                    && ret.named_child(0).is_none_or(|v| matches!(text(v, src), "null" | "undefined")));
                if !acknowledges {
                    continue;
                }
                let mut written: Vec<&str> = writes
                    .get_or_insert_with(|| status_writes(func, src))
                    .iter()
                    .filter(|(at, _)| *at >= stmt.end_byte())
                    .map(|(_, value)| value.as_str())
                    .collect();
                written.dedup();
                let Some((_, working)) = written.split_last() else { continue };
                let Some(found) =
                    working.iter().filter(|w| !FINISHED.is_match(w)).find(|w| status_test(cond, w, src) == Some(true))
                else {
                    continue;
                };
                let message = format!(
                    "returns, and the message is acknowledged, when the status is `{found}`, which this function writes while it works: a redelivery after an attempt that died part-way finds it and the job is never finished"
                );
                out.push(
                    Diagnostic::new(RULE.id, scope.file(), cond, message)
                        .in_handler(model, scope)
                        .help("throw (or answer 409) while another attempt may still be running, and take over a status left behind by an attempt that died (a lease with a timeout)")
                        .with_fix(cx, || Fix::display_only(
                            "fail the delivery while the status is in progress",
                            "tell a running attempt from a dead one (a heartbeat or a lease timeout) before throwing",
                        )),
                );
            }
        }
    }
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    queue_skips_in_progress(cx, out);
    for (model, scope, func, resp) in crate::facts::http_responses(cx) {
        let file = scope.file();
        let src = &file.text;
        if !resp.is_2xx() {
            continue;
        }
        let Some(reason) = reason(&resp, func, src) else { continue };
        let what = match reason {
            Reason::Status | Reason::Combined => "another attempt is still in progress",
            Reason::Lease | Reason::Ambiguous => "the lease is held by another attempt (SET NX returned null)",
            Reason::Slack => "this is a Slack retry (`x-slack-retry-num`) of a delivery that may still be running",
        };
        let message = format!(
            "answers {} when {what}: if the running attempt crashes, the provider has already \
             marked the event delivered and never retries it",
            resp.status.unwrap_or(200)
        );
        let fix = || match reason {
            Reason::Combined => Fix::display_only(
                "answer 409 for in-progress, 200 for duplicates",
                "this branch handles both completed duplicates and running attempts: split it",
            ),
            Reason::Ambiguous => Fix::display_only(
                "tell a running attempt from a completed one",
                "the NX key is both the lease and the done marker: read its value and answer 409 \
                 while it is still running, 200 once done",
            ),
            _ => match crate::fix::edits::set_status(&resp, 409, src, file.style().eol) {
                Some(edit) => Fix::safe("answer 409 so the provider retries later", vec![edit]),
                None => Fix::display_only("answer 409", "the status is not a literal"),
            },
        };
        out.push(
            Diagnostic::new(RULE.id, file, resp.node, message)
                .in_handler(model, scope)
                .help("answer 409 (or 5xx) while another attempt holds the event, so the provider retries it")
                .with_fix(cx, fix),
        );
    }
}
