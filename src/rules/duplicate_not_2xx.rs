//! duplicate-not-2xx

use super::{Context, Diagnostic, FixAvailability, HandlerModel, Rule};
use crate::fix::Fix;
use crate::model::ast::{self, text};
use crate::model::claims::{DUP_CODE, DUPLICATE, NxKind, literal_test, nx_failed, nx_kind};
use crate::model::guards;
use crate::model::markers::PatternKind;
use crate::model::reach::Scope;
use crate::model::responses::{self, Response, Style};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use regex::Regex;
use std::sync::LazyLock;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
An HTTP handler that detects a duplicate delivery and answers 4xx/5xx: a unique violation on
the dedupe insert (Prisma `P2002`, Postgres `23505`, MongoDB `11000`, MySQL `ER_DUP_ENTRY`),
a guard result `status === "duplicate"`, a `SET NX` done marker that returned null, a
processed-event row found before the work, or a business row whose status the handler tests
as its processed marker (`if (order.status === "PAID") return res.status(400)...`).

## Why retries break it
The duplicate was already processed. Answering an error makes the provider keep
redelivering it for its whole retry window (Stripe: 3 days), each delivery failing again;
providers disable endpoints that keep failing (Svix after 5 days, Shopify after repeated
failures), which then drops genuine events too.

## Bad
```ts
if (err.code === "P2002") return res.status(409).send("duplicate");
```

## Good
```ts
if (err.code === "P2002") return res.status(200).send("duplicate");
```

## Fix (safe)
Changes the status to 200, keeping the body. An in-progress attempt should answer 409 (see
`in-progress-not-retryable`), so this rule ignores branches that test an in-progress status
and `SET NX` leases (short TTL, or deleted on failure); a key that serves as both lease and
done marker gets a display-only fix that explains how to tell them apart.
"#;

pub const RULE: Rule = Rule {
    id: "duplicate-not-2xx",
    summary: "a detected duplicate answers 4xx/5xx: the provider retries it for days and may disable the endpoint; answer 200",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: true,
    preview: false,
    check,
};

static IN_PROGRESS_WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)in[-_ ]?progress|processing|running|locked").unwrap());

enum Reason {
    Code,
    Status,
    Marker,
    Found,
    StatusMarker,
    Ambiguous,
}

fn strip(n: Node) -> Node {
    let mut n = n;
    while matches!(n.kind_name(), "parenthesized_expression" | "await_expression" | "non_null_expression") {
        match n.named_child(0) {
            Some(c) => n = c,
            None => break,
        }
    }
    n
}

/// `if (seen)` where `seen` came from a lookup of a processed-event marker.
fn found_marker(cond: Node, positive: bool, func: Node, src: &str) -> bool {
    let cond = strip(cond);
    let subject = match cond.kind_name() {
        "identifier" if positive => cond,
        "binary_expression" if positive => {
            let op = cond.field("operator").map(|o| text(o, src)).unwrap_or("");
            let r = cond.field("right").map(|r| text(r, src)).unwrap_or("");
            if !(matches!(op, "!==" | "!=") && (r == "null" || r == "undefined")) {
                return false;
            }
            match cond.field("left") {
                Some(l) => strip(l),
                None => return false,
            }
        }
        _ => return false,
    };
    if subject.kind_name() != "identifier" {
        return false;
    }
    let Some(init) = ast::find_binding_init(func, text(subject, src), src, cond.start_byte()) else {
        return false;
    };
    let init = strip(init);
    if init.kind_name() != "call_expression" {
        return false;
    }
    let path = ast::callee_path_shared(init, src);
    let last = path.last().map(|s| s.to_ascii_lowercase()).unwrap_or_default();
    let lookup = last.starts_with("find")
        || matches!(last.as_str(), "get" | "exists" | "count" | "first" | "maybesingle" | "single");
    lookup
        && path.iter().any(|p| guards::is_marker_name(p.trim_end_matches("()")))
        && !path.iter().any(|p| p.to_ascii_lowercase().contains("user"))
}

/// Whether the key of a `SET NX` is read (`get`/`exists`) earlier in the same function.
fn read_before(nx: Node, src: &str) -> bool {
    let Some(key) = ast::arguments(nx).first().map(|k| text(*k, src)) else { return false };
    let Some(func) = ast::enclosing_function(nx) else { return false };
    ast::calls_in(func, false).into_iter().any(|c| {
        c.start_byte() < nx.start_byte()
            && matches!(ast::callee_name(c, src).as_deref(), Some("get" | "exists"))
            && ast::arguments(c).first().is_some_and(|a| text(*a, src) == key)
    })
}

fn reason(resp: &Response, func: Node, src: &str) -> Option<Reason> {
    for (cond, positive) in responses::branch_conditions(resp.node, func) {
        let ct = text(cond, src);
        if IN_PROGRESS_WORD.is_match(ct) {
            return None;
        }
        if positive && DUP_CODE.is_match(ct) {
            return Some(Reason::Code);
        }
        if let Some(eq) = literal_test(cond, &DUPLICATE, src)
            && eq == positive
        {
            return Some(Reason::Status);
        }
        if let Some(call) = nx_failed(cond, positive, func, src) {
            return match nx_kind(call, src) {
                NxKind::Done => Some(Reason::Marker),
                // A lease that is later marked done: a completed duplicate is answered by an
                // earlier read of the key, if there is one; the NX branch is then a race.
                NxKind::Ambiguous if read_before(call, src) => None,
                NxKind::Ambiguous => Some(Reason::Ambiguous),
                NxKind::Lease => None,
            };
        }
        if found_marker(cond, positive, func, src) {
            return Some(Reason::Found);
        }
    }
    None
}

/// The response answers the already-done branch of a business row's status that the handler
/// tests as its processed marker (`if (order.status === "PAID") return 400`).
fn in_status_marker_branch(cx: &Context, model: &HandlerModel, scope: &Scope, resp: &Response) -> bool {
    let Some(index) = model.scopes.iter().position(|s| std::ptr::eq(s, scope)) else { return false };
    model.dedupe_patterns(cx.project).iter().any(|p| {
        p.kind == PatternKind::CheckThenInsert
            && p.scope == index
            && p.marker.is_some()
            && p.at.0 <= resp.node.start_byte()
            && resp.node.end_byte() <= p.at.1
    })
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for (model, scope, func, resp) in crate::facts::http_responses(cx) {
        let file = scope.file();
        let src = &file.text;
        if !resp.is_error() {
            continue;
        }
        let in_progress = || {
            responses::branch_conditions(resp.node, func)
                .iter()
                .any(|(cond, _)| IN_PROGRESS_WORD.is_match(text(*cond, src)))
        };
        let Some(reason) = reason(&resp, func, src).or_else(|| {
            (in_status_marker_branch(cx, model, scope, &resp) && !in_progress()).then_some(Reason::StatusMarker)
        }) else {
            continue;
        };
        let what = match reason {
            Reason::Code => "the dedupe insert hits a unique violation",
            Reason::Status => "the guard reports a duplicate",
            Reason::Marker | Reason::Ambiguous => "the SET NX done marker already exists",
            Reason::Found => "the event is already recorded as processed",
            Reason::StatusMarker => "the record's status says the event was already applied",
        };
        let message = format!(
            "answers {} when {what}: the provider keeps redelivering an event that was already \
             processed, and may disable the endpoint",
            resp.status.unwrap_or(0)
        );
        let fix = || match reason {
            Reason::Ambiguous => Fix::display_only(
                "answer 200 once done, 409 while running",
                "the NX key is both the lease and the done marker: read its value to tell them apart",
            ),
            _ if resp.style == Style::NestThrow => Fix::display_only(
                "return normally instead of throwing",
                "replace the thrown exception with a normal return (2xx)",
            ),
            _ => match crate::fix::edits::set_status(&resp, 200, src, file.style().eol) {
                Some(edit) => Fix::safe("answer 200 for a duplicate", vec![edit]),
                None => Fix::display_only("answer 200", "the status is not a literal"),
            },
        };
        out.push(
            Diagnostic::new(RULE.id, file, resp.node, message)
                .in_handler(model, scope)
                .help("a duplicate was already handled: acknowledge it with 2xx")
                .with_fix(cx, fix),
        );
    }
}
