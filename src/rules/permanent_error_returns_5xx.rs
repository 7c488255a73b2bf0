//! permanent-error-returns-5xx

use super::{Context, Diagnostic, FixAvailability, HandlerModel, Rule};
use crate::fix::{Edit, Fix, GuardSpec, imports};
use crate::model::ast::{self, text};
use crate::model::reach::{self, Scope};
use crate::model::responses;
use crate::model::verify::{is_parse, is_verify, only_checks};
use crate::model::{Framework, effects};
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use regex::Regex;
use std::sync::LazyLock;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
- An HTTP handler that answers a bad signature or a malformed payload with 5xx: the
  signature check (`stripe.webhooks.constructEvent[Async]`, svix `wh.verify`, Clerk
  `verifyWebhook`, Paddle `webhooks.unmarshal`, Stripe `parseEventNotification`, Resend
  `webhooks.verify`) or the payload parse (`JSON.parse`, a zod `Schema.parse`) sits in a `try`
  whose `catch` answers 5xx or rethrows, or the throwing check is not in a `try` at all, so
  the framework answers 500 — also in a function the handler calls, when no caller on the
  way catches it (a Nest controller delegating to `this.service.handleWebhook(raw, sig)`).
  When that function is a thin wrapper the handler calls directly (it only reads the request
  and runs the check, like `validateRequest(raw, sig)`), the finding is at the handler's call,
  where the `try` belongs.
  Not reported: a `catch` that throws the project's own error named for the client's fault
  (`throw errors.invalidWebhookSignature()`, `new InvalidSignatureError()`) in a framework
  whose error handler gives it a status (Nest, Express, Fastify, Koa, Hono); a check whose
  result is tested (`if (!(await connection.verifyWebhook(req))) return res.status(401).end()`):
  it returns a verdict rather than throwing one; a project object's wrapper of the check
  (`manager.constructEvent(body, sig)`, no SDK `webhooks` namespace) whose result the next
  statements test and answer (`if (!event) return res.status(401)...`); a helper's rethrow that
  its caller catches and rethrows with a client status (`throw new ApiError(400, ...)`).
  Reported: an Express catch that hands the caught error to `next(err)` (the error middleware
  answers an error without a status of its own 500).
- An HTTP handler, or a function it calls that no caller catches, that throws for a payload
  that can never become usable (its message says invalid, malformed, missing, unsupported, or
  "couldn't retrieve valid ..."): a plain `Error`, or an error that names a 5xx answer
  (`new ORPCError("INTERNAL_SERVER_ERROR", { message })`, `new TRPCError({ code:
  "INTERNAL_SERVER_ERROR" })`, `InternalServerErrorException`, `new HttpError(500, ...)`).
  Not reported: in a called function, the `default` of a switch over a value that names none
  of the function's parameters (an exhaustiveness assertion the payload cannot reach).
  Missing configuration and "not found" are left out: a retry after a deploy, or after the
  event that creates the record, succeeds. Configuration is read from the message or the
  branch's condition (`process.env`, a secret, an environment variable such as `REDIS_URL`),
  also through a name bound to a plain read of it (`const url = env.REDIS_URL; if (!url)`);
  queue jobs included.
- A hand-written signature check whose `crypto.timingSafeEqual(received, expected)` is not
  preceded by a comparison of lengths: it throws a `RangeError` for a header of the wrong
  length (truncated, another encoding), and that error ends in a 5xx (a `catch` on the way
  that answers 5xx, or no `catch` up to the handler). Two hash digests compared need no
  length check and are not reported.
- A BullMQ / Inngest / Trigger.dev consumer, or the `run` of a project's own queue runner
  (`createRunner(queue, { run })`), that throws a plain `Error` for a permanent failure (a
  record that is not found, an invalid or missing field, an unknown type), which the queue
  retries with backoff instead of failing once — also in a function the job calls, when no
  caller on the way catches it (a helper whose caller catches the error and returns a
  fallback never fails the job), nor a throw on a remote answer's status (`if (res.status >=
  300) throw new Error("Invalid response status")`: a 5xx or a 429 may pass later). Not when the worker's file builds its queue (BullMQ `new
  Queue`, Bull `new Bull`), adds its jobs and consumes them, sets `attempts` nowhere, spreads
  no options into them and does not export the queue: such a queue runs each job once. Nor
  when no file of the worker's workspace (its package outside a workspace) sets `attempts` on
  any job or queue options: every job there runs once.
- A message consumer (Lambda SQS, an SQS poller, Cloudflare Queues, Pub/Sub, RabbitMQ) whose
  `try` validates the message with a schema (`Schema.parse(JSON.parse(record.body))`) and whose
  `catch` sends every failure back for redelivery (`batchItemFailures.push`, a rethrow,
  `message.retry()`, `nack`, a re-enqueue) without telling the validation failure apart
  (`instanceof ZodError`, `err.name === ...`): a malformed message is retried until the
  dead-letter queue. Its fix is display-only: validate with `safeParse` before the `try` and
  acknowledge or dead-letter what fails.

## Why retries break it
A 5xx tells the provider "try again later": a forged, misconfigured or malformed delivery is
redelivered for days (Stripe: 3 days), alerts fire, and providers disable endpoints that keep
failing. 400/401 says "this will never succeed". In a queue, the retries of a permanent
failure burn attempts and delay the dead-letter signal.

## Bad
```ts
try {
  event = stripe.webhooks.constructEvent(body, sig, secret);
} catch (err) {
  return res.status(500).send("error");
}
```

## Good
```ts
} catch (err) {
  return res.status(400).send("invalid signature");
}
```

## Fix
- HTTP, a `catch` around only the check that answers 5xx: the status literal becomes 400
  (safe).
- HTTP, the check outside any `try`: `const event = check(...)` becomes `let event; try {
  event = check(...) } catch { return <400> }` (unsafe: review the answer and the type of
  `event`). A `catch` that rethrows becomes a 400 answer (unsafe).
- HTTP, a `try` that also covers the processing work: display-only (split the check into its
  own `try`; processing failures should still answer 5xx).
- BullMQ: `throw new Error(...)` becomes `throw new UnrecoverableError(...)` imported from
  `bullmq`; Inngest: `NonRetriableError` from `inngest` (unsafe: review that the failure is
  really permanent). Trigger.dev: display-only (`AbortTaskRunError`). Bull v3
  (`queue.process(fn)`, `bull`, `@nestjs/bull`) has no `UnrecoverableError`: display-only
  (call `job.discard()` before the throw). A project's own runner: display-only (its library
  decides how a job fails without retries; logging and returning completes it).

Decisions: a thrown error counts as permanent when its message says so (not found, does not
exist, invalid, missing, malformed, unknown/unsupported type, validation) or when it is thrown
because a just-looked-up record is missing (`if (!user) throw ...`). SQS, Kafka, RabbitMQ and
Pub/Sub consumers are not checked: their dead-letter path is queue configuration.
"#;

pub const RULE: Rule = Rule {
    id: "permanent-error-returns-5xx",
    summary: "a bad signature / malformed payload answers 5xx (or a permanent job failure is retryable): the provider retries it for days",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: true,
    preview: false,
    check,
};

static PERMANENT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)not found|no such|does ?n[o']t exist|doesn't exist|invalid|missing|malformed|validation|unknown (event|type|job|action)|unsupported|not supported").unwrap()
});

/// What a thrown message says about the payload itself (no "not found": see `thrown_bad_payload`).
static BAD_PAYLOAD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\binvalid|malformed|missing|validation|unknown (event|type|action)|unsupported|not supported|\bno (payload|body)\b|\b(no|not|couldn'?t|could not|cannot|can'?t|unable to)\b[\w ]{0,30}\bvalid\b")
        .unwrap()
});

/// A message or condition about the deployment, not the delivery.
static CONFIGURATION: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)process\.env|\benv(ironment)?\b|secret|configur|api[ _-]?key|token|credential").unwrap()
});

/// Whether a throw is about the deployment rather than the delivery: its message or a condition
/// of its branch names configuration (`process.env`, a secret, an environment variable such as
/// `REDIS_URL`), directly or through a name bound to it (`const url = env.REDIS_URL; if (!url)`).
/// Fixing the configuration makes the retry succeed.
fn about_configuration(message: &str, conditions: &[(Node, bool)], func: Node, src: &str) -> bool {
    let env_name = crate::regex!(
        r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*_(?:URL|URI|KEY|SECRET|TOKEN|HOST|PORT|DSN|PATH|REGION|BUCKET|ENDPOINT|PASSWORD)\b"
    );
    let configured = |t: &str| CONFIGURATION.is_match(t) || env_name.is_match(t);
    configured(message)
        || conditions.iter().any(|(c, _)| {
            configured(text(*c, src))
                || ast::descendants_of_kind(*c, "identifier").into_iter().any(|id| {
                    // A plain read of the setting (`env.REDIS_URL ?? ""`), not a call given it
                    // (`constructEvent(body, sig, process.env.SECRET)` reads the payload).
                    ast::find_binding_init(func, text(id, src), src, c.start_byte()).is_some_and(|init| {
                        init.kind_name() != "call_expression"
                            && ast::descendants_of_kind(init, "call_expression").is_empty()
                            && configured(text(init, src))
                    })
                })
        })
}

/// The `try`s whose block holds `node` (inside `func`), innermost first.
fn enclosing_tries<'t>(node: Node<'t>, func: Node<'t>) -> impl Iterator<Item = Node<'t>> {
    let mut child = node;
    ast::ancestors(node).take_while(move |a| *a != func).filter(move |anc| {
        let holds = anc.kind_name() == "try_statement" && anc.field("body").is_some_and(|b| b == child);
        child = *anc;
        holds
    })
}

/// The innermost `try` whose block holds `node` (inside `func`).
fn enclosing_try<'t>(node: Node<'t>, func: Node<'t>) -> Option<Node<'t>> {
    enclosing_tries(node, func).next()
}

/// Whether a `try` around `node` (inside `func`) keeps its error from leaving `func`: one whose
/// `catch` does not end by rethrowing (`catch (e) { log(e); throw e; }` only looks).
fn caught_around(node: Node, func: Node) -> bool {
    enclosing_tries(node, func).any(|t| {
        t.field("handler").and_then(|h| h.field("body")).is_some_and(|b| {
            ast::named_children(b)
                .into_iter()
                .rfind(|s| s.kind_name() != "comment")
                .is_none_or(|last| last.kind_name() != "throw_statement")
        })
    })
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        let fw = model.handler.framework;
        if fw.is_http() {
            http(cx, model, out);
            thrown_bad_payload(cx, model, out);
            unequal_lengths_compared(cx, model, out);
        } else if matches!(fw, Framework::Bullmq | Framework::Inngest | Framework::TriggerDev | Framework::JobRunner) {
            queue(cx, model, out);
        }
        if matches!(
            fw,
            Framework::LambdaSqs
                | Framework::SqsPolling
                | Framework::CloudflareQueue
                | Framework::Pubsub
                | Framework::Amqp
        ) {
            redelivered_parse_failures(cx, model, out);
        }
    }
}

/// For each scope, whether an error thrown in it reaches the framework: the handler itself, and a
/// callee whose every call site (in a scope that is itself uncaught) is outside a `try`.
/// A callee reached only through a nested callback has no direct call site and counts as caught.
fn uncaught_scopes(cx: &Context, model: &HandlerModel) -> Vec<bool> {
    let n = model.scopes.len();
    let sites: Vec<Vec<(usize, bool)>> = call_sites(cx, model)
        .into_iter()
        .map(|calls| {
            calls
                .into_iter()
                .map(|site| {
                    let caught = site.handled_on_the_spot
                        || model.scopes[site.caller].node().is_some_and(|func| caught_around(site.call, func));
                    (site.caller, caught)
                })
                .collect()
        })
        .collect();
    let mut out = vec![false; n];
    if n > 0 {
        out[0] = true;
    }
    // Callers come before their callees, but a later caller can still decide: settle in passes.
    for _ in 0..n {
        let mut changed = false;
        for j in 1..n {
            let now = !sites[j].is_empty() && sites[j].iter().all(|(k, in_try)| out[*k] && !in_try);
            if now != out[j] {
                out[j] = now;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    out
}

fn src_of(scope: &Scope) -> &str {
    &scope.file().text
}

fn http(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    let mut uncaught: Option<Vec<bool>> = None;
    let mut sites: Option<Vec<Vec<CallSite>>> = None;
    for (i, scope) in model.scopes.iter().enumerate() {
        let Some(func) = scope.node() else { continue };
        let file = scope.file();
        let src = &file.text;
        let names = if i == 0 { responses::handler_names(&model.handler) } else { Vec::new() };
        for call in ast::calls_in(func, true) {
            let verify = is_verify(call, src);
            if !verify && !is_parse(call, src) {
                continue;
            }
            // `if (!(await connection.verifyWebhook(req))) return res.status(401).end()`: a
            // check whose result is tested answers a bad signature itself.
            if verify && (result_tested(call) || wrapper_result_tested(call, src)) {
                continue;
            }
            let what = if verify { "a bad signature" } else { "a malformed payload" };
            match enclosing_try(call, func) {
                Some(try_stmt) => {
                    let Some(catch_body) = try_stmt.field("handler").and_then(|h| h.field("body")) else {
                        continue;
                    };
                    let block = try_stmt.field("body").unwrap_or(try_stmt);
                    let only = only_checks(block, src, cx.project, file);
                    // A provider-signed body is valid JSON: a try that also does the work is
                    // about the work's failures, not about parsing.
                    if !only && !verify && !is_schema(call, src) {
                        continue;
                    }
                    let answers = responses::responses_in(catch_body, src, &names, true);
                    // `if (err instanceof StripeSignatureVerificationError) return reply.code(401)...;
                    // throw err`: the bad signature already answers 4xx, the rest is not a
                    // signature failure.
                    if answers.iter().any(|r| r.status.is_some_and(|st| (400..500).contains(&st))) {
                        continue;
                    }
                    let fives: Vec<_> = answers.into_iter().filter(|r| r.is_5xx()).collect();
                    // A thrown 4xx HTTP exception answers 4xx; any other throw becomes a 500.
                    let remix = model.handler.framework == Framework::Remix;
                    let maps_errors = maps_errors(model.handler.framework);
                    let rethrow = ast::named_children(catch_body).into_iter().find(|s| {
                        s.kind_name() == "throw_statement"
                            && !(maps_errors && throws_client_error(*s, src))
                            && !carries_client_status(*s, src)
                            && responses::response_at(*s, src, &names)
                                .is_none_or(|r| r.status.is_none_or(|st| st >= 500))
                            // Remix answers a thrown `json(..., 400)` / `new Response(...)` as is.
                            && !(remix
                                && s.named_child(0)
                                    .map(ast::unwrap_expr)
                                    .and_then(|v| responses::response_at(v, src, &names))
                                    .is_some_and(|r| r.status.is_some_and(|st| st < 500)))
                    });
                    // Express: `next(err)` with the caught error hands it to the error
                    // middleware, which answers the SDK's error (no status of its own) 500.
                    let forwarded = if i == 0 && model.handler.framework == Framework::Express {
                        forwards_caught_error(try_stmt, catch_body, src)
                    } else {
                        None
                    };
                    let rethrow = rethrow.or(forwarded);
                    if fives.is_empty() && rethrow.is_none() {
                        continue;
                    }
                    // A rethrow is answered by an outer `try` or a caller: one that catches it
                    // and answers 2xx or 4xx never turns it into a 500.
                    if fives.is_empty() {
                        let sites = sites.get_or_insert_with(|| call_sites(cx, model));
                        if !ends_in_5xx(model, sites, i, try_stmt, 0) {
                            continue;
                        }
                    }
                    let node = fives.first().map(|r| r.node).or(rethrow).unwrap_or(catch_body);
                    let answer = if fives.is_empty() && forwarded.is_some() && rethrow == forwarded {
                        "passes the error to `next`, which answers 500,".to_string()
                    } else if fives.is_empty() {
                        "rethrows into a 500".to_string()
                    } else {
                        format!("answers {}", fives[0].status.unwrap_or(500))
                    };
                    let fix = || {
                        if !only {
                            Fix::display_only(
                                "give the check its own try that answers 400",
                                "this try also covers the processing work, whose failures should still answer 5xx",
                            )
                        } else if !fives.is_empty() {
                            let edits: Vec<Edit> = fives
                                .iter()
                                .filter_map(|r| crate::fix::edits::set_status(r, 400, src, file.style().eol))
                                .collect();
                            if edits.len() == fives.len() {
                                Fix::safe("answer 400", edits)
                            } else {
                                Fix::display_only("answer 400", "the status is not a literal")
                            }
                        } else {
                            match (i == 0).then(|| model.handler.respond(400)).flatten() {
                                Some(stmt) => Fix::unsafe_(
                                    "answer 400 instead of rethrowing",
                                    vec![Edit::replace(node.start_byte(), node.end_byte(), stmt)],
                                ),
                                None => Fix::display_only(
                                    "answer 400 instead of rethrowing",
                                    "no response object is in scope",
                                ),
                            }
                        }
                    };
                    out.push(diag(cx, model, scope, node, format!(
                        "the catch around `{}` {answer} for {what}: the provider retries a delivery that can never succeed",
                        callee(call, src)
                    ), fix));
                }
                None => {
                    // JSON.parse of a body the provider signed does not fail in practice.
                    if !(verify || is_schema(call, src)) {
                        continue;
                    }
                    // A callee's check: only when no caller on the way catches it (a Nest
                    // controller calling `this.service.handle(raw, sig)` that verifies bare).
                    if i != 0 && !uncaught.get_or_insert_with(|| uncaught_scopes(cx, model))[i] {
                        continue;
                    }
                    // A thin wrapper around the check (`validateRequest(raw, sig)` returning
                    // `constructEvent(...)`): the throw escapes where the handler calls it, and
                    // that call is where the try goes.
                    if i != 0
                        && let Some(site) = thin_wrapper_call_site(cx, model, i, func)
                    {
                        let handler_file = model.scopes[0].file();
                        out.push(diag(cx, model, &model.scopes[0], site, format!(
                            "`{}` throws on {what} (through `{}`) outside any try: the uncaught error answers 500 (or hangs the request) and the provider retries a delivery that can never succeed",
                            callee(site, &handler_file.text),
                            callee(call, src)
                        ), || wrap_fix(model, handler_file, site)));
                        continue;
                    }
                    let fix = || {
                        if i == 0 {
                            wrap_fix(model, file, call)
                        } else {
                            Fix::display_only(
                                "catch the check and answer 400",
                                "the check is in a function the handler calls",
                            )
                        }
                    };
                    out.push(diag(cx, model, scope, call, format!(
                        "`{}` throws on {what} outside any try: the uncaught error answers 500 (or hangs the request) and the provider retries a delivery that can never succeed",
                        callee(call, src)
                    ), fix));
                }
            }
        }
    }
}

/// Whether `call`'s value decides a branch (`if (!verify(x))`, `verify(x) ? a : b`,
/// `verify(x) && next()`): it returns a verdict rather than throwing one.
/// `const event = manager.constructEvent(body, sig); if (!event) return res.status(401)...`: a
/// project object's method, not the SDK's `webhooks` namespace, whose result is tested and
/// answered: the wrapper reports a bad signature by value instead of throwing.
fn wrapper_result_tested(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    path.len() >= 2
        && !path.iter().any(|p| p.trim_end_matches("()") == "webhooks")
        && crate::model::stmts::result_tested_then_leaves(call, src)
}

/// Frameworks with an error handler that can give a thrown error its status.
fn maps_errors(framework: Framework) -> bool {
    matches!(framework, Framework::Nest | Framework::Express | Framework::Fastify | Framework::Koa | Framework::Hono)
}

/// The statement of a catch that passes the caught error itself to Express's `next`
/// (`next(err)`, `return next(err)`).
fn forwards_caught_error<'t>(try_stmt: Node<'t>, catch_body: Node<'t>, src: &str) -> Option<Node<'t>> {
    let param = try_stmt
        .field("handler")
        .and_then(|h| h.field("parameter"))
        .filter(|p| p.kind_name() == "identifier")
        .map(|p| text(p, src))?;
    ast::named_children(catch_body).into_iter().find(|stmt| {
        let value = match stmt.kind_name() {
            "expression_statement" | "return_statement" => stmt.named_child(0).map(ast::unwrap_expr),
            _ => None,
        };
        value.is_some_and(|v| {
            v.kind_name() == "call_expression"
                && ast::callee_path(v, src) == ["next"]
                && ast::arguments(v).first().is_some_and(|a| text(*a, src) == param)
        })
    })
}

fn result_tested(call: Node) -> bool {
    let mut node = call;
    while let Some(parent) = ast::parent(node) {
        match parent.kind_name() {
            "await_expression" | "parenthesized_expression" => node = parent,
            "unary_expression" if parent.child(0).is_some_and(|op| op.kind_name() == "!") => node = parent,
            "if_statement" | "while_statement" => {
                return parent.field("condition").is_some_and(|c| ast::contains(c, node));
            }
            "ternary_expression" => {
                return parent.field("condition").is_some_and(|c| c == node);
            }
            "binary_expression" => {
                return parent.child(1).is_some_and(|op| matches!(op.kind_name(), "&&" | "||"));
            }
            _ => return false,
        }
    }
    false
}

/// A plain `Error` thrown outside any `try` because the payload itself is unusable (its message
/// says invalid, malformed, missing or unsupported), in the handler or a callee no caller
/// catches: the framework answers 500 and the provider redelivers a payload that cannot change.
/// "Not found" is left out here: over HTTP the record may be created by a later event, and a
/// retry is then what recovers it. Missing configuration is left out too: a retry after the
/// deploy that sets it succeeds.
fn thrown_bad_payload(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    let mut uncaught: Option<Vec<bool>> = None;
    for (i, scope) in model.scopes.iter().enumerate() {
        let Some(func) = scope.node() else { continue };
        let src = src_of(scope);
        let names = if i == 0 { responses::handler_names(&model.handler) } else { Vec::new() };
        for throw in ast::descendants_of_kind(func, "throw_statement") {
            if ast::enclosing_function(throw) != Some(func) || responses::in_catch(throw, func).is_some() {
                continue;
            }
            // In the handler, a `try` whose catch answers every failure 5xx, without telling
            // them apart, turns the throw into that 5xx as surely as no `try` at all.
            let into_5xx = match enclosing_try(throw, func) {
                None => false,
                Some(try_stmt) if i == 0 && catch_answers_every_failure_5xx(try_stmt, src, &names) => true,
                Some(_) => continue,
            };
            let Some(value) = throw.named_child(0).map(ast::unwrap_expr).filter(|v| v.kind_name() == "new_expression")
            else {
                continue;
            };
            let names_5xx = states_5xx(value, src);
            if !value.field("constructor").is_some_and(|c| matches!(text(c, src), "Error" | "TypeError")) && !names_5xx
            {
                continue;
            }
            // In a helper, the `default` of a switch over a value the helper works out itself
            // (not one of its parameters) asserts that its own cases are exhaustive: nothing
            // from the payload can reach it.
            if i != 0 && internal_switch_default(throw, func, src) {
                continue;
            }
            let message = thrown_message(value, src);
            let conditions = responses::branch_conditions(throw, func);
            if !BAD_PAYLOAD.is_match(&message) || about_configuration(&message, &conditions, func, src) {
                continue;
            }
            if i != 0 && !uncaught.get_or_insert_with(|| uncaught_scopes(cx, model))[i] {
                continue;
            }
            let fix = || match (i == 0).then(|| model.handler.respond(400)).flatten() {
                Some(stmt) => Fix::unsafe_(
                    "answer 400 instead of throwing",
                    vec![Edit::replace(throw.start_byte(), throw.end_byte(), stmt)],
                )
                .with_note("review that the payload can never become valid: a retryable failure should still throw"),
                None => Fix::display_only(
                    "answer 400 for a payload that can never succeed",
                    "the throw is where no response object is in scope",
                ),
            };
            let message = if names_5xx {
                "a payload that can never succeed is thrown as an error that names a 5xx answer: the provider retries it; answer 400 (or acknowledge and drop it)"
            } else if into_5xx {
                "a payload that can never succeed is thrown as a plain `Error` into a catch that answers every failure 5xx: the provider retries it; answer 400 (or acknowledge and drop it)"
            } else {
                "a payload that can never succeed is thrown as a plain `Error` outside any try: the framework answers 500 and the provider retries it; answer 400 (or acknowledge and drop it)"
            };
            out.push(diag(cx, model, scope, throw, message.to_string(), fix));
        }
    }
}

/// `throw` in the `default:` of a switch whose discriminant names none of `func`'s parameters.
fn internal_switch_default(throw: Node, func: Node, src: &str) -> bool {
    let Some(default) =
        ast::ancestors(throw).take_while(|a| a.id() != func.id()).find(|a| a.kind_name() == "switch_default")
    else {
        return false;
    };
    let Some(value) =
        ast::ancestors(default).find(|a| a.kind_name() == "switch_statement").and_then(|s| s.field("value"))
    else {
        return false;
    };
    let params = ast::parameter_names(func, src);
    let mut names = ast::descendants_of_kind(value, "identifier").into_iter().map(|n| text(n, src));
    !names.any(|n| params.iter().any(|p| p == n))
}

/// `crypto.timingSafeEqual(received, expected)` throws a `RangeError` when the two differ in
/// length (a truncated or malformed signature header) instead of returning false. Reported when
/// nothing compares the lengths first and the error ends in a 5xx: a `catch` on the way that
/// answers 5xx (and no 4xx), or no `catch` at all up to the handler.
fn unequal_lengths_compared(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    let mut sites = None;
    for (i, scope) in model.scopes.iter().enumerate() {
        let Some(func) = scope.node() else { continue };
        let src = src_of(scope);
        if !src.contains("timingSafeEqual") {
            continue;
        }
        for call in ast::calls_in(func, true) {
            if ast::callee_name(call, src).is_none_or(|n| n != "timingSafeEqual")
                || lengths_compared_before(call, func, src)
                || ast::arguments(call).iter().all(|a| is_digest(cx, scope, *a, src))
            {
                continue;
            }
            if !ends_in_5xx(model, sites.get_or_insert_with(|| call_sites(cx, model)), i, call, 0) {
                continue;
            }
            let fix = || {
                Fix::display_only(
                    "compare the lengths first",
                    "`a.length === b.length && timingSafeEqual(a, b)` answers a malformed signature as invalid",
                )
            };
            out.push(diag(cx, model, scope, call, format!(
                "`{}` throws a RangeError when the signature's length differs from the expected one, and that error answers 5xx: a malformed signature is retried as if the server had failed",
                callee(call, src)
            ), fix));
        }
    }
}

/// A hash digest (`createHmac(...).digest()`, a variable holding one, a project function that
/// returns one): both sides of a comparison of digests always have the same length.
fn is_digest(cx: &Context, scope: &Scope, arg: Node, src: &str) -> bool {
    let value = crate::model::dedupe_keys::resolve(arg, src);
    let hashed = |n: Node| text(n, src).contains("digest(");
    if hashed(value) {
        return true;
    }
    let value = ast::unwrap_expr(value);
    let inner = if value.kind_name() == "call_expression" && ast::callee_name(value, src).is_some_and(|n| n == "from") {
        ast::arguments(value).first().map(|a| crate::model::dedupe_keys::resolve(*a, src))
    } else {
        Some(value)
    };
    inner.filter(|n| n.kind_name() == "call_expression").is_some_and(|c| {
        hashed(c)
            || reach::resolve_call(cx.project, scope.file(), c)
                .is_some_and(|d| d.node().is_some_and(|f| text(f, &d.file.text).contains(".digest(")))
    })
}

/// A comparison of lengths (`a.length !== b.length`, `sig.byteLength === 64`) in `func` before `call`.
fn lengths_compared_before(call: Node, func: Node, src: &str) -> bool {
    let before = &src[func.start_byte()..call.start_byte()];
    let around = text(ast::parent(call).unwrap_or(call), src);
    let comparison =
        crate::regex!(r"\.(byteLength|length)\s*(===|!==|==|!=|<|>)|(===|!==|==|!=)\s*[\w.]+\.(byteLength|length)\b");
    comparison.is_match(before) || comparison.is_match(around)
}

/// Whether an error thrown at `node` in scope `i` ends as a 5xx answer: through the `try`s around
/// it (a catch that answers 4xx or handles it without a throw stops it; one that rethrows passes
/// it on), then through the call sites of the scope's function (any one that ends in a 5xx is
/// enough), up to the handler, where an uncaught error becomes the framework's 500.
fn ends_in_5xx(model: &HandlerModel, sites: &[Vec<CallSite>], i: usize, node: Node, depth: usize) -> bool {
    let scope = &model.scopes[i];
    let Some(func) = scope.node() else { return false };
    let src = src_of(scope);
    let names = if i == 0 { responses::handler_names(&model.handler) } else { Vec::new() };
    for try_stmt in enclosing_tries(node, func) {
        let Some(catch_body) = try_stmt.field("handler").and_then(|h| h.field("body")) else {
            continue;
        };
        let answers = responses::responses_in(catch_body, src, &names, true);
        if answers.iter().any(|r| r.status.is_some_and(|st| (400..500).contains(&st))) {
            return false;
        }
        if answers.iter().any(|r| r.is_5xx()) {
            return true;
        }
        let Some(rethrow) = ast::named_children(catch_body)
            .into_iter()
            .rfind(|s| s.kind_name() != "comment")
            .filter(|last| last.kind_name() == "throw_statement")
        else {
            return false;
        };
        // `throw new ApiError(400, ...)`: the caller answers the failure as the client's.
        if carries_client_status(rethrow, src)
            || (maps_errors(model.handler.framework) && throws_client_error(rethrow, src))
        {
            return false;
        }
    }
    if i == 0 {
        return true;
    }
    if depth >= model.scopes.len() {
        return false;
    }
    sites[i]
        .iter()
        .filter(|site| !site.handled_on_the_spot)
        .any(|site| ends_in_5xx(model, sites, site.caller, site.call, depth + 1))
}

/// A call of one scope's function from another scope of the handler.
struct CallSite<'a> {
    caller: usize,
    call: Node<'a>,
    /// `this.verify(x).catch(...)`: the call's rejection is handled where it is made.
    handled_on_the_spot: bool,
}

/// For each scope, the calls of its function from the handler's other scopes.
fn call_sites<'a>(cx: &Context, model: &'a HandlerModel) -> Vec<Vec<CallSite<'a>>> {
    let sites = model.call_sites(cx.project);
    sites
        .into_iter()
        .map(|calls| {
            calls
                .into_iter()
                .map(|(caller, call)| {
                    let src = src_of(&model.scopes[caller]);
                    let handled_on_the_spot = ast::parent(call).is_some_and(|p| {
                        p.kind_name() == "member_expression"
                            && p.field("property").is_some_and(|q| matches!(text(q, src), "catch" | "then"))
                    });
                    CallSite { caller, call, handled_on_the_spot }
                })
                .collect()
        })
        .collect()
}

/// `new ORPCError("INTERNAL_SERVER_ERROR", ...)`, `new TRPCError({ code: "INTERNAL_SERVER_ERROR" })`,
/// `new InternalServerErrorException(...)`, `new HttpError(500, ...)`: an error that names a 5xx
/// as the answer, which the framework's error handler gives it.
fn states_5xx(error: Node, src: &str) -> bool {
    let Some(constructor) = error.field("constructor").map(|c| text(c, src)) else {
        return false;
    };
    if constructor == "InternalServerErrorException" {
        return true;
    }
    let args = error.field("arguments").map(|a| text(a, src)).unwrap_or("");
    constructor.ends_with("Error")
        && (crate::regex!(r#"^\(\s*(\{\s*code\s*:\s*)?["'`]INTERNAL_SERVER_ERROR["'`]"#).is_match(args)
            || crate::regex!(r"^\(\s*(\{\s*(status|statusCode)\s*:\s*)?5\d\d\b").is_match(args))
}

/// The `try`'s catch answers 5xx for whatever failed: every answer it gives is a 5xx, and it
/// tests nothing of what was caught.
fn catch_answers_every_failure_5xx(try_stmt: Node, src: &str, names: &[&str]) -> bool {
    let Some(catch_body) = try_stmt.field("handler").and_then(|h| h.field("body")) else {
        return false;
    };
    if tells_failures_apart(text(catch_body, src)) {
        return false;
    }
    let answers = responses::responses_in(catch_body, src, names, true);
    !answers.is_empty() && answers.iter().all(|r| r.is_5xx())
}

/// What `new Error(message)` spells out in its message (see `ast::literal_words`).
fn thrown_message(error: Node, src: &str) -> String {
    // The message is the first argument, or a `message` of the options (`new ORPCError(code, { message })`).
    let args = error.field("arguments").map(ast::named_children).unwrap_or_default();
    args.iter()
        .take(2)
        .map(|a| match a.kind_name() {
            "object" => {
                ast::object_property(*a, "message", src).map(|m| ast::literal_words(m, src)).unwrap_or_default()
            }
            _ => ast::literal_words(*a, src),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `throw billingErrors.invalidWebhookSignature()`, `throw new InvalidSignatureError()`: a
/// project's own error named for the client's fault, which its error handler (Nest filters,
/// Express error middleware, Fastify / Hono `onError`) maps to a 4xx
/// (a bare `Error` / `TypeError`, or the caught error itself, still becomes a 500).
fn throws_client_error(throw: Node, src: &str) -> bool {
    let Some(value) = throw.named_child(0).map(ast::unwrap_expr) else {
        return false;
    };
    let callee = match value.kind_name() {
        "call_expression" => value.field("function"),
        "new_expression" => value.field("constructor"),
        _ => None,
    };
    let Some(callee) = callee else { return false };
    let name = text(callee, src).rsplit('.').next().unwrap_or("").to_ascii_lowercase();
    !matches!(name.as_str(), "error" | "typeerror" | "rangeerror" | "syntaxerror")
        && ["invalid", "unauthori", "forbidden", "badrequest", "signature", "validation"]
            .iter()
            .any(|w| name.contains(w))
}

/// `throw new AppError({ status: isSignatureError ? 400 : 500, ... })`, `throw new
/// StatusError(400, ...)`: the project's error states the status it is answered with, and a 4xx is among them, so the bad signature is
/// answered as the client's fault by whatever turns that error into the response.
fn carries_client_status(throw: Node, src: &str) -> bool {
    let Some(value) = throw.named_child(0).map(ast::unwrap_expr) else {
        return false;
    };
    if !matches!(value.kind_name(), "call_expression" | "new_expression") {
        return false;
    }
    let args = value.field("arguments").map(ast::named_children).unwrap_or_default();
    // oRPC / tRPC codes of the client's fault: `new ORPCError("BAD_REQUEST")`, `{ code: "UNAUTHORIZED" }`.
    let client_code = |v: Node| {
        ast::string_value(v, src).is_some_and(|c| {
            matches!(c.as_str(), "BAD_REQUEST" | "UNAUTHORIZED" | "FORBIDDEN" | "PARSE_ERROR" | "UNPROCESSABLE_CONTENT")
        })
    };
    // `new StatusError(400, "bad signature")`, `createError(401, ...)`: a status first.
    let client_number = |v: Node| v.kind_name() == "number" && crate::regex!(r"^4\d\d$").is_match(text(v, src));
    if args.first().is_some_and(|a| client_code(*a) || client_number(*a))
        || args
            .iter()
            .filter(|a| a.kind_name() == "object")
            .any(|obj| ast::object_property(*obj, "code", src).is_some_and(client_code))
    {
        return true;
    }
    args.iter().filter(|a| a.kind_name() == "object").any(|obj| {
        ["status", "statusCode", "httpStatus"].iter().any(|key| {
            ast::object_property(*obj, key, src).is_some_and(|v| crate::regex!(r"\b4\d\d\b").is_match(text(v, src)))
        })
    })
}

fn is_schema(call: Node, src: &str) -> bool {
    ast::callee_path(call, src).first().is_some_and(|s| s.to_ascii_lowercase().ends_with("schema"))
}

fn callee(call: Node, src: &str) -> String {
    ast::callee_path(call, src).join(".")
}

fn diag(
    cx: &Context,
    model: &HandlerModel,
    scope: &Scope,
    node: Node,
    message: String,
    fix: impl FnOnce() -> Fix,
) -> Diagnostic {
    Diagnostic::new(RULE.id, scope.file(), node, message)
        .in_handler(model, scope)
        .help("answer 400/401 for bad signatures and malformed payloads: the provider stops retrying")
        .with_fix(cx, fix)
}

/// `const event = check(...)` → `let event; try { event = check(...) } catch { return <400> }`.
/// The handler's own call of scope `i` when that scope is called directly by the handler and
/// does nothing but read the request and run the check.
fn thin_wrapper_call_site<'a>(cx: &Context, model: &'a HandlerModel, i: usize, func: Node) -> Option<Node<'a>> {
    let scope = &model.scopes[i];
    let body = ast::function_body(func)?;
    if scope.depth != 1 || !only_checks(body, &scope.file().text, cx.project, scope.file()) {
        return None;
    }
    let handler = &model.scopes[0];
    ast::calls_in(handler.node()?, true).into_iter().find(|c| {
        reach::resolve_call(cx.project, handler.file(), *c)
            .is_some_and(|d| d.span == scope.function.span && d.file.path == scope.function.file.path)
    })
}

fn wrap_fix(model: &HandlerModel, file: &SourceFile, call: Node) -> Fix {
    let Some(answer) = model.handler.respond(400) else {
        return Fix::display_only("catch the check and answer 400", "no response object is in scope");
    };
    if model.handler.framework == Framework::Nest {
        return Fix::display_only("catch the check and throw BadRequestException", "Nest answers 500 for other errors");
    }
    let Some(stmt) = ast::enclosing_statement(call) else {
        return Fix::display_only("catch the check and answer 400", "the check is not a statement of its own");
    };
    let Some(block) = ast::parent(stmt).filter(|p| p.kind_name() == "statement_block") else {
        return Fix::display_only("catch the check and answer 400", "the check is not in a block");
    };
    let src = &file.text;
    let style = file.style();
    let indent = file.indent_at(stmt.start_byte()).to_string();
    let unit = style.indent_unit.clone();
    let eol = style.eol;
    let close = format!("}} catch {{{eol}{indent}{unit}{answer}{eol}{indent}}}");
    match stmt.kind_name() {
        "expression_statement" => {
            let edits = crate::fix::text::wrap_statements(file, block, stmt, stmt, "try {", &close);
            Fix::unsafe_("answer 400 when the check throws", edits)
        }
        "lexical_declaration" => {
            let decls: Vec<Node> =
                ast::named_children(stmt).into_iter().filter(|d| d.kind_name() == "variable_declarator").collect();
            let [decl] = decls.as_slice() else {
                return Fix::display_only("catch the check and answer 400", "several declarations in one statement");
            };
            let (Some(name), Some(value)) = (decl.field("name"), decl.field("value")) else {
                return Fix::display_only("catch the check and answer 400", "no initializer");
            };
            if name.kind_name() != "identifier" {
                return Fix::display_only("catch the check and answer 400", "a destructuring declaration");
            }
            let ty = decl.field("type").map(|t| text(t, src)).unwrap_or("");
            let semi = style.semi();
            let mut edits = crate::fix::text::wrap_statements(file, block, stmt, stmt, "try {", &close);
            edits[0].replacement = format!("{indent}let {}{ty}{semi}{eol}{}", text(name, src), edits[0].replacement);
            edits.push(Edit::replace(stmt.start_byte(), value.start_byte(), format!("{} = ", text(name, src))));
            Fix::unsafe_("declare before a try that answers 400 when the check throws", edits)
        }
        _ => Fix::display_only("catch the check and answer 400", "the check is part of a larger statement"),
    }
}

fn queue(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    // A queue that never retries runs a permanent failure once, as it should.
    if crate::model::queue_retries::never_retried(cx.project, &model.handler) {
        return;
    }
    let bull_import = crate::regex!(r#"(from|require\()\s*['"](bull|@nestjs/bull)['"]"#);
    let mut uncaught: Option<Vec<bool>> = None;
    for (i, scope) in model.scopes.iter().enumerate() {
        let Some(func) = scope.node() else { continue };
        let file = scope.file();
        let src = &file.text;
        for throw in ast::descendants_of_kind(func, "throw_statement") {
            if ast::enclosing_function(throw) != Some(func) {
                continue;
            }
            let Some(value) = throw.named_child(0).map(ast::unwrap_expr).filter(|v| v.kind_name() == "new_expression")
            else {
                continue;
            };
            let Some(ctor) = value.field("constructor") else { continue };
            let ctor_name = text(ctor, src);
            if !matches!(ctor_name, "Error" | "TypeError" | "RangeError") {
                continue;
            }
            // A catch that rethrows a wrapped error is about transient failures as often as not.
            if responses::in_catch(throw, func).is_some() {
                continue;
            }
            let message = thrown_message(value, src);
            let conditions = responses::branch_conditions(throw, func);
            let missing = conditions.iter().any(|(c, pos)| *pos && missing_record(*c, func, src));
            if !PERMANENT.is_match(&message) && !missing || about_configuration(&message, &conditions, func, src) {
                continue;
            }
            // `if (res.status >= 300) throw new Error("Invalid response status")`: a remote
            // service's answer, which a later attempt may change (a 5xx, a 429).
            if conditions.iter().any(|(c, _)| tests_response_status(*c, src)) {
                continue;
            }
            // A helper's throw that a caller on the way catches (and answers with a fallback)
            // never fails the job.
            if i != 0 && !uncaught.get_or_insert_with(|| uncaught_scopes(cx, model))[i] {
                continue;
            }
            // Bull v3 (`queue.process(fn)`, `bull`, `@nestjs/bull`) has no UnrecoverableError:
            // `job.discard()` before the throw stops its retries.
            let bull_v3 = model.handler.framework == Framework::Bullmq
                && (model.handler.name.starts_with("queue processor")
                    || bull_import.is_match(src)
                    || bull_import.is_match(&model.handler.file.text));
            let runner = model.handler.framework == Framework::JobRunner;
            let (class, module) = match model.handler.framework {
                Framework::Bullmq if bull_v3 => ("Error", None),
                Framework::JobRunner => ("Error", None),
                Framework::Bullmq => ("UnrecoverableError", Some("bullmq")),
                Framework::Inngest => ("NonRetriableError", Some("inngest")),
                _ => ("AbortTaskRunError", None),
            };
            let fix = || match module {
                // A helper the job calls (a factory, a service) is called by other code too:
                // changing what it throws changes it for them.
                Some(_) if scope.depth > 0 => Fix::display_only(
                    format!("throw {class} so the job fails without retries"),
                    format!(
                        "the throw is in `{}`, which other code may call: throw `{class}` from the job, or map this error to it there",
                        scope.function.name
                    ),
                ),
                Some(module) => {
                    let mut edits = vec![Edit::replace(ctor.start_byte(), ctor.end_byte(), class)];
                    let spec = GuardSpec { module: module.to_string(), export: class.to_string() };
                    edits.extend(imports::ensure_import(file, &spec));
                    Fix::unsafe_(format!("throw {class} so the job fails without retries"), edits).with_note(
                        "review that this failure is permanent: a record that may appear later should stay retryable",
                    )
                }
                None if bull_v3 => {
                    Fix::display_only("call `job.discard()` before the throw", "Bull has no UnrecoverableError")
                }
                None if runner => Fix::display_only(
                    "fail the job without retries",
                    "use the queue library's non-retryable failure, or log and return so the job completes",
                ),
                None => Fix::display_only(format!("throw {class}"), "import it from your Trigger.dev SDK version"),
            };
            let advice = if bull_v3 {
                "call `job.discard()` before throwing".to_string()
            } else if runner {
                "fail it without retries, or log and return".to_string()
            } else {
                format!("throw `{class}`")
            };
            out.push(diag(
                cx,
                model,
                scope,
                throw,
                format!("a permanent failure is thrown as a retryable `{ctor_name}`: the queue retries a job that can never succeed; {advice}"),
                fix,
            ));
        }
    }
}

/// A condition on a remote answer's status (`res.status < 200 || res.status >= 300`,
/// `!response.ok`, `resp.statusCode !== 200`).
fn tests_response_status(cond: Node, src: &str) -> bool {
    ast::descendants_of_kind(cond, "member_expression").into_iter().any(|m| {
        let path = ast::member_path(m, src);
        path.len() == 2
            && matches!(path[1].as_str(), "status" | "statusCode" | "ok")
            && crate::regex!(r"(?i)^(res|resp|response|result|reply)$").is_match(&path[0])
    })
}

/// A message consumer whose `try` parses the message (`Schema.parse(JSON.parse(record.body))`) and
/// whose `catch` sends every failure back for redelivery (`batchItemFailures.push`, a rethrow,
/// `message.retry()`, a re-enqueue) without telling the parse failure apart: a malformed
/// message is redelivered until the dead-letter queue, though it can never succeed.
fn redelivered_parse_failures(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    for scope in &model.scopes {
        let Some(func) = scope.node() else { continue };
        let src = src_of(scope);
        for call in ast::calls_in(func, false) {
            if !is_schema(call, src) || !is_parse(call, src) {
                continue;
            }
            let Some(try_stmt) = enclosing_try(call, func) else { continue };
            let Some(body) = try_stmt.field("handler").and_then(|h| h.field("body")) else {
                continue;
            };
            let catch_text = text(body, src);
            let tells_apart = tells_failures_apart(catch_text);
            if tells_apart || !sends_back_for_redelivery(body, src) {
                continue;
            }
            let schema = callee(call, src);
            out.push(diag(
                cx,
                model,
                scope,
                call,
                format!(
                    "a message that fails `{schema}` can never succeed, but the catch sends it back for redelivery with every other failure: it is retried until the dead-letter queue"
                ),
                || Fix::display_only(
                    "drop or dead-letter a malformed message at once",
                    "validate with `safeParse` before the `try`, and acknowledge (or dead-letter) a message that fails it instead of redelivering it",
                ),
            ));
        }
    }
}

/// The catch branches on what failed: an error class other than plain `Error`
/// (`err instanceof Error ? err.message : ...` only formats the message), its name or code.
fn tells_failures_apart(catch_text: &str) -> bool {
    crate::regex!(r"instanceof\s+(?:\w+\.)*(?:\w*Error\w+|[A-DF-Z]\w*|E[a-qs-z]\w*)").is_match(catch_text)
        || crate::regex!(r"\.name\s*[!=]=|\.code\s*[!=]=").is_match(catch_text)
        || ["ZodError", "SyntaxError", "issues", "safeParse", "permanent"].iter().any(|w| catch_text.contains(w))
}

/// The catch returns the message for another attempt.
fn sends_back_for_redelivery(catch_body: Node, src: &str) -> bool {
    let rethrows = ast::descendants_of_kind(catch_body, "throw_statement")
        .into_iter()
        .any(|t| ast::enclosing_function(t) == ast::enclosing_function(catch_body));
    rethrows
        || text(catch_body, src).contains("batchItemFailures")
        || ast::calls_in(catch_body, false).into_iter().any(|c| {
            let path = ast::callee_path_shared(c, src);
            let last = path.last().map(String::as_str).unwrap_or("");
            matches!(last, "retry" | "retryAll" | "nack" | "requeue")
                || effects::classify(c, src, false).is_some_and(|e| e.kind == effects::EffectKind::Enqueue)
                // a queue binding the classifier does not know (`this.queue.send(...)` on Cloudflare)
                || matches!(last, "send" | "sendMessage" | "add" | "enqueue" | "publish")
                    && path.iter().any(|p| p.to_ascii_lowercase().contains("queue"))
        })
}

/// `!user` / `user == null` where `user` came from a lookup.
fn missing_record(cond: Node, func: Node, src: &str) -> bool {
    let mut c = cond;
    while c.kind_name() == "parenthesized_expression" {
        match c.named_child(0) {
            Some(n) => c = n,
            None => return false,
        }
    }
    let subject = match c.kind_name() {
        "unary_expression" if c.child(0).is_some_and(|o| text(o, src) == "!") => c.field("argument"),
        "binary_expression" => {
            let op = c.field("operator").map(|o| text(o, src)).unwrap_or("");
            let r = c.field("right").map(|r| text(r, src)).unwrap_or("");
            (matches!(op, "===" | "==") && (r == "null" || r == "undefined")).then(|| c.field("left")).flatten()
        }
        _ => None,
    };
    let Some(subject) = subject.filter(|s| s.kind_name() == "identifier") else { return false };
    let Some(init) = ast::find_binding_init(func, text(subject, src), src, cond.start_byte()) else { return false };
    let init = ast::unwrap_expr(init);
    init.kind_name() == "call_expression"
        && ast::callee_name(init, src).is_some_and(|n| {
            let n = n.to_ascii_lowercase();
            n.starts_with("find")
                || n == "get"
                || n == "findbyid"
                || n == "findbypk"
                || n == "single"
                || n == "maybesingle"
        })
}
