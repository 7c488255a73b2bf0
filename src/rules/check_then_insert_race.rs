//! check-then-insert-race (and the reporting shared by the three hand-written-dedupe rules)

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::model::markers::PatternKind;

const DOCS: &str = r#"
## What it finds
Hand-written dedupe that reads the processed marker first and writes it only after the
work: `if (await prisma.processedEvent.findUnique({ where: { id: event.id } })) return`
(or `redis.get`/`exists`/`sismember`, a `SELECT`, a helper such as `isProcessed(id)`),
then the work, then `create`/`INSERT`/`SET` of the marker. The marker can also be the
handler's own data:
- a business row looked up and inserted only when missing (`const [paid] = select(payments)
  ...; if (paid) return; ...insert(payments)`), the insert possibly in a helper called after
  the lookup (reported at the lookup);
- a business row's status (`if (order.status === "PAID") return`, the work, then the status
  set by an update that is not a compare-and-set; reported at the test);
- a provider's resource looked for, then created (`issues.listComments` and a `find`, then
  `issues.createComment`; a helper named for the duplicate it checks).

## Why retries break it
Two concurrent deliveries (a provider retry racing a slow first attempt, two instances)
both read "not processed", both do the work, both write the marker. A crash between the
work and the marker write also repeats the work on the next delivery.

## Not reported
When a real claim comes before the work — an atomic `SET NX`, a unique insert whose
conflict is handled (`P2002`/`23505`/`11000` caught, `ON CONFLICT DO NOTHING` with the row
count read, `skipDuplicates` with the count read): the check is then only an optimisation.
Likewise a lookup-then-insert whose insert's unique violation is caught (also around the
transaction that holds it), and a provider create whose `already_exists` answer is caught.
Nor a Prisma `findUnique` (its `where` names a unique field), or a lookup by every field of a
unique key (`where: { userId, albumId }` under `@@unique([userId, albumId])`), followed by the
insert of that row (also in a helper) with only reads between them: a concurrent duplicate fails on the unique constraint and its
retry finds the row, so nothing runs twice.
Nor a get-or-create of a row that names no event: a lookup with no filter (`settings.findMany()`)
or filtered by constants only (`where: { applicationName: "frontend" }`) finds an installation's
fixed row, made once whatever the delivery.
Code inside a guard `run` or a claim transaction. A handler whose pattern is this one is
not also reported by `unguarded-side-effect` or `incrementing-write-unguarded`.

## Bad
```ts
if (await prisma.processedEvent.findUnique({ where: { id: event.id } })) {
  return res.json({ received: true });
}
await fulfilOrder(session);
await prisma.processedEvent.create({ data: { id: event.id } });
```

## Good
```ts
const result = await guard.run(`stripe:${event.id}`, async (tx) => {
  await fulfilOrder(session);
});
if (result.status === "in-progress") return res.status(409).end();
```

## Fix (unsafe: review)
Removes the racy check (the check statement, or `const seen = await ...` together with the
`if (seen) return ...` that follows) and the marker write when they are in the handler
itself, and wraps the work in the guard `run` (see `retrysafe explain unguarded-side-effect`).
When they live in a helper, the handler's work is still wrapped and the note says to delete
the helper's marker code.
"#;

pub const RULE: Rule = Rule {
    id: "check-then-insert-race",
    summary: "processed check, then work, then marker insert: concurrent duplicates both pass the check",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    super::report_dedupe_patterns(cx, out, PatternKind::CheckThenInsert, RULE.id, &|call| {
        format!(
            "check-then-insert: `{call}` reads the processed marker, the work runs, and only then is the marker \
             written: two concurrent deliveries both pass the check and both do the work (concurrent duplicate), \
             and a crash before the marker repeats it"
        )
    });
}
