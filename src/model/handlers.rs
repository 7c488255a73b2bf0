//! Entry points of at-least-once deliveries (docs/rules.md, "What counts as a handler"):
//! HTTP webhook routes of every framework, queue workers and stream consumers.

use super::ast::{self, text};
use super::providers::{self, EventKey, Provider};
use super::queries::{self, Candidate};
use crate::config::Config;
use crate::project::{self, Project};
use crate::source::{SourceFile, Span};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use serde::Serialize;
use std::sync::Arc;
use tree_sitter::Node;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Framework {
    NextAppRouter,
    NextPagesApi,
    Express,
    Koa,
    Fastify,
    Hono,
    Nest,
    SvelteKit,
    Remix,
    DenoServe,
    Bullmq,
    LambdaSqs,
    SqsPolling,
    Kafka,
    Amqp,
    Pubsub,
    Inngest,
    TriggerDev,
    /// Octokit `webhooks.on(event, fn)`: called once per verified GitHub delivery.
    Octokit,
    /// Nuxt/Nitro (h3): `export default defineEventHandler(async (event) => ...)` in
    /// `server/api/` or `server/routes/`.
    H3,
    /// Cloudflare Queues: `export default { async queue(batch, env, ctx) { ... } }`.
    CloudflareQueue,
    /// `@shopify/shopify-api` webhook handlers: `{ deliveryMethod: DeliveryMethod.Http, callback:
    /// async (topic, shop, body, webhookId) => ... }`, called once per verified delivery.
    ShopifyWebhook,
    /// Convex HTTP actions: `export const hook = httpAction(async (ctx, request) => ...)`,
    /// routed by `http.route({ path, method, handler })`; they answer with a fetch `Response`.
    ConvexHttp,
    /// Botpress integrations: `export const handler: bp.IntegrationProps['handler'] = async
    /// ({ req, client }) => ...`, the function Botpress calls with each request sent to the
    /// integration's webhook URL; it answers `{ status, body }` (nothing: 200, a throw: 500).
    Botpress,
    /// oRPC procedures routed by OpenAPI: `publicProcedure.route({ method: "POST", path:
    /// "/stripe/webhook" }).input(...).handler(fn)`; a thrown `ORPCError` answers its code.
    Orpc,
    /// A job runner of a queue client: karakeep-style `queueClient.createRunner(queue, { run,
    /// onComplete, onError }, opts)` and liteque's `new Runner(queue, { run })`. `run(job)` is
    /// called again when it throws or its worker dies, until the job's retries run out.
    JobRunner,
    /// A listener of in-process events that a webhook route re-emits per delivery, registered
    /// by a decorator that names the provider: `@OnStripeEvent('invoice.paid')` (an alias of
    /// `@nestjs/event-emitter`'s `@OnEvent`), `@OnEvent('stripe.invoice.paid')`. It is handed
    /// the event's object, not the delivery, so no delivery id is known.
    EventListener,
}

impl Framework {
    pub fn is_http(self) -> bool {
        !matches!(
            self,
            Framework::Bullmq
                | Framework::LambdaSqs
                | Framework::SqsPolling
                | Framework::Kafka
                | Framework::Amqp
                | Framework::Pubsub
                | Framework::Inngest
                | Framework::TriggerDev
                | Framework::Octokit
                | Framework::CloudflareQueue
                | Framework::ShopifyWebhook
                | Framework::JobRunner
                | Framework::EventListener
        )
    }

    /// Frameworks whose handlers answer by returning a `Response` (fetch API).
    pub fn returns_response(self) -> bool {
        matches!(
            self,
            Framework::NextAppRouter
                | Framework::SvelteKit
                | Framework::Remix
                | Framework::DenoServe
                | Framework::ConvexHttp
        )
    }
}

/// One entry point of an at-least-once delivery.
#[derive(Clone, Debug)]
pub struct Handler {
    pub file: Arc<SourceFile>,
    pub function: Span,
    /// What a user calls it: `POST /webhooks/stripe`, `export POST (app/api/x/route.ts)`.
    pub name: String,
    pub framework: Framework,
    pub provider: Option<Provider>,
    pub is_webhook: bool,
    /// The request parameter (`req`, `request`) or, for Hono, the context `c`.
    pub request: Option<String>,
    /// The response object (`res`, `reply`, Koa's `ctx`).
    pub response: Option<String>,
    pub event_key: Option<EventKey>,
    /// Found as the argument of a project factory that returns the route's real handler
    /// (`createWebhookHandler("Connect", handleConnect)`): the factory's closure answers the
    /// request, this function only does the work.
    pub answered_by_factory: bool,
    /// Found inside a wrapper named for verifying deliveries (`verifySignature(handler)`,
    /// an SDK webhook object's `webhook.createHandler(handler)`): the wrapper checks the
    /// sender before this function runs.
    pub verified_by_wrapper: bool,
}

impl Handler {
    pub fn node(&self) -> Option<Node<'_>> {
        self.file.node_at(self.function)
    }

    /// A statement that answers `status` in this framework, or None when unknown.
    pub fn respond(&self, status: u16) -> Option<String> {
        let semi = self.file.style().semi();
        let res = self.response.as_deref();
        let req = self.request.as_deref();
        Some(match self.framework {
            Framework::Express | Framework::NextPagesApi => {
                format!("return {}.status({status}).end(){semi}", res?)
            }
            Framework::Fastify => format!("return {}.code({status}).send(){semi}", res?),
            // `;` joins the two statements even in a file without semicolons (one line).
            Framework::Koa => format!("{}.status = {status}; return{semi}", res?),
            Framework::Hono => format!("return {}.body(null, {status}){semi}", req?),
            // h3 sends what the handler returns with the status set before: one form for every
            // status (a thrown `createError` cannot answer 2xx), and `set_status` can edit it.
            Framework::H3 => {
                let q = self.file.style().quote;
                format!("setResponseStatus({}, {status}); return {q}{q}{semi}", req?)
            }
            f if f.returns_response() => {
                format!("return new Response(null, {{ status: {status} }}){semi}")
            }
            _ => return None,
        })
    }

    /// The expression that reads a request header in this framework.
    pub fn header_expr(&self, header: &str) -> Option<String> {
        let req = self.request.as_deref()?;
        let q = self.file.style().quote;
        Some(match self.framework {
            Framework::Hono => format!("{req}.req.header({q}{header}{q})"),
            Framework::Koa => format!("{req}.get({q}{header}{q})"),
            Framework::H3 => format!("getHeader({req}, {q}{header}{q})"),
            f if f.returns_response() => format!("{req}.headers.get({q}{header}{q})"),
            _ => format!("{req}.headers[{q}{header}{q}]"),
        })
    }
}

const HTTP_METHODS: &[&str] = &["post", "put", "patch", "all"];
const WEBHOOK_WORDS: &[&str] = &["webhook", "hook", "callback", "events", "ipn"];

/// Whether project code beside the handler calls it by name (`handlers.handleBatchUpdateEvent(props)`
/// in the dispatcher one directory up): a function typed as the platform's handler that the
/// project's own entry point calls is a dispatch target, and the entry does what comes before
/// it (the signature check).
pub fn called_by_nearby_code(project: &Project, func: Node, file: &SourceFile) -> bool {
    let declared = func
        .parent()
        .filter(|p| p.kind_name() == "variable_declarator")
        .and_then(|p| p.field("name"))
        .or_else(|| func.field("name"))
        .map(|n| text(n, &file.text).to_string());
    let Some(name) = declared.filter(|n| n != "handler") else { return false };
    let call = format!("{name}(");
    let own_definition = func.start_byte()..func.end_byte();
    let called_in_own_file = file.text.match_indices(&call).any(|(at, _)| !own_definition.contains(&at));
    called_in_own_file
        || file.path.ancestors().skip(1).take(3).any(|dir| {
            project.files_in(dir).iter().filter(|p| **p != file.path).any(|p| {
                matches!(p.extension().and_then(|e| e.to_str()), Some("ts" | "js" | "mts" | "mjs" | "tsx"))
                    && project.load(p).is_ok_and(|other| other.text.contains(&call))
            })
        })
}

/// A function named for managing the app's own webhook settings, a verb on the webhook as its
/// object (`createEventWebHook`, `getSdkWebhook`, `testCustomHook`, `deleteWebhookEndpoint`):
/// a settings page's controller, not a receiver (`handleWebhook`, `stripeWebhook`,
/// `processWebhookEvent`).
fn manages_webhooks(name: &str) -> bool {
    // `postRotateWebhookSigningKey`: the HTTP method the route file is named by comes first
    let name = match crate::regex!(r"^(?:get|post|put|patch|delete)([A-Z])").captures(name) {
        Some(c) => format!("{}{}", c[1].to_ascii_lowercase(), &name[c[0].len()..]),
        None => name.to_string(),
    };
    crate::regex!(
        r"^(?:get|list|find|fetch|create|add|update|put|patch|edit|save|set|delete|remove|toggle|enable|disable|test|rotate|regenerate|reset|refresh|resend|retry|count|search|upsert|register|unregister|subscribe|unsubscribe|validate)(?:[A-Z]\w*)?(?:Hook|Webhook|WebHook)s?(?:[A-Z]\w*)?$"
    )
    .is_match(&name)
}

/// A route or handler through which people manage the app's own webhooks rather than receive
/// a delivery: a management verb after the webhook segment (`/webhooks/:id/disable`,
/// `/webhook/create`, `/environment/webhook-signing-key/rotate`) or a handler named for one
/// (`createHook`, `enableWebhook`).
fn manages_webhooks_route(route_hint: &str, handler_name: &str) -> bool {
    let lower = route_hint.to_ascii_lowercase();
    crate::regex!(
        r"hooks?(?:[-_][a-z0-9]+)*(?:/[^/\s]+)*?/(?:create|new|add|update|edit|delete|remove|destroy|test|enable|disable|toggle|rotate|regenerate|list|subscribe|unsubscribe|settings|config)(?:[/\s?]|$)"
    )
    .is_match(&lower)
        || handler_name.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).any(manages_webhooks)
}

pub fn names_webhook(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    WEBHOOK_WORDS.iter().any(|w| match *w {
        // a sign-in redirect (`/auth/apple/callback`, `/api/auth/callback/google`) is no delivery
        "callback" => lower.contains(w) && !sign_in_words(&lower),
        // an app's own `/api/events` (a calendar's CRUD) is no delivery; `/slack/events` is
        "events" => lower.contains(w) && provider_from_words(&lower).is_some(),
        _ => lower.contains(w),
    })
}

/// Words of a sign-in flow (`/auth/apple/callback`, `magiclinkCallback`, `social-login.controller.ts`).
fn sign_in_words(s: &str) -> bool {
    crate::regex!(r"(?i)auth|login|sign-?in|sso|saml|oidc|openid|magic-?link").is_match(s)
}

/// Finds every handler defined in `file`.
pub fn find_handlers(file: &Arc<SourceFile>, project: &Project, config: &Config) -> Vec<Handler> {
    if is_test_file(&file.path) {
        return Vec::new();
    }
    let path = routing_path(&file.path);
    let mut finder = Finder {
        file,
        project,
        config,
        found: Vec::new(),
        wrapper_verifies: false,
        factory_answers: false,
        path,
        user_authenticated: false,
        mounted_signed_in: None,
    };
    finder.scan();
    finder.found
}

struct Finder<'a> {
    file: &'a Arc<SourceFile>,
    project: &'a Project,
    config: &'a Config,
    found: Vec<Handler>,
    /// The handler being pushed is wrapped in a call that verifies its sender.
    wrapper_verifies: bool,
    /// The handler being pushed is handed to a project factory that returns a function.
    factory_answers: bool,
    /// The file's path as routing sees it (see `routing_path`), `/`-separated.
    path: String,
    /// The route being pushed first authenticates a signed-in user (`requireAuth` middleware,
    /// `@UseGuards(JwtAuthGuard)`): a provider never carries a user's session, so its name
    /// alone (`POST /webhooks` registering an endpoint) does not make it a webhook.
    user_authenticated: bool,
    /// Whether this file's router is mounted behind user authentication, once asked.
    mounted_signed_in: Option<bool>,
}

impl<'a> Finder<'a> {
    fn src(&self) -> &'a str {
        &self.file.text
    }

    fn scan(&mut self) {
        let file = self.file.clone();
        let path = self.path.clone();
        let stem = file.path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        let is_route_file = stem == "route" || stem.starts_with("+server");
        let is_pages_api = path.contains("/pages/api/") || path.starts_with("pages/api/");
        // Vercel/Netlify-style functions: `api/*.js` whose default export takes `(req, res)`.
        let is_function_dir = !is_pages_api && (path.contains("/api/") || path.starts_with("api/"));
        let candidates = queries::entry_point_candidates(&file);
        for &(candidate, node) in &candidates {
            match candidate {
                Candidate::Export => self.export(node, &path, is_route_file, is_pages_api),
                Candidate::Call => self.call(node),
                Candidate::New => self.new_expr(node),
                Candidate::Method => self.decorated_method(node),
                Candidate::Assignment => self.commonjs_export(node, &path, is_pages_api, is_function_dir),
                Candidate::Pair => self.pair(node),
            }
        }
        for &(candidate, node) in &candidates {
            if matches!(candidate, Candidate::Export) {
                self.webhook_named_export(node, &path);
            }
        }
    }

    fn push(&mut self, func: Node, name: String, framework: Framework, route_hint: &str) {
        let func = ast::unwrap_expr(func);
        let (func, file) = if ast::is_function(func) {
            (Span::of(func), self.file.clone())
        } else if func.kind_name() == "identifier" {
            match self.resolve_function(text(func, self.src())) {
                Some(def) => (def.span, def.file),
                // a handler declared in the enclosing function:
                // `const onMessage = async (message) => {...}; subscription.on("message", onMessage)`
                None => match ast::enclosing_function(func)
                    .and_then(|scope| {
                        ast::find_binding_init(scope, text(func, self.src()), self.src(), func.start_byte())
                    })
                    .map(ast::unwrap_expr)
                {
                    Some(f) if ast::is_function(f) => (Span::of(f), self.file.clone()),
                    // `const wrapped = exposeError(handler); router.post(path, wrapped)`
                    Some(call) if call.kind_name() == "call_expression" && !ast::contains(call, func) => {
                        return self.push(call, name, framework, route_hint);
                    }
                    Some(_) => return,
                    // a parameter of a route helper: `createRouteHandler("/flows/:id", handleFlow)`
                    None => {
                        for (span, file, label) in self.passed_in(func) {
                            // `POST path` is named by the path the call site passes
                            let name = match (&label, name.split_once(' ')) {
                                (Some(path), Some((method, _))) => format!("{method} {path}"),
                                _ => name.clone(),
                            };
                            self.push_at(span, file, name, framework, route_hint);
                        }
                        return;
                    }
                },
            }
        } else if func.kind_name() == "member_expression" {
            // controller.handleWebhook, this.handleMessage (a method of the enclosing class)
            match self.this_method(func).or_else(|| self.resolve_method(func)) {
                Some(def) => (def.span, def.file),
                None => return,
            }
        } else if func.kind_name() == "call_expression" {
            // controller.handleWebhook.bind(controller)
            if let Some(callee) = func.field("function").filter(|f| f.kind_name() == "member_expression")
                && callee.field("property").is_some_and(|p| text(p, self.src()) == "bind")
                && let Some(object) = callee.field("object")
            {
                return self.push(object, name, framework, route_hint);
            }
            // wrapped: withAuth(async (req) => ...); a wrapper that verifies the sender
            // (`verifySignatureAppRouter(handler)` of QStash, `withWebhookSignature(fn)`) makes a webhook;
            // wrappers nest: `withTracing("job", withEventLog("job", run))`
            // The wrapped handler is a function or a nested wrapper call; else the last named
            // argument that is a function: `wrap(handler, loggerContext)` passes a context
            // object after it.
            let args = ast::arguments(func);
            // `createRouteHandler({ request: schema, handler: async (req) => ... })`: an options
            // object names the handler.
            let in_options = args.iter().find_map(|a| {
                (a.kind_name() == "object")
                    .then(|| ast::object_property(*a, "handler", self.src()))
                    .flatten()
                    .map(ast::unwrap_expr)
                    .filter(|h| ast::is_function(*h))
            });
            let wrapped = args
                .iter()
                .rev()
                .find(|a| ast::is_function(**a) || ast::unwrap_expr(**a).kind_name() == "call_expression")
                .or(in_options.as_ref());
            let named = || {
                let names = args.iter().rev().filter(|a| a.kind_name() == "identifier");
                names
                    .clone()
                    .find(|a| self.resolve_function(text(**a, self.src())).is_some())
                    .or_else(|| names.into_iter().next())
            };
            let Some(inner) = wrapped.or_else(named).copied() else {
                return;
            };
            let wrapper_name = func.field("function").map(|f| text(f, self.src())).unwrap_or("");
            let verifies = crate::regex!(r"(?i)signature|webhook|hmac").is_match(wrapper_name);
            // `withWorkspace(handler)`, `withSession(handler)`: a route for signed-in people.
            let signed_in = user_auth(wrapper_name) || signed_in_wrapper(wrapper_name);
            let outer = self.wrapper_verifies;
            let outer_factory = self.factory_answers;
            let outer_user = self.user_authenticated;
            self.wrapper_verifies = outer || verifies;
            self.factory_answers = outer_factory || self.returns_a_function(func);
            self.user_authenticated = outer_user || signed_in;
            self.push(inner, name, framework, route_hint);
            self.wrapper_verifies = outer;
            self.factory_answers = outer_factory;
            self.user_authenticated = outer_user;
            return;
        } else {
            return;
        };
        self.push_at(func, file, name, framework, route_hint);
    }

    fn push_at(&mut self, func: Span, file: Arc<SourceFile>, name: String, framework: Framework, route_hint: &str) {
        if self.found.iter().any(|h| h.function == func && Arc::ptr_eq(&h.file, &file)) {
            return;
        }
        let Some(node) = file.node_at(func) else {
            return;
        };
        // A comment that mentions `validateRequest` or Stripe is no call to either.
        let code = super::stmts::code_without_comments(node, &file.text);
        let body_text = code.as_str();
        // A consumer handed no message (`@Process() async expireInviteCodes()`, a worker's
        // `async () => sweep()`) is a scheduled sweep: it queries its work afresh on every run,
        // and no event reaches it to be delivered twice. A poller that fetches its own messages
        // (`worker.getNextJob(token)`, an SQS receive loop) takes none either, and is a consumer.
        let pulls_messages = framework == Framework::SqsPolling || body_text.contains(".getNextJob(");
        if !framework.is_http() && !pulls_messages && ast::parameter_names(node, &file.text).is_empty() {
            return;
        }
        let verifies = providers::verifies_sender(body_text);
        let provider = match framework {
            Framework::Bullmq => Some(Provider::Bullmq),
            Framework::LambdaSqs | Framework::SqsPolling => Some(Provider::Sqs),
            Framework::Kafka => Some(Provider::Kafka),
            Framework::Amqp => Some(Provider::Amqp),
            Framework::Pubsub => Some(Provider::Pubsub),
            Framework::Inngest => Some(Provider::Inngest),
            Framework::TriggerDev => Some(Provider::Trigger),
            Framework::Octokit => Some(Provider::Github),
            Framework::CloudflareQueue => Some(Provider::CloudflareQueue),
            Framework::ShopifyWebhook => Some(Provider::Shopify),
            // its own queue client: no provider's delivery semantics or id apply
            Framework::JobRunner => None,
            Framework::EventListener => provider_from_words(route_hint),
            _ => providers::detect(body_text)
                .or_else(|| providers::detect(&self.file.text))
                .or_else(|| provider_from_words(route_hint)),
        };
        // `/api/events` is as often an app's own events resource (a calendar, a CRUD API) as a
        // provider's endpoint: that word alone needs a recognised provider.
        let events_only = {
            let lower = route_hint.to_ascii_lowercase();
            WEBHOOK_WORDS.iter().filter(|w| lower.contains(*w)).all(|w| *w == "events")
        };
        // An operator's route (`pages/api/admin/backfill.ts`, `POST /mod/grant`) is called by a
        // person or a cron job holding a token, not by a provider that redelivers: a wrapper
        // named for webhooks does not make it one. A provider named or verified in its own body
        // still does.
        let operator_route = framework.is_http()
            && (operator_path(&self.path) || operator_path(route_hint))
            && !verifies
            && providers::detect(body_text).is_none();
        if operator_route
            || answers_slack_command(body_text)
            || answers_slack_interaction(body_text, route_hint)
            || receives_supabase_database_webhook(body_text)
        {
            return;
        }
        if framework.is_http() && !verifies && manages_webhooks_route(route_hint, &name) {
            return;
        }
        // `POST /connect/:kind/callback` in `social-login.controller.ts`: a person's browser
        // back from a sign-in provider, whose code the handler's helpers read.
        let callback_only = {
            let lower = route_hint.to_ascii_lowercase();
            let words: Vec<&&str> = WEBHOOK_WORDS.iter().filter(|w| lower.contains(*w)).collect();
            words == [&"callback"]
        };
        if framework.is_http() && !verifies && provider.is_none() && callback_only && sign_in_words(&self.path) {
            return;
        }
        // A route that looks up the signed-in user and turns away anyone else serves people
        // (a settings page managing the app's own outgoing webhooks), whatever its path says
        // and whichever provider's SDK it calls. An OAuth redirect (`?code=...&state=...`)
        // brings a person's browser back from a provider's consent screen: it is not a
        // delivery either, even under `callback/`.
        let signed_in = || {
            self.user_authenticated
                || (!verifies
                    && (turns_away_signed_out(body_text)
                        || oauth_redirect(body_text)
                        || checks_signed_in_user(node, &file)))
        };
        // `/api/discord-webhook` relaying a form to Discord: the webhook its path names is the
        // one it sends to (`sendToDiscordWebhook(data)`), not a delivery it receives.
        if framework.is_http() && !verifies && provider.is_none() && relays_to_webhook(body_text) {
            return;
        }
        // Botpress calls an integration's handler only for requests to its webhook URL.
        let is_webhook = !framework.is_http()
            || framework == Framework::Botpress
            || self.wrapper_verifies
            || verifies
            || ((names_webhook(route_hint) && (!events_only || provider.is_some()))
                || (provider.is_some() && providers::detect(body_text).is_some()))
                && !signed_in();
        if !is_webhook {
            return;
        }
        let params = ast::parameter_names(node, &file.text);
        let (request, response) = request_response(framework, node, &file.text, &params);
        let mut handler = Handler {
            file: file.clone(),
            function: func,
            name,
            framework,
            provider,
            is_webhook,
            request,
            response,
            event_key: None,
            answered_by_factory: self.factory_answers,
            verified_by_wrapper: self.wrapper_verifies,
        };
        handler.event_key = super::keys::event_key(&handler, node, self.config);
        self.found.push(handler);
    }

    /// Route middleware that lets only signed-in people or holders of a permission through:
    /// `requireAuth`, `{ preHandler: requirePermission(["webhook::create"]) }`, or a name bound
    /// in this file to such a list (`const webAuth = [passport.authenticate("session"), ...]`).
    fn gates_people(&self, middleware: Node) -> bool {
        let src = self.src();
        let gates = |t: &str| user_auth(t) || admin_role(t) || permission_check(t);
        if gates(text(middleware, src)) {
            return true;
        }
        let name = ast::unwrap_expr(middleware);
        name.kind_name() == "identifier"
            && ast::find_binding_init(self.file.root(), text(name, src), src, middleware.start_byte())
                .is_some_and(|init| gates(text(init, src)))
    }

    /// A route registered on a chain that first lets only some people through:
    /// `secured.access(requires("endpoints:manage")).post(path, handler)`,
    /// `router.use(requireAuth).post(...)`.
    fn receiver_gates_people(&self, route_call: Node) -> bool {
        let mut receiver = route_call.field("function").and_then(|f| f.field("object"));
        while let Some(call) = receiver.filter(|r| r.kind_name() == "call_expression") {
            if ast::arguments(call).into_iter().any(|arg| self.gates_people(arg)) {
                return true;
            }
            receiver = call.field("function").and_then(|f| f.field("object"));
        }
        false
    }

    /// This file's Express router is mounted behind user authentication (`express_app::mounted_behind`).
    fn router_serves_signed_in_users(&mut self) -> bool {
        *self.mounted_signed_in.get_or_insert_with(|| {
            super::express_app::mounted_behind(self.project, self.file, &|m: &str| user_auth(m) || admin_role(m))
        })
    }

    /// `call`'s callee is a project function whose body returns a function (a handler factory).
    fn returns_a_function(&self, call: Node) -> bool {
        let Some(callee) = call.field("function").filter(|f| f.kind_name() == "identifier") else {
            return false;
        };
        let Some(def) = self.resolve_function(text(callee, self.src())) else { return false };
        let Some(factory) = def.node() else { return false };
        let Some(body) = factory.field("body") else { return false };
        if ast::is_function(ast::unwrap_expr(body)) {
            return true;
        }
        ast::named_children(body).into_iter().any(|stmt| {
            stmt.kind_name() == "return_statement"
                && stmt.named_child(0).map(ast::unwrap_expr).is_some_and(ast::is_function)
        })
    }

    fn resolve_function(&self, name: &str) -> Option<project::FunctionDef> {
        self.resolve_function_in(self.file, name)
    }

    /// `name` as `file` binds it: a function of its own or one it imports.
    fn resolve_function_in(&self, file: &Arc<SourceFile>, name: &str) -> Option<project::FunctionDef> {
        if let Some(def) = project::local_function(file, name) {
            return Some(def);
        }
        let import = project::imports(file).iter().find(|i| i.local == name)?;
        let target = self.project.resolve(&file.path, &import.source)?;
        let target = self.project.load(&target).ok()?;
        // `const handler = require("./handler")` binds the module: its `module.exports` function
        let exported = if import.imported == "*" { "default" } else { import.imported.as_str() };
        self.project.exported_function(&target, exported, 0)
    }

    /// `this.handleMessage` (as in `consumer.run({ eachMessage: this.handleMessage.bind(this) })`):
    /// a method, or a field holding a function, of the class the registration is written in.
    fn this_method(&self, member: Node) -> Option<project::FunctionDef> {
        let src = self.src();
        member.field("object").filter(|o| o.kind_name() == "this")?;
        let name = text(member.field("property")?, src);
        let class = ast::ancestors(member).find(|a| matches!(a.kind_name(), "class_declaration" | "class"))?;
        let body = class.field("body")?;
        ast::named_children(body).into_iter().find_map(|m| {
            let (key, func) = match m.kind_name() {
                "method_definition" => (m.field("name")?, m),
                "public_field_definition" | "field_definition" => {
                    (m.field("name")?, ast::unwrap_expr(m.field("value")?))
                }
                _ => return None,
            };
            (text(key, src) == name && ast::is_function(func)).then(|| project::FunctionDef {
                file: self.file.clone(),
                span: Span::of(func),
                name: name.to_string(),
            })
        })
    }

    /// `object.method` as a route handler: a method of the class or object that `object` names
    /// (here or in the module it is imported from), or a function that module exports.
    fn resolve_method(&self, member: Node) -> Option<project::FunctionDef> {
        let src = self.src();
        let object = member.field("object").filter(|o| o.kind_name() == "identifier")?;
        let method = text(member.field("property")?, src);
        let object = text(object, src);
        // `const controller = new WebhookController()` with the class imported: look in its module
        let class = ast::find_binding_init(self.file.root(), object, src, member.start_byte())
            .map(ast::unwrap_expr)
            .filter(|init| init.kind_name() == "new_expression")
            .and_then(|init| init.field("constructor"))
            .filter(|c| c.kind_name() == "identifier")
            .map(|c| text(c, src));
        let imports = project::imports(self.file);
        let import = imports
            .iter()
            .find(|i| i.local == object)
            .or_else(|| imports.iter().find(|i| Some(i.local.as_str()) == class));
        let file = match import {
            Some(import) => {
                let target = self.project.resolve(&self.file.path, &import.source)?;
                let target = self.project.load(&target).ok()?;
                if let Some(def) = self.project.exported_function(&target, method, 0) {
                    return Some(def);
                }
                target
            }
            None => self.file.clone(),
        };
        let mut found = None;
        ast::walk(file.root(), &mut |n| {
            if found.is_none()
                && matches!(n.kind_name(), "method_definition" | "pair")
                && n.child_by_field_name(if n.kind_name() == "pair" { "key" } else { "name" })
                    .is_some_and(|k| text(k, &file.text) == method)
            {
                let f = if n.kind_name() == "pair" {
                    n.field("value").and_then(|v| wrapped_function(ast::unwrap_expr(v), &file.text))
                } else {
                    Some(n)
                };
                if let Some(f) = f.filter(|f| ast::is_function(*f)) {
                    found =
                        Some(project::FunctionDef { file: file.clone(), span: Span::of(f), name: method.to_string() });
                }
            }
            found.is_none()
        });
        found
    }

    fn export(&mut self, node: Node, path: &str, is_route_file: bool, is_pages_api: bool) {
        let src = self.src();
        let is_default = (0..node.child_count()).filter_map(|i| node.child(i)).any(|c| c.kind_name() == "default");
        if is_pages_api && is_default {
            let func = node.field("declaration").or_else(|| node.field("value"));
            if let Some(func) = func {
                self.push(func, format!("default export ({})", short_path(path)), Framework::NextPagesApi, path);
            }
            return;
        }
        if is_default
            && let Some(value) = node.field("declaration").or_else(|| node.field("value"))
            && self.graphile_worker_task(value, path)
        {
            return;
        }
        // Vercel `api/` and Netlify `netlify/functions/` files: the default export is the function,
        // `(req, res)` (Node helpers) or `(request: Request)` answering a Response
        if is_default && (path.contains("/api/") || path.starts_with("api/") || path.contains("netlify/functions/")) {
            let func = node.field("declaration").or_else(|| node.field("value"));
            // `const handler = async (req, res) => {...}; export default handler`
            let func = func.map(ast::unwrap_expr).and_then(|f| match f.kind_name() {
                "identifier" => {
                    project::local_function(self.file, text(f, src)).and_then(|d| self.file.node_at(d.span))
                }
                _ => Some(f),
            });
            if let Some(func) = func.filter(|f| ast::is_function(*f)) {
                let params = ast::parameter_names(func, src);
                let named = |i: usize, names: &[&str]| params.get(i).is_some_and(|p| names.contains(&p.as_str()));
                // not a plugin or router factory: `(fastify, opts)`, `(app)`
                let framework = match params.len() {
                    1 if named(0, &["req", "request"]) => Framework::DenoServe,
                    2 if named(0, &["req", "request"]) && named(1, &["res", "response"]) => Framework::NextPagesApi,
                    // a route folder's middleware files (Evershop's `api/<route>/[before]handler.ts`)
                    3 if named(0, &["req", "request"]) && named(1, &["res", "response"]) && named(2, &["next"]) => {
                        Framework::Express
                    }
                    _ => return,
                };
                self.push(func, format!("default export ({})", short_path(path)), framework, path);
            }
            return;
        }
        let Some(decl) = node.field("declaration") else {
            // `export { POST } from "@/lib/webhooks/stripe"`, `export { default } from "@acme/billing/webhook"`
            if let Some(source) = node.field("source").and_then(|s| ast::string_value(s, src)) {
                self.reexport(node, &source, path, is_route_file || names_webhook(path), is_pages_api);
                return;
            }
            // `const handler: SQSHandler = ...` ... `export default handler`
            if is_default && let Some(local) = node.field("value").filter(|v| v.kind_name() == "identifier") {
                self.exported_local_lambda(text(local, src), "default", path);
            }
            // `async function POST(...) {}` ... `export { POST }` (or `export { handler as POST }`)
            for clause in ast::named_children(node).into_iter().filter(|c| c.kind_name() == "export_clause") {
                for spec in ast::named_children(clause) {
                    let Some(local) = spec.field("name") else { continue };
                    let exported = text(spec.field("alias").unwrap_or(local), src);
                    if exported == "handler" || exported == "default" || exported.ends_with("Handler") {
                        self.exported_local_lambda(text(local, src), exported, path);
                    }
                    if is_route_file || names_webhook(path) {
                        let method = exported;
                        if ["POST", "PUT", "PATCH"].contains(&method) {
                            let framework = self.route_framework(path);
                            self.push(local, format!("{method} {}", short_path(path)), framework, path);
                        }
                    }
                }
            }
            return;
        };
        let mut candidates: Vec<(String, Node)> = Vec::new();
        if ast::is_function(decl) {
            if let Some(n) = decl.field("name") {
                candidates.push((text(n, src).to_string(), decl));
            }
        } else {
            for d in ast::named_children(decl).into_iter().filter(|c| c.kind_name() == "variable_declarator") {
                if let (Some(n), Some(v)) = (d.field("name"), d.field("value")) {
                    candidates.push((text(n, src).to_string(), v));
                    let declared_type = d.field("type").map(|t| text(t, src)).unwrap_or("");
                    if declared_type.contains("SQSHandler") || declared_type.contains("Handler<SQSEvent") {
                        self.push(
                            v,
                            format!("Lambda {} ({})", text(n, src), short_path(path)),
                            Framework::LambdaSqs,
                            path,
                        );
                    }
                    if botpress_handler_type(declared_type) {
                        let name = format!("botpress handler {} ({})", text(n, src), short_path(path));
                        self.push(v, name, Framework::Botpress, path);
                    }
                }
            }
        }
        for (name, func) in candidates {
            let upper = name.as_str();
            if self.firebase_on_request(func, &name, path) {
                continue;
            }
            if self.sdk_webhook_callbacks(func, path) {
                continue;
            }
            if let Some(action) = convex_http_action(func, src) {
                let hint = format!("{name} {path}");
                self.push(action, format!("httpAction {name} ({})", short_path(path)), Framework::ConvexHttp, &hint);
            } else if ["POST", "PUT", "PATCH"].contains(&upper) && (is_route_file || names_webhook(path)) {
                // a route module whose handler takes `(req, res)` (Medusa's `route.ts`) answers
                // Express-style, whatever its file name shares with Next.js
                let framework = match ast::unwrap_expr(func) {
                    f if ast::is_function(f) && req_res(f, src) => Framework::Express,
                    _ => self.route_framework(path),
                };
                self.push(func, format!("{upper} {}", short_path(path)), framework, path);
            } else if name == "action" && path.contains("routes") {
                self.push(func, format!("action ({})", short_path(path)), Framework::Remix, path);
            } else if name == "handler"
                || name.ends_with("Handler")
                // SST's and Serverless' other conventional export (`handler: "functions/x.main"`)
                || name == "main"
                || lambda_wrapper(func, src)
                || ast::parameter_type(ast::unwrap_expr(func), 0, src).is_some_and(|t| t.contains("SQSEvent"))
            {
                self.lambda_candidate(func, &name, path);
            }
        }
    }

    /// `export const stripeWebhook = async (request, response, context) => {...}`: an
    /// Express-style handler whose route is declared elsewhere (Wasp's `main.wasp`, a router
    /// file, a framework config); its name says it receives deliveries. Runs after every other
    /// shape, so a route registered in this file names the handler by its route.
    fn webhook_named_export(&mut self, node: Node, path: &str) {
        let src = self.src();
        let Some(decl) = node.field("declaration") else { return };
        let mut named: Vec<(String, Node)> = Vec::new();
        if decl.kind_name() == "function_declaration" {
            named.extend(decl.field("name").map(|n| (text(n, src).to_string(), decl)));
        } else {
            for d in ast::named_children(decl).into_iter().filter(|c| c.kind_name() == "variable_declarator") {
                if let (Some(n), Some(v)) = (d.field("name"), d.field("value")) {
                    named.push((text(n, src).to_string(), ast::unwrap_expr(v)));
                }
            }
        }
        for (name, func) in named {
            if !names_webhook(&name) || manages_webhooks(&name) || !ast::is_function(func) {
                continue;
            }
            let framework = if req_res(func, src) {
                Framework::Express
            } else if fetch_request(func, src) {
                // `export async function stripeWebhookHandler(request: Request, ctx)`: a fetch
                // handler a plugin registry or router mounts out of sight.
                Framework::DenoServe
            } else {
                continue;
            };
            let hint = format!("{name} {path}");
            self.push(func, format!("export {name} ({})", short_path(path)), framework, &hint);
        }
    }

    /// Firebase HTTPS functions: `export const stripeWebhook = onRequest(opts?, async (req, res) => ...)`,
    /// `exports.hook = functions.region(r).https.onRequest(fn)`: an Express-style handler, a
    /// webhook as any route is (its export name or file names one, or it verifies a sender).
    fn firebase_on_request(&mut self, value: Node, name: &str, path: &str) -> bool {
        let src = self.src();
        let call = ast::unwrap_expr(value);
        let on_request = call.kind_name() == "call_expression"
            && call.field("function").is_some_and(|f| match f.kind_name() {
                "identifier" => text(f, src) == "onRequest",
                "member_expression" => f.field("property").is_some_and(|p| text(p, src) == "onRequest"),
                _ => false,
            });
        if !on_request {
            return false;
        }
        if let Some(func) =
            ast::arguments(call).into_iter().rev().find(|a| ast::is_function(*a) || a.kind_name() == "identifier")
        {
            let hint = format!("{name} {path}");
            self.push(func, format!("firebase function {name} ({})", short_path(path)), Framework::Express, &hint);
        }
        true
    }

    fn pair(&mut self, pair: Node) {
        let src = self.src();
        match pair.field("key").map(|k| text(k, src)) {
            Some("queue") => {
                // `export default { fetch: app.fetch, queue: async (batch, env) => {...} }`
                let Some(value) = pair.field("value").map(ast::unwrap_expr) else { return };
                let params = ast::parameter_names(value, src);
                if ast::is_function(value) && self.exported_by_default(pair) && (1..=3).contains(&params.len()) {
                    let name = format!("cloudflare queue consumer ({})", short_path(&self.file.path.to_string_lossy()));
                    self.push(value, name, Framework::CloudflareQueue, "");
                }
            }
            Some("subscription") => self.pubsub_worker_object(pair),
            _ => self.shopify_webhook_callback(pair),
        }
    }

    /// A worker object a shared Pub/Sub subscriber runs (`workers.forEach((w) =>
    /// workerSubscribe(pubsub, w.subscription, w.handler))`): `{ subscription: "api.new-view",
    /// handler: async (message, con) => {...} }` in a package that depends on
    /// `@google-cloud/pubsub`. Its `handler` takes one message per call.
    fn pubsub_worker_object(&mut self, pair: Node) {
        let src = self.src();
        let Some(subscription) = pair.field("value").and_then(|v| ast::string_value(v, src)) else {
            return;
        };
        let Some(object) = pair.parent().filter(|p| p.kind_name() == "object") else { return };
        let Some(handler) = ast::object_property(object, "handler", src).map(ast::unwrap_expr) else { return };
        if !ast::is_function(handler) || ast::parameter_names(handler, src).is_empty() {
            return;
        }
        let depends = project::package_root(&self.file.path)
            .and_then(|root| project::read_text(&root.join("package.json")).ok())
            .is_some_and(|manifest| manifest.contains("\"@google-cloud/pubsub\""));
        if depends {
            self.push(handler, format!("pubsub worker {subscription}"), Framework::Pubsub, "");
        }
    }

    /// BullMQ's manual processing: a loop that takes `const job = await worker.getNextJob(token)`
    /// and hands it to the processor it was given (`runWorker(queue, processJob)` calling
    /// `processor(token, job)`): each processor passed at a call of the loop function in this file
    /// is the handler. A loop that works on the job itself is its own handler.
    fn manual_worker_loop(&mut self, call: Node) {
        let src = self.src();
        let Some(job) = ast::ancestors(call)
            .take_while(|a| !ast::is_function(*a))
            .find(|a| a.kind_name() == "variable_declarator")
            .and_then(|d| d.field("name"))
            .filter(|n| n.kind_name() == "identifier")
            .map(|n| text(n, src))
        else {
            return;
        };
        let Some(func) = ast::enclosing_function(call) else { return };
        let params = ast::parameter_names(func, src);
        let name = format!("worker loop ({})", short_path(&self.path.clone()));
        // the parameter the job is handed to: `await processor(token, job)`
        let processor = ast::calls_in(func, true).into_iter().find_map(|c| {
            let callee = c.field("function").filter(|f| f.kind_name() == "identifier")?;
            let index = params.iter().position(|p| p == text(callee, src))?;
            let job_index = ast::arguments(c).iter().position(|a| text(*a, src) == job)?;
            Some((index, job_index))
        });
        let Some((index, job_index)) = processor else {
            return self.push(func, name, Framework::Bullmq, "");
        };
        let loop_name = func
            .field("name")
            .or_else(|| func.parent().filter(|p| p.kind_name() == "variable_declarator")?.field("name"))
            .map(|n| text(n, src).to_string());
        let Some(loop_name) = loop_name else { return };
        let mut processors = Vec::new();
        ast::walk(self.file.root(), &mut |n| {
            if n.kind_name() == "call_expression"
                && n.field("function").is_some_and(|f| f.kind_name() == "identifier" && text(f, src) == loop_name)
                && let Some(arg) = ast::arguments(n).get(index)
            {
                processors.push(*arg);
            }
            true
        });
        for processor in processors {
            let before = self.found.len();
            self.push(processor, name.clone(), Framework::Bullmq, "");
            // the job is not necessarily the processor's first parameter: `(token, job)`
            for handler in &mut self.found[before..] {
                let file = handler.file.clone();
                handler.event_key = file
                    .node_at(handler.function)
                    .and_then(|f| ast::parameter(f, job_index))
                    .filter(|p| p.kind_name() == "identifier")
                    .map(|p| EventKey::new(Provider::Bullmq, format!("${{{}.id}}", text(p, &file.text))));
            }
        }
    }

    /// A queue client's runner: `createRunner(queue, { run, onComplete, onError }, opts)`,
    /// `new Runner(queue, { run })`. Only `run` handles the job; the callbacks report its outcome.
    fn job_runner(&mut self, args: &[Node]) {
        let src = self.src();
        let Some(opts) = args.get(1).filter(|a| a.kind_name() == "object") else { return };
        let Some(run) = ast::object_property(*opts, "run", src) else { return };
        let run = if run.kind_name() == "method_definition" { run } else { ast::unwrap_expr(run) };
        let queue = text(args[0], src);
        self.push(run, format!("job runner {queue} ({})", short_path(&self.path.clone())), Framework::JobRunner, "");
    }

    /// `@shopify/shopify-api` webhook handlers (`shopify.webhooks.addHandlers({...})`, the
    /// `webhooks` of `shopifyApp({...})`, a handlers module): the `callback` of an object that
    /// also names a `deliveryMethod`.
    fn shopify_webhook_callback(&mut self, pair: Node) {
        let src = self.src();
        let Some(object) = pair.parent().filter(|o| o.kind_name() == "object") else { return };
        if ast::object_property(object, "deliveryMethod", src).is_none() {
            return;
        }
        let Some(callback) = pair.field("value") else { return };
        // the topic is the key the handler object is filed under: `ORDERS_CREATE: { ... }`
        let topic = object
            .parent()
            .filter(|p| p.kind_name() == "pair")
            .and_then(|p| p.field("key"))
            .map(|k| ast::string_value(k, src).unwrap_or_else(|| text(k, src).to_string()))
            .unwrap_or_default();
        self.push(callback, format!("shopify webhook {topic}"), Framework::ShopifyWebhook, "");
    }

    /// Payment SDKs' webhook adapters (`export const POST = Webhooks({ webhookSecret, onPayload,
    /// onOrderPaid })` from `@polar-sh/nextjs`, ...; a better-auth plugin's `webhooks({
    /// webhookKey, onSubscriptionActive })` from `@dodopayments/better-auth`): the adapter
    /// verifies the delivery, calls each `on...` callback with the event, answers 200 when they
    /// resolve and fails the request when one throws. Each callback is a handler. The adapter is
    /// known by its import from a package and by the signing secret among its options.
    fn sdk_webhook_callbacks(&mut self, value: Node, path: &str) -> bool {
        let src = self.src();
        let value = ast::unwrap_expr(value);
        let Some(callee) = ast::callee_name(value, src).filter(|_| value.kind_name() == "call_expression") else {
            return false;
        };
        if !callee.eq_ignore_ascii_case("webhooks") {
            return false;
        }
        // Imported from a package: a specifier no project file answers to, and no path alias
        // (`@/lib/...`, `~/...`) when the alias configuration is out of reach.
        let aliased = |spec: &str| spec.starts_with(['.', '~']) || spec.starts_with("@/");
        let Some(package) = project::imports(self.file)
            .iter()
            .find(|i| {
                i.local == callee && !aliased(&i.source) && self.project.resolve(&self.file.path, &i.source).is_none()
            })
            .map(|i| i.source.clone())
        else {
            return false;
        };
        let Some(options) = ast::arguments(value).first().copied().filter(|a| a.kind_name() == "object") else {
            return false;
        };
        let signed = ast::named_children(options).into_iter().any(|p| {
            let key = match p.kind_name() {
                "pair" => p.field("key").map(|k| text(k, src)),
                "shorthand_property_identifier" => Some(text(p, src)),
                _ => None,
            };
            key.is_some_and(|k| crate::regex!(r"(?i)secret|webhookkey|signingkey").is_match(k))
        });
        if !signed {
            return false;
        }
        // Each callback as written in place, or the function its name binds (here or imported).
        let callbacks: Vec<(String, Span, Arc<SourceFile>)> = ast::named_children(options)
            .into_iter()
            .filter_map(|p| {
                let (key, value) = match p.kind_name() {
                    "pair" => (text(p.field("key")?, src), ast::unwrap_expr(p.field("value")?)),
                    "shorthand_property_identifier" => (text(p, src), p),
                    "method_definition" => (text(p.field("name")?, src), p),
                    _ => return None,
                };
                if !crate::regex!(r"^on[A-Z]").is_match(key) {
                    return None;
                }
                if ast::is_function(value) || value.kind_name() == "method_definition" {
                    return Some((key.to_string(), Span::of(value), self.file.clone()));
                }
                let def = self.resolve_function(text(value, src))?;
                Some((key.to_string(), def.span, def.file))
            })
            .collect();
        for (key, span, file) in callbacks {
            let before = self.found.len();
            let sdk = if package.starts_with("@polar-sh/") { "polar" } else { package.as_str() };
            let name = format!("{sdk} webhook {key} ({})", short_path(path));
            self.push_at(span, file, name, Framework::EventListener, &package);
            for handler in &mut self.found[before..] {
                handler.event_key = None;
            }
        }
        true
    }

    /// A Lambda declared in the module and exported by name or as the default export.
    fn exported_local_lambda(&mut self, local: &str, exported: &str, path: &str) {
        let src = self.src();
        let root = self.file.root();
        for statement in ast::named_children(root) {
            match statement.kind_name() {
                "function_declaration" if statement.field("name").is_some_and(|n| text(n, src) == local) => {
                    return self.lambda_candidate(statement, exported, path);
                }
                "lexical_declaration" | "variable_declaration" => {
                    for d in
                        ast::named_children(statement).into_iter().filter(|c| c.kind_name() == "variable_declarator")
                    {
                        if d.field("name").is_none_or(|n| text(n, src) != local) {
                            continue;
                        }
                        let Some(value) = d.field("value") else { return };
                        let declared_type = d.field("type").map(|t| text(t, src)).unwrap_or("");
                        if declared_type.contains("SQSHandler") || declared_type.contains("Handler<SQSEvent") {
                            let name = format!("Lambda {exported} ({})", short_path(path));
                            return self.push(value, name, Framework::LambdaSqs, path);
                        }
                        return self.lambda_candidate(value, exported, path);
                    }
                }
                _ => {}
            }
        }
    }

    fn lambda_candidate(&mut self, func: Node, name: &str, path: &str) {
        let local_function = |name: Node| {
            let def = project::local_function(self.file, text(name, self.src()))?;
            self.file.node_at(def.span)
        };
        let mut func = ast::unwrap_expr(func);
        // `export const main = handleMessage`: the module's own function under another name.
        if func.kind_name() == "identifier"
            && let Some(node) = local_function(func)
        {
            func = node;
        }
        // wrapped: `middy(fn).use(...)`, `withTelemetry(async (event: SQSEvent) => ...)`
        while func.kind_name() == "call_expression" {
            let args = ast::arguments(func);
            if let Some(f) = args.iter().rev().find(|a| ast::is_function(**a)) {
                func = *f;
                break;
            }
            let local = args.iter().rev().filter(|a| a.kind_name() == "identifier").find_map(|a| local_function(*a));
            if let Some(node) = local {
                func = node;
                break;
            }
            match func
                .field("function")
                .filter(|f| f.kind_name() == "member_expression")
                .and_then(|f| f.field("object"))
                .filter(|o| o.kind_name() == "call_expression")
            {
                Some(inner) => func = inner,
                None => break,
            }
        }
        if !ast::is_function(func) {
            return;
        }
        let src = self.src();
        let typed = ast::parameter_type(func, 0, src).is_some_and(|t| t.contains("SQSEvent"))
            || jsdoc_above(func, src).is_some_and(|doc| doc.contains("SQSEvent"));
        let records = text(func, src).contains(".Records");
        if typed || records {
            self.push(func, format!("Lambda {name} ({})", short_path(path)), Framework::LambdaSqs, path);
        }
    }

    /// A route module that re-exports its handler from another module.
    fn reexport(&mut self, node: Node, source: &str, path: &str, is_route: bool, is_pages_api: bool) {
        let src = self.src();
        for clause in ast::named_children(node).into_iter().filter(|c| c.kind_name() == "export_clause") {
            for spec in ast::named_children(clause) {
                let Some(imported) = spec.field("name") else { continue };
                let exported = text(spec.field("alias").unwrap_or(imported), src);
                let (name, framework) = match exported {
                    "default" if is_pages_api => {
                        (format!("default export ({})", short_path(path)), Framework::NextPagesApi)
                    }
                    "POST" | "PUT" | "PATCH" if is_route => {
                        (format!("{exported} {}", short_path(path)), self.route_framework(path))
                    }
                    _ => continue,
                };
                let Some(target) = self.project.resolve(&self.file.path, source) else { continue };
                let Ok(target) = self.project.load(&target) else { continue };
                if let Some(def) = self.project.exported_function(&target, text(imported, src), 0) {
                    self.push_at(def.span, def.file, name, framework, path);
                }
            }
        }
    }

    /// graphile-worker's task files: `const task: Task = async (payload, helpers) => {...}` in a
    /// module importing `graphile-worker`, exported as the module (`export default task`,
    /// `module.exports = task`) from a `tasks/` folder or typed `Task`. A job runs once per
    /// attempt and a failed one is retried. Whether `value` was such a task (and pushed).
    fn graphile_worker_task(&mut self, value: Node, path: &str) -> bool {
        let src = self.src();
        if !project::imports(self.file).iter().any(|i| i.source == "graphile-worker") {
            return false;
        }
        let value = ast::unwrap_expr(value);
        let (func, typed) = match value.kind_name() {
            "identifier" => {
                let name = text(value, src);
                let typed = ast::descendants_of_kind(self.file.root(), "variable_declarator").into_iter().any(|d| {
                    d.field("name").is_some_and(|n| text(n, src) == name)
                        && d.field("type").is_some_and(|t| text(t, src).trim_start_matches(':').trim() == "Task")
                });
                (project::local_function(self.file, name).and_then(|d| self.file.node_at(d.span)), typed)
            }
            _ => (Some(value), false),
        };
        let in_tasks_folder = path.split(['/', '\\']).any(|seg| seg == "tasks");
        let Some(func) = func.filter(|f| ast::is_function(*f) && !ast::parameter_names(*f, src).is_empty()) else {
            return false;
        };
        if !typed && !in_tasks_folder {
            return false;
        }
        self.push(func, format!("graphile-worker task ({})", short_path(path)), Framework::JobRunner, "");
        true
    }

    /// CommonJS exports: `module.exports = handler` in `pages/api/` (or a `(req, res)` function in
    /// a Vercel `api/` file), and Lambdas: `exports.handler = async (event) => ...`.
    fn commonjs_export(&mut self, node: Node, path: &str, is_pages_api: bool, is_function_dir: bool) {
        let src = self.src();
        let Some(assign) = node.named_child(0).filter(|n| n.kind_name() == "assignment_expression") else {
            return;
        };
        let (Some(left), Some(right)) = (assign.field("left"), assign.field("right")) else {
            return;
        };
        let target = ast::member_path(left, src);
        if target == ["module", "exports"] {
            if self.graphile_worker_task(right, path) {
                return;
            }
            let func = ast::unwrap_expr(right);
            if is_pages_api || (is_function_dir && ast::is_function(func) && req_res(func, src)) {
                self.push(right, format!("default export ({})", short_path(path)), Framework::NextPagesApi, path);
                return;
            }
        }
        if let Some(name) = target.last()
            && (target.first().map(String::as_str) == Some("exports")
                || target.get(1).map(String::as_str) == Some("exports"))
        {
            let name = name.clone();
            if self.firebase_on_request(right, &name, path) {
                return;
            }
            self.lambda_candidate(right, &name, path);
        }
    }

    fn call(&mut self, call: Node) {
        let src = self.src();
        let path = ast::callee_path_shared(call, src);
        let args = ast::arguments(call);
        let Some(method) = path.last().map(|s| s.to_ascii_lowercase()) else {
            return;
        };
        let file_path = self.path.clone();
        // A payment SDK's webhook adapter wherever it is built (inside a plugin list, say).
        if path.len() == 1 && self.sdk_webhook_callbacks(call, &file_path) {
            return;
        }
        // app.post('/path', ...middleware, handler) — Express, Koa router, Hono, Fastify
        if path.len() >= 2 && HTTP_METHODS.contains(&method.as_str()) && args.len() >= 2 {
            // router.route('/path').post(mw, handler): every argument before the handler is middleware
            let chained = chained_route(call, src);
            let route = match ast::string_value(args[0], src) {
                Some(r) => r,
                None if args[0].kind_name() == "template_string" => text(args[0], src).to_string(),
                None => match chained.clone() {
                    Some(r) => r,
                    // app.post(WEBHOOK_PATH, handler), app.post(paths.stripeHook, handler)
                    None if matches!(args[0].kind_name(), "identifier" | "member_expression")
                        && path_constant(text(args[0], src)) =>
                    {
                        text(args[0], src).to_string()
                    }
                    None => return,
                },
            };
            // an outbound call with a completion callback: `request.post("https://hooks.slack.com/...", body, cb)`
            if crate::regex!(r"^[`'\x22]?(?:https?:)?//").is_match(&route) {
                return;
            }
            let mut framework = self.http_framework();
            let mut handler = *args.last().unwrap();
            // fastify.post(path, { config, handler }): only Fastify takes its handler in options
            if handler.kind_name() == "object"
                && let Some(h) = ast::object_property(handler, "handler", src)
            {
                handler = h;
                framework = Framework::Fastify;
            }
            let name = format!("{} {route}", method.to_ascii_uppercase());
            let first_middleware = if chained.is_some() && ast::string_value(args[0], src).is_none() { 0 } else { 1 };
            let middleware = &args[first_middleware..args.len() - 1];
            self.user_authenticated = middleware.iter().any(|m| self.gates_people(*m))
                || self.receiver_gates_people(call)
                || self.router_serves_signed_in_users();
            // `verifyWebhookSignature` before the handler: the route receives signed deliveries,
            // whatever its path is called (`/resend/event-handler`).
            let verified_by_middleware = middleware.iter().any(|m| {
                crate::regex!(r"(?i)^verify\w*(webhook|signature)|^\w*webhook\w*(verif|signature)")
                    .is_match(text(ast::unwrap_expr(*m), src))
            });
            let hint = if verified_by_middleware {
                format!("{route} {file_path} webhook")
            } else {
                format!("{route} {file_path}")
            };
            self.push(handler, name, framework, &hint);
            self.user_authenticated = false;
            return;
        }
        // app.route('/path').post(handler)
        if path.len() >= 2 && HTTP_METHODS.contains(&method.as_str()) && args.len() == 1 {
            if let Some(route) = chained_route(call, src) {
                let framework = self.http_framework();
                let hint = format!("{route} {file_path}");
                self.push(args[0], format!("{} {route}", method.to_ascii_uppercase()), framework, &hint);
            } else if (file_path.contains("/pages/api/") || file_path.starts_with("pages/api/"))
                && (ast::is_function(args[0]) || args[0].kind_name() == "identifier")
            {
                // next-connect: nc().use(mw).post(handler), router.post(handler) in pages/api
                let name = format!("{} ({})", method.to_ascii_uppercase(), short_path(&file_path));
                self.push(args[0], name, Framework::NextPagesApi, &file_path);
            }
            return;
        }
        match (method.as_str(), path.len()) {
            // fastify.route({ method: 'POST', url, handler })
            ("route", n) if n >= 2 => {
                if let Some(opts) = args.first().filter(|a| a.kind_name() == "object")
                    && let Some(h) = ast::object_property(*opts, "handler", src)
                {
                    let url = ast::object_property(*opts, "url", src)
                        .or_else(|| ast::object_property(*opts, "path", src))
                        .and_then(|u| ast::string_value(u, src))
                        .unwrap_or_default();
                    let m = ast::object_property(*opts, "method", src).map(|m| text(m, src).to_ascii_uppercase());
                    if m.is_some_and(|m| m.contains("POST") || m.contains("PUT") || m.contains("PATCH")) {
                        self.push(h, format!("POST {url}"), Framework::Fastify, &format!("{url} {file_path}"));
                    }
                }
            }
            // `@hono/zod-openapi`: `app.openapi(createRoute({ method, path, ... }), handler)`
            ("openapi", n) if n >= 2 && args.len() >= 2 => {
                self.openapi_route(args[0], args[args.len() - 1], &file_path)
            }
            // oRPC: `procedure.route({ method: "POST", path }).input(schema).handler(fn)`
            ("handler", n) if n >= 2 && args.len() == 1 => self.orpc_route(call, args[0], &file_path),
            // Bull's `queue.process([name], [concurrency], fn)`: anything else before the function
            // is data, as in a batching helper's `limiter.process(ids, (batch) => ...)`
            // (not a builder's: `PromisePool.withConcurrency(5).for(items).process(fn)` maps items)
            ("process", n)
                if n >= 2
                    && args[..args.len().saturating_sub(1)].iter().all(|a| queue_option_arg(*a, src))
                    && !built_by_chain(call, src) =>
            {
                if let Some(f) = args.last() {
                    let name = format!("queue processor ({})", short_path(&file_path));
                    match self.sandboxed_processor(*f) {
                        Some(def) => self.push_at(def.span, def.file, name, Framework::Bullmq, ""),
                        None => self.push(*f, name, Framework::Bullmq, ""),
                    }
                }
            }
            ("run", n) if n >= 2 => {
                if let Some(opts) = args.first().filter(|a| a.kind_name() == "object") {
                    for key in ["eachMessage", "eachBatch"] {
                        if let Some(f) = ast::object_property(*opts, key, src) {
                            let f = if f.kind_name() == "method_definition" { f } else { ast::unwrap_expr(f) };
                            self.push(f, format!("kafka {key} ({})", short_path(&file_path)), Framework::Kafka, "");
                        }
                    }
                }
            }
            // sqs-consumer: `Consumer.create({ queueUrl, handleMessage })` deletes the message
            // when the handler resolves; a throw leaves it to come back after the visibility timeout.
            ("create", 2) if path[0] == "Consumer" && self.file.text.contains("sqs-consumer") => {
                if let Some(opts) = args.first().filter(|a| a.kind_name() == "object") {
                    for key in ["handleMessage", "handleMessageBatch"] {
                        if let Some(f) = ast::object_property(*opts, key, src) {
                            let f = if f.kind_name() == "method_definition" { f } else { ast::unwrap_expr(f) };
                            let name = format!("sqs-consumer {key} ({})", short_path(&file_path));
                            self.push(f, name, Framework::SqsPolling, "");
                        }
                    }
                }
            }
            // the client is often awaited in place: `(await getQueueClient()).createRunner(...)`
            ("createrunner", _) => self.job_runner(&args),
            ("getnextjob", n) if n >= 2 => self.manual_worker_loop(call),
            ("consume", n) if n >= 2 && args.len() >= 2 => {
                self.push(args[1], format!("amqp consumer ({})", short_path(&file_path)), Framework::Amqp, "");
            }
            ("on", n) if n >= 2 && args.len() >= 2 => {
                let event = ast::string_value(args[0], src).unwrap_or_else(|| text(args[0], src).to_string());
                let t = &self.file.text;
                // the registry may come from a helper module (`getOctoApp().webhooks`): the
                // delivery it is handed in the same file says what it is
                let octokit = t.contains("octokit")
                    || t.contains("webhooks.verifyAndReceive(")
                    || t.contains("webhooks.receive(");
                if path[n - 2] == "webhooks" && octokit || n == 2 && self.octokit_webhooks_instance(&path[0], call) {
                    self.push(args[1], format!("octokit on {event}"), Framework::Octokit, "");
                } else if self.probot_app() && github_event_names(args[0], src) {
                    self.push(args[1], format!("probot on {event}"), Framework::Octokit, "");
                } else if ast::string_value(args[0], src).as_deref() == Some("message")
                    && (self.file.text.contains("@google-cloud/pubsub")
                        || path[path.len() - 2].to_ascii_lowercase().contains("subscription"))
                {
                    self.push(
                        args[1],
                        format!("pub/sub subscriber ({})", short_path(&file_path)),
                        Framework::Pubsub,
                        "",
                    );
                }
            }
            ("createfunction", _) => {
                if let Some(f) = args.last() {
                    let id = args
                        .first()
                        .filter(|a| a.kind_name() == "object")
                        .and_then(|o| ast::object_property(*o, "id", src))
                        .and_then(|v| ast::string_value(v, src))
                        .unwrap_or_default();
                    self.push(*f, format!("inngest function {id}"), Framework::Inngest, "");
                }
            }
            ("task" | "schematask", _) if self.file.text.contains("@trigger.dev") => {
                if let Some(opts) = args.first().filter(|a| a.kind_name() == "object")
                    && let Some(run) = ast::object_property(*opts, "run", src)
                {
                    let id = ast::object_property(*opts, "id", src)
                        .and_then(|v| ast::string_value(v, src))
                        .unwrap_or_default();
                    let run = if run.kind_name() == "method_definition" { run } else { ast::unwrap_expr(run) };
                    self.push(run, format!("trigger.dev task {id}"), Framework::TriggerDev, "");
                }
            }
            ("defineeventhandler" | "eventhandler", 1) => self.h3_route(call, &file_path),
            ("serve", _) if path.len() == 1 || path[0] == "Deno" => {
                if let Some(f) = args.iter().rev().find(|a| ast::is_function(**a)) {
                    self.push(*f, format!("serve ({})", short_path(&file_path)), Framework::DenoServe, &file_path);
                }
            }
            ("send", _) => {
                // An SQS polling loop: the enclosing top-level function is the consumer.
                // also through a variable: `const cmd = new ReceiveMessageCommand(...); sqs.send(cmd)`
                let receive = |a: &Node| {
                    text(*a, src).contains("ReceiveMessageCommand")
                        || a.kind_name() == "identifier"
                            && ast::enclosing_function(call).is_some_and(|f| {
                                let decl = format!("{} = new ReceiveMessageCommand", text(*a, src));
                                text(f, src).contains(&decl)
                            })
                };
                if args.first().is_some_and(receive)
                    && !returns_received_messages(call, src)
                    && let Some(func) = outermost_function(call)
                {
                    self.push(func, format!("SQS poller ({})", short_path(&file_path)), Framework::SqsPolling, "");
                }
            }
            // A polling loop over an SQS client wrapper: `const messages = await
            // queue.receiveMessages(10)`, each message handled and then deleted by its
            // `ReceiptHandle` from the same function (AWS SDK v2's `sqs.receiveMessage(params)` too).
            ("receivemessages" | "receivemessage", _) => {
                if let Some(func) = ast::enclosing_function(call)
                    && !returns_received_messages(call, src)
                    && text(func, src).contains("ReceiptHandle")
                {
                    self.push(func, format!("SQS poller ({})", short_path(&file_path)), Framework::SqsPolling, "");
                }
            }
            _ => {}
        }
    }

    /// A route of `@hono/zod-openapi`: its definition is a `createRoute({ method, path })`
    /// written in place or bound to a name in this file. Its path, operation id and summary
    /// say whether a provider calls it, as a plain route's path does.
    fn openapi_route(&mut self, definition: Node, func: Node, file_path: &str) {
        let src = self.src();
        let definition = match ast::unwrap_expr(definition) {
            d if d.kind_name() == "identifier" => {
                match ast::find_binding_init(self.file.root(), text(d, src), src, usize::MAX) {
                    Some(init) => ast::unwrap_expr(init),
                    None => return,
                }
            }
            d => d,
        };
        let Some(options) = (definition.kind_name() == "call_expression")
            .then(|| ast::arguments(definition).into_iter().next())
            .flatten()
            .filter(|o| o.kind_name() == "object")
        else {
            return;
        };
        let field = |key: &str| ast::object_property(options, key, src).and_then(|v| ast::string_value(v, src));
        let method = field("method").unwrap_or_default().to_ascii_uppercase();
        if !matches!(method.as_str(), "POST" | "PUT" | "PATCH") {
            return;
        }
        let route = field("path").unwrap_or_default();
        let described = [field("operationId"), field("summary")].into_iter().flatten().collect::<Vec<_>>().join(" ");
        self.push(func, format!("{method} {route}"), Framework::Hono, &format!("{route} {described} {file_path}"));
    }

    /// The `.route({ method, path })` call earlier in an oRPC builder chain ending in
    /// `.handler(fn)`: a POST, PUT or PATCH route is a webhook as any route is. A procedure
    /// built on an authenticated base (`authenticatedProcedure`, `protectedProcedure`) serves
    /// signed-in users.
    fn orpc_route(&mut self, call: Node, func: Node, file_path: &str) {
        let src = self.src();
        let mut object = call.field("function").and_then(|f| f.field("object"));
        let mut route = None;
        while let Some(link) = object.filter(|o| o.kind_name() == "call_expression") {
            let callee = link.field("function").filter(|f| f.kind_name() == "member_expression");
            if route.is_none() && callee.and_then(|c| c.field("property")).is_some_and(|p| text(p, src) == "route") {
                route = ast::arguments(link).first().copied().filter(|a| a.kind_name() == "object");
            }
            object = callee.and_then(|c| c.field("object"));
        }
        let Some(opts) = route else { return };
        let method = ast::object_property(opts, "method", src)
            .and_then(|m| ast::string_value(m, src))
            .unwrap_or_default()
            .to_ascii_uppercase();
        if !["POST", "PUT", "PATCH"].contains(&method.as_str()) {
            return;
        }
        let url = ast::object_property(opts, "path", src).and_then(|u| ast::string_value(u, src)).unwrap_or_default();
        let base = object.map(|o| text(o, src)).unwrap_or("");
        self.user_authenticated = crate::regex!(r"(?i)authed|authenticated|protected|private").is_match(base);
        self.push(func, format!("{method} {url}"), Framework::Orpc, &format!("{url} {file_path}"));
        self.user_authenticated = false;
    }

    /// `githubEvents` where `const githubEvents = new Webhooks({ secret })` of `@octokit/webhooks`,
    /// here or in the module it is imported from (mounted elsewhere with `createNodeMiddleware`):
    /// each `.on(event, fn)` runs once per verified GitHub delivery.
    fn octokit_webhooks_instance(&self, name: &str, call: Node) -> bool {
        self.project
            .with_binding_init(self.file, call, name, |file, init| {
                let init = ast::unwrap_expr(init);
                let src = &file.text;
                Some(
                    init.kind_name() == "new_expression"
                        && init.field("constructor").is_some_and(|c| text(c, src) == "Webhooks")
                        && src.contains("@octokit/webhooks"),
                )
            })
            .unwrap_or(false)
    }

    /// A Probot app module: `module.exports = (app) => { app.on("push", handler) }`, with
    /// Probot imported or named in its JSDoc type (`@param {import('probot').Probot} app`).
    fn probot_app(&self) -> bool {
        crate::regex!(r#"['"]probot['"]"#).is_match(&self.file.text)
    }

    /// Nuxt/Nitro file routes: `export default defineEventHandler(fn)` (or `eventHandler(fn)`,
    /// `defineEventHandler({ handler: fn })`) in `server/api/**` or `server/routes/**`; the
    /// method comes from the file name (`github.post.ts`), none meaning any method.
    fn h3_route(&mut self, call: Node, file_path: &str) {
        let src = self.src();
        let path = file_path.replace('\\', "/");
        let Some(route) = ["server/api/", "server/routes/"].iter().find_map(|root| {
            let rest = match path.strip_prefix(root) {
                Some(rest) => rest,
                None => &path[path.find(&format!("/{root}"))? + root.len() + 1..],
            };
            let prefix = if root.ends_with("api/") { "/api/" } else { "/" };
            Some(format!("{prefix}{rest}"))
        }) else {
            return;
        };
        if !ast::ancestors(call).any(|a| a.kind_name() == "export_statement") {
            return;
        }
        // strip the extension, then the method suffix
        let route = route.rsplit_once('.').map_or(route.as_str(), |(r, _)| r).to_string();
        let (route, method) = match route.rsplit_once('.') {
            Some((r, m)) if ["get", "post", "put", "patch", "delete", "head", "options"].contains(&m) => {
                (r.to_string(), m.to_ascii_uppercase())
            }
            _ => (route.clone(), "ALL".to_string()),
        };
        if !["POST", "PUT", "PATCH", "ALL"].contains(&method.as_str()) {
            return;
        }
        let route = route.strip_suffix("/index").unwrap_or(&route).to_string();
        let Some(mut func) = ast::arguments(call).first().copied().map(ast::unwrap_expr) else {
            return;
        };
        if func.kind_name() == "object" {
            match ast::object_property(func, "handler", src) {
                Some(h) => func = if h.kind_name() == "method_definition" { h } else { ast::unwrap_expr(h) },
                None => return,
            }
        }
        self.push(func, format!("{method} {route}"), Framework::H3, file_path);
    }

    /// Cloudflare Workers: `export default { async queue(batch, env, ctx) { ... } }` (also with
    /// `satisfies ExportedHandler<Env>`).
    fn cloudflare_queue(&mut self, method: Node) {
        let params = ast::parameter_names(method, self.src());
        if self.exported_by_default(method) && (1..=3).contains(&params.len()) {
            let name = format!("cloudflare queue consumer ({})", short_path(&self.file.path.to_string_lossy()));
            self.push(method, name, Framework::CloudflareQueue, "");
        }
    }

    /// Cloudflare Workers' HTTP entry: `export default { async fetch(request, env, ctx) { ... } }`.
    /// It answers every path, so it is a webhook only as any route is: its file names a webhook,
    /// or it verifies a sender or reads a provider's header.
    fn cloudflare_fetch(&mut self, method: Node) {
        let params = ast::parameter_names(method, self.src());
        if self.exported_by_default(method) && (1..=3).contains(&params.len()) {
            let path = self.path.clone();
            let name = format!("cloudflare fetch ({})", short_path(&path));
            self.push(method, name, Framework::DenoServe, &path);
        }
    }

    /// A method of the object a module exports by default (also `satisfies ExportedHandler<Env>`).
    fn exported_by_default(&self, method: Node) -> bool {
        let src = self.src();
        method
            .parent()
            .filter(|o| o.kind_name() == "object")
            .and_then(|o| {
                ast::ancestors(o).find(|a| {
                    !matches!(a.kind_name(), "satisfies_expression" | "as_expression" | "parenthesized_expression")
                })
            })
            .is_some_and(|e| e.kind_name() == "export_statement" && text(e, src).starts_with("export default"))
    }

    fn new_expr(&mut self, node: Node) {
        let src = self.src();
        let Some(ctor) = node.field("constructor") else {
            return;
        };
        let args = node.field("arguments").map(ast::named_children).unwrap_or_default();
        if text(ctor, src) == "Runner" {
            return self.job_runner(&args);
        }
        if text(ctor, src) != "Worker" {
            return;
        }
        if args.len() >= 2 && self.bullmq_worker_class(text(ctor, src)) {
            let name = ast::string_value(args[0], src).unwrap_or_else(|| text(args[0], src).to_string());
            match self.sandboxed_processor(args[1]) {
                Some(def) => self.push_at(def.span, def.file, format!("worker {name}"), Framework::Bullmq, ""),
                None => {
                    // a worker factory: `(queueName, processor) => new Worker(queueName, processor, opts)`
                    let passed = self.passed_in(args[1]);
                    if passed.is_empty() {
                        self.push(args[1], format!("worker {name}"), Framework::Bullmq, "");
                    }
                    for (span, file, queue) in passed {
                        let queue = queue.unwrap_or_else(|| name.clone());
                        self.push_at(span, file, format!("worker {queue}"), Framework::Bullmq, "");
                    }
                }
            }
        }
    }

    /// Whether `Worker` here is BullMQ's: imported from a BullMQ package, or, when it is not
    /// imported from a known package, in a file that does not use Node's `worker_threads` (a
    /// worker script that also runs BullMQ jobs imports both).
    fn bullmq_worker_class(&self, name: &str) -> bool {
        let source = project::imports(self.file).iter().find(|i| i.local == name).map(|i| i.source.as_str());
        match source {
            Some("bullmq" | "bullmq-pro" | "@taskforcesh/bullmq-pro") => true,
            Some("worker_threads" | "node:worker_threads") => false,
            _ => !self.file.text.contains("worker_threads"),
        }
    }

    /// The functions passed in place of `param`, a parameter of a named function: the arguments
    /// at that position of the function's calls (`generateWorker("flow", async (job) => {...})`,
    /// `createRouteHandler("/flows/:id", handleFlow)`). An exported function's calls are looked
    /// for in its workspace; a shared package's factory is called from the other packages.
    fn passed_in(&self, param: Node) -> Vec<(Span, Arc<SourceFile>, Option<String>)> {
        let src = self.src();
        let param = ast::unwrap_expr(param);
        if param.kind_name() != "identifier" {
            return Vec::new();
        }
        let Some(factory) = ast::enclosing_function(param) else { return Vec::new() };
        let Some(index) = ast::parameter_names(factory, src).iter().position(|p| p == text(param, src)) else {
            return Vec::new();
        };
        let Some(factory_name) = bound_name(factory, src) else { return Vec::new() };
        let exported =
            self.project.exported_function(self.file, &factory_name, 0).is_some_and(|d| d.span == Span::of(factory));
        let files: Vec<std::path::PathBuf> = match project::package_root(&self.file.path) {
            Some(package) if exported => {
                let root = project::workspace_root(&package).unwrap_or(package);
                self.project.files_containing(&root, &factory_name).to_vec()
            }
            _ => vec![self.file.path.clone()],
        };
        let mut found = Vec::new();
        for path in files {
            let Ok(file) = self.project.load(&path) else { continue };
            let caller_src = &file.text;
            for call in ast::calls_in(file.root(), false) {
                if ast::callee_name(call, caller_src).as_deref() != Some(factory_name.as_str()) {
                    continue;
                }
                let args = ast::arguments(call);
                let Some(arg) = args.get(index).map(|a| ast::unwrap_expr(*a)) else { continue };
                let label = args.iter().find_map(|a| ast::string_value(*a, caller_src));
                if ast::is_function(arg) {
                    found.push((Span::of(arg), file.clone(), label));
                } else if arg.kind_name() == "identifier"
                    && let Some(def) = self.resolve_function_in(&file, text(arg, caller_src))
                {
                    found.push((def.span, def.file, label));
                }
            }
        }
        found
    }

    /// BullMQ sandboxed processor: `new Worker(name, path.join(__dirname, "processor.js"))`, also
    /// through a variable; the processor is the default export (`module.exports = fn`) of that file.
    fn sandboxed_processor(&self, arg: Node) -> Option<project::FunctionDef> {
        let src = self.src();
        let mut value = ast::unwrap_expr(arg);
        if value.kind_name() == "identifier" {
            let name = text(value, src);
            let mut found = None;
            ast::walk(self.file.root(), &mut |n| {
                if found.is_none()
                    && n.kind_name() == "variable_declarator"
                    && n.field("name").is_some_and(|x| text(x, src) == name)
                {
                    found = n.field("value");
                }
                found.is_none()
            });
            value = ast::unwrap_expr(found?);
        }
        if ast::is_function(value) || value.kind_name() == "identifier" {
            return None;
        }
        let mut last = None;
        ast::walk(value, &mut |n| {
            if let Some(s) = ast::string_value(n, src) {
                last = Some(s);
            }
            true
        });
        let spec = last?.trim_start_matches('/').to_string();
        let spec = if spec.starts_with('.') { spec } else { format!("./{spec}") };
        let target = self.project.resolve(&self.file.path, &spec)?;
        let target = self.project.load(&target).ok()?;
        self.project.exported_function(&target, "default", 0)
    }

    /// NestJS `@Post()` in a `@Controller()`, and `@Processor()` classes' `process(job)`.
    fn decorated_method(&mut self, method: Node) {
        let src = self.src();
        let decorators: Vec<String> = decorators_of(method).into_iter().map(|d| text(d, src).to_string()).collect();
        let name = method.field("name").map(|n| text(n, src).to_string()).unwrap_or_default();
        if name == "queue" && decorators.is_empty() {
            return self.cloudflare_queue(method);
        }
        if name == "fetch" {
            if decorators.is_empty() {
                self.cloudflare_fetch(method);
            }
            return;
        }
        if let Some(listens) =
            decorators.iter().find(|d| crate::regex!(r"^@On\w*Event\s*\(").is_match(d) && listens_to_provider(d))
        {
            let before = self.found.len();
            let hint = listens.clone();
            self.push(
                method,
                format!("event listener {name} ({})", hint.trim_start_matches('@')),
                Framework::EventListener,
                &hint,
            );
            for handler in &mut self.found[before..] {
                handler.event_key = None;
            }
            return;
        }
        let class = ast::ancestors(method).find(|a| matches!(a.kind_name(), "class_declaration" | "class"));
        let class_decorators: Vec<String> =
            class.map(|c| decorators_of(c).into_iter().map(|d| text(d, src).to_string()).collect()).unwrap_or_default();
        if let Some(post) = decorators.iter().find(|d| d.starts_with("@Post")) {
            let controller =
                class_decorators.iter().find(|d| d.starts_with("@Controller")).cloned().unwrap_or_default();
            // overnightjs (`@Controller("sns") class SnsWebhook { @Post() receive(req, res) }`):
            // Nest's decorators on Express handlers, whose names tell what the route receives
            // when its path is bare.
            let overnight = req_res(method, src)
                && project::imports(self.file).iter().any(|i| i.source.starts_with("@overnightjs/"));
            let (framework, hint) = if overnight {
                let class_name = class.and_then(|c| c.field("name")).map(|n| text(n, src)).unwrap_or_default();
                (Framework::Express, format!("{controller} {post} {name} {class_name} {}", self.path))
            } else {
                (Framework::Nest, format!("{controller} {post}"))
            };
            self.user_authenticated =
                decorators.iter().chain(&class_decorators).any(|d| d.starts_with("@UseGuards") && user_auth(d));
            self.push(method, format!("{post} {name}"), framework, &hint);
            self.user_authenticated = false;
        } else if (name == "process" || decorators.iter().any(|d| d.starts_with("@Process(") || d == "@Process"))
            && class_decorators.iter().any(|d| d.starts_with("@Processor"))
        {
            self.push(method, format!("processor {name}"), Framework::Bullmq, "");
        } else if let Some(pattern) = decorators.iter().find(|d| d.starts_with("@EventPattern("))
            && class_decorators.iter().any(|d| d.starts_with("@Controller"))
            && crate::regex!(r"(?i)kafka").is_match(&format!("{pattern} {}", self.src()))
        {
            // A Nest microservice's event handler on Kafka: the offset is committed once the
            // handler's promise settles, and a failure leaves the message to be read again.
            self.push(method, format!("kafka {name} ({})", pattern.trim_start_matches('@')), Framework::Kafka, "");
        }
    }

    /// The framework of a module exporting `POST`: SvelteKit's `+server` files and Astro
    /// endpoints (`export const POST: APIRoute = async ({ request }) => ...`, the same shape:
    /// a destructured context whose `request` answers with a `Response`), else Next's app router.
    fn route_framework(&self, path: &str) -> Framework {
        let t = &self.file.text;
        let astro = t.contains("APIRoute") || t.contains("from 'astro'") || t.contains("from \"astro\"");
        if path.contains("+server") || astro { Framework::SvelteKit } else { Framework::NextAppRouter }
    }

    fn http_framework(&self) -> Framework {
        let t = &self.file.text;
        // `@hono/zod-openapi`'s `OpenAPIHono` is a Hono app.
        if crate::regex!(r#"from\s*['"](?:hono['"/]|@hono/)"#).is_match(t) {
            Framework::Hono
        } else if t.contains("fastify") {
            Framework::Fastify
        } else if t.contains("koa") {
            Framework::Koa
        } else {
            Framework::Express
        }
    }
}

/// A file's path from its package root (the nearest directory holding `package.json`,
/// `deno.json` or `.git`) on, or, in a loose checkout, from its first source directory (`src/`,
/// `app/`, `pages/`, ...) on: the words of the directories above it (a checkout named
/// `acme-webhooks/`) say nothing about one of its routes.
fn routing_path(path: &std::path::Path) -> String {
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::{Mutex, OnceLock};
    static ROOTS: OnceLock<Mutex<HashMap<PathBuf, Option<PathBuf>>>> = OnceLock::new();
    let full = path.to_string_lossy().replace('\\', "/");
    let Some(dir) = path.parent() else { return full };
    let cache = ROOTS.get_or_init(Default::default);
    let cached = cache.lock().unwrap().get(dir).cloned();
    let root = cached.unwrap_or_else(|| {
        let found = dir
            .ancestors()
            .find(|a| ["package.json", "deno.json", ".git"].iter().any(|m| a.join(m).exists()))
            .map(|a| a.to_path_buf());
        cache.lock().unwrap().insert(dir.to_path_buf(), found.clone());
        found
    });
    if let Some(rel) = root.as_deref().and_then(|r| path.strip_prefix(r).ok()) {
        return rel.to_string_lossy().replace('\\', "/");
    }
    let first = ["src/", "app/", "pages/", "routes/", "api/", "server/", "functions/", "lib/", "netlify/", "supabase/"]
        .iter()
        .filter_map(|seg| if full.starts_with(seg) { Some(0) } else { full.find(&format!("/{seg}")).map(|i| i + 1) })
        .min();
    match first {
        Some(i) => full[i..].to_string(),
        None => full,
    }
}

/// A path with a segment for operators' endpoints: `admin`, `mod`, `moderation`, `debug`.
fn operator_path(path: &str) -> bool {
    path.split(['/', '\\'])
        .map(|seg| seg.split('.').next().unwrap_or(seg).to_ascii_lowercase())
        .any(|seg| matches!(seg.as_str(), "admin" | "mod" | "moderator" | "moderation" | "debug" | "management"))
}

/// The function a property of a controller object holds, also through the wrappers around it
/// (`handleWebhook: asyncHandler(async (req, res) => ...)`), unless a wrapper names a signed-in
/// context (`withAuth(...)`).
fn wrapped_function<'t>(value: Node<'t>, src: &str) -> Option<Node<'t>> {
    if ast::is_function(value) {
        return Some(value);
    }
    if value.kind_name() != "call_expression" {
        return None;
    }
    let wrapper = value.field("function").map(|f| text(f, src)).unwrap_or("");
    if user_auth(wrapper) || signed_in_wrapper(wrapper) {
        return None;
    }
    ast::arguments(value).into_iter().rev().map(ast::unwrap_expr).find_map(|a| wrapped_function(a, src))
}

/// A Lambda wrapper around the exported handler: `Sentry.AWSLambda.wrapHandler(fn)`,
/// `middy(fn)`, `withLambda...(fn)`.
fn lambda_wrapper(value: Node, src: &str) -> bool {
    let value = ast::unwrap_expr(value);
    value.kind_name() == "call_expression"
        && value
            .field("function")
            .is_some_and(|f| crate::regex!(r"(?i)lambda|wraphandler|\bmiddy\b").is_match(text(f, src)))
}

/// The JSDoc comment right above a function's declaration (`/** @param {SQSEvent} event */`),
/// the only type a JavaScript Lambda states.
fn jsdoc_above<'s>(func: Node, src: &'s str) -> Option<&'s str> {
    let declaration = ast::ancestors(func)
        .take_while(|a| !matches!(a.kind_name(), "program" | "statement_block"))
        .last()
        .unwrap_or(func);
    let comment = declaration.prev_named_sibling().filter(|c| c.kind_name() == "comment")?;
    let between = &src[comment.end_byte()..declaration.start_byte()];
    (text(comment, src).starts_with("/**") && between.trim().is_empty()).then(|| text(comment, src))
}

/// An SQS client wrapper's receive function: the messages `call` receives are bound and handed
/// back to the caller (`const { Messages = [] } = await client.send(receive); return Messages`).
/// The consumer is whoever calls it; the adapter around it (with its `send` for producers) is none.
fn returns_received_messages(call: Node, src: &str) -> bool {
    let Some(func) = ast::enclosing_function(call) else { return false };
    let Some(declarator) =
        ast::ancestors(call).take_while(|a| a.id() != func.id()).find(|a| a.kind_name() == "variable_declarator")
    else {
        return false;
    };
    let mut names = Vec::new();
    if let Some(pattern) = declarator.field("name") {
        ast::bound_names(pattern, src, &mut names);
    }
    !names.is_empty()
        && ast::descendants_of_kind(func, "return_statement").into_iter().any(|ret| {
            ast::enclosing_function(ret).is_some_and(|f| f.id() == func.id())
                && super::stmts::mentions_any(ret, src, &names)
        })
}

/// A wrapper named for a signed-in context: `withWorkspace`, `withSession`, `withUser`,
/// `withTeam`, `withOrganization`, `authenticatedRoute`.
fn signed_in_wrapper(name: &str) -> bool {
    crate::regex!(r"(?i)^(with|require)(workspace|session|user|team|org|organization|account|admin)s?\b|authenticated")
        .is_match(name)
        && !crate::regex!(r"(?i)signature|webhook|hmac").is_match(name)
}

/// A body that looks up the signed-in user's session and answers 401/403 (or "Unauthorized")
/// when there is none: a route for people, not a provider's delivery.
fn turns_away_signed_out(body: &str) -> bool {
    crate::regex!(
        r"\b(getServerSession|getServerAuthSession|getSession|getUserSession|getKindeServerSession|currentUser|getCurrentUser|getLoggedInUser|requireUser|requireAuth|requireSession|validateRequest|auth)\s*\(|\.auth\.getUser\s*\("
    )
    .is_match(body)
        && crate::regex!(r"\b40[13]\b|(?i)unauthori[sz]ed|forbidden").is_match(body)
}

/// A body that requires the signed-in user or checks their permissions, itself or in a
/// function of its file it calls (`const user = await requireUser(request)`, `requireUserId`,
/// `context.permissions.canUpdateWebhook()`, `throwPermissionError()`): those fail, by design,
/// for any caller without a session, and a provider's delivery carries none.
fn checks_signed_in_user(func: Node, file: &Arc<SourceFile>) -> bool {
    let src = &file.text;
    let gate = |text: &str| {
        crate::regex!(
            r"\brequire(?:Signed-?In|Logged-?In)?(?:User|UserId|Session|Login|Admin|Member|Permissions?|Role)\w*\s*\(|\.permissions\.\w+\s*\(|\b(?:throw|check|assert|ensure|has)(?:Permission|Role)s?\w*\s*\("
        )
        .is_match(text)
    };
    gate(text(func, src))
        || ast::calls_in(func, false).into_iter().any(|call| {
            call.field("function")
                .filter(|f| f.kind_name() == "identifier")
                .and_then(|f| project::local_function(file, text(f, src)))
                .is_some_and(|def| def.node().is_some_and(|helper| gate(text(helper, src))))
        })
}

/// A body whose work is sending to an outgoing webhook or chat (`sendToDiscordWebhook(data)`,
/// `postSlackWebhook(text)`, `sendAnswerToDiscord(data)`, `fetch(process.env.SLACK_WEBHOOK_URL, ...)`).
fn relays_to_webhook(body: &str) -> bool {
    crate::regex!(
        r"\b(?:send|post|forward|relay|notify)\w*(?:Webhook|To(?:Discord|Slack|Teams))\w*\s*\(|fetch\(\s*(?:process\.)?env\.\w*WEBHOOK_URL\b"
    )
        .is_match(body)
}

/// A body that answers a Slack slash command or interaction in place (`response_type:
/// "ephemeral"` / `"in_channel"`): Slack never redelivers those, unlike Events API callbacks,
/// which a route serving both still receives.
fn answers_slack_command(body: &str) -> bool {
    crate::regex!(r#"response_type['"]?\s*:\s*['"](?:ephemeral|in_channel)['"]"#).is_match(body)
        && !body.contains("event_callback")
        && !body.contains("url_verification")
}

/// A Slack interactivity endpoint: it parses the form field `payload` that Slack posts for a
/// button click, a modal submission or a shortcut (`JSON.parse(form.get("payload"))`). Slack
/// shows the person an error when it gets no answer and never redelivers an interaction; a route
/// that also takes Events API callbacks (`event_callback`, `url_verification`) still receives those.
fn answers_slack_interaction(body: &str, route_hint: &str) -> bool {
    let slack = body.to_ascii_lowercase().contains("slack") || route_hint.to_ascii_lowercase().contains("slack");
    slack
        && crate::regex!(r#"JSON\.parse\([^;\n]*\bpayload\b"#).is_match(body)
        && !crate::regex!(r"event_callback|url_verification|\bchallenge\b|\.event_id\b").is_match(body)
}

/// A Supabase database webhook: a row change (`{ type: "INSERT", table, record, old_record }`)
/// that Postgres posts once through pg_net, with no retry: a failure answered 2xx loses nothing a
/// 5xx would bring back, and no duplicate follows.
fn receives_supabase_database_webhook(body: &str) -> bool {
    body.to_ascii_lowercase().contains("supabase")
        && crate::regex!(r"\.table\b").is_match(body)
        && crate::regex!(r"\b(?:INSERT|UPDATE|DELETE)\b|\bold_record\b").is_match(body)
}

/// A body that reads the `code` query parameter of an OAuth authorization redirect:
/// `const { code, state } = req.query`, `searchParams.get("code")`, `c.req.query("code")`, or
/// takes the code as a Nest parameter (`@Body('code') code`) or exchanges it
/// (`exchangeStripeOAuthToken(code)`).
fn oauth_redirect(body: &str) -> bool {
    crate::regex!(
        r#"\{[^{}=]*\bcode\b[^{}=]*\}(?:\s*:\s*\w+)?\s*=\s*(?:\w+\.)*query\b|\bquery\s*(?:\.\s*code\b|\[\s*['"]code['"]\s*\])|(?:searchParams\.get|\.query)\(\s*['"]code['"]\s*\)|@(?:Body|Query)\(\s*['"]code['"]\s*\)|\bexchange\w*OAuth\w*\s*\("#
    )
    .is_match(body)
}

/// Middleware or a guard that authenticates a signed-in user (not a sender's signature).
fn user_auth(text: &str) -> bool {
    crate::regex!(
        r"(?i)jwt|session|roles?guard|requireauth|ensureauth|authenticated\b|requireuser|requirelogin|loggedin|\bprotect\b|clerkauth|withauth|authenticate\w*user|authenticatetoken|\bmiddleware_?auth\b|\bauth_?middleware\b|(?:require|ensure|must)_?sign(?:ed)?_?in"
    )
    .is_match(text)
        && !crate::regex!(r"(?i)signature|webhook|hmac").is_match(text)
}

/// Middleware that checks a person's permission or token scope (`requirePermission([...])`,
/// `withScope("environment:rotate")`, `can({ action, resource })`, `requires("endpoints:manage")`).
fn permission_check(text: &str) -> bool {
    crate::regex!(
        r"(?i)\b(?:require|has|check|ensure)permissions?\b|\bwithscopes?\s*\(|\bcan\s*\(\s*\{|permissionguard|\brequires(?:scopes?)?\s*\(\s*\[?\s*[\x22'`][a-z][\w.-]*:{1,2}[\w.*-]+[\x22'`]"
    )
    .is_match(text)
}

/// Middleware that lets only an app's administrators through (`roleChecker.hasRole("admin")`,
/// `requireAdmin`).
fn admin_role(text: &str) -> bool {
    crate::regex!(r"(?i)hasrole|requirerole|requireadmin|ensureadmin|isadmin|adminonly").is_match(text)
}

/// Tests and their doubles (`webhook.test.ts`, `__tests__/`, `__mocks__/`): a receiver a test
/// starts to record what it is sent is no deployed entry point.
fn is_test_file(path: &std::path::Path) -> bool {
    let path = path.to_string_lossy().replace('\\', "/");
    let name = path.rsplit('/').next().unwrap_or(&path);
    crate::regex!(r"\.(?:test|spec|e2e-spec|e2e)\.[cm]?[jt]sx?$").is_match(name)
        || path.contains("__tests__/")
        || path.contains("__mocks__/")
}

/// A path as a handler name shows it: from the framework's routing root (`app/`, `pages/`,
/// `routes/`, `src/`) on, so names read the same wherever the project is checked out.
pub fn short_path(path: &str) -> String {
    let path = path.replace('\\', "/");
    for root in ["app/", "pages/", "routes/", "src/", "functions/", "lambdas/", "workers/"] {
        if path.starts_with(root) {
            return path;
        }
        if let Some(i) = path.rfind(&format!("/{root}")) {
            return path[i + 1..].to_string();
        }
    }
    path.rsplit('/').next().unwrap_or(&path).to_string()
}

pub(crate) fn decorators_of(node: Node) -> Vec<Node> {
    let mut out: Vec<Node> = ast::named_children(node).into_iter().filter(|c| c.kind_name() == "decorator").collect();
    // Decorators may also precede the member as siblings.
    let mut prev = node.prev_named_sibling();
    while let Some(p) = prev.filter(|p| p.kind_name() == "decorator") {
        out.push(p);
        prev = p.prev_named_sibling();
    }
    if let Some(parent) = node.parent().filter(|p| p.kind_name() == "export_statement") {
        out.extend(ast::named_children(parent).into_iter().filter(|c| c.kind_name() == "decorator"));
    }
    out
}

/// Whether a `.process(fn)` call's receiver is a builder chain (`pool.for(items).process(fn)`,
/// `PromisePool.withConcurrency(2).process(fn)`), not a queue.
fn built_by_chain(call: Node, src: &str) -> bool {
    let Some(receiver) = call.field("function").and_then(|f| f.field("object")).map(ast::unwrap_expr) else {
        return false;
    };
    receiver.kind_name() == "call_expression"
        && receiver
            .field("function")
            .and_then(|f| f.field("property"))
            .is_some_and(|p| matches!(text(p, src), "for" | "withConcurrency" | "withTaskTimeout" | "handleError"))
}

/// A name that holds a route path (`WEBHOOK_PATH`, `routes.stripeWebhook`), not an outbound
/// URL (`axios.post(webhookUrl, body)`).
fn path_constant(name: &str) -> bool {
    let last = name.rsplit('.').next().unwrap_or(name);
    let lower = last.to_ascii_lowercase();
    if lower.contains("url") || lower.contains("endpoint") || lower.contains("uri") {
        return false;
    }
    lower.contains("path") || lower.contains("route") || last.chars().all(|c| c.is_ascii_uppercase() || c == '_')
}

/// A job name or concurrency as Bull's `process` takes them before the processor: a literal, or
/// a constant naming one (`QUEUE_NAME`, `JobType.SendEmail`, `queueName`, `concurrency`). A
/// variable holding data (`ids`, `batch`) is no such option.
fn queue_option_arg(arg: Node, src: &str) -> bool {
    match arg.kind_name() {
        "string" | "template_string" | "number" => true,
        "identifier" | "member_expression" => {
            let name = text(arg, src);
            let last = name.rsplit('.').next().unwrap_or(name).trim();
            let constant = last.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            // an enum member: `JobType.SendEmail`
            let enum_member =
                arg.kind_name() == "member_expression" && name.starts_with(|c: char| c.is_ascii_uppercase());
            let lower = last.to_ascii_lowercase();
            constant
                || enum_member
                || lower.ends_with("name")
                || lower.contains("concurren")
                || (arg.kind_name() == "identifier" && bound_to_count_or_name(arg, src))
        }
        _ => false,
    }
}

/// `const workers = Number(config.get("WORKERS")) || 1`, `const queueName = "emails"`: a name
/// bound in the file (or an enclosing function) to a literal or a number parsed from settings.
fn bound_to_count_or_name(name: Node, src: &str) -> bool {
    let mut root = name;
    while let Some(p) = ast::parent(root) {
        root = p;
    }
    let Some(init) = ast::find_binding_init(root, text(name, src), src, name.start_byte()) else { return false };
    let literal_or_parsed = |n: Node| {
        let n = ast::unwrap_expr(n);
        matches!(n.kind_name(), "number" | "string" | "template_string")
            || (n.kind_name() == "call_expression"
                && matches!(ast::callee_name(n, src).as_deref(), Some("Number" | "parseInt" | "parseFloat")))
    };
    let init = ast::unwrap_expr(init);
    match init.kind_name() {
        "binary_expression" => ast::named_children(init).into_iter().all(literal_or_parsed),
        _ => literal_or_parsed(init),
    }
}

/// The path of `router.route('/path')` when `call` is a method called on it.
fn chained_route(call: Node, src: &str) -> Option<String> {
    // `router.route(path).get(h).post(h)`: past the other methods of the chain
    let mut route_call = call;
    loop {
        route_call = route_call
            .field("function")
            .and_then(|f| f.field("object"))
            .filter(|o| o.kind_name() == "call_expression")?;
        match ast::callee_name(route_call, src).as_deref() {
            Some("route") => break,
            Some("get" | "post" | "put" | "patch" | "delete" | "all" | "head" | "options") => continue,
            _ => return None,
        }
    }
    // `router.route(path)` in a route helper: the path is the helper's parameter
    ast::arguments(route_call).first().and_then(|a| {
        ast::string_value(*a, src).or_else(|| (a.kind_name() == "identifier").then(|| text(*a, src).to_string()))
    })
}

/// The name a function is declared or bound under: `function make() {}`, `const make = () => {}`.
fn bound_name(func: Node, src: &str) -> Option<String> {
    if let Some(name) = func.field("name") {
        return Some(text(name, src).to_string());
    }
    let declarator = ast::parent(func).filter(|p| p.kind_name() == "variable_declarator")?;
    let name = declarator.field("name").filter(|n| n.kind_name() == "identifier")?;
    Some(text(name, src).to_string())
}

fn outermost_function(node: Node) -> Option<Node> {
    ast::ancestors(node).filter(|a| ast::is_function(*a)).last()
}

/// Whether an `@On...Event(...)` decorator names a provider: in its own name
/// (`@OnStripeEvent('invoice.paid')`) or as a whole segment of the event's name
/// (`@OnEvent('stripe.invoice.paid')`). A word inside another (`resendInvite`,
/// `signUpConfirmResended`) is the app's own event.
fn listens_to_provider(decorator: &str) -> bool {
    let is_provider = |word: &str| {
        let word = word.to_ascii_lowercase();
        word == "lemonsqueezy" || PROVIDER_WORDS.iter().any(|(w, _)| *w == word)
    };
    crate::regex!(r"^@On(\w+)Event\s*\(").captures(decorator).is_some_and(|c| is_provider(&c[1]))
        || decorator.split(|c: char| !c.is_ascii_alphanumeric()).any(is_provider)
}

/// Providers known by a word of a route, a path or an export's name.
const PROVIDER_WORDS: &[(&str, Provider)] = &[
    ("stripe", Provider::Stripe),
    ("github", Provider::Github),
    ("shopify", Provider::Shopify),
    ("clerk", Provider::Svix),
    ("svix", Provider::Svix),
    ("resend", Provider::Svix),
    ("paystack", Provider::Paystack),
    ("flutterwave", Provider::Flutterwave),
    ("paddle", Provider::Paddle),
    ("razorpay", Provider::Razorpay),
    ("paypal", Provider::Paypal),
    ("square", Provider::Square),
    ("slack", Provider::Slack),
    ("linear", Provider::Linear),
    ("twilio", Provider::Twilio),
    ("lemon", Provider::LemonSqueezy),
];

fn provider_from_words(hint: &str) -> Option<Provider> {
    let lower = hint.to_ascii_lowercase();
    PROVIDER_WORDS
        .iter()
        // The route first, then the file path; within one, the word nearest its end (the file name
        // over a parent directory such as `me.github.io/` or `~/github/`).
        .filter_map(|(w, p)| {
            lower.split_whitespace().enumerate().find_map(|(t, tok)| tok.rfind(w).map(|i| ((t, i), *p)))
        })
        .min_by_key(|((t, i), _)| (*t, std::cmp::Reverse(*i)))
        .map(|(_, p)| p)
}

fn request_response(
    framework: Framework,
    func: Node,
    src: &str,
    params: &[String],
) -> (Option<String>, Option<String>) {
    let first = ast::parameter(func, 0);
    let first_name = first.filter(|p| p.kind_name() == "identifier").map(|p| text(p, src).to_string());
    match framework {
        Framework::Express | Framework::NextPagesApi | Framework::Fastify => (
            first_name,
            ast::parameter(func, 1).filter(|p| p.kind_name() == "identifier").map(|p| text(p, src).to_string()),
        ),
        Framework::Koa => (first_name.clone(), first_name),
        Framework::ConvexHttp => {
            (ast::parameter(func, 1).filter(|p| p.kind_name() == "identifier").map(|p| text(p, src).to_string()), None)
        }
        Framework::Hono => (first_name, None),
        Framework::SvelteKit | Framework::Remix => {
            // ({ request }) => ...
            let name = if params.iter().any(|p| p == "request") { Some("request".to_string()) } else { first_name };
            (name, None)
        }
        Framework::Nest => {
            let req = params.iter().find(|p| p.starts_with("req")).cloned();
            let res = params.iter().find(|p| p.starts_with("res")).cloned();
            (req, res)
        }
        _ if framework.is_http() => (first_name, None),
        _ => (None, None),
    }
}

/// `httpAction(async (ctx, request) => ...)` (Convex): the function it wraps.
fn convex_http_action<'t>(value: Node<'t>, src: &str) -> Option<Node<'t>> {
    let call = ast::unwrap_expr(value);
    (call.kind_name() == "call_expression")
        .then_some(())
        .and_then(|_| call.field("function"))
        .filter(|f| f.kind_name() == "identifier" && text(*f, src) == "httpAction")?;
    ast::arguments(call).into_iter().find(|a| ast::is_function(*a))
}

/// `"push"`, `"pull_request.closed"` or a list of them: GitHub event names as Probot takes them.
fn github_event_names(arg: Node, src: &str) -> bool {
    let names: Vec<Node> = if arg.kind_name() == "array" { ast::named_children(arg) } else { vec![arg] };
    !names.is_empty()
        && names
            .iter()
            .all(|n| ast::string_value(*n, src).is_some_and(|e| crate::regex!(r"^[a-z_]+(\.[a-z_]+)?$").is_match(&e)))
}

/// `bp.IntegrationProps['handler']`: the type Botpress gives an integration's request handler.
fn botpress_handler_type(declared: &str) -> bool {
    crate::regex!(r#"IntegrationProps\s*\[\s*['"]handler['"]\s*\]"#).is_match(declared)
}

/// A function whose first two parameters are named like a Node request and response.
/// A fetch-API handler's signature: the first parameter is the `Request` (typed so, or named
/// `req`/`request` in a function that answers a `Response`), and no Express response follows.
fn fetch_request(func: Node, src: &str) -> bool {
    let params = ast::parameter_names(func, src);
    let Some(first) = params.first() else { return false };
    if params.get(1).is_some_and(|p| matches!(p.as_str(), "res" | "response" | "resp")) {
        return false;
    }
    let typed = ast::parameter_type(func, 0, src).is_some_and(|t| matches!(t, "Request" | "NextRequest"));
    let named = matches!(first.as_str(), "req" | "request");
    let answers = || {
        let body = text(func, src);
        body.contains("new Response(") || body.contains("Response.json(")
    };
    typed || (named && answers())
}

fn req_res(func: Node, src: &str) -> bool {
    let params = ast::parameter_names(func, src);
    params.len() >= 2
        && matches!(params[0].as_str(), "req" | "request" | "_req")
        && matches!(params[1].as_str(), "res" | "response" | "resp")
}
