//! File discovery: a parallel walk that honours .gitignore/.ignore and skips dependency and
//! build folders, plus the byte-level prefilter that keeps irrelevant files from being parsed.

use ignore::{WalkBuilder, WalkState};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

const SKIP_DIRS: &[&str] = &["node_modules", "dist", "build", ".next", "out", "coverage", ".turbo", ".vercel", ".git"];

/// Dependency and build folders no walk of ours descends into.
pub fn is_skipped_dir_name(name: &str) -> bool {
    SKIP_DIRS.contains(&name)
}

#[derive(Default)]
pub struct Discovery {
    /// Source and schema files, sorted.
    pub files: Vec<PathBuf>,
    /// One line per path that could not be read.
    pub errors: Vec<String>,
}

/// Whether the walk should look at this file at all.
pub fn is_candidate(path: &Path) -> bool {
    if crate::source::Dialect::for_path(path).is_some() {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        return !name.ends_with(".d.ts") && !name.ends_with(".min.js");
    }
    is_schema_file(path)
}

pub fn is_schema_file(path: &Path) -> bool {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    ext == "prisma" || ext == "sql"
}

pub fn discover(paths: &[PathBuf], threads: usize) -> Discovery {
    let found = Mutex::new(Discovery::default());
    let mut dirs = Vec::new();
    for path in paths {
        match std::fs::metadata(path) {
            Err(e) => found.lock().unwrap().errors.push(format!("{}: {}", path.display(), e)),
            // Explicit files are always checked.
            Ok(m) if m.is_file() => found.lock().unwrap().files.push(path.clone()),
            Ok(_) => dirs.push(path.clone()),
        }
    }
    if let Some((first, rest)) = dirs.split_first() {
        let mut builder = WalkBuilder::new(first);
        for d in rest {
            builder.add(d);
        }
        builder.threads(threads).hidden(true).git_ignore(true).git_exclude(true).require_git(false).filter_entry(|e| {
            !(e.file_type().is_some_and(|t| t.is_dir()) && SKIP_DIRS.contains(&e.file_name().to_str().unwrap_or("")))
        });
        builder.build_parallel().run(|| {
            Box::new(|entry| {
                match entry {
                    Ok(e) if e.file_type().is_some_and(|t| t.is_file()) && is_candidate(e.path()) => {
                        found.lock().unwrap().files.push(e.into_path());
                    }
                    Ok(_) => {}
                    Err(err) => found.lock().unwrap().errors.push(one_line(&err.to_string())),
                }
                WalkState::Continue
            })
        });
    }
    let mut found = found.into_inner().unwrap();
    found.files.sort();
    found.files.dedup();
    found.errors.sort();
    found
}

fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or(s).to_string()
}

/// Cheap test on raw bytes: can this file hold a handler, an effect a handler imports, a
/// schema a rule reads, or a suppression? Files that fail it are parsed only when a handler
/// imports them.
pub fn may_be_relevant(bytes: &[u8]) -> bool {
    static FILTER: OnceLock<regex::bytes::Regex> = OnceLock::new();
    let re = FILTER.get_or_init(|| {
        // Literal markers of every entry-point shape in `model::handlers` and every schema
        // `dedupe-key-not-unique` reads; words that ordinary app code uses too ("hook",
        // "events", "callback") are deliberately absent.
        let literals = [
            ".post(",
            // Fastify's typed routes: `fastify.post<{ Body: Buffer }>('/webhook', ...)`
            ".post<",
            ".put(",
            ".patch(",
            ".all(",
            ".route(",
            "@Post(",
            "@Processor(",
            // Nest microservices' Kafka event handlers
            "@EventPattern(",
            "new Worker",
            ".process(",
            "Records",
            "SQSEvent",
            "SQSHandler",
            "ReceiveMessage",
            // an SQS client wrapper's polling loop: `await queue.receiveMessages(10)`
            ".receiveMessage",
            "eachMessage",
            "eachBatch",
            ".consume(",
            "'message'",
            "\"message\"",
            "createFunction",
            "@trigger.dev",
            "serve(",
            "webhooks.on(",
            // an `@octokit/webhooks` instance under another name: `githubEvents.on("issues.labeled", fn)`
            "@octokit/webhooks",
            // payment SDKs' webhook adapters: `Webhooks({ webhookSecret, onOrderPaid })`,
            // a better-auth plugin's `webhooks({ webhookKey, onSubscriptionActive })`
            "Webhooks(",
            "webhooks(",
            // Probot apps: `app.on("push", handler)` in a module that names Probot
            "'probot'",
            "\"probot\"",
            // h3 (Nuxt/Nitro) route modules
            "defineEventHandler",
            "eventHandler(",
            // Cloudflare Queues consumers: `async queue(batch, env)`
            "async queue(",
            // Cloudflare Workers' HTTP entry: `async fetch(request, env, ctx)`
            "async fetch(",
            "Table(",
            "TableCreator",
            "pgSchema",
            "Schema(",
            "Schema<",
            "retrysafe-ignore",
            // a module that verifies a provider's delivery holds a handler whatever its shape
            // (`export default handler` in a Vercel `api/` file, a route table elsewhere)
            "constructEvent",
            "stripe-signature",
            "x-hub-signature",
            "svix-id",
            "x-shopify-hmac",
            "authenticate.webhook",
            // Firebase HTTPS functions: `onRequest(async (req, res) => ...)`
            "onRequest(",
            // @shopify/shopify-api webhook handlers
            "deliveryMethod",
            // Convex HTTP actions
            "httpAction(",
            // Botpress integration handlers: `handler: bp.IntegrationProps['handler']`
            "IntegrationProps",
            // oRPC procedures: `.route({ method: "POST", path }).handler(fn)`
            ".handler(",
            // queue clients' job runners: `client.createRunner(queue, { run })`, liteque's
            // `new Runner(queue, { run })`
            ".createRunner",
            "new Runner(",
            // BullMQ's manual processing: `const job = await worker.getNextJob(token)`
            ".getNextJob(",
            // `Consumer.create({ handleMessage })` of sqs-consumer
            "sqs-consumer",
            // graphile-worker's task files: `const task: Task = async (payload, helpers) => ...`
            "graphile-worker",
        ];
        let mut pattern: Vec<String> = literals.iter().map(|m| regex::escape(m)).collect();
        // Route modules: `export async function POST`, `export const action = ...`.
        pattern.push(r"export\s+(?:async\s+)?(?:function\s+|const\s+)(?:POST|PUT|PATCH|action)\b".to_string());
        // A function exported under a delivery's name, routed elsewhere:
        // `export const stripeWebhook = async (request, response) => ...`.
        pattern.push(r"export\s+(?:async\s+)?(?:function\s+|const\s+)\w*(?i:hook|callback|ipn)".to_string());
        // GitHub events by their dotted names on an instance imported from elsewhere:
        // `githubEvents.on('issues.labeled', handler)`
        pattern.push(r#"\.on\(\s*['"][a-z_]+\.[a-z_]+['"]"#.to_string());
        // Cloudflare Queues consumers written without `async`: `queue(batch, env) {`
        pattern.push(r"\bqueue\s*\(\s*batch\b".to_string());
        // listeners of a provider's re-emitted events: `@OnStripeEvent('invoice.paid')`
        pattern.push(r"@On\w*Event\s*\(".to_string());
        // a Pub/Sub worker object: `{ subscription: "api.new-view", handler }`
        pattern.push(r#"\bsubscription\s*:\s*['"]"#.to_string());
        // ... or as a property: `queue: async (batch, env) => ...`
        pattern.push(r"\bqueue\s*:\s*(?:async\b|function\b|\()".to_string());
        // ... and its `fetch` written without `async`: `fetch(request, env) {`
        pattern.push(r"\bfetch\s*\(\s*(?:request|req)\b[^)]*\benv\b".to_string());
        // ... or an export clause: `export { POST }`, `export { handler as POST }`.
        pattern.push(r"export\s*\{[^}]*\b(?:POST|PUT|PATCH)\b".to_string());
        regex::bytes::Regex::new(&pattern.join("|")).unwrap()
    });
    re.is_match(bytes)
}

#[cfg(test)]
mod tests {
    use super::may_be_relevant;

    #[test]
    fn prefilter_passes_h3_routes_and_cloudflare_queue_consumers() {
        assert!(may_be_relevant(b"export default defineEventHandler(async (event) => {})"));
        assert!(may_be_relevant(b"export default eventHandler((event) => 'ok')"));
        assert!(may_be_relevant(b"export default { async queue(batch, env) {} }"));
        assert!(may_be_relevant(b"export default { queue(batch, env, ctx) {} }"));
        assert!(!may_be_relevant(b"const queue = []; queue.push(1);"));
    }

    #[test]
    fn prefilter_passes_cloudflare_fetch_and_verifying_modules() {
        assert!(may_be_relevant(b"export default { async fetch(request, env, ctx) {} }"));
        assert!(may_be_relevant(b"export default { fetch(req, env) { return new Response() } }"));
        assert!(may_be_relevant(b"const h = async (req, res) => { stripe.webhooks.constructEvent(b, s, k) }"));
        assert!(!may_be_relevant(b"const r = await fetch(url); const data = await r.json();"));
    }

    #[test]
    fn prefilter_passes_webhook_named_exports_and_convex_actions() {
        assert!(may_be_relevant(b"export const stripeWebhook = async (request, response) => {}"));
        assert!(may_be_relevant(b"export async function paypalIpn(req, res) {}"));
        assert!(may_be_relevant(b"export const hook = httpAction(async (ctx, request) => new Response())"));
        assert!(!may_be_relevant(b"export const listUsers = async (req, res) => {}"));
    }

    #[test]
    fn prefilter_passes_payment_sdk_webhook_adapters() {
        assert!(may_be_relevant(b"plugins: [dodopayments({ use: [webhooks({ webhookKey: key })] })]"));
    }

    #[test]
    fn prefilter_passes_github_events_on_an_imported_instance() {
        assert!(may_be_relevant(b"githubEvents.on('issues.labeled', handleLabel);"));
        assert!(may_be_relevant(b"import { Webhooks } from \"@octokit/webhooks\";"));
        assert!(!may_be_relevant(b"socket.on('connect', onConnect);"));
    }
}
