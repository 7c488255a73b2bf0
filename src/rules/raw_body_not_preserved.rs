//! raw-body-not-preserved

use super::{Context, Diagnostic, FixAvailability, HandlerModel, Rule};
use crate::fix::{Edit, Fix};
use crate::model::ast::{self, text};
use crate::model::express_app::{self, JsonMount};
use crate::model::reach::{self, Scope};
use crate::model::{Framework, stmts, verify};
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::sync::Arc;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A webhook signature checked over a body that is no longer the bytes the provider signed:
- `app.use(express.json())` (or `bodyParser.json()`) mounted on the app, or on the router the
  route is on, BEFORE a webhook route that verifies `req.body` (`constructEvent`, svix
  `verify`, `createHmac().update`);
- `JSON.stringify(req.body)` (or of a body parsed with `await req.json()` / `c.req.json()`)
  passed to `constructEvent` / `verify` / `createHmac().update`, or the parsed object itself;
- a Next.js pages-router API route that verifies a signature without
  `export const config = { api: { bodyParser: false } }`;
- a Fastify route verifying `request.body` in a file that creates the Fastify instance and
  registers no raw-body content-type parser or plugin;
- a Fastify route verifying `request.raw.body`: the Node request under Fastify's has no body
  (unless Express middleware runs inside Fastify through `@fastify/express` or `middie`);
- a router file whose route verifies `req.body` while the app (`app`/`server`/`index`/`main`
  up to three directories up) mounts `express.json()` before that router;
- `express.raw()` on a route that an earlier `express.json()` reaches first (the raw parser
  then skips the already-read body);
- h3/Nuxt `JSON.stringify(await readBody(event))` verified;
- a NestJS handler reading `req.rawBody` / `@RawBody()` while `main.ts` calls
  `NestFactory.create` without `rawBody: true` (and configures no body parsing of its own).

It does not fire when the route carries `express.raw({ type: 'application/json' })`, when the
route is registered before `express.json()`, or when `express.json({ verify })` keeps the raw
buffer and the route verifies `req.rawBody`. Nor when the sender is none the provider
catalogue names and the handler computes the digest itself (`createHmac().update(
JSON.stringify(body))`, or a project `verify(body, signature)`): such a scheme (an app that
signs what it sends itself, an SSO or directory-sync bridge) often signs the stringified
object, which the parsed body reproduces. A catalogued provider (Stripe, GitHub, Paystack, ...)
or a provider SDK's verifier always needs the raw bytes.

## Why retries break it
A signature covers exact bytes. Parsing and re-serialising changes whitespace, key order,
unicode escapes and number formatting, so genuine deliveries fail verification. The handler
answers 400, the provider retries for days and finally disables the endpoint, and every event in
that window is lost; teams then "fix" it by skipping verification.

## Bad
```ts
app.use(express.json());
app.post("/webhooks/stripe", (req, res) => {
  const event = stripe.webhooks.constructEvent(JSON.stringify(req.body), sig, secret);
});
```

## Good
```ts
app.post("/webhooks/stripe", express.raw({ type: "application/json" }), (req, res) => {
  const event = stripe.webhooks.constructEvent(req.body, sig, secret);
});
app.use(express.json());
```

## Fix (unsafe)
- fetch-style handlers (App Router, Hono, SvelteKit, Remix): `const body = await req.json()`
  becomes `const rawBody = await req.text()` followed by `const body = JSON.parse(rawBody)`, and
  the verification is given `rawBody` instead of `JSON.stringify(body)`. `body` keeps its value.
- Express, when the route is registered in the same file, `express` is imported and the handler
  uses `req.body` only for the verification: adds `express.raw({ type: 'application/json' })` as
  the route's first middleware, passes `req.body` (now a Buffer) instead of its
  `JSON.stringify`, and when `express.json()` is mounted earlier on the same app/router, moves
  the route registration up to just before that mount. The moved route no longer passes through
  the middleware mounted between the two places: review that list (CORS, logging, auth).
- Next.js pages router, when the handler already reads the raw stream: appends
  `export const config = { api: { bodyParser: false } }`.
Everything else is display-only: the handler also reads the parsed `req.body`, the parser is
mounted in another file, or Fastify needs a content-type parser registered on the instance
(`addContentTypeParser('application/json', { parseAs: 'buffer' }, ...)`), and NestJS `@Body()`
needs `rawBody: true` and `req.rawBody`.

Note: a route-level `express.raw()` that runs after an app-level `express.json()` still sees a
parsed body (body-parser skips bodies already read); the rule follows the catalogue and stays
silent there, but the Express fix above always places the route before the JSON parser.
"#;

pub const RULE: Rule = Rule {
    id: "raw-body-not-preserved",
    summary: "signature verified over a re-serialised body: genuine deliveries fail and are retried until disabled",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: true,
    preview: false,
    check,
};

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        let before = out.len();
        for scope in &model.scopes {
            reserialised_payloads(cx, model, scope, out);
        }
        if out.len() > before {
            continue;
        }
        match model.handler.framework {
            Framework::Express => express_order(cx, model, out),
            Framework::NextPagesApi => pages_body_parser(cx, model, out),
            Framework::Fastify => fastify_parser(cx, model, out),
            Framework::Nest => nest_raw_body(cx, model, out),
            _ => {}
        }
    }
}

/// What a verified payload expression is.
enum Payload<'t> {
    /// `JSON.stringify(body)`: `body` is the parsed request body.
    Stringified { body: Node<'t> },
    /// The parsed object itself.
    Parsed,
}

/// A parsed request body: `req.body`, `await req.json()`, `c.req.json()`, or a binding of one.
fn parsed_body<'t>(expr: Node<'t>, func: Node<'t>, src: &str, depth: usize) -> Option<Node<'t>> {
    let expr = ast::unwrap_expr(expr);
    match expr.kind_name() {
        "member_expression" => {
            let prop = expr.field("property").map(|p| text(p, src))?;
            (prop == "body" && ast::member_path(expr, src).len() >= 2).then_some(expr)
        }
        "call_expression" => {
            let path = ast::callee_path_shared(expr, src);
            let fetch_json =
                path.len() >= 2 && path.last().is_some_and(|l| l == "json") && ast::arguments(expr).is_empty();
            // h3 / Nuxt: `await readBody(event)` is the parsed JSON
            let h3 = path.len() == 1 && matches!(path[0].as_str(), "readBody" | "readValidatedBody");
            (fetch_json || h3).then_some(expr)
        }
        "identifier" if depth < 2 => {
            if body_decorated_parameter(func, text(expr, src), src) {
                return Some(expr);
            }
            let init = ast::find_binding_init(func, text(expr, src), src, expr.start_byte())?;
            parsed_body(init, func, src, depth + 1).map(|_| expr)
        }
        _ => None,
    }
}

/// NestJS `@Body() body`: the parsed JSON.
fn body_decorated_parameter(func: Node, name: &str, src: &str) -> bool {
    let Some(params) = func.field("parameters") else { return false };
    ast::named_children(params).into_iter().any(|p| {
        p.field("pattern").is_some_and(|n| text(n, src) == name)
            && ast::named_children(p)
                .iter()
                .any(|d| d.kind_name() == "decorator" && text(*d, src).starts_with("@Body("))
    })
}

fn classify_payload<'t>(payload: Node<'t>, func: Node<'t>, src: &str) -> Option<(Payload<'t>, Option<Node<'t>>)> {
    let p = ast::unwrap_expr(payload);
    if p.kind_name() == "call_expression" && ast::callee_path(p, src) == ["JSON", "stringify"] {
        let arg = *ast::arguments(p).first()?;
        parsed_body(arg, func, src, 0)?;
        return Some((Payload::Stringified { body: ast::unwrap_expr(arg) }, None));
    }
    if p.kind_name() == "identifier"
        && let Some(init) = ast::find_binding_init(func, text(p, src), src, p.start_byte())
    {
        let init = ast::unwrap_expr(init);
        if init.kind_name() == "call_expression" && ast::callee_path(init, src) == ["JSON", "stringify"] {
            let arg = *ast::arguments(init).first()?;
            parsed_body(arg, func, src, 0)?;
            return Some((Payload::Stringified { body: ast::unwrap_expr(arg) }, Some(init)));
        }
        // The object from `await req.json()` handed to the verifier.
        if init.kind_name() == "call_expression" && parsed_body(init, func, src, 0).is_some() {
            return Some((Payload::Parsed, None));
        }
    }
    if p.kind_name() == "call_expression" && parsed_body(p, func, src, 0).is_some() {
        return Some((Payload::Parsed, None));
    }
    None
}

fn reserialised_payloads(cx: &Context, model: &HandlerModel, scope: &Scope, out: &mut Vec<Diagnostic>) {
    let Some(func) = scope.node() else { return };
    let file = scope.file();
    let src = &file.text;
    for (call, payload) in verify::verified_payloads(func, src) {
        let Some((kind, binding)) = classify_payload(payload, func, src) else {
            continue;
        };
        // A digest computed by hand (`createHmac(...).update(JSON.stringify(body))`, or a
        // project's own `verify(body, signature)`) for a sender no catalogue names follows
        // that sender's own scheme, which may well be the stringified object (an app signing
        // what it sends itself, an SSO bridge): only a catalogued provider, or a provider
        // SDK's verifier, is known to sign the raw bytes.
        if model.handler.provider.is_none()
            && (hand_written_digest(call, src) || reach::resolve_call(cx.project, file, call).is_some())
        {
            continue;
        }
        let what = ast::callee_path(call, src).join(".");
        let message = match kind {
            Payload::Stringified { .. } => format!(
                "`{what}` verifies `JSON.stringify(...)` of the parsed body, not the bytes the provider signed: genuine deliveries fail verification and are retried until the endpoint is disabled"
            ),
            Payload::Parsed => format!(
                "`{what}` verifies the parsed body object, not the raw bytes the provider signed: genuine deliveries fail verification and are retried until the endpoint is disabled"
            ),
        };
        let fix = || match kind {
            Payload::Stringified { body } => stringify_fix(cx, model, scope, payload, binding, body),
            Payload::Parsed => Fix::display_only(
                "verify the raw body text",
                "read the body once with `await req.text()`, verify that string, then `JSON.parse` it",
            ),
        };
        out.push(
            Diagnostic::new(RULE.id, file, payload, message)
                .in_handler(model, scope)
                .help("verify the exact request bytes: `express.raw({ type: 'application/json' })` on the route, or `await req.text()`")
                .with_fix(cx, fix),
        );
    }
}

/// `crypto.createHmac(alg, secret).update(payload)`, `createHash(...).update(...)`: the
/// digest is the handler's own code, not a provider SDK's verifier.
fn hand_written_digest(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    path.last().is_some_and(|l| l == "update")
        && path.iter().any(|p| p.starts_with("createHmac") || p.starts_with("createHash"))
}

/// The verification hashes the re-serialised body by hand: `createHmac(...).update(
/// JSON.stringify(req.body))` here, or inside the project function called
/// (`verifyWebhookSignature(req)`).
fn digests_stringified_body(cx: &Context, file: &Arc<SourceFile>, call: Node, payload: Node) -> bool {
    let src = &file.text;
    if hand_written_digest(call, src) {
        return text(payload, src).contains("JSON.stringify");
    }
    reach::resolve_call(cx.project, file, call)
        .and_then(|def| def.node().map(|n| text(n, &def.file.text).to_string()))
        .is_some_and(|body| {
            body.contains("JSON.stringify") && (body.contains("createHmac") || body.contains("createHash"))
        })
}

/// The fix for `JSON.stringify(body)`: fetch-style text read, or the Express raw parser.
fn stringify_fix(
    cx: &Context,
    model: &HandlerModel,
    scope: &Scope,
    payload: Node,
    binding: Option<Node>,
    body: Node,
) -> Fix {
    let file = scope.file();
    let src = &file.text;
    let Some(func) = scope.node() else {
        return manual_fix();
    };
    // The expression to replace: the stringify call, at its binding when it has one.
    let stringify = binding.unwrap_or(ast::unwrap_expr(payload));
    if body.kind_name() == "identifier" {
        let Some(init) = ast::find_binding_init(func, text(body, src), src, body.start_byte()) else {
            return manual_fix();
        };
        let json_call = ast::unwrap_expr(init);
        if json_call.kind_name() == "call_expression" && ast::callee_name(json_call, src).is_some_and(|n| n == "json") {
            return text_read_fix(file, func, init, json_call, stringify).unwrap_or_else(manual_fix);
        }
        return manual_fix();
    }
    // `JSON.stringify(req.body)` in Express
    if model.handler.framework == Framework::Express && scope.depth == 0 && Arc::ptr_eq(file, cx.file) {
        let req_body = text(body, src).to_string();
        return express_fix(cx, model, func, &req_body, Some(stringify)).unwrap_or_else(manual_fix);
    }
    manual_fix()
}

fn manual_fix() -> Fix {
    Fix::display_only(
        "verify the raw request bytes",
        "give the verifier the unparsed body: `express.raw({ type: 'application/json' })` on the route (registered before `express.json()`), `await req.text()` in fetch-style handlers, `await readRawBody(event)` in h3/Nuxt, `bodyParser: false` in the Next.js pages router, a buffer content-type parser in Fastify, `NestFactory.create(AppModule, { rawBody: true })` and `req.rawBody` (from `@Req() req: RawBodyRequest<Request>`) in NestJS",
    )
}

/// `const body = await req.json()` → `const rawBody = await req.text()` + `JSON.parse(rawBody)`.
fn text_read_fix(file: &SourceFile, func: Node, init: Node, json_call: Node, stringify: Node) -> Option<Fix> {
    let src = &file.text;
    let decl = ast::enclosing_statement(init)?;
    if !matches!(decl.kind_name(), "lexical_declaration" | "variable_declaration") || decl.named_child_count() != 1 {
        return None;
    }
    let name = ["rawBody", "rawPayload", "bodyText"].into_iter().find(|n| !ast::mentions_identifier(func, src, n))?;
    let receiver = json_call.field("function")?.field("object")?;
    let style = file.style();
    let indent = file.indent_at(decl.start_byte());
    let keyword = if text(decl, src).starts_with("var") { "var" } else { "const" };
    let read = format!("{keyword} {name} = await {}.text(){}{}{indent}", text(receiver, src), style.semi(), style.eol);
    let mut edits = vec![
        Edit::insert(decl.start_byte(), read),
        Edit::replace(init.start_byte(), init.end_byte(), format!("JSON.parse({name})")),
        Edit::replace(stringify.start_byte(), stringify.end_byte(), name),
    ];
    edits.sort_by_key(|e| e.start);
    Some(Fix::unsafe_(format!("read the body once with `.text()` and verify `{name}`"), edits).with_note(
        "the body is read as text, verified as is, then parsed with JSON.parse: the parsed value is unchanged",
    ))
}

/// The payloads a function verifies that are the parsed `req.body` itself.
fn verifies_req_body<'t>(func: Node<'t>, req: &str, src: &str) -> Vec<Node<'t>> {
    let body = format!("{req}.body");
    verify::verified_payloads(func, src)
        .into_iter()
        .map(|(_, p)| ast::unwrap_expr(p))
        .filter(|p| {
            if text(*p, src) == body {
                return true;
            }
            p.kind_name() == "identifier"
                && ast::find_binding_init(func, text(*p, src), src, p.start_byte())
                    .is_some_and(|i| text(ast::unwrap_expr(i), src) == body)
        })
        .collect()
}

fn express_order(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    let Some(scope) = model.scopes.first() else { return };
    if !Arc::ptr_eq(scope.file(), cx.file) {
        return;
    }
    let Some(func) = scope.node() else { return };
    let src = cx.src();
    let Some(req) = model.handler.request.as_deref() else { return };
    let root = cx.file.root();
    let Some(reg) = express_app::registration(root, func, src) else { return };
    // `express.raw()` on the route does nothing once an earlier `express.json()` has parsed the
    // body (it skips a request whose body is already read).
    let raw_on_route = ast::arguments(reg).iter().any(|a| express_app::is_raw_parser(*a, src));
    // The verification: in the handler, or in a helper the handler passes `req` to.
    let helpers = req_helpers(cx, func, req);
    let mut site: Option<(&Arc<SourceFile>, Node, bool)> = None;
    if let Some(first) = verifies_req_body(func, req, src).first() {
        site = Some((cx.file, *first, true));
    } else {
        for (def, param) in &helpers {
            let Some(node) = def.node() else { continue };
            let hsrc = &def.file.text;
            let payloads = verifies_req_body(node, param, hsrc);
            if let Some(first) = payloads.first() {
                let clean = only_verified(node, &format!("{param}.body"), &payloads, hsrc);
                site = Some((&def.file, *first, clean));
                break;
            }
        }
    }
    let Some((file, payload, helper_clean)) = site else { return };
    // Only now (a verification of `req.body` exists) look for the parser, possibly in other files.
    let mount = json_mount_before(root, reg, src);
    let remote = if mount.is_none() { mounted_after_json(cx, reg) } else { None };
    if mount.is_none() && remote.is_none() {
        return;
    }
    // A JSON parser limited to other content types leaves the route's raw parser in charge.
    if raw_on_route
        && mount.is_some_and(|m| {
            ast::arguments(m.parser)
                .first()
                .is_some_and(|o| o.kind_name() == "object" && ast::object_property(*o, "type", src).is_some())
        })
    {
        return;
    }
    let (parser, at) = match (mount, &remote) {
        (Some(mount), _) => {
            let (line, _) = cx.file.line_col(mount.use_call.start_byte());
            let at = if Arc::ptr_eq(file, cx.file) {
                format!("line {line}")
            } else {
                let name = cx.file.path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
                format!("{name} line {line}")
            };
            (text(mount.parser, src).to_string(), at)
        }
        (None, Some((parser, at))) => (parser.clone(), at.clone()),
        (None, None) => return,
    };
    let message = format!(
        "`{parser}` parses the body before this webhook route ({at}): the signature is checked against a re-serialised object, genuine deliveries fail and are retried until the endpoint is disabled"
    );
    let message = if raw_on_route {
        format!(
            "`express.raw()` on this route comes too late: `{parser}` ({at}) has already parsed the body, so the signature is checked against a parsed object and genuine deliveries fail and are retried until the endpoint is disabled"
        )
    } else {
        message
    };
    let fix = || {
        let mut fix = if raw_on_route {
            Fix::display_only(
                "register the route before the JSON parser",
                format!(
                    "move this route (or the router it is on) above `{parser}` ({at}): its `express.raw()` then sees the unparsed body"
                ),
            )
        } else if remote.is_some() {
            Fix::display_only(
                "verify the raw request bytes",
                format!(
                    "in {at}, mount this router (with `express.raw({{ type: 'application/json' }})` on the route) before `{parser}`"
                ),
            )
        } else if helper_clean {
            express_fix(cx, model, func, &format!("{req}.body"), None).unwrap_or_else(manual_fix)
        } else {
            manual_fix()
        };
        if !Arc::ptr_eq(file, cx.file) {
            fix.target = Some(cx.file.path.clone());
        }
        fix
    };
    out.push(
        Diagnostic::new(RULE.id, file, payload, message)
            .in_handler(model, scope)
            .help("register the webhook route before `express.json()` with `express.raw({ type: 'application/json' })`")
            .with_fix(cx, fix),
    );
}

/// Whether a listed file is named like an app entry: `app`, `server`, `index` or `main`
/// with a script extension (what `file_stem` and `extension` give for such a name).
fn is_app_file_name(path: &std::path::Path) -> bool {
    let bytes = path.as_os_str().as_encoded_bytes();
    let name = bytes.rsplit(|b| std::path::is_separator(char::from(*b))).next().unwrap_or(bytes);
    let Some(dot) = name.iter().rposition(|b| *b == b'.') else { return false };
    matches!(&name[..dot], b"app" | b"server" | b"index" | b"main")
        && matches!(&name[dot + 1..], b"ts" | b"js" | b"mjs" | b"cjs" | b"mts" | b"cts")
}

/// The app file that mounts this router file after a JSON parser: `app.use(express.json())`
/// then `app.use("/webhooks", webhookRouter)`, with `webhookRouter` imported from this file.
/// Looks for `app`/`server`/`index`/`main` files up to three directories up. Returns the
/// parser's text and where it is mounted.
fn mounted_after_json(cx: &Context, reg: Node) -> Option<(String, String)> {
    let route = express_app::route_path(reg, cx.src()).unwrap_or_default();
    let here = crate::project::normalize(&cx.file.path);
    let mut dir = here.parent();
    for _ in 0..3 {
        let d = dir?;
        for path in cx.project.files_in(d).iter() {
            // The name is read from the path's last bytes: every handler of a directory
            // lists it again, and asking the path for its stem, extension and equality
            // walks its components each time.
            if !is_app_file_name(path) || *path == here {
                continue;
            }
            let Ok(app_file) = cx.project.load(path) else { continue };
            let asrc = &app_file.text;
            let root = app_file.root();
            for import in crate::project::imports(&app_file) {
                if cx.project.resolve(&app_file.path, &import.source).as_deref() != Some(here.as_path()) {
                    continue;
                }
                let Some(use_call) = express_app::router_mount(root, &import.local, asrc) else { continue };
                let app = ast::callee_path(use_call, asrc).first().cloned().unwrap_or_default();
                let prefix =
                    ast::arguments(use_call).first().and_then(|a| ast::string_value(*a, asrc)).unwrap_or_default();
                let full = format!("{prefix}{route}");
                let mount = express_app::json_mounts(root, asrc).into_iter().find(|m| {
                    m.target(asrc) == app
                        && m.use_call.end_byte() <= use_call.start_byte()
                        && m.prefix(asrc).is_none_or(|p| full.starts_with(&p))
                })?;
                let (line, _) = app_file.line_col(mount.use_call.start_byte());
                let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
                return Some((text(mount.parser, asrc).to_string(), format!("{name} line {line}")));
            }
        }
        dir = d.parent();
    }
    None
}

/// Project functions the handler passes its request to, with the parameter that receives it.
fn req_helpers(cx: &Context, func: Node, req: &str) -> Vec<(crate::project::FunctionDef, String)> {
    let src = cx.src();
    let mut out = Vec::new();
    for call in ast::calls_in(func, false) {
        let Some(index) = ast::arguments(call).iter().position(|a| text(*a, src) == req) else { continue };
        let Some(def) = crate::model::reach::resolve_call(cx.project, cx.file, call) else { continue };
        let param = def
            .node()
            .and_then(|n| ast::parameter(n, index))
            .filter(|p| p.kind_name() == "identifier")
            .map(|p| text(p, &def.file.text).to_string());
        if let Some(param) = param {
            out.push((def, param));
        }
    }
    out
}

/// Whether `req.body` is read only by the verification in `func`.
fn only_verified(func: Node, req_body: &str, verified: &[Node], src: &str) -> bool {
    ast::descendants_of_kind(func, "member_expression")
        .into_iter()
        .filter(|m| text(*m, src) == req_body)
        .all(|u| verified.iter().any(|v| ast::contains(*v, u)))
}

/// The JSON parser that runs before `reg`'s route: on the same app/router, or on the app a
/// router is mounted on, before that mount; with a path prefix that covers the route.
fn json_mount_before<'t>(root: Node<'t>, reg: Node<'t>, src: &str) -> Option<JsonMount<'t>> {
    let target = ast::callee_path(reg, src).first().cloned()?;
    let route = express_app::route_path(reg, src).unwrap_or_default();
    let mounts = express_app::json_mounts(root, src);
    let covers = |m: &JsonMount, path: &str| m.prefix(src).is_none_or(|p| path.starts_with(&p));
    if let Some(m) = mounts
        .iter()
        .find(|m| m.target(src) == target && m.use_call.end_byte() <= reg.start_byte() && covers(m, &route))
    {
        return Some(*m);
    }
    let router_use = express_app::router_mount(root, &target, src)?;
    let app = ast::callee_path(router_use, src).first().cloned()?;
    let prefix = ast::arguments(router_use).first().and_then(|a| ast::string_value(*a, src)).unwrap_or_default();
    let full = format!("{prefix}{route}");
    mounts
        .into_iter()
        .find(|m| m.target(src) == app && m.use_call.end_byte() <= router_use.start_byte() && covers(m, &full))
}

/// Adds `express.raw(...)` to the route, verifies `req.body` itself, and registers the route
/// before an earlier `express.json()` on the same object.
fn express_fix(cx: &Context, model: &HandlerModel, func: Node, req_body: &str, stringify: Option<Node>) -> Option<Fix> {
    let file = cx.file;
    let src = cx.src();
    let root = file.root();
    let express = express_binding(file)?;
    let reg = express_app::registration(root, func, src)?;
    // The handler must not read the parsed body anywhere but in the verification.
    let verified: Vec<Node> = match stringify {
        Some(s) => vec![s],
        None => verifies_req_body(func, model.handler.request.as_deref()?, src),
    };
    if !only_verified(func, req_body, &verified, src) {
        return None;
    }
    let q = file.style().quote;
    let raw = format!("{express}.raw({{ type: {q}application/json{q} }}), ");
    let handler_arg = ast::arguments(reg).get(1).copied()?;
    let mut edits = vec![];
    if let Some(s) = stringify {
        edits.push(Edit::replace(s.start_byte(), s.end_byte(), req_body.to_string()));
    }
    let mount = json_mount_same_target(root, reg, src);
    // A parser on the app in front of the router: a route-level raw parser comes too late.
    if mount.is_none() && json_mount_before(root, reg, src).is_some() {
        return None;
    }
    match mount {
        None => edits.push(Edit::insert(handler_arg.start_byte(), raw)),
        Some(m) => {
            let route_stmt = ast::parent(reg).filter(|p| p.kind_name() == "expression_statement")?;
            let mount_stmt = m.use_call.parent().filter(|p| p.kind_name() == "expression_statement")?;
            if ast::parent(route_stmt) != ast::parent(mount_stmt)
                || !stmts::owns_its_lines(file, route_stmt)
                || !stmts::owns_its_lines(file, mount_stmt)
            {
                return None;
            }
            // Names the registration evaluates now (not inside functions) must exist earlier.
            let between_decls: Vec<String> =
                sibling_range(mount_stmt, route_stmt).iter().flat_map(|s| stmts::declared_names(*s, src)).collect();
            let evaluated: Vec<Node> = ast::arguments(reg).into_iter().filter(|a| !ast::is_function(*a)).collect();
            if evaluated.iter().any(|a| stmts::mentions_any(*a, src, &between_decls)) {
                return None;
            }
            let indent = file.indent_at(mount_stmt.start_byte()).to_string();
            let own = file.indent_at(route_stmt.start_byte()).to_string();
            // Comments right above the route travel with it.
            let mut lead = route_stmt;
            while let Some(prev) = lead.prev_sibling().filter(|p| {
                p.kind_name() == "comment" && p.end_position().row + 1 == lead.start_position().row && p != &mount_stmt
            }) {
                lead = prev;
            }
            let base = file.line_start(lead.start_byte());
            let end = stmts::line_end_with_break(file, route_stmt.end_byte());
            let (mut inner, outside): (Vec<Edit>, Vec<Edit>) =
                std::mem::take(&mut edits).into_iter().partition(|e| base <= e.start && e.end <= end);
            edits = outside;
            inner.push(Edit::insert(handler_arg.start_byte(), raw));
            inner.sort_by_key(|e| std::cmp::Reverse(e.start));
            let mut original = src[base..end].to_string();
            for e in inner {
                original.replace_range(e.start - base..e.end - base, &e.replacement);
            }
            let mut moved = String::new();
            for line in original.split_inclusive('\n') {
                match line.strip_prefix(own.as_str()) {
                    Some(rest) if !line.trim().is_empty() => {
                        moved.push_str(&indent);
                        moved.push_str(rest);
                    }
                    _ => moved.push_str(line),
                }
            }
            if !moved.ends_with('\n') {
                moved.push_str(file.style().eol);
            }
            // Keep the blank line that separated the route from what follows with it.
            let next_end = stmts::line_end_with_break(file, end.min(src.len()));
            let end = if end < src.len() && src[end..next_end].trim().is_empty() {
                moved.push_str(file.style().eol);
                next_end
            } else {
                end
            };
            let mount_line = file.line_start(mount_stmt.start_byte());
            edits.push(Edit::insert(mount_line, moved));
            edits.push(Edit::delete(base, end));
        }
    }
    let note = if mount.is_some() {
        "the route is registered before `express.json()`, so middleware mounted between the two places no longer runs for it; `req.body` is now the raw Buffer"
    } else {
        "`req.body` is now the raw Buffer on this route"
    };
    Some(
        Fix::unsafe_("verify the raw body: `express.raw()` on the route, before `express.json()`", edits)
            .with_note(note),
    )
}

fn json_mount_same_target<'t>(root: Node<'t>, reg: Node<'t>, src: &str) -> Option<JsonMount<'t>> {
    let target = ast::callee_path(reg, src).first().cloned()?;
    express_app::json_mounts(root, src)
        .into_iter()
        .find(|m| m.target(src) == target && m.use_call.end_byte() <= reg.start_byte())
}

fn sibling_range<'t>(from: Node<'t>, to: Node<'t>) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    let mut cur = Some(from);
    while let Some(n) = cur {
        if n == to {
            break;
        }
        out.push(n);
        cur = n.next_named_sibling();
    }
    out
}

/// The local name of the default `express` import.
fn express_binding(file: &SourceFile) -> Option<String> {
    crate::project::imports(file)
        .iter()
        .find(|i| i.source == "express" && (i.imported == "default" || i.imported == "*"))
        .map(|i| i.local.clone())
}

fn pages_body_parser(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    let Some(scope) = model.scopes.first() else { return };
    let file = scope.file();
    let src = &file.text;
    let disabled = crate::regex!(r"bodyParser\s*:\s*false");
    if disabled.is_match(src) {
        return;
    }
    // A handler defined outside the route file (`nc().post(handler)`, `export default
    // withX(imported)`): the route file's `config` is not in view.
    let path = file.path.to_string_lossy().replace('\\', "/");
    if !(path.contains("/pages/api/") || path.starts_with("pages/api/")) {
        return;
    }
    let Some((vscope, call, payload)) = model.scopes.iter().find_map(|s| {
        // A verification over the payload (a header token compared alone needs no raw body).
        s.node().and_then(|f| verify::verified_payloads(f, &s.file().text).first().copied()).map(|(c, p)| (s, c, p))
    }) else {
        return;
    };
    // A sender no catalogue names, whose digest the handler computes over the re-serialised
    // body: that is its own scheme, and the parsed body serves it (see reserialised_payloads).
    if model.handler.provider.is_none() && digests_stringified_body(cx, vscope.file(), call, payload) {
        return;
    }
    let reads_stream =
        ["buffer(", "getRawBody(", "rawBody(", ".on('data'", ".on(\"data\"", "for await", "arrayBuffer("]
            .iter()
            .any(|m| model.scopes.iter().any(|s| s.node().is_some_and(|n| text(n, &s.file().text).contains(m))));
    let has_config = crate::regex!(r"export\s+(const|let|var)\s+config\b").is_match(src);
    let fix = || {
        if reads_stream && !has_config && src.contains("export default") {
            let style = file.style();
            let sep = if src.ends_with('\n') { "" } else { style.eol };
            let u = &style.indent_unit;
            let eol = style.eol;
            let text = format!(
                "{sep}{eol}export const config = {{{eol}{u}api: {{{eol}{u}{u}bodyParser: false,{eol}{u}}},{eol}}}{}{eol}",
                style.semi()
            );
            Fix::unsafe_("disable the pages-router body parser for this route", vec![Edit::insert(src.len(), text)])
            .with_note(
                "Next.js stops parsing the body of this route: `req.body` is undefined and the raw stream is readable",
            )
        } else {
            Fix::display_only(
                "disable the body parser and verify the raw stream",
                "add `export const config = { api: { bodyParser: false } }` and read the raw body (`await buffer(req)`) for the verification",
            )
        }
    };
    out.push(
        Diagnostic::new(RULE.id, vscope.file(), call, "this pages-router API route verifies a signature while Next.js parses the body (no `bodyParser: false`): the raw bytes the provider signed are gone, genuine deliveries fail and are retried until the endpoint is disabled")
            .in_handler(model, vscope)
            .help("export `config = { api: { bodyParser: false } }` and verify the raw stream")
            .with_fix(cx, fix),
    );
}

fn fastify_parser(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    let Some(scope) = model.scopes.first() else { return };
    let file = scope.file();
    let src = &file.text;
    let Some(func) = scope.node() else { return };
    let Some(req) = model.handler.request.as_deref() else { return };
    let lower = stmts::code_without_comments(file.root(), src).to_ascii_lowercase();
    if let Some(first) = verifies_node_request_body(func, req, src)
        && !express_compat(&lower)
    {
        out.push(
            Diagnostic::new(RULE.id, file, first, format!("`{req}.raw` is Node's request, which has no `body`: Fastify keeps what it read in `{req}.body` (and `fastify-raw-body` in `{req}.rawBody`), so the verifier gets `undefined` and every genuine delivery fails"))
                .in_handler(model, scope)
                .help("register a buffer content-type parser for this route (or `fastify-raw-body`) and verify `request.body` (or `request.rawBody`)")
                .with_fix(cx, || Fix::display_only(
                    "verify the body Fastify read",
                    "register `fastify.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => done(null, body))` in this route's plugin scope and verify `request.body` (or use `fastify-raw-body` and verify `request.rawBody`)",
                )),
        );
        return;
    }
    let creates_instance = crate::regex!(r"(?i)\bfastify\s*\(").is_match(src);
    if !creates_instance
        || lower.contains("addcontenttypeparser")
        || lower.contains("rawbody")
        || lower.contains("raw-body")
    {
        return;
    }
    let Some(first) = verifies_req_body(func, req, src).into_iter().next() else {
        return;
    };
    out.push(
        Diagnostic::new(RULE.id, file, first, format!("`{req}.body` is the JSON Fastify parsed, not the bytes the provider signed: genuine deliveries fail verification and are retried until the endpoint is disabled"))
            .in_handler(model, scope)
            .help("register `addContentTypeParser('application/json', { parseAs: 'buffer' }, ...)` (or `fastify-raw-body`) and verify the buffer")
            .with_fix(cx, || Fix::display_only(
                "keep the raw body in Fastify",
                "register `fastify.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => done(null, body))` in this route's plugin scope (or use `fastify-raw-body` and verify `request.rawBody`)",
            )),
    );
}

/// The read of `request.raw.body` that a verified payload is (`(request.raw as any).body`, directly or
/// through a local): the Node request under a Fastify request never carries a body.
fn verifies_node_request_body<'t>(func: Node<'t>, req: &str, src: &str) -> Option<Node<'t>> {
    let raw_body = |n: Node| {
        let n = ast::unwrap_expr(n);
        n.kind_name() == "member_expression"
            && n.field("property").is_some_and(|p| text(p, src) == "body")
            && n.field("object").map(ast::unwrap_expr).is_some_and(|o| {
                o.kind_name() == "member_expression"
                    && o.field("property").is_some_and(|p| text(p, src) == "raw")
                    && o.field("object").is_some_and(|r| text(ast::unwrap_expr(r), src) == req)
            })
    };
    // Reported where the body is read: that is the expression to change.
    verify::verified_payloads(func, src).into_iter().map(|(_, p)| ast::unwrap_expr(p)).find_map(|p| {
        if raw_body(p) {
            return Some(p);
        }
        (p.kind_name() == "identifier")
            .then(|| ast::find_binding_init(func, text(p, src), src, p.start_byte()))
            .flatten()
            .filter(|init| raw_body(*init))
    })
}

/// Express middleware run inside Fastify (`@fastify/express`, `middie`) can set a body on the
/// Node request.
fn express_compat(code: &str) -> bool {
    ["@fastify/express", "fastify-express", "middie", "@fastify/middie"].iter().any(|m| code.contains(m))
}

/// NestJS sets `req.rawBody` (`RawBodyRequest`, `@RawBody()`) only for an app created with
/// `NestFactory.create(AppModule, { rawBody: true })`. Judged only when the `main.ts` that
/// creates the app is found (up to six directories up) and configures no body parsing at all.
fn nest_raw_body(cx: &Context, model: &HandlerModel, out: &mut Vec<Diagnostic>) {
    let Some(scope) = model.scopes.first() else { return };
    let Some(func) = scope.node() else { return };
    let file = scope.file();
    let src = &file.text;
    let read = ast::descendants_of_kind(func, "member_expression")
        .into_iter()
        .find(|m| m.field("property").is_some_and(|p| text(p, src) == "rawBody"))
        .or_else(|| {
            ast::descendants_of_kind(func, "decorator").into_iter().find(|d| text(*d, src).starts_with("@RawBody("))
        });
    let Some(read) = read else { return };
    let here = crate::project::normalize(&file.path);
    let mut dir = here.parent();
    let mut main = None;
    for _ in 0..6 {
        let Some(d) = dir else { break };
        if let Some(f) = ["main.ts", "main.js"].iter().find_map(|n| {
            let p = d.join(n);
            p.is_file().then(|| cx.project.load(&p).ok()).flatten()
        }) {
            main = Some(f);
            break;
        }
        dir = d.parent();
    }
    let Some(main) = main else { return };
    let msrc = &main.text;
    let code = stmts::code_without_comments(main.root(), msrc).to_ascii_lowercase();
    if !code.contains("nestfactory.create")
        || ["rawbody", "bodyparser", "raw(", "verify", "usebodyparser"].iter().any(|w| code.contains(w))
    {
        return;
    }
    let Some(create) = ast::calls_in(main.root(), false)
        .into_iter()
        .find(|c| ast::callee_path(*c, msrc).join(".") == "NestFactory.create")
    else {
        return;
    };
    let args = ast::arguments(create);
    let edit = match args.as_slice() {
        [module] => Some(Edit::insert(module.end_byte(), ", { rawBody: true }".to_string())),
        [_, opts] | [_, _, opts] if ast::unwrap_expr(*opts).kind_name() == "object" => {
            Some(crate::fix::edits::merge_property(ast::unwrap_expr(*opts), "rawBody", "true", msrc))
        }
        [_, adapter] if ast::unwrap_expr(*adapter).kind_name() == "new_expression" => {
            Some(Edit::insert(adapter.end_byte(), ", { rawBody: true }".to_string()))
        }
        _ => None,
    };
    let name = main.path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let (line, _) = main.line_col(create.start_byte());
    let fix = || match edit {
        Some(e) => {
            let mut f = Fix::safe("create the Nest app with `rawBody: true`", vec![e])
                .with_note(format!("edits {name}: Nest then keeps the raw bytes beside the parsed body"));
            f.target = Some(main.path.clone());
            f
        }
        None => Fix::display_only(
            "create the Nest app with `rawBody: true`",
            format!("pass `{{ rawBody: true }}` to `NestFactory.create` in {name}"),
        ),
    };
    out.push(
        Diagnostic::new(RULE.id, file, read, format!("the raw body is read, but the app is created without `rawBody: true` ({name} line {line}): `rawBody` is undefined, verification fails for every delivery and the provider retries until the endpoint is disabled"))
            .in_handler(model, scope)
            .help("`NestFactory.create(AppModule, { rawBody: true })` and verify `req.rawBody`")
            .with_fix(cx, fix),
    );
}
