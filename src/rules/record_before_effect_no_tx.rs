//! record-before-effect-no-tx

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::model::markers::PatternKind;

const DOCS: &str = r#"
## What it finds
A handler that writes its processed marker or claim first (`redis.set(key, 1, 'NX')`,
`await prisma.processedEvent.create(...)`, `INSERT INTO processed_events`) and then does
the work outside any transaction with it, with no release of the marker when the work
fails (no delete of the key in a `catch`/`finally`). The marker can be the handler's own data:
- a business row whose unique violation is answered as "already done" (`catch (e) { if
  (e.code === "P2002") return ... }`, `if (error.code === "23505") return`), whatever the
  table is called;
- a business row's status that an early return tests (`if (payment.status === incoming.status)
  return`), written before the work to the value a retry stops on (or, for `!==`, to any
  other value), in a statement or a transaction that commits before the work;
- a lock taken by a conditional update whose result is tested (`findOneAndUpdate({ ref,
  processing: { $ne: true } }, { $set: { processing: true } })`, then `if (!row) return`) and
  not given back: a catch that clears the lock but also moves the row to another state
  (`status = "failed"`) still leaves nothing for the retry to claim.

## Why retries break it
If the work throws or the process crashes part-way, the marker says "processed": the
provider's retry is answered as a duplicate and the event is lost for good.

## Not reported
When the work is inside the same transaction as the claim (it rolls back with it); when
the marker is a lease deleted on failure (`catch (e) { await redis.del(key); throw e }`) or a
status set back in a `catch`; a status written first to an unfinished value the test does not
stop on (`processing`, then `done` after the work); code inside a guard `run`; a `SET NX` on a
constant key (`set(BATCH_LOCK, "1", "PX", 30000, "NX")`), which is a mutex shared by every
event, not a marker of one; a conditional update that is the business change itself (`{
enabled: false }`, `status: "canceled"`, no lock flag), which strands nothing.

## Bad
```ts
const fresh = await redis.set(`evt:${event.id}`, "1", "EX", 604800, "NX");
if (!fresh) return res.json({ duplicate: true });
await fulfilOrder(session);
```

## Good
```ts
const result = await guard.run(`stripe:${event.id}`, async () => {
  await fulfilOrder(session);
});
if (result.status === "in-progress") return res.status(409).end();
```

## Fix (unsafe: review; display-only for the handler's own rows)
Replaces the hand-written claim (and the `if (!claimed) return` after it) with one guard
`run` around the work: a database guard commits the claim with the DB work, a lease guard
(`redisGuard`) releases the key when the work throws. See `retrysafe explain
unguarded-side-effect` for the wrap. When the marker is one of the handler's own rows
(a status, a business row claimed by its unique key) the row is work too and must stay: the
fix is display-only and says to move the write into one transaction with the work, write it
last, or let a guard claim the event around both.
"#;

pub const RULE: Rule = Rule {
    id: "record-before-effect-no-tx",
    summary: "marker written before the work, outside a transaction, never released: a failed attempt loses the event",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    super::report_dedupe_patterns(cx, out, PatternKind::RecordBeforeEffect, RULE.id, &|call| {
        format!(
            "the marker `{call}` is written before the work, outside a transaction with it, and is not released \
             on failure: if the work fails or crashes part-way, every retry is skipped as a duplicate and the \
             event is lost"
        )
    });
}
