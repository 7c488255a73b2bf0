//! queue-add-without-job-id

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::facts::reached_in_loop;
use crate::fix::edits::merge_property;
use crate::fix::{Edit, Fix};
use crate::model::ast::{self, text};
use crate::model::dedupe_keys;
use crate::model::{Sdk, effects};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A BullMQ/Bull `queue.add(name, data, opts?)` (Bull v3 also `queue.add(data, opts?)`) or
`addBulk([...])` made from a handler without a `jobId` (or BullMQ `deduplication: { id }`).
Also an existing `jobId` whose literal text contains `:`: BullMQ 5.58.7 and later reject
it with "Custom Id cannot contain :", so `add` throws on every delivery.

## Why retries break it
Without a custom id, BullMQ gives every `add` a fresh id, so a redelivery of the same event
(after a crash or timeout past the `add`) enqueues a second job and the work runs twice. With
a `jobId` derived from the event, the second `add` is ignored while the first job exists.

## Bad
```ts
await emailQueue.add("welcome", { userId });
```

## Good
```ts
await emailQueue.add("welcome", { userId }, { jobId: `welcome-${event.id}` });
```

## Fix (safe)
Adds `jobId: `<name>-${eventKey}`` (the job name, or the queue's name for Bull's nameless form;
never a `:`, since BullMQ rejects it), merged into an existing options object literal or
appended as a new options argument. Two adds with the same name in one handler get distinct
suffixes. Display-only where no event key is known, inside a loop over items (the id must
name the item too), for `addBulk` and flows, and when the options are not an object literal.
A `jobId` containing `:` gets an unsafe fix replacing `:` with `-` in its literal text (review:
jobs already queued under the old id are no longer recognised as duplicates).
Not reported: a deterministic `jobId` or `deduplication.id` is present (a random one is
`nondeterministic-key`'s finding); repeatable jobs (`repeat`); `add` on a `Set`, or p-queue's
`queue.add(() => ...)`; a log, audit or analytics entry (`logQueue.add("put_log", entry)`): a
second log line is no second effect.
"#;

pub const RULE: Rule = Rule {
    id: "queue-add-without-job-id",
    summary: "queue.add without a jobId in a handler: a redelivery enqueues the job again",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: true,
    preview: false,
    check,
};

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        let mut names: Vec<String> = Vec::new();
        for scope in &model.scopes {
            let Some(func) = scope.node() else { continue };
            let file = scope.file();
            let src = &file.text;
            for call in ast::calls_in(func, false) {
                let classified = effects::classify(call, src, true).filter(|e| e.sdk == Sdk::Bullmq);
                if classified.is_none() && !constructed_queue(call, src) {
                    continue;
                }
                if !is_queue_receiver(call, src) {
                    continue;
                }
                let effect_key = classified.as_ref().and_then(|e| e.key);
                let label = ast::callee_path(call, src).join(".");
                let args = ast::arguments(call);
                if args.first().is_some_and(|a| ast::is_function(*a)) {
                    continue; // p-queue
                }
                let bulk = ast::callee_name(call, src).is_some_and(|n| n == "addBulk");
                let flow = args
                    .first()
                    .is_some_and(|a| a.kind_name() == "object" && ast::object_property(*a, "queueName", src).is_some());
                let (opts_index, name) = shape(call, &args, src);
                let opts = opts_index.and_then(|i| args.get(i).copied());
                let flow_opts = if flow {
                    args.first()
                        .and_then(|a| ast::object_property(*a, "opts", src))
                        .filter(|o| o.kind_name() == "object")
                } else {
                    None
                };
                let job_id = effect_key.or_else(|| {
                    let o = flow_opts.or(opts.filter(|o| o.kind_name() == "object"))?;
                    ast::object_property(o, "jobId", src).or_else(|| ast::object_property(o, "deduplication", src))
                });
                if opts
                    .or(flow_opts)
                    .is_some_and(|o| o.kind_name() == "object" && ast::object_property(o, "repeat", src).is_some())
                {
                    continue;
                }
                if let Some(id) = job_id {
                    if let Some(d) = colon_job_id(id, src) {
                        out.push(d.into_diagnostic(cx, file, &label).in_handler(model, scope));
                    }
                    continue;
                }
                if bulk && bulk_has_ids(&args, src) {
                    continue;
                }
                if enqueues_a_log(call, &name, src) {
                    continue;
                }
                let job_name = sanitize(&name);
                let seen = names.iter().filter(|n| **n == job_name).count();
                names.push(job_name.clone());
                let job_name = if seen > 0 { format!("{job_name}-{}", seen + 1) } else { job_name };
                let message = format!(
                    "`{label}` has no `jobId`: BullMQ gives every add a fresh id, so a redelivery of this event enqueues the job again and it runs twice"
                );
                let fix = || {
                    if bulk || flow {
                        Fix::display_only(
                            "give every job a jobId derived from the event and the item",
                            "each job of a bulk/flow add needs its own id: the event key plus the item's id",
                        )
                    } else if dedupe_keys::items_loop(call, func, src, scope.event_key.as_ref()).is_some()
                        || reached_in_loop(cx, model, scope)
                    {
                        Fix::display_only(
                            "add a jobId derived from the event and the item",
                            "the add runs once per item of a loop (here or in a caller): the id must name the item as well as the event",
                        )
                    } else {
                        match &scope.event_key {
                            None => Fix::display_only(
                                "add a jobId derived from the event",
                                "no event key is known in this function: pass the event (or its key) in and use it",
                            ),
                            Some(key) => {
                                let value = key.job_id(&job_name);
                                match add_edit(opts, &args, opts_index, &value, src) {
                                    Some(edit) => Fix::safe(format!("add `jobId: {value}`"), vec![edit]),
                                    None => Fix::display_only(
                                        "add a jobId derived from the event",
                                        "the options are not an object literal: add `jobId` where they are built",
                                    ),
                                }
                            }
                        }
                    }
                };
                out.push(
                    Diagnostic::new(RULE.id, file, call, message)
                        .in_handler(model, scope)
                        .help("pass a jobId derived from the event (no `:`), e.g. `{ jobId: `welcome-${event.id}` }`")
                        .with_fix(cx, fix),
                );
            }
        }
    }
}

/// `q.add(...)` where `q` is bound to `new Queue(...)` (bullmq, bull) under any name.
fn constructed_queue(call: Node, src: &str) -> bool {
    if !ast::callee_name(call, src).is_some_and(|n| n == "add" || n == "addBulk") {
        return false;
    }
    let Some(object) = call.field("function").and_then(|f| f.field("object")) else {
        return false;
    };
    let init = dedupe_keys::resolve(object, src);
    let ctor = match init.kind_name() {
        "new_expression" => init.field("constructor"),
        "call_expression" => init.field("function"),
        _ => None,
    };
    ctor.is_some_and(|c| matches!(text(c, src), "Queue" | "Bull" | "BullQueue" | "FlowProducer"))
}

/// The receiver is not a `Set`/`Map`/array that merely happens to be called `queue`.
fn is_queue_receiver(call: Node, src: &str) -> bool {
    let Some(f) = call.field("function") else { return false };
    let Some(object) = f.field("object") else { return false };
    let init = dedupe_keys::resolve(object, src);
    let t = text(init, src);
    // p-queue's `queue.add(task)` takes a function, also one passed by name.
    !(t.starts_with("new Set")
        || t.starts_with("new Map")
        || t.starts_with("new WeakSet")
        || t.starts_with("new PQueue")
        || init.kind_name() == "array")
}

/// Where the options go and the name the job id starts with.
fn shape(call: Node, args: &[Node], src: &str) -> (Option<usize>, String) {
    let receiver = ast::callee_path(call, src);
    let queue_name =
        receiver.len().checked_sub(2).and_then(|i| receiver.get(i)).cloned().unwrap_or_else(|| "job".into());
    let Some(first) = args.first() else { return (None, queue_name) };
    match first.kind_name() {
        "string" | "template_string" => {
            let name = ast::string_value(*first, src).unwrap_or_else(|| queue_name.clone());
            (Some(2), name)
        }
        "object" | "array" => (Some(1), queue_name),
        _ => {
            // `add(NAME, data)` vs Bull's `add(data, opts)`: an options-looking second object.
            let second_is_opts = args.get(1).is_some_and(|a| {
                a.kind_name() == "object"
                    && ["attempts", "delay", "backoff", "removeOnComplete", "removeOnFail", "priority", "lifo", "jobId"]
                        .iter()
                        .any(|k| ast::object_property(*a, k, src).is_some())
            });
            if args.len() <= 2 && second_is_opts {
                (Some(1), queue_name)
            } else if first.kind_name() == "identifier" && args.len() >= 2 {
                (Some(2), text(*first, src).to_string())
            } else {
                (None, queue_name)
            }
        }
    }
}

fn sanitize(name: &str) -> String {
    let mut s: String =
        name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '-' }).collect();
    s = s.trim_matches('-').to_string();
    if s.is_empty() { "job".to_string() } else { s }
}

fn add_edit(opts: Option<Node>, args: &[Node], opts_index: Option<usize>, value: &str, src: &str) -> Option<Edit> {
    let index = opts_index?;
    match opts {
        Some(o) if o.kind_name() == "object" => Some(merge_property(o, "jobId", value, src)),
        Some(_) => None,
        None if args.len() == index => {
            let last = args.last()?;
            Some(Edit::insert(last.end_byte(), format!(", {{ jobId: {value} }}")))
        }
        None => None,
    }
}

/// `addBulk([{ name, data, opts: { jobId } }, ...])`: every literal element has an id.
fn bulk_has_ids(args: &[Node], src: &str) -> bool {
    let Some(list) = args.first().filter(|a| a.kind_name() == "array") else {
        return args.first().is_some_and(|a| text(*a, src).contains("jobId"));
    };
    let items = ast::named_children(*list);
    !items.is_empty() && items.iter().all(|i| text(*i, src).contains("jobId"))
}

struct ColonId<'t> {
    node: Node<'t>,
    fix: Fix,
}

impl ColonId<'_> {
    fn into_diagnostic(
        self,
        cx: &Context,
        file: &std::sync::Arc<crate::source::SourceFile>,
        label: &str,
    ) -> Diagnostic {
        Diagnostic::new(
            RULE.id,
            file,
            self.node,
            format!(
                "the `jobId` of `{label}` contains `:`: BullMQ 5.58.7 and later reject it (\"Custom Id cannot contain :\"), so the add throws on every delivery and the job is never enqueued"
            ),
        )
        .help("separate the parts of a job id with `-`, e.g. `welcome-${event.id}`")
        .with_fix(cx, || self.fix)
    }
}

/// A literal `:` in a job id written at the site (or in the `const` it reads).
fn colon_job_id<'t>(id: Node<'t>, src: &str) -> Option<ColonId<'t>> {
    let at_site = ast::unwrap_expr(id);
    let resolved = dedupe_keys::resolve(at_site, src);
    let fragments = |n: Node<'t>| -> Vec<Node<'t>> {
        match n.kind_name() {
            "string" | "template_string" => {
                ast::named_children(n).into_iter().filter(|c| c.kind_name() == "string_fragment").collect()
            }
            _ => Vec::new(),
        }
    };
    let frags: Vec<Node> = fragments(resolved).into_iter().filter(|f| text(*f, src).contains(':')).collect();
    // BullMQ accepts a custom id with `:` only when it splits into exactly three parts (the
    // legacy repeatable-job form): `a:${x}:b` is accepted, `invoice:${id}` is refused.
    let colons: usize = frags.iter().map(|f| text(*f, src).matches(':').count()).sum();
    if frags.is_empty() || colons == 2 {
        return None;
    }
    let fix = if resolved == at_site {
        let edits = frags
            .iter()
            .map(|f| Edit::replace(f.start_byte(), f.end_byte(), text(*f, src).replace(':', "-")))
            .collect();
        Fix::unsafe_("replace `:` with `-` in the jobId", edits)
            .with_note("jobs already queued under the old id are no longer recognised as duplicates")
    } else {
        Fix::display_only("replace `:` with `-` in the jobId", "the id is built in a variable that other code may read")
    };
    Some(ColonId { node: at_site, fix })
}

/// `sendWorkerQueue("logs", "put_log").add("put_log", entry)`, `auditQueue.add(...)`: a log or
/// audit entry enqueued twice is a second log line, not a second effect.
fn enqueues_a_log(call: Node, job_name: &str, src: &str) -> bool {
    let queue = call.field("function").and_then(|f| f.field("object")).map(|o| text(o, src)).unwrap_or("");
    crate::regex!(
        r"(?i)(?:^|[^a-z])(?:logs?|audit|analytics|telemetry|metrics?)(?:[^a-z]|$)|(?:audit|activity|event)_?logs?"
    )
    .is_match(&format!("{queue} {job_name}"))
}
