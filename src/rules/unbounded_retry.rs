//! unbounded-retry

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::model::ast::{self, text};
use crate::model::retry_loops::{self, RetryKind};
use crate::model::{EffectKind, effects};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
An in-code retry loop in a handler (or a function it calls) that has no attempt cap
(`while (true)` / `for (;;)` / `while (!done)` retrying until success with no
`if (attempt >= max) throw`, a function that calls itself again from its `catch`,
`p-retry`/`async-retry` with `retries: Infinity` or `forever: true`) or that retries at once,
without awaiting a delay between attempts (`sleep`, `delay`, `setTimeout` in a promise).
Retry libraries back off by default, so only their cap is checked. Also a consumer whose
`catch` sends the failed message back to a queue with its retry counter raised
(`queue.send({ ...message.body, retries })`) and no delay option (`delaySeconds`, `delay`,
`DelaySeconds`): the copy is delivered again at once.

Not retries: a loop over pages or batches whose `try` sits in an inner loop over items (it
isolates one item, it does not redo the pass), and a function that calls itself once from its
`catch` with a fixed input its own test rules out (`if (zone !== "UTC") return format("UTC")`),
or, under a test of one failure, with an input built afresh from a fixed text (`if
(error.status === 410) { const restart = \`${base}/changes?from=start\`; return pull(id, restart) }`).

## Why retries break it
A handler that retries forever never answers: the provider times out and redelivers, and
every redelivery starts another endless loop against the same failing dependency, while a
permanent error (a 4xx, a validation failure) can never succeed. Retrying without a delay
hammers a dependency that is already struggling and spends the provider's response timeout
(Stripe and Svix allow seconds, Shopify 5 s) on attempts that fail for the same reason.
At-least-once sources already retry with backoff: an in-code loop should be short and capped.

## Bad
```ts
while (true) {
  try {
    await notifyFulfilment(order);
    break;
  } catch (err) {
    console.error(err);
  }
}
```

## Good
```ts
for (let attempt = 1; ; attempt++) {
  try {
    await notifyFulfilment(order);
    break;
  } catch (err) {
    if (attempt >= 3) throw err; // let the provider redeliver later
    await sleep(2 ** attempt * 200);
  }
}
```

## Fix
None: how many attempts a call deserves, and whether to rethrow (so the provider redelivers)
or record the failure, is a decision about the dependency, and a mechanical cap would change
what the handler does when the cap is hit. The message says what is missing (cap, backoff or
both); the example above is the usual shape.
"#;

pub const RULE: Rule = Rule {
    id: "unbounded-retry",
    summary: "in-code retry loop without an attempt cap or a backoff: a failing call holds the delivery or hammers the dependency",
    docs: DOCS,
    fix: FixAvailability::None,
    safe_fixes: false,
    preview: false,
    check,
};

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for (model, scope, func) in cx.scopes() {
        let file = scope.file();
        let src = &file.text;
        for lp in retry_loops::find(func, src) {
            let cap = retry_loops::has_cap(&lp, src);
            let backoff = retry_loops::has_backoff(&lp, src);
            if cap && backoff {
                continue;
            }
            let what = match lp.kind {
                RetryKind::Loop => "retry loop",
                RetryKind::Library => "retry call",
                RetryKind::Recursion => "recursive retry (the function calls itself from its catch)",
            };
            let problem = match (cap, backoff) {
                (false, false) => {
                    "has no attempt cap and no delay between attempts: while the call keeps failing the handler never answers, spins against the failing dependency, and the provider times out and redelivers into another endless loop"
                }
                (false, true) => {
                    "has no attempt cap: while the call keeps failing (an outage, a permanent error) the handler never answers, and the provider times out and redelivers into another endless loop"
                }
                _ => {
                    "retries at once, without a delay between attempts: it hammers a failing dependency and spends the provider's response timeout on attempts that fail for the same reason"
                }
            };
            let problem = if model.handler.framework.is_http() {
                problem.to_string()
            } else {
                problem.replace("the handler never answers", "the message is never acknowledged").replace(
                    "the provider times out and redelivers into another endless loop",
                    "once its lock or visibility timeout expires it is delivered again into another endless loop",
                )
            };
            out.push(
                Diagnostic::new(RULE.id, file, lp.node, format!("{what} {problem}"))
                    .in_handler(model, scope)
                    .help("cap the attempts (then rethrow so the provider redelivers later) and await a growing delay between attempts"),
            );
        }
        for send in requeued_at_once(func, src) {
            out.push(
                Diagnostic::new(
                    RULE.id,
                    file,
                    send,
                    "the catch re-enqueues the failed message with its retry counter raised but no delay: the copy is delivered again at once, so every attempt hits the failing dependency back to back".to_string(),
                )
                .in_handler(model, scope)
                .help("pass a growing delay with the copy (`delaySeconds`, `delay`), or let the queue's own retry policy redeliver it"),
            );
        }
    }
}

/// Sends in a `catch` of `func` that put the message back on a queue as a copy with a raised
/// retry counter (`{ ...message.body, retries }`) and nothing that delays it.
fn requeued_at_once<'t>(func: Node<'t>, src: &str) -> Vec<Node<'t>> {
    let counter = crate::regex!(r"(?i)^(retr(y|ies)\w*|attempts?\w*|\w*(retry|attempt)_?count)$");
    let delayed = crate::regex!(r"(?i)delay|backoff|visibility|notbefore|runat|scheduled|countdown");
    let mut out = Vec::new();
    for clause in ast::descendants_of_kind(func, "catch_clause") {
        if ast::enclosing_function(clause) != Some(func) {
            continue;
        }
        let Some(body) = clause.field("body") else { continue };
        for call in ast::calls_in(body, false) {
            let path = ast::callee_path_shared(call, src);
            let last = path.last().map(String::as_str).unwrap_or("");
            let Some(copy) =
                ast::arguments(call).first().map(|a| ast::unwrap_expr(*a)).filter(|a| a.kind_name() == "object")
            else {
                continue;
            };
            let children = ast::named_children(copy);
            let spreads = children.iter().any(|c| c.kind_name() == "spread_element");
            // A copy of the consumed message (`...message.body`, `...job.data`) sent anywhere is
            // the message put back, whatever the binding is called.
            let copies_message = children.iter().any(|c| {
                c.kind_name() == "spread_element" && {
                    let t = text(*c, src);
                    t.ends_with(".body") || t.ends_with(".data")
                }
            });
            let enqueues = effects::classify(call, src, false).is_some_and(|e| e.kind == EffectKind::Enqueue)
                || matches!(last, "send" | "sendMessage" | "add" | "publish" | "enqueue")
                    && (copies_message || path.iter().any(|p| p.to_ascii_lowercase().contains("queue")));
            let counts = children.iter().any(|c| {
                let key = match c.kind_name() {
                    "pair" => c.field("key"),
                    "shorthand_property_identifier" => Some(*c),
                    _ => None,
                };
                key.is_some_and(|k| counter.is_match(text(k, src)))
            });
            let args_text = ast::arguments(call).iter().skip(1).map(|a| text(*a, src)).collect::<String>();
            if enqueues && spreads && counts && !delayed.is_match(&args_text) {
                out.push(call);
            }
        }
    }
    out
}
