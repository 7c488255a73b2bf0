//! swallowed-error-returns-2xx

use super::{Context, Diagnostic, FixAvailability, HandlerModel, Rule};
use crate::fix::{Applicability, Edit, Fix};
use crate::model::ast::{self, text};
use crate::model::best_effort::{self, comment_block_above, marked, says_best_effort};
use crate::model::claims::DUP_CODE;
use crate::model::reach::{self, Scope};
use crate::model::responses::{self, Response, Style};
use crate::model::verify::{is_verify, only_checks, verifies_through};
use crate::model::{EffectKind, Framework, Sdk, effects, markers};
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::collections::HashSet;
use std::sync::Arc;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A failure that the provider never hears about, so it never retries:
- a `catch` around handler work that logs (or ignores) the error, after which the handler
  answers 2xx (in the `catch` itself, or after the `try`); in a queue consumer (BullMQ,
  SQS, Kafka, RabbitMQ, Pub/Sub, Inngest, Trigger.dev), a `catch` that does not rethrow, so the
  job or message completes as a success; also a `catch` in a function the handler calls
  that swallows the error and returns normally;
- an SQS-triggered Lambda that answers a failure with a returned `{ statusCode: 5xx }` (an
  `if (error) return { statusCode: 500 }` on a result-style helper, outside any `catch`): Lambda
  reads nothing of the value but `batchItemFailures`, so the message is deleted; a returned 4xx
  (a message that can never succeed) is not reported. Its fix is display-only (throw, or
  report the record in `batchItemFailures`);
- an error returned as a value and never checked before a 2xx: supabase-js
  (`const { error } = await supabase.from(t).insert(...)`, or the result not even read),
  Resend (`resend.emails.send` returns `{ data, error }` and never throws), a local wrapper
  that returns either one's result (`return resend.emails.send(...)`; its fix is display-only,
  since the wrapper may return something else on other paths), results of
  `Promise.allSettled` never inspected for rejections;
- a failure reported only in the body (`{ error }`, `{ status: 500 }`, `{ success: false }`)
  of a 2xx response in a `catch` or an error branch (also a branch on a helper's own failure
  result: `if (!result.success) return Response.json({ error: result.error })`);
- a promise `.catch` whose callback only logs (`await db.x.upsert(...).catch((e) => console.error(e))`,
  the settled value dropped): the failed work resolves and the delivery is acknowledged; not
  for a discard that logs nothing (`.catch(() => null)`), telemetry or a notification, a
  processed marker written after the work, or a callback whose message says it is best effort;
- `const res = await fetch(...); if (!res.ok) return;` followed by more work, in a function the
  handler calls or a queue job: `fetch` does not throw on a 5xx, so the failure skips the work
  and the delivery is still acknowledged;
- a callee whose `catch` returns a failure outcome (`{ success: false, error }`) that every
  caller on the handler's way drops (`await queueBilling(op);` as a statement), reported at the
  dropping call; not where the caller lets that step go on purpose (inside a `try` whose catch
  only logs, or under a best-effort comment).

A Botpress integration handler, like a Nest method, answers 200 when it returns nothing. A
catch inside a `while`/`do`/`for (;;)` loop, or a `for` loop that counts attempts, is a retry;
one inside a counted loop over items loses that item.

Not reported: a `catch` that rethrows (also through a helper that always throws: declared
`never`, or ending in a `throw`), answers a non-2xx status (also the statement right after the
`try`: `return res.redirect(...)`), keeps the error on a name or property the code after the
`try` reads (a workflow step saved with status `failure`), calls `next(err)`, or records
the failure for a retry (`batchItemFailures.push`, `moveToFailed`, `nack`, a retry / dead-letter
/ outbox call); a `catch` of a unique violation (that is the dedupe working); signature
checks (see `permanent-error-returns-5xx`); a callee's `catch` that returns a value the
caller can check (`null`, `false`, an error; not `{}`, which reads as an empty success), unless
the handler only returns that value as its answer (`return this.billing.activate(event)` in a
Nest controller, an h3 or Fastify handler: `{ ok: false }` goes out with a 200, reported at the
`catch`); in a RabbitMQ / Pub/Sub consumer or an SQS poller, a `catch` that skips the
ack (or `DeleteMessage`) done in the `try` (the message is redelivered); a `catch` around
reads only (`GetXCommand`, `get*()`) that assigns or returns a fallback value; a `catch` that
reaches the same end another way, awaited and outside any nested `try` (`stat` fails, so `mkdir`;
the bucket lookup fails, so create the bucket), unless all it does is clean up (delete a lock,
cancel, log); a `catch` that sets a 5xx status a later send goes out with (`res.status(500)` in
the catch, one `res.end()` after the `try`); a `catch` that keeps the
failure as the outcome (`catch (e) { result = { ok: false, error: e.message } }`, `result`
used after the `try`); a job whose `catch` returns a failure outcome to its runner
(`return "failure"`, `return { success: false }`, `{ status: Status.Failed }`: the runner records it); a job of a Bull or
BullMQ queue that its file builds, fills and consumes with `attempts` set nowhere (and does
not export), or a job in a workspace (a package outside one) where no file sets `attempts` on
any job or queue options, or a function a worker dispatches to by job name (`switch (job.name)
{ case SYNC_JOB: ... }`) when every `add` of that name in the workspace sets `attempts: 1`:
the queue runs each job once, so there is no retry to lose; a job
named for a sweep (`cleanup-logs`, `pruneTrash`, `purge-expired`): its next run removes what this
one failed to; `Promise.allSettled`
over tasks that each catch their own failures (no task can reject; each task's catch is judged),
or in a `finally` (cleanup such as removing temp files, whatever the `try` did); a `catch` whose `try`
only awaits `Promise.allSettled` (it never rejects: its unchecked results are the finding);
settled results read through the names they are destructured into (`const [sync] = results;
if (sync.status === "fulfilled")`); a supabase-js chain with `.throwOnError()` (it rejects
instead of returning its error); a `catch` in work that runs after the acknowledgement (a
function every call of which is deferred, `after(() => work())`, `waitUntil(...)`, or drops the
promise of an async function, `work().catch(log)`, `const p = work(); p.catch(log)`, or sits
in such work itself: ack-timing's concern); work reached only after an unconditional 2xx
answer (`res.status(200).json(...)` first, then the work, also through a dispatch table); an
empty catch whose only comment says the failure is ignored (`catch { // ignore }`); deliberate best-effort calls: a callee listed in the
config's `bestEffort` list, a `catch` (or the comment block right above its `try`, above an `if` without `else` whose
block holds only that `try`, or above its function) saying "best effort" / "non-fatal" /
"non-critical" / "safe to ignore" / "don't fail ... if" / "never fails the ..." / "do not throw" /
"fire-and-forget" / "(not want one failure) to fail the whole job", a message naming the failed write as logging or an audit entry ("error
logging the transaction"), or circuit-breaker bookkeeping, or a `retrysafe-ignore` suppression
with the reason; a `catch` whose only call reports the failure at warning level
(`logger.warn(...)`, `console.warn(...)`: the author files it as tolerable, unlike `error`), both
unless a caller records the event as done after the call; a returned error left unchecked under such a comment (right above the call's
statement, a statement around it, or an earlier statement whose result it reads: `// refresh
the cached total (best-effort)` above a read, then an update only when the read worked); a
`try` whose only work
is telemetry or a notification (logs, audit entries, analytics, error reports, emails, SMS),
judged by what the callee does (a project helper is followed), then by the SDK call (an HTTP
request to an endpoint named for telemetry, `axios.post(IMPORT_METRICS_URL, ...)`, is
telemetry; signing its token, `signToken`/`jwt.sign`, is a computation), then by the words of
its name; a `try` of lookups only whose `catch` falls through (the work continues
with a fallback value); a `catch` whose work sits in nested `try`s with catches of their own
(the inner catch is the finding), one in a `finally` (cleanup such as a lock release), one
that tries an alternative under its own `catch`, one in a function nobody awaits (ack-timing's
concern), and one around calls that return their error instead of throwing (the unchecked
result is the finding); a 2xx in a `catch` that answers 5xx on another branch (the error was
classified as permanent). An error checked and only logged is reported at that check.

## Why retries break it
At-least-once delivery only helps if failures are reported as failures. A 2xx (or a completed
job) tells the provider the event is done: a transient database error or a provider outage
silently loses the event, with no retry and usually no alert.

## Bad
```ts
try {
  await fulfillOrder(session);
} catch (err) {
  console.error(err);
}
return NextResponse.json({ received: true });
```

## Good
```ts
try {
  await fulfillOrder(session);
} catch (err) {
  console.error(err);
  throw err; // or: return new Response(null, { status: 500 })
}
```

## Fix (unsafe: review)
- a `catch` that answers 2xx: the status becomes 500;
- a `catch` that falls through, in the handler itself: an answer 500 is appended to the
  `catch` (`return res.status(500).end()`, `return new Response(null, { status: 500 })`, ...);
  in a callee or a queue consumer: `throw err` is appended (a parameter is added to
  `catch {`);
- an unchecked returned error: `if (error) throw error` after the call (destructuring `error`
  when needed); in an Express handler itself, `if (error) return res.status(500).end()`
  instead, because Express 4 does not catch rejected async handlers;
- `Promise.allSettled` whose results are not used: `Promise.all`;
- a failure in the body only: the status becomes the body's status, or 500.

The catch fixes are display-only where the added failure would misfire: a catch in a loop over
items (the other items would be dropped, the finished ones redone), in a callback nothing awaits
(a timer, a listener, a dropped async IIFE: an unhandled rejection), inside another catch that
swallows too (in the same function, or around every call of the callee), a catch that recovers
only in part (inside a nested `try`, or without awaiting), one that leaves a fallback
value the code after the `try` goes on with, one whose own message calls the work a
notification, and one reached after the event's own work already ran on the way to it (a
database write or payment, an awaited project call named for a write such as `saveResult` or
`recordAttempt`, in this function or in the caller before the call).
"#;

pub const RULE: Rule = Rule {
    id: "swallowed-error-returns-2xx",
    summary: "an error is swallowed and the delivery acknowledged 2xx: the provider never retries the failed event",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

struct Cx<'a> {
    cx: &'a Context<'a>,
    model: &'a HandlerModel,
    /// Whether the handler itself answers 2xx somewhere (or completes as success).
    acks_2xx: bool,
    /// The calls reaching each scope, resolved (`HandlerModel::call_sites`), once asked.
    sites: std::cell::OnceCell<Vec<Vec<(usize, Node<'a>)>>>,
}

/// Frameworks that answer 200 when the handler finishes without an answer of its own: a Nest
/// controller method, a Botpress integration handler (a thrown error answers 500).
fn answers_2xx_on_completion(fw: Framework) -> bool {
    matches!(fw, Framework::Nest | Framework::Botpress)
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        let Some(root) = model.scopes.first() else { continue };
        let Some(root_fn) = root.node() else { continue };
        // A queue that runs each job once has no retry for a swallow to prevent.
        if crate::model::queue_retries::never_retried(cx.project, &model.handler) {
            continue;
        }
        // A sweep's next run picks up what this one failed to remove.
        if crate::model::queue_retries::redone_by_next_run(&model.handler) {
            continue;
        }
        let fw = model.handler.framework;
        let names = responses::handler_names(&model.handler);
        let acks_2xx = !fw.is_http()
            || answers_2xx_on_completion(fw)
            || responses::responses_in(root_fn, &root.file().text, &names, false).iter().any(|r| r.is_2xx())
            || fw == Framework::H3
                && responses::returned_values(root_fn, &root.file().text, &names, false).iter().any(|r| r.is_2xx());
        let c = Cx { cx, model, acks_2xx, sites: Default::default() };
        let mut seen: HashSet<(std::path::PathBuf, usize, usize)> = HashSet::new();
        let run_once = if fw == Framework::Bullmq {
            crate::model::queue_retries::scopes_run_once(
                cx.project,
                &model.handler,
                &model.scopes,
                &model.call_sites(cx.project),
            )
        } else {
            Vec::new()
        };
        for (i, scope) in model.scopes.iter().enumerate() {
            // a job enqueued with one attempt loses no retry to a swallow
            if run_once.get(i) == Some(&true) {
                continue;
            }
            let Some(func) = scope.node() else { continue };
            for d in catches(&c, i, scope, func)
                .into_iter()
                .chain(returned_errors(&c, i, scope, func))
                .chain(body_only(&c, i, scope, func))
                .chain(failed_fetch_returns(&c, i, scope, func))
                .chain(promise_catch_logs_only(&c, scope, func))
                .chain(lambda_returns_failure_status(&c, i, scope, func))
            {
                if seen.insert((d.file.path.clone(), d.start, d.end)) {
                    out.push(d);
                }
            }
        }
    }
}

/// An SQS-triggered Lambda that reports a failure by returning `{ statusCode: 500 }` (outside a
/// `catch`, which `catches` judges): Lambda reads nothing of the value but `batchItemFailures`,
/// so the invocation succeeds and SQS deletes the message. A 4xx drops a message that can never
/// succeed, which is what deleting it does.
fn lambda_returns_failure_status(c: &Cx, i: usize, scope: &Scope, func: Node) -> Vec<Diagnostic> {
    if i != 0 || c.model.handler.framework != Framework::LambdaSqs {
        return Vec::new();
    }
    let src = &scope.file().text;
    let status = crate::regex!(r"\bstatusCode\s*:\s*5\d\d\b");
    ast::descendants_of_kind(func, "return_statement")
        .into_iter()
        .filter(|ret| ast::enclosing_function(*ret) == Some(func) && !in_failure_path(*ret))
        .filter(|ret| {
            ret.named_child(0)
                .map(ast::unwrap_expr)
                .is_some_and(|v| v.kind_name() == "object" && status.is_match(text(v, src)))
        })
        .map(|ret| {
            diag(
                c,
                scope,
                ret,
                "an SQS-triggered Lambda returns a 5xx status object: Lambda ignores it, the invocation succeeds and SQS \
                 deletes the message, so the failed event is never retried"
                    .to_string(),
                || {
                    Fix::display_only(
                        "throw instead of returning a status",
                        "throw the error (or report the record in `batchItemFailures`) so SQS redelivers it",
                    )
                },
            )
        })
        .collect()
}

fn diag(c: &Cx, scope: &Scope, node: Node, msg: String, fix: impl FnOnce() -> Fix) -> Diagnostic {
    Diagnostic::new(RULE.id, scope.file(), node, msg)
        .in_handler(c.model, scope)
        .help("let failures fail: rethrow, answer 5xx, or check the returned error, so the provider retries")
        .with_fix(c.cx, fix)
}

/// `const res = await fetch(...); if (!res.ok) return;` with work after it, in a function the
/// handler calls (or a queue job): `fetch` does not throw on a 5xx, so a failed call returns
/// quietly, the rest of the work is skipped, and the delivery is still acknowledged.
fn failed_fetch_returns(c: &Cx, i: usize, scope: &Scope, func: Node) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if !c.acks_2xx || (i == 0 && c.model.handler.framework.is_http()) {
        return out;
    }
    let src = &scope.file().text;
    let not_ok = crate::regex!(r"^\(\s*(?:!\s*([A-Za-z_$][\w$]*)\.ok|([A-Za-z_$][\w$]*)\.ok\s*===?\s*false)\s*\)$");
    for stmt in ast::descendants_of_kind(func, "if_statement") {
        if ast::enclosing_function(stmt) != Some(func) || stmt.field("alternative").is_some() {
            continue;
        }
        let (Some(cond), Some(cons)) = (stmt.field("condition"), stmt.field("consequence")) else {
            continue;
        };
        let Some(caps) = not_ok.captures(text(cond, src)) else { continue };
        let name = caps.get(1).or(caps.get(2)).map(|m| m.as_str()).unwrap_or_default();
        let fetched = ast::find_binding_init(func, name, src, stmt.start_byte())
            .map(ast::unwrap_expr)
            .is_some_and(|init| init.kind_name() == "call_expression" && ast::callee_path(init, src) == ["fetch"]);
        let quiet_return = ast::last_statement(cons).is_some_and(|r| {
            r.kind_name() == "return_statement"
                && r.named_child(0).is_none_or(|v| matches!(v.kind_name(), "comment" | "null" | "undefined" | "false"))
        });
        if !fetched || !quiet_return {
            continue;
        }
        let work_after = ast::calls_in(func, true).into_iter().any(|call| {
            call.start_byte() > stmt.end_byte()
                && effects::classify(call, src, false).is_some_and(|e| e.kind != EffectKind::Possible)
        });
        if !work_after {
            continue;
        }
        out.push(diag(
            c,
            scope,
            stmt,
            format!(
                "a failed `fetch` (`!{name}.ok`) returns quietly and the work after it is skipped: the delivery is still acknowledged, so a transient failure is never retried"
            ),
            || Fix::display_only(
                "throw instead of returning",
                "throw (or answer 5xx) when the response is not ok, so the delivery fails and is retried",
            ),
        ));
    }
    out
}

/// `await prisma.subscription.upsert(...).catch((err) => console.log(err))`: the rejection handler
/// only logs, so the failed work resolves and the delivery is acknowledged as if it succeeded.
fn promise_catch_logs_only(c: &Cx, scope: &Scope, func: Node) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if !c.acks_2xx {
        return out;
    }
    let file = scope.file();
    let src = &file.text;
    for call in ast::calls_in(func, true) {
        let Some(callee) = call.field("function").filter(|f| f.kind_name() == "member_expression") else {
            continue;
        };
        let (Some(receiver), Some(property)) = (callee.field("object"), callee.field("property")) else {
            continue;
        };
        let [handler] = ast::arguments(call)[..] else { continue };
        if text(property, src) != "catch" || !ast::is_function(handler) || receiver.kind_name() != "call_expression" {
            continue;
        }
        // The settled value is dropped: `await work().catch(log);` as a statement.
        let dropped = ast::parent(call).is_some_and(|p| {
            p.kind_name() == "await_expression"
                && ast::parent(p).is_some_and(|s| s.kind_name() == "expression_statement")
        });
        let Some(body) = handler.field("body") else { continue };
        // (`.catch(() => null)` with nothing logged is an explicit, deliberate discard)
        let calls = ast::calls_in(body, true);
        let only_logs = same_fn_nodes(body, "throw_statement").is_empty()
            && same_fn_nodes(body, "return_statement").is_empty()
            && !calls.is_empty()
            && calls.iter().all(|call| best_effort::is_logging_call(*call, src))
            && !records_failure(body, src)
            && says_best_effort(body, src).is_none();
        let work = chain_calls(receiver)
            .into_iter()
            .any(|link| effects::classify(link, src, false).is_some_and(|e| e.kind != EffectKind::Possible));
        // A processed marker written after the work: losing it costs a repeat, not the event.
        let marker = writes_marker(receiver, src, func, scope);
        let incidental = matches!(
            best_effort::call_category(c.cx.project, file, receiver, 3),
            best_effort::Category::Telemetry | best_effort::Category::Notification
        );
        let Some(stmt) = ast::enclosing_statement(call) else { continue };
        let marked = comment_block_above(src, file.line_start(stmt.start_byte())).is_some_and(|t| marked(&t));
        if !dropped || !only_logs || !work || marker || incidental || marked || in_failure_path(stmt) {
            continue;
        }
        let what = if c.model.handler.framework.is_http() {
            "the handler then answers 2xx"
        } else {
            "the job/message then completes as a success"
        };
        out.push(diag(
            c,
            scope,
            property,
            format!(
                "`.catch` only logs a failure of `{}`: the work's failure resolves and {what}, so the provider never retries the event",
                ast::callee_path(receiver, src).join(".")
            ),
            || Fix::display_only(
                "let the failure fail the delivery",
                "rethrow in the `.catch` callback (or drop the `.catch`), so the delivery fails and is retried",
            ),
        ));
    }
    out
}

/// The name of the function a scope is (a callee's declared name; the handler's own is not used).
fn scope_name(scope: &Scope) -> Option<&str> {
    (scope.depth > 0).then_some(scope.function.name.as_str()).filter(|n| !n.is_empty())
}

fn own_names<'a>(c: &'a Cx, i: usize) -> Vec<&'a str> {
    if i == 0 { responses::handler_names(&c.model.handler) } else { Vec::new() }
}

/// Whether the subtree does work whose failure matters (an await, an effect).
fn does_work(node: Node, src: &str) -> bool {
    !ast::descendants_of_kind(node, "await_expression").is_empty()
        || ast::calls_in(node, false)
            .into_iter()
            .any(|c| effects::classify(c, src, false).is_some_and(|e| e.kind != EffectKind::Possible))
}

/// The calls of a builder chain, outermost first: `db.from(t).update(v).eq(k, id)` gives the
/// `eq`, `update` and `from` calls.
fn chain_calls(call: Node) -> Vec<Node> {
    let mut out = vec![call];
    let mut current = call;
    while let Some(inner) = current
        .field("function")
        .filter(|f| f.kind_name() == "member_expression")
        .and_then(|f| f.field("object"))
        .filter(|o| o.kind_name() == "call_expression")
    {
        out.push(inner);
        current = inner;
    }
    out
}

/// A link of the chain writes (or claims) the processed marker.
fn writes_marker(call: Node, src: &str, func: Node, scope: &Scope) -> bool {
    chain_calls(call).into_iter().any(|link| {
        markers::classify(link, src, func, scope.event_key.as_ref())
            .is_some_and(|m| matches!(m.op, markers::MarkerOp::Write | markers::MarkerOp::Claim))
    })
}

/// Cleanup inside another catch or a `finally` runs on a path whose outcome is decided.
fn in_failure_path(node: Node) -> bool {
    ast::ancestors(node)
        .take_while(|a| !ast::is_function(*a))
        .any(|a| matches!(a.kind_name(), "catch_clause" | "finally_clause"))
}

/// The node is in a `finally` of its own function.
fn in_finally(node: Node) -> bool {
    ast::ancestors(node).take_while(|a| !ast::is_function(*a)).any(|a| a.kind_name() == "finally_clause")
}

/// The calls under a `try` block that its catch can see: those not inside a nested `try`
/// with a catch of its own.
fn exposed_calls(block: Node) -> Vec<Node> {
    ast::calls_in(block, false)
        .into_iter()
        .filter(|call| {
            !ast::ancestors(*call).take_while(|a| *a != block).any(|a| {
                a.kind_name() == "statement_block"
                    && ast::parent(a).is_some_and(|t| {
                        t.kind_name() == "try_statement" && t.field("body") == Some(a) && t.field("handler").is_some()
                    })
            })
        })
        .collect()
}

fn same_fn_nodes<'t>(body: Node<'t>, kind: &str) -> Vec<Node<'t>> {
    let func = ast::enclosing_function(body);
    ast::descendants_of_kind(body, kind).into_iter().filter(|n| ast::enclosing_function(*n) == func).collect()
}

/// A catch that hands its error to a function that always throws (`this.handleError(e, "create")`
/// declared `: never`, or ending in a `throw`) rethrows it, reshaped.
fn calls_a_thrower(c: &Cx, file: &Arc<SourceFile>, body: Node) -> bool {
    ast::named_children(body).into_iter().any(|stmt| {
        let Some(call) = stmt.named_child(0).map(ast::unwrap_expr).filter(|e| e.kind_name() == "call_expression")
        else {
            return false;
        };
        let Some(def) = reach::resolve_call(c.cx.project, file, call) else { return false };
        let Some(func) = def.node() else { return false };
        let def_src = &def.file.text;
        let declared_never =
            func.field("return_type").is_some_and(|t| text(t, def_src).trim_start_matches(':').trim() == "never");
        declared_never
            || func
                .field("body")
                .filter(|b| b.kind_name() == "statement_block")
                .and_then(|b| ast::named_children(b).into_iter().rev().find(|n| n.kind_name() != "comment"))
                .is_some_and(|last| last.kind_name() == "throw_statement")
    })
}

/// The catch returns a literal in place of what it read (`return {}`, `return []`, `return null`).
fn returns_a_fallback(body: Node) -> bool {
    let returns =
        ast::named_children(body).into_iter().filter(|s| s.kind_name() == "return_statement").collect::<Vec<_>>();
    !returns.is_empty()
        && returns.iter().all(|r| {
            r.named_child(0).map(ast::unwrap_expr).is_some_and(|v| {
                matches!(
                    v.kind_name(),
                    "object" | "array" | "null" | "undefined" | "false" | "true" | "number" | "string"
                )
            })
        })
}

fn records_failure(body: Node, src: &str) -> bool {
    ast::calls_in(body, false).into_iter().any(|call| {
        let p = ast::callee_path(call, src).join(".").to_ascii_lowercase();
        ["retry", "dlq", "deadletter", "dead_letter", "fail", "outbox", "nack", "reject", "requeue"]
            .iter()
            .any(|w| p.contains(w))
            || p == "next"
            || effects::classify(call, src, false).is_some_and(|e| e.kind == EffectKind::Enqueue)
            || publishes_to_failure_topic(call, src)
    })
}

/// `producer.emitMessage(TOPICS.CREATE_PR_FAILURE, event)`: the failure is handed on as a
/// message of its own, to whoever waits for the outcome.
fn publishes_to_failure_topic(call: Node, src: &str) -> bool {
    let name = ast::callee_name(call, src).unwrap_or_default().to_ascii_lowercase();
    let publishes = ["emit", "publish", "produce", "send", "add", "enqueue"].iter().any(|v| name.starts_with(v));
    publishes
        && !crate::model::best_effort::is_logging_call(call, src)
        && ast::arguments(call).first().is_some_and(|topic| {
            matches!(ast::kind(topic), "identifier" | "member_expression" | "string")
                && crate::regex!(r"(?i)fail|dlq|dead_?letter").is_match(text(*topic, src))
        })
}

fn marked_best_effort(c: &Cx, try_stmt: Node, src: &str) -> bool {
    let block = try_stmt.field("body");
    if let Some(block) = block {
        let listed = ast::calls_in(block, false).into_iter().any(|call| {
            let path = ast::callee_path_shared(call, src).join(".");
            let name = ast::callee_name(call, src).unwrap_or_default();
            c.cx.config.best_effort.iter().any(|b| *b == name || *b == path)
        });
        if listed {
            return true;
        }
    }
    let above = |n: Node| {
        let start = src[..n.start_byte()].rfind('\n').map_or(0, |i| i + 1);
        comment_block_above(src, start).is_some_and(|c| marked(&c))
    };
    ast::descendants_of_kind(try_stmt, "comment").iter().any(|cm| marked(&text(*cm, src).to_ascii_lowercase()))
        || above(try_stmt)
        || wrapping_ifs(try_stmt).into_iter().any(above)
        || function_doc(try_stmt, src).is_some_and(|c| marked(&c))
}

/// The `if` statements (without an `else`) whose block holds nothing but `stmt` (or such an
/// `if`), innermost first: a comment above `// (best-effort) if (created) { try { ... } }` speaks
/// of the `try` inside.
fn wrapping_ifs(stmt: Node) -> Vec<Node> {
    let mut out = Vec::new();
    let mut at = stmt;
    while let Some(block) = ast::parent(at).filter(|b| b.kind_name() == "statement_block") {
        let only = ast::named_children(block).into_iter().filter(|n| n.kind_name() != "comment").count() == 1;
        let Some(owner) = ast::parent(block).filter(|o| {
            o.kind_name() == "if_statement" && o.field("consequence") == Some(block) && o.field("alternative").is_none()
        }) else {
            break;
        };
        if !only {
            break;
        }
        out.push(owner);
        at = owner;
    }
    out
}

/// The comment block above the function that holds `node` (above its `export` or its
/// `const f = ...` declaration): "Fire-and-forget: errors are logged so the main flow never breaks".
fn function_doc(node: Node, src: &str) -> Option<String> {
    let func = ast::enclosing_function(node)?;
    let mut decl = func;
    while let Some(p) = ast::parent(decl) {
        if matches!(
            p.kind_name(),
            "variable_declarator" | "lexical_declaration" | "variable_declaration" | "export_statement"
        ) {
            decl = p;
        } else {
            break;
        }
    }
    let start = src[..decl.start_byte()].rfind('\n').map_or(0, |i| i + 1);
    comment_block_above(src, start)
}

/// The failure is the outcome, kept as data: `catch (e) { result = { ok: false, error: e.message } }`
/// and `result` is read after the `try` (a health check that records "down", a per-item
/// status, a workflow step saved with `status: output.error ? "failure" : "success"`): the
/// catch assigns a value made from the error to a name or property the code after it reads.
fn captures_error(clause: Node, body: Node, try_stmt: Node, src: &str) -> bool {
    let Some(param) = clause.field("parameter").filter(|p| p.kind_name() == "identifier") else {
        return false;
    };
    let param = text(param, src);
    let after = ast::parent(try_stmt).map(|p| &src[try_stmt.end_byte()..p.end_byte()]).unwrap_or("");
    same_fn_nodes(body, "assignment_expression").into_iter().any(|a| {
        let (Some(left), Some(right)) = (a.field("left"), a.field("right")) else {
            return false;
        };
        let uses_error = ast::descendants_of_kind(right, "identifier").iter().any(|i| text(*i, src) == param)
            || (right.kind_name() == "identifier" && text(right, src) == param);
        let kept = match left.kind_name() {
            "identifier" => {
                let name = text(left, src);
                crate::regex!(r"[A-Za-z_$][\w$]*").find_iter(after).any(|m| m.as_str() == name)
            }
            // `$.actionOutput.error = error.details`, written into the step record after the try
            "member_expression" => after.contains(text(left, src)),
            _ => false,
        };
        uses_error && kept
    })
}

/// The failure is thrown after all: the catch keeps the error (`err = e`) and the `finally`
/// or a later statement throws it (`finally { if (err) throw new UnrecoverableError(err.message) }`),
/// or the block goes on to throw unconditionally (a catch around an error-status insert on a
/// path that then throws the original failure).
fn rethrown_after(clause: Node, body: Node, try_stmt: Node, src: &str) -> bool {
    let mut next = try_stmt.next_named_sibling();
    while let Some(stmt) = next {
        match stmt.kind_name() {
            "throw_statement" => return true,
            "expression_statement" | "lexical_declaration" | "variable_declaration" | "comment"
                if same_fn_nodes(stmt, "return_statement").is_empty() => {}
            _ => break,
        }
        next = stmt.next_named_sibling();
    }
    let Some(param) = clause.field("parameter").filter(|p| p.kind_name() == "identifier") else {
        return false;
    };
    let param = text(param, src);
    let kept: Vec<&str> = ast::descendants_of_kind(body, "assignment_expression")
        .into_iter()
        .filter(|a| a.field("right").is_some_and(|r| r.kind_name() == "identifier" && text(r, src) == param))
        .filter_map(|a| a.field("left").filter(|l| l.kind_name() == "identifier").map(|l| text(l, src)))
        .collect();
    if kept.is_empty() {
        return false;
    }
    let later = try_stmt
        .field("finalizer")
        .into_iter()
        .chain(std::iter::successors(try_stmt.next_named_sibling(), |n| n.next_named_sibling()));
    later
        .flat_map(|n| same_fn_nodes(n, "throw_statement"))
        .any(|throw| ast::descendants_of_kind(throw, "identifier").iter().any(|i| kept.contains(&text(*i, src))))
}

/// A best-effort comment covers the statement below it and what only follows from it: the
/// statements inside it, and later statements of its block that read what it declared
/// (`// refresh the cached total (best-effort)` above the read, then `if (!readError)
/// { update(total) }`).
fn under_marked_comment(stmt: Node, func: Node, file: &SourceFile) -> bool {
    let src = &file.text;
    let above = |n: Node| comment_block_above(src, file.line_start(n.start_byte())).is_some_and(|t| marked(&t));
    let mut at = stmt;
    // A `try`'s own comment is judged with its catch (`marked_best_effort`): above a `try`,
    // "never throws" describes the catch, not the work.
    while at.id() != func.id() && at.kind_name() != "try_statement" {
        if ast::parent(at).is_some_and(|p| p.kind_name() == "statement_block") {
            if above(at) {
                return true;
            }
            let read_from_marked = std::iter::successors(at.prev_named_sibling(), |p| p.prev_named_sibling())
                .filter(|p| above(*p))
                .any(|p| crate::model::stmts::mentions_any(at, src, &crate::model::stmts::declared_names(p, src)));
            if read_from_marked {
                return true;
            }
        }
        let Some(up) = ast::parent(at) else { return false };
        at = up;
    }
    false
}

/// The catch findings, with the fix withheld where the swallow looks deliberate: a fix must not
/// fail a delivery whose own work already committed, or overrule a comment that says why.
fn catches(c: &Cx, i: usize, scope: &Scope, func: Node) -> Vec<Diagnostic> {
    // Work that runs after the acknowledgement: its catches cannot change what the provider
    // was told (the deferral is ack-timing's finding).
    if deferred_scope(c, i, &mut Vec::new()) {
        return Vec::new();
    }
    let mut found = catches_found(c, i, scope, func);
    let src = &scope.file().text;
    if i > 0 && !found.is_empty() && every_caller_swallows(c, i, &mut Vec::new()) && !caller_records_done_after(c, i) {
        // A rethrow would land in the callers' catches, which swallow it too: the decision to
        // swallow is theirs (reported there, or deliberate there), and this catch changes
        // nothing, unless a caller records the event as done after the call (which a rethrow
        // would skip).
        return Vec::new();
    }
    // An empty catch whose only words say the failure is ignored: the author weighed it.
    found.retain(|d| {
        let clause = func
            .descendant_for_byte_range(d.start, d.end)
            .and_then(|at| std::iter::once(at).chain(ast::ancestors(at)).find(|a| a.kind_name() == "catch_clause"));
        !clause.is_some_and(|clause| ignored_on_purpose(clause, src))
    });
    for d in &mut found {
        let Some(at) = func.descendant_for_byte_range(d.start, d.end) else { continue };
        let Some(try_stmt) = std::iter::once(at)
            .chain(ast::ancestors(at))
            .take_while(|a| a.id() != func.id())
            .find(|a| a.kind_name() == "catch_clause")
            .and_then(ast::parent)
        else {
            continue;
        };
        let Some(fix) = d.fix.as_ref().filter(|f| f.applicability != Applicability::DisplayOnly) else { continue };
        let throws = fix.edits.iter().any(|e| e.replacement.contains("throw "));
        let Some(clause) = try_stmt.field("handler") else { continue };
        if let Some(why) =
            deliberate_swallow(func, try_stmt, src).or_else(|| misfires(c, i, func, clause, try_stmt, throws))
        {
            d.fix = Some(Fix::display_only(fix.title.clone(), why));
        }
    }
    found
}

/// A catch with no statements, only a comment that says it ignores the failure (`// ignore`,
/// `// ignore, the entry is gone anyway`).
fn ignored_on_purpose(clause: Node, src: &str) -> bool {
    let Some(body) = clause.field("body") else { return false };
    let children = ast::named_children(body);
    !children.is_empty()
        && children.iter().all(|c| c.kind_name() == "comment")
        && children.iter().any(|c| text(*c, src).to_ascii_lowercase().contains("ignore"))
}

/// Why the added failure would do harm or nothing where it goes, though nothing marks the
/// swallow as deliberate: the catch sits in a loop over items, in a callback nobody awaits,
/// inside another catch that swallows it too, recovers by itself, or leaves a fallback value
/// the code after it uses; or the caller already did the event's work (or swallows too).
fn misfires(c: &Cx, i: usize, func: Node, clause: Node, try_stmt: Node, throws: bool) -> Option<String> {
    let src = c.model.scopes[i].file().text.as_str();
    unawaited_callback(func, clause, src)
        .or_else(|| item_loop(func, try_stmt, src))
        .or_else(|| throws.then(|| enclosing_swallow(c, i, func, try_stmt, src)).flatten())
        .or_else(|| recovers(clause, src))
        .or_else(|| keeps_fallback(func, clause, try_stmt, src))
        .or_else(|| (i > 0).then(|| caller_context(c, i, throws)).flatten())
}

/// A throw in a callback nobody awaits (a timer, a listener, an async IIFE whose promise is
/// dropped) is an unhandled rejection, not a failure the provider hears about.
fn unawaited_callback(func: Node, clause: Node, src: &str) -> Option<String> {
    let mut f = ast::enclosing_function(clause)?;
    while f.id() != func.id() {
        if !reaches_caller(f, src) {
            let line = f.start_position().row + 1;
            return Some(format!(
                "the catch is in a callback nothing awaits (line {line}): a throw there is an unhandled rejection \
                 (which can crash the process), not a failure the provider hears about; report it by hand"
            ));
        }
        f = ast::enclosing_function(f)?;
    }
    None
}

/// Whether an error thrown in the nested function `f` reaches the function around it: `f` is
/// awaited or returned (directly, as an IIFE, or as the callback of an awaited call), or is
/// synchronous and called in place. Timers and listeners never pass it on.
fn reaches_caller(f: Node, src: &str) -> bool {
    const DETACHED: &[&str] = &[
        "setInterval",
        "setTimeout",
        "setImmediate",
        "nextTick",
        "queueMicrotask",
        "on",
        "once",
        "addListener",
        "addEventListener",
        "forEach",
    ];
    let is_async = text(f, src).trim_start().starts_with("async");
    let mut cur = f;
    while let Some(p) = ast::parent(cur) {
        match p.kind_name() {
            "await_expression" | "return_statement" | "arrow_function" => return true,
            "new_expression" => return false,
            "call_expression" => {
                let through_arguments = p.field("arguments").is_some_and(|a| ast::contains(a, cur));
                if through_arguments && ast::callee_name(p, src).is_some_and(|n| DETACHED.contains(&n.as_str())) {
                    return false;
                }
                cur = p;
            }
            "arguments"
            | "member_expression"
            | "parenthesized_expression"
            | "array"
            | "as_expression"
            | "non_null_expression"
            | "spread_element" => cur = p,
            "expression_statement" => return !is_async,
            "unary_expression" => return !is_async && !text(p, src).starts_with("void"),
            _ => return true,
        }
    }
    true
}

/// A catch inside a loop over items: failing there abandons the items after this one and the
/// retry redoes those before it.
fn item_loop(func: Node, try_stmt: Node, src: &str) -> Option<String> {
    const ITERATING: &[&str] = &["forEach", "map", "flatMap", "filter", "reduce", "some", "every"];
    let looping = ast::ancestors(try_stmt).take_while(|a| a.id() != func.id()).find(|a| {
        matches!(a.kind_name(), "for_in_statement" | "for_statement" | "while_statement" | "do_statement")
            || ast::is_function(*a)
                && ast::parent(*a)
                    .filter(|p| p.kind_name() == "arguments")
                    .and_then(ast::parent)
                    .and_then(|call| ast::callee_name(call, src))
                    .is_some_and(|n| ITERATING.contains(&n.as_str()))
    })?;
    Some(format!(
        "the catch is inside a loop over items (line {}): failing there abandons the items after this one and \
         the retry redoes those before it; collect the failures and fail after the loop (or report them per item) \
         by hand",
        looping.start_position().row + 1
    ))
}

/// A catch that gives no failure back: no throw, no non-2xx answer, no returned value, no
/// recorded failure.
fn swallows(body: Node, src: &str, names: &[&str]) -> bool {
    same_fn_nodes(body, "throw_statement").is_empty()
        && !responses::responses_in(body, src, names, true).iter().any(|r| !r.is_2xx())
        && same_fn_nodes(body, "return_statement").iter().all(|r| r.named_child(0).is_none())
        && !records_failure(body, src)
}

/// The innermost `try` of `func` around `node` (in its block, not its catch) whose catch
/// swallows what is thrown at `node`.
fn swallowing_try<'t>(func: Node<'t>, node: Node<'t>, src: &str, names: &[&str]) -> Option<Node<'t>> {
    let mut child = node;
    for a in ast::ancestors(node) {
        if a.id() == func.id() || ast::is_function(a) {
            return None;
        }
        if a.kind_name() == "try_statement" && a.field("body").is_some_and(|b| b.id() == child.id()) {
            let body = a.field("handler").and_then(|h| h.field("body"));
            return body.filter(|b| swallows(*b, src, names)).map(|_| a);
        }
        child = a;
    }
    None
}

/// A rethrow caught again by a swallowing `try` around this one changes only what the rest
/// of that try does.
fn enclosing_swallow(c: &Cx, i: usize, func: Node, try_stmt: Node, src: &str) -> Option<String> {
    let outer = swallowing_try(func, try_stmt, src, &own_names(c, i))?;
    Some(format!(
        "a rethrow here lands in the catch at line {}, which swallows it as well: it would only skip the rest of \
         that try; fix that catch instead",
        outer.field("handler").unwrap_or(outer).start_position().row + 1
    ))
}

/// Work the catch does itself (awaited calls that neither log nor record the error): it
/// recovers (`mkdir` when the directory is missing, a new customer when the old one is gone),
/// and a failure added after the recovery would fail the delivery it saved.
fn recovers(clause: Node, src: &str) -> Option<String> {
    let recovery = recovery_calls(clause, src).into_iter().next()?;
    Some(format!(
        "the catch recovers by itself (`{}`): a failure added after the recovery would fail the delivery it \
         saved and redo the recovery on the retry; change it by hand if the recovery is not enough",
        first_line_of(text(recovery, src))
    ))
}

/// The calls by which a catch recovers: awaited work (or an effect) that is not logging,
/// reporting or releasing, and does not pass the error on.
fn recovery_calls<'t>(clause: Node<'t>, src: &str) -> Vec<Node<'t>> {
    let Some(body) = clause.field("body") else { return Vec::new() };
    let param = clause.field("parameter").map(|p| text(p, src)).unwrap_or("");
    ast::calls_in(body, true)
        .into_iter()
        .filter(|call| {
            let awaited = ast::is_awaited_call(*call);
            let effect = effects::classify(*call, src, false).is_some_and(|e| e.kind != EffectKind::Possible);
            if !awaited && !effect {
                return false;
            }
            let path = ast::callee_path_shared(*call, src);
            let name = path.last().map(|n| n.to_ascii_lowercase()).unwrap_or_default();
            let t = text(*call, src);
            let reporting = path.first().is_some_and(|r| r == "console")
                || path.iter().any(|p| best_effort_name(p))
                || [
                    "fail",
                    "error",
                    "report",
                    "notify",
                    "audit",
                    "release",
                    "unlock",
                    "close",
                    "disconnect",
                    "rollback",
                ]
                .iter()
                .any(|w| name.contains(w))
                || t.to_ascii_lowercase().contains("rollback")
                || (!param.is_empty()
                    && param.chars().all(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$')
                    && ast::mentions_identifier(*call, src, param));
            !reporting
        })
        .collect()
}

/// The catch sets a 5xx status that a later send goes out with (`res.status(500)` in the
/// catch, one `res.end()` after the `try`): the failure is answered, not swallowed.
fn sets_failure_status(body: Node, src: &str) -> bool {
    crate::regex!(r"\.status\(\s*5\d\d\s*\)|\.statusCode\s*=\s*5\d\d\b|\.writeHead\(\s*5\d\d\b")
        .is_match(text(body, src))
}

/// Whether the catch runs other work in place of what failed, awaited and outside any nested
/// `try`, so its failure propagates: a recovery (`recovers`) that neither undoes nor cleans up
/// (deleting a lock or a claim after a failure is a swallow that tidies up).
fn falls_back_to_other_work(clause: Node, body: Node, src: &str) -> bool {
    recovery_calls(clause, src).into_iter().any(|call| {
        let name = ast::callee_path(call, src).last().map(|n| n.to_ascii_lowercase()).unwrap_or_default();
        ast::is_awaited_call(call)
            && !ast::ancestors(call).take_while(|a| a.id() != body.id()).any(|a| a.kind_name() == "try_statement")
            && !["del", "remove", "clear", "clean", "unset", "cancel", "revert", "undo", "log", "track", "capture"]
                .iter()
                .any(|w| name.contains(w))
    })
}

/// A value the code after the `try` goes on with when the work failed: the catch assigns a
/// fallback (`client = null`, then `return client`), or the try assigns a variable declared
/// before it from a read, which stays unset on failure (`let sha; try { sha = await read() }
/// catch {}`, `sha` used after).
fn keeps_fallback(func: Node, clause: Node, try_stmt: Node, src: &str) -> Option<String> {
    let after = &src[try_stmt.end_byte()..func.end_byte()];
    let read_after = |name: &str| crate::regex!(r"[A-Za-z_$][\w$]*").find_iter(after).any(|m| m.as_str() == name);
    let root = |left: Node| -> Option<String> {
        let mut n = left;
        while matches!(n.kind_name(), "member_expression" | "subscript_expression") {
            n = n.field("object")?;
        }
        (n.kind_name() == "identifier").then(|| text(n, src).to_string())
    };
    let body = clause.field("body")?;
    // A catch that returns or throws ends the work there: nothing goes on with a fallback.
    if !same_fn_nodes(body, "return_statement").is_empty() || !same_fn_nodes(body, "throw_statement").is_empty() {
        return None;
    }
    let fallback = same_fn_nodes(body, "assignment_expression").into_iter().find_map(|a| {
        let left = a.field("left")?;
        root(left).filter(|r| read_after(r)).map(|_| text(left, src))
    });
    if let Some(name) = fallback {
        return Some(format!(
            "the catch leaves a fallback in `{name}`, which the code after the try goes on with: the failure is \
             handled by design; rethrow by hand only if the event's work cannot do without it"
        ));
    }
    let block = try_stmt.field("body")?;
    let unset = same_fn_nodes(block, "assignment_expression").into_iter().find_map(|a| {
        let left = a.field("left").filter(|l| l.kind_name() == "identifier")?;
        let name = text(left, src);
        let declared_before = ast::find_binding_init(func, name, src, try_stmt.start_byte()).is_some()
            || crate::regex!(r"\b(?:let|var)\s+([A-Za-z_$][\w$]*)")
                .captures_iter(&src[func.start_byte()..try_stmt.start_byte()])
                .any(|c| &c[1] == name);
        let reads = ast::calls_in(a.field("right")?, false)
            .into_iter()
            .all(|call| effects::classify(call, src, false).is_none_or(|e| e.kind == EffectKind::Possible));
        (declared_before && reads && read_after(name) && !ast::mentions_identifier(body, src, name))
            .then(|| name.to_string())
    });
    unset.map(|name| {
        format!(
            "`{name}` keeps its value from before the try when the try fails, and the code after it goes on with \
             that: a lookup with a fallback, not lost work; rethrow by hand only if the event's work needs `{name}`"
        )
    })
}

/// The callee's callers: every call of it sits in a try whose catch swallows (a rethrow here
/// reaches only that catch), or one of them already did the event's work before the call
/// (failing the delivery would redo it on the retry).
fn caller_context(c: &Cx, i: usize, throws: bool) -> Option<String> {
    let name = c.model.scopes[i].chain.last()?;
    let sites: Vec<_> = callers_of(c, i)
        .into_iter()
        .filter_map(|(k, call)| {
            let s = &c.model.scopes[k];
            s.node().map(|f| (s, f, call))
        })
        .collect();
    if sites.is_empty() {
        return None;
    }
    if throws {
        let caught: Vec<Node> = sites
            .iter()
            .filter_map(|(s, f, call)| {
                let names = if s.depth == 0 { responses::handler_names(&c.model.handler) } else { Vec::new() };
                swallowing_try(*f, *call, &s.file().text, &names)
            })
            .collect();
        if caught.len() == sites.len() {
            let (s, _, _) = sites[0];
            return Some(format!(
                "every call of `{name}` is inside a try whose catch swallows the error as well ({}:{}): a rethrow \
                 here reaches only that catch; fix that one instead",
                s.file().path.file_name().map_or(String::new(), |n| n.to_string_lossy().to_string()),
                caught[0].field("handler").unwrap_or(caught[0]).start_position().row + 1
            ));
        }
    }
    sites.iter().find_map(|(s, f, site)| {
        let src = s.file().text.as_str();
        let done = committed_before(*f, site.start_byte(), src)?;
        Some(format!(
            "the caller already did the event's work (`{}`, line {}) before calling `{name}`: failing the delivery \
             here would redo that work on the retry; wrap the work in the guard first, or rethrow by hand if it is \
             idempotent",
            first_line_of(text(done, src)),
            done.start_position().row + 1
        ))
    })
}

/// The first write of the event's work that `func` runs before byte `at`: a database write or
/// payment, or an awaited project call named for a write (`saveResult`, `updateJobStatus`,
/// `recordAttempt`).
fn committed_before<'t>(func: Node<'t>, at: usize, src: &str) -> Option<Node<'t>> {
    // Only work on the way to `at`: a write in another `case` or branch (which does not lead
    // here) is another delivery's work.
    let target = func.descendant_for_byte_range(at, at)?;
    let on_the_way = |call: Node| {
        ast::ancestors(call).take_while(|a| a.id() != func.id()).all(|a| {
            let branch = matches!(a.kind_name(), "switch_case" | "switch_default" | "else_clause" | "catch_clause")
                || a.kind_name() == "statement_block"
                    && ast::parent(a).is_some_and(|p| p.kind_name() == "if_statement");
            !branch || ast::contains(a, target)
        })
    };
    ast::calls_in(func, true).into_iter().find(|call| {
        call.end_byte() <= at
            && on_the_way(*call)
            && (effects::classify(*call, src, false)
                .is_some_and(|e| e.kind.is_db() || matches!(e.kind, EffectKind::Payment | EffectKind::Http))
                || ast::is_awaited_call(*call) && ast::callee_name(*call, src).is_some_and(|n| write_verb(&n)))
    })
}

/// A function name that starts with a write verb (whole camelCase word: `updateJobStatus`,
/// not `updatedAt`).
fn write_verb(name: &str) -> bool {
    const VERBS: &[&str] = &[
        "save",
        "update",
        "create",
        "insert",
        "upsert",
        "persist",
        "record",
        "mark",
        "complete",
        "finish",
        "store",
        "write",
        "delete",
        "increment",
        "grant",
        "charge",
        "refund",
        "deliver",
    ];
    VERBS.iter().any(|v| {
        name.strip_prefix(v).is_some_and(|rest| rest.is_empty() || rest.starts_with(|ch: char| ch.is_ascii_uppercase()))
    })
}

/// Why a swallowing catch looks deliberate: a comment at the try or in the catch speaks of
/// retries or best effort, or the event's own work (a database write, a payment) already ran
/// before the try, so failing the delivery here would redo it.
fn deliberate_swallow(func: Node, try_stmt: Node, src: &str) -> Option<String> {
    // ("should not fail silently" says the opposite: no negated phrases)
    const SAID: &[&str] =
        &["retry", "retries", "best-effort", "best effort", "non-critical", "not critical", "intentional"];
    let mut comments: Vec<Node> = ast::descendants_of_kind(try_stmt.field("handler")?, "comment");
    let mut prev = try_stmt.prev_named_sibling();
    while let Some(p) = prev.filter(|p| p.kind_name() == "comment") {
        comments.push(p);
        prev = p.prev_named_sibling();
    }
    if let Some(word) = comments
        .iter()
        .map(|c| text(*c, src).to_ascii_lowercase())
        .find_map(|t| SAID.iter().find(|w| t.contains(**w)).copied())
    {
        return Some(format!(
            "a comment at this catch speaks of \"{word}\": the swallow looks deliberate; change it by hand"
        ));
    }
    let committed = committed_before(func, try_stmt.start_byte(), src)?;
    let line = committed.start_position().row + 1;
    Some(format!(
        "this catch runs after the event's own work (`{}`, line {line}) already ran: failing the delivery here \
         would redo that work on the retry; wrap the work in the guard first, or rethrow by hand if it is idempotent",
        first_line_of(text(committed, src))
    ))
}

fn first_line_of(s: &str) -> &str {
    let line = s.lines().next().unwrap_or(s);
    match line.find('(') {
        Some(i) => &line[..i],
        None => line,
    }
}

fn catches_found(c: &Cx, i: usize, scope: &Scope, func: Node) -> Vec<Diagnostic> {
    let file = scope.file();
    let src = &file.text;
    let fw = c.model.handler.framework;
    let names = own_names(c, i);
    let mut out = Vec::new();
    let duplicate_case = crate::regex!(r"already exists?|duplicate|exists already");
    for clause in ast::descendants_of_kind(func, "catch_clause") {
        let Some(try_stmt) = ast::parent(clause).filter(|p| p.kind_name() == "try_statement") else { continue };
        // Work deferred past the response (`after(...)`) is ack-timing's finding.
        let deferred = ast::ancestors(clause)
            .take_while(|a| *a != func)
            .any(|a| a.kind_name() == "call_expression" && crate::model::best_effort::deferrer(a, src).is_some());
        if deferred {
            continue;
        }
        let (Some(block), Some(body)) = (try_stmt.field("body"), clause.field("body")) else {
            continue;
        };
        // A catch that takes another way to the same end (`stat` fails, so `mkdir`; the bucket
        // is missing, so create it) handles the error: a failure of that way is not caught.
        if falls_back_to_other_work(clause, body, src) || sets_failure_status(body, src) {
            continue;
        }
        if !does_work(block, src)
            || ast::calls_in(block, false)
                .into_iter()
                .any(|call| is_verify(call, src) || verifies_through(c.cx.project, file, call))
        {
            continue;
        }
        // Work inside a nested `try` that has its own `catch` never reaches this one: the
        // inner catch is where a failure is (or is not) swallowed.
        // `Promise.allSettled` never rejects: neither it nor the tasks it settles throw into
        // this catch (its unchecked results are the finding, if any).
        let exposed: Vec<Node> =
            exposed_calls(block).into_iter().filter(|call| !settled_by_all_settled(*call, block, src)).collect();
        if !exposed.iter().any(|call| awaited_or_effect(*call, block, src)) {
            continue;
        }
        // An in-code retry loop catches to try again; what happens after the last attempt
        // is outside the catch (a `while` polls until it succeeds or gives up). A counted loop
        // over items (`for (let i = 0; i < n; i++)`) is not one: a caught failure there loses
        // that item.
        // A consumer's polling loop (it receives the next messages itself) is no retry loop for
        // a `try` around one message's work; a `try` around the receive itself polls again.
        let receives = |n: Node| {
            crate::regex!(r"ReceiveMessageCommand|\.receiveMessages?\(|\.getNextJob\(").is_match(text(n, src))
        };
        let in_retry_loop = ast::ancestors(try_stmt).take_while(|a| !ast::is_function(*a)).any(|a| {
            (matches!(a.kind_name(), "while_statement" | "do_statement")
                || a.kind_name() == "for_statement"
                    && (a.field("condition").is_none_or(|c| text(c, src).trim() == ";")
                        || crate::model::retry_loops::is_retry_loop(a, src)))
                && (!receives(a) || receives(try_stmt))
        });
        if in_retry_loop || only_parses_message(&exposed, src) {
            continue;
        }
        // Cleanup inside another catch (`catch (e) { try { markFailed() } catch {} ... }`) runs on
        // a path that already failed: the outer catch decides what the provider sees, and
        // rethrowing the cleanup's error would replace the original failure.
        // The same holds for cleanup in a `finally` (releasing a lock): the outcome is decided.
        if in_failure_path(try_stmt) {
            continue;
        }
        // Remix: a thrown `Response` is the answer, not a rethrow (`throw new Response()` is a 200)
        // (not when the try block answers by throwing Responses too: the catch receives those)
        if fw == Framework::Remix
            && !same_fn_nodes(block, "throw_statement").into_iter().any(|t| thrown_response_status(t, src).is_some())
            && let Some((t, status)) = same_fn_nodes(body, "throw_statement")
                .into_iter()
                .find_map(|t| thrown_response_status(t, src).map(|s| (t, s)))
                .filter(|(_, s)| (200..300).contains(s))
        {
            // `throw new Response()` → `throw new Response(null, { status: 500 })`
            let bare_args = ast::unwrap_expr(t.named_child(0).unwrap_or(t))
                .field("arguments")
                .filter(|a| ast::named_children(*a).is_empty());
            let fix = || match bare_args {
                Some(a) => Fix::unsafe_(
                    "answer 500 so the provider retries",
                    vec![Edit::replace(a.start_byte(), a.end_byte(), "(null, { status: 500 })")],
                )
                .with_note("review: the failure is now reported, so the provider retries the event"),
                None => Fix::display_only(
                    "answer 500 so the provider retries",
                    "throw `new Response(null, { status: 500 })` from the catch",
                ),
            };
            let msg = format!(
                "the catch throws a {status} Response after a failure: Remix answers it, so the provider records the event as delivered and never retries it"
            );
            out.push(diag(c, scope, t, msg, fix));
            continue;
        }
        if !same_fn_nodes(body, "throw_statement").is_empty()
            || calls_a_thrower(c, file, body)
            || records_failure(body, src)
            || fails_through_done(c, clause, body, src)
            || DUP_CODE.is_match(text(body, src))
            || text(body, src).contains("batchItemFailures")
            || ((marked_best_effort(c, try_stmt, src)
                // "failed to refresh the cache", "non-critical": the catch's own words ("track"
                // alone also names recording the event's work, so it does not count here)
                || says_best_effort(body, src).is_some_and(|w| w != "track")
                || warns_only(body, src))
                && !(ends_function(try_stmt, func) && caller_records_done_after(c, i)))
            // "This will catch if the label already exists": the swallow is the duplicate case.
            || comment_block_above(src, file.line_start(try_stmt.start_byte()))
                .is_some_and(|c| duplicate_case.is_match(&c))
            || rethrown_after(clause, body, try_stmt, src)
            || refines_initialised_values(block, func, src)
            || result_checked_after(block, try_stmt, func, src)
        {
            continue;
        }
        if flagged_for_later(func, try_stmt, body, src, &names) {
            continue;
        }
        // What the guarded work is: telemetry or a notification wrapped in its own catch is
        // deliberate best effort; a lookup whose catch falls through keeps a fallback value and
        // the event's work still runs; calls that return their error (supabase-js) never throw
        // into this catch, so their unchecked result is the finding, not the catch.
        let guarded: Vec<Node> = exposed.iter().copied().filter(|call| error_returning(*call, src).is_none()).collect();
        let own_category = scope_name(scope).and_then(best_effort::named_category);
        let work = best_effort::combine(
            guarded
                .iter()
                .filter(|call| ast::parent(**call).is_none_or(|p| p.kind_name() != "member_expression"))
                .map(|call| best_effort::call_category(c.cx.project, file, *call, 3))
                // Inside a helper named for the notification it sends (`sendReceiptEmail`), its
                // HTTP request to the mail API is that notification.
                .map(|cat| match (cat, own_category) {
                    (best_effort::Category::Work, Some(own))
                        if guarded.iter().all(|g| {
                            effects::classify(*g, src, false).is_none_or(|e| {
                                matches!(
                                    e.kind,
                                    EffectKind::Http
                                        | EffectKind::Possible
                                        | EffectKind::Email
                                        | EffectKind::Sms
                                        | EffectKind::Chat
                                )
                            })
                        }) =>
                    {
                        own
                    }
                    (cat, _) => cat,
                }),
        );
        let falls_through = same_fn_nodes(body, "return_statement").is_empty()
            && responses::responses_in(body, src, &names, false).is_empty();
        if matches!(work, best_effort::Category::Telemetry | best_effort::Category::Notification)
            || work == best_effort::Category::Read && falls_through
        {
            continue;
        }
        // A catch that tries an alternative under its own catch (inline comment failed → post
        // a general note) handles the failure; that inner catch decides the outcome.
        if ast::descendants_of_kind(body, "try_statement")
            .into_iter()
            .any(|t| t.field("handler").is_some() && t.field("body").is_some_and(|b| does_work(b, src)))
        {
            continue;
        }
        // Explicit-ack consumers (RabbitMQ, Pub/Sub, an SQS poller): a catch that skips the ack
        // done in the `try` leaves the message unacknowledged, so it is redelivered.
        if matches!(fw, Framework::Amqp | Framework::Pubsub | Framework::SqsPolling)
            && acknowledges(block, src)
            && !acknowledges(body, src)
        {
            continue;
        }
        // A read with a fallback value (`catch { cached = null }`, `catch { return {} }`): no work
        // of the event is lost.
        if reads_only(block, src)
            && (!ast::descendants_of_kind(body, "assignment_expression").is_empty() || returns_a_fallback(body))
        {
            continue;
        }
        if captures_error(clause, body, try_stmt, src) {
            continue;
        }
        let mut resps = responses::responses_in(body, src, &names, false);
        let inner_fn = ast::enclosing_function(clause).unwrap_or(func);
        // h3 / Nest answer with what the handler returns: `catch { return { error } }` is a 2xx.
        if i == 0 && inner_fn == func && matches!(fw, Framework::H3 | Framework::Nest) {
            resps.extend(
                responses::returned_values(func, src, &names, fw == Framework::Nest)
                    .into_iter()
                    .filter(|r| ast::contains(body, r.node)),
            );
        }
        if resps.iter().any(|r| !r.is_2xx()) {
            continue;
        }
        if let Some(r) = resps.iter().find(|r| r.is_2xx()) {
            // Nest: a returned value cannot carry a status; rethrowing answers 500.
            let param = clause.field("parameter").filter(|p| p.kind_name() == "identifier");
            let fix = || match (crate::fix::edits::set_status(r, 500, src, file.style().eol), param) {
                (Some(e), _) => Fix::unsafe_("answer 500 so the provider retries", vec![e]),
                (None, Some(p)) if r.style == Style::Returned && fw == Framework::Nest => {
                    let semi = if text(r.node, src).trim_end().ends_with(';') { ";" } else { "" };
                    Fix::unsafe_(
                        "rethrow so Nest answers 500 and the provider retries",
                        vec![Edit::replace(
                            r.node.start_byte(),
                            r.node.end_byte(),
                            format!("throw {}{semi}", text(p, src)),
                        )],
                    )
                }
                (None, _) if r.style == Style::Returned => Fix::display_only(
                    "answer 500 so the provider retries",
                    "call `setResponseStatus(event, 500)` (imported from h3) before returning, or rethrow",
                ),
                (None, _) => Fix::display_only("answer 500 so the provider retries", "the status is not a literal"),
            };
            out.push(diag(
                c,
                scope,
                r.node,
                format!("the catch answers {} after a failure: the provider records the event as delivered and never retries it", r.status.unwrap_or(200)),
                fix,
            ));
            continue;
        }
        let returns = same_fn_nodes(body, "return_statement");
        let http = fw.is_http();
        let dropped = failure_dropped(c, i, inner_fn == func, &returns);
        let swallowed = if http {
            if i == 0 && inner_fn == func {
                if !returns.is_empty() {
                    // A bare return after a catch is response-missing's concern.
                    continue;
                }
                // h3 answers with what the handler returns (`return "ok"` after the try is a 200).
                let returned =
                    if fw == Framework::H3 { responses::returned_values(func, src, &names, false) } else { Vec::new() };
                // `catch { log }` then `return res.redirect(...)`: the statement that answers
                // right after the try decides what a failure gets.
                let next_answer = ast::following_siblings(try_stmt)
                    .into_iter()
                    .take_while(|s| matches!(s.kind_name(), "expression_statement" | "return_statement"))
                    .find_map(|s| responses::responses_in(s, src, &names, false).into_iter().next());
                if next_answer.is_some_and(|r| !r.is_2xx()) {
                    continue;
                }
                answers_2xx_on_completion(fw)
                    || responses::responses_in(func, src, &names, true)
                        .iter()
                        .chain(&returned)
                        .filter(|r| r.node.start_byte() >= try_stmt.end_byte())
                        .any(|r| r.is_2xx())
            } else {
                (returns.iter().all(|r| returns_nothing_checkable(*r))
                    || dropped.is_some()
                    || answered_as_returned(c, i, inner_fn == func, &returns))
                    && c.acks_2xx
            }
        } else {
            // A job that returns a failure outcome (`return "failure"`, `{ success: false }`)
            // hands the failure to its runner, which records it (BullMQ's `returnvalue`, a
            // runner's `onComplete(job, result)`): a decision, not a silent success.
            returns.iter().all(|r| {
                returns_nothing_checkable(*r) || i == 0 && inner_fn == func && !returns_failure_outcome(*r, src)
            }) || dropped.is_some()
        };
        if !swallowed {
            continue;
        }
        // Nobody awaits this function: its catch cannot change what the provider is told
        // (the dropped call is ack-timing's finding, where it is not deliberate best effort).
        if inner_fn == func && called_without_await(c, i) {
            continue;
        }
        let what = if http { "the handler then answers 2xx" } else { "the job/message then completes as a success" };
        // The failure is handed back and lost where the caller drops it: that call is the fix site.
        if let Some((k, site)) = dropped {
            let caller_src = &c.model.scopes[k].file().text;
            let name = ast::callee_name(site, caller_src).unwrap_or_default();
            out.push(diag(
                c,
                &c.model.scopes[k],
                site,
                format!(
                    "`{name}` catches its failure and returns it as a value ({}:{}), and this call drops that value: {what}, and the provider never retries the failed event",
                    file.path.file_name().map_or(String::new(), |n| n.to_string_lossy().to_string()),
                    clause.start_position().row + 1
                ),
                || Fix::display_only(
                    "check the returned outcome",
                    format!("throw (or answer 5xx) when `{name}` reports a failure"),
                ),
            ));
            continue;
        }
        let fix = || catch_fix(c, i, file, clause, body, inner_fn == func);
        out.push(diag(
            c,
            scope,
            clause,
            format!("this catch swallows the error and {what}: the provider never retries the failed event"),
            fix,
        ));
    }
    out
}

/// `call` is a `Promise.allSettled(...)` inside `within`, or a task in its arguments.
fn settled_by_all_settled(call: Node, within: Node, src: &str) -> bool {
    std::iter::once(call)
        .chain(ast::ancestors(call).take_while(|a| a.id() != within.id()))
        .any(|a| a.kind_name() == "call_expression" && ast::callee_path(a, src) == ["Promise", "allSettled"])
}

/// `Promise.allSettled(keys.map((k) => cache.del(k)))`, `... => invalidateProjectCache(p.id)`:
/// every task it awaits works on a cache, which the next read rebuilds; a failed eviction is no
/// lost event.
fn settles_cache_work(call: Node, src: &str) -> bool {
    let cache_word = |s: &str| best_effort::words(s).iter().any(|w| w == "cache" || w == "caches");
    let tasks: Vec<Node> = ast::arguments(call)
        .into_iter()
        .flat_map(|a| ast::calls_in(a, false))
        .filter(|c| ast::is_awaited_call(*c) || ast::parent(*c).is_some_and(ast::is_function))
        .collect();
    !tasks.is_empty() && tasks.iter().all(|task| ast::callee_path(*task, src).iter().any(|segment| cache_word(segment)))
}

/// `Promise.allSettled(items.map(async (item) => { try { ... } catch { ... } }))`: every
/// awaited call or effect of the mapped task sits in a `try` with a catch.
fn tasks_catch_their_failures(call: Node, src: &str) -> bool {
    let Some(tasks) = ast::arguments(call).first().map(|a| ast::unwrap_expr(*a)) else { return false };
    if tasks.kind_name() != "call_expression" || ast::callee_name(tasks, src).as_deref() != Some("map") {
        return false;
    }
    let Some(body) = ast::arguments(tasks)
        .first()
        .filter(|f| ast::is_function(**f))
        .and_then(|f| f.field("body"))
        .filter(|b| b.kind_name() == "statement_block")
    else {
        return false;
    };
    let has_catch = ast::descendants_of_kind(body, "try_statement").into_iter().any(|t| t.field("handler").is_some());
    has_catch && !exposed_calls(body).into_iter().any(|c| awaited_or_effect(c, body, src))
}

/// The call is awaited inside `within`, or is an effect of a known kind.
fn awaited_or_effect(call: Node, within: Node, src: &str) -> bool {
    ast::ancestors(call).take_while(|a| *a != within).any(|a| a.kind_name() == "await_expression")
        || effects::classify(call, src, false).is_some_and(|e| e.kind != EffectKind::Possible)
}

/// `return;` or `return {};`: an empty object reads as an empty success to the caller, unlike
/// `null`, `false` or an error value it can test.
fn returns_nothing_checkable(ret: Node) -> bool {
    ret.named_child(0).map(ast::unwrap_expr).is_none_or(|v| v.kind_name() == "object" && v.named_child_count() == 0)
}

/// `return "failure"`, `return false`, `return { success: false, ... }`, `return { status: "failed" }`.
fn returns_failure_outcome(ret: Node, src: &str) -> bool {
    let Some(value) = ret.named_child(0).map(ast::unwrap_expr) else { return false };
    let failure_word =
        |s: &str| matches!(s.to_ascii_lowercase().as_str(), "failure" | "failed" | "fail" | "error" | "errored");
    match value.kind_name() {
        "false" => true,
        "object" => ast::named_children(value).into_iter().any(|pair| {
            let (Some(key), Some(v)) = (pair.field("key"), pair.field("value")) else {
                return false;
            };
            let v = ast::unwrap_expr(v);
            match text(key, src).trim_matches(['"', '\'']) {
                "success" | "ok" => v.kind_name() == "false",
                // `status: "failed"`, or an enum member: `status: AWSStatus.Failure`
                "status" | "outcome" | "result" => {
                    ast::string_value(v, src).is_some_and(|s| failure_word(&s))
                        || v.kind_name() == "member_expression"
                            && v.field("property").is_some_and(|p| failure_word(text(p, src)))
                }
                _ => false,
            }
        }),
        _ => ast::string_value(value, src).is_some_and(|s| failure_word(&s)),
    }
}

/// A `try` whose work is parsing the message (`JSON.parse(body)`, `schema.parse(data)`), with at
/// most the drop of a message found invalid (`removeMessage(handle)`, `ack`): a parse failure
/// is permanent, so a catch that drops the message handles it as it must.
fn only_parses_message(exposed: &[Node], src: &str) -> bool {
    let parses = |call: &Node| ast::callee_name(*call, src).is_some_and(|n| n == "parse");
    let drops = |call: &Node| {
        ast::callee_name(*call, src).is_some_and(|n| {
            let words = best_effort::words(&n);
            words.first().is_some_and(|w| matches!(w.as_str(), "remove" | "delete" | "ack" | "discard" | "drop"))
        })
    };
    exposed.iter().any(parses)
        && exposed
            .iter()
            .all(|call| parses(call) || drops(call) || !ast::is_awaited_call(*call) && !does_work(*call, src))
}

/// An explicit acknowledgement: `channel.ack(msg)`, `message.ack()`, an SQS `DeleteMessage`.
fn acknowledges(node: Node, src: &str) -> bool {
    ast::calls_in(node, false).into_iter().any(|call| {
        let name = ast::callee_name(call, src).unwrap_or_default();
        matches!(name.as_str(), "ack" | "ackWithResponse" | "deleteMessage")
            || (name == "send" && text(call, src).contains("DeleteMessageCommand"))
    })
}

/// Only reads: AWS SDK v3 `client.send(new GetXCommand(...))` and getters (`getConfig()`),
/// besides calls that are not awaited and classify as nothing (logging, parsing).
fn reads_only(block: Node, src: &str) -> bool {
    let calls = ast::calls_in(block, false);
    let command = crate::regex!(r"^\w+\.send\(\s*new (Get|List|Describe|Head|BatchGet)\w*Command\b");
    let mut read = false;
    for call in calls {
        let name = ast::callee_name(call, src).unwrap_or_default();
        let awaited = ast::is_awaited_call(call);
        if command.is_match(text(call, src)) {
            read = true;
        } else if effects::classify(call, src, false).is_some() {
            return false;
        } else if awaited {
            let lower = name.to_ascii_lowercase();
            if !["get", "find", "list", "describe", "read", "load"].iter().any(|p| lower.starts_with(p)) {
                return false;
            }
            read = true;
        }
    }
    read
}

/// `throw new Response(body?, { status? })`: the status Remix answers with (200 by default).
fn thrown_response_status(throw: Node, src: &str) -> Option<u16> {
    let value = ast::unwrap_expr(throw.named_child(0)?);
    if value.kind_name() != "new_expression" || text(value.field("constructor")?, src) != "Response" {
        return None;
    }
    let args = value.field("arguments").map(ast::named_children).unwrap_or_default();
    match args.get(1) {
        None => Some(200),
        Some(init) if init.kind_name() == "object" => match ast::object_property(*init, "status", src) {
            None => Some(200),
            Some(st) => text(st, src).parse().ok(),
        },
        Some(_) => None,
    }
}

/// `catch (e) { failed = true }` ... `if (failed) throw/answer 5xx`: the failure is reported later.
fn flagged_for_later(func: Node, try_stmt: Node, body: Node, src: &str, names: &[&str]) -> bool {
    let mut flags: Vec<&str> = Vec::new();
    ast::walk(body, &mut |n| {
        if n.kind_name() == "assignment_expression"
            && let Some(l) = n.field("left").filter(|l| l.kind_name() == "identifier")
        {
            flags.push(text(l, src));
        }
        if n.kind_name() == "call_expression"
            && let [obj, push] = ast::callee_path(n, src).as_slice()
            && push == "push"
        {
            flags.push(src.get(n.start_byte()..n.start_byte() + obj.len()).unwrap_or(""));
        }
        true
    });
    if flags.is_empty() {
        return false;
    }
    ast::descendants_of_kind(func, "if_statement").into_iter().any(|stmt| {
        stmt.start_byte() >= try_stmt.end_byte()
            && stmt.field("condition").is_some_and(|c| flags.iter().any(|f| ast::mentions_identifier(c, src, f)))
            && stmt.field("consequence").is_some_and(|cons| {
                !ast::descendants_of_kind(cons, "throw_statement").is_empty()
                    || responses::responses_in(cons, src, names, false).iter().any(|r| !r.is_2xx())
            })
    })
}

/// Whether the function of scope `i` is called as a bare statement (`notify(data);`, neither
/// awaited nor returned) by a function before it in the chain.
/// A callee's catch returns a failure outcome (`{ success: false, error }`) and every caller on
/// the handler's way drops it (`await queueBilling(op);` as a statement): nobody hears of it.
fn failure_dropped<'a>(c: &Cx<'a>, i: usize, in_callee_body: bool, returns: &[Node]) -> Option<(usize, Node<'a>)> {
    if i == 0 || !in_callee_body || returns.is_empty() {
        return None;
    }
    let src = &c.model.scopes[i].file().text;
    if !returns.iter().all(|r| returns_failure_outcome(*r, src)) {
        return None;
    }
    let sites: Vec<(usize, Node<'a>, bool)> = callers_of(c, i)
        .into_iter()
        .map(|(k, call)| {
            let src = &c.model.scopes[k].file().text;
            let outer = ast::parent(call).filter(|p| p.kind_name() == "await_expression").unwrap_or(call);
            let statement = ast::parent(outer).filter(|p| p.kind_name() == "expression_statement");
            // A call the caller lets fail on purpose (inside a `try` whose catch only logs,
            // or under a best-effort comment) loses nothing the caller wanted; one inside a
            // `try` whose catch fails the delivery is exactly where the failure is lost.
            let let_go = statement.is_some_and(|stmt| {
                let tolerated = ast::ancestors(stmt)
                    .take_while(|a| !ast::is_function(*a))
                    .filter(|a| a.kind_name() == "try_statement")
                    .filter_map(|t| t.field("handler").and_then(|h| h.field("body")))
                    .next()
                    .is_some_and(|catch| {
                        ast::descendants_of_kind(catch, "throw_statement").is_empty() && !records_failure(catch, src)
                    });
                tolerated
                    || comment_block_above(src, src[..stmt.start_byte()].rfind('\n').map_or(0, |i| i + 1))
                        .is_some_and(|c| marked(&c))
            });
            (k, call, statement.is_some() && !let_go)
        })
        .collect();
    if sites.is_empty() || !sites.iter().all(|(_, _, dropped)| *dropped) {
        return None;
    }
    sites.first().map(|(k, call, _)| (*k, *call))
}

/// The failure value comes back to the handler, which returns it as its answer (`return
/// this.billing.createSubscription(event)` in a Nest controller, an h3 or Fastify handler):
/// the framework sends `{ ok: false }` with a 200, and the provider never retries. Reported at
/// the `catch` that made the failure a value, since the handler passes it on unchanged.
fn answered_as_returned(c: &Cx, i: usize, in_callee_body: bool, returns: &[Node]) -> bool {
    if i == 0 || !in_callee_body || returns.is_empty() {
        return false;
    }
    if !matches!(c.model.handler.framework, Framework::Nest | Framework::H3 | Framework::Fastify) {
        return false;
    }
    let src = &c.model.scopes[i].file().text;
    if !returns.iter().all(|r| returns_failure_outcome(*r, src)) {
        return false;
    }
    let Some(func) = c.model.scopes[0].node() else { return false };
    let sites = callers_of(c, i);
    !sites.is_empty()
        && sites.iter().all(|(k, call)| {
            let outer = ast::parent(call).filter(|p| p.kind_name() == "await_expression").unwrap_or(*call);
            *k == 0
                && ast::parent(outer).is_some_and(|p| p.kind_name() == "return_statement")
                && ast::enclosing_function(*call) == Some(func)
        })
}

/// The calls of scope `i`'s function in the scopes before it, with the index of the calling
/// scope. A method is called by its own name (`this.billing.activate(...)`), while the scope
/// chain names it with its class (`BillingService.activate`).
/// The `try` is the last statement of `func`'s body: it holds what the function is for, not a
/// side step before the rest of its work.
fn ends_function(try_stmt: Node, func: Node) -> bool {
    ast::function_body(func)
        .and_then(|b| ast::named_children(b).into_iter().rfind(|s| s.kind_name() != "comment"))
        .is_some_and(|last| last == try_stmt)
}

/// A caller writes the processed-event marker after its call of scope `i` (`await issue(card)`
/// then the processed row): a failure that scope's catch hides is recorded as done and its
/// redelivery skipped, so a "best effort" comment there does not make the swallow harmless.
fn caller_records_done_after(c: &Cx, i: usize) -> bool {
    callers_of(c, i).into_iter().any(|(k, site)| {
        let scope = &c.model.scopes[k];
        let Some(func) = scope.node() else { return false };
        let src = &scope.file().text;
        ast::calls_in(func, false).into_iter().any(|call| {
            call.start_byte() > site.end_byte()
                && (markers::classify(call, src, func, scope.event_key.as_ref())
                    .is_some_and(|m| matches!(m.op, markers::MarkerOp::Write | markers::MarkerOp::Claim))
                    // A provider without an event id (Mollie posts the payment id): the row
                    // of a table named for processed events is the marker all the same.
                    || (effects::classify(call, src, false)
                        .is_some_and(|e| matches!(e.kind, EffectKind::DbInsert | EffectKind::DbUpsert))
                        && markers::table_of(call, src)
                            .or_else(|| {
                                crate::regex!(r#"(?i)\binsert\s+(?:or\s+\w+\s+)?(?:ignore\s+)?into\s+[`"]?(\w+)"#)
                                    .captures(text(call, src))
                                    .map(|c| c[1].to_string())
                            })
                            .is_some_and(|t| crate::model::guards::is_marker_name(&t))))
        })
    })
}

/// Every call of scope `i` from the handler's other scopes lies in a `try` whose catch
/// swallows the error as well, in that caller or (transitively) in every caller of the caller.
fn every_caller_swallows(c: &Cx, i: usize, visiting: &mut Vec<usize>) -> bool {
    every_caller(c, i, visiting, &|c, k, f, call, visiting| {
        let s = &c.model.scopes[k];
        let names = if s.depth == 0 { responses::handler_names(&c.model.handler) } else { Vec::new() };
        swallowing_try(f, call, &s.file().text, &names).is_some() || k > 0 && every_caller_swallows(c, k, visiting)
    })
}

/// A test of one call site: the caller's scope index, its function, the call, the scopes on
/// the way.
type CallSiteTest<'a> = dyn Fn(&Cx<'a>, usize, Node<'a>, Node<'a>, &mut Vec<usize>) -> bool;

/// Scope `i` has callers in the handler's scopes and `holds` for each call site; a scope
/// already on the way (`visiting`) answers no.
fn every_caller<'a>(c: &Cx<'a>, i: usize, visiting: &mut Vec<usize>, holds: &CallSiteTest<'a>) -> bool {
    if visiting.contains(&i) {
        return false;
    }
    visiting.push(i);
    let sites = callers_of(c, i);
    let all = !sites.is_empty()
        && sites.iter().all(|(k, call)| c.model.scopes[*k].node().is_some_and(|f| holds(c, *k, f, *call, visiting)));
    visiting.pop();
    all
}

fn callers_of<'a>(c: &Cx<'a>, i: usize) -> Vec<(usize, Node<'a>)> {
    let model: &'a HandlerModel = c.model;
    let Some(name) = model.scopes.get(i).and_then(|s| s.chain.last()).and_then(|n| n.rsplit('.').next()) else {
        return Vec::new();
    };
    let mut sites: Vec<(usize, Node<'a>)> = model.scopes[..i.min(model.scopes.len())]
        .iter()
        .enumerate()
        .flat_map(|(k, s)| {
            let src = &s.file().text;
            s.node()
                .map(|f| ast::calls_in(f, false))
                .unwrap_or_default()
                .into_iter()
                .filter(move |call| ast::callee_name(*call, src).is_some_and(|n| n == name))
                .map(move |call| (k, call))
        })
        .collect();
    // Calls under another name: a dispatch table's entry (`handlers[event](payload)`), a
    // function passed in and called as a parameter.
    let resolved = c.sites.get_or_init(|| model.call_sites(c.cx.project));
    for (k, call) in resolved.get(i).into_iter().flatten() {
        if *k < i && !sites.iter().any(|(_, seen)| seen.id() == call.id()) {
            sites.push((*k, *call));
        }
    }
    sites
}

/// Every call of scope `i` runs after the acknowledgement: inside a deferring callback
/// (`after(() => work())`, `ctx.waitUntil(work())`), as a dropped promise of an async function
/// (`work();`, `void work()`, `work().catch(log)`, `const p = work(); p.catch(log)`), or in a
/// caller that is deferred itself. A catch there cannot change what the provider was told.
fn deferred_scope(c: &Cx, i: usize, visiting: &mut Vec<usize>) -> bool {
    if i == 0 {
        return false;
    }
    let Some(callee) = c.model.scopes[i].node() else { return false };
    let callee_async = text(callee, &c.model.scopes[i].file().text).trim_start().starts_with("async");
    every_caller(c, i, visiting, &move |c, k, f, call, visiting| {
        let src = &c.model.scopes[k].file().text;
        ast::ancestors(call)
            .take_while(|a| a.id() != f.id())
            .any(|a| a.kind_name() == "call_expression" && best_effort::deferrer(a, src).is_some())
            || callee_async && dropped_promise(call, f, src)
            || k == 0 && answered_before(c, call, f, src)
            || deferred_scope(c, k, visiting)
    })
}

/// Scope `i` runs only after the handler answered 2xx (`answered_before` at each call reaching
/// it). Narrower than `deferred_scope`: a dropped promise alone is ack-timing's to report, and
/// it does not report each one.
fn answered_scope(c: &Cx, i: usize, visiting: &mut Vec<usize>) -> bool {
    i > 0
        && every_caller(c, i, visiting, &|c, k, f, call, visiting| {
            k == 0 && answered_before(c, call, f, &c.model.scopes[k].file().text) || answered_scope(c, k, visiting)
        })
}

/// The handler already answered 2xx on the way to `call`: an unconditional response statement
/// (`res.status(200).json(...)`) earlier in a block that holds the call. Whatever fails after
/// it, the provider was told success (ack-timing reports the early answer).
fn answered_before(c: &Cx, call: Node, func: Node, src: &str) -> bool {
    let names = responses::handler_names(&c.model.handler);
    ast::ancestors(call).take_while(|a| a.id() != func.id()).any(|a| {
        a.kind_name() == "statement_block"
            && ast::named_children(a).into_iter().take_while(|s| s.end_byte() <= call.start_byte()).any(|s| {
                s.kind_name() == "expression_statement"
                    && responses::responses_in(s, src, &names, true).iter().any(|r| r.is_2xx())
            })
    })
}

/// The promise of `call` is dropped: the call (with any `.catch`/`.then`/`.finally` chained on
/// it) is a statement or `void`ed, or held in a variable that is only ever chained on that way.
fn dropped_promise<'t>(call: Node<'t>, func: Node<'t>, src: &str) -> bool {
    let chained = |n: Node<'t>| promise_chained(n, src);
    let end_of_chain = |n: Node<'t>| std::iter::successors(Some(n), |x| promise_chained(*x, src)).last().unwrap_or(n);
    let is_dropped = |n: Node<'t>| {
        ast::parent(end_of_chain(n)).is_some_and(|p| {
            p.kind_name() == "expression_statement"
                || p.kind_name() == "unary_expression" && p.child(0).is_some_and(|o| text(o, src) == "void")
        })
    };
    if is_dropped(call) {
        return true;
    }
    // `const promise = work(body); promise.catch(log);`
    let Some(name) = ast::parent(call)
        .filter(|d| d.kind_name() == "variable_declarator" && d.field("value") == Some(call))
        .and_then(|d| d.field("name"))
        .filter(|n| n.kind_name() == "identifier")
    else {
        return false;
    };
    let name = text(name, src);
    ast::descendants_of_kind(func, "identifier")
        .into_iter()
        .filter(|n| n.start_byte() > call.end_byte() && text(*n, src) == name)
        .all(|n| chained(n).is_some() && is_dropped(n))
}

/// `work().catch(log)`: the call a `.catch`/`.then`/`.finally` makes on `n`'s promise.
fn promise_chained<'t>(n: Node<'t>, src: &str) -> Option<Node<'t>> {
    let m = ast::parent(n).filter(|m| m.kind_name() == "member_expression" && m.field("object") == Some(n))?;
    let prop = m.field("property").map(|p| text(p, src))?;
    if !matches!(prop, "catch" | "then" | "finally") {
        return None;
    }
    ast::parent(m).filter(|c| c.kind_name() == "call_expression" && c.field("function") == Some(m))
}

fn called_without_await(c: &Cx, i: usize) -> bool {
    callers_of(c, i).into_iter().any(|(k, call)| {
        let src = &c.model.scopes[k].file().text;
        ast::parent(call).is_some_and(|p| {
            p.kind_name() == "expression_statement"
                || p.kind_name() == "unary_expression" && p.child(0).is_some_and(|o| text(o, src) == "void")
        })
    })
}

/// Bull's `(job, done)`: `done(err)` in the catch fails the job (the queue retries it); so does a
/// Lambda's `(event, context, callback)`: `callback(err)` fails the invocation.
fn fails_through_done(c: &Cx, clause: Node, body: Node, src: &str) -> bool {
    // the handler's parameters are in the handler's file; `src` may be a callee's
    let handler = &c.model.handler;
    let Some(done) = handler.node().and_then(|f| {
        crate::fix::callbacks::done_callback(f, &handler.file.text)
            .or_else(|| crate::fix::callbacks::lambda_callback(f, &handler.file.text))
    }) else {
        return false;
    };
    let Some(err) = clause.field("parameter").map(|p| text(p, src)) else { return false };
    crate::fix::callbacks::done_calls(body, src, &done)
        .into_iter()
        .any(|call| ast::arguments(call).first().is_some_and(|a| ast::mentions_identifier(*a, src, err)))
}

/// A callee named for analytics, telemetry, caches, alerts or logs (whole camelCase words, so
/// `catalog` is not `log`).
fn best_effort_name(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "analytics",
        "track",
        "telemetry",
        "metric",
        "metrics",
        "posthog",
        "segment",
        "mixpanel",
        "amplitude",
        "openpanel",
        "cache",
        "invalidate",
        "revalidate",
        "log",
        "logger",
        "alert",
        "alerts",
        "slack",
        "discord",
        "sentry",
        "enrich",
        "warm",
        "prefetch",
        "capture",
    ];
    // `trackServerEvent` → track, server, event: whole words, so `catalog` is not `log`.
    let words = |name: &str| -> Vec<String> {
        let mut out = vec![String::new()];
        for ch in name.chars() {
            if !ch.is_alphanumeric() {
                out.push(String::new());
            } else if ch.is_uppercase() && out.last().is_some_and(|w| !w.is_empty()) {
                out.push(ch.to_ascii_lowercase().to_string());
            } else if let Some(w) = out.last_mut() {
                w.push(ch.to_ascii_lowercase());
            }
        }
        out.into_iter().filter(|w| !w.is_empty()).collect()
    };
    words(name).iter().any(|w| WORDS.contains(&w.as_str()))
}

/// The catch reports the failure at warning level and does nothing else (`logger.warn(...)`):
/// the author files the failure as tolerable, not as an error of the event's work.
fn warns_only(body: Node, src: &str) -> bool {
    let calls = ast::calls_in(body, false);
    !calls.is_empty()
        && calls.iter().all(|call| {
            ast::callee_name(*call, src).is_some_and(|n| matches!(n.as_str(), "warn" | "warning"))
                || ast::parent(*call).is_some_and(|p| p.kind_name() == "arguments")
        })
}

/// The catch's own words say the work is best-effort: "failed to refresh the cache",
/// "non-critical", "failed to track".
fn catch_says_best_effort(clause: Node, src: &str) -> Option<String> {
    says_best_effort(clause.field("body")?, src).map(|w| format!("work its own message calls \"{w}\""))
}

/// The `try` adds to a variable declared before it (`content += parsed`) and the code after
/// it tests that variable (`if (!content) { ...; return }`): a failed attempt is handled there,
/// by what is missing, not lost in the catch.
fn result_checked_after(block: Node, try_stmt: Node, func: Node, src: &str) -> bool {
    let built: Vec<&str> = ast::descendants_of_kind(block, "augmented_assignment_expression")
        .into_iter()
        .filter_map(|a| a.field("left").filter(|l| l.kind_name() == "identifier"))
        .map(|l| text(l, src))
        .filter(|name| ast::find_binding_init(func, name, src, try_stmt.start_byte()).is_some())
        .collect();
    !built.is_empty()
        && ast::descendants_of_kind(func, "if_statement").into_iter().any(|i| {
            i.start_byte() > try_stmt.end_byte()
                && i.field("condition").is_some_and(|c| built.iter().any(|name| ast::mentions_identifier(c, src, name)))
        })
}

/// The `try` only refines values that already hold one (`profile = await enhance(profile)`):
/// when it fails, the previous value stands, a fallback kept on purpose, and no work of the
/// event is lost.
fn refines_initialised_values(block: Node, func: Node, src: &str) -> bool {
    let stmts: Vec<Node> = ast::named_children(block).into_iter().filter(|s| s.kind_name() != "comment").collect();
    !stmts.is_empty()
        && stmts.iter().all(|stmt| {
            let Some(assign) = stmt
                .named_child(0)
                .filter(|e| stmt.kind_name() == "expression_statement" && e.kind_name() == "assignment_expression")
            else {
                return false;
            };
            let (Some(left), Some(right)) = (assign.field("left"), assign.field("right")) else {
                return false;
            };
            let initialised = left.kind_name() == "identifier"
                && ast::find_binding_init(func, text(left, src), src, block.start_byte())
                    .is_some_and(|init| !matches!(text(ast::unwrap_expr(init), src), "null" | "undefined"));
            initialised
                && ast::calls_in(right, true)
                    .into_iter()
                    .all(|call| effects::classify(call, src, false).is_none_or(|e| e.kind == EffectKind::Possible))
        })
}

/// Work that is not the event's own: analytics, telemetry, caches, alerts and logs. A catch
/// around only such calls is a deliberate best-effort swallow as often as not; failing the
/// delivery for it would redo committed work, so its fix is left to a human.
fn best_effort_work(c: &Cx, i: usize, clause: Node, src: &str) -> Option<String> {
    let hit = |name: &str| best_effort_name(name).then(|| name.to_string());
    let block = ast::parent(clause).and_then(|t| t.field("body"))?;
    let calls: Vec<String> = ast::calls_in(block, true)
        .into_iter()
        .filter(|call| ast::callee_path(*call, src).first().is_none_or(|r| r != "console"))
        .map(|call| ast::callee_path(call, src).join("."))
        .collect();
    if let Some(said) = catch_says_best_effort(clause, src) {
        return Some(said);
    }
    let in_callee = c.model.scopes.get(i).and_then(|s| s.chain.last()).filter(|_| i > 0).and_then(|n| hit(n));
    let all_best_effort = !calls.is_empty() && calls.iter().all(|n| hit(n).is_some());
    in_callee.map(|n| format!("`{n}`")).or_else(|| all_best_effort.then(|| format!("`{}`", calls.join("`, `"))))
}

fn catch_fix(c: &Cx, i: usize, file: &Arc<SourceFile>, clause: Node, body: Node, direct: bool) -> Fix {
    let src = &file.text;
    if let Some(what) = best_effort_work(c, i, clause, src) {
        return Fix::display_only(
            "report the failure",
            format!(
                "the catch is around {what}, which looks like best-effort work beside the event's own: rethrow only \
                 if the event's work depends on it"
            ),
        );
    }
    let style = file.style();
    let semi = style.semi();
    let param = clause.field("parameter");
    let mut edits = Vec::new();
    // Bull's `(job, done)`: the failure is `done(err)`, never a throw after `done()`.
    let done = (c.model.handler.framework == Framework::Bullmq && i == 0 && direct)
        .then(|| c.model.handler.node())
        .flatten()
        .and_then(|f| crate::fix::callbacks::done_callback(f, &c.model.handler.file.text));
    if let Some(done) = done {
        let err = match param {
            Some(p) if p.kind_name() == "identifier" => text(p, src).to_string(),
            Some(_) => return Fix::display_only("fail the job", "the catch destructures its error"),
            None => {
                edits.push(Edit::insert(body.start_byte(), "(err) "));
                "err".to_string()
            }
        };
        let calls = crate::fix::callbacks::done_calls(body, src, &done);
        match calls.as_slice() {
            [call] => {
                let args = call.field("arguments").unwrap_or(*call);
                edits.push(Edit::replace(args.start_byte(), args.end_byte(), format!("({err})")));
            }
            [] => {
                let semi = file.style().semi();
                let stmt = format!("return {done}({err}){semi}");
                match ast::named_children(body).last() {
                    Some(last) => edits.push(Edit::insert(
                        last.end_byte(),
                        format!("{}{}{stmt}", file.style().eol, file.indent_at(last.start_byte())),
                    )),
                    None => return Fix::display_only("fail the job", "the catch is empty"),
                }
            }
            _ => return Fix::display_only("fail the job", format!("the catch calls `{done}` more than once")),
        }
        return Fix::unsafe_(format!("fail the job with `{done}({err})`"), edits)
            .with_note("review: the failure is now reported, so the queue retries the job");
    }
    let stmt = match c.model.handler.respond(500) {
        Some(answer) if i == 0 && direct && c.model.handler.framework.is_http() => answer,
        _ => match param {
            Some(p) if p.kind_name() == "identifier" => format!("throw {}{semi}", text(p, src)),
            Some(_) => return Fix::display_only("rethrow the error", "the catch destructures its error"),
            None => {
                let open = body.start_byte();
                edits.push(Edit::insert(open, "(err) "));
                format!("throw err{semi}")
            }
        },
    };
    let indent = file.indent_at(clause.start_byte()).to_string();
    let inner = format!("{indent}{}", style.indent_unit);
    match ast::named_children(body).last() {
        // the catch ends by returning (a success for a queue, a 2xx for HTTP): the failure
        // replaces that return, since anything appended after it would never run
        // (`continue`/`break` too: an answer appended after them is unreachable)
        Some(last) if matches!(last.kind_name(), "return_statement" | "continue_statement" | "break_statement") => {
            edits.push(Edit::replace(last.start_byte(), last.end_byte(), stmt.clone()))
        }
        Some(last) => edits
            .push(Edit::insert(last.end_byte(), format!("{}{}{stmt}", style.eol, file.indent_at(last.start_byte())))),
        None => edits.push(Edit::replace(
            body.start_byte(),
            body.end_byte(),
            format!("{{{eol}{inner}{stmt}{eol}{indent}}}", eol = style.eol),
        )),
    }
    let title = if stmt.starts_with("throw") { "rethrow the error" } else { "answer 500 so the provider retries" };
    Fix::unsafe_(title, edits).with_note("review: the failure is now reported, so the provider retries the event")
}

/// A call that reports failure in its result instead of throwing.
fn error_returning(call: Node, src: &str) -> Option<&'static str> {
    // supabase-js `.throwOnError()` anywhere in the chain makes the query reject on failure:
    // nothing comes back as a value, and a failure reaches the catch (or fails the delivery).
    if throws_on_error(call, src) {
        return None;
    }
    let path = ast::callee_path_shared(call, src);
    let joined = path.join(".");
    let supabase =
        path.first().is_some_and(|r| r.to_ascii_lowercase().contains("supabase")) || src.contains("@supabase/");
    if supabase
        && joined.contains("from()")
        && ["insert", "update", "upsert", "delete"].iter().any(|w| path.iter().any(|p| p.trim_end_matches("()") == *w))
    {
        return Some("supabase-js");
    }
    if supabase
        && path.iter().any(|p| p == "rpc" || p == "rpc()")
        && path.first().is_some_and(|r| r.to_ascii_lowercase().contains("supabase"))
        && !best_effort::read_rpc(call, src)
    {
        return Some("supabase-js");
    }
    if effects::classify(call, src, false).is_some_and(|e| e.sdk == Sdk::Resend) {
        return Some("Resend");
    }
    None
}

/// A link of the builder chain around `call` (before or after it) is `.throwOnError()`:
/// `supabase.from(t).upsert(rows).select("id").throwOnError()`.
fn throws_on_error(call: Node, src: &str) -> bool {
    let mut outer = call;
    while let Some(up) = ast::parent(outer)
        .filter(|m| m.kind_name() == "member_expression" && m.field("object") == Some(outer))
        .and_then(ast::parent)
        .filter(|c| c.kind_name() == "call_expression")
    {
        outer = up;
    }
    chain_calls(outer).into_iter().any(|link| ast::callee_name(link, src).as_deref() == Some("throwOnError"))
}

/// A local function that hands back an error-returning SDK's result (`return resend.emails.send(...)`):
/// its callers receive the `{ error }` too, and a caller that drops it drops the failure.
fn wrapper_returning_error(
    project: &crate::project::Project,
    file: &std::sync::Arc<SourceFile>,
    call: Node,
) -> Option<&'static str> {
    let def = crate::model::reach::resolve_call(project, file, call)?;
    let body = def.node()?.field("body")?;
    let def_src = &def.file.text;
    let returned: Vec<Node> = if body.kind_name() == "statement_block" {
        same_fn_nodes(body, "return_statement").into_iter().filter_map(|r| r.named_child(0)).collect()
    } else {
        vec![body]
    };
    returned.into_iter().find_map(|value| {
        let value = ast::unwrap_expr(value);
        let value =
            if value.kind_name() == "await_expression" { ast::unwrap_expr(value.named_child(0)?) } else { value };
        (value.kind_name() == "call_expression").then(|| error_returning(value, def_src)).flatten()
    })
}

fn mentioned_after(func: Node, name: &str, after: usize, src: &str) -> bool {
    let mut found = false;
    ast::walk(func, &mut |n| {
        if found || n.end_byte() <= after {
            return !found && n.end_byte() > after;
        }
        if n.start_byte() >= after
            && matches!(n.kind_name(), "identifier" | "shorthand_property_identifier")
            && text(n, src) == name
        {
            found = true;
        }
        true
    });
    found
}

/// The statement that fails the delivery when `cond` holds. `answers`: the call sits in the
/// handler's own body, where a 500 answers the request; inside a callback (a guard `run`, a
/// transaction) a response would let the callback complete, committing the claim, so it throws.
fn fail_stmt(c: &Cx, answers: bool, file: &SourceFile, cond: &str, err: &str) -> String {
    let semi = file.style().semi();
    match c.model.handler.respond(500) {
        Some(answer) if answers && c.model.handler.framework == Framework::Express => format!("if ({cond}) {answer}"),
        _ => format!("if ({cond}) throw {err}{semi}"),
    }
}

fn returned_errors(c: &Cx, i: usize, scope: &Scope, func: Node) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    // Work that runs after the acknowledgement cannot change what the provider was told.
    if !c.acks_2xx || answered_scope(c, i, &mut Vec::new()) {
        return out;
    }
    let file = scope.file();
    let src = &file.text;
    let eol = file.style().eol;
    let mut taken: Vec<String> = Vec::new();
    let mut fresh_name = |method: &str| -> String {
        let base = if method.is_empty() { "result".to_string() } else { method.to_string() };
        let mut candidates = vec!["error".to_string(), format!("{base}Error")];
        candidates.extend((2..10).map(|n| format!("{base}Error{n}")));
        let name = candidates
            .into_iter()
            .find(|n| !taken.contains(n) && !mentioned_after(func, n, 0, src))
            .unwrap_or_else(|| "unexpectedError".into());
        taken.push(name.clone());
        name
    };
    for call in ast::calls_in(func, false) {
        let path = ast::callee_path_shared(call, src);
        let method = path
            .iter()
            .rev()
            .map(|p| p.trim_end_matches("()"))
            .find(|p| matches!(*p, "insert" | "update" | "upsert" | "delete" | "rpc" | "send" | "create"))
            .unwrap_or("")
            .to_string();
        let all_settled = path.len() == 2 && path[0] == "Promise" && path[1] == "allSettled";
        // Tasks that catch their own failures never reject: there is nothing to inspect, and
        // each task's catch is where a failure is (or is not) swallowed.
        if all_settled && (tasks_catch_their_failures(call, src) || settles_cache_work(call, src)) {
            continue;
        }
        let direct = if all_settled { Some("Promise.allSettled") } else { error_returning(call, src) };
        let via_wrapper = direct.is_none().then(|| wrapper_returning_error(c.cx.project, file, call)).flatten();
        let Some(sdk) = direct.or(via_wrapper) else { continue };
        // Only the outermost call of a chain.
        if ast::parent(call).is_some_and(|p| p.kind_name() == "member_expression") {
            continue;
        }
        let Some(stmt) = ast::enclosing_statement(call) else { continue };
        // Clean-up in a `finally` (temp files, a lock) runs whatever the outcome, which the
        // `try` decided.
        if in_finally(stmt) {
            continue;
        }
        // Clean-up on the way out of a failure (`await release(); throw error`): the delivery
        // fails whatever this call returns.
        if ast::followed_by_throw(stmt) {
            continue;
        }
        let answers = i == 0 && ast::enclosing_function(call) == Some(func);
        // Inside a deliberate best-effort `try` (so marked, or its catch says so), a throw added
        // here only reaches that catch, which swallows it on purpose: no fix is written. When
        // the catch's own message says so ("refreshing the cached totals"), the result is left
        // unchecked on purpose too: no finding.
        let best_effort_try = |by_catch_words: bool| {
            ast::ancestors(stmt).take_while(|a| a.id() != func.id()).any(|a| {
                a.kind_name() == "statement_block"
                    && ast::parent(a).is_some_and(|t| {
                        t.kind_name() == "try_statement"
                            && t.field("body").is_some_and(|b| b.id() == a.id())
                            && t.field("handler").is_some_and(|h| {
                                h.field("body").is_some_and(|b| same_fn_nodes(b, "throw_statement").is_empty())
                                    && if by_catch_words {
                                        h.field("body")
                                            .and_then(|b| says_best_effort(b, src))
                                            .is_some_and(|w| w != "track")
                                    } else {
                                        marked_best_effort(c, t, src) || catch_says_best_effort(h, src).is_some()
                                    }
                            })
                    })
            })
        };
        if best_effort_try(true) || under_marked_comment(stmt, func, file) {
            continue;
        }
        let swallowed_by_try = best_effort_try(false);
        let value = ast::unwrap_expr(call);
        let indent = file.indent_at(stmt.start_byte()).to_string();
        let after_stmt = crate::fix::text::line_end(file, stmt.end_byte());
        let label = path.join(".");
        // Writing the processed marker after the work: the work is done, a lost marker costs
        // at most a repeat on a redelivery (the marker rules' concern), never a lost event.
        if writes_marker(call, src, func, scope) {
            continue;
        }
        let mut at = call;
        let (unchecked, fix) = match stmt.kind_name() {
            "expression_statement" if stmt.named_child(0).map(ast::unwrap_expr) == Some(value) => {
                if all_settled {
                    let prop = call.field("function").and_then(|f| f.field("property"));
                    let fix = prop.map(|p| {
                        Fix::unsafe_(
                            "use Promise.all so a failure fails the delivery",
                            vec![Edit::replace(p.start_byte(), p.end_byte(), "all")],
                        )
                    });
                    (true, fix)
                } else {
                    let awaited = stmt.named_child(0).is_some_and(|e| e.kind_name() == "await_expression");
                    let fix = awaited.then(|| {
                        let err = fresh_name(&method);
                        let err = err.as_str();
                        Fix::unsafe_(
                            "check the returned error",
                            vec![
                                Edit::insert(
                                    stmt.start_byte(),
                                    if err == "error" {
                                        "const { error } = ".to_string()
                                    } else {
                                        format!("const {{ error: {err} }} = ")
                                    },
                                ),
                                Edit::insert(
                                    after_stmt,
                                    format!("{eol}{indent}{}", fail_stmt(c, answers, file, err, err)),
                                ),
                            ],
                        )
                    });
                    (true, fix)
                }
            }
            "lexical_declaration" | "variable_declaration" => {
                let Some(decl) = ast::named_children(stmt).into_iter().find(|d| {
                    d.kind_name() == "variable_declarator" && d.field("value").map(ast::unwrap_expr) == Some(value)
                }) else {
                    continue;
                };
                let Some(pattern) = decl.field("name") else { continue };
                match pattern.kind_name() {
                    "identifier" => {
                        let name = text(pattern, src);
                        let checked = if all_settled {
                            // `const [sync] = results;` then `sync.status === "fulfilled"`.
                            std::iter::once(name.to_string())
                                .chain(aliases_of(func, name, stmt.end_byte(), src))
                                .any(|n| uses_with(func, &n, stmt.end_byte(), src, &["rejected", "reason", "status"]))
                        } else {
                            uses_with(func, name, stmt.end_byte(), src, &["error"])
                        };
                        if checked {
                            continue;
                        }
                        let fix = if all_settled {
                            (!mentioned_after(func, name, stmt.end_byte(), src))
                                .then(|| {
                                    let prop = call.field("function").and_then(|f| f.field("property"));
                                    prop.map(|p| {
                                        Fix::unsafe_(
                                            "use Promise.all so a failure fails the delivery",
                                            vec![Edit::replace(p.start_byte(), p.end_byte(), "all")],
                                        )
                                    })
                                })
                                .flatten()
                        } else {
                            let e = format!("{name}.error");
                            Some(Fix::unsafe_(
                                "check the returned error",
                                vec![Edit::insert(
                                    after_stmt,
                                    format!("{eol}{indent}{}", fail_stmt(c, answers, file, &e, &e)),
                                )],
                            ))
                        };
                        (true, fix)
                    }
                    "object_pattern" if !all_settled => {
                        let props = ast::named_children(pattern);
                        let err_binding = props.iter().find_map(|p| match p.kind_name() {
                            "shorthand_property_identifier_pattern" if text(*p, src) == "error" => {
                                Some(("error".to_string(), false))
                            }
                            "pair_pattern" if p.field("key").is_some_and(|k| text(k, src) == "error") => {
                                p.field("value").map(|v| (text(v, src).to_string(), false))
                            }
                            "object_assignment_pattern"
                                if p.named_child(0).is_some_and(|k| text(k, src) == "error") =>
                            {
                                Some(("error".to_string(), false))
                            }
                            _ => None,
                        });
                        match err_binding {
                            Some((name, _)) => {
                                if error_handled(binding_region(stmt, func), &name, stmt.end_byte(), src) {
                                    continue;
                                }
                                // Checked and only logged: the swallow is at that check.
                                let mut next = stmt.next_named_sibling();
                                while let Some(n) = next.filter(|n| n.kind_name() == "comment") {
                                    next = n.next_named_sibling();
                                }
                                if let Some(check) = next.filter(|n| {
                                    n.kind_name() == "if_statement"
                                        && n.field("condition").is_some_and(|c| ast::mentions_identifier(c, src, &name))
                                }) {
                                    at = check;
                                }
                                // `if (error) { console.error(error) }`: fail inside that branch.
                                // The file's own check is the first statement after the call that
                                // reads the error (comments and unrelated statements between),
                                // with or without an `else`: the failure goes into its branch, so
                                // the existing handling is merged, never shadowed.
                                let first_reader =
                                    std::iter::successors(stmt.next_named_sibling(), |n| n.next_named_sibling())
                                        .find(|n| ast::mentions_identifier(*n, src, &name));
                                let logging_if = first_reader.filter(|n| {
                                    n.kind_name() == "if_statement"
                                        && n.field("condition").is_some_and(|c| ast::mentions_identifier(c, src, &name))
                                        && n.field("consequence").is_some_and(|b| {
                                            b.kind_name() == "statement_block" && b.named_child_count() > 0
                                        })
                                });
                                // `if (cacheError) console.warn("could not refresh the cache")`:
                                // the check's own words say the work is best-effort.
                                if logging_if
                                    .and_then(|n| n.field("consequence"))
                                    .is_some_and(|b| says_best_effort(b, src).is_some())
                                {
                                    continue;
                                }
                                if let Some(last) = logging_if
                                    .and_then(|n| n.field("consequence"))
                                    .and_then(|b| ast::named_children(b).last().copied())
                                {
                                    let fail = match c.model.handler.respond(500) {
                                        Some(answer) if answers && c.model.handler.framework == Framework::Express => {
                                            answer
                                        }
                                        _ => format!("throw {name}{}", file.style().semi()),
                                    };
                                    let at = file.indent_at(last.start_byte()).to_string();
                                    let fix = Fix::unsafe_(
                                        "fail when the returned error is set",
                                        vec![Edit::insert(last.end_byte(), format!("{eol}{at}{fail}"))],
                                    );
                                    (true, Some(fix))
                                } else {
                                    // `if (error) console.error(error)` without braces: fail after
                                    // it, so the log still runs before the failure.
                                    let braceless_log = stmt.next_named_sibling().filter(|n| {
                                        n.kind_name() == "if_statement"
                                            && n.field("condition")
                                                .is_some_and(|c| ast::mentions_identifier(c, src, &name))
                                            && n.field("alternative").is_none()
                                            && n.field("consequence")
                                                .is_some_and(|b| b.kind_name() == "expression_statement")
                                    });
                                    let at = braceless_log
                                        .map_or(after_stmt, |n| crate::fix::text::line_end(file, n.end_byte()));
                                    let fix = Fix::unsafe_(
                                        "check the returned error",
                                        vec![Edit::insert(
                                            at,
                                            format!("{eol}{indent}{}", fail_stmt(c, answers, file, &name, &name)),
                                        )],
                                    );
                                    (true, Some(fix))
                                }
                            }
                            None => {
                                let rest = props.iter().any(|p| p.kind_name() == "rest_pattern");
                                let fix = match (rest, props.iter().rev().find(|p| p.kind_name() != "comment")) {
                                    (false, Some(last)) => {
                                        let err = fresh_name(&method);
                                        let binding = if err == "error" {
                                            ", error".to_string()
                                        } else {
                                            format!(", error: {err}")
                                        };
                                        Some(Fix::unsafe_(
                                            "check the returned error",
                                            vec![
                                                Edit::insert(last.end_byte(), binding),
                                                Edit::insert(
                                                    after_stmt,
                                                    format!("{eol}{indent}{}", fail_stmt(c, answers, file, &err, &err)),
                                                ),
                                            ],
                                        ))
                                    }
                                    _ => None,
                                };
                                (true, fix)
                            }
                        }
                    }
                    _ => continue,
                }
            }
            _ => continue,
        };
        if !unchecked {
            continue;
        }
        let best_effort_tasks = all_settled
            && ast::calls_in(call, true)
                .into_iter()
                .filter(|t| t.id() != call.id())
                .any(|t| best_effort_name(&ast::callee_path(t, src).join(".")));
        let fix = if swallowed_by_try {
            Some(Fix::display_only(
                "check the returned error",
                "the call is inside a best-effort try whose catch swallows on purpose: a throw here would only reach it",
            ))
        } else if via_wrapper.is_some() {
            // The wrapper may answer something else on other paths (`undefined` when mail is
            // off): destructuring its result could throw where the original did not.
            Some(Fix::display_only(
                "check the returned error",
                "the wrapper returns the SDK's `{ data, error }`: check its `error` (it may return nothing on other paths)",
            ))
        } else if best_effort_tasks {
            Some(Fix::display_only(
                "use Promise.all so a failure fails the delivery",
                "the settled tasks look like best-effort work (analytics, tracking, caches): fail the delivery only for \
                 tasks the event's work depends on",
            ))
        } else {
            fix
        };
        let fix = || {
            fix.unwrap_or_else(|| {
                Fix::display_only(
                    "check the returned error",
                    "restructure by hand: inspect the result and fail the delivery",
                )
            })
        };
        let message = if all_settled {
            "the results of `Promise.allSettled` are never checked for rejections: a failed task is acknowledged 2xx and never retried".to_string()
        } else {
            format!(
                "`{label}` returns its error instead of throwing ({sdk}) and nothing fails on it: a failure is acknowledged 2xx and never retried"
            )
        };
        out.push(diag(c, scope, at, message, fix));
    }
    out
}

/// Whether a returned error is acted on after `after`: thrown, returned, passed on, or tested
/// in an `if` that throws, returns or answers non-2xx. Logging it (`if (error) console.error(error)`)
/// is not handling it.
fn error_handled(func: Node, name: &str, after: usize, src: &str) -> bool {
    let uses: Vec<Node> = ast::descendants_of_kind(func, "identifier")
        .into_iter()
        .chain(ast::descendants_of_kind(func, "shorthand_property_identifier"))
        .filter(|n| n.start_byte() >= after && text(*n, src) == name && !ast::is_binding_position(*n))
        .collect();
    uses.into_iter().any(|n| {
        let logged = ast::ancestors(n)
            .take_while(|a| *a != func)
            .any(|a| a.kind_name() == "call_expression" && best_effort::is_logging_call(a, src));
        if logged {
            return false;
        }
        let tested = ast::ancestors(n).take_while(|a| *a != func).find_map(|a| {
            let stmt = ast::parent(a).filter(|p| p.kind_name() == "if_statement")?;
            (stmt.field("condition") == Some(a)).then_some(stmt)
        });
        match tested {
            Some(stmt) => stmt.field("consequence").is_some_and(|cons| {
                !ast::descendants_of_kind(cons, "throw_statement").is_empty()
                    || responses::responses_in(cons, src, &[], false).iter().any(|r| !r.is_2xx())
                    || ast::descendants_of_kind(cons, "return_statement")
                        .iter()
                        .any(|r| responses::responses_in(*r, src, &[], false).is_empty())
            }),
            None => true,
        }
    })
}

/// Where a declaration's names can be read: the enclosing block of a `const`/`let` (a later
/// `case` block's own `const { error: profileError }` is another variable), the function for a
/// `var`.
fn binding_region<'t>(decl: Node<'t>, func: Node<'t>) -> Node<'t> {
    if decl.kind_name() != "lexical_declaration" {
        return func;
    }
    ast::parent(decl).unwrap_or(func)
}

/// The names bound after `after` from `name` itself: `const [first, second] = name`,
/// `const first = name[0]`, `for (const r of name)`.
fn aliases_of(func: Node, name: &str, after: usize, src: &str) -> Vec<String> {
    let mut out = Vec::new();
    for decl in ast::descendants_of_kind(func, "variable_declarator")
        .into_iter()
        .chain(ast::descendants_of_kind(func, "for_in_statement"))
    {
        if decl.start_byte() < after {
            continue;
        }
        let (pattern, value) = if decl.kind_name() == "for_in_statement" {
            (decl.field("left"), decl.field("right"))
        } else {
            (decl.field("name"), decl.field("value"))
        };
        let (Some(pattern), Some(value)) = (pattern, value.map(ast::unwrap_expr)) else { continue };
        let root = if value.kind_name() == "subscript_expression" { value.field("object") } else { Some(value) };
        if !root.is_some_and(|r| r.kind_name() == "identifier" && text(r, src) == name) {
            continue;
        }
        if pattern.kind_name() == "identifier" {
            out.push(text(pattern, src).to_string());
        }
        for id in ast::descendants_of_kind(pattern, "identifier")
            .into_iter()
            .chain(ast::descendants_of_kind(pattern, "shorthand_property_identifier_pattern"))
        {
            out.push(text(id, src).to_string());
        }
    }
    out
}

/// Whether `name` is used after `after` in an expression that also mentions one of `words`.
fn uses_with(func: Node, name: &str, after: usize, src: &str, words: &[&str]) -> bool {
    let mut found = false;
    ast::walk(func, &mut |n| {
        if found {
            return false;
        }
        if n.start_byte() >= after && n.kind_name() == "identifier" && text(n, src) == name {
            let stmt = ast::enclosing_statement(n).unwrap_or(n);
            let t = text(stmt, src);
            if words.iter().any(|w| t.contains(w)) {
                found = true;
            }
        }
        true
    });
    found
}

fn body_only(c: &Cx, i: usize, scope: &Scope, func: Node) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if !c.model.handler.framework.is_http() {
        return out;
    }
    let file = scope.file();
    let src = &file.text;
    let names = own_names(c, i);
    let mut resps = responses::responses_in(func, src, &names, false);
    let fw = c.model.handler.framework;
    if i == 0 && matches!(fw, Framework::H3 | Framework::Nest) {
        resps.extend(responses::returned_values(func, src, &names, fw == Framework::Nest));
    }
    for resp in resps {
        if !resp.is_2xx() || resp.style == Style::Redirect {
            continue;
        }
        let Some(body) = resp.body().filter(|b| b.kind_name() == "object") else { continue };
        let Some((status, what)) = body_failure(&resp, body, src) else { continue };
        let in_catch = responses::in_catch(resp.node, func).is_some();
        // A catch that answers 2xx on one branch and 5xx on another has classified the error
        // (permanent: acknowledge; transient: retry); the 2xx branch is that decision.
        let classified = responses::in_catch(resp.node, func).and_then(|cl| cl.field("body")).is_some_and(|b| {
            responses::responses_in(b, src, &names, false).iter().any(|r| r.status.is_some_and(|s| s >= 500))
        });
        if classified {
            continue;
        }
        // The try only reads and verifies the request: what fails there is a bad delivery,
        // not work a retry would finish.
        let checks_only = responses::in_catch(resp.node, func)
            .and_then(ast::parent)
            .and_then(|t| t.field("body"))
            .is_some_and(|b| only_checks(b, src, c.cx.project, file));
        if checks_only {
            continue;
        }
        let conds = responses::branch_conditions(resp.node, func);
        if conds.iter().any(|(cnd, _)| DUP_CODE.is_match(text(*cnd, src)))
            || responses::in_catch(resp.node, func).is_some_and(|cl| DUP_CODE.is_match(text(cl, src)))
        {
            continue;
        }
        let error_branch = conds.iter().any(|(cnd, pos)| {
            let t = text(*cnd, src).to_ascii_lowercase();
            *pos && (t.contains("err")
                || t.contains("fail")
                || t.starts_with("!ok")
                || t.starts_with("!success")
                || t.contains(".ok")
                // `!result.success`, `result.success === false`: the helper's own failure result
                || (t.trim_matches(['(', ')', ' ']).starts_with('!') && t.trim_matches(['(', ')', ' ']).ends_with(".success"))
                || t.contains(".success === false"))
        });
        if !(in_catch || error_branch || status.is_some_and(|s| s >= 500)) {
            continue;
        }
        let target = status.filter(|s| *s >= 400).unwrap_or(500);
        // The same catch answers a bad signature: a 500 there would be retried forever
        // (permanent-error-returns-5xx), so the verification has to be split out by hand.
        let catches_verify = responses::in_catch(resp.node, func)
            .and_then(ast::parent)
            .and_then(|t| t.field("body"))
            .is_some_and(|b| ast::calls_in(b, false).into_iter().any(|call| is_verify(call, src)));
        let status_from_variable = ["status", "statusCode"].iter().any(|k| status_variable(body, k, src).is_some());
        let fix = || match crate::fix::edits::set_status(&resp, target, src, file.style().eol) {
            // The success path answers through the same call: only its own status can follow.
            _ if status_from_variable => Fix::display_only(
                "answer the status the body reports",
                "pass the reported status as the HTTP status as well (`Response.json(body, { status })`)",
            ),
            _ if catches_verify => Fix::display_only(
                format!("answer {target}"),
                format!(
                    "move the signature check into its own try that answers 400, then answer {target} when the work fails"
                ),
            ),
            Some(e) => Fix::unsafe_(format!("answer {target}"), vec![e]),
            None if resp.style == Style::Returned && fw == Framework::H3 => Fix::display_only(
                format!("answer {target}"),
                format!(
                    "call `setResponseStatus(event, {target})` (imported from h3) before returning, or throw `createError({{ statusCode: {target} }})`"
                ),
            ),
            None if resp.style == Style::Returned => Fix::display_only(
                format!("answer {target}"),
                format!("throw an `HttpException` with status {target} instead of returning"),
            ),
            None => Fix::display_only(format!("answer {target}"), "the status is not a literal"),
        };
        out.push(diag(
            c,
            scope,
            resp.node,
            format!("the failure is reported only in the body ({what}) while the HTTP status is {}: the provider sees success and never retries", resp.status.unwrap_or(200)),
            fix,
        ));
    }
    out
}

/// A body property holding a variable (`{ status }`): `Some`, with the 5xx number a catch of
/// the response's function assigns to it, if one does.
fn status_variable(body: Node, key: &str, src: &str) -> Option<Option<u16>> {
    let value = ast::unwrap_expr(ast::object_property(body, key, src)?);
    if !matches!(ast::kind(value), "identifier" | "shorthand_property_identifier") {
        return None;
    }
    let name = text(value, src);
    let func = ast::enclosing_function(body)?;
    let assigned = ast::descendants_of_kind(func, "assignment_expression").into_iter().find_map(|a| {
        let left = a.field("left")?;
        (text(left, src) == name && ast::ancestors(a).any(|p| ast::kind(p) == "catch_clause")).then_some(())?;
        responses::status_value(a.field("right")?, src).filter(|n| (500..600).contains(n))
    });
    Some(assigned)
}

/// The failure a response body reports: its `status` number and a description.
fn body_failure(_resp: &Response, body: Node, src: &str) -> Option<(Option<u16>, String)> {
    for key in ["status", "statusCode", "code"] {
        if let Some(v) = ast::object_property(body, key, src)
            && let Some(n) = responses::status_value(v, src)
            && (400..600).contains(&n)
        {
            return Some((Some(n), format!("`{key}: {n}`")));
        }
    }
    // `let status; try { ...; status = 200 } catch { status = 500 } return json({ status })`
    for key in ["status", "statusCode"] {
        if let Some(n) = status_variable(body, key, src).flatten() {
            return Some((Some(n), format!("`{key}`, set to {n} in a catch")));
        }
    }
    for key in ["error", "errors", "err"] {
        if let Some(v) = ast::object_property(body, key, src)
            && !matches!(text(v, src), "null" | "undefined" | "false")
        {
            return Some((None, format!("`{key}`")));
        }
    }
    for key in ["success", "ok"] {
        if ast::object_property(body, key, src).is_some_and(|v| text(v, src) == "false") {
            return Some((None, format!("`{key}: false`")));
        }
    }
    None
}
