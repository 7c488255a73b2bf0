//! response-missing

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::{Edit, Fix};
use crate::model::ast::{self, text};
use crate::model::responses;
use crate::model::{Framework, Handler};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A path through an HTTP handler that ends without answering: a bare `return` (or falling off
the end of the function) in a Next.js pages-router, Express or Fastify handler that answers
through `res`/`reply`, in a Koa handler that sets neither `ctx.status` nor `ctx.body` (Koa then
answers 404), or in a handler that answers by returning a `Response` (Next.js app
router, SvelteKit, Deno/Supabase `serve`, Hono).

## Why retries break it
With `res`/`reply`, nothing is sent: the connection hangs until the provider's timeout
(Stripe, Shopify: a few seconds), and the provider retries a delivery that was in fact
handled, often many times. In the app router (and Hono, SvelteKit) a handler that returns
nothing is an error, answered 500, so the provider retries it too.

NestJS controllers and h3/Nuxt `defineEventHandler`s are never reported: there, returning a
value (or nothing) answers 2xx (Nest: 201 for `@Post` or the `@HttpCode`; h3: 200, or 204 for
nothing), and a thrown `HttpException` / `createError` answers its status.

A function handed to a project factory that returns the route's real handler
(`app.post(path, makeWebhookRoute("refund", applyRefund))`, where `makeWebhookRoute` returns a
closure that answers) is not reported: the closure answers, the function only does the work.
A path counts as answered when it sends a response (`res.json()`, `res.sendStatus()`,
`reply.send()`, `res.redirect()`, `res.end()`), calls `next(...)`, hands `res` to another
function (which is assumed to answer), returns a value, or throws.

## Bad
```ts
if (event.type !== "checkout.session.completed") return;
```

## Good
```ts
if (event.type !== "checkout.session.completed") return res.status(200).end();
```

## Fix (unsafe: review the status)
Replaces a bare `return` with an explicit answer in the framework's style: 200 by default
(bare returns usually follow "already processed" or "not an event we handle" branches, which
must be acknowledged), 500 inside a `catch` or when the branch tests an error (the delivery
must be retried), 400 when it tests a missing signature or body. A handler that falls off its
end gets `return res.status(200).end()` appended, or a 500 answer at the end of a trailing
`catch` that does not answer; when a `res`-style handler sends a response without returning
somewhere, the appended answer could be a second response, so the fix is display-only.
"#;

pub const RULE: Rule = Rule {
    id: "response-missing",
    summary: "a path through the handler ends without a response: the request hangs (or answers 500) and the provider retries it",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Answers through `res` / `reply`.
    Object,
    /// Answers by returning a `Response`.
    Returns,
}

struct Cx<'a> {
    project: &'a crate::project::Project,
    file: &'a std::sync::Arc<crate::source::SourceFile>,
    src: &'a str,
    names: Vec<&'a str>,
    res: &'a str,
    mode: Mode,
    /// Count a bare `return` as leaving the handler (for "falls off the end": bare returns are
    /// reported on their own).
    bare_ok: bool,
}

fn mode(h: &Handler) -> Option<Mode> {
    match h.framework {
        Framework::Express | Framework::NextPagesApi | Framework::Fastify | Framework::Koa if h.response.is_some() => {
            Some(Mode::Object)
        }
        Framework::NextAppRouter | Framework::SvelteKit | Framework::DenoServe | Framework::Hono => Some(Mode::Returns),
        _ => None,
    }
}

impl Cx<'_> {
    /// Whether an expression-level subtree answers (Object mode).
    fn sends(&self, node: Node) -> bool {
        if !responses::responses_in(node, self.src, &self.names, false).is_empty() {
            return true;
        }
        let mut found = false;
        ast::walk(node, &mut |n| {
            if found {
                return false;
            }
            if n.kind_name() == "call_expression" {
                let path = ast::callee_path_shared(n, self.src);
                if path.len() == 1 && path[0] == "next" {
                    found = true;
                }
                if path.first().is_some_and(|r| r == self.res)
                    && path
                        .last()
                        .is_some_and(|l| matches!(l.as_str(), "render" | "download" | "sendFile" | "writeHead"))
                {
                    found = true;
                }
                // `res` handed to a helper that answers, or `stream.pipe(res)`; a project helper
                // that only listens on it (`res.once("finish", ...)`) answers nothing.
                if let Some(at) = ast::arguments(n)
                    .iter()
                    .position(|a| a.kind_name() == "identifier" && text(*a, self.src) == self.res)
                    && !self.helper_only_listens(n, at)
                {
                    found = true;
                }
            }
            true
        });
        found
    }

    /// `call` resolves to a project function whose parameter at `at` is never used to answer:
    /// no send-like method is called on it and it is not handed on.
    fn helper_only_listens(&self, call: Node, at: usize) -> bool {
        let Some(def) = crate::model::reach::resolve_call(self.project, self.file, call) else { return false };
        let Some(helper) = def.node() else { return false };
        let src = def.file.text.as_str();
        let Some(param) = ast::parameter(helper, at).filter(|p| p.kind_name() == "identifier") else { return false };
        let name = text(param, src);
        let Some(body) = helper.field("body") else { return false };
        !ast::calls_in(body, true).into_iter().any(|c| {
            let path = ast::callee_path_shared(c, src);
            let answers_on_it = path.first().is_some_and(|r| r == name)
                && path.last().is_some_and(|l| {
                    matches!(
                        l.as_str(),
                        "json"
                            | "send"
                            | "end"
                            | "status"
                            | "sendStatus"
                            | "redirect"
                            | "render"
                            | "writeHead"
                            | "sendFile"
                            | "download"
                            | "write"
                            | "code"
                    )
                });
            let handed_on = ast::arguments(c).iter().any(|a| a.kind_name() == "identifier" && text(*a, src) == name);
            answers_on_it || handed_on
        })
    }

    fn answers_list(&self, stmts: &[Node]) -> bool {
        stmts.iter().any(|s| self.answers(*s))
    }

    /// Whether every path through `stmt` answers.
    fn answers(&self, stmt: Node) -> bool {
        match stmt.kind_name() {
            "return_statement" => self.bare_ok || stmt.named_child(0).is_some_and(|c| c.kind_name() != "comment"),
            "throw_statement" => true,
            "statement_block" => self.answers_list(&ast::named_children(stmt)),
            "if_statement" => {
                let cons = stmt.field("consequence");
                let alt = stmt
                    .field("alternative")
                    .and_then(|a| ast::named_children(a).into_iter().find(|c| c.kind_name() != "comment"));
                // `if (!res.headersSent) res.status(200)...`: the other path has answered already
                let unless_sent = || {
                    stmt.field("condition").is_some_and(|c| {
                        let t = text(c, self.src);
                        t.contains('!') && (t.contains(".headersSent") || t.contains(".writableEnded"))
                    })
                };
                match (cons, alt) {
                    (Some(c), Some(a)) => self.answers(c) && self.answers(a),
                    (Some(c), None) => unless_sent() && self.answers(c),
                    _ => false,
                }
            }
            "try_statement" => {
                let body = stmt.field("body").is_some_and(|b| self.answers(b));
                let handler = stmt.field("handler").and_then(|h| h.field("body")).map(|b| self.answers(b));
                let finalizer = stmt.field("finalizer").and_then(|f| f.field("body")).is_some_and(|b| self.answers(b));
                // `try { res.status(500).json(..) } catch { log }`: the catch is for the answer itself
                let only_answers = || {
                    stmt.field("body").is_some_and(|b| {
                        let stmts: Vec<Node> =
                            ast::named_children(b).into_iter().filter(|s| s.kind_name() != "comment").collect();
                        !stmts.is_empty() && stmts.iter().all(|s| self.answers(*s))
                    })
                };
                finalizer || (body && (handler.unwrap_or(true) || only_answers()))
            }
            "switch_statement" => {
                let Some(body) = stmt.field("body") else { return false };
                let cases = ast::named_children(body);
                let has_default = cases.iter().any(|c| c.kind_name() == "switch_default");
                has_default
                    && cases.iter().all(|c| {
                        let stmts: Vec<Node> = ast::named_children(*c)
                            .into_iter()
                            .filter(|s| Some(*s) != c.field("value") && s.kind_name() != "comment")
                            .collect();
                        stmts.is_empty() || self.answers_list(&stmts)
                    })
            }
            "expression_statement" | "lexical_declaration" | "variable_declaration" if self.mode == Mode::Object => {
                self.sends(stmt)
            }
            _ => false,
        }
    }

    /// Whether an answering statement precedes `node` on its path within `body`.
    fn answered_before(&self, node: Node, body: Node) -> bool {
        let mut cur = node;
        while cur != body {
            let Some(parent) = ast::parent(cur) else { return false };
            // `if (!(await handOff(req, res))) return;`: the helper answered.
            if parent.kind_name() == "if_statement"
                && self.mode == Mode::Object
                && parent.field("condition").is_some_and(|c| self.sends(c))
            {
                return true;
            }
            if matches!(parent.kind_name(), "statement_block" | "switch_case" | "switch_default") {
                let mut prev = cur.prev_named_sibling();
                while let Some(p) = prev {
                    if self.answers(p) {
                        return true;
                    }
                    prev = p.prev_named_sibling();
                }
            }
            cur = parent;
        }
        false
    }
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        let handler = &model.handler;
        let Some(mode) = mode(handler) else { continue };
        if handler.answered_by_factory {
            continue;
        }
        let Some(scope) = model.scopes.first() else { continue };
        let Some(func) = scope.node() else { continue };
        let Some(body) = func.field("body").filter(|b| b.kind_name() == "statement_block") else {
            continue;
        };
        let file = scope.file();
        let src = &file.text;
        let c = Cx {
            project: cx.project,
            file,
            src,
            names: responses::handler_names(handler),
            res: handler.response.as_deref().unwrap_or(""),
            mode,
            bare_ok: false,
        };
        let outcome = if handler.framework == Framework::Koa {
            "Koa answers 404 when nothing sets `ctx.status`/`ctx.body`, and the provider retries a delivery that was handled"
        } else if mode == Mode::Object {
            "the request hangs until the provider times out and redelivers it, even when the work is done"
        } else {
            "the framework answers 500 and the provider retries"
        };
        // Bare returns.
        let mut returns = Vec::new();
        ast::walk(body, &mut |n| {
            if n != body && ast::is_function(n) {
                return false;
            }
            if n.kind_name() == "return_statement" && n.named_child(0).is_none_or(|c| c.kind_name() == "comment") {
                returns.push(n);
            }
            true
        });
        // Fastify: `return reply.code(201)` (or `return reply`) from an async handler means "I
        // will send later": nothing is sent and the request hangs.
        let mut unsent = Vec::new();
        if handler.framework == Framework::Fastify && func.child(0).is_some_and(|k| text(k, src) == "async") {
            ast::walk(body, &mut |n| {
                if n != body && ast::is_function(n) {
                    return false;
                }
                if n.kind_name() == "return_statement"
                    && let Some(v) = n.named_child(0).map(ast::unwrap_expr)
                    && unsent_reply(v, c.res, src)
                {
                    unsent.push((n, v));
                }
                true
            });
        }
        for (r, v) in unsent {
            if c.answered_before(r, body) {
                continue;
            }
            let fix = || {
                Fix::unsafe_("send the reply", vec![Edit::insert(v.end_byte(), ".send()")])
                    .with_note("the status already set is kept; the body is empty")
            };
            out.push(
                Diagnostic::new(RULE.id, file, r, format!("returns the reply without sending it: Fastify waits for a `send()` that never comes, so {outcome}"))
                    .in_handler(model, scope)
                    .help("call `.send()` on the reply (or return a value) on every path")
                    .with_fix(cx, fix),
            );
        }
        for r in returns {
            if c.answered_before(r, body) {
                continue;
            }
            let fix = || {
                let status = status_for(r, func, src);
                // `if (x) return;` → `if (x) { ctx.status = 200; return; }` when the answer is two statements
                let respond = handler.respond(status).map(|stmt| {
                    let single = r
                        .parent()
                        .is_some_and(|p| matches!(p.kind_name(), "statement_block" | "switch_case" | "switch_default"));
                    if single || !stmt.contains("; return") { stmt } else { format!("{{ {stmt} }}") }
                });
                match respond {
                    Some(stmt) => Fix::unsafe_(
                        format!("answer {status} explicitly"),
                        vec![Edit::replace(r.start_byte(), r.end_byte(), stmt)],
                    )
                    .with_note(format!(
                        "{status} chosen from the branch; check it is the status this path should answer"
                    )),
                    None => Fix::display_only("answer explicitly", "no response object is in scope"),
                }
            };
            out.push(
                Diagnostic::new(RULE.id, file, r, format!("returns without a response: {outcome}"))
                    .in_handler(model, scope)
                    .help("answer on every path: 2xx for handled or ignored events, 5xx for failures that must be retried")
                    .with_fix(cx, fix),
            );
        }
        // Falling off the end.
        let stmts: Vec<Node> = ast::named_children(body).into_iter().filter(|s| s.kind_name() != "comment").collect();
        let ends = Cx { bare_ok: true, names: c.names.clone(), ..c };
        if ends.answers_list(&stmts) {
            continue;
        }
        let c = Cx { bare_ok: false, ..ends };
        let Some(last) = stmts.last().copied() else { continue };
        let fix = || fall_off_fix(&c, handler, file, body, last);
        out.push(
            Diagnostic::new(
                RULE.id,
                file,
                last,
                format!("the handler can reach its end without a response: {outcome}"),
            )
            .in_handler(model, scope)
            .help("answer on every path: 2xx for handled or ignored events, 5xx for failures that must be retried")
            .with_fix(cx, fix),
        );
    }
}

/// `reply`, `reply.code(201)`, `reply.status(200).header(...)`: the reply, configured but not sent.
fn unsent_reply(v: Node, res: &str, src: &str) -> bool {
    if res.is_empty() {
        return false;
    }
    let mut cur = v;
    loop {
        match cur.kind_name() {
            "identifier" => return text(cur, src) == res,
            "call_expression" => {
                let Some(f) = cur.field("function").filter(|f| f.kind_name() == "member_expression") else {
                    return false;
                };
                let prop = f.field("property").map_or("", |p| text(p, src));
                if !matches!(prop, "code" | "status" | "header" | "headers" | "type") {
                    return false;
                }
                let Some(o) = f.field("object") else { return false };
                cur = ast::unwrap_expr(o);
            }
            _ => return false,
        }
    }
}

/// 500 in a catch or an error branch, 400 for a missing signature/body, 200 otherwise.
fn status_for(r: Node, func: Node, src: &str) -> u16 {
    if responses::in_catch(r, func).is_some() {
        return 500;
    }
    let literals = crate::regex!(r#"'[^']*'|"[^"]*"|`[^`]*`"#);
    let missing_body =
        crate::regex!(r"!\s*[\w.]*(body|payload)\b\s*(\)|&|\||$)|(body|payload)\s*={2,3}\s*(null|undefined)");
    for (cond, positive) in responses::branch_conditions(r, func) {
        // String literals name events (`"invoice.payment_failed"`), not failures of this code.
        let code = literals.replace_all(text(cond, src), "").to_ascii_lowercase();
        let t = text(cond, src).to_ascii_lowercase();
        if positive && (code.contains("err") || code.contains("fail")) {
            return 500;
        }
        // A missing body, not a test of a field in it (`req.body.type !== "x"`).
        let missing_body = missing_body.is_match(&code);
        if positive && (t.contains("sig") || t.contains("secret") || missing_body) {
            return 400;
        }
    }
    200
}

fn fall_off_fix(c: &Cx, handler: &Handler, file: &crate::source::SourceFile, body: Node, last: Node) -> Fix {
    let style = file.style();
    // A trailing try whose catch does not answer: answer 500 there.
    if last.kind_name() == "try_statement"
        && let Some(catch_body) = last.field("handler").and_then(|h| h.field("body"))
        && !c.answers(catch_body)
        && last.field("body").is_some_and(|b| c.answers(b))
    {
        return match (handler.respond(500), ast::named_children(catch_body).last()) {
            (Some(stmt), Some(end)) => {
                let indent = file.indent_at(end.start_byte()).to_string();
                Fix::unsafe_(
                    "answer 500 when the catch does not rethrow",
                    vec![Edit::insert(end.end_byte(), format!("{}{indent}{stmt}", style.eol))],
                )
            }
            _ => Fix::display_only(
                "answer 500 in the catch",
                "the catch block is empty or no response object is in scope",
            ),
        };
    }
    if c.mode == Mode::Object {
        let unreturned = responses::responses_in(body, c.src, &c.names, true)
            .iter()
            .any(|r| ast::ancestors(r.node).all(|a| a.kind_name() != "return_statement"));
        if unreturned && handler.framework == Framework::Koa {
            return Fix::display_only(
                "answer on the path that reaches the end",
                "set `ctx.status` on that path: a status appended at the end would override one set earlier",
            );
        }
        if unreturned {
            return Fix::display_only(
                "answer on the path that reaches the end",
                "the handler sends responses without returning: an appended answer could send twice",
            );
        }
    }
    match handler.respond(200) {
        Some(stmt) => {
            let indent = file.indent_at(last.start_byte()).to_string();
            Fix::unsafe_(
                "answer 200 at the end of the handler",
                vec![Edit::insert(last.end_byte(), format!("{}{indent}{stmt}", style.eol))],
            )
            .with_note("200 acknowledges events the handler ignores; check no failure path reaches the end")
        }
        None => Fix::display_only("answer at the end of the handler", "no response object is in scope"),
    }
}
