//! Work whose failure does not lose the event: telemetry (logs, audit entries, analytics,
//! metrics, error reports), notifications (email, SMS, alerts) and reads. Teams wrap such
//! calls in a `catch` or leave them unawaited on purpose: a failed welcome email or
//! analytics ping must not make the provider redeliver the payment that already succeeded.
//! The category comes from what the callee does when it is a project function (its own
//! calls, looked through up to a few levels), else from what the SDK call does, and only
//! then from the words of its name.

use super::ast::{self, text};
use super::effects::{self, EffectKind};
use super::reach;
use crate::project::Project;
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::collections::HashSet;
use std::sync::Arc;
use tree_sitter::Node;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    /// Logs, audit trails, analytics events, metrics, error reports.
    Telemetry,
    /// Emails, SMS, alerts to people.
    Notification,
    /// Reads and lookups: nothing changes when they fail.
    Read,
    /// Anything else: the event's own work.
    Work,
}

const TELEMETRY_WORDS: &[&str] = &[
    "log",
    "logs",
    "logger",
    "audit",
    "analytics",
    "track",
    "tracking",
    "telemetry",
    "metric",
    "metrics",
    "sentry",
    "posthog",
    "mixpanel",
    "amplitude",
    "segment",
    "openpanel",
    "axiom",
    "datadog",
    "statsd",
    "breadcrumb",
    "instrument",
];
const NOTIFICATION_WORDS: &[&str] = &[
    "email",
    "emails",
    "mail",
    "mailer",
    "notify",
    "notification",
    "notifications",
    "sms",
    "realtime",
    "websocket",
    "websockets",
    "pusher",
];
const WRITE_VERBS: &[&str] =
    &["update", "set", "delete", "remove", "save", "upsert", "change", "reset", "verify", "validate"];
const READ_PREFIXES: &[&str] = &[
    "get", "find", "retrieve", "select", "list", "fetch", "query", "count", "search", "load", "read", "lookup",
    "describe",
];

/// The words of an identifier: `sendPaymentFailedEmail` → send, payment, failed, email;
/// `log_to_axiom` → log, to, axiom.
pub fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if !c.is_ascii_alphanumeric() {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        let boundary = c.is_ascii_uppercase()
            && i > 0
            && (chars[i - 1].is_ascii_lowercase()
                || chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase()) && chars[i - 1].is_ascii_uppercase());
        if boundary && !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
        cur.push(c.to_ascii_lowercase());
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The category a function or method name states: `logAudit`, `trackEvent`, `notifyOwner`,
/// `sendReceiptEmail`, `captureException`.
pub fn named_category(name: &str) -> Option<Category> {
    let w = words(name);
    // `updateUserEmail`, `getEmailSettings`, `deleteLogs`: the verb says what happens to the data.
    let verb = w.first().map(String::as_str).unwrap_or("");
    if READ_PREFIXES.contains(&verb) || WRITE_VERBS.contains(&verb) {
        return None;
    }
    let has = |list: &[&str]| w.iter().any(|x| list.contains(&x.as_str()));
    // `reportApiProblem`, `errorReporter.report`: a report of a problem, not of usage.
    let singular = |list: &[&str]| {
        w.iter().any(|x| list.contains(&x.as_str()) || x.strip_suffix('s').is_some_and(|s| list.contains(&s)))
    };
    let problem_report = singular(&["report", "reporter"])
        && singular(&[
            "problem",
            "error",
            "exception",
            "issue",
            "warning",
            "anomaly",
            "incident",
            "suspicious",
            "diagnostic",
        ]);
    if has(TELEMETRY_WORDS)
        || problem_report
        || w.first().is_some_and(|f| f == "capture") && w.get(1).is_some_and(|s| s == "exception" || s == "message")
    {
        return Some(Category::Telemetry);
    }
    if w.iter().any(|x| NOTIFICATION_WORDS.contains(&x.as_str())) {
        return Some(Category::Notification);
    }
    None
}

/// A call whose callee names a read somewhere along its path: `getSubscriptionRow(id)`,
/// `db.user.findUnique(...)`, `tx.select().from(t).where(...)`.
pub fn is_read_call(call: Node, src: &str) -> bool {
    ast::callee_path(call, src).iter().any(|seg| read_segment(seg))
}

/// Whether a callee segment names a read: `findFirst`, `retrieve`, `select()`, `getUser`.
fn read_segment(seg: &str) -> bool {
    let seg = seg.trim_end_matches("()");
    let w = words(seg);
    w.first().is_some_and(|f| READ_PREFIXES.contains(&f.as_str()))
}

/// Calls that only combine or schedule other promises (their arguments are judged instead)
/// or compute values.
fn transparent(path: &[String]) -> bool {
    matches!(
        path.first().map(String::as_str),
        Some("Promise" | "JSON" | "Object" | "Array" | "Math" | "Number" | "String")
    ) || matches!(
        path.last().map(|s| s.trim_end_matches("()")),
        Some(
            "setTimeout"
                    | "clearTimeout"
                    | "import"
                    | "require"
                    | "toISOString"
                    | "toString"
                    | "slice"
                    | "map"
                    | "filter"
                    | "join"
                    // reading a fetched response's body
                    | "json"
                    | "text"
                    | "arrayBuffer"
                    | "blob"
        )
    ) || path.first().is_some_and(|r| r == "console")
}

/// The category of one call. `depth` bounds how far project functions are followed.
pub fn call_category(project: &Project, file: &Arc<SourceFile>, call: Node, depth: usize) -> Category {
    category_in(project, file, call, depth, &mut HashSet::new())
}

fn category_in(
    project: &Project,
    file: &Arc<SourceFile>,
    call: Node,
    depth: usize,
    seen: &mut HashSet<(std::path::PathBuf, usize)>,
) -> Category {
    let src = &file.text;
    let path = ast::callee_path_shared(call, src);
    if path.is_empty() {
        // `await import("pkg")` loads code; anything else unnamed is unknown work.
        let dynamic_import = call.field("function").is_some_and(|f| f.kind_name() == "import");
        return if dynamic_import { Category::Read } else { Category::Work };
    }
    if transparent(&path) {
        return Category::Read;
    }
    let name = path.last().map(|s| s.trim_end_matches("()").to_string()).unwrap_or_default();
    // An emitter's `emitAsync` runs whatever listens: the bus's name (`this.events`) says
    // nothing about what that work is.
    if name == "emitAsync" {
        return Category::Work;
    }
    // A job's progress report (BullMQ's `job.updateProgress(p)`, Bull's `job.progress(p)`) tells
    // watchers how far the work has come; it is not the work.
    if matches!(name.as_str(), "updateProgress" | "reportProgress") || name == "progress" && path.len() == 2 {
        return Category::Telemetry;
    }
    if let Some(job) = dispatched_job_category(call, src, &name) {
        return job;
    }
    if mints_credential(&path) {
        return Category::Read;
    }
    if let Some(def) = reach::resolve_call(project, file, call) {
        let named = named_category(&def.name);
        if depth == 0 || !seen.insert((def.file.path.clone(), def.span.start)) {
            return named.unwrap_or(Category::Work);
        }
        let Some(body) = def.node() else { return named.unwrap_or(Category::Work) };
        return summarise(project, &def.file, body, named, depth - 1, seen);
    }
    if let Some(effect) = effects::classify(call, src, false) {
        return match effect.kind {
            EffectKind::Email | EffectKind::Sms => Category::Notification,
            EffectKind::Possible => named_category(&name).unwrap_or(Category::Work),
            // A request to an endpoint named for what it collects (`METRICS_COLLECTOR_URL`,
            // `config.analyticsEndpoint`): the endpoint says what the request is.
            EffectKind::Http => endpoint_category(call, src).unwrap_or(Category::Work),
            // A plain insert into a log or audit table is an entry in a trail.
            EffectKind::DbInsert if log_table(call, src) => Category::Telemetry,
            _ => Category::Work,
        };
    }
    if let Some(cat) = path.iter().find_map(|seg| named_category(seg.trim_end_matches("()"))) {
        return cat;
    }
    if path.iter().any(|seg| read_segment(seg)) || read_rpc(call, src) {
        return Category::Read;
    }
    // An unknown call that is awaited is work; one that is not is a computation (or a
    // dropped promise, which is ack-timing's concern).
    // (`await Promise.all(items.map((i) => work(i)))` awaits `work` too: the search stops
    // at the enclosing statement, not at a concise arrow.)
    if awaited(call, src) { Category::Work } else { Category::Read }
}

/// A call that signs or issues a token for the request at hand (`signToken`, `jwt.sign`,
/// `createAccessToken`): a computation, not the event's work.
fn mints_credential(path: &[String]) -> bool {
    let w: Vec<String> = path.iter().flat_map(|seg| words(seg.trim_end_matches("()"))).collect();
    let name = path.last().map(|n| words(n.trim_end_matches("()"))).unwrap_or_default();
    name.first().is_some_and(|v| ["sign", "create", "generate", "issue", "mint"].contains(&v.as_str()))
        && w.iter().any(|x| matches!(x.as_str(), "token" | "jwt"))
}

/// The category an HTTP request's endpoint names, when its URL is a name rather than a literal
/// (`axios.post(IMPORTER_METRICS_URL, ...)`, `fetch(config.telemetryEndpoint, ...)`): only
/// telemetry counts, since a notification endpoint may be the event's own work.
fn endpoint_category(call: Node, src: &str) -> Option<Category> {
    let url = ast::unwrap_expr(*ast::arguments(call).first()?);
    let name = match url.kind_name() {
        "identifier" => text(url, src),
        "member_expression" => text(url.field("property")?, src),
        _ => return None,
    };
    named_category(name).filter(|c| *c == Category::Telemetry)
}

/// Whether `call`'s promise is awaited by its statement. An argument of another call is
/// computed before that call runs (`findFirst({ where: eq(a, b) })`: the `await` is for
/// `findFirst`), unless the outer call only combines promises (`Promise.all`, `items.map`).
/// A job dispatched by name is the work that name states: `triggerJob("notification", ...)`,
/// `queue.add("send-welcome-email", ...)` enqueue a notification, whatever else the dispatcher
/// can run.
fn dispatched_job_category(call: Node, src: &str, callee: &str) -> Option<Category> {
    const DISPATCH: &[&str] = &["trigger", "enqueue", "dispatch", "schedule", "add", "send", "publish", "emit", "job"];
    if !words(callee).iter().any(|w| DISPATCH.contains(&w.as_str())) {
        return None;
    }
    let job = ast::arguments(call).first().and_then(|a| ast::string_value(*a, src))?;
    named_category(&job).filter(|c| matches!(c, Category::Notification | Category::Telemetry))
}

fn awaited(call: Node, src: &str) -> bool {
    if ast::is_awaited_call(call) {
        return true;
    }
    for a in ast::ancestors(call) {
        let kind = a.kind_name();
        if kind.ends_with("statement") || kind.ends_with("declaration") {
            return false;
        }
        if kind == "await_expression" {
            return true;
        }
        if kind == "arguments"
            && let Some(outer) = ast::parent(a).filter(|p| p.kind_name() == "call_expression")
            && !transparent(&ast::callee_path(outer, src))
        {
            return false;
        }
    }
    false
}

/// What a function body amounts to, given the category its own name states: a function named
/// as telemetry or a notification stays so unless it also pays, enqueues or updates rows;
/// an unnamed one takes the category of its calls (all reads → a read).
fn summarise(
    project: &Project,
    file: &Arc<SourceFile>,
    body: Node,
    named: Option<Category>,
    depth: usize,
    seen: &mut HashSet<(std::path::PathBuf, usize)>,
) -> Category {
    let mut found = Vec::new();
    for inner in ast::calls_in(body, false) {
        if ast::callee_path(inner, &file.text).len() > 1
            && ast::parent(inner).is_some_and(|p| p.kind_name() == "member_expression")
        {
            continue; // only the outermost call of a chain
        }
        found.push((inner, category_in(project, file, inner, depth, seen)));
    }
    let heavy = found.iter().any(|(c, cat)| {
        *cat == Category::Work
            && effects::classify(*c, &file.text, false).is_some_and(|e| {
                matches!(
                    e.kind,
                    EffectKind::Payment | EffectKind::Enqueue | EffectKind::DbUpdate | EffectKind::DbIncrement
                )
            })
    });
    match named {
        Some(cat) if !heavy => cat,
        Some(_) => Category::Work,
        None => combine(found.iter().map(|(_, c)| *c)),
    }
}

/// The category of a group of calls: work if any is work, else the side effect they have.
pub fn combine(cats: impl Iterator<Item = Category>) -> Category {
    let mut out = Category::Read;
    for c in cats {
        match c {
            Category::Work => return Category::Work,
            Category::Telemetry | Category::Notification => out = c,
            Category::Read => {}
        }
    }
    out
}

/// The category of the work under `node` (its outermost calls, nested functions included).
pub fn block_category(project: &Project, file: &Arc<SourceFile>, node: Node) -> Category {
    let src = &file.text;
    let calls = ast::calls_in(node, false)
        .into_iter()
        .filter(|c| ast::parent(c).is_none_or(|p| p.kind_name() != "member_expression"))
        .filter(|c| ast::callee_path(*c, src).first().is_none_or(|r| r != "console"));
    combine(calls.map(|c| call_category(project, file, c, 3)))
}

/// `console.error(...)`, `logger.warn(...)`, `log.info(...)`, `Sentry.captureException(...)`.
pub fn is_logging_call(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    let root = path.first().map(|r| r.to_ascii_lowercase()).unwrap_or_default();
    let last = path.last().map(|l| l.to_ascii_lowercase()).unwrap_or_default();
    root == "console"
        || root.contains("logger")
        || root == "log"
        || root == "sentry"
        || matches!(last.as_str(), "log" | "warn" | "info" | "debug")
}

/// `db.insert(auditLogs)`, `INSERT INTO "PipelineEventLog"`, `prisma.auditLog.create`, `Log.create`.
pub fn log_table(call: Node, src: &str) -> bool {
    let t = text(call, src);
    let target = crate::regex!(r#"(?i)insert\s*(?:into\s+)?\(?\s*["'`]?([A-Za-z_][\w]*)"#)
        .captures(t)
        .map(|c| c[1].to_string())
        .or_else(|| {
            let path = ast::callee_path_shared(call, src);
            match path.len() {
                // A model class's own insert (Mongoose `Log.create(...)`, `AuditLog.insertMany`);
                // a lower-case receiver (`auditLog.insert`) is some service, not a table.
                2 if path[0].starts_with(|c: char| c.is_ascii_uppercase()) => Some(path[0].clone()),
                3.. => Some(path[path.len() - 2].clone()),
                _ => None,
            }
        })
        .unwrap_or_default();
    let w = words(&target);
    w.iter().any(|x| matches!(x.as_str(), "audit" | "log" | "logs"))
}

/// `supabase.rpc('get_total_credits', ...)`: a stored procedure named as a read.
pub fn read_rpc(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    path.last().is_some_and(|l| l.trim_end_matches("()") == "rpc")
        && ast::arguments(call).first().and_then(|a| ast::string_value(*a, src)).is_some_and(|n| read_segment(&n))
}

/// Calls that run their callback after the current one returns (`after`, `waitUntil`,
/// `setImmediate`, ...).
const DEFERRERS: &[&str] =
    &["after", "unstable_after", "waitUntil", "setImmediate", "setTimeout", "nextTick", "queueMicrotask"];

/// The deferring call's name when `call` defers its callback: work handed to it may run after
/// the response (or never, when the runtime stops).
pub fn deferrer(call: Node, src: &str) -> Option<String> {
    let path = ast::callee_path_shared(call, src);
    let last = path.last()?.trim_end_matches("()");
    if !DEFERRERS.contains(&last) {
        return None;
    }
    if last == "nextTick" && path.first().is_none_or(|p| p != "process") {
        return None;
    }
    if matches!(last, "after" | "unstable_after" | "setImmediate" | "setTimeout" | "queueMicrotask") && path.len() != 1
    {
        return None;
    }
    Some(path.join("."))
}

/// Phrases of a comment that declares the work below it best-effort.
const MARKED: &[&str] = &[
    "best effort",
    "best-effort",
    "non-fatal",
    "nonfatal",
    "non-critical",
    "noncritical",
    "not critical",
    "ignore error",
    "ignore the error",
    "ignore failure",
    "safe to ignore",
    "intentionally ignore",
    "deliberately ignore",
    // "don't fail the order if tracking fails", "do not throw, let the sync complete"
    "do not throw",
    "don't throw",
    "never throw",
    "do not fail",
    "don't fail",
    "must not fail",
    "should not fail",
    "shouldn't fail",
    "must not block",
    "must never fail",
    "never fail the",
    // "isolated so a provider outage never fails the computation"
    "never fails the",
    "must never break",
    "never break the",
    "avoid breaking",
    "fire-and-forget",
    "fire and forget",
    "continue processing even if",
    "continue even if",
    "proceed even if",
];

/// A lowercased comment that declares the call best-effort ("don't fail silently" says the opposite).
pub fn marked(comment: &str) -> bool {
    MARKED.iter().any(|m| comment.contains(m)) && !comment.contains("silent")
}

/// The comment lines directly above the line starting at `line_start`, lowercased and joined
/// with spaces (a marker phrase may wrap onto the next line), up to a non-comment line.
pub fn comment_block_above(src: &str, line_start: usize) -> Option<String> {
    let mut lines = Vec::new();
    for line in src[..line_start].lines().rev() {
        let t = line.trim();
        let comment = t.starts_with("//") || t.starts_with("/*") || t.starts_with('*') || t.ends_with("*/");
        if !comment || lines.len() >= 12 {
            break;
        }
        lines.push(t.trim_start_matches(['/', '*', ' ']).to_ascii_lowercase());
    }
    if lines.is_empty() {
        return None;
    }
    lines.reverse();
    Some(lines.join(" "))
}

/// A block's own words (its log messages, its comments) call the work best-effort.
pub fn says_best_effort(block: Node, src: &str) -> Option<&'static str> {
    let t = text(block, src).to_ascii_lowercase();
    const SAID: &[&str] = &[
        "cache",
        "analytics",
        "track",
        "telemetry",
        "best-effort",
        "best effort",
        "non-critical",
        "non-fatal",
        "nonfatal",
        "non-blocking",
        // "error sending the notification": a message beside the event's work, not the work
        "notification",
        // "websocket broadcast failed": a push to the clients connected now, kept nowhere
        "websocket",
        "realtime",
        // "error logging the transaction", "failed to write the audit row": the failed write is
        // the log itself
        "error logging",
        "failed to log",
        "audit log",
        "audit trail",
        // circuit-breaker bookkeeping about the endpoint, not the event's work
        "breaker",
        // "swallowing to prevent webhook retries": the catch says the acknowledgement is the point
        "prevent retr",
        "prevent webhook retr",
        "avoid retr",
        "avoid webhook retr",
        // "one broken group should not fail the whole refresh": isolation chosen on purpose
        "not fail the whole",
        "n't fail the whole",
        "to fail the whole",
        "not want to fail",
        "n't want to fail",
        "should not fail the",
        "shouldn't fail the",
        "must not fail the",
    ];
    SAID.iter().find(|w| t.contains(**w)).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_words() {
        assert_eq!(words("sendPaymentFailedEmail"), ["send", "payment", "failed", "email"]);
        assert_eq!(words("log_to_axiom"), ["log", "to", "axiom"]);
        assert_eq!(words("HTTPClient"), ["http", "client"]);
        assert_eq!(words("catalog"), ["catalog"]);
    }

    #[test]
    fn names_state_categories() {
        assert_eq!(named_category("logAudit"), Some(Category::Telemetry));
        assert_eq!(named_category("trackWebhookEvent"), Some(Category::Telemetry));
        assert_eq!(named_category("captureException"), Some(Category::Telemetry));
        assert_eq!(named_category("sendReceiptEmail"), Some(Category::Notification));
        assert_eq!(named_category("notify"), Some(Category::Notification));
        assert_eq!(named_category("processLogin"), None);
        assert_eq!(named_category("fulfillOrder"), None);
        assert_eq!(named_category("capturePayment"), None);
        assert_eq!(named_category("updateUserEmail"), None);
        assert_eq!(named_category("getEmailSettings"), None);
    }
}
