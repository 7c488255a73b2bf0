//! Where an HTTP handler answers, and with which status, per framework: Express / Next pages
//! (`res.status(n).json()`, `res.sendStatus(n)`, `res.json()`), Fastify (`reply.code(n).send()`),
//! Koa (`ctx.status = n`, `ctx.body = x`), Hono (`c.json(x, n)`), fetch-style
//! (`new Response(body, { status })`, `Response.json`, `NextResponse.json`, Remix/SvelteKit
//! `json(x, { status })`), NestJS (thrown `HttpException`s, `@HttpCode`) and h3
//! (`setResponseStatus(event, n)`, `sendNoContent(event)`, `throw createError({ statusCode })`;
//! a returned value is not recognised as a response).

use super::ast::{self, text};
use super::queries;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

/// Names a response object usually has when the handler's own name is not known (callees).
const RES_NAMES: &[&str] = &["res", "response", "resp", "reply", "rep"];
const CTX_NAMES: &[&str] = &["c", "ctx", "context"];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Style {
    /// `res.status(n).json(x)`, `reply.code(n).send()`, `res.sendStatus(n)`.
    Chain,
    /// Hono `c.json(x, n)`.
    Hono,
    /// Koa `ctx.status = n` / `ctx.body = x`.
    Koa,
    /// `new Response(body, init)`, `Response.json(x, init)`, `json(x, init)`.
    Fetch,
    /// NestJS `throw new BadRequestException()`.
    NestThrow,
    /// A redirect: never an error, never a 2xx.
    Redirect,
    /// h3 / Nest: the handler's `return` (a value, or nothing) is the answer; the node is the
    /// return statement.
    Returned,
}

#[derive(Clone, Copy, Debug)]
pub struct Response<'t> {
    /// The answering node: the outermost call of the chain, the `new` expression, the Koa
    /// assignment, or the throw statement.
    pub node: Node<'t>,
    /// The node that holds the status when one is written.
    pub status_node: Option<Node<'t>>,
    /// The status; None when it is not a literal or a known constant.
    pub status: Option<u16>,
    pub style: Style,
}

impl Response<'_> {
    pub fn is_2xx(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    pub fn is_error(&self) -> bool {
        self.status.is_some_and(|s| s >= 400)
    }

    pub fn is_5xx(&self) -> bool {
        self.status.is_some_and(|s| s >= 500)
    }

    /// The body argument, when the response carries one.
    pub fn body(&self) -> Option<Node<'_>> {
        match self.style {
            Style::Chain | Style::Hono | Style::Fetch if self.node.kind_name() != "assignment_expression" => {
                let args = ast::arguments(self.node);
                let args = if args.is_empty() {
                    self.node.field("arguments").map(ast::named_children).unwrap_or_default()
                } else {
                    args
                };
                args.first().copied().map(ast::unwrap_expr)
            }
            Style::Koa => self.node.field("right"),
            Style::Returned => self.node.named_child(0).map(ast::unwrap_expr),
            _ => None,
        }
    }
}

/// Statuses written as constants: `HttpStatus.OK`, `StatusCodes.BAD_REQUEST`, `status.OK`.
fn named_status(name: &str) -> Option<u16> {
    Some(match name {
        "OK" => 200,
        "CREATED" => 201,
        "ACCEPTED" => 202,
        "NO_CONTENT" => 204,
        "BAD_REQUEST" => 400,
        "UNAUTHORIZED" => 401,
        "FORBIDDEN" => 403,
        "NOT_FOUND" => 404,
        "CONFLICT" => 409,
        "GONE" => 410,
        "UNPROCESSABLE_ENTITY" => 422,
        "TOO_MANY_REQUESTS" => 429,
        "INTERNAL_SERVER_ERROR" => 500,
        "NOT_IMPLEMENTED" => 501,
        "BAD_GATEWAY" => 502,
        "SERVICE_UNAVAILABLE" => 503,
        "GATEWAY_TIMEOUT" => 504,
        _ => return None,
    })
}

/// The numeric value of a status expression.
pub fn status_value(node: Node, src: &str) -> Option<u16> {
    let node = ast::unwrap_expr(node);
    match node.kind_name() {
        "number" => text(node, src).parse().ok(),
        "member_expression" => {
            let prop = node.field("property")?;
            named_status(text(prop, src))
        }
        // uWebSockets.js `res.writeStatus("404 Not Found")`
        "string" => {
            let digits: String = ast::string_value(node, src)?.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok().filter(|s| (100..600).contains(s))
        }
        _ => None,
    }
}

/// NestJS exception classes and their statuses.
fn nest_exception(name: &str) -> Option<u16> {
    Some(match name {
        "BadRequestException" => 400,
        "UnauthorizedException" => 401,
        "ForbiddenException" => 403,
        "NotFoundException" => 404,
        "ConflictException" => 409,
        "GoneException" => 410,
        "PayloadTooLargeException" => 413,
        "UnprocessableEntityException" => 422,
        "InternalServerErrorException" => 500,
        "NotImplementedException" => 501,
        "BadGatewayException" => 502,
        "ServiceUnavailableException" => 503,
        "GatewayTimeoutException" => 504,
        _ => return None,
    })
}

/// `@HttpCode(n)` on a Nest method, else 201 for `@Post` (Nest's default) and 200 otherwise.
pub fn nest_default_status(method: Node, src: &str) -> u16 {
    let mut decorators: Vec<Node> =
        ast::named_children(method).into_iter().filter(|c| c.kind_name() == "decorator").collect();
    let mut prev = method.prev_named_sibling();
    while let Some(p) = prev.filter(|p| p.kind_name() == "decorator") {
        decorators.push(p);
        prev = p.prev_named_sibling();
    }
    for d in &decorators {
        let t = text(*d, src);
        if let Some(rest) = t.strip_prefix("@HttpCode(") {
            let inner = rest.trim_end_matches(')').trim();
            if let Ok(n) = inner.parse() {
                return n;
            }
            if let Some(n) = inner.rsplit('.').next().and_then(named_status) {
                return n;
            }
        }
    }
    if decorators.iter().any(|d| text(*d, src).starts_with("@Post")) { 201 } else { 200 }
}

/// The links of a call chain, innermost first: `res.status(400).json(x)` → root `res`,
/// [("status", call), ("json", call)].
pub fn chain(call: Node) -> Option<(Node, Vec<(Node, Node)>)> {
    let mut links = Vec::new();
    let mut cur = call;
    loop {
        match cur.kind_name() {
            "call_expression" => {
                let f = cur.field("function")?;
                if f.kind_name() != "member_expression" {
                    return None;
                }
                let prop = f.field("property")?;
                links.push((prop, cur));
                cur = ast::unwrap_expr(f.field("object")?);
            }
            "identifier" | "this" => break,
            "member_expression" => {
                // `this.res`, `ctx.res`: the root is the whole member expression.
                break;
            }
            _ => return None,
        }
    }
    links.reverse();
    Some((cur, links))
}

fn root_name<'a>(root: Node, src: &'a str) -> &'a str {
    match root.kind_name() {
        "member_expression" => root.field("property").map_or("", |p| text(p, src)),
        _ => text(root, src),
    }
}

const CHAIN_MIDDLE: &[&str] = &[
    "status",
    "code",
    "set",
    "header",
    "headers",
    "type",
    "setHeader",
    "cookie",
    "clearCookie",
    "append",
    "vary",
    // uWebSockets.js `res.writeStatus("200 OK").writeHeader(k, v).end()`; Node's `writeHead` returns `res` too
    "writeStatus",
    "writeHeader",
    "writeHead",
];
/// Chain links that set the status.
const CHAIN_STATUS: &[&str] = &["status", "code", "writeStatus", "writeHead"];
const CHAIN_END: &[&str] = &["json", "send", "end", "sendStatus", "jsonp", "redirect", "callNotFound"];

/// Recognises one answering node. `names` are the handler's own request/response names.
pub fn response_at<'t>(node: Node<'t>, src: &str, names: &[&str]) -> Option<Response<'t>> {
    match node.kind_name() {
        "call_expression" => call_response(node, src, names),
        "new_expression" => {
            let ctor = node.field("constructor")?;
            if !matches!(text(ctor, src), "Response" | "NextResponse") {
                return None;
            }
            let args = node.field("arguments").map(ast::named_children).unwrap_or_default();
            Some(fetch_response(node, args.get(1).copied(), src))
        }
        "assignment_expression" => {
            let left = node.field("left")?;
            let path = ast::member_path(left, src);
            let (root, field) = match path.as_slice() {
                [root, field] => (root, field),
                [root, mid, field] if mid == "response" => (root, field),
                _ => return None,
            };
            if !(CTX_NAMES.contains(&root.as_str()) || names.contains(&root.as_str())) {
                return None;
            }
            match field.as_str() {
                "status" => {
                    let right = node.field("right")?;
                    Some(Response {
                        node,
                        status_node: Some(right),
                        status: status_value(right, src),
                        style: Style::Koa,
                    })
                }
                "body" => {
                    // The status an earlier `ctx.status = n` in the same block set.
                    let stmt = ast::enclosing_statement(node)?;
                    let mut prev = stmt.prev_named_sibling();
                    while let Some(p) = prev {
                        let t = text(p, src);
                        if t.starts_with(&format!("{root}.status")) && t.contains('=') {
                            return None;
                        }
                        prev = p.prev_named_sibling();
                    }
                    Some(Response { node, status_node: None, status: Some(200), style: Style::Koa })
                }
                _ => None,
            }
        }
        "throw_statement" => {
            let value = ast::unwrap_expr(node.named_child(0)?);
            // http-errors `createError(400)`, SvelteKit `error(400, ...)`
            if value.kind_name() == "call_expression" {
                let name = ast::callee_name(value, src)?;
                if !matches!(name.as_str(), "createError" | "createHttpError" | "error" | "httpError") {
                    return None;
                }
                let s = ast::arguments(value).first().copied()?;
                // h3 `createError({ statusCode: 400 })`
                let s = match ast::unwrap_expr(s) {
                    o if o.kind_name() == "object" => {
                        ast::object_property(o, "statusCode", src).or_else(|| ast::object_property(o, "status", src))?
                    }
                    _ => s,
                };
                let status = status_value(s, src)?;
                return Some(Response { node, status_node: Some(s), status: Some(status), style: Style::NestThrow });
            }
            if value.kind_name() != "new_expression" {
                return None;
            }
            let ctor = text(value.field("constructor")?, src);
            let args = value.field("arguments").map(ast::named_children).unwrap_or_default();
            // Hono `new HTTPException(401, { message })`
            if ctor == "HTTPException" {
                let s = args.first().copied();
                return Some(Response {
                    node,
                    status_node: s,
                    status: s.and_then(|s| status_value(s, src)),
                    style: Style::NestThrow,
                });
            }
            if ctor == "HttpException" {
                let s = args.get(1).copied();
                return Some(Response {
                    node,
                    status_node: s,
                    status: s.and_then(|s| status_value(s, src)),
                    style: Style::NestThrow,
                });
            }
            let status = nest_exception(ctor)?;
            Some(Response { node, status_node: None, status: Some(status), style: Style::NestThrow })
        }
        _ => None,
    }
}

fn fetch_response<'t>(node: Node<'t>, init: Option<Node<'t>>, src: &str) -> Response<'t> {
    let init = init.map(ast::unwrap_expr);
    let status_node = match init {
        Some(i) if i.kind_name() == "object" => ast::object_property(i, "status", src),
        Some(i) => Some(i),
        None => None,
    };
    let status = match (init, status_node) {
        (_, Some(s)) => status_value(s, src),
        (Some(i), None) if i.kind_name() != "object" => None,
        _ => Some(200),
    };
    Response { node, status_node, status, style: Style::Fetch }
}

fn call_response<'t>(call: Node<'t>, src: &str, names: &[&str]) -> Option<Response<'t>> {
    let path = ast::callee_path_shared(call, src);
    let args = ast::arguments(call);
    // Fetch-style statics and helpers.
    match path.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["Response" | "NextResponse", "json"] => return Some(fetch_response(call, args.get(1).copied(), src)),
        ["Response" | "NextResponse", "redirect"] => {
            return Some(Response { node: call, status_node: None, status: None, style: Style::Redirect });
        }
        ["json"]
            if !args.is_empty()
                && (src.contains("@remix-run") || src.contains("@sveltejs/kit") || src.contains("react-router")) =>
        {
            return Some(fetch_response(call, args.get(1).copied(), src));
        }
        _ => {}
    }
    // h3: `setResponseStatus(event, 409)` (the status of what the handler then returns),
    // `sendNoContent(event, 204)`
    if let ([f], [e, rest @ ..]) = (&path[..], args.as_slice())
        && matches!(f.as_str(), "setResponseStatus" | "sendNoContent")
        && e.kind_name() == "identifier"
        && (names.contains(&text(*e, src)) || text(*e, src) == "event")
    {
        let s = rest.first().copied();
        let status = match s {
            Some(s) => status_value(s, src),
            None if f == "sendNoContent" => Some(204),
            None => None,
        };
        return Some(Response { node: call, status_node: s, status, style: Style::Koa });
    }
    let (root, links) = chain(call)?;
    let name = root_name(root, src);
    let (last_prop, _) = *links.last()?;
    let last = text(last_prop, src);
    // Hono: c.json(x, n), c.text(x), c.body(null, 204)
    if (CTX_NAMES.contains(&name) || names.contains(&name))
        && links.len() == 1
        && matches!(last, "json" | "text" | "body" | "html" | "newResponse" | "redirect")
        && !args.is_empty()
        && name != "res"
    {
        if last == "redirect" {
            return Some(Response { node: call, status_node: None, status: None, style: Style::Redirect });
        }
        let s = args.get(1).copied();
        let status = match s {
            Some(s) => status_value(s, src),
            None => Some(200),
        };
        return Some(Response { node: call, status_node: s, status, style: Style::Hono });
    }
    // Koa: ctx.throw(400, ...)
    if CTX_NAMES.contains(&name) && links.len() == 1 && last == "throw" {
        let s = args.first().copied();
        return Some(Response {
            node: call,
            status_node: s,
            status: s.and_then(|s| status_value(s, src)),
            style: Style::Chain,
        });
    }
    if !(RES_NAMES.contains(&name) || names.contains(&name)) || !CHAIN_END.contains(&last) {
        return None;
    }
    let mut status_node = None;
    for (prop, link) in &links[..links.len() - 1] {
        let p = text(*prop, src);
        if !CHAIN_MIDDLE.contains(&p) {
            return None;
        }
        if CHAIN_STATUS.contains(&p) {
            status_node = ast::arguments(*link).first().copied();
        }
    }
    match last {
        "redirect" => return Some(Response { node: call, status_node: None, status: None, style: Style::Redirect }),
        "sendStatus" => status_node = args.first().copied(),
        // Fastify runs its not-found handler, which answers 404.
        "callNotFound" => {
            return Some(Response { node: call, status_node: None, status: Some(404), style: Style::Chain });
        }
        // A fetch `response.json()` read has no argument and no status.
        "json" if args.is_empty() && status_node.is_none() => return None,
        _ => {}
    }
    let status = match status_node {
        Some(s) => status_value(s, src),
        None => Some(200),
    };
    Some(Response { node: call, status_node, status, style: Style::Chain })
}

/// h3 and Nest answer with what the handler's own function returns: a `return` that is not
/// itself a recognised response answers `default` (h3 200, Nest `@HttpCode` / 201 for `@Post`).
/// Skipped when a `setResponseStatus(event, n)` precedes it in its block (that call is the
/// answer). A returned call or variable in h3 may be a `Response` or `sendRedirect(...)`: its
/// status is unknown.
pub fn returned_values<'t>(func: Node<'t>, src: &str, names: &[&str], nest: bool) -> Vec<Response<'t>> {
    let default = if nest { nest_default_status(func, src) } else { 200 };
    let mut out = Vec::new();
    for located in queries::RESPONSES.located(func, src, climb) {
        let ret = located.node;
        if located.capture != "return" || located.function != Some(func) {
            continue;
        }
        let value = ret.named_child(0).filter(|v| v.kind_name() != "comment").map(ast::unwrap_expr);
        if value.is_some_and(|v| !responses_in(v, src, names, false).is_empty()) {
            continue;
        }
        let mut prev = ret.prev_named_sibling();
        let mut status_set = false;
        while let Some(p) = prev {
            if p.kind_name() == "expression_statement" && !responses_in(p, src, names, true).is_empty() {
                status_set = true;
                break;
            }
            prev = p.prev_named_sibling();
        }
        if status_set {
            continue;
        }
        let status = match value.map(|v| v.kind_name()) {
            _ if nest => Some(default),
            None => Some(204),
            Some("object" | "array" | "string" | "template_string" | "number" | "true" | "false") => Some(default),
            Some("null") => Some(204),
            // `msg.type + " is ok"`: a string built by concatenation
            Some("binary_expression") if value.is_some_and(|v| concatenates_string(v, src)) => Some(default),
            _ => None,
        };
        out.push(Response { node: ret, status_node: None, status, style: Style::Returned });
    }
    out
}

/// `a + " text"` (or `"text" + a`): a `+` with a string literal operand.
fn concatenates_string(expr: Node, src: &str) -> bool {
    expr.field("operator").is_some_and(|o| text(o, src) == "+")
        && ["left", "right"].iter().any(|side| {
            expr.child_by_field_name(side).map(ast::unwrap_expr).is_some_and(|operand| {
                matches!(operand.kind_name(), "string" | "template_string") || concatenates_string(operand, src)
            })
        })
}

/// Every response under `node`; nested functions are skipped when `same_function`.
pub fn responses_in<'t>(node: Node<'t>, src: &str, names: &[&str], same_function: bool) -> Vec<Response<'t>> {
    let mut out: Vec<Response> = Vec::new();
    for n in candidates(node, src, same_function) {
        if let Some(r) = response_at(n, src, names) {
            // Only the outermost call of a chain counts.
            if !out.iter().any(|o| ast::contains(o.node, n)) {
                out.push(r);
            }
        }
    }
    out
}

/// The nodes under `node` (inclusive) that `response_at` may recognise, in walk order; with
/// `same_function`, none inside a function nested in `node`.
fn candidates<'t>(node: Node<'t>, src: &str, same_function: bool) -> Vec<Node<'t>> {
    let range = node.byte_range();
    queries::RESPONSES
        .located(node, src, climb)
        .into_iter()
        .filter(|l| l.capture != "return")
        .filter(|l| {
            !same_function
                || l.function.is_none_or(|f| {
                    // the function is `node` or above it
                    f == node || !(range.start <= f.start_byte() && f.end_byte() <= range.end)
                })
        })
        .map(|l| l.node)
        .collect()
}

/// The candidate a capture of `transforms/responses.scm` locates.
fn climb<'t>(capture: &'static str, n: Node<'t>) -> Option<Node<'t>> {
    match capture {
        "callee_name" => queries::call_of_name(n),
        "constructor" => {
            ast::parent(n).filter(|p| p.kind_name() == "new_expression" && ast::field(p, "constructor") == Some(n))
        }
        "field" => assignment_of_field(n),
        _ => Some(n),
    }
}

/// `ctx.status = n` of a matched `status` / `body`, through the wrappers `member_path` sees through.
fn assignment_of_field(field: Node) -> Option<Node> {
    let mut left = if field.kind_name() == "string_fragment" {
        // ctx['status'] = 400
        let index = ast::parent(field).filter(|p| matches!(p.kind_name(), "string" | "template_string"))?;
        ast::parent(index)
            .filter(|p| p.kind_name() == "subscript_expression" && ast::field(p, "index") == Some(index))?
    } else {
        ast::parent(field)
            .filter(|p| p.kind_name() == "member_expression" && ast::field(p, "property") == Some(field))?
    };
    loop {
        let parent = ast::parent(left)?;
        match parent.kind_name() {
            _ if ast::wraps(parent, left) => left = parent,
            "assignment_expression" if ast::field(parent, "left") == Some(left) => return Some(parent),
            _ => return None,
        }
    }
}

/// Whether `node` is inside a `catch` clause (within `func`).
pub fn in_catch<'t>(node: Node<'t>, func: Node<'t>) -> Option<Node<'t>> {
    ast::ancestors(node).take_while(|a| *a != func).find(|a| a.kind_name() == "catch_clause")
}

/// The names a handler's own scope answers through (its request and response parameters).
pub fn handler_names(handler: &super::Handler) -> Vec<&str> {
    [handler.request.as_deref(), handler.response.as_deref()].into_iter().flatten().collect()
}

/// The conditions `node` is guarded by inside `func`, innermost first: the test of each
/// enclosing `if` with whether `node` is in its consequence (true) or its else branch (false),
/// and the value of each enclosing `case` (true).
pub fn branch_conditions<'t>(node: Node<'t>, func: Node<'t>) -> Vec<(Node<'t>, bool)> {
    let mut out = Vec::new();
    let mut child = node;
    for anc in ast::ancestors(node) {
        if anc == func {
            break;
        }
        match anc.kind_name() {
            "if_statement" => {
                if let Some(cond) = anc.field("condition") {
                    if anc.field("consequence").is_some_and(|c| ast::contains(c, child)) {
                        out.push((cond, true));
                    } else if anc.field("alternative").is_some_and(|c| ast::contains(c, child)) {
                        out.push((cond, false));
                    }
                }
            }
            "switch_case" => {
                if let Some(v) = anc.field("value") {
                    out.push((v, true));
                }
            }
            _ => {}
        }
        child = anc;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Dialect, SourceFile};
    use std::path::PathBuf;

    fn statuses(code: &str) -> Vec<(Option<u16>, Style)> {
        let f = SourceFile::new(
            PathBuf::from("a.ts"),
            code.to_string(),
            Dialect::for_path(&PathBuf::from("a.ts")).unwrap(),
        )
        .unwrap();
        responses_in(f.root(), &f.text, &[], false).iter().map(|r| (r.status, r.style)).collect()
    }

    #[test]
    fn recognises_frameworks() {
        assert_eq!(statuses("res.status(400).json({ a: 1 })"), vec![(Some(400), Style::Chain)]);
        assert_eq!(statuses("res.json({ ok: true })"), vec![(Some(200), Style::Chain)]);
        assert_eq!(statuses("res.sendStatus(500)"), vec![(Some(500), Style::Chain)]);
        assert_eq!(statuses("reply.callNotFound()"), vec![(Some(404), Style::Chain)]);
        assert_eq!(statuses("reply.code(409).send()"), vec![(Some(409), Style::Chain)]);
        assert_eq!(statuses("const d = await response.json()"), vec![]);
        assert_eq!(statuses("return c.json({ ok: 1 }, 401)"), vec![(Some(401), Style::Hono)]);
        assert_eq!(statuses("return c.text('ok')"), vec![(Some(200), Style::Hono)]);
        assert_eq!(statuses("ctx.status = 202"), vec![(Some(202), Style::Koa)]);
        assert_eq!(statuses("return new Response('x', { status: 503 })"), vec![(Some(503), Style::Fetch)]);
        assert_eq!(statuses("return NextResponse.json({ a })"), vec![(Some(200), Style::Fetch)]);
        assert_eq!(statuses("res.status(HttpStatus.CONFLICT).end()"), vec![(Some(409), Style::Chain)]);
        assert_eq!(statuses("throw new BadRequestException('x')"), vec![(Some(400), Style::NestThrow)]);
        assert_eq!(statuses("res.status(code).end()"), vec![(None, Style::Chain)]);
        assert_eq!(statuses("throw new HTTPException(401, { message: 'x' })"), vec![(Some(401), Style::NestThrow)]);
        assert_eq!(statuses("throw error(400, 'bad')"), vec![(Some(400), Style::NestThrow)]);
        assert_eq!(statuses("throw createError({ statusCode: 400 })"), vec![(Some(400), Style::NestThrow)]);
        assert_eq!(statuses("setResponseStatus(event, 409)"), vec![(Some(409), Style::Koa)]);
        assert_eq!(statuses("return sendNoContent(event)"), vec![(Some(204), Style::Koa)]);
    }

    /// Every node a walk reaches, as `responses_in` recognised them before the query located
    /// its candidates.
    fn by_walk<'t>(node: Node<'t>, src: &str, same_function: bool) -> Vec<Node<'t>> {
        let mut out: Vec<Node> = Vec::new();
        ast::walk(node, &mut |n| {
            if same_function && n != node && ast::is_function(n) {
                return false;
            }
            if response_at(n, src, &["req", "event"]).is_some() && !out.iter().any(|o| ast::contains(*o, n)) {
                out.push(n);
            }
            true
        });
        out
    }

    #[test]
    fn quoted_and_wrapped_answers() {
        for code in [
            "Response['json'](x)",
            "NextResponse[`json`](x, { status: 503 })",
            "ctx['status'] = 409",
            "(ctx.body as any) = 1",
            "(ctx.status) = 202",
            "return new Response(null, { status: 204 })",
            "return c.json({ ok: 1 }, 401)",
        ] {
            let f = SourceFile::new(PathBuf::from("a.ts"), code.to_string(), Dialect::TypeScript).unwrap();
            let found = responses_in(f.root(), &f.text, &[], false);
            assert_eq!(found.len(), 1, "{code}");
            assert_eq!(found[0].node, by_walk(f.root(), &f.text, false)[0], "{code}");
        }
    }

    /// The query's candidates find what a walk of every node found, in every function of
    /// every fixture and example, with and without nested functions.
    #[test]
    fn candidates_equal_a_walk_on_every_fixture_and_example() {
        let mut compared = 0;
        for file in crate::source::fixture_and_example_files() {
            let path = &file.path;
            let mut scopes = vec![file.root()];
            ast::walk(file.root(), &mut |n| {
                if ast::is_function(n) || n.kind_name() == "statement_block" {
                    scopes.push(n);
                }
                true
            });
            for scope in scopes {
                for same_function in [false, true] {
                    let walked: Vec<usize> = by_walk(scope, &file.text, same_function).iter().map(|n| n.id()).collect();
                    let found: Vec<usize> = responses_in(scope, &file.text, &["req", "event"], same_function)
                        .iter()
                        .map(|r| r.node.id())
                        .collect();
                    assert_eq!(found, walked, "{} at {}", path.display(), scope.start_byte());
                    compared += 1;
                }
            }
        }
        assert!(compared > 1000, "only {compared} scopes compared");
    }

    /// The `@function` pattern names every function kind of both grammars: a missing one
    /// would let `same_function` searches enter that kind of callback.
    #[test]
    fn every_function_kind_is_captured() {
        let scm = include_str!("../../transforms/responses.scm");
        for dialect in [Dialect::TypeScript, Dialect::Tsx] {
            for kind in ast::FUNCTION_KINDS {
                if dialect.language().id_for_node_kind(kind, true) != 0 {
                    assert!(scm.contains(&format!("({kind})")), "{kind}");
                }
            }
        }
    }

    fn returned(code: &str, nest: bool) -> Vec<Option<u16>> {
        let f = SourceFile::new(
            PathBuf::from("a.ts"),
            code.to_string(),
            Dialect::for_path(&PathBuf::from("a.ts")).unwrap(),
        )
        .unwrap();
        let func = ast::descendants_of_kind(f.root(), if nest { "method_definition" } else { "arrow_function" })[0];
        returned_values(func, &f.text, &["event"], nest).iter().map(|r| r.status).collect()
    }

    #[test]
    fn returned_values_are_answers() {
        let h3 = "export default defineEventHandler(async (event) => {
            if (a) return
            if (b) { setResponseStatus(event, 409); return { busy: true } }
            if (c) return sendRedirect(event, '/x')
            if (d) return new Response(null, { status: 500 })
            if (e) return { ok: false }
            const r = [1].map((x) => { return x })
            return null
        })";
        assert_eq!(returned(h3, false), vec![Some(204), None, Some(200), Some(204)]);
        let nest = "class C { @Post() @HttpCode(HttpStatus.NO_CONTENT) async m() { if (a) return; return { ok: 1 } } }";
        assert_eq!(returned(nest, true), vec![Some(204), Some(204)]);
        let post = "class C { @Post('x') async m() { return { ok: 1 } } }";
        assert_eq!(returned(post, true), vec![Some(201)]);
    }
}
