//! ack-timing

use super::{Context, Diagnostic, FixAvailability, HandlerModel, Rule};
use crate::fix::{Edit, Fix};
use crate::model::ast::{self, text};
use crate::model::best_effort::{self, deferrer};
use crate::model::reach::{self, Scope};
use crate::model::responses;
use crate::model::{EffectKind, Framework, effects};
use crate::project::Project;
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::sync::Arc;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
Work that is not finished when the delivery is acknowledged:
- the response is sent (`res.json()`, `res.sendStatus()`, `reply.send()`) and the handler
  awaits more work afterwards;
- a promise of an effect is dropped: an SDK/database call or a call to a project `async`
  function used as a statement without `await`/`return` (also `.then()` chains), or an
  event emitter's `emitAsync(...)` (EventEmitter2, `@nestjs/event-emitter`), whose promise is
  the listeners' work;
- `items.forEach(async (item) => ...)`: `forEach` does not wait for the callbacks;
- `void work()`;
- a child process started with `exec`/`spawn`/`execFile`/`fork` from `child_process` whose
  completion nothing awaits (fix: display-only; await a promise settled on its `close`);
- work deferred past the response: `after()`, `waitUntil()`, `setImmediate`, `setTimeout`,
  `process.nextTick`, `queueMicrotask` callbacks that write or call out;
- in an explicit-ack consumer, the message acknowledged before its work: RabbitMQ
  `channel.ack(msg)`, Pub/Sub `message.ack()`, or an SQS poller's `DeleteMessageCommand`
  followed by more work (fix, unsafe: move the acknowledgement after that work). A dropped
  chain that acks in its own continuation (`work(msg).then(() => msg.ack()).catch(() =>
  msg.nack())`) acknowledges after the work and is not reported.

## Why retries break it
Once the provider has its 2xx (or the queue its completed job), it never redelivers. A crash,
deploy or serverless freeze before the unfinished work completes loses it for good, and a
rejected dropped promise is never seen by anyone (or crashes the process with an unhandled
rejection, failing other deliveries in flight).

Not reported: work awaited before the response; deferred callbacks that only read or log;
a response followed only by dropped promises is reported once, at each promise (not again at
the response). A dropped `.then/.catch` chain on a processor the consumer was handed as a
parameter (`processMessage(data).catch(log)` in a shared consumer's `eachMessage`) is the
message's work and is reported;
dropped promises of deliberate best effort, telemetry or a notification (`void
sendWelcomeEmail(user)`, `trackEvent(e).catch(log)`), judged by what the callee does; a call
inside a `new Promise((resolve, reject) => ...)` executor whose callbacks settle that promise
(`ffmpeg(input).on("end", resolve).on("error", reject).save(out)`): it ends when the promise does.
Handing work to a durable queue (`await queue.add(...)`) before answering is the right way to
answer fast.

## Bad
```ts
res.status(200).json({ received: true });
await fulfillOrder(session);
items.forEach(async (item) => { await prisma.line.create({ data: item }); });
```

## Good
```ts
await fulfillOrder(session);
res.status(200).json({ received: true });
for (const item of items) { await prisma.line.create({ data: item }); }
```

## Fix (unsafe: review)
- a response followed by work in the same block moves after that work;
- `items.forEach(async (item) => { ... })` becomes `for (const item of items) { ... }`: the
  callbacks then run one after the other (retrysafe prefers sequential execution, which keeps
  order and rate limits; use `await Promise.all(items.map(async (item) => ...))` by hand where
  order does not matter). Not applied when the callback returns early, takes an index, uses
  `this`, iterates something named like a Map, or the enclosing function is not `async`;
- `await` is added to a dropped effect promise, and `void work()` becomes `await work()`
  (only inside `async` functions);
- deferred work: no fix (await it before answering, or enqueue it durably).
"#;

pub const RULE: Rule = Rule {
    id: "ack-timing",
    summary: "work is not finished when the delivery is acknowledged: a crash after the 2xx loses it; await it first",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

struct Cx<'a> {
    cx: &'a Context<'a>,
    project: &'a Project,
    file: &'a Arc<SourceFile>,
}

impl Cx<'_> {
    fn src(&self) -> &str {
        &self.file.text
    }

    /// A call whose promise carries an effect: an SDK or DB write, or a project async function.
    fn promise_work(&self, call: Node) -> bool {
        let src = self.src();
        let path = ast::callee_path_shared(call, src);
        let last = path.last().map(|s| s.trim_end_matches("()")).unwrap_or("");
        if matches!(last, "then" | "catch" | "finally") {
            let inner = call
                .field("function")
                .and_then(|f| f.field("object"))
                .map(ast::unwrap_expr)
                .filter(|o| o.kind_name() == "call_expression");
            return inner.is_some_and(|i| self.promise_work(i) || self.handed_in(i));
        }
        // `emitAsync` runs the listeners and resolves when they are done: its promise is their work.
        if last == "emitAsync" && path.len() >= 2 {
            return true;
        }
        let def = reach::resolve_call(self.project, self.file, call);
        if let Some(def) = &def {
            return def.node().is_some_and(|n| {
                (is_async(n, &def.file.text) || self.returns_async_call(&def.file, n))
                    && !only_connects(n, &def.file.text)
            });
        }
        effects::classify(call, src, false).is_some_and(|e| e.kind != EffectKind::Possible)
    }

    /// `function insertAssetSize(row) { return insert(row, target) }`: a plain function that
    /// hands back the promise of an async project function.
    fn returns_async_call(&self, file: &Arc<SourceFile>, func: Node) -> bool {
        reach::returned_values(func).into_iter().map(ast::unwrap_expr).any(|value| {
            value.kind_name() == "call_expression"
                && reach::resolve_call(self.project, file, value)
                    .is_some_and(|def| def.node().is_some_and(|n| is_async(n, &def.file.text)))
        })
    }

    /// A call of a function the consumer was handed as a parameter (`processMessage(data)` in a
    /// shared consumer's `eachMessage`): the processor is the message's work.
    fn handed_in(&self, call: Node) -> bool {
        let src = self.src();
        let Some(callee) = call.field("function").filter(|f| f.kind_name() == "identifier") else {
            return false;
        };
        let name = text(callee, src);
        ast::ancestors(call)
            .filter(|a| ast::is_function(*a))
            .any(|f| ast::parameter_names(f, src).iter().any(|p| p == name))
    }

    /// Whether a dropped promise is deliberate best effort: telemetry or a notification
    /// (`void sendWelcomeEmail(user)`, `track(event).catch(log)`), whose loss does not lose
    /// the event, or work the code's own words drop on purpose: a comment above its statement
    /// ("fire-and-forget", "non-critical") or its `.catch` handler's message ("failed to send
    /// the notification").
    fn best_effort(&self, call: Node) -> bool {
        let (src, file) = (self.src(), self.file);
        if ast::enclosing_statement(call).is_some_and(|s| {
            best_effort::comment_block_above(src, file.line_start(s.start_byte()))
                .is_some_and(|c| best_effort::marked(&c))
        }) {
            return true;
        }
        let mut call = call;
        loop {
            let link = ast::callee_path(call, src).last().map(|s| s.trim_end_matches("()").to_string());
            if !matches!(link.as_deref(), Some("then" | "catch" | "finally")) {
                break;
            }
            let said = link.as_deref() == Some("catch")
                && ast::arguments(call)
                    .first()
                    .map(|h| ast::unwrap_expr(*h))
                    .filter(|h| ast::is_function(*h))
                    .and_then(|h| h.field("body"))
                    .is_some_and(|body| best_effort::says_best_effort(body, src).is_some());
            if said {
                return true;
            }
            match call
                .field("function")
                .and_then(|f| f.field("object"))
                .map(ast::unwrap_expr)
                .filter(|o| o.kind_name() == "call_expression")
            {
                Some(inner) => call = inner,
                None => break,
            }
        }
        matches!(
            best_effort::call_category(self.project, file, call, 3),
            best_effort::Category::Telemetry | best_effort::Category::Notification
        )
    }

    /// Whether a subtree contains promise work (in nested callbacks too); an awaited call
    /// counts even when its callee cannot be resolved.
    fn contains_work(&self, node: Node) -> bool {
        let src = self.src();
        ast::calls_in(node, false).into_iter().any(|c| {
            self.promise_work(c)
                || ast::is_awaited_call(c)
                    && !ast::callee_name(c, src).is_some_and(|n| {
                        let n = n.to_ascii_lowercase();
                        n.contains("sleep") || n.contains("delay") || n.contains("wait") || n == "json" || n == "text"
                    })
        })
    }
}

/// A function that only opens the database connection (`await mongoose.connect(url)`,
/// `prisma.$connect()`, `dataSource.initialize()`), beside logging and client settings: the
/// queries that follow wait for the connection themselves (Mongoose buffers them) and fail when
/// it does, so its dropped promise leaves no work unfinished.
fn only_connects(func: Node, src: &str) -> bool {
    let calls = ast::calls_in(func, false);
    let opens = |c: &Node| {
        ast::callee_name(*c, src).is_some_and(|n| {
            matches!(
                n.trim_end_matches("()"),
                "connect" | "$connect" | "createConnection" | "initialize" | "authenticate"
            )
        })
    };
    calls.iter().any(opens)
        && calls.iter().filter(|c| !opens(c)).all(|c| {
            ast::callee_name(*c, src).is_some_and(|n| {
                matches!(n.trim_end_matches("()"), "set" | "log" | "info" | "warn" | "error" | "debug")
            })
        })
}

/// A callee named for telemetry or a notification (`sendEmail`, `trackSignup`): the promises
/// it drops are that best-effort work's own (a mail's fallback queue), not the event's.
fn sends_notification(scope: &Scope) -> bool {
    scope.depth > 0
        && matches!(
            best_effort::named_category(&scope.function.name),
            Some(best_effort::Category::Telemetry | best_effort::Category::Notification)
        )
}

/// `work(message).then(() => message.ack()).catch(() => message.nack())`,
/// `work(message).catch(log).finally(() => channel.ack(message))`: an explicit-ack consumer
/// acknowledges in the chain's continuation, after the work.
fn acks_in_continuation(call: Node, src: &str) -> bool {
    ast::calls_in(call, false).into_iter().any(|c| {
        matches!(ast::callee_name(c, src).as_deref(), Some("ack" | "acknowledge"))
            && ast::ancestors(c).take_while(|a| a.id() != call.id()).chain(std::iter::once(call)).any(|a| {
                a.kind_name() == "call_expression"
                    && matches!(ast::callee_name(a, src).as_deref(), Some("then" | "finally"))
            })
    })
}

fn is_async(func: Node, src: &str) -> bool {
    let func = if func.kind_name() == "method_definition" || ast::is_function(func) { func } else { return false };
    (0..func.child_count()).filter_map(|i| func.child(i)).any(|c| c.kind_name() == "async")
        || text(func, src).starts_with("async")
}

fn enclosing_is_async(node: Node, src: &str) -> bool {
    ast::enclosing_function(node).is_some_and(|f| is_async(f, src))
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        for (i, scope) in model.scopes.iter().enumerate() {
            let Some(func) = scope.node() else { continue };
            let c = Cx { cx, project: cx.project, file: scope.file() };
            if i == 0
                && matches!(model.handler.framework, Framework::Express | Framework::NextPagesApi | Framework::Fastify)
            {
                respond_then_work(&c, model, scope, func, out);
            }
            if i == 0 && matches!(model.handler.framework, Framework::Amqp | Framework::Pubsub | Framework::SqsPolling)
            {
                ack_then_work(&c, model, scope, func, out);
            }
            statements(&c, model, scope, func, out);
            detached_processes(cx, model, scope, func, out);
        }
    }
}

/// The local names `exec`/`spawn`/`execFile`/`fork` of `child_process` are bound to in `src`
/// (`import { exec as run } from "node:child_process"`, `const { spawn } = require(...)`), and
/// the names the module itself is bound to (`import * as cp from ...`, `const cp = require(...)`).
fn child_process_bindings(src: &str) -> (Vec<String>, Vec<String>) {
    let mut named = Vec::new();
    let mut namespaces = Vec::new();
    let braces = crate::regex!(
        r#"(?:import\s*(?:type\s*)?\{([^}]*)\}\s*from\s*['"](?:node:)?child_process['"])|(?:\{([^}]*)\}\s*=\s*require\(\s*['"](?:node:)?child_process['"]\s*\))"#
    );
    for c in braces.captures_iter(src) {
        let list = c.get(1).or_else(|| c.get(2)).map_or("", |m| m.as_str());
        for item in list.split(',') {
            let mut parts =
                item.split(|ch: char| ch == ':' || ch.is_whitespace()).filter(|p| !p.is_empty() && *p != "as");
            let (Some(original), local) = (parts.next(), parts.next()) else { continue };
            if matches!(original, "exec" | "spawn" | "execFile" | "fork") {
                named.push(local.unwrap_or(original).to_string());
            }
        }
    }
    let whole = crate::regex!(
        r#"(?:import\s+(?:\*\s+as\s+)?(\w+)\s+from\s*['"](?:node:)?child_process['"])|(?:(?:const|let|var)\s+(\w+)\s*=\s*require\(\s*['"](?:node:)?child_process['"]\s*\))"#
    );
    for c in whole.captures_iter(src) {
        if let Some(name) = c.get(1).or_else(|| c.get(2)) {
            namespaces.push(name.as_str().to_string());
        }
    }
    (named, namespaces)
}

/// `exec(command)` / `spawn(...)` from `child_process` whose completion nobody awaits: the
/// handler answers while the process runs, and a failed or killed process is never retried.
/// Awaited forms (`await promisify(exec)(cmd)`, a `new Promise` settled on `close`) and the
/// `...Sync` variants finish before the handler does.
fn detached_processes(cx: &Context, model: &HandlerModel, scope: &Scope, func: Node, out: &mut Vec<Diagnostic>) {
    let src = &scope.file().text;
    // Most files never import it: skip the import scan for them.
    if !src.contains("child_process") {
        return;
    }
    let (named, namespaces) = child_process_bindings(src);
    if named.is_empty() && namespaces.is_empty() {
        return;
    }
    for call in ast::calls_in(func, false) {
        let path = ast::callee_path_shared(call, src);
        let starts = match &path[..] {
            [name] => named.contains(name),
            [ns, method] => {
                namespaces.contains(ns) && matches!(method.as_str(), "exec" | "spawn" | "execFile" | "fork")
            }
            _ => false,
        };
        if !starts || ast::ancestors(call).take_while(|a| *a != func).any(|a| a.kind_name() == "await_expression") {
            continue;
        }
        let in_promise = ast::ancestors(call).take_while(|a| *a != func).any(|a| {
            a.kind_name() == "new_expression" && a.field("constructor").is_some_and(|c| text(c, src) == "Promise")
        });
        if in_promise {
            continue;
        }
        out.push(diag(
            cx,
            model,
            scope,
            call,
            format!(
                "`{}` starts a child process that nothing awaits: the delivery is acknowledged while it runs, and if it fails or the process is stopped, nothing retries it",
                path.join(".")
            ),
            || Fix::display_only(
                "await the process",
                "wrap it in a promise settled on `close` (rejecting on a non-zero code) and await it, or hand the work to a durable queue",
            ),
        ));
    }
}

fn diag(
    cx: &Context,
    model: &HandlerModel,
    scope: &Scope,
    node: Node,
    msg: String,
    fix: impl FnOnce() -> Fix,
) -> Diagnostic {
    Diagnostic::new(RULE.id, scope.file(), node, msg)
        .in_handler(model, scope)
        .help("finish (await) the work before acknowledging, or hand it to a durable queue first")
        .with_fix(cx, fix)
}

/// `res.json(...)` as a statement followed, in its block, by awaited work.
fn respond_then_work(c: &Cx, model: &HandlerModel, scope: &Scope, func: Node, out: &mut Vec<Diagnostic>) {
    let src = c.src();
    let names = responses::handler_names(&model.handler);
    for resp in responses::responses_in(func, src, &names, true) {
        if resp.style == responses::Style::Koa {
            continue;
        }
        let Some(stmt) = ast::enclosing_statement(resp.node).filter(|s| s.kind_name() == "expression_statement") else {
            continue;
        };
        if ast::enclosing_function(resp.node) != Some(func) {
            continue;
        }
        let following = ast::following_siblings(stmt);
        let has_work = |s: &Node| {
            !ast::descendants_of_kind(*s, "await_expression")
                .into_iter()
                .all(|a| ast::enclosing_function(a) != Some(func))
                || ast::calls_in(*s, true).into_iter().any(|call| c.promise_work(call))
        };
        // Work that is only dropped promises is reported once, at each promise.
        let work: Vec<Node> = following.iter().copied().filter(has_work).collect();
        if work.iter().all(|s| dropped_promise(c, scope, *s).is_some()) {
            continue;
        }
        let movable = following.iter().all(|s| {
            s.kind_name() == "comment"
                || (ast::descendants_of_kind(*s, "return_statement").is_empty()
                    && ast::descendants_of_kind(*s, "throw_statement").is_empty()
                    && responses::responses_in(*s, src, &names, false).is_empty())
        });
        let fix = || match (movable, following.iter().rev().find(|s| s.kind_name() != "comment")) {
            (true, Some(last)) => move_after(c.file, stmt, *last)
                .map(|edits| Fix::unsafe_("send the response after the work", edits))
                .unwrap_or_else(|| {
                    Fix::display_only("send the response after the work", "the statement shares its line")
                }),
            _ => Fix::display_only(
                "send the response after the work",
                "the work after the response returns or answers itself: restructure by hand",
            ),
        };
        out.push(diag(
            c.cx,
            model,
            scope,
            resp.node,
            "the response is sent before the work that follows it is done: a crash after it loses the work, and the provider never retries".into(),
            fix,
        ));
    }
}

/// Queue form: `channel.ack(msg)`, `message.ack()` or an SQS `DeleteMessageCommand` as a
/// statement followed, in its block, by work: the message is gone before the work is done.
fn ack_then_work(c: &Cx, model: &HandlerModel, scope: &Scope, func: Node, out: &mut Vec<Diagnostic>) {
    let src = c.src();
    for call in ast::descendants_of_kind(func, "call_expression") {
        let name = ast::callee_name(call, src).unwrap_or_default();
        let is_ack = matches!(name.as_str(), "ack" | "ackWithResponse")
            || (name == "send"
                && ast::arguments(call).first().is_some_and(|a| text(*a, src).contains("DeleteMessageCommand")));
        if !is_ack {
            continue;
        }
        let Some(stmt) = ast::enclosing_statement(call).filter(|s| s.kind_name() == "expression_statement") else {
            continue;
        };
        let following = ast::following_siblings(stmt);
        if !following.iter().any(|s| c.contains_work(*s)) {
            continue;
        }
        let movable = following.iter().all(|s| {
            s.kind_name() == "comment"
                || (ast::descendants_of_kind(*s, "return_statement").is_empty()
                    && ast::descendants_of_kind(*s, "throw_statement").is_empty()
                    && ast::descendants_of_kind(*s, "continue_statement").is_empty()
                    && ast::descendants_of_kind(*s, "break_statement").is_empty())
        });
        let fix = || match (movable, following.iter().rev().find(|s| s.kind_name() != "comment")) {
            (true, Some(last)) => move_after(c.file, stmt, *last)
                .map(|edits| Fix::unsafe_("acknowledge after the work", edits))
                .unwrap_or_else(|| Fix::display_only("acknowledge after the work", "the statement shares its line")),
            _ => Fix::display_only(
                "acknowledge after the work",
                "the work after the acknowledgement leaves early: restructure by hand",
            ),
        };
        out.push(diag(
            c.cx,
            model,
            scope,
            call,
            "the message is acknowledged before the work that follows it is done: a crash or failure after it loses the message, and it is never redelivered".into(),
            fix,
        ));
    }
}

fn move_after(file: &SourceFile, stmt: Node, last: Node) -> Option<Vec<Edit>> {
    let src = &file.text;
    let start = file.line_start(stmt.start_byte());
    if !src[start..stmt.start_byte()].trim().is_empty() {
        return None;
    }
    let end = crate::fix::text::line_end(file, stmt.end_byte());
    if !src[stmt.end_byte()..end].trim().is_empty() {
        return None;
    }
    let after_eol = if src[end..].starts_with("\r\n") { end + 2 } else { end + 1 }.min(src.len());
    let last_end = crate::fix::text::line_end(file, last.end_byte());
    let eol = file.style().eol;
    Some(vec![Edit::delete(start, after_eol), Edit::insert(last_end, format!("{eol}{}", &src[start..end]))])
}

fn statements(c: &Cx, model: &HandlerModel, scope: &Scope, func: Node, out: &mut Vec<Diagnostic>) {
    let src = c.src();
    let mut deferred: Vec<Node> = Vec::new();
    ast::walk(func, &mut |n| {
        if deferred.iter().any(|d| ast::contains(*d, n)) {
            return false;
        }
        match n.kind_name() {
            "call_expression" => {
                // Deferred telemetry (`after(() => reporter.reportProblem(...))`, a request
                // log) loses only itself; a deferred customer email is still the event's work.
                if let Some(name) = deferrer(n, src)
                    && let Some(arg) = ast::arguments(n).first().copied()
                    && c.contains_work(arg)
                    && best_effort::block_category(c.project, c.file, arg) != best_effort::Category::Telemetry
                {
                    deferred.push(n);
                    out.push(diag(
                        c.cx,
                        model,
                        scope,
                        n,
                        format!("work is deferred past the acknowledgement with `{name}`: if the process stops first, the work is lost and never retried"),
                        || Fix::display_only("await the work before answering", "or enqueue it durably (awaited) before answering"),
                    ));
                    return false;
                }
                if ast::callee_name(n, src).as_deref() == Some("forEach")
                    && let Some(cb) = ast::arguments(n).first().copied().map(ast::unwrap_expr)
                    && ast::is_function(cb)
                    && is_async(cb, src)
                {
                    out.push(diag(
                        c.cx,
                        model,
                        scope,
                        n,
                        "`forEach(async ...)` does not wait for its callbacks: the delivery is acknowledged while they still run, and their failures are lost".into(),
                        || for_of_fix(c.file, n, cb),
                    ));
                }
            }
            "unary_expression" if n.child(0).is_some_and(|o| text(o, src) == "void") => {
                if let Some(arg) = n.field("argument").map(ast::unwrap_expr)
                    && arg.kind_name() == "call_expression"
                    && c.promise_work(arg)
                    && !c.best_effort(arg)
                    && !sends_notification(scope)
                {
                    let fix = || {
                        if enclosing_is_async(n, src) {
                            Fix::unsafe_("await it", vec![Edit::replace(n.start_byte(), arg.start_byte(), "await ")])
                        } else {
                            Fix::display_only("await it", "the enclosing function is not async")
                        }
                    };
                    out.push(diag(
                        c.cx,
                        model,
                        scope,
                        n,
                        format!(
                            "`void {}` drops the promise: the work may not finish before the delivery is acknowledged",
                            ast::callee_path(arg, src).join(".")
                        ),
                        fix,
                    ));
                }
            }
            "expression_statement" => {
                if let Some(call) = dropped_promise(c, scope, n) {
                    let fix = || {
                        if enclosing_is_async(n, src) {
                            Fix::unsafe_("add `await`", vec![Edit::insert(call.start_byte(), "await ")])
                        } else {
                            Fix::display_only("await it", "the enclosing function is not async")
                        }
                    };
                    out.push(diag(
                        c.cx,
                        model,
                        scope,
                        call,
                        format!("the promise of `{}` is not awaited: the delivery can be acknowledged before it finishes, and its failure is lost", ast::callee_path(call, src).join(".")),
                        fix,
                    ));
                }
            }
            _ => {}
        }
        true
    });
}

/// The call of an expression statement whose promise of work is dropped: not awaited, not
/// answering or acking in its continuation, not best-effort.
fn dropped_promise<'t>(c: &Cx, scope: &Scope, stmt: Node<'t>) -> Option<Node<'t>> {
    let src = c.src();
    let call = stmt.named_child(0).filter(|e| e.kind_name() == "call_expression")?;
    (!ast::is_awaited_call(call)
        && ast::callee_name(call, src).as_deref() != Some("forEach")
        // A chain that answers (or acks its message) in its continuation
        // acknowledges after the work.
        && responses::responses_in(call, src, &[], false).is_empty()
        && !acks_in_continuation(call, src)
        && !settles_its_promise(call, src)
        && c.promise_work(call)
        && !c.best_effort(call)
        && !sends_notification(scope))
    .then_some(call)
}

/// A call inside a `new Promise((resolve, reject) => ...)` executor whose callbacks settle that
/// promise (`ffmpeg(input).on("end", resolve).on("error", reject).save(out)`): it finishes when
/// the promise does, and whoever awaits the promise awaits it.
fn settles_its_promise(call: Node, src: &str) -> bool {
    let Some(executor) = ast::enclosing_function(call) else { return false };
    let is_executor = ast::parent(executor).and_then(ast::parent).is_some_and(|n| {
        n.kind_name() == "new_expression" && n.field("constructor").is_some_and(|c| text(c, src) == "Promise")
    });
    is_executor && ast::parameter_names(executor, src).iter().any(|p| ast::mentions_identifier(call, src, p))
}

/// `items.forEach(async (item) => { ... })` → `for (const item of items) { ... }`.
fn for_of_fix(file: &SourceFile, call: Node, cb: Node) -> Fix {
    let src = &file.text;
    let display = |why: &str| Fix::display_only("use `for (const item of items)` with await", why);
    let mut stmt_node = call;
    if let Some(p) = ast::parent(call).filter(|p| p.kind_name() == "await_expression") {
        stmt_node = p;
    }
    let Some(stmt) = ast::parent(stmt_node).filter(|p| p.kind_name() == "expression_statement") else {
        return display("the forEach is part of a larger expression");
    };
    let Some(body) = cb.field("body").filter(|b| b.kind_name() == "statement_block") else {
        return display("the callback has no block body");
    };
    let params = ast::parameter_names(cb, src);
    let Some(param) = ast::parameter(cb, 0) else {
        return display("the callback takes no item");
    };
    if params.is_empty() || ast::parameter(cb, 1).is_some() {
        return display("the callback also takes the index");
    }
    let mut returns = false;
    ast::walk(body, &mut |n| {
        if n != body && ast::is_function(n) {
            return false;
        }
        if n.kind_name() == "return_statement" || (n.kind_name() == "this" && cb.kind_name() != "arrow_function") {
            returns = true;
        }
        true
    });
    if returns {
        return display("the callback returns early or uses `this`");
    }
    if !enclosing_is_async(call, src) {
        return display("the enclosing function is not async");
    }
    let Some(object) = call.field("function").and_then(|f| f.field("object")) else {
        return display("no iterable");
    };
    if text(object, src).to_ascii_lowercase().contains("map") {
        return display("a Map's forEach passes (value, key); iterate `.values()` or `.entries()` by hand");
    }
    let param_text = text(param, src);
    let close_end = stmt.end_byte();
    Fix::unsafe_(
        "replace forEach(async ...) with for...of",
        vec![
            Edit::replace(
                stmt.start_byte(),
                body.start_byte(),
                format!("for (const {param_text} of {}) ", text(object, src)),
            ),
            Edit::delete(body.end_byte(), close_end),
        ],
    )
}
