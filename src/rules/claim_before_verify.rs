//! claim-before-verify

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::{Edit, Fix};
use crate::model::ast::{self, text};
use crate::model::guards::{self, GuardKind};
use crate::model::{reach, stmts, verify};
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A handler that writes its dedupe claim (a processed-event marker insert, a Redis `SET NX`, or
a guard `run`) before it verifies the provider signature (`constructEvent`, svix `verify`,
an HMAC comparison, `timingSafeEqual`, ...). Verification done by route middleware counts as
first; a handler without any verification is `missing-signature-verification`'s concern.
A logging helper (`logEvent("webhook.received", ...)`) writes a log line, not a claim, whatever
its table is called.

## Why retries break it
The claim is keyed by an id taken from an unverified body. Anyone who can reach the endpoint
can send a forged request carrying a genuine event's id (ids appear in dashboards, logs,
emails, and are often guessable): the claim is written, verification fails, and when the real
delivery arrives it is dropped as a duplicate. A forged request can also hold a lease and make
genuine retries answer "in progress".

## Bad
```ts
const claimed = await redis.set(`evt:${req.body.id}`, "1", "EX", 259200, "NX");
if (!claimed) return res.sendStatus(200);
const event = stripe.webhooks.constructEvent(req.body, sig, secret);
```

## Good
```ts
const event = stripe.webhooks.constructEvent(req.body, sig, secret);
const claimed = await redis.set(`evt:${event.id}`, "1", "EX", 259200, "NX");
if (!claimed) return res.sendStatus(200);
```

## Fix (unsafe)
Moves the claim statement, together with the statements right after it that use its result
(`if (!claimed) return ...`), to just after the statement that verifies the signature, or,
when that statement yields a value (`const ok = await webhooks.verify(...)`, an HMAC digest),
after the guard clause that checks it (`if (!ok) return ...`). A project helper whose body writes
the claim (`await markDelivered(id)`) counts as the claim. Review
that the key is then taken from the verified event. Display-only when the verification happens
inside the claim (a guard `run` around the verification) or the moved statements declare
names the verification uses.
"#;

pub const RULE: Rule = Rule {
    id: "claim-before-verify",
    summary: "dedupe claim written before the signature is verified: a forged request burns a genuine delivery's key",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

fn is_claim_call(call: Node, src: &str) -> bool {
    // A rate-limit or lock key taken before verification is not a dedupe claim.
    let key = ast::arguments(call).first().map(|k| text(*k, src).to_ascii_lowercase()).unwrap_or_default();
    if ["rate", "limit", "throttle", "lock"].iter().any(|w| key.contains(w)) {
        return false;
    }
    guards::is_claim(call, src) || guards::guard_call_kind(call, src) == Some(GuardKind::Guard)
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        if !model.handler.framework.is_http() {
            continue;
        }
        let Some(scope) = model.scopes.first() else { continue };
        let Some(func) = scope.node() else { continue };
        let file = scope.file();
        let src = &file.text;
        let Some(verification) = inbound_verification(func, src, model.handler.request.as_deref()) else {
            continue;
        };
        let Some(claim) = ast::calls_in(func, false)
            .into_iter()
            .filter(|c| {
                c.start_byte() < verification.start_byte() && (is_claim_call(*c, src) || claims_in_helper(cx, file, *c))
            })
            .min_by_key(|c| c.start_byte())
        else {
            continue;
        };
        let (line, _) = file.line_col(verification.start_byte());
        let message = format!(
            "the dedupe claim `{}` is written before the signature is verified (line {line}): a forged request carrying a genuine event's id burns its key, and the real delivery is then dropped as a duplicate",
            short(text(claim, src))
        );
        out.push(
            Diagnostic::new(RULE.id, file, claim, message)
                .in_handler(model, scope)
                .help("verify the signature first, then claim the key of the verified event")
                .with_fix(cx, || fix(file, func, claim, verification)),
        );
    }
}

/// The first call that verifies the incoming delivery. An HMAC counts when it digests the
/// request's body (an HMAC over something else may sign an outgoing call).
fn inbound_verification<'t>(func: Node<'t>, src: &str, request: Option<&str>) -> Option<Node<'t>> {
    ast::calls_in(func, false)
        .into_iter()
        .filter(|c| {
            if let Some(payload) = verify::hmac_update_payload(*c, src) {
                let t = text(payload, src).to_ascii_lowercase();
                return ["body", "raw", "payload", "buf"].iter().any(|w| t.contains(w))
                    || request.is_some_and(|r| ast::mentions_identifier(payload, src, r));
            }
            verify::is_verification_call(*c, src) && ast::callee_name(*c, src).is_some_and(|n| n != "createHmac")
        })
        .min_by_key(|c| c.start_byte())
}

/// A project helper (`await markProcessed(id)`) whose body writes the claim. A logging helper
/// (`logEvent("webhook.no_connection", ...)`) writes a log line, whatever its table is called.
fn claims_in_helper(cx: &Context, file: &std::sync::Arc<crate::source::SourceFile>, call: Node) -> bool {
    reach::resolve_call(cx.project, file, call).is_some_and(|def| {
        let own_name = def.name.rsplit('.').next().unwrap_or(&def.name);
        if crate::model::best_effort::words(own_name).first().is_some_and(|w| w == "log") {
            return false;
        }
        def.node().is_some_and(|n| {
            let src = &def.file.text;
            ast::calls_in(n, false).into_iter().any(|c| is_claim_call(c, src))
                && verify::first_verification(n, src).is_none()
        })
    })
}

/// `if (!ok) return ...` / `throw ...`: a guard clause.
fn exits_only(if_stmt: Node) -> bool {
    if if_stmt.field("alternative").is_some() {
        return false;
    }
    let Some(cons) = if_stmt.field("consequence") else { return false };
    let inner: Vec<Node> = if cons.kind_name() == "statement_block" {
        ast::named_children(cons).into_iter().filter(|c| c.kind_name() != "comment").collect()
    } else {
        vec![cons]
    };
    inner.last().is_some_and(|l| matches!(l.kind_name(), "return_statement" | "throw_statement"))
}

fn short(s: &str) -> String {
    let first = s.lines().next().unwrap_or("");
    if first.len() < s.len() || first.chars().count() > 60 {
        format!("{}…", first.chars().take(60).collect::<String>())
    } else {
        first.to_string()
    }
}

fn manual(reason: &str) -> Fix {
    Fix::display_only("verify the signature before claiming the key", reason.to_string())
}

fn fix(file: &SourceFile, func: Node, claim: Node, verification: Node) -> Fix {
    let src = &file.text;
    let Some(block) = ast::ancestors(claim)
        .take_while(|a| *a != func)
        .find(|a| a.kind_name() == "statement_block" && ast::contains(*a, verification))
        .or_else(|| ast::function_body(func).filter(|b| ast::contains(*b, verification) && ast::contains(*b, claim)))
    else {
        return manual("the claim and the verification are not in one block");
    };
    let (Some(sc), Some(sv)) = (stmts::child_containing(block, claim), stmts::child_containing(block, verification))
    else {
        return manual("the claim and the verification are not in one block");
    };
    if sc == sv {
        return manual(
            "the verification runs inside the claim: verify first, then call the guard with the verified event's key",
        );
    }
    let between: Vec<Node> = ast::named_children(block)
        .into_iter()
        .filter(|c| c.start_byte() > sc.start_byte() && c.start_byte() < sv.start_byte())
        .collect();
    let declared = stmts::declared_names(sc, src);
    let mut moved = vec![sc];
    for s in &between {
        if !declared.is_empty() && stmts::mentions_any(*s, src, &declared) {
            moved.push(*s);
        }
    }
    let moved_names: Vec<String> = moved.iter().flat_map(|s| stmts::declared_names(*s, src)).collect();
    let staying: Vec<Node> = between.iter().filter(|s| !moved.contains(s)).copied().chain([sv]).collect();
    if staying.iter().any(|s| stmts::mentions_any(*s, src, &moved_names)) {
        return manual("the verification uses values the claim declares: move the claim after it by hand");
    }
    if moved.iter().any(|s| !stmts::owns_its_lines(file, *s) || s.kind_name() == "comment")
        || !stmts::owns_its_lines(file, sv)
    {
        return manual("statements share lines");
    }
    // A verification that yields a value (`const ok = await verify(...)`, an HMAC digest) is
    // only done once the check that reads it (`if (!ok) return ...`) has run.
    let mut gate_end = sv;
    let mut cursor = sv;
    let mut names = stmts::declared_names(sv, src);
    while let Some(next) = cursor.next_named_sibling() {
        if names.is_empty() || !stmts::mentions_any(next, src, &names) {
            break;
        }
        match next.kind_name() {
            "lexical_declaration" | "variable_declaration" => names.extend(stmts::declared_names(next, src)),
            "if_statement" if exits_only(next) => gate_end = next,
            _ => break,
        }
        cursor = next;
    }
    if gate_end != sv && !stmts::owns_its_lines(file, gate_end) {
        return manual("statements share lines");
    }
    let sv = gate_end;
    let indent = file.indent_at(sv.start_byte()).to_string();
    let mut text_moved = String::new();
    let mut edits = Vec::new();
    for s in &moved {
        text_moved.push_str(&stmts::reindented_lines(file, *s, &indent));
        edits.push(Edit::delete(file.line_start(s.start_byte()), stmts::line_end_with_break(file, s.end_byte())));
    }
    edits.push(Edit::insert(stmts::line_end_with_break(file, sv.end_byte()), text_moved));
    Fix::unsafe_("move the claim after the signature verification", edits)
        .with_note("the claim now runs only for verified deliveries; take its key from the verified event")
}
