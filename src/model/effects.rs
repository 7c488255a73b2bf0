//! Classifies a call by what it does to the world: database writes (absolute, relative,
//! insert, upsert), external effects (payments, email, SMS, chat, queues, HTTP), and whether
//! it already carries a provider idempotency key. Project-local wrappers are not effects
//! themselves: their bodies are scanned as reachable scopes (see `reach`), so an effect is
//! classified by what the wrapper finally does.

use super::ast::{self, text};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use serde::Serialize;
use tree_sitter::Node;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EffectKind {
    DbInsert,
    DbUpsert,
    DbUpdate,
    /// A relative write: increment, `x = x + n`, `$inc`, append.
    DbIncrement,
    DbDelete,
    Payment,
    Email,
    Sms,
    Chat,
    Enqueue,
    Http,
    /// A call to a package or unresolved function whose name says it acts (`send*`, `charge*`).
    Possible,
}

impl EffectKind {
    pub fn is_external(self) -> bool {
        !self.is_db()
    }

    pub fn is_db(self) -> bool {
        matches!(
            self,
            EffectKind::DbInsert
                | EffectKind::DbUpsert
                | EffectKind::DbUpdate
                | EffectKind::DbIncrement
                | EffectKind::DbDelete
        )
    }

    pub fn noun(self) -> &'static str {
        match self {
            EffectKind::DbInsert => "database insert",
            EffectKind::DbUpsert => "database upsert",
            EffectKind::DbUpdate => "database update",
            EffectKind::DbIncrement => "relative database write",
            EffectKind::DbDelete => "database delete",
            EffectKind::Payment => "payment call",
            EffectKind::Email => "email send",
            EffectKind::Sms => "SMS send",
            EffectKind::Chat => "chat message",
            EffectKind::Enqueue => "enqueue",
            EffectKind::Http => "outbound HTTP request",
            EffectKind::Possible => "possible external effect",
        }
    }
}

/// Which SDK an external effect goes through (decides the idempotency-key syntax).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sdk {
    Stripe,
    Resend,
    Square,
    Adyen,
    Svix,
    Inngest,
    TriggerDev,
    Bullmq,
    Sqs,
    Paypal,
    Other,
}

impl Sdk {
    /// Whether the SDK accepts a provider idempotency key (docs/providers.md, "SDKs that accept an idempotency key").
    pub fn accepts_key(self) -> bool {
        !matches!(self, Sdk::Other | Sdk::Bullmq)
    }
}

#[derive(Clone, Debug)]
pub struct Effect<'t> {
    pub kind: EffectKind,
    pub sdk: Sdk,
    pub call: Node<'t>,
    /// The callee as written: `stripe.refunds.create`.
    pub label: String,
    /// The provider idempotency key (or jobId / dedup id) passed, if any.
    pub key: Option<Node<'t>>,
}

const STRIPE_WRITES: &[&str] = &[
    "create",
    "update",
    "del",
    "confirm",
    "capture",
    "cancel",
    "pay",
    "finalizeInvoice",
    "sendInvoice",
    "voidInvoice",
    "markUncollectible",
    "createReversal",
    "attach",
    "detach",
    "resume",
    "apply",
    "incrementAuthorization",
];
/// Adyen calls that create or modify a payment (lower case).
const ADYEN_WRITES: &[&str] = &[
    "payments",
    "paymentsdetails",
    "sessions",
    "paymentsession",
    "cancelauthorisedpayment",
    "cancelauthorisedpaymentbypspreference",
    "captureauthorisedpayment",
    "refundcapturedpayment",
    "refundorcancelpayment",
    "updateauthorisedamount",
];

/// Where Adyen's request options go: after the request, which follows the PSP reference on
/// the modifications that name one.
fn adyen_options_index(last_lower: &str) -> usize {
    let by_reference = ["captureauthorisedpayment", "refundcapturedpayment", "refundorcancelpayment"];
    if by_reference.contains(&last_lower)
        || last_lower.ends_with("bypspreference")
        || last_lower == "updateauthorisedamount"
    {
        2
    } else {
        1
    }
}

/// Where Trigger.dev's trigger options go: third for `tasks.trigger("id", payload, opts)`,
/// second for a task handle's `myTask.trigger(payload, opts)`.
pub fn trigger_options_index(call: Node, src: &str) -> usize {
    let path = ast::callee_path_shared(call, src);
    let by_id = path.first().is_some_and(|p| p == "tasks")
        || ast::arguments(call).first().is_some_and(|a| matches!(a.kind_name(), "string" | "template_string"));
    if by_id { 2 } else { 1 }
}

impl Effect<'_> {
    /// A provider call whose replay leaves the world as the first delivery left it, so it
    /// needs neither a key nor a guard: Stripe `update` requests set absolute values on an
    /// existing object, `paymentMethods.attach` binds a method to one customer, and DELETE-like requests (`del`, `cancel`,
    /// `detach`, `deleteDiscount`) end in the same state however often they run.
    pub fn replays_harmlessly(&self, src: &str) -> bool {
        if self.kind != EffectKind::Payment {
            return false;
        }
        let path = ast::callee_path_shared(self.call, src);
        let last = path.last().map(|l| l.trim_end_matches("()")).unwrap_or_default();
        let resource = path.len().checked_sub(2).and_then(|i| path.get(i)).map(String::as_str);
        // Stripe's DELETE requests are classified without a key (`Sdk::Other`), its other
        // requests as `Sdk::Stripe`.
        match self.sdk {
            // Attaching a payment method to the customer it is already attached to returns it;
            // voiding an invoice or marking it uncollectible is a final state a repeat cannot
            // apply twice.
            Sdk::Stripe => {
                matches!(last, "update" | "detach" | "cancel" | "voidInvoice" | "markUncollectible")
                    || (last == "attach" && resource == Some("paymentMethods"))
            }
            Sdk::Other => {
                matches!(last, "del" | "deleteDiscount") || (last == "cancel" && resource == Some("subscriptions"))
            }
            _ => false,
        }
    }

    /// The argument that holds the request options carrying the idempotency key, for SDKs
    /// that take them at a fixed position (Stripe's are the last argument, Square's and
    /// Inngest's key is a field of the first).
    pub fn options_index(&self, src: &str) -> Option<usize> {
        match self.sdk {
            Sdk::Resend => Some(1),
            Sdk::Svix => Some(2),
            Sdk::Adyen => {
                let last = ast::callee_path(self.call, src).pop().unwrap_or_default().to_ascii_lowercase();
                Some(adyen_options_index(&last))
            }
            Sdk::TriggerDev => Some(trigger_options_index(self.call, src)),
            _ => None,
        }
    }
}

/// Stripe request options: an object literal whose keys are all options keys.
pub fn is_stripe_options(node: Node, src: &str) -> bool {
    const KEYS: &[&str] =
        &["idempotencyKey", "stripeAccount", "apiVersion", "maxNetworkRetries", "timeout", "apiKey", "stripeContext"];
    node.kind_name() == "object"
        && ast::named_children(node).iter().all(|p| {
            let key = p.field("key").map(|k| text(k, src)).unwrap_or_else(|| text(*p, src));
            KEYS.contains(&key)
        })
        && node.named_child_count() > 0
}

const POSSIBLE_PREFIXES: &[&str] = &[
    "send",
    "email",
    "mail",
    "notify",
    "charge",
    "refund",
    "enqueue",
    "trigger",
    "publish",
    "dispatch",
    "sms",
    "payout",
    "fulfil",
    "ship",
    "grant",
    "provision",
];

thread_local! {
    static CONFIGURED_WRAPPERS: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Changes with the configured wrappers: a remembered classification holds only for the
    /// wrappers it was made with.
    static WRAPPERS_GENERATION: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Runs `f` with the config's `effectWrappers` counted as effects. Files are analysed one per
/// thread at a time, so the setting follows each file's own (nearest) config.
pub fn with_effect_wrappers<R>(names: &[String], f: impl FnOnce() -> R) -> R {
    let bump = || WRAPPERS_GENERATION.with(|g| g.set(g.get() + 1));
    let previous = CONFIGURED_WRAPPERS.with(|w| std::mem::replace(&mut *w.borrow_mut(), names.to_vec()));
    bump();
    let out = f();
    CONFIGURED_WRAPPERS.with(|w| *w.borrow_mut() = previous);
    bump();
    out
}

/// Which configured wrappers classifications are made with now: an answer remembered from
/// classifications holds only while this stays the same.
pub fn wrappers_generation() -> u64 {
    WRAPPERS_GENERATION.with(|g| g.get())
}

/// What a remembered classification is looked up by: the call (its position in its tree's
/// node list), the text it was read from, and what else the answer depends on.
#[derive(Hash, PartialEq, Eq)]
struct ClassifiedCall {
    at: u32,
    src: (usize, usize),
    resolved_locally: bool,
    wrappers: u64,
}

/// A classification without its nodes: the call is the one asked about, the key a position.
#[derive(Clone)]
struct Classification {
    kind: EffectKind,
    sdk: Sdk,
    label: String,
    key: Option<u32>,
}

/// Classifies one call expression. `resolved_locally` says the callee is a project function
/// (its body is analysed as its own scope, so it is not classified by name here).
pub fn classify<'t>(call: Node<'t>, src: &str, resolved_locally: bool) -> Option<Effect<'t>> {
    // Every rule and model asks about the same calls of a handler's scopes, and a
    // classification costs tens of thousands of instructions: each is made once per analysis
    // and remembered with the call's tree (when its node list is built).
    let Some(index) = crate::syntax::node_index::existing(call) else {
        return classify_once(call, src, resolved_locally);
    };
    let Some(at) = index.position_of(call) else {
        return classify_once(call, src, resolved_locally);
    };
    let asked = ClassifiedCall {
        at,
        src: (src.as_ptr() as usize, src.len()),
        resolved_locally,
        wrappers: WRAPPERS_GENERATION.with(|g| g.get()),
    };
    if let Some(known) = index.recall::<ClassifiedCall, Option<Classification>>(&asked) {
        return known.map(|c| Effect {
            kind: c.kind,
            sdk: c.sdk,
            call,
            label: c.label,
            key: c.key.map(|at| index.node_at(at, call)),
        });
    }
    let effect = classify_once(call, src, resolved_locally);
    let remembered = match &effect {
        None => Some(None),
        Some(e) => {
            let key = match e.key {
                None => Some(None),
                Some(k) => index.position_of(k).map(Some),
            };
            key.map(|key| Some(Classification { kind: e.kind, sdk: e.sdk, label: e.label.clone(), key }))
        }
    };
    if let Some(remembered) = remembered {
        index.remember(asked, remembered);
    }
    effect
}

fn classify_once<'t>(call: Node<'t>, src: &str, resolved_locally: bool) -> Option<Effect<'t>> {
    let mut effect = classify_call(call, src, resolved_locally)?;
    if effect.key.is_none() && effect.sdk == Sdk::Other && effect.kind.is_external() {
        effect.key = passed_idempotency_key(call, src).or_else(|| once_key(call, src));
    }
    if effect.key.is_none() && effect.kind.is_external() {
        effect.key = options_handed_in(call, src);
    }
    Some(effect)
}

/// A key handed to a wrapper or an SDK this module does not model (`sendEmail({ ...,
/// idempotencyKey })`): the call says it is keyed, and where the key goes is the callee's
/// business. (The modelled SDKs read their key from the one place the provider takes it.)
fn passed_idempotency_key<'t>(call: Node<'t>, src: &str) -> Option<Node<'t>> {
    ast::arguments(call).into_iter().find_map(|a| {
        // QStash's `deduplicationId` and an SQS FIFO queue's `MessageDeduplicationId` drop a
        // repeat of the same id, as a provider idempotency key does.
        ["idempotencyKey", "idempotency_key", "idempotencyToken", "deduplicationId", "MessageDeduplicationId"]
            .iter()
            .find_map(|k| object_prop(a, k, src))
    })
}

/// Options a callback was handed and passes on whole (`reschedule: (next, options) =>
/// tasks.trigger(id, next, options)`): its caller, out of sight, builds them, so whether they
/// carry a key is the caller's business, as with a key handed to a wrapper. A named function's
/// options (`enqueue(job, options = {})`) are not: its callers are followed, and show them.
fn options_handed_in<'t>(call: Node<'t>, src: &str) -> Option<Node<'t>> {
    let func =
        ast::enclosing_function(call).filter(|f| matches!(f.kind_name(), "arrow_function" | "function_expression"))?;
    let params = func.field("parameters")?;
    let handed: Vec<&str> = ast::named_children(params)
        .into_iter()
        .filter(|p| p.field("value").is_none())
        .filter_map(|p| p.field("pattern").filter(|n| n.kind_name() == "identifier").map(|n| text(n, src)))
        .collect();
    ast::arguments(call).into_iter().skip(1).find(|a| {
        a.kind_name() == "identifier" && {
            let name = text(*a, src);
            handed.contains(&name) && crate::regex!(r"(?i)^(?:\w*options|opts)$").is_match(name)
        }
    })
}

/// A wrapper named for running once (`enqueueOnce({ id: event.id, ... })`, `sendOnce(key, msg)`)
/// dedupes by what it is handed first: that argument is its key.
fn once_key<'t>(call: Node<'t>, src: &str) -> Option<Node<'t>> {
    let name = ast::callee_name(call, src)?;
    crate::regex!(r"[a-z]Once$").is_match(&name).then(|| ast::arguments(call).into_iter().next()).flatten()
}

fn classify_call<'t>(call: Node<'t>, src: &str, resolved_locally: bool) -> Option<Effect<'t>> {
    if !chain_end(call, src) {
        return None;
    }
    let path = ast::callee_path_shared(call, src);
    let full = text(call, src);
    let args = ast::arguments(call);
    let lower: Vec<String> = path.iter().map(|s| s.trim_end_matches("()").to_ascii_lowercase()).collect();
    let last = lower.last().cloned().unwrap_or_default();
    let last_raw = path.last().map(|s| s.trim_end_matches("()").to_string()).unwrap_or_default();
    let root = lower.first().cloned().unwrap_or_default();
    let has = |needle: &str| lower.iter().any(|s| s.contains(needle));
    let effect = |kind, sdk, key| Some(Effect { kind, sdk, call, label: path.join("."), key });

    if path.is_empty() {
        return None;
    }
    // Reads never need a key.
    if ["retrieve", "list", "get", "find", "findunique", "findfirst", "findmany", "search", "count", "exists", "select"]
        .contains(&last.as_str())
        && !["insert()", "upsert()", "update()", "delete()"]
            .iter()
            .any(|w| path.iter().any(|p| p.eq_ignore_ascii_case(w)))
    {
        return None;
    }
    // `NotionClient.create(props)`, `asana.Client.create(...)`: a client class's static factory
    // builds a client, it sends nothing (a model accessor is lowercase: `db.oauthClient.create`).
    if path.len() >= 2
        && matches!(last.as_str(), "create" | "init" | "build" | "connect")
        && path[path.len() - 2].starts_with(|c: char| c.is_ascii_uppercase())
        && path[path.len() - 2].ends_with("Client")
    {
        return None;
    }
    // Stripe
    // The Stripe client comes before the resource: `stripe.refunds.create`, `this.stripe.x.create`;
    // never `prisma.stripeEvent.create` (a table named after Stripe).
    // What the receiver was built with (`const payments = new Stripe(key)`, `twilio(sid, token)`):
    // the client is what its initializer constructs, whatever the variable is called.
    let built = constructed_by(call, &path, src).map(|c| c.to_ascii_lowercase()).unwrap_or_default();
    let stripe_client =
        built == "stripe" || lower.iter().take(lower.len().saturating_sub(2)).any(|s| s.contains("stripe"));
    if stripe_client
        && !is_db_root(&root)
        && lower.len() >= 3
        && !has("webhooks")
        && STRIPE_WRITES.contains(&last_raw.as_str())
    {
        // A meter event's `identifier` is its key: Stripe drops a second event with the same one.
        let meter_identifier = (lower.len() >= 2 && lower[lower.len() - 2] == "meterevents" && last_raw == "create")
            .then(|| args.first().and_then(|o| object_prop(*o, "identifier", src)))
            .flatten();
        let key = last_object_property(&args, "idempotencyKey", src).or(meter_identifier);
        // DELETE requests take no idempotency key (they are idempotent by definition).
        let delete = last_raw == "del"
            || last_raw == "deleteDiscount"
            || (last_raw == "cancel" && lower.get(lower.len() - 2).is_some_and(|r| r == "subscriptions"));
        return effect(EffectKind::Payment, if delete { Sdk::Other } else { Sdk::Stripe }, key);
    }
    // Resend (returns { data, error }, never throws)
    if (has("resend") || built == "resend")
        && (has("emails") || has("batch"))
        && matches!(last.as_str(), "send" | "create")
    {
        let key = args.get(1).and_then(|o| object_prop(*o, "idempotencyKey", src));
        return effect(EffectKind::Email, Sdk::Resend, key);
    }
    // Square: body field
    if has("square") || has("paymentsapi") || (has("payments") && has("client") && last == "create") {
        if matches!(last.as_str(), "create" | "refundpayment" | "createpayment" | "createorder" | "complete") {
            let key = args.first().and_then(|o| object_prop(*o, "idempotencyKey", src));
            return effect(EffectKind::Payment, Sdk::Square, key);
        }
    }
    // Adyen: `checkout.PaymentsApi.payments(req, opts)`, `checkout.ModificationsApi.
    // refundCapturedPayment(pspReference, req, opts)`; `paymentMethods` and the like are reads.
    if (has("paymentsapi") || has("modificationsapi") || has("checkout")) && ADYEN_WRITES.contains(&last.as_str()) {
        let key = args.get(adyen_options_index(&last)).and_then(|o| object_prop(*o, "idempotencyKey", src));
        return effect(EffectKind::Payment, Sdk::Adyen, key);
    }
    if has("paymentsapi") || has("modificationsapi") {
        return None;
    }
    // Svix as a sender
    if has("svix") && has("message") && last == "create" {
        let key = args.get(2).and_then(|o| object_prop(*o, "idempotencyKey", src));
        return effect(EffectKind::Enqueue, Sdk::Svix, key);
    }
    // Inngest send: `id` is the key
    if has("inngest") && last == "send" {
        let key = args.first().and_then(|o| object_prop(*o, "id", src));
        return effect(EffectKind::Enqueue, Sdk::Inngest, key);
    }
    // Trigger.dev: `tasks.trigger("id", payload, opts)`, `myTask.trigger(payload, opts)`; not
    // Pusher's `pusher.trigger(channel, event, data)`, a DOM/emitter `trigger("click")` or a
    // service class's own method.
    let task_handle = lower.len() == 2
        && !args.first().is_some_and(|a| matches!(a.kind_name(), "string" | "template_string"))
        && !["pusher", "this", "$", "jquery", "emitter", "events", "socket", "io", "channel"].contains(&root.as_str());
    // the app's own classes (`ActionService.trigger(contact, event)`) are not task handles:
    // what their method does is known by its name only
    let app_class = ["service", "controller", "repository", "manager", "helper"].iter().any(|s| root.ends_with(s));
    if task_handle && app_class && last == "trigger" {
        return effect(EffectKind::Possible, Sdk::Other, None);
    }
    if matches!(last.as_str(), "trigger" | "batchtrigger" | "triggerandwait") && (has("tasks") || task_handle) {
        let key = args.get(trigger_options_index(call, src)).and_then(|o| object_prop(*o, "idempotencyKey", src));
        return effect(EffectKind::Enqueue, Sdk::TriggerDev, key);
    }
    // BullMQ / Bull
    if (last == "add" || last == "addbulk")
        && (has("queue") || has("flow") || has("producer"))
        && !in_memory_collection(call, src)
    {
        let key = if last == "add" {
            args.iter()
                .skip(1)
                .find_map(|o| object_prop(*o, "jobId", src).or_else(|| object_prop(*o, "deduplication", src)))
        } else {
            None
        };
        return effect(EffectKind::Enqueue, Sdk::Bullmq, key);
    }
    // AWS SDK v3: client.send(new SendMessageCommand({...}))
    if last == "send"
        && let Some(cmd) = args.first().filter(|a| a.kind_name() == "new_expression")
    {
        let ctor = cmd.field("constructor").map(|c| text(c, src)).unwrap_or("");
        let input = cmd.field("arguments").and_then(|a| a.named_child(0));
        if ctor.starts_with("SendMessage") || ctor == "PublishCommand" || ctor == "PutEventsCommand" {
            let key = input.and_then(|i| object_prop(i, "MessageDeduplicationId", src));
            return effect(EffectKind::Enqueue, Sdk::Sqs, key);
        }
        if repeats_harmlessly(ctor) {
            return None;
        }
        if let Some(kind) = dynamo_command(ctor, input, src) {
            return kind.and_then(|kind| effect(kind, Sdk::Other, None));
        }
    }
    // `const cmd = new PutCommand({...}); await ddb.send(cmd)`
    if last == "send"
        && let Some(var) = args.first().filter(|a| a.kind_name() == "identifier")
        && let Some(init) = ast::enclosing_function(call)
            .and_then(|f| ast::find_binding_init(f, text(*var, src), src, call.start_byte()))
            .map(ast::unwrap_expr)
            .filter(|i| i.kind_name() == "new_expression")
    {
        let ctor = init.field("constructor").map(|c| text(c, src)).unwrap_or("");
        let input = init.field("arguments").and_then(|a| a.named_child(0));
        if repeats_harmlessly(ctor) {
            return None;
        }
        if let Some(kind) = dynamo_command(ctor, input, src) {
            return kind.and_then(|kind| effect(kind, Sdk::Other, None));
        }
    }
    // `const command = new ReceiveMessageCommand(...); await sqs.send(command)`
    if last == "send"
        && let Some(var) = args.first().filter(|a| a.kind_name() == "identifier")
        && let Some(f) = ast::enclosing_function(call)
        && crate::regex!(r"\b(\w+)\s*=\s*new (ReceiveMessage|DeleteMessage|Get)\w*Command\b")
            .captures_iter(text(f, src))
            .any(|c| &c[1] == text(*var, src))
    {
        return None;
    }
    if has("sqs") && matches!(last.as_str(), "sendmessage" | "sendmessagebatch") {
        let key = args.first().and_then(|o| object_prop(*o, "MessageDeduplicationId", src));
        return effect(EffectKind::Enqueue, Sdk::Sqs, key);
    }
    // Email and messaging SDKs without keys
    if matches!(last.as_str(), "sendmail" | "sendemail" | "sendemailwithtemplate" | "sendemailbatch" | "sendmultiple")
        || ((has("sgmail") || has("sendgrid") || has("mailer") || has("postmark")) && last == "send")
    {
        return effect(EffectKind::Email, Sdk::Other, None);
    }
    if (has("messages") || has("calls"))
        && last == "create"
        && (has("twilio") || built == "twilio" || root == "client" || root == "this")
        && !is_db_root(&root)
    {
        return effect(EffectKind::Sms, Sdk::Other, None);
    }
    if has("chat") && matches!(last.as_str(), "postmessage" | "postephemeral" | "update") || last == "uploadv2" {
        return effect(EffectKind::Chat, Sdk::Other, None);
    }
    // Getting an authenticated client (`app.getInstallationOctokit(id)`) or reading through it
    // (`octokit.rest.pulls.get`, `octokit.paginate`) posts nothing.
    // Configuring a client (`Octokit.plugin(throttling).defaults({ baseUrl })`, `octokit.hook`)
    // posts nothing either: only a verb that writes does.
    // `octokit.request("GET /repos/{owner}/{repo}/pulls/{pull_number}")`: the route names the
    // HTTP method, and a GET or HEAD reads.
    let read_route = last == "request"
        && args.first().and_then(|a| ast::string_value(*a, src)).is_some_and(|route| {
            let method = route.split_whitespace().next().unwrap_or("").to_ascii_uppercase();
            matches!(method.as_str(), "GET" | "HEAD")
        });
    let octokit_read = read_route || ["get", "list", "paginate", "auth", "graphql"].iter().any(|r| last.starts_with(r));
    // Absolute writes that name their target (`updateComment({ comment_id })`, `setLabels`,
    // `removeLabel`, `deleteComment`, `lock`, `addLabels`, a set) leave the same state when
    // repeated; a create, a post or a dispatch adds another.
    // A commit status (`repos.createCommitStatus({ sha, context, state })`) is the state of one
    // context on one commit: the latest per context counts, so a repeat shows the same. So is a
    // check run (`checks.create({ name, head_sha })`: the latest run of a name on a commit is
    // the one shown); a label is unique by name in its repository (a repeat is refused), and
    // `addOrUpdate...` (`teams.addOrUpdateRepoPermissionsInOrg`) sets an absolute value.
    let state_per_target = last == "createcommitstatus" || last == "createlabel" || has("checks") && last == "create";
    let octokit_write = ["create", "post", "merge", "submit", "request", "rerequest", "dispatch", "upload"]
        .iter()
        .any(|w| last.starts_with(w))
        && !state_per_target
        || last.starts_with("add")
            && !last.starts_with("addorupdate")
            && !["addlabels", "addassignees", "addcollaborator"].contains(&last.as_str());
    // `createOctokitInstance(token)`, `createOctokit()`: a factory that names the client builds it.
    let builds_client = last.contains("octokit") || last.ends_with("client") || last.ends_with("instance");
    if (has("octokit") && !octokit_read && octokit_write && !builds_client)
        || (has("issues") && matches!(last.as_str(), "createcomment" | "create"))
        || has("pulls") && last == "create"
    {
        return effect(EffectKind::Chat, Sdk::Other, None);
    }
    if has("paypal") && matches!(last.as_str(), "capture" | "create" | "execute" | "refund") {
        return effect(EffectKind::Payment, Sdk::Paypal, None);
    }
    // HTTP
    if root == "fetch" && path.len() == 1 {
        // Slack's Web API methods that replace what they name (a Home tab, a message by its `ts`)
        // leave the same state when repeated; its readers (`calls.info`, `users.list`,
        // `conversations.history`) are POSTs that change nothing.
        if args.first().is_some_and(|url| {
            crate::regex!(
                r"slack\.com/api/(?:views\.(?:publish|update)|chat\.update|[\w.]+\.(?:info|list|history|replies|members|lookupByEmail|get\w*))\b"
            )
            .is_match(text(*url, src))
        }) {
            return None;
        }
        let method =
            args.get(1).and_then(|o| object_prop(*o, "method", src)).map(|m| text(m, src).to_ascii_uppercase());
        return match method {
            Some(m) if m.contains("POST") || m.contains("PUT") || m.contains("PATCH") || m.contains("DELETE") => {
                let key = args
                    .get(1)
                    .and_then(|o| object_prop(*o, "headers", src))
                    .filter(|h| text(*h, src).to_ascii_lowercase().contains("idempotency-key"));
                effect(EffectKind::Http, Sdk::Other, key)
            }
            _ => None,
        };
    }
    if matches!(root.as_str(), "axios" | "got" | "ky" | "superagent" | "http" | "httpclient" | "api" | "client")
        && matches!(last.as_str(), "post" | "put" | "patch" | "delete")
    {
        let key = args.iter().find(|a| text(**a, src).to_ascii_lowercase().contains("idempotency-key")).copied();
        return effect(EffectKind::Http, Sdk::Other, key);
    }
    // A platform client handed to the handler (`client.createMessage`, `props.client.createEvent`
    // in a Botpress integration) posts a message or emits an event that runs the bot's
    // workflows: each call is a new one. Its `getOrCreate*` calls are keyed by their tags.
    if lower.len() >= 2
        && lower[lower.len() - 2] == "client"
        && matches!(last.as_str(), "createmessage" | "createevent")
    {
        return effect(EffectKind::Possible, Sdk::Other, None);
    }
    // Mailgun: `mg.messages.create(domain, data)`.
    if (has("mailgun") || root == "mg") && has("messages") && last == "create" {
        return effect(EffectKind::Email, Sdk::Other, None);
    }
    // Other packages' SDK clients are never databases: `openai.chat.completions.create`,
    // `paddle.transactions.create`, `resend.contacts.create`. AI calls are not effects; the
    // rest are possible effects when they create or send.
    // The receiver is the object a method is called on; a plain function call has none, so
    // `createLinearClient(...)` (building a client) is never taken for the client's own call.
    let receiver = match (root.as_str(), lower.len()) {
        (_, 0 | 1) => String::new(),
        ("this", _) => lower.get(1).cloned().unwrap_or_default(),
        _ => root.clone(),
    };
    if ["openai", "anthropic", "groq", "mistral", "cohere", "replicate", "gemini", "genai", "llm"]
        .iter()
        .any(|n| receiver.contains(n))
    {
        return None;
    }
    if [
        "resend",
        "paddle",
        "lemonsqueezy",
        "lemon",
        "polar",
        "clerk",
        "github",
        "linear",
        "notion",
        "hubspot",
        "intercom",
        "shopify",
        "mux",
        "cloudinary",
        "pinecone",
        "algolia",
        "loops",
        "customerio",
        "novu",
        "knock",
        "pusher",
        "ably",
        "plaid",
        "razorpay",
        "mollie",
        "braintree",
        "vonage",
        "mailchimp",
        "brevo",
        "sendinblue",
        "convertkit",
        "discord",
        "telegram",
        "bot",
    ]
    .iter()
    .any(|n| receiver.contains(n))
        && !is_db_root(&receiver)
    {
        let acts = ["create", "send", "post", "add", "charge", "refund", "capture", "publish", "trigger"];
        return acts.iter().any(|a| last.starts_with(a)).then(|| Effect {
            kind: EffectKind::Possible,
            sdk: Sdk::Other,
            call,
            label: path.join("."),
            key: None,
        });
    }
    // `supabase.rpc('increment_credits', ...)`: a stored procedure named as a relative write.
    if last == "rpc"
        && let Some(name) = args.first().and_then(|a| ast::string_value(*a, src))
    {
        let name = name.to_ascii_lowercase();
        return ["increment", "decrement", "incr_", "add_credits", "deduct"].iter().any(|w| name.contains(w)).then(
            || Effect { kind: EffectKind::DbIncrement, sdk: Sdk::Other, call, label: path.join("."), key: None },
        );
    }
    // Databases
    if let Some(kind) = classify_db(call, &path, full, &args, src, resolved_locally) {
        return effect(kind, Sdk::Other, None);
    }
    // Functions the config names as effects (`effectWrappers`), by name or dotted path.
    let dotted = path.iter().map(|p| p.trim_end_matches("()")).collect::<Vec<_>>().join(".");
    if CONFIGURED_WRAPPERS.with(|w| {
        w.borrow().iter().any(|n| *n == dotted || Some(n.as_str()) == path.last().map(|l| l.trim_end_matches("()")))
    }) {
        return effect(EffectKind::Possible, Sdk::Other, None);
    }
    // Unresolved calls named like an effect; a metrics or tracing client's (`metrics.
    // publishStoredMetrics()` flushing to stdout) is telemetry whatever its verb.
    if !resolved_locally && !["log", "console", "metric", "telemetry", "tracer"].iter().any(|w| has(w)) {
        let name = path.last().map(|s| s.trim_end_matches("()")).unwrap_or("");
        let lname = name.to_ascii_lowercase();
        // The prefix is a whole word of the name (`sendInvoice`, `send_invoice`, `send`), not the
        // start of another one (`shippingCost`, `refundable`, `provisional`, `publishedAt`).
        let word_at = |p: &str| {
            name.get(p.len()..).is_none_or(|rest| {
                rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit())
            })
        };
        if POSSIBLE_PREFIXES.iter().any(|p| lname.starts_with(p) && word_at(p))
            && !lname.starts_with("sendstatus")
            && !is_response_call(&lower)
            && !redis_pub_sub(call, name, src)
        {
            return effect(EffectKind::Possible, Sdk::Other, None);
        }
    }
    None
}

/// The constructor or factory the call's receiver was initialised with: `Stripe` for
/// `const payments = new Stripe(key)` (in the function or at module level), `twilio` for
/// `const sms = twilio(sid, token)`. None for parameters, imports and anything else.
fn constructed_by<'s>(call: Node, path: &[String], src: &'s str) -> Option<&'s str> {
    let root = path.first().filter(|r| path.len() >= 3 && !r.ends_with("()") && *r != "this")?;
    // The enclosing function's own declarations, then the module's top-level ones: never a
    // walk of the whole file per call (files of thousands of lines have thousands of calls).
    let local = ast::enclosing_function(call).and_then(|f| ast::find_binding_init(f, root, src, call.start_byte()));
    let init = local.or_else(|| ast::module_declaration_init(call, root, src, call.start_byte()))?;
    let mut init = ast::unwrap_expr(init);
    // `key ? new Resend(key) : null`: the client is what the branch that builds one builds.
    if init.kind_name() == "ternary_expression" {
        init = ["consequence", "alternative"]
            .iter()
            .filter_map(|f| init.child_by_field_name(f).map(ast::unwrap_expr))
            .find(|b| matches!(b.kind_name(), "new_expression" | "call_expression"))?;
    }
    let callee = match init.kind_name() {
        "new_expression" => init.field("constructor")?,
        "call_expression" => init.field("function")?,
        _ => return None,
    };
    let name = text(callee, src);
    Some(name.rsplit('.').next().unwrap_or(name))
}

/// Whether the function that counts or appends under a Redis key also gives that key a time to
/// live (`incr(key)` then `expire(key, 60)`): a rate-limit window or a short-lived buffer, gone
/// with its window, not a balance a replay corrupts.
fn expires_with_its_window(call: Node, key: Option<Node>, src: &str) -> bool {
    let Some(key) = key.map(|k| text(k, src)) else { return false };
    let Some(func) = ast::enclosing_function(call) else { return false };
    ast::calls_in(func, true).into_iter().any(|c| {
        ast::callee_name(c, src)
            .is_some_and(|n| matches!(n.to_ascii_lowercase().as_str(), "expire" | "pexpire" | "expireat" | "pexpireat"))
            && ast::arguments(c).first().is_some_and(|a| text(*a, src) == key)
    })
}

/// An AWS SDK v3 command that reads or computes without changing anything: repeating it on a
/// redelivery costs a call, not a duplicate (Bedrock `ConverseCommand` / `InvokeModelCommand`,
/// Comprehend `Detect*`, KMS `Decrypt`, `Get*` / `List*` / `Describe*` / `Head*`, Marketplace
/// Metering `ResolveCustomer`).
fn read_only_command(ctor: &str) -> bool {
    ["Get", "List", "Describe", "Head", "Converse", "InvokeModel", "Detect", "Decrypt", "Resolve", "Search", "Lookup"]
        .iter()
        .any(|p| ctor.starts_with(p))
        && ctor.ends_with("Command")
}

/// An AWS SDK v3 command whose repeat changes nothing a delivery cares about: receiving or
/// deleting queue messages, a read, or a keyed object-storage write.
fn repeats_harmlessly(ctor: &str) -> bool {
    ctor.starts_with("ReceiveMessage")
        || ctor.starts_with("DeleteMessage")
        || read_only_command(ctor)
        || keyed_storage_command(ctor)
}

/// An S3 command that writes or removes an object (or a bucket) under a name the caller gives:
/// repeated on a redelivery it overwrites or removes the same object again, leaving the store as
/// one run left it (`PutObject`, `DeleteObject`, `CopyObject`, multipart uploads, bucket
/// settings).
fn keyed_storage_command(ctor: &str) -> bool {
    let Some(action) = ctor.strip_suffix("Command") else { return false };
    matches!(
        action,
        "PutObject"
            | "DeleteObject"
            | "DeleteObjects"
            | "CopyObject"
            | "PutObjectAcl"
            | "PutObjectTagging"
            | "DeleteObjectTagging"
            | "CreateMultipartUpload"
            | "UploadPart"
            | "UploadPartCopy"
            | "CompleteMultipartUpload"
            | "AbortMultipartUpload"
            | "CreateBucket"
            | "DeleteBucket"
    ) || (action.starts_with("PutBucket") || action.starts_with("DeleteBucket"))
}

/// A DynamoDB command sent through the AWS SDK v3 (`Some(None)`: a read). A `Put` replaces the
/// item under its key (an upsert) unless the key is generated per delivery; a conditional put
/// (`attribute_not_exists`) fails on a replay; an `Update` is relative when it `ADD`s or sets
/// `x = x + :n` / `list_append`.
fn dynamo_command(ctor: &str, input: Option<Node>, src: &str) -> Option<Option<EffectKind>> {
    let input_text = input.map(|i| text(i, src)).unwrap_or("");
    Some(match ctor {
        "QueryCommand"
        | "ScanCommand"
        | "BatchGetCommand"
        | "BatchGetItemCommand"
        | "TransactGetCommand"
        | "TransactGetItemsCommand" => None,
        "PutCommand" | "PutItemCommand" => {
            let item = input.and_then(|i| object_prop(i, "Item", src)).map(|i| text(i, src)).unwrap_or("");
            let lower = item.to_ascii_lowercase();
            let generated = ["uuid", "random", "nanoid", "ulid", "cuid", "date.now"].iter().any(|g| lower.contains(g));
            if generated && !input_text.contains("attribute_not_exists") {
                Some(EffectKind::DbInsert)
            } else {
                Some(EffectKind::DbUpsert)
            }
        }
        "UpdateCommand" | "UpdateItemCommand" => {
            let expr = input
                .and_then(|i| object_prop(i, "UpdateExpression", src))
                .map(|e| text(e, src).to_ascii_uppercase())
                .unwrap_or_default();
            let add = crate::regex!(r"(?:^|\W)ADD\s").is_match(&expr);
            let same_column = crate::regex!(r"(#?\w+)\s*=\s*(#?\w+)\s*[+\-]")
                .captures_iter(&expr)
                .any(|c| c[1] == c[2] || c[2].starts_with("IF_NOT_EXISTS"));
            if add || same_column || expr.contains("LIST_APPEND") {
                Some(EffectKind::DbIncrement)
            } else {
                Some(EffectKind::DbUpdate)
            }
        }
        "DeleteCommand" | "DeleteItemCommand" => Some(EffectKind::DbDelete),
        "TransactWriteCommand" | "TransactWriteItemsCommand" | "BatchWriteCommand" | "BatchWriteItemCommand" => {
            Some(EffectKind::DbUpdate)
        }
        _ => return None,
    })
}

fn is_response_call(lower: &[String]) -> bool {
    let root = lower.first().map(String::as_str).unwrap_or("");
    // `rep` / `resp`: short names teams give the Fastify reply and the Express response
    matches!(root, "res" | "reply" | "response" | "ctx" | "c" | "h" | "rep" | "resp")
        // h3 response helpers: `sendNoContent(event)`, `sendRedirect(event, url)`
        || (lower.len() == 1
            && matches!(root, "sendnocontent" | "sendredirect" | "senderror" | "sendstream" | "sendwebresponse"))
        || lower.last().is_some_and(|l| {
            matches!(l.as_str(), "send" | "json" | "sendstatus" | "end" | "status")
                && lower.len() <= 3
                && matches!(root, "res" | "reply" | "response" | "rep" | "resp")
        })
}

fn is_db_root(root: &str) -> bool {
    let r = root.to_ascii_lowercase();
    r.contains("prisma")
        || r == "db"
        || r == "tx"
        || r == "trx"
        || r.contains("database")
        || r == "knex"
        || r == "em"
        || r == "manager"
}

/// A chain is classified at its outermost call only.
fn chain_end(call: Node, src: &str) -> bool {
    let Some(parent) = ast::parent(call) else {
        return true;
    };
    if parent.kind_name() != "member_expression" {
        return true;
    }
    if ast::parent(parent).is_none_or(|g| g.kind_name() != "call_expression") {
        return true;
    }
    let prop = parent.field("property").map(|p| text(p, src)).unwrap_or("");
    matches!(prop, "then" | "catch" | "finally" | "promise")
}

const PRISMA_WRITES: &[&str] =
    &["create", "createMany", "createManyAndReturn", "update", "updateMany", "upsert", "delete", "deleteMany"];

fn classify_db(
    call: Node,
    path: &[String],
    full: &str,
    args: &[Node],
    src: &str,
    resolved_locally: bool,
) -> Option<EffectKind> {
    let last = path.last()?.trim_end_matches("()");
    let joined = path.join(".");
    // Digests and signatures: `createHmac(...).update(body).digest()`.
    if path.iter().any(|p| {
        let p = p.to_ascii_lowercase();
        p.starts_with("createhash")
            || p.starts_with("createhmac")
            || p.starts_with("createcipher")
            || p.starts_with("createsign")
    }) {
        return None;
    }
    // SQL through a driver or tagged template
    if let Some(sql) = sql_text(call, args, src) {
        return classify_sql(&sql);
    }
    // Drizzle / Knex / Kysely chains: db.insert(t).values(v)..., knex('t').insert(v)
    // `insertOnUpdate(table, keys).given(row).execute()` (postgres-query-builder): ON CONFLICT DO UPDATE
    if path.first().is_some_and(|p| p == "insertOnUpdate()") {
        return Some(EffectKind::DbUpsert);
    }
    if joined.contains("insert()") || joined.contains("insertInto()") || last == "insert" && path.len() >= 2 {
        if full.contains("onConflictDoNothing")
            || full.contains("onConflictDoUpdate")
            || full.contains(".onConflict(")
            || full.contains("onDuplicateKeyUpdate")
            || full.contains(".ignore()")
            || full.contains(".merge(")
            // TypeORM's query builder: `.insert().into(T).values(v).orUpdate(cols, keys)` / `.orIgnore()`
            || full.contains(".orUpdate(")
            || full.contains(".orIgnore(")
        {
            return Some(EffectKind::DbUpsert);
        }
        return Some(EffectKind::DbInsert);
    }
    if joined.contains("update()") || joined.contains("updateTable()") {
        return Some(if relative_sql_set(full) { EffectKind::DbIncrement } else { EffectKind::DbUpdate });
    }
    if joined.contains("delete()") || joined.contains("deleteFrom()") {
        return Some(EffectKind::DbDelete);
    }
    if joined.contains("upsert()") {
        return Some(EffectKind::DbUpsert);
    }
    // Query-builder chains ending in the write: `supabase.from('t').upsert(v)`,
    // `knex('t').where(w).update(v)` (a Prisma delegate is a plain property, never a call).
    if path.len() >= 2 && path[path.len() - 2].ends_with("()") {
        // Supabase/Knex tables, Mongo/Firestore/PocketBase collections and documents; never a
        // digest (`createHash(...).update(buf)`).
        let table_like = path.iter().any(|p| {
            matches!(p.as_str(), "from()" | "where()" | "table()" | "collection()" | "doc()" | "ref()" | "child()")
                || p.starts_with("knex")
        });
        match last {
            "upsert" => return Some(EffectKind::DbUpsert),
            "update" if table_like => {
                return Some(
                    if full.contains("$inc") || full.contains("FieldValue.increment(") || full.contains("increment(") {
                        EffectKind::DbIncrement
                    } else {
                        EffectKind::DbUpdate
                    },
                );
            }
            "add" if path.iter().any(|p| p == "collection()") => return Some(EffectKind::DbInsert),
            _ => {}
        }
    }
    if matches!(
        last,
        "increment"
            | "decrement"
            | "incr"
            | "incrby"
            | "incrBy"
            | "hincrby"
            | "hIncrBy"
            | "incrbyfloat"
            | "lpush"
            | "rpush"
            | "lPush"
            | "rPush"
            | "zincrby"
    ) && path.len() >= 2
    {
        // `dogstatsd.increment("email.sent", 1, tags)`, `metrics.increment(...)`: a metrics
        // client counts for dashboards; a replay skews a graph, not a balance.
        let receiver = path[path.len() - 2].to_ascii_lowercase();
        if ["statsd", "metric", "datadog", "telemetry", "analytics", "prometheus"].iter().any(|m| receiver.contains(m))
        {
            return None;
        }
        // Trigger.dev's run `metadata.increment("progress")` feeds a progress bar.
        if receiver == "metadata" && src.contains("@trigger.dev/sdk") {
            return None;
        }
        if expires_with_its_window(call, args.first().copied(), src) {
            return None;
        }
        return Some(EffectKind::DbIncrement);
    }
    // Prisma: client.model.op({ data })
    if path.len() >= 3 && PRISMA_WRITES.contains(&last) {
        let model = path[path.len() - 2].as_str();
        if model.starts_with('$') || model.ends_with("()") {
            return None;
        }
        // The client is named like one (`prisma`, `db`, `tx`, `this.prisma`, `ctx.db`): an
        // unknown package's `sdk.widgets.create()` is not a database write.
        let client = path[..path.len() - 2].iter().map(|p| p.to_ascii_lowercase()).collect::<Vec<_>>();
        if !client.iter().any(|c| {
            c.contains("prisma") || c.contains("db") || c.contains("database") || c.contains("orm") || is_db_root(c)
        }) {
            return None;
        }
        let data_text = args.first().map(|a| text(*a, src)).unwrap_or("");
        if last == "upsert" {
            return Some(if relative_prisma(data_text) { EffectKind::DbIncrement } else { EffectKind::DbUpsert });
        }
        if last.starts_with("update") {
            return Some(if relative_prisma(data_text) || data_text.contains("push:") {
                EffectKind::DbIncrement
            } else {
                EffectKind::DbUpdate
            });
        }
        if last.starts_with("delete") {
            return Some(EffectKind::DbDelete);
        }
        if data_text.contains("skipDuplicates: true") {
            return Some(EffectKind::DbUpsert);
        }
        return Some(EffectKind::DbInsert);
    }
    // A Prisma model delegate passed around by itself (`userDelegate: PrismaClient["user"]`,
    // then `userDelegate.update({ where, data })`): the one-object `{ where, data }` shape is
    // Prisma's own (Mongoose, Sequelize and TypeORM take the filter and the values apart).
    if path.len() == 2
        && matches!(last, "update" | "updateMany" | "upsert")
        && let [only] = args
        && only.kind_name() == "object"
    {
        let keys: Vec<&str> =
            ast::named_children(*only).into_iter().filter_map(|p| p.field("key").map(|k| text(k, src))).collect();
        let has = |k: &str| keys.contains(&k);
        let data_text = text(*only, src);
        if has("where") && (has("data") || last == "upsert" && has("create") && has("update")) {
            return Some(if relative_prisma(data_text) {
                EffectKind::DbIncrement
            } else if last == "upsert" {
                EffectKind::DbUpsert
            } else {
                EffectKind::DbUpdate
            });
        }
    }
    // Mongoose / MongoDB; a project method of the same name (`this.watcherRepo.insertMany`) is
    // followed into instead.
    if path.len() >= 2 && !resolved_locally {
        let update_text = args.get(1).map(|a| text(*a, src)).unwrap_or("");
        let opts_text = args.get(2).map(|a| text(*a, src)).unwrap_or("");
        match last {
            "insertOne" | "insertMany" | "bulkCreate" => return Some(EffectKind::DbInsert),
            // `SendMessageCommand.create({...})`, `UserDto.create(...)`, a table descriptor
            // (`LogsTable.create`), a builtin (`Object.create`): no model, no row.
            // (`GitClientService().create(...)` calls the result of a call: no model either.)
            "create"
                if path.len() == 2
                    && path[0].chars().next().is_some_and(|c| c.is_ascii_uppercase())
                    && !path[0].ends_with("()")
                    && !crate::regex!(r"(Command|Dto|DTO|Request|Response|Params|Input|Options|Payload|Schema|Builder|Factory|Table)$|^(Object|Array|Promise|Reflect|Proxy|Symbol|Map|Set|WeakMap|WeakSet|Date|JSON|Math|Intl|Buffer|URL|Error)$")
                        .is_match(&path[0]) =>
            {
                return Some(EffectKind::DbInsert);
            }
            // A bare `update` is a model's only when the receiver looks like one: `hash.update(buf)`
            // and `hmac.update(body)` are digests, not writes.
            "update"
                if !(path[0].chars().next().is_some_and(|c| c.is_ascii_uppercase())
                    || path.iter().any(|p| p == "collection()")) => {}
            "updateOne" | "updateMany" | "findOneAndUpdate" | "findByIdAndUpdate" | "update" => {
                if update_text.contains("$inc") || update_text.contains("$push") || update_text.contains("$mul") {
                    return Some(EffectKind::DbIncrement);
                }
                if opts_text.contains("upsert: true") || update_text.contains("$setOnInsert") {
                    return Some(EffectKind::DbUpsert);
                }
                return Some(EffectKind::DbUpdate);
            }
            "save" => {
                // repo.save(entity) / doc.save(): an insert or an update; read-modify-write
                // detection is the incrementing rule's job.
                return Some(EffectKind::DbInsert);
            }
            _ => {}
        }
    }
    None
}

fn relative_prisma(data: &str) -> bool {
    ["increment:", "decrement:", "multiply:", "divide:"].iter().any(|k| data.contains(k))
}

/// A Drizzle/Kysely `set` whose `sql` template adds to a column (`` sql`${t.credits} + ${n}` ``,
/// `` sql`balance - 5` ``); arithmetic outside the templates (a comment's dash) is not SQL.
fn relative_sql_set(text: &str) -> bool {
    let arithmetic = crate::regex!(r"(?:\w|\}|\]|\x22)\s*[+\-]\s*(?:[\w$(]|\$\{)");
    crate::regex!(r"\bsql\s*`([^`]*)`").captures_iter(text).any(|c| arithmetic.is_match(&c[1]))
        || text.contains("increment(")
}

/// The SQL text of a `query`/`execute` call or a `sql`/`$executeRaw` tagged template.
pub fn sql_text(call: Node, args: &[Node], src: &str) -> Option<String> {
    let path = ast::callee_path_shared(call, src);
    let last = path.last()?.trim_end_matches("()");
    if matches!(
        last,
        "query"
            | "execute"
            | "none"
            | "one"
            | "oneOrNone"
            | "many"
            | "any"
            | "$executeRawUnsafe"
            | "$queryRawUnsafe"
            | "raw"
            | "unsafe"
    ) && let Some(first) = args.first()
    {
        let t = match first.kind_name() {
            "string" | "template_string" => text(*first, src).to_string(),
            "object" => ast::object_property(*first, "text", src).map(|v| text(v, src).to_string())?,
            "identifier" => {
                let scope = ast::enclosing_function(call).unwrap_or(call);
                let init = ast::find_binding_init(scope, text(*first, src), src, call.start_byte()).or_else(|| {
                    let root = ast::root_above(call)?;
                    ast::find_binding_init(root, text(*first, src), src, call.start_byte())
                })?;
                text(init, src).to_string()
            }
            _ => return None,
        };
        return looks_like_sql(&t).then_some(t);
    }
    // Prepared statements: Cloudflare D1 `env.DB.prepare(sql).bind(...).run()`, better-sqlite3
    // `db.prepare(sql).run(...)`.
    if matches!(last, "run" | "all" | "first" | "raw" | "bind" | "prepare")
        && let Some(prepare) = prepare_call(call, src)
        && let Some(first) = ast::arguments(prepare).first()
    {
        let t = match first.kind_name() {
            "string" | "template_string" => text(*first, src).to_string(),
            _ => return None,
        };
        return looks_like_sql(&t).then_some(t);
    }
    // tagged templates: sql`...`, prisma.$executeRaw`...`
    if let Some(tpl) = call.field("arguments").filter(|a| a.kind_name() == "template_string") {
        let t = text(tpl, src).to_string();
        return looks_like_sql(&t).then_some(t);
    }
    None
}

/// The `prepare(...)` call a statement chain starts from: `x.prepare(sql)`, `.bind(...)` and
/// one executing call (`run`/`all`/`first`/`raw`) at most.
fn prepare_call<'t>(call: Node<'t>, src: &str) -> Option<Node<'t>> {
    let mut current = call;
    for _ in 0..3 {
        let callee = current.field("function")?;
        if callee.kind_name() != "member_expression" {
            return None;
        }
        let name = callee.field("property").map(|p| text(p, src)).unwrap_or("");
        if name == "prepare" {
            return Some(current);
        }
        current = callee.field("object").filter(|o| o.kind_name() == "call_expression")?;
    }
    None
}

fn looks_like_sql(t: &str) -> bool {
    let u = t.trim_start_matches(['`', '"', '\'']).trim_start().to_ascii_uppercase();
    ["INSERT", "UPDATE", "DELETE", "BEGIN", "COMMIT", "ROLLBACK", "WITH", "SELECT", "START TRANSACTION"]
        .iter()
        .any(|k| u.starts_with(k))
}

pub fn classify_sql(sql: &str) -> Option<EffectKind> {
    let u = sql.trim_start_matches(['`', '"', '\'']).trim_start().to_ascii_uppercase();
    if u.starts_with("INSERT") || (u.starts_with("WITH") && u.contains("INSERT")) {
        if u.contains("ON CONFLICT")
            || u.contains("ON DUPLICATE KEY")
            || u.starts_with("INSERT IGNORE")
            || u.starts_with("INSERT OR IGNORE")
            || u.starts_with("INSERT OR REPLACE")
        {
            return Some(EffectKind::DbUpsert);
        }
        return Some(EffectKind::DbInsert);
    }
    if u.starts_with("UPDATE") {
        // `SET x = x + 1`: the same column on both sides of an arithmetic assignment.
        let assign = crate::regex!(r"(?i)\b(\w+)\s*=\s*(\w+)\s*[+\-*|]");
        let relative = assign.captures_iter(&u).any(|c| c[1] == c[2]);
        let append = crate::regex!(r"(?i)=\s*(array_append|jsonb_insert)");
        return Some(if relative || append.is_match(&u) { EffectKind::DbIncrement } else { EffectKind::DbUpdate });
    }
    if u.starts_with("DELETE") {
        return Some(EffectKind::DbDelete);
    }
    None
}

fn object_prop<'t>(node: Node<'t>, key: &str, src: &str) -> Option<Node<'t>> {
    let node = ast::unwrap_expr(node);
    // Options passed only when a key is at hand: `key ? { idempotencyKey: key } : undefined`.
    if node.kind_name() == "ternary_expression" {
        return ["consequence", "alternative"]
            .into_iter()
            .filter_map(|f| node.child_by_field_name(f))
            .find_map(|branch| object_prop(branch, key, src));
    }
    if node.kind_name() != "object" {
        return None;
    }
    ast::object_property(node, key, src)
}

/// The property `key` of the last argument when it is an object literal (Stripe's
/// request options).
fn last_object_property<'t>(args: &[Node<'t>], key: &str, src: &str) -> Option<Node<'t>> {
    args.iter().rev().take(1).find_map(|a| object_prop(*a, key, src))
}

/// The operation an effect performs, as an idempotency key names it:
/// `stripe.refunds.create` → "refund"; `stripe.paymentIntents.capture` → "paymentIntent-capture".
pub fn operation_name(label: &str) -> String {
    let parts: Vec<&str> = label.split('.').map(|p| p.trim_end_matches("()")).collect();
    let last = parts.last().copied().unwrap_or("call");
    let noun = parts.len().checked_sub(2).and_then(|i| parts.get(i)).copied().unwrap_or(last);
    // Adyen's service objects: `PaymentsApi.payments` is a payment, and the method names
    // the modification itself (Adyen keys are at most 64 characters).
    let service = noun.strip_suffix("Api").or_else(|| noun.strip_suffix("API")).filter(|n| !n.is_empty());
    let noun = service.unwrap_or(noun);
    let noun = noun
        .strip_suffix("ies")
        .map(|s| format!("{s}y"))
        .unwrap_or_else(|| noun.strip_suffix('s').unwrap_or(noun).to_string());
    let (n, l) = (noun.to_ascii_lowercase(), last.to_ascii_lowercase());
    if matches!(last, "create" | "send") || n == l || l == format!("{n}s") {
        lower_first(&noun)
    } else if l.starts_with(&n) || service.is_some() {
        // `refunds.refundPayment` → "refundPayment", not "refund-refundPayment".
        last.to_string()
    } else {
        format!("{noun}-{last}")
    }
}

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_ascii_lowercase().to_string() + c.as_str()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_kinds() {
        assert_eq!(classify_sql("'INSERT INTO x (id) VALUES ($1)'"), Some(EffectKind::DbInsert));
        assert_eq!(classify_sql("`insert into x values ($1) on conflict do nothing`"), Some(EffectKind::DbUpsert));
        assert_eq!(
            classify_sql("'UPDATE wallets SET balance = balance + $1 WHERE id = $2'"),
            Some(EffectKind::DbIncrement)
        );
        assert_eq!(classify_sql("'UPDATE users SET plan = $1 WHERE id = $2'"), Some(EffectKind::DbUpdate));
        assert_eq!(classify_sql("'SELECT 1'"), None);
    }
}

#[cfg(test)]
mod real_calls {
    use super::*;
    use crate::source::{Dialect, SourceFile};
    use std::path::PathBuf;

    /// The kind of the outermost call of `code` (one expression statement).
    pub(super) fn kind_of(code: &str) -> Option<EffectKind> {
        let file = SourceFile::new(
            PathBuf::from("t.ts"),
            code.to_string(),
            Dialect::for_path(std::path::Path::new("t.ts")).unwrap(),
        )?;
        let root = file.root();
        let calls = ast::calls_in(root, false);
        let call = calls.into_iter().filter(|c| chain_end(*c, &file.text)).min_by_key(|c| c.start_byte())?;
        classify(call, &file.text, false).map(|e| e.kind)
    }

    /// The kind of the last statement's outermost call, with the statements before it in scope.
    fn kind_of_last(code: &str) -> Option<EffectKind> {
        let file = SourceFile::new(
            PathBuf::from("t.ts"),
            code.to_string(),
            Dialect::for_path(std::path::Path::new("t.ts")).unwrap(),
        )?;
        let last = file.root().named_child(file.root().named_child_count().checked_sub(1)?)?;
        let calls = ast::calls_in(last, false);
        let call = calls.into_iter().filter(|c| chain_end(*c, &file.text)).min_by_key(|c| c.start_byte())?;
        classify(call, &file.text, false).map(|e| e.kind)
    }

    #[test]
    fn clients_known_by_what_built_them() {
        use EffectKind::*;
        assert_eq!(
            kind_of_last("const payments = new Stripe(key);\nawait payments.refunds.create({ charge });"),
            Some(Payment)
        );
        assert_eq!(
            kind_of_last("const sms = twilio(sid, token);\nawait sms.messages.create({ to, body });"),
            Some(Sms)
        );
        assert_eq!(kind_of_last("const mail = new Resend(key);\nawait mail.emails.send({ to });"), Some(Email));
        assert_eq!(kind_of_last("const store = new Map();\nawait store.refunds.create({ charge });"), None);
    }

    #[test]
    fn sdk_and_orm_calls() {
        use EffectKind::*;
        let cases: &[(&str, Option<EffectKind>)] = &[
            ("await supabase.from('t').insert({ a: 1 })", Some(DbInsert)),
            ("await supabase.from('t').insert({ a: 1 }).select().single()", Some(DbInsert)),
            ("await supabase.from('t').update({ a: 1 }).eq('id', x)", Some(DbUpdate)),
            ("await supabase.from('t').update({ a: 1 })", Some(DbUpdate)),
            ("await supabase.from('t').upsert({ a: 1 }, { onConflict: 'id' })", Some(DbUpsert)),
            ("await supabase.from('t').upsert({ a: 1 }).select()", Some(DbUpsert)),
            ("await supabase.from('t').select('*').eq('id', x)", None),
            ("await supabase.rpc('increment_credits', { n: 1 })", Some(DbIncrement)),
            ("await supabase.rpc('get_user', { id })", None),
            ("await knex('users').where({ id }).update({ plan: 'pro' })", Some(DbUpdate)),
            ("await knex('users').where({ id }).increment('credits', 5)", Some(DbIncrement)),
            (
                "await db.update(users).set({ credits: sql`${users.credits} + ${n}` }).where(eq(users.id, id))",
                Some(DbIncrement),
            ),
            (
                "await db.update(ws).set({\n  // - only on a tier change\n  tierId: sql`CASE WHEN ${c} THEN 1 ELSE (SELECT id FROM tiers WHERE p = ${p}) END`,\n}).where(eq(ws.id, id))",
                Some(DbUpdate),
            ),
            ("await db.insert(users).values({ id: 1 }).onConflictDoNothing()", Some(DbUpsert)),
            ("await db.insertInto('orders').values(v).execute()", Some(DbInsert)),
            ("await prisma.order.create({ data: { total: 1 } })", Some(DbInsert)),
            ("await this.prisma.order.create({ data: {} })", Some(DbInsert)),
            ("await tx.order.create({ data: {} })", Some(DbInsert)),
            ("await User.updateOne({ _id: id }, { $inc: { credits: 5 } })", Some(DbIncrement)),
            ("await mg.messages.create(domain, { to })", Some(Email)),
            ("await twilio.messages.create({ to, body })", Some(Sms)),
            ("await openai.chat.completions.create({ model })", None),
            ("await anthropic.messages.create({ model })", None),
            ("await paddle.transactions.create({ items })", Some(Possible)),
            ("await someSdk.widgets.create({ a: 1 })", None),
            ("await posthog.capture({ event: 'x' })", None),
            ("await fetch(url)", None),
            ("await sendWelcomeEmail(user)", Some(Possible)),
            ("await send_invoice(user)", Some(Possible)),
            ("await notify(user)", Some(Possible)),
            ("return rep.status(204).send()", None),
            ("resp.status(200).json({ ok: true })", None),
            ("shippingCost(order)", None),
            ("refundable(charge)", None),
            ("publishedAt(post)", None),
            ("await pb.collection('slots').update(id, { free: slot.free + 1 })", Some(DbUpdate)),
            ("await db.collection('users').doc(uid).update({ credits: FieldValue.increment(5) })", Some(DbIncrement)),
            ("await db.collection('orders').add({ total: 1 })", Some(DbInsert)),
            ("crypto.createHash('sha256').update(body)", None),
            ("await env.DB.prepare('INSERT INTO orders (id) VALUES (?)').bind(id).run()", Some(DbInsert)),
            ("await env.DB.prepare(`INSERT OR IGNORE INTO seen (id) VALUES (?)`).bind(id).run()", Some(DbUpsert)),
            ("await env.DB.prepare('SELECT * FROM orders WHERE id = ?').bind(id).first()", None),
            (
                "await c.env.DB.prepare('UPDATE wallets SET balance = balance + ? WHERE id = ?').bind(n, id).run()",
                Some(DbIncrement),
            ),
            ("db.prepare('INSERT INTO logs (msg) VALUES (?)').run(msg)", Some(DbInsert)),
            (
                "async function f() { const command = new ResolveCustomerCommand({ RegistrationToken: t }); await metering.send(command) }",
                None,
            ),
            (
                "async function f(user) { const n = await redis.incr(`mail:${user}`); await redis.expire(`mail:${user}`, 3600); return n }",
                None,
            ),
            ("async function f(user) { await redis.incr(`credits:${user}`); }", Some(DbIncrement)),
            ("await GitClientService().create(provider, options)", None),
            ("await ddb.send(new UpdateCommand({ Key: k, UpdateExpression: 'SET #s = :s' }))", Some(DbUpdate)),
            ("await ddb.send(new UpdateCommand({ Key: k, UpdateExpression: 'ADD credits :n' }))", Some(DbIncrement)),
            (
                "await ddb.send(new UpdateCommand({ Key: k, UpdateExpression: 'SET total = total + :n' }))",
                Some(DbIncrement),
            ),
            ("await ddb.send(new PutCommand({ TableName: t, Item: { pk: evt.id, status } }))", Some(DbUpsert)),
            ("await ddb.send(new PutCommand({ TableName: t, Item: { pk: randomUUID(), status } }))", Some(DbInsert)),
            ("await ddb.send(new QueryCommand({ TableName: t }))", None),
            ("await bedrock.send(new ConverseCommand({ modelId: m, messages }))", None),
            ("await bedrock.send(new InvokeModelCommand({ modelId: m, body }))", None),
            ("await s3.send(new GetObjectCommand({ Bucket: b, Key: k }))", None),
            ("await ddb.send(new DeleteCommand({ TableName: t, Key: k }))", Some(DbDelete)),
            ("crypto.createHmac('sha256', secret).update(body).digest('hex')", None),
            ("const octokit = await app.getInstallationOctokit(installationId)", None),
            ("await octokit.rest.issues.createComment({ owner, repo, issue_number, body })", Some(Chat)),
            ("await octokit.request('GET /repos/{owner}/{repo}/pulls/{pull_number}', { owner })", None),
            ("await octokit.request('POST /repos/{owner}/{repo}/issues', { owner, title })", Some(Chat)),
            ("await context.octokit.repos.createCommitStatus({ sha, state, context: 'wip' })", None),
            ("await octokit.checks.create({ owner, repo, name: 'lint', head_sha, conclusion })", None),
            ("await octokit.issues.createLabel({ owner, repo, name: 'stale', color })", None),
            ("await octokit.teams.addOrUpdateRepoPermissionsInOrg({ org, team_slug, owner, repo, permission })", None),
            ("await octokit.issues.addAssignees({ owner, repo, issue_number, assignees })", None),
            ("await octokit.checks.rerequestRun({ owner, repo, check_run_id })", Some(Chat)),
            ("await queue.add('sync', { id })", Some(Enqueue)),
            ("await client.createMessage({ tags: { id: sid }, type: 'text', payload })", Some(Possible)),
            ("await props.client.createEvent({ type: 'contactCreated', payload })", Some(Possible)),
            ("await client.getOrCreateMessage({ tags: { id: partId }, type: 'text', payload })", None),
            ("const linear = createLinearClient({ apiKey })", None),
            ("const payments = createMollieClient({ apiKey })", None),
            ("await linear.createIssue({ title })", Some(Possible)),
        ];
        for (code, want) in cases {
            assert_eq!(kind_of(code), *want, "{code}");
        }
    }
}

/// Redis pub/sub: `redis.publish(channel, message)` on a client made by a Redis factory
/// (`const redis = getRedisPub()`, `new Redis(url)`, `createClient()` from a redis module), and
/// a GraphQL subscription's `graphqlPubsub.publish(trigger, payload)`. The message reaches only
/// the subscribers listening at that moment and is kept nowhere: a replay re-sends a live
/// notice (a cache invalidation, a UI refresh), no durable effect. A cloud topic's
/// `pubsub.topic(name).publish(data, attributes)` is durable and stays an effect.
fn redis_pub_sub(call: Node, name: &str, src: &str) -> bool {
    if name != "publish" || ast::arguments(call).len() != 2 {
        return false;
    }
    let Some(receiver) = ast::method_receiver(call) else { return false };
    let init = match receiver.kind_name() {
        "identifier" => ast::enclosing_function(call)
            .and_then(|f| ast::find_binding_init(f, text(receiver, src), src, call.start_byte()))
            .or_else(|| ast::module_declaration_init(call, text(receiver, src), src, call.start_byte()))
            // an import or a parameter: its name is all there is
            .or(Some(receiver)),
        _ => Some(receiver),
    };
    init.is_some_and(|i| {
        let written = text(i, src).to_ascii_lowercase();
        written.contains("redis") || (written.contains("pubsub") && receiver.kind_name() != "call_expression")
    })
}

/// A realtime channel's broadcast (Supabase `supabase.channel(name).send({ type: "broadcast",
/// event, payload })`): like Redis pub/sub, it reaches the clients connected at that moment
/// and is kept nowhere, so a replay refreshes the same screens again. It is still a network
/// call (held inside a transaction, it is heard before the commit).
pub fn realtime_broadcast(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    path.last().is_some_and(|l| l == "send")
        && path.iter().any(|p| p == "channel()")
        && ast::arguments(call)
            .first()
            .is_some_and(|a| crate::regex!(r#"\btype\s*:\s*["'`]broadcast["'`]"#).is_match(text(*a, src)))
}

/// `seen.add(id)` where `seen` is a local `new Set()`/`new Map()` (or an array): a collection in
/// memory, whatever its name says (`completedWorkflows`), not a queue.
fn in_memory_collection(call: Node, src: &str) -> bool {
    let Some(receiver) = ast::method_receiver(call).filter(|o| o.kind_name() == "identifier") else {
        return false;
    };
    ast::enclosing_function(call)
        .and_then(|f| ast::find_binding_init(f, text(receiver, src), src, call.start_byte()))
        .map(ast::unwrap_expr)
        .is_some_and(|init| {
            init.kind_name() == "array"
                || (init.kind_name() == "new_expression"
                    && init
                        .field("constructor")
                        .is_some_and(|c| matches!(text(c, src), "Set" | "Map" | "WeakSet" | "WeakMap" | "Array")))
        })
}
