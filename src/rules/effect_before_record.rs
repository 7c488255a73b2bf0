//! effect-before-record

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::model::markers::PatternKind;

const DOCS: &str = r#"
## What it finds
A handler that does the work first and writes the processed-event marker afterwards
(`await prisma.processedEvent.create(...)`, `INSERT INTO processed_events`, `redis.set(key)`,
a `markProcessed(id)` helper) without a check before the work, and not in one
transaction with it.

## Why retries break it
Nothing stops a second delivery while the first is still working (concurrent duplicate),
and a crash between the work and the marker write leaves no record, so the retry repeats
the work (crash part-way). The marker only helps against a retry after full success, and
only if something reads it.

## Not reported
When the work and the marker are in one transaction (the marker insert's unique violation
rolls the work back), unless an external effect in that transaction runs before the marker
(it cannot roll back); code inside a guard `run` or a claim transaction; a handler that
reads the marker before the work (that is `check-then-insert-race`); a key-value write whose
value is computed data, serialised (`set(key, JSON.stringify(result))`): a cache, not a marker
(a state record written in place, `JSON.stringify({ state: "done" })`, stays a marker).

## Bad
```ts
await prisma.order.create({ data: { sessionId: session.id } });
await sendReceipt(session);
await prisma.processedEvent.create({ data: { id: event.id } });
```

## Good
```ts
const result = await guard.run(`stripe:${event.id}`, async (tx) => {
  await tx.order.create({ data: { sessionId: session.id } });
  await sendReceipt(session);
});
```

## Fix (unsafe: review)
Moves the work into one guard `run` and removes the marker write when it is a statement of
the handler itself (see `retrysafe explain unguarded-side-effect` for the wrap).
"#;

pub const RULE: Rule = Rule {
    id: "effect-before-record",
    summary: "work runs before the processed marker is written: a crash or concurrent duplicate repeats it",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    super::report_dedupe_patterns(cx, out, PatternKind::EffectBeforeRecord, RULE.id, &|call| {
        format!(
            "the work runs before the processed marker `{call}` is written, not in one transaction: a crash in \
             between repeats the work on retry (crash part-way), and nothing stops a concurrent duplicate"
        )
    });
}
