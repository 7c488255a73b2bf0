//! effect-missing-idempotency-key

use super::{Context, Diagnostic, FixAvailability, HandlerModel, Rule};
use crate::facts::{in_loop, reached_in_loop, reached_where};
use crate::fix::edits::merge_property;
use crate::fix::{Edit, Fix};
use crate::model::ast::{self, text};
use crate::model::effects::operation_name;
use crate::model::payload::{self, PerAttempt};
use crate::model::reach::{self, Scope};
use crate::model::{Effect, EventKey, Sdk, effects, markers};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A call to an SDK that accepts a provider idempotency key (Stripe create/refund/
capture/confirm, Resend send, Square, Adyen, Svix, Inngest `send`, Trigger.dev `trigger`)
made from a handler without one.

## Why retries break it
A crash after the provider accepted the call but before the handler answered makes the
provider redeliver; the call runs again and charges, refunds or emails twice. With a key
derived from the event, the provider replays the first result instead. The SDK's own
automatic key only covers its internal network retries, not a redelivery.

## Bad
```ts
await stripe.refunds.create({ charge: event.data.object.charge });
```

## Good
```ts
await stripe.refunds.create({ charge }, { idempotencyKey: `refund:${event.id}` });
```

## Fix (safe)
Adds `idempotencyKey: `<operation>:${eventKey}`` in the SDK's exact syntax: Stripe's request
options as the last argument (merged into an existing options object), Resend's and Adyen's
request options (second argument; third for an Adyen modification that names a PSP reference),
Square's body field, Svix's third argument, Inngest's event `id`, Trigger.dev's trigger options
(third argument of `tasks.trigger(id, payload, opts)`, second of `myTask.trigger(payload,
opts)`). Inside a loop, in a helper that a caller runs once per item, or where no event key is
known, the fix is display-only: the key must also name the item, and retrysafe does not guess.
It is display-only too when the payload reads a value that is new on every attempt: a column
the database generated for a row the handler inserted (`order.id` after
`prisma.order.create({ data })` without `id` in `data`, `createdAt`, a Drizzle
`.returning()` column not among the `.values()`), or `Date.now()`, `new Date()`,
`Math.random()`, `randomUUID()`, `nanoid()`, `cuid()`, directly or through a local. The retry
after a crash would send other parameters under the same key, which Stripe
(`idempotency_error`) and Resend (409) reject on every redelivery: the fix would turn an
occasional duplicate into an event that never completes. Fields the insert copied from what
it wrote (`order.email` after `data: { email }`) are as stable as the values written.

## Decisions
- Stripe DELETE requests (`*.del`, `subscriptions.cancel`, `deleteDiscount`) take no key: they
  are idempotent by definition. Stripe `update` requests set absolute values on an existing
  object: a replay writes the same values again, so they need no key either. Reads (`retrieve`, `list`, Adyen `paymentMethods`) are not
  effects.
- `x.trigger(...)` is a Trigger.dev task only on `tasks` or with a payload first: Pusher's
  `pusher.trigger(channel, event, data)` and DOM/emitter triggers are not.
- A call made only when a read of the same provider resource found nothing (`refunds.list`
  for the payment intent, then `refunds.create` if the list is empty; `transfers.retrieve`,
  then `if (transfer.reversed) return` before `transfers.createReversal`) is not reported: a
  redelivery after it succeeded finds the result and skips the call.
- Nor is a call made after an early exit on a marker the same function sets afterwards
  (`if (labels.includes(SENT)) return;`, the email, then `addLabel(SENT)`): a redelivery finds
  the marker. Two concurrent deliveries can both pass the test; that race is
  `check-then-insert-race`'s.
- SDKs without a key (Twilio, SendGrid, Postmark, nodemailer, Slack) are left to
  `unguarded-side-effect`.
"#;

pub const RULE: Rule = Rule {
    id: "effect-missing-idempotency-key",
    summary: "SDK call that accepts an idempotency key has none: a redelivery repeats the charge/email",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: true,
    preview: false,
    check,
};

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        let mut operations: Vec<String> = Vec::new();
        for scope in &model.scopes {
            let Some(func) = scope.node() else { continue };
            let file = scope.file();
            for call in ast::calls_in(func, false) {
                let local = reach::resolve_call(cx.project, file, call).is_some();
                let Some(effect) = effects::classify(call, &file.text, local) else {
                    continue;
                };
                if !effect.sdk.accepts_key()
                    || effect.key.is_some()
                    || effect.replays_harmlessly(&file.text)
                    || !needs_key(&effect, &file.text)
                    || checked_on_provider(effect.call, &file.text)
                    || skipped_when_marked(cx, model, scope, effect.call, func)
                {
                    continue;
                }
                let mut op = operation_name(&effect.label);
                let seen = operations.iter().filter(|o| **o == op).count();
                operations.push(op.clone());
                if seen > 0 {
                    op = format!("{op}-{}", seen + 1);
                }
                out.push(diagnostic(cx, model, scope, &effect, &op));
            }
        }
    }
}

/// `const existing = await stripe.refunds.list({ payment_intent }); if (existing.data.length
/// === 0) await stripe.refunds.create(...)`: the call runs only when a read of the same provider
/// resource found nothing, so a redelivery after it succeeded finds it and skips it.
fn checked_on_provider(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    let Some(resource) = path.len().checked_sub(1).map(|n| &path[..n]).filter(|r| r.len() >= 2) else {
        return false;
    };
    let Some(func) = ast::enclosing_function(call) else { return false };
    let enclosing_ifs = ast::ancestors(call).take_while(|a| *a != func).filter(|a| a.kind_name() == "if_statement");
    enclosing_ifs.chain(ast::guard_clauses_before(call, func)).any(|a| {
        let Some(cond) = a.field("condition") else { return false };
        ast::descendants_of_kind(cond, "identifier").into_iter().any(|id| {
            ast::find_binding_init(func, text(id, src), src, a.start_byte()).is_some_and(|init| {
                let read = ast::unwrap_expr(init);
                let read_path =
                    if read.kind_name() == "call_expression" { ast::callee_path(read, src) } else { Vec::new() };
                read_path.len() == path.len()
                    && read_path[..resource.len()] == *resource
                    && read_path.last().is_some_and(|l| matches!(l.as_str(), "list" | "search" | "retrieve"))
            })
        })
    })
}

/// The call, or a call that leads to it from the handler, runs after an early exit on a marker
/// its function sets afterwards.
fn skipped_when_marked(cx: &Context, model: &HandlerModel, scope: &Scope, call: Node, func: Node) -> bool {
    markers::skipped_when_marked(call, func, &scope.file().text)
        || reached_where(cx, model, scope, |site, parent| {
            parent.node().is_some_and(|f| markers::skipped_when_marked(site, f, &parent.file().text))
        })
}

/// SQS message deduplication only exists on FIFO queues.
fn needs_key(effect: &Effect, src: &str) -> bool {
    effect.sdk != Sdk::Sqs || text(effect.call, src).contains("MessageGroupId")
}

fn diagnostic(cx: &Context, model: &HandlerModel, scope: &Scope, effect: &Effect, op: &str) -> Diagnostic {
    let file = scope.file();
    let message = format!(
        "`{}` has no idempotency key: a redelivery after a crash or timeout repeats this {}",
        effect.label,
        effect.kind.noun()
    );
    let looped = || in_loop(effect.call, scope) || reached_in_loop(cx, model, scope);
    let fix = || match (&scope.event_key, looped()) {
        (_, true) => Fix::display_only(
            "add an idempotency key that names the event and the item",
            "the call runs once per item of a loop (here or in a caller): the key must include the item's id as well as the event key",
        ),
        (None, _) => Fix::display_only(
            "add an idempotency key derived from the event",
            "no event key is known in this function: pass the event (or its key) in and use it",
        ),
        (Some(key), false) => match payload::per_attempt_value(effect, &file.text) {
            Some(value) => per_attempt_fix(&value, op),
            None => match key_edit(effect, key, op, &file.text) {
                Some(edit) => Fix::safe(format!("add idempotency key `{op}:…`"), vec![edit]),
                None => Fix::display_only("add an idempotency key", "the call's arguments are not literal objects"),
            },
        },
    };
    Diagnostic::new(RULE.id, file, effect.call, message)
        .in_handler(model, scope)
        .help("derive the key from the event, e.g. `refund:${event.id}`, so every retry reuses it")
        .with_fix(cx, fix)
}

fn per_attempt_fix(value: &PerAttempt, op: &str) -> Fix {
    Fix::display_only(
        format!(
            "make the payload retry-stable (`{}` is new on every attempt), then add idempotency key `{op}:…`",
            value.shown
        ),
        value.key_note(),
    )
}

/// Where and how the key goes, per SDK (docs/providers.md, "SDKs that accept an idempotency key").
fn key_edit(effect: &Effect, key: &EventKey, op: &str, src: &str) -> Option<Edit> {
    let args = ast::arguments(effect.call);
    let value = key.operation_key(op);
    let (prop, position) = match effect.sdk {
        Sdk::Stripe => ("idempotencyKey", Position::LastOptions),
        Sdk::Resend | Sdk::Adyen | Sdk::Svix | Sdk::TriggerDev => {
            ("idempotencyKey", Position::Nth(effect.options_index(src)?))
        }
        Sdk::Square | Sdk::Paypal => ("idempotencyKey", Position::Nth(0)),
        Sdk::Inngest => ("id", Position::Nth(0)),
        Sdk::Sqs => ("MessageDeduplicationId", Position::SqsInput),
        _ => return None,
    };
    let arguments = effect.call.field("arguments")?;
    let target = match position {
        Position::LastOptions => args.last().copied().filter(|a| effects::is_stripe_options(*a, src)),
        Position::Nth(i) => match args.get(i) {
            Some(a) if a.kind_name() == "object" => Some(*a),
            Some(_) => return None,
            None if args.len() == i => None,
            None => return None,
        },
        Position::SqsInput => {
            let cmd = args.first().filter(|a| a.kind_name() == "new_expression");
            let input = cmd.and_then(|c| c.field("arguments")).and_then(|a| a.named_child(0));
            Some(
                input
                    .filter(|i| i.kind_name() == "object")
                    .or(args.first().copied().filter(|a| a.kind_name() == "object"))?,
            )
        }
    };
    match target {
        Some(object) => Some(merge_property(object, prop, &value, src)),
        None => {
            // Append a new options argument after the last argument.
            let close = arguments.end_byte() - 1;
            let last = args.last();
            let sep = if last.is_some() { ", " } else { "" };
            let at = last.map_or(close, |a| a.end_byte());
            Some(Edit::insert(at, format!("{sep}{{ {prop}: {value} }}")))
        }
    }
}

enum Position {
    LastOptions,
    Nth(usize),
    SqsInput,
}

#[cfg(test)]
mod tests {
    #[test]
    fn operation_names() {
        assert_eq!(crate::model::effects::operation_name("stripe.refunds.create"), "refund");
        assert_eq!(crate::model::effects::operation_name("stripe.paymentIntents.capture"), "paymentIntent-capture");
        assert_eq!(crate::model::effects::operation_name("resend.emails.send"), "email");
        assert_eq!(crate::model::effects::operation_name("stripe.subscriptions.update"), "subscription-update");
        assert_eq!(crate::model::effects::operation_name("square.refunds.refundPayment"), "refundPayment");
        assert_eq!(crate::model::effects::operation_name("checkout.PaymentsApi.payments"), "payment");
        assert_eq!(
            crate::model::effects::operation_name("checkout.ModificationsApi.refundCapturedPayment"),
            "refundCapturedPayment"
        );
    }
}
