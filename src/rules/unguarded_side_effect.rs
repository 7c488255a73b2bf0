//! unguarded-side-effect

use super::{Context, Diagnostic, FixAvailability, HandlerModel, Rule};
use crate::fix::wrap_guard;
use crate::model::ast::{self, text};
use crate::model::reach::{self, Scope};
use crate::model::{Effect, EffectKind, best_effort, effects, markers, unique_writes};
use crate::project::Project;
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::path::PathBuf;
use std::sync::Arc;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A handler (or a function it calls) that performs a non-idempotent effect — an insert
without a unique natural key, a payment, an email/SMS/chat message, an enqueue, an
outbound POST, or a call to a package function named like one (`send*`, `charge*`,
`notify*`...: reported as a *possible* effect) — with no guard protecting it.
Reported at the handler's first unguarded effect, whose message counts the rest, and again at
each later effect of that same function on another target (the order row after the shipping
row, the confirmation email after the ledger insert): each duplicates something else. Repeats of
one target (the same table, the same callee) are counted, not reported again.
An effect behind a thin project wrapper named for it (`sendReceiptEmail`, `enqueue`,
`notifyOwner`: a function whose one effect it is, with at most two awaited calls) is reported
where the handler calls the wrapper, not inside it.

## Why retries break it
Providers deliver at least once. A retry after a success (the 2xx was lost or late), a
concurrent duplicate, or a crash part-way through runs the effect again: a second row, a
second email, a second charge.

## Not reported
- upserts, updates that set absolute values, deletes (replaying them changes nothing), and
  an upsert by hand: an insert run only when an update of the same table matched no row;
- Prisma `create`s whose `data` sets a field the schema marks `@id`/`@unique` (or every
  field of an `@@id`/`@@unique`): a duplicate fails instead of duplicating
  (`schema.prisma` is looked up next to the project), Mongo inserts that set `_id`, and
  inserts whose row sets `id` from the delivery (`data: { id: user.id }`; a generated
  `randomUUID()`/`cuid()` id does not count): the primary key rejects a replay;
- `save()` calls on a loaded record (an update); `new Model({...}).save()` and `doc.save()`
  where `doc = new Model({...})` are inserts and are reported;
- effects that carry a provider idempotency key or a `jobId`, including a key handed to a
  wrapper (`sendEmail({ ..., idempotencyKey })`) and a QStash `deduplicationId` or SQS FIFO
  `MessageDeduplicationId` (their correctness is the business of
  `nondeterministic-key` and `wrong-event-field-as-key`);
- inserts into an audit or event log table (`auditLogs`, `"PipelineEventLog"`), or an insert
  a comment introduces as a log entry (`// Log the purchase (best-effort)`, `// audit trail`,
  directly above it or above the declarations that prepare it): a second row records the
  redelivery and duplicates no business effect;
- Slack `views.publish`/`views.update` and `chat.update` (through the SDK or a `fetch` of
  `slack.com/api/views.publish`): they replace what they target;
- Drizzle inserts whose row sets every column of a `uniqueIndex`/`.unique()` of the table,
  also when the table is imported from the schema module: the constraint rejects a replay;
- supabase-js inserts (`supabase.from("members").insert({ auth_id, email })`) whose row sets a
  unique column or set of the table as the project's `supabase/migrations` build it (a later
  `CREATE UNIQUE INDEX` or `ADD CONSTRAINT ... UNIQUE` included);
- a request to a provider's verification endpoint (PayPal's
  `/v1/notifications/verify-webhook-signature`, a `/verify` path): it asks and changes nothing;
- effects after a claim whose table is not named for markers: a conflict-ignoring insert
  (Kysely `onConflict((oc) => oc.column("id").doNothing())`, Drizzle `onConflictDoNothing()`)
  whose bound result the next statement tests and leaves on;
- Redis pub/sub (`redis.publish(channel, message)` on a client a Redis factory made) and a
  Supabase realtime broadcast (`supabase.channel(name).send({ type: "broadcast", ... })`): the
  notice reaches the subscribers listening at that moment and is stored nowhere;
- effects that run only when the delivery changes what it found: inside `if (outcome)` on
  the result of a transaction that can return `null`/`false` early (a locked re-read that
  finds the work done), under a comparison of a stored field (`row.status`, or a local bound
  to it, loaded by a read) with another value where the function also writes that field
  (`if (previous !== "active")` and `{ status: "active" }`), and find-or-create (`if (!found)`
  or after `if (found) return found;` on a read): a replay finds the change made and skips the
  effect, and what a project function does when it is called only there is not reported
  either. The same holds after an early exit taken when a stored field holds what the
  handler leaves in it (`if (job.status === "completed") return;` where the function later
  writes `"completed"`, `if (!org?.allowTrial) return;` where the handler writes
  `allowTrial: false` and no other value). The window two concurrent deliveries leave open is
  `check-then-insert-race`'s;
- effects in the branch for a Slack interaction payload (`payload.type === "block_actions"`,
  `view_submission`, shortcuts): Slack never redelivers an interaction; Events API callbacks
  are retried and stay reported;
- Stripe `update`/`del`/`cancel`/`detach` calls (replays are harmless), and Octokit's absolute
  writes that name their target (`updateComment({ comment_id })`, `setLabels`, `removeLabel`,
  `addLabels`, `delete*`, `lock`, `addOrUpdate*`), a commit status or a check run (the latest
  per context or name on a commit is the one shown) and `createLabel` (a label's name is unique
  in its repository): a repeat leaves the same state;
- S3 object and bucket commands (`PutObject`, `DeleteObject`, `CopyObject`, multipart uploads,
  `CreateBucket`, `PutBucket*`): a repeat writes or removes the same named object again;
- inserts whose unique violation the code catches or reads back (`catch (e) { if
  (isUniqueViolation(e)) ... }`, `{ error }` compared with `23505`): the constraint rejects the
  replay; a generated value (`id: crypto.randomUUID()`) never counts as the unique field;
- effects in a failure path: a `catch` clause or a `.catch(...)` callback (a dead-letter send,
  a requeue for a later retry, a failure notice), and `void effect()` calls, fire-and-forget
  on purpose (`ack-timing` judges the unawaited promise);
- an enqueue of a job this project defines (`jobs.enqueue(new CloseDunningJob({...}))`) whose
  work (its `perform`/`run`/`process`/`handle`/`execute` method and what that calls) does
  nothing a replay duplicates, and whose class name names no effect: running the job twice
  changes nothing. A job named for an effect (`SendWelcomeEmailJob`) stays reported even when
  its work is out of sight;
- in-process task queues (a `p-queue` `add(async () => work())`: a function, not a message): nothing durable
  is enqueued;
- an OAuth token request (`grant_type`, `client_secret`, a `/token` URL): the code is
  single-use and the answer is a credential;
- code inside a guard `run` callback or a transaction that writes the claim, and inside an
  Inngest `step.run` (a completed step's result is memoised, so a retried function does not
  repeat it; a crash *inside* a step still repeats that step, which is why
  `effect-missing-idempotency-key` still applies there);
- handlers with hand-written dedupe (a processed-event check or marker): those are
  reported by `check-then-insert-race`, `effect-before-record` or
  `record-before-effect-no-tx`. Relative writes (increments, appends) are not effects of
  this rule: `incrementing-write-unguarded` reports them, and a handler with both an email
  and an increment gets both findings (each rule reports its own defect, whichever rules
  are enabled; the two fixes are the same guard wrap and apply once).

## Bad
```ts
const event = stripe.webhooks.constructEvent(body, sig, secret);
await prisma.order.create({ data: { total: session.amount_total } });
await resend.emails.send({ to, subject: "Thanks!" });
```

## Good
```ts
const result = await guard.run(`stripe:${event.id}`, async (tx) => {
  await tx.order.create({ data: { total: session.amount_total } });
  await resend.emails.send({ to, subject: "Thanks!" });
});
if (result.status === "in-progress") return new Response(null, { status: 409 });
```

## Fix (unsafe: review)
Wraps the handler's work — the statements after verification/parsing and before the final
response — in `await guard.run(<event key>, async (tx) => { ... })` and answers 409 while
another attempt is in progress (queues: throws so the delivery is retried). With a database
guard (`prismaGuard`/`postgresGuard`/`drizzleGuard` in the guard module), the wrapped
database calls move to `tx`; with `redisGuard` or an unknown guard the callback takes no
parameter. Hand-written early answers inside the work are carried out of the callback when
they are 2xx: fetch-style handlers (Next app router, SvelteKit, Remix, Hono) return the
callback's Response (`if (result.status === "processed" && result.result) return result.result`),
Express/pages handlers stop when `res.headersSent`, Fastify when `reply.sent`. The fix is
display-only when no guard is configured, no event key is known, or the move would change
behaviour (an early non-2xx answer inside the work — the guard would record that delivery as
processed and it would never be retried —, a variable the response reads, a `break` out of
the work, a non-async handler): the note says what to do.
"#;

pub const RULE: Rule = Rule {
    id: "unguarded-side-effect",
    summary: "non-idempotent effect with no guard: a retry or concurrent duplicate repeats it",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

struct Found<'t> {
    scope: usize,
    /// Where the effect is reported: the effect itself, or the call of the wrapper that
    /// performs it.
    at: Node<'t>,
    label: String,
    kind: EffectKind,
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        if model.has_hand_written_dedupe(cx.project) {
            continue;
        }
        let found = unguarded_effects(cx, model);
        let Some(first) = found.first() else { continue };
        let scope = &model.scopes[first.scope];
        out.push(diagnostic(cx, model, scope, &found));
        // A second effect of the same function on another target (the order row after the
        // address row, the confirmation email after the ledger insert) duplicates something
        // else on a replay: a reader fixing only the first would miss it. Repeats of one target,
        // and effects in other functions the handler reaches, stay counted in the first message.
        let mut targets = vec![target(first, scope)];
        for f in found[1..].iter().filter(|f| f.scope == first.scope) {
            let t = target(f, scope);
            if !targets.contains(&t) {
                targets.push(t);
                out.push(diagnostic(cx, model, scope, std::slice::from_ref(f)));
            }
        }
    }
}

/// What a replay of the effect duplicates: the table an insert names (`db.insert(orders)`,
/// `prisma.order.create`), or the callee's last two names (`client.createMessage`, a wrapper's
/// own name).
fn target(found: &Found, scope: &Scope) -> String {
    let src = &scope.file().text;
    let mut call = found.at;
    // Drizzle/Knex chains: the table is the argument of `insert(...)`/`into(...)`/`from(...)`.
    while let Some(object) = ast::method_receiver(call).filter(|o| o.kind_name() == "call_expression") {
        call = object;
        let name = ast::callee_name(call, src).unwrap_or_default();
        if matches!(name.as_str(), "insert" | "into" | "from" | "table" | "insertInto")
            && let Some(table) = ast::arguments(call).first()
        {
            return format!("table {}", text(*table, src));
        }
    }
    let path = ast::callee_path_shared(found.at, src);
    let tail: Vec<String> = path.iter().rev().take(2).rev().map(|p| p.trim_end_matches("()").to_string()).collect();
    tail.join(".")
}

/// An effect found directly in a scope's function, or a call to a project function that
/// performs effects.
struct Direct<'t> {
    call: Node<'t>,
    /// The effect the call itself is (None for a plain call of a project function).
    effect: Option<Effect<'t>>,
    /// The scope the call resolves to, if any.
    callee: Option<usize>,
}

type EffectId = (PathBuf, usize);

fn unguarded_effects<'t>(cx: &Context, model: &'t HandlerModel) -> Vec<Found<'t>> {
    let scopes = &model.scopes;
    // What each scope's function does directly.
    let mut direct: Vec<Vec<Direct<'t>>> = Vec::with_capacity(scopes.len());
    // Project functions called only where no effect counts (a failure path, a transition
    // branch, a guard): what they do is not reported on its own either.
    let mut excused_callees: Vec<usize> = Vec::new();
    for (index, scope) in scopes.iter().enumerate() {
        let mut here = Vec::new();
        if let Some(func) = scope.node() {
            let file = scope.file();
            for call in scope.calls(func) {
                let def = reach::resolve_call(cx.project, file, call);
                let callee = def.as_ref().and_then(|d| {
                    scopes.iter().position(|s| s.function.span == d.span && Arc::ptr_eq(&s.function.file, &d.file))
                });
                let effect =
                    effects::classify(call, &file.text, def.is_some()).filter(|e| non_idempotent(cx.project, file, e));
                // Only calls that matter are judged for where they run: the checks climb and
                // look up bindings.
                if effect.is_none() && callee.is_none() {
                    continue;
                }
                if in_failure_path(call, func, &file.text)
                    || fire_and_forget(call)
                    || runs_only_on_transition(call, func, &file.text)
                    || runs_only_when_missing(call, func, &file.text)
                    || replay_returns_before(call, func, &file.text, scopes, index)
                    || answers_slack_interaction(call, func, &file.text)
                    || enqueues_replay_safe_job(cx, file, call)
                    || wrap_guard::is_protected(scope, call, cx.guard)
                {
                    excused_callees.extend(callee);
                    continue;
                }
                here.push(Direct { call, effect, callee });
            }
        }
        direct.push(here);
    }
    // The effects each scope performs, itself or through the functions it calls (at most two
    // are kept: one says the function is a wrapper of that effect).
    let mut through: Vec<Option<Vec<EffectId>>> = vec![None; scopes.len()];
    for i in 0..scopes.len() {
        effects_through(i, scopes, &direct, &mut through, &mut Vec::new());
    }
    let mut found: Vec<Found> = Vec::new();
    let wrappers: Vec<bool> = scopes.iter().enumerate().map(|(j, s)| j != 0 && wrapper(s)).collect();
    // Functions whose effects are reported at their callers: wrappers, and project functions
    // the classifier names as effects at the call (`sendEmail(...)`), with all they call.
    let mut covered = vec![false; scopes.len()];
    let mut work: Vec<usize> = Vec::new();
    let mut lifted: Vec<(usize, Node<'t>, String, EffectKind)> = Vec::new();
    for (i, here) in direct.iter().enumerate() {
        for d in here {
            let Some(j) = d.callee.filter(|j| *j != 0 && *j != i) else { continue };
            let inner = through[j].clone().unwrap_or_default();
            let wraps = wrappers[j] && inner.len() == 1;
            if d.effect.is_some() || wraps {
                work.push(j);
            }
            if d.effect.is_none()
                && wraps
                && let Some((kind, label)) = describe(&inner[0], scopes, &direct)
            {
                let file = scopes[i].file();
                let callee = ast::callee_path(d.call, &file.text).join(".");
                lifted.push((i, d.call, format!("{callee}` → `{label}"), kind));
            }
        }
    }
    let called: Vec<usize> = direct.iter().flatten().filter_map(|d| d.callee).collect();
    work.extend(excused_callees.into_iter().filter(|j| *j != 0 && !called.contains(j)));
    while let Some(j) = work.pop() {
        if std::mem::replace(&mut covered[j], true) {
            continue;
        }
        work.extend(direct[j].iter().filter_map(|d| d.callee).filter(|k| *k != 0 && !covered[*k]));
    }
    let mut seen: Vec<EffectId> = Vec::new();
    for (i, here) in direct.iter().enumerate() {
        if covered[i] {
            continue;
        }
        let file = scopes[i].file();
        let mut items: Vec<Found> = Vec::new();
        for d in here {
            let Some(effect) = &d.effect else { continue };
            items.push(Found { scope: i, at: d.call, label: effect.label.clone(), kind: effect.kind });
        }
        for (s, at, label, kind) in &lifted {
            if *s == i {
                items.push(Found { scope: i, at: *at, label: label.clone(), kind: *kind });
            }
        }
        items.sort_by_key(|f| f.at.start_byte());
        for f in items {
            let id = (file.path.clone(), f.at.start_byte());
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            found.push(f);
        }
    }
    found
}

/// The effects scope `i` performs, itself or through its callees (at most two).
fn effects_through(
    i: usize,
    scopes: &[Scope],
    direct: &[Vec<Direct>],
    memo: &mut Vec<Option<Vec<EffectId>>>,
    visiting: &mut Vec<usize>,
) -> Vec<EffectId> {
    if let Some(done) = &memo[i] {
        return done.clone();
    }
    if visiting.contains(&i) {
        return Vec::new();
    }
    visiting.push(i);
    let file = scopes[i].file();
    let mut out: Vec<EffectId> = Vec::new();
    for d in &direct[i] {
        let ids = match (d.callee, &d.effect) {
            (Some(j), _) if j != i => {
                let inner = effects_through(j, scopes, direct, memo, visiting);
                if inner.is_empty() && d.effect.is_some() {
                    vec![(file.path.clone(), d.call.start_byte())]
                } else {
                    inner
                }
            }
            (_, Some(_)) => vec![(file.path.clone(), d.call.start_byte())],
            _ => Vec::new(),
        };
        for id in ids {
            if !out.contains(&id) {
                out.push(id);
            }
        }
        if out.len() >= 2 {
            break;
        }
    }
    out.truncate(2);
    visiting.pop();
    memo[i] = Some(out.clone());
    out
}

/// The kind and label of the effect call `id`.
fn describe(id: &EffectId, scopes: &[Scope], direct: &[Vec<Direct>]) -> Option<(EffectKind, String)> {
    scopes.iter().zip(direct).find_map(|(scope, here)| {
        (scope.file().path == id.0)
            .then(|| here.iter().find(|d| d.call.start_byte() == id.1))
            .flatten()
            .and_then(|d| d.effect.as_ref())
            .map(|e| (e.kind, e.label.clone()))
    })
}

/// Words that name an effect in a function's or a job's name (`sendReceipt`, `notifyOwner`,
/// `CustomerSendEmailJob`).
const EFFECT_WORDS: &[&str] =
    &["send", "email", "mail", "notify", "enqueue", "queue", "publish", "charge", "refund", "payout", "sms"];

/// `jobs.enqueue(new DunningStopJob({ shop, payload }))`: a job of this project whose work
/// (`perform`, and what it calls) does nothing a replay duplicates (reads, updates, upserts)
/// and whose name names no effect: a second run of it changes nothing. A job named for an
/// effect (`CustomerSendEmailJob`) stays reported even when its work is out of sight.
fn enqueues_replay_safe_job(cx: &Context, file: &Arc<SourceFile>, call: Node) -> bool {
    let Some(job) = ast::arguments(call).first().copied() else { return false };
    let Some(work) = reach::job_work(cx.project, file, job) else { return false };
    let class = work.name.split('.').next().unwrap_or("");
    if best_effort::words(class).iter().any(|w| EFFECT_WORDS.contains(&w.as_str())) {
        return false;
    }
    let scopes = reach::scopes_from(cx.project, work, None);
    !scopes.iter().any(|scope| {
        let Some(func) = scope.node() else { return false };
        let file = scope.file();
        scope.calls(func).into_iter().any(|c| {
            let local = reach::resolve_call(cx.project, file, c).is_some();
            !in_failure_path(c, func, &file.text)
                && effects::classify(c, &file.text, local).is_some_and(|e| non_idempotent(cx.project, file, &e))
        })
    })
}

/// A function named for the effect it wraps (`sendEmail`, `sendCommentEmail`, `enqueue`,
/// `notifyOwner`, `chargeCustomer`) and thin (at most two awaited calls of its own): its call is
/// where the handler performs that effect.
fn wrapper(scope: &Scope) -> bool {
    let name = &scope.function.name;
    let last = name.rsplit('.').next().unwrap_or(name);
    let words = best_effort::words(last);
    let verb = words.first().map(String::as_str).unwrap_or("");
    EFFECT_WORDS.contains(&verb)
        && scope.node().is_some_and(|func| {
            let mut awaits = 0;
            ast::walk(func, &mut |n| {
                if n != func && ast::is_function(n) {
                    return false;
                }
                if n.kind_name() == "await_expression" {
                    awaits += 1;
                }
                true
            });
            awaits <= 2
        })
}

/// Inside a `catch` clause or a `.catch(...)` callback: failure handling (a dead-letter send,
/// a requeue for retry, a failure notice), not the delivery's own work.
fn in_failure_path(call: Node, func: Node, src: &str) -> bool {
    // `if (!result.ok) { requeue(...) }`, `if (error) { ... }`: the branch of a failed step.
    let failure_branch = |branch: Node| {
        let Some(stmt) = ast::parent(branch).filter(|p| p.kind_name() == "if_statement") else { return false };
        stmt.field("consequence") == Some(branch)
            && stmt.field("condition").is_some_and(|c| {
                crate::regex!(
                    r"^\(\s*(?:![\w$.?]+\.(?:ok|success|succeeded)|(?:[\w$.?]+\.)?(?:error|err|failed|failure)|[\w$.?]+\.isErr\(\))\s*\)$"
                )
                .is_match(text(c, src))
            })
    };
    ast::ancestors(call).take_while(|a| *a != func).any(|a| {
        failure_branch(a)
            || a.kind_name() == "catch_clause"
            || (ast::is_function(a)
                && ast::parent(a)
                    .filter(|p| p.kind_name() == "arguments")
                    .and_then(ast::parent)
                    .filter(|c| c.kind_name() == "call_expression")
                    .is_some_and(|c| ast::callee_name(c, src).as_deref() == Some("catch")))
    })
}

/// Inside the branch for a Slack interaction payload (`payload.type === "block_actions"`,
/// `view_submission`, a shortcut): Slack never redelivers an interaction (a slow answer only
/// shows the user an error), so nothing replays the effect. Events API callbacks are retried.
fn answers_slack_interaction(call: Node, func: Node, src: &str) -> bool {
    let interaction = |value: Node| {
        ast::string_value(value, src).is_some_and(|v| {
            matches!(
                v.as_str(),
                "block_actions"
                    | "view_submission"
                    | "view_closed"
                    | "shortcut"
                    | "message_action"
                    | "block_suggestion"
                    | "interactive_message"
            )
        })
    };
    let mut child = call;
    for anc in ast::ancestors(call).take_while(|a| *a != func) {
        let branch_for_interaction = match anc.kind_name() {
            "if_statement" => {
                anc.field("consequence").is_some_and(|c| ast::contains(c, child))
                    && anc.field("condition").is_some_and(|cond| {
                        ast::descendants_of_kind(cond, "binary_expression").into_iter().any(|cmp| {
                            let op = cmp.field("operator").map(|o| text(o, src)).unwrap_or("");
                            matches!(op, "===" | "==")
                                && [cmp.field("left"), cmp.field("right")].into_iter().flatten().any(interaction)
                        })
                    })
            }
            "switch_case" => anc.field("value").is_some_and(interaction),
            _ => false,
        };
        if branch_for_interaction {
            return true;
        }
        child = anc;
    }
    false
}

/// `void sendReceipt(...)`: deliberately fire-and-forget (best effort; `ack-timing` judges
/// the unawaited promise).
fn fire_and_forget(call: Node) -> bool {
    ast::ancestors(call)
        .take_while(|a| !a.kind_name().ends_with("statement") && !ast::is_function(*a))
        .any(|a| a.kind_name() == "unary_expression" && a.child(0).is_some_and(|o| o.kind_name() == "void"))
}

fn diagnostic(cx: &Context, model: &HandlerModel, scope: &Scope, found: &[Found]) -> Diagnostic {
    let first = &found[0];
    let possible = if first.kind == EffectKind::Possible { " (classified by its name)" } else { "" };
    let mut message = format!(
        "`{}` ({}{possible}) runs on every delivery with no guard: a retry after success or a concurrent \
         duplicate repeats it",
        first.label,
        first.kind.noun()
    );
    if found.len() > 1 {
        let mut kinds: Vec<&str> = found[1..].iter().map(|f| f.kind.noun()).collect();
        kinds.dedup();
        message.push_str(&format!(
            "; {} more unguarded effect{} in this handler ({})",
            found.len() - 1,
            if found.len() > 2 { "s" } else { "" },
            kinds.join(", ")
        ));
    }
    Diagnostic::new(RULE.id, scope.file(), first.at, message)
        .in_handler(model, scope)
        .help("run the handler's work once per event: wrap it in the guard `run` keyed by the event id")
        .with_fix(cx, || wrap_guard::wrap_fix(cx, model, &[], &[]))
}

/// Whether replaying the effect duplicates something.
fn non_idempotent(project: &Project, file: &Arc<SourceFile>, effect: &Effect) -> bool {
    let src = file.text.as_str();
    match effect.kind {
        EffectKind::DbUpsert | EffectKind::DbUpdate | EffectKind::DbDelete | EffectKind::DbIncrement => false,
        EffectKind::DbInsert => {
            let last = ast::callee_name(effect.call, src).unwrap_or_default();
            let call_text = text(effect.call, src);
            // Mongo `_id: ...` (a key of its own, not `user_id:`).
            let sets_mongo_id = crate::regex!(r#"(?:^|[\s{,'"])_id['"]?\s*:"#);
            if last == "save" {
                return saves_new_document(effect.call, src)
                    && !sets_mongo_id.is_match(call_text)
                    && !unique_writes::insert_sets_unique(project, file, effect.call);
            }
            if sets_mongo_id.is_match(call_text) || sets_primary_id(effect.call, src) {
                return false;
            }
            // A caught or read-back unique violation: the constraint rejects the replay.
            if markers::unique_violation_handled(effect.call, src) {
                return false;
            }
            // Update first, insert only when it matched nothing: an upsert by hand, which a
            // replay finds updating (the concurrent pair is the race it leaves).
            if inserts_after_missed_update(effect.call, src) {
                return false;
            }
            // A second row in an audit or event log records the redelivery; it duplicates no
            // business effect.
            if crate::model::best_effort::log_table(effect.call, src) || introduced_as_log(effect.call, src) {
                return false;
            }
            !unique_writes::insert_sets_unique(project, file, effect.call)
        }
        EffectKind::Payment => effect.key.is_none() && !effect.replays_harmlessly(src),
        EffectKind::Http => {
            effect.key.is_none() && !exchanges_token(effect.call, src) && !asks_to_verify(effect.call, src)
        }
        // An in-process task queue (`new PQueue()`, `queue.add(async () => work())`) runs a
        // function in this process: nothing durable is enqueued (the work it runs is scanned
        // on its own).
        EffectKind::Enqueue => {
            effect.key.is_none()
                && !ast::arguments(effect.call).first().is_some_and(|a| ast::is_function(ast::unwrap_expr(*a)))
        }
        _ => effect.key.is_none() && !replaces_view(effect.call, src) && !effects::realtime_broadcast(effect.call, src),
    }
}

/// `const updated = await db.update(t).set(row).where(...)`, then `if (updated.length === 0)
/// { await db.insert(t).values(row) }` (also `if (!updated)`, `if (result.count === 0)`): the
/// insert runs only when an update of the same table found no row.
fn inserts_after_missed_update(call: Node, src: &str) -> bool {
    let table = |c: Node| -> Option<String> {
        crate::regex!(r"\b(?:insert|update|into)\s*\(\s*([A-Za-z_$][\w$.]*)")
            .captures(text(c, src))
            .map(|m| m[1].to_string())
            .or_else(|| {
                let path = ast::callee_path_shared(c, src);
                (path.len() >= 2).then(|| path[path.len() - 2].clone())
            })
    };
    let Some(inserted) = table(call) else { return false };
    let Some(func) = ast::enclosing_function(call) else { return false };
    ast::ancestors(call).take_while(|a| a.id() != func.id()).filter(|a| a.kind_name() == "if_statement").any(|branch| {
        let Some(cond) = branch.field("condition") else { return false };
        ast::descendants_of_kind(cond, "identifier").into_iter().any(|id| {
            ast::find_binding_init(func, text(id, src), src, branch.start_byte())
                .map(ast::unwrap_expr)
                .and_then(|init| {
                    std::iter::once(init).chain(ast::calls_in(init, false)).find(|c| {
                        c.kind_name() == "call_expression"
                            && ast::callee_path_shared(*c, src).iter().any(|p| p.starts_with("update"))
                    })
                })
                .is_some_and(|update| table(update).is_some_and(|t| t == inserted))
        })
    })
}

/// Slack's `views.publish` and `views.update` (and `chat.update`) replace what they target
/// with the given content: a replay shows the same thing again.
fn replaces_view(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    let tail: Vec<&str> = path.iter().rev().take(2).map(|s| s.as_str()).collect();
    matches!(tail.as_slice(), ["publish", "views"] | ["update", "views"] | ["update", "chat"])
}

/// An insert whose statement a comment introduces as a log entry (`// Log the transaction
/// (best-effort)`, `// audit trail`): the authors keep it as a record of the delivery, and a
/// second row duplicates no business effect.
fn introduced_as_log(call: Node, src: &str) -> bool {
    let Some(mut statement) = ast::enclosing_statement(call) else { return false };
    // The comment may head a short run of plain declarations that prepare the insert
    // (`// Log the purchase` / `const amount = ...` / the insert).
    for _ in 0..3 {
        let Some(above) = statement.prev_named_sibling() else { return false };
        if src[above.end_byte()..statement.start_byte()].matches('\n').count() > 1 {
            return false;
        }
        if above.kind_name() == "comment" {
            let said = text(above, src).trim_start_matches(['/', '*', ' ']).to_ascii_lowercase();
            let first = said.split(|c: char| !c.is_ascii_alphanumeric()).next().unwrap_or("");
            return matches!(first, "log" | "logs" | "audit")
                || said.contains("audit trail")
                || said.contains("audit log");
        }
        if !ast::is_declaration_statement(above) || !ast::descendants_of_kind(above, "await_expression").is_empty() {
            return false;
        }
        statement = above;
    }
    false
}

/// The effect runs only when the delivery changes what it found: inside `if (outcome)` on the
/// result of a transaction that can return early with nothing (`return null` after a locked
/// re-read), or under a comparison of a stored field with another value where the function
/// also writes that field (`if (row.status !== "active")` then `status: "active"`). A replay
/// finds the change already made and skips the effect; the window two concurrent deliveries
/// leave open is `check-then-insert-race`'s.
fn runs_only_on_transition(call: Node, func: Node, src: &str) -> bool {
    let mut child = call;
    for anc in ast::ancestors(call).take_while(|a| *a != func) {
        let in_consequence =
            anc.kind_name() == "if_statement" && anc.field("consequence").is_some_and(|c| ast::contains(c, child));
        child = anc;
        if !in_consequence {
            continue;
        }
        let Some(cond) = anc.field("condition") else { continue };
        let before = anc.start_byte();
        let transaction_outcome = ast::descendants_of_kind(cond, "identifier").into_iter().any(|id| {
            ast::find_binding_init(func, text(id, src), src, before)
                .is_some_and(|init| transaction_may_return_nothing(ast::unwrap_expr(init), src))
        });
        let stored_change = ast::descendants_of_kind(cond, "binary_expression").into_iter().any(|cmp| {
            let op = cmp.field("operator").map(|o| text(o, src)).unwrap_or("");
            let sides = [cmp.field("left"), cmp.field("right")];
            matches!(op, "!==" | "!=")
                && !sides.iter().flatten().any(|s| matches!(text(*s, src), "null" | "undefined"))
                && sides
                    .iter()
                    .flatten()
                    .filter_map(|side| stored_field(*side, func, src, before))
                    .any(|field| writes_field(func, &field, src))
        });
        if transaction_outcome || stored_change {
            return true;
        }
    }
    false
}

/// The effect follows an early exit (`if (job.status === "completed") return null;`, `if
/// (!org?.allowTrial) return true;`) taken when a stored field holds the value the handler
/// itself leaves in it: the function writes `"completed"` after the test, or the handler's other
/// functions write that field with one value only (`allowTrial: false`). A sequential replay
/// finds the value and stops before the effect; the window two concurrent deliveries leave
/// open is `check-then-insert-race`'s.
fn replay_returns_before(call: Node, func: Node, src: &str, scopes: &[Scope], index: usize) -> bool {
    let mut child = call;
    for anc in ast::ancestors(call).take_while(|a| *a != func) {
        if anc.kind_name() == "statement_block" {
            let exits_early = ast::named_children(anc)
                .into_iter()
                .take_while(|st| st.end_byte() <= child.start_byte())
                .filter(|st| st.kind_name() == "if_statement" && st.field("alternative").is_none())
                .any(|st| {
                    let exits = st
                        .field("consequence")
                        .and_then(|c| if c.kind_name() == "statement_block" { ast::last_statement(c) } else { Some(c) })
                        .is_some_and(|last| {
                            matches!(last.kind_name(), "return_statement" | "throw_statement" | "continue_statement")
                        });
                    let left_by_run = |field: &str| value_left_by_run(field, func, src, st.end_byte(), scopes, index);
                    exits
                        && st
                            .field("condition")
                            .and_then(|cond| holds_for(cond, func, src, st.start_byte(), &left_by_run))
                            == Some(true)
                });
            if exits_early {
                return true;
            }
        }
        child = anc;
    }
    false
}

/// The value of `field` once a delivery has run: the last one this function writes after
/// `after`, or the one value the handler's other functions write.
fn value_left_by_run(
    field: &str,
    func: Node,
    src: &str,
    after: usize,
    scopes: &[Scope],
    index: usize,
) -> Option<String> {
    if let Some(last) = values_written(func, field, src, after).pop() {
        return Some(last);
    }
    let mut elsewhere: Vec<String> = scopes
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != index)
        .filter_map(|(_, s)| s.node().map(|f| values_written(f, field, &s.file().text, 0)))
        .flatten()
        .collect();
    elsewhere.sort();
    elsewhere.dedup();
    match elsewhere.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// Literal values `func` writes into `field` after `after`, in order: `{ field: "value" }` as
/// data (not a query's `where`), or `updateJobStatus(id, "value")` for a field the call names.
/// Writes in a `catch` record a failure, not what a completed run leaves.
fn values_written(func: Node, field: &str, src: &str, after: usize) -> Vec<String> {
    let in_catch = |n: Node| ast::ancestors(n).take_while(|a| *a != func).any(|a| a.kind_name() == "catch_clause");
    let mut out: Vec<(usize, String)> = Vec::new();
    for pair in ast::descendants_of_kind(func, "pair") {
        if pair.start_byte() < after || in_catch(pair) {
            continue;
        }
        let Some(key) = pair.field("key") else { continue };
        if text(key, src).trim_matches(['"', '\'']) != field {
            continue;
        }
        let filter = ast::ancestors(pair).take_while(|a| *a != func).any(|a| {
            (a.kind_name() == "pair" && a.field("key").is_some_and(|k| text(k, src) == "where"))
                || (a.kind_name() == "call_expression" && crate::model::best_effort::is_read_call(a, src))
        });
        if let Some(value) = pair.field("value").and_then(|v| literal(v, src))
            && !filter
        {
            out.push((pair.start_byte(), value));
        }
    }
    let named = field.to_ascii_lowercase();
    for call in ast::calls_in(func, false) {
        if call.start_byte() < after || in_catch(call) {
            continue;
        }
        let name = ast::callee_name(call, src).unwrap_or_default().to_ascii_lowercase();
        let setter = ["update", "set", "mark"].iter().any(|v| name.starts_with(v));
        if setter
            && name.contains(&named)
            && let Some(value) = ast::arguments(call).into_iter().rev().find_map(|a| literal(a, src))
        {
            out.push((call.start_byte(), value));
        }
    }
    out.sort_by_key(|(at, _)| *at);
    out.into_iter().map(|(_, v)| v).collect()
}

/// A literal as a comparison sees it: `'done'` (quoted, whatever the quotes), `false`, `null`,
/// `3`, or a named constant (`OrderStatus.ACTIVE`).
fn literal(node: Node, src: &str) -> Option<String> {
    let node = ast::unwrap_expr(node);
    if let Some(s) = ast::string_value(node, src) {
        return Some(format!("'{s}'"));
    }
    match node.kind_name() {
        "true" | "false" | "null" | "undefined" | "number" => Some(text(node, src).to_string()),
        "member_expression"
            if node.field("property").is_some_and(|p| text(p, src).starts_with(|c: char| c.is_ascii_uppercase())) =>
        {
            Some(text(node, src).to_string())
        }
        _ => None,
    }
}

fn truthy(value: &str) -> bool {
    !matches!(value, "false" | "null" | "undefined" | "0" | "''")
}

/// What `cond` gives when each stored field it reads holds `state(field)`, or None when it
/// reads anything else.
fn holds_for(cond: Node, func: Node, src: &str, before: usize, state: &dyn Fn(&str) -> Option<String>) -> Option<bool> {
    let cond = ast::unwrap_expr(cond);
    match cond.kind_name() {
        "parenthesized_expression" => holds_for(cond.named_child(0)?, func, src, before, state),
        "unary_expression" if cond.child(0).is_some_and(|o| o.kind_name() == "!") => {
            holds_for(cond.named_child(0)?, func, src, before, state).map(|v| !v)
        }
        "binary_expression" => {
            let op = text(cond.field("operator")?, src);
            let (left, right) = (cond.field("left")?, cond.field("right")?);
            match op {
                "&&" | "||" => {
                    let (l, r) =
                        (holds_for(left, func, src, before, state), holds_for(right, func, src, before, state));
                    let decisive = op == "||";
                    if l == Some(decisive) || r == Some(decisive) {
                        Some(decisive)
                    } else if l.is_some() && r.is_some() {
                        Some(!decisive)
                    } else {
                        None
                    }
                }
                "===" | "==" | "!==" | "!=" => {
                    let (field, value) =
                        match (stored_field(left, func, src, before), stored_field(right, func, src, before)) {
                            (Some(f), None) => (f, literal(right, src)?),
                            (None, Some(f)) => (f, literal(left, src)?),
                            _ => return None,
                        };
                    Some((state(&field)? == value) == op.starts_with('='))
                }
                _ => None,
            }
        }
        _ => stored_field(cond, func, src, before).and_then(|field| state(&field)).map(|v| truthy(&v)),
    }
}

/// Find-or-create: the effect runs only when a read found nothing, inside `if (!found)` or after
/// `if (found) return found;` (`found = await getActiveRetro(team)`). A replay finds what the
/// first delivery created and stops; the race two concurrent deliveries leave open is
/// `check-then-insert-race`'s.
fn runs_only_when_missing(call: Node, func: Node, src: &str) -> bool {
    let loaded_by_read =
        |id: Node, before: usize| id.kind_name() == "identifier" && loaded_by_read(func, text(id, src), src, before);
    let mut child = call;
    for anc in ast::ancestors(call).take_while(|a| *a != func) {
        if anc.kind_name() == "if_statement"
            && anc.field("consequence").is_some_and(|c| ast::contains(c, child))
            && let Some(cond) = anc.field("condition").map(ast::unwrap_expr)
            && cond.kind_name() == "unary_expression"
            && cond.child(0).is_some_and(|op| op.kind_name() == "!")
            && cond.named_child(0).map(ast::unwrap_expr).is_some_and(|id| loaded_by_read(id, anc.start_byte()))
        {
            return true;
        }
        if anc.kind_name() == "statement_block" {
            let returned_when_found = ast::named_children(anc)
                .into_iter()
                .take_while(|st| st.end_byte() <= child.start_byte())
                .filter(|st| st.kind_name() == "if_statement" && st.field("alternative").is_none())
                .any(|st| {
                    let cond = st.field("condition").map(ast::unwrap_expr);
                    let exits = st
                        .field("consequence")
                        .and_then(|c| if c.kind_name() == "statement_block" { ast::last_statement(c) } else { Some(c) })
                        .is_some_and(|last| last.kind_name() == "return_statement");
                    exits && cond.is_some_and(|c| loaded_by_read(c, st.start_byte()))
                });
            if returned_when_found {
                return true;
            }
        }
        child = anc;
    }
    false
}

/// `await db.transaction(async (tx) => { ...; if (done) return null; ... })`.
fn transaction_may_return_nothing(init: Node, src: &str) -> bool {
    let call = ast::unwrap_expr(init);
    if call.kind_name() != "call_expression" {
        return false;
    }
    let last = ast::callee_name(call, src).unwrap_or_default().to_ascii_lowercase();
    if !matches!(last.as_str(), "transaction" | "$transaction") {
        return false;
    }
    ast::arguments(call).into_iter().map(ast::unwrap_expr).filter(|a| ast::is_function(*a)).any(|callback| {
        ast::descendants_of_kind(callback, "return_statement").into_iter().any(|ret| {
            ast::enclosing_function(ret) == Some(callback)
                && ret.named_child(0).is_none_or(|v| matches!(text(v, src), "null" | "false" | "undefined"))
        })
    })
}

/// The field a value read from storage holds: `row.status`, `row?.status ?? "none"`, or a
/// local bound to one, where `row` was loaded by a read (`await getRow(id)`, `findUnique`).
fn stored_field(side: Node, func: Node, src: &str, before: usize) -> Option<String> {
    let mut value = ast::unwrap_expr(side);
    for _ in 0..3 {
        match value.kind_name() {
            "identifier" => value = ast::unwrap_expr(ast::find_binding_init(func, text(value, src), src, before)?),
            "binary_expression" if value.field("operator").is_some_and(|o| text(o, src) == "??") => {
                value = ast::unwrap_expr(value.field("left")?)
            }
            _ => break,
        }
    }
    if value.kind_name() != "member_expression" {
        return None;
    }
    let field = text(value.field("property")?, src).to_string();
    let object = ast::unwrap_expr(value.field("object")?);
    if object.kind_name() != "identifier" {
        return None;
    }
    loaded_by_read(func, text(object, src), src, before).then_some(field)
}

/// `name` holds what a read returned: `const row = await getRow(id)`, `const [row] = await
/// tx.select()...`.
fn loaded_by_read(func: Node, name: &str, src: &str, before: usize) -> bool {
    ast::find_binding_init(func, name, src, before)
        .or_else(|| ast::find_destructured_init(func, name, src, before))
        .map(ast::unwrap_expr)
        .is_some_and(|init| init.kind_name() == "call_expression" && crate::model::best_effort::is_read_call(init, src))
}

/// Whether `func` writes `field`: an object property of that name (`{ status }`,
/// `status: "active"`), as update data or a helper's argument.
fn writes_field(func: Node, field: &str, src: &str) -> bool {
    ast::descendants_of_kind(func, "shorthand_property_identifier")
        .into_iter()
        .chain(ast::descendants_of_kind(func, "pair").into_iter().filter_map(|p| p.field("key")))
        .any(|key| text(key, src).trim_matches(['"', '\'']) == field)
}

/// An OAuth token request (`grant_type`, `client_secret`, a `/token` or `oauth` URL): the
/// authorization code is single-use and the answer is a credential, so a replay duplicates
/// nothing.
fn exchanges_token(call: Node, src: &str) -> bool {
    ast::arguments(call).iter().any(|a| {
        let t = text(*a, src).to_ascii_lowercase();
        t.contains("client_secret")
            || t.contains("grant_type")
            || t.contains("refresh_token")
            || (matches!(a.kind_name(), "string" | "template_string") && (t.contains("oauth") || t.contains("/token")))
    })
}

/// A request to a provider's verification endpoint (PayPal's `/v1/notifications/verify-webhook-signature`,
/// Paystack's `/transaction/verify/:ref`, Flutterwave's `/transactions/:id/verify`): it asks
/// whether something is genuine and changes nothing.
fn asks_to_verify(call: Node, src: &str) -> bool {
    ast::arguments(call).first().is_some_and(|url| {
        matches!(url.kind_name(), "string" | "template_string")
            && crate::regex!(r"(?i)/verify(?:[-_/`'\x22?]|$)").is_match(text(*url, src))
    })
}

/// `new Order({...}).save()` or `order.save()` where `order` was built with `new Order(...)`
/// (Mongoose, TypeORM active records): a new document, inserted again on every replay. Any
/// other `save()` (a loaded record) is an update; a constructor that sets `_id` makes a replay
/// fail instead of duplicating.
fn saves_new_document(call: Node, src: &str) -> bool {
    unique_writes::saved_document(call, src).is_some_and(|document| {
        document.field("constructor").is_some_and(|c| {
            text(c, src).rsplit('.').next().is_some_and(|l| l.starts_with(|ch: char| ch.is_ascii_uppercase()))
        }) && !crate::regex!(r#"(?:^|[\s{,'"])_id['"]?\s*:"#).is_match(text(document, src))
    })
}

/// An insert whose row sets `id` from the delivery (`create({ data: { id: user.id } })`,
/// `.insert({ id: evt.data.id })`): the primary key makes a replay fail instead of duplicating.
/// A generated id (`randomUUID()`, `cuid()`...) is new on every delivery and does not count.
fn sets_primary_id(call: Node, src: &str) -> bool {
    // `.values({ ... }).returning({ id: orders.id })`: the row is what `values` gets, not what
    // the chain reads back.
    let mut call = call;
    while ast::callee_name(call, src)
        .is_some_and(|n| matches!(n.as_str(), "returning" | "$returningId" | "execute" | "run"))
        && let Some(inner) = ast::method_receiver(call).filter(|o| o.kind_name() == "call_expression")
    {
        call = inner;
    }
    let Some(first) = ast::arguments(call).first().map(|a| ast::unwrap_expr(*a)).filter(|a| a.kind_name() == "object")
    else {
        return false;
    };
    let row = ast::object_property(first, "data", src)
        .map(ast::unwrap_expr)
        .filter(|d| d.kind_name() == "object")
        .unwrap_or(first);
    let Some(id) = ast::object_property(row, "id", src) else { return false };
    // `const id = randomUUID(); create({ data: { id } })`: judge the initializer.
    let init = (id.kind_name() == "identifier" || id.kind_name() == "shorthand_property_identifier")
        .then(|| {
            ast::enclosing_function(call).and_then(|f| ast::find_binding_init(f, text(id, src), src, call.start_byte()))
        })
        .flatten();
    let value = format!("{} {}", text(id, src), init.map_or("", |i| text(i, src)));
    !unique_writes::generated(&value)
        && matches!(
            id.kind_name(),
            "member_expression" | "subscript_expression" | "identifier" | "shorthand_property_identifier"
        )
}
