//! missing-signature-verification

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::model::ast::{self, text};
use crate::model::{Framework, Provider, effects, express_app, handlers, providers, reach, stmts, verify};
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use std::collections::HashMap;
use std::path::PathBuf;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
An HTTP webhook route (its path or file names a webhook, or a provider is recognised) that
acts on the body (a database write or an external effect, in the handler or the functions it
calls) while nothing verifies the provider's signature: no `constructEvent`, svix / Octokit
`verify`, `verifyWebhook`, `authenticate.webhook`, `webhooks.unmarshal`, LiveKit's
`WebhookReceiver.receive`, HMAC + `timingSafeEqual`, ... in the handler, its callees or its file. When the handler reads a
credential header (`authorization`, `x-...-signature`, `x-...-token`) and never compares
it, the finding is at that read.

To stay precise it is silent when the route has any middleware before the handler
(`app.post(path, verifyStripe, handler)`) or the handler is wrapped by a wrapper named for
verification or webhooks (`verifySignature(handler)`, an SDK webhook object's
`orderWebhook.createHandler(handler)`), when the file mentions a signature, a
verification, an HMAC, svix, Nest `@UseGuards`, or compares a shared secret/token
(`req.query.token !== process.env.WEBHOOK_TOKEN`): verification done there is assumed. For
Express/Koa/Hono/Fastify only routes on an app the file itself creates (`express()`,
`new Hono()`, `Fastify()`) are judged: a router or plugin file is mounted elsewhere, possibly
behind verifying middleware that this file cannot show. Queue
consumers are never reported (the broker authenticates them).

## Why retries break it
Without verification anyone who finds the URL can forge deliveries: fake "payment succeeded"
events, or replays of genuine old ones (signatures carry timestamps precisely to stop
replays). A forged delivery with a genuine event id also burns that event's dedupe key, so the
real delivery is dropped as a duplicate.

## Bad
```ts
app.post("/webhooks/stripe", express.json(), async (req, res) => {
  if (req.body.type === "invoice.paid") await markPaid(req.body.data.object.id);
  res.sendStatus(200);
});
```

## Good
```ts
app.post("/webhooks/stripe", express.raw({ type: "application/json" }), async (req, res) => {
  const event = stripe.webhooks.constructEvent(req.body, req.headers["stripe-signature"]!, secret);
  if (event.type === "invoice.paid") await markPaid(event.data.object.id);
  res.sendStatus(200);
});
```

## Fix
None: verification needs the provider's secret and the raw body, which only the team can
wire. The help names the provider's verification call.
"#;

pub const RULE: Rule = Rule {
    id: "missing-signature-verification",
    summary: "webhook route acts on the body without verifying the provider signature: forged and replayed deliveries are processed",
    docs: DOCS,
    fix: FixAvailability::None,
    safe_fixes: false,
    preview: false,
    check,
};

fn code_of(node: tree_sitter::Node, src: &str) -> String {
    stmts::code_without_comments(node, src)
}

/// Words whose presence means some verification is wired in this code.
fn mentions_verification(code: &str) -> bool {
    let src = code;
    let lower = src.to_ascii_lowercase();
    providers::verifies_signature(src)
        || ["signature", "verif", "hmac", "useguards", "authenticate", "x-hub-", "svix"]
            .iter()
            .any(|w| lower.contains(w))
        // `isValidStripeWebhook(event)` (nuxt-webhook-validators), `validateWebhook(req)`
        || crate::regex!(r"\b(?:isValid|validate)\w*(?:Webhook|Signature|Hmac|Request)\w*\s*\(").is_match(src)
}

/// Whether `node`'s code mentions some verification, not counting a signature header read into
/// a variable that is never used again (`const sig = getHeader(event, 'stripe-signature')`
/// and nothing verifies it). `uses` counts the names of `node`'s file.
/// `uses` gives the file's identifier counts, asked only when the code mentions verification
/// at all (counting them walks the whole file).
fn verification_mentioned<'u>(
    node: tree_sitter::Node,
    src: &str,
    uses: impl FnOnce() -> &'u HashMap<String, usize>,
) -> bool {
    let code = code_of(node, src);
    if !mentions_verification(&code) {
        return false;
    }
    let uses = uses();
    let mut rest = code.clone();
    for decl in ast::descendants_of_kind(node, "variable_declarator") {
        let t = &src[decl.byte_range()];
        let dead = decl
            .field("name")
            .filter(|n| ast::kind(n) == "identifier")
            .is_some_and(|n| uses.get(&src[n.byte_range()]).copied().unwrap_or(0) == 1);
        if dead && mentions_verification(t) {
            rest = rest.replacen(t, "", 1);
        }
    }
    mentions_verification(&rest)
}

/// Per-file answers, each computed once per file however many handlers and scopes ask.
#[derive(Default)]
struct PerFile {
    /// How often each identifier (and shorthand property) occurs in the file.
    uses: HashMap<PathBuf, HashMap<String, usize>>,
    /// Whether the whole file compares a secret or mentions verification.
    verifies_somewhere: HashMap<PathBuf, bool>,
}

impl PerFile {
    fn uses(&mut self, file: &SourceFile) -> &HashMap<String, usize> {
        self.uses.entry(file.path.clone()).or_insert_with(|| {
            let mut counts: HashMap<String, usize> = HashMap::new();
            ast::walk(file.root(), &mut |n| {
                if matches!(ast::kind(n), "identifier" | "shorthand_property_identifier") {
                    *counts.entry(file.text[n.byte_range()].to_string()).or_default() += 1;
                }
                true
            });
            counts
        })
    }

    fn verifies_somewhere(&mut self, file: &SourceFile) -> bool {
        if let Some(&known) = self.verifies_somewhere.get(&file.path) {
            return known;
        }
        let answer = compares_secret(file.root(), &file.text)
            || verification_mentioned(file.root(), &file.text, || self.uses(file));
        self.verifies_somewhere.insert(file.path.clone(), answer);
        answer
    }
}

/// A shared-secret check: `req.query.token !== process.env.WEBHOOK_SECRET`.
fn compares_secret(root: tree_sitter::Node, src: &str) -> bool {
    ast::descendants_of_kind(root, "binary_expression").into_iter().any(|b| {
        let op = b.field("operator").map(|o| &src[o.byte_range()]).unwrap_or("");
        // The operator first: lowercasing every binary expression's text was most of the walk.
        matches!(op, "===" | "!==" | "==" | "!=") && {
            let t = src[b.byte_range()].to_ascii_lowercase();
            ["secret", "token", "apikey", "api_key", "x-api-key", "authorization"].iter().any(|w| t.contains(w))
        }
    })
}

/// `express()`, `new Hono()`, `Fastify()` / `fastify()`, `new Koa()` in this file.
fn creates_app(src: &str) -> bool {
    crate::regex!(
        r#"(\bexpress\s*\(\s*\)|new\s+Hono\s*(<[^>]*>)?\s*\(|\b[Ff]astify\s*\(|new\s+Koa\s*\(|require\(\s*['"](fastify|express)['"]\s*\)\s*\()"#
    )
    .is_match(src)
}

/// Whether `func` reads an object back from a remote API: an SDK read on a resource
/// (`client.payments.get(id)`, `api.orders.retrieve(id)`) that is not a database client, or a
/// `fetch` without a writing method to an absolute URL (written in the call or in the
/// constant the template starts from).
fn fetches_back(func: tree_sitter::Node, src: &str) -> bool {
    ast::calls_in(func, false).into_iter().any(|call| {
        let path = ast::callee_path_shared(call, src);
        let names: Vec<&str> = path.iter().map(|p| p.trim_end_matches("()")).collect();
        if let [.., resource, read] = names.as_slice()
            && names.len() >= 3
            && matches!(*read, "get" | "retrieve")
            && ast::arguments(call).first().is_some_and(|a| !matches!(ast::kind(a), "string" | "template_string"))
            && resource.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && effects::classify(call, src, false).is_none()
            && !is_local_state(&names[..names.len() - 1])
        {
            return true;
        }
        names.as_slice() == ["fetch"] && remote_read(call, src)
    })
}

/// A receiver that holds local state (a data store, the request, a config), whose `get` reads
/// that state rather than the provider's: `ctx.db.get(id)`, `this.cache.get(key)`,
/// `url.searchParams.get(name)`.
fn is_local_state(receiver: &[&str]) -> bool {
    receiver.iter().any(|segment| {
        let s = segment.to_ascii_lowercase();
        [
            "prisma",
            "db",
            "knex",
            "redis",
            "cache",
            "kv",
            "store",
            "repo",
            "collection",
            "firestore",
            "headers",
            "params",
            "query",
            "cookies",
            "config",
            "env",
            "session",
            "storage",
            "body",
            "form",
        ]
        .iter()
        .any(|d| s.contains(d))
            || matches!(s.as_str(), "tx" | "trx" | "map" | "req" | "request" | "ctx" | "c")
    })
}

fn remote_read(call: tree_sitter::Node, src: &str) -> bool {
    let args = ast::arguments(call);
    let Some(url) = args.first() else { return false };
    let writes = args.get(1).and_then(|o| {
        (ast::kind(o) == "object").then(|| ast::object_property(*o, "method", src)).flatten().map(|m| {
            let m = src[m.byte_range()].to_ascii_uppercase();
            !m.contains("GET")
        })
    });
    if writes == Some(true) {
        return false;
    }
    let url_text = &src[url.byte_range()];
    if url_text.contains("https://") || url_text.contains("http://") {
        return true;
    }
    // `${API}/payments/${id}` where `const API = "https://..."`.
    let first_name = crate::regex!(r"^`\$\{\s*([A-Za-z_$][\w$]*)\s*\}").captures(url_text).map(|c| c[1].to_string());
    let root = ast::root_above(call).unwrap_or(call);
    first_name
        .and_then(|n| ast::find_binding_init(root, &n, src, call.start_byte()))
        .is_some_and(|init| src[init.byte_range()].contains("http"))
}

fn help_for(provider: Option<Provider>) -> &'static str {
    match provider {
        Some(Provider::Stripe) => {
            "verify with `stripe.webhooks.constructEvent(rawBody, req.headers['stripe-signature'], endpointSecret)` and act on the returned event"
        }
        Some(Provider::Svix) => {
            "verify with svix `new Webhook(secret).verify(rawBody, headers)` (Clerk: `verifyWebhook(req)`)"
        }
        Some(Provider::Github) => {
            "verify `x-hub-signature-256` with `@octokit/webhooks` `verify`, or an HMAC-SHA256 of the raw body compared with `timingSafeEqual`"
        }
        Some(Provider::Shopify) => {
            "verify `x-shopify-hmac-sha256`: base64 HMAC-SHA256 of the raw body with the app secret, compared with `timingSafeEqual` (or `shopify.webhooks.validate`)"
        }
        Some(Provider::Paystack) => "verify `x-paystack-signature`: HMAC-SHA512 of the raw body with the secret key",
        _ => {
            "verify the provider's signature header over the raw body (HMAC compared with `timingSafeEqual`, or the provider SDK) before acting"
        }
    }
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    let mut per_file = PerFile::default();
    for model in cx.handlers {
        let handler = &model.handler;
        if !handler.framework.is_http() || !handler.is_webhook {
            continue;
        }
        if handler.provider.is_none() && !handlers::names_webhook(&handler.name) {
            continue;
        }
        let Some(root_scope) = model.scopes.first() else { continue };
        let Some(func) = root_scope.node() else { continue };
        if handler.framework == Framework::Botpress
            && handlers::called_by_nearby_code(cx.project, func, root_scope.file())
        {
            continue;
        }
        // A wrapper named for verifying deliveries checks the sender before the handler runs.
        if handler.verified_by_wrapper {
            continue;
        }
        // The handler's own functions first: most verify there, and then the whole file need
        // not be read.
        if model.scopes.iter().any(|s| {
            s.node().is_some_and(|n| {
                let src = &s.file().text;
                verify::first_verification(n, src).is_some()
                    || verification_mentioned(n, src, || per_file.uses(s.file()))
            })
        }) {
            continue;
        }
        if per_file.verifies_somewhere(cx.file) || per_file.verifies_somewhere(root_scope.file()) {
            continue;
        }
        // A router or plugin file is mounted elsewhere, possibly behind verifying middleware:
        // only routes on an app this file creates are judged.
        if matches!(handler.framework, Framework::Express | Framework::Koa | Framework::Hono | Framework::Fastify)
            && !creates_app(&root_scope.file().text)
        {
            continue;
        }
        // Route middleware may verify.
        let file_src = &root_scope.file().text;
        if let Some(reg) = express_app::registration(root_scope.file().root(), func, file_src) {
            let args = ast::arguments(reg);
            let middle = &args[1..args.len().saturating_sub(1)];
            if middle.iter().any(|a| {
                !(express_app::is_raw_parser(*a, file_src)
                    || (ast::kind(a) == "call_expression" && express_app::is_json_parser(*a, file_src)))
            }) {
                continue;
            }
        }
        // A provider outside the signing ones (PROVIDERS.md) may authenticate its deliveries
        // by having the receiver fetch the object back with its own API key (Mollie's webhooks
        // carry only `id=tr_...`): a forged delivery then only re-reads the true state.
        if handler.provider.is_none()
            && model.scopes.iter().any(|s| s.node().is_some_and(|n| fetches_back(n, &s.file().text)))
        {
            continue;
        }
        let acts = model.scopes.iter().any(|s| {
            s.node().is_some_and(|n| {
                let file = s.file();
                ast::calls_in(n, false).into_iter().any(|c| {
                    let local = reach::resolve_call(cx.project, file, c).is_some();
                    effects::classify(c, &file.text, local).is_some()
                })
            })
        });
        if !acts {
            continue;
        }
        // A credential header read and never compared is the place to fix: say so there.
        let (at, message) = match credential_header_read(func, &root_scope.file().text) {
            Some((read, name)) => (
                read,
                format!(
                    "the `{name}` header is read but never checked against a secret or signature: forged and replayed deliveries are processed, and a forged event id burns the real delivery's dedupe key"
                ),
            ),
            None => (
                func,
                "this webhook handler acts on the request body without verifying the provider's signature: forged and replayed deliveries are processed, and a forged event id burns the real delivery's dedupe key".to_string(),
            ),
        };
        out.push(
            Diagnostic::new(RULE.id, root_scope.file(), at, message)
                .in_handler(model, root_scope)
                .help(help_for(handler.provider)),
        );
    }
}

/// The first read of a credential header in the handler (`req.headers.get("authorization")`,
/// `req.headers["x-signature"]`, `c.req.header("x-webhook-token")`, `getHeader(event, ...)`)
/// and the header's name.
fn credential_header_read<'t>(func: Node<'t>, src: &str) -> Option<(Node<'t>, String)> {
    let credential =
        crate::regex!(r"(?i)^(authorization|x-[\w-]*(signature|token|hmac|secret)[\w-]*|[\w-]*-signature)$");
    let mut found = None;
    ast::walk(func, &mut |n| {
        if found.is_some() {
            return false;
        }
        let name = match ast::kind(n) {
            "call_expression" => {
                let args = ast::arguments(n);
                // h3 / Nuxt: `getHeader(event, "stripe-signature")`
                let at = match ast::callee_path(n, src).last().map(String::as_str) {
                    Some("get" | "header") => 0,
                    Some("getHeader" | "getRequestHeader") => 1,
                    _ => return true,
                };
                args.get(at).and_then(|a| ast::string_value(*a, src))
            }
            "subscript_expression" => n
                .field("object")
                .filter(|o| text(*o, src).ends_with("headers"))
                .and_then(|_| n.field("index"))
                .and_then(|i| ast::string_value(i, src)),
            _ => None,
        };
        if let Some(name) = name.filter(|h| credential.is_match(h)) {
            found = Some((n, name));
        }
        true
    });
    found
}
