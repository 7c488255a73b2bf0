//! What a dedupe claim's outcome says: a Redis `SET NX` key that failed (a lease another
//! attempt holds, or a done marker), a status literal that names a duplicate, a database
//! error code of a unique violation. The duplicate and in-progress response rules both read
//! them, so they live here rather than in either rule.

use super::ast::{self, text};
use super::guards;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use regex::Regex;
use std::sync::LazyLock;
use tree_sitter::Node;

/// A status literal naming an already-processed event (`"duplicate"`, `'already_processed'`).
pub static DUPLICATE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r#"(?i)^["'`](duplicate|already[-_ ]?processed|already[-_ ]?handled)["'`]$"#).unwrap());

/// A unique-violation error code or message (Prisma, Postgres, MongoDB, MySQL, SQLite).
pub static DUP_CODE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"P2002|23505|\b11000\b|ER_DUP_ENTRY|unique_violation|UniqueConstraint|SQLITE_CONSTRAINT_UNIQUE|duplicate key",
    )
    .unwrap()
});

/// What a `SET NX` key means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NxKind {
    /// A short lease: null means another attempt is running.
    Lease,
    /// A done marker: null means the event was processed.
    Done,
    /// Both: null means running or done.
    Ambiguous,
}

/// Whether `cond` compares something with a literal matching `re`: Some(true) for `===`/`==`
/// or a `case` value, Some(false) for `!==`/`!=`.
pub fn literal_test(cond: Node, re: &Regex, src: &str) -> Option<bool> {
    if matches!(cond.kind_name(), "string" | "template_string") && re.is_match(text(cond, src)) {
        return Some(true);
    }
    let mut found = None;
    ast::walk(cond, &mut |n| {
        if found.is_some() {
            return false;
        }
        if n.kind_name() == "binary_expression"
            && let (Some(l), Some(r), Some(op)) = (n.field("left"), n.field("right"), n.field("operator"))
        {
            let lit = [l, r].into_iter().any(|s| re.is_match(text(s, src)));
            if lit {
                match text(op, src) {
                    "===" | "==" => found = Some(true),
                    "!==" | "!=" => found = Some(false),
                    _ => {}
                }
            }
        }
        true
    });
    found
}

fn strip(node: Node) -> Node {
    let mut n = node;
    while matches!(n.kind_name(), "parenthesized_expression" | "await_expression" | "non_null_expression") {
        match n.named_child(0) {
            Some(c) => n = c,
            None => break,
        }
    }
    n
}

/// The `SET NX` call whose failure (null) takes this branch, if any.
pub fn nx_failed<'t>(cond: Node<'t>, positive: bool, func: Node<'t>, src: &str) -> Option<Node<'t>> {
    let cond = strip(cond);
    let subject = match cond.kind_name() {
        "unary_expression" if positive && cond.child(0).is_some_and(|o| text(o, src) == "!") => {
            strip(cond.field("argument")?)
        }
        "binary_expression" if positive => {
            let op = text(cond.field("operator")?, src);
            let l = cond.field("left")?;
            let r = cond.field("right")?;
            let rt = text(r, src);
            let null_test = matches!(op, "===" | "==") && (rt == "null" || rt == "undefined");
            let ok_test = matches!(op, "!==" | "!=") && matches!(rt, "'OK'" | "\"OK\"" | "true");
            if !(null_test || ok_test) {
                return None;
            }
            strip(l)
        }
        "identifier" | "call_expression" if !positive => cond,
        _ => return None,
    };
    let call = match subject.kind_name() {
        "identifier" => {
            let init = ast::find_binding_init(func, text(subject, src), src, cond.start_byte())?;
            strip(init)
        }
        _ => subject,
    };
    (call.kind_name() == "call_expression" && guards::is_set_nx(call, src)).then_some(call)
}

fn eval_number(node: Node, src: &str) -> Option<u64> {
    let node = strip(node);
    match node.kind_name() {
        "number" => text(node, src).replace('_', "").parse().ok(),
        "binary_expression" => {
            let l = eval_number(node.field("left")?, src)?;
            let r = eval_number(node.field("right")?, src)?;
            match text(node.field("operator")?, src) {
                "*" => Some(l * r),
                "+" => Some(l + r),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The TTL of a `SET NX`, in seconds.
fn nx_ttl(call: Node, src: &str) -> Option<u64> {
    let args = ast::arguments(call);
    for (i, a) in args.iter().enumerate().skip(2) {
        let t = text(*a, src).trim_matches(['\'', '"', '`']).to_ascii_uppercase();
        if (t == "EX" || t == "PX") && i + 1 < args.len() {
            let n = eval_number(args[i + 1], src)?;
            return Some(if t == "PX" { n / 1000 } else { n });
        }
        if a.kind_name() == "object" {
            for key in ["EX", "ex", "PX", "px"] {
                if let Some(v) = ast::object_property(*a, key, src) {
                    let n = eval_number(v, src)?;
                    return Some(if key.eq_ignore_ascii_case("px") { n / 1000 } else { n });
                }
            }
            if let Some(exp) = ast::object_property(*a, "expiration", src).filter(|e| e.kind_name() == "object") {
                let n = eval_number(ast::object_property(exp, "value", src)?, src)?;
                let px = ast::object_property(exp, "type", src).is_some_and(|t| text(t, src).contains("PX"));
                return Some(if px { n / 1000 } else { n });
            }
        }
    }
    None
}

pub fn nx_kind(call: Node, src: &str) -> NxKind {
    let Some(key) = ast::arguments(call).first().map(|k| text(*k, src)) else {
        return NxKind::Done;
    };
    let func = ast::enclosing_function(call).unwrap_or(call);
    let mut released = false;
    let mut marked_done = false;
    for c in ast::calls_in(func, false) {
        let name = ast::callee_name(c, src).unwrap_or_default();
        let first = ast::arguments(c).first().map(|a| text(*a, src));
        if first != Some(key) || c == call {
            continue;
        }
        match name.as_str() {
            "del" | "unlink" | "delete" => released = true,
            "set" if !guards::is_set_nx(c, src) && c.start_byte() > call.start_byte() => marked_done = true,
            _ => {}
        }
    }
    // Leases live for seconds to minutes; an hour-long key that nobody releases is a
    // (too short) done marker.
    let short = nx_ttl(call, src).is_some_and(|t| t <= 900);
    match (short || released, marked_done) {
        (true, true) => NxKind::Ambiguous,
        (true, false) if !short => NxKind::Ambiguous,
        (true, false) => NxKind::Lease,
        (false, _) => NxKind::Done,
    }
}
