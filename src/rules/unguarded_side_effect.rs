//! unguarded-side-effect

use super::{Context, Diagnostic, FixAvailability, HandlerModel, Rule};
use crate::fix::wrap_guard;
use crate::model::ast::{self, text};
use crate::model::reach::{self, Scope};
use crate::model::{Effect, EffectKind, effects};
use std::path::{Path, PathBuf};
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A handler (or a function it calls) that performs a non-idempotent effect — an insert
without a unique natural key, a payment, an email/SMS/chat message, an enqueue, an
outbound POST, or a call to a package function named like one (`send*`, `charge*`,
`notify*`...: reported as a *possible* effect) — with no guard protecting it.
Reported once per handler, at the first unguarded effect; the message counts the rest.

## Why retries break it
Providers deliver at least once. A retry after a success (the 2xx was lost or late), a
concurrent duplicate, or a crash part-way through runs the effect again: a second row, a
second email, a second charge.

## Not reported
- upserts, updates that set absolute values, deletes (replaying them changes nothing);
- Prisma `create`s whose `data` sets a field the schema marks `@id`/`@unique` (or every
  field of an `@@id`/`@@unique`): a duplicate fails instead of duplicating
  (`schema.prisma` is looked up next to the project), Mongo inserts that set `_id`, and
  inserts whose row sets `id` from the delivery (`data: { id: user.id }`; a generated
  `randomUUID()`/`cuid()` id does not count): the primary key rejects a replay;
- `save()` calls on a loaded record (an update); `new Model({...}).save()` and `doc.save()`
  where `doc = new Model({...})` are inserts and are reported;
- effects that carry a provider idempotency key or a `jobId`, including a key handed to a
  wrapper (`sendEmail({ ..., idempotencyKey })`) (their correctness is the business of
  `nondeterministic-key` and `wrong-event-field-as-key`);
- inserts into an audit or event log table (`auditLogs`, `"PipelineEventLog"`): a second
  row records the redelivery and duplicates no business effect;
- Stripe `update`/`del`/`cancel`/`detach` calls (replays are harmless);
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
    preview: true,
    check,
};

struct Found<'t> {
    scope: usize,
    effect: Effect<'t>,
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
    }
}

fn unguarded_effects<'t>(cx: &Context, model: &'t HandlerModel) -> Vec<Found<'t>> {
    let mut found: Vec<Found> = Vec::new();
    let mut seen: Vec<(PathBuf, usize)> = Vec::new();
    for (index, scope) in model.scopes.iter().enumerate() {
        let Some(func) = scope.node() else { continue };
        let file = scope.file();
        for call in ast::calls_in(func, false) {
            let local = reach::resolve_call(cx.project, file, call).is_some();
            let Some(effect) = effects::classify(call, &file.text, local) else { continue };
            if !non_idempotent(&effect, &file.text, &file.path) || wrap_guard::is_protected(scope, call, cx.guard) {
                continue;
            }
            let id = (file.path.clone(), call.start_byte());
            if seen.contains(&id) {
                continue;
            }
            seen.push(id);
            found.push(Found { scope: index, effect });
        }
    }
    found
}

fn diagnostic(cx: &Context, model: &HandlerModel, scope: &Scope, found: &[Found]) -> Diagnostic {
    let first = &found[0];
    let possible = if first.effect.kind == EffectKind::Possible { " (classified by its name)" } else { "" };
    let mut message = format!(
        "`{}` ({}{possible}) runs on every delivery with no guard: a retry after success or a concurrent \
         duplicate repeats it",
        first.effect.label,
        first.effect.kind.noun()
    );
    if found.len() > 1 {
        let mut kinds: Vec<&str> = found[1..].iter().map(|f| f.effect.kind.noun()).collect();
        kinds.dedup();
        message.push_str(&format!(
            "; {} more unguarded effect{} in this handler ({})",
            found.len() - 1,
            if found.len() > 2 { "s" } else { "" },
            kinds.join(", ")
        ));
    }
    Diagnostic::new(RULE.id, scope.file(), first.effect.call, message)
        .in_handler(model, scope)
        .help("run the handler's work once per event: wrap it in the guard `run` keyed by the event id")
        .with_fix(Some(wrap_guard::wrap_fix(cx, model, &[], &[])))
}

/// Whether replaying the effect duplicates something.
fn non_idempotent(effect: &Effect, src: &str, path: &Path) -> bool {
    match effect.kind {
        EffectKind::DbUpsert | EffectKind::DbUpdate | EffectKind::DbDelete | EffectKind::DbIncrement => false,
        EffectKind::DbInsert => {
            let last = ast::callee_name(effect.call, src).unwrap_or_default();
            let call_text = text(effect.call, src);
            // Mongo `_id: ...` (a key of its own, not `user_id:`).
            let sets_mongo_id = crate::regex!(r#"(?:^|[\s{,'"])_id['"]?\s*:"#);
            if last == "save" {
                return saves_new_document(effect.call, src) && !sets_mongo_id.is_match(call_text);
            }
            if sets_mongo_id.is_match(call_text) || sets_primary_id(effect.call, src) {
                return false;
            }
            // A second row in an audit or event log records the redelivery; it duplicates no
            // business effect.
            if crate::model::best_effort::log_table(effect.call, src) {
                return false;
            }
            !prisma_create_sets_unique(effect.call, src, path)
        }
        EffectKind::Payment => effect.key.is_none() && !effect.replays_harmlessly(src),
        _ => effect.key.is_none(),
    }
}

/// `new Order({...}).save()` or `order.save()` where `order` was built with `new Order(...)`
/// (Mongoose, TypeORM active records): a new document, inserted again on every replay. Any
/// other `save()` (a loaded record) is an update; a constructor that sets `_id` makes a replay
/// fail instead of duplicating.
fn saves_new_document(call: Node, src: &str) -> bool {
    let Some(receiver) = call
        .child_by_field_name("function")
        .filter(|f| f.kind() == "member_expression")
        .and_then(|f| f.child_by_field_name("object"))
        .map(ast::unwrap_expr)
    else {
        return false;
    };
    let constructed = |n: Node| {
        let n = ast::unwrap_expr(n);
        n.kind() == "new_expression"
            && n.child_by_field_name("constructor").is_some_and(|c| {
                text(c, src).rsplit('.').next().is_some_and(|l| l.starts_with(|ch: char| ch.is_ascii_uppercase()))
            })
            && !crate::regex!(r#"(?:^|[\s{,'"])_id['"]?\s*:"#).is_match(text(n, src))
    };
    match receiver.kind() {
        "new_expression" => constructed(receiver),
        "identifier" => ast::enclosing_function(call)
            .and_then(|f| ast::find_binding_init(f, text(receiver, src), src, call.start_byte()))
            .is_some_and(constructed),
        _ => false,
    }
}

/// An insert whose row sets `id` from the delivery (`create({ data: { id: user.id } })`,
/// `.insert({ id: evt.data.id })`): the primary key makes a replay fail instead of duplicating.
/// A generated id (`randomUUID()`, `cuid()`...) is new on every delivery and does not count.
fn sets_primary_id(call: Node, src: &str) -> bool {
    let Some(first) = ast::arguments(call).first().map(|a| ast::unwrap_expr(*a)).filter(|a| a.kind() == "object")
    else {
        return false;
    };
    let row = ast::object_property(first, "data", src)
        .map(ast::unwrap_expr)
        .filter(|d| d.kind() == "object")
        .unwrap_or(first);
    let Some(id) = ast::object_property(row, "id", src) else { return false };
    // `const id = randomUUID(); create({ data: { id } })`: judge the initializer.
    let init = (id.kind() == "identifier" || id.kind() == "shorthand_property_identifier")
        .then(|| {
            ast::enclosing_function(call).and_then(|f| ast::find_binding_init(f, text(id, src), src, call.start_byte()))
        })
        .flatten();
    let value = format!("{} {}", text(id, src), init.map_or("", |i| text(i, src))).to_ascii_lowercase();
    !["uuid", "random", "cuid", "nanoid", "ulid", "date.now", "new date", "math."].iter().any(|r| value.contains(r))
        && matches!(
            id.kind(),
            "member_expression" | "subscript_expression" | "identifier" | "shorthand_property_identifier"
        )
}

/// `prisma.model.create({ data: { field } })` where `field` is `@id`/`@unique` in the schema.
fn prisma_create_sets_unique(call: Node, src: &str, path: &Path) -> bool {
    let callee = ast::callee_path(call, src);
    if callee.len() < 3 || !matches!(callee.last().map(String::as_str), Some("create" | "createMany")) {
        return false;
    }
    let model = callee[callee.len() - 2].as_str();
    let Some(data) = ast::arguments(call)
        .first()
        .filter(|a| a.kind() == "object")
        .and_then(|o| ast::object_property(*o, "data", src))
        .filter(|d| d.kind() == "object")
    else {
        return false;
    };
    let fields: Vec<String> = ast::named_children(data)
        .into_iter()
        .filter_map(|p| match p.kind() {
            "pair" => p.child_by_field_name("key").map(|k| text(k, src).trim_matches(['"', '\'']).to_string()),
            "shorthand_property_identifier" => Some(text(p, src).to_string()),
            _ => None,
        })
        .collect();
    let Some(schema) = find_schema(path) else { return false };
    unique_sets(&schema, model).iter().any(|set| !set.is_empty() && set.iter().all(|f| fields.contains(f)))
}

fn find_schema(from: &Path) -> Option<String> {
    for dir in from.ancestors().skip(1).take(8) {
        for candidate in ["prisma/schema.prisma", "schema.prisma"] {
            if let Ok(t) = std::fs::read_to_string(dir.join(candidate)) {
                return Some(t);
            }
        }
        if let Ok(entries) = std::fs::read_dir(dir.join("prisma/schema")) {
            let mut all = String::new();
            for e in entries.flatten() {
                if e.path().extension().is_some_and(|x| x == "prisma")
                    && let Ok(t) = std::fs::read_to_string(e.path())
                {
                    all.push_str(&t);
                    all.push('\n');
                }
            }
            if !all.is_empty() {
                return Some(all);
            }
        }
    }
    None
}

/// The unique field sets of `model` (case-insensitive name): `@id`, `@unique`, `@@id`, `@@unique`.
pub fn unique_sets(schema: &str, model: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let header = crate::regex!(r"(?m)^\s*model\s+(\w+)\s*\{");
    for cap in header.captures_iter(schema) {
        if !cap[1].eq_ignore_ascii_case(model) {
            continue;
        }
        let start = cap.get(0).map_or(0, |m| m.end());
        let body = &schema[start..start + schema[start..].find('}').unwrap_or(schema.len() - start)];
        for line in body.lines() {
            let line = line.split("//").next().unwrap_or("").trim();
            if let Some(rest) = line.strip_prefix("@@unique(").or_else(|| line.strip_prefix("@@id(")) {
                let inner = rest.split(']').next().unwrap_or("").trim_start_matches(['[', ' ']);
                let fields = inner
                    .split(',')
                    .map(|f| f.split('(').next().unwrap_or("").trim().to_string())
                    .filter(|f| !f.is_empty())
                    .collect();
                out.push(fields);
            } else if !line.starts_with('@')
                && (line.contains("@id") || line.contains("@unique"))
                && let Some(name) = line.split_whitespace().next()
            {
                out.push(vec![name.to_string()]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn unique_sets_from_schema() {
        let schema = "model Order {\n  id String @id @default(cuid())\n  sessionId String @unique\n  total Int\n  @@unique([shop, number])\n}\nmodel User { id Int @id }";
        let sets = super::unique_sets(schema, "order");
        assert!(sets.contains(&vec!["id".to_string()]));
        assert!(sets.contains(&vec!["sessionId".to_string()]));
        assert!(sets.contains(&vec!["shop".to_string(), "number".to_string()]));
        assert!(!sets.contains(&vec!["total".to_string()]));
    }
}
