//! incrementing-write-unguarded

use super::{Context, Diagnostic, FixAvailability, HandlerModel, Rule};
use crate::fix::wrap_guard;
use crate::model::ast::{self, text};
use crate::model::reach;
use crate::model::{EffectKind, effects};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A relative write in a handler outside a guard `run` or a claim transaction:
Prisma `increment`/`decrement`/`multiply`/`divide` or a scalar-list `push`, SQL
`SET x = x + ...`, Drizzle `` sql`${t.x} + ${n}` ``, Mongo `$inc`/`$push`/`$mul`,
TypeORM/Knex `increment`, Redis `INCR`/`INCRBY`/`LPUSH`; and read-modify-write: a record
loaded with `await find...()` whose field is changed with `+=`/`-=`, `.push(...)` or a
spread-append and then saved (`record.save()`, `repo.save(record)`), or written back with
`update({ data: { credits: user.credits + n } })` (also a supabase-js row,
`const { data: wallet } = await supabase.from(t).select().eq(...).maybeSingle()`). A Prisma write that sets other fields too is
reported at its relative field (`balance: { increment: n }`); a Prisma model delegate passed in
as a parameter (`wallets: PrismaClient["wallet"]`, then `wallets.update({ where, data })`) is
known by the `{ where, data }` shape of its call.

## Why retries break it
Unlike an absolute write, a relative write is not idempotent: every redelivery adds again.
A retry after success double-credits the balance; two concurrent deliveries of a
read-modify-write also lose updates.

## Not reported
Inside a guard `run` callback or a transaction that also writes the claim, or after a
conditional update that claims the row (`findOneAndUpdate({ status: "pending", processing:
{ $ne: true } }, { $set: { processing: true } })` then `if (!row) return`). Keys merged into a
loaded object (`record.meta = { ...record.meta, paidAt }`), which a replay writes alike. Mongo
`$addToSet` (set semantics). A metrics client's counter (`dogstatsd.increment("sent")`, a
`metrics`/`statsd`/`telemetry`/`analytics` receiver): a replay skews a graph, not a balance. Handlers with hand-written dedupe are reported by the marker
rules (`check-then-insert-race`, `effect-before-record`, `record-before-effect-no-tx`)
instead, so the same code is not reported twice; but when that dedupe is racy (checked
before the work and written after it, or only written after it), a read-modify-write is
still reported: two deliveries that both pass the check also lose one update to the
other, a second defect that a real claim alone would not mend.

## Bad
```ts
await prisma.wallet.update({ where: { userId }, data: { balance: { increment: amount } } });
```

## Good
```ts
const result = await guard.run(`stripe:${event.id}`, async (tx) => {
  await tx.wallet.update({ where: { userId }, data: { balance: { increment: amount } } });
});
```

## Fix (unsafe: review)
Wraps the handler's work in the guard `run` (see `retrysafe explain unguarded-side-effect`
for the details of the wrap and when it is display-only).
"#;

pub const RULE: Rule = Rule {
    id: "incrementing-write-unguarded",
    summary: "relative write (increment, append) outside the claim: every redelivery adds again",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

/// One unguarded relative write: the scope index, the node to report, and what it is.
pub struct Finding<'t> {
    pub scope: usize,
    pub node: Node<'t>,
    pub what: String,
    /// The load a read-modify-write starts from: the wrap must cover it too.
    pub load: Option<Node<'t>>,
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        let findings = findings(cx, model);
        if findings.is_empty() {
            continue;
        }
        // One wrap serves every finding of the handler: planned once, and only if fixes are built.
        let fix = std::cell::OnceCell::new();
        let wrap = || {
            let include: Vec<(usize, usize)> = findings
                .iter()
                .filter(|f| f.scope == 0)
                .flat_map(|f| std::iter::once(f.node).chain(f.load))
                .map(|n| (n.start_byte(), n.end_byte()))
                .collect();
            wrap_guard::wrap_fix(cx, model, &[], &include)
        };
        for f in &findings {
            let scope = &model.scopes[f.scope];
            let message =
                format!("{} outside a guard: a retry after success or a concurrent duplicate applies it twice", f.what);
            out.push(
                Diagnostic::new(RULE.id, scope.file(), f.node, message)
                    .in_handler(model, scope)
                    .help("run the relative write once per event: wrap the handler's work in the guard `run`")
                    .with_fix(cx, || fix.get_or_init(wrap).clone()),
            );
        }
    }
}

/// The unguarded relative writes of a handler. Hand-written dedupe owns them (its rules
/// report the double run), except a read-modify-write behind a racy marker: two deliveries
/// that both pass the check also lose one update to the other, which no marker finding says.
pub fn findings<'t>(cx: &Context, model: &'t HandlerModel) -> Vec<Finding<'t>> {
    let only_read_modify_writes = model.has_hand_written_dedupe(cx.project);
    if only_read_modify_writes && !model.has_racy_dedupe(cx.project) {
        return Vec::new();
    }
    let mut out: Vec<Finding> = Vec::new();
    for (index, scope) in model.scopes.iter().enumerate() {
        let Some(func) = scope.node() else { continue };
        let file = scope.file();
        let src = &file.text;
        let mut push = |node: Node<'t>, what: String, load: Option<Node<'t>>| {
            if wrap_guard::is_protected(scope, node, cx.guard)
                || out
                    .iter()
                    .any(|f| f.node.start_byte() == node.start_byte() && model.scopes[f.scope].file().path == file.path)
            {
                return;
            }
            out.push(Finding { scope: index, node, what, load });
        };
        if !only_read_modify_writes {
            for call in ast::calls_in(func, false) {
                let local = reach::resolve_call(cx.project, file, call).is_some();
                if let Some(effect) = effects::classify(call, src, local)
                    && effect.kind == EffectKind::DbIncrement
                    && !text(call, src).contains("$addToSet")
                {
                    // A Prisma write that sets other fields too is reported at the relative one.
                    let relative = ast::descendants_of_kind(call, "pair").into_iter().find(|p| {
                        p.field("key")
                            .is_some_and(|k| matches!(text(k, src), "increment" | "decrement" | "multiply" | "divide"))
                    });
                    push(relative.unwrap_or(call), format!("relative write `{}`", effect.label), None);
                }
            }
        }
        for (node, what, load) in read_modify_writes(func, src) {
            push(node, what, load);
        }
    }
    out
}

/// `record.field += n` / `record.list.push(x)` / `record.list = [...record.list, x]` on a
/// record loaded with `await find...`, then saved; or an update whose data reads the
/// loaded record's field (`credits: user.credits + n`).
/// `const points = user.loyaltyPoints ?? 0; const next = points + earned;` then
/// `update({ data: { loyaltyPoints: next } })`: a field set to a sum or difference computed,
/// through locals, from the same field of a loaded record.
fn computed_from_loaded_field<'t>(
    update: Node<'t>,
    func: Node<'t>,
    src: &str,
    loaded: &dyn Fn(&str, usize) -> Option<Node<'t>>,
) -> Option<Node<'t>> {
    let at = update.start_byte();
    let sources = |name: &str| -> Vec<Node<'t>> {
        // The value and, one step back, the values of the locals it adds up.
        let Some(init) = ast::find_binding_init(func, name, src, at).map(ast::unwrap_expr) else {
            return Vec::new();
        };
        if init.kind_name() != "binary_expression"
            || !init.field("operator").is_some_and(|o| matches!(text(o, src), "+" | "-"))
        {
            return Vec::new();
        }
        let mut members = ast::descendants_of_kind(init, "member_expression");
        for id in ast::descendants_of_kind(init, "identifier") {
            if let Some(inner) = ast::find_binding_init(func, text(id, src), src, init.start_byte()) {
                members.extend(ast::descendants_of_kind(inner, "member_expression"));
                if inner.kind_name() == "member_expression" {
                    members.push(inner);
                }
            }
        }
        members
    };
    ast::descendants_of_kind(update, "pair")
        .into_iter()
        .chain(ast::descendants_of_kind(update, "shorthand_property_identifier"))
        .find_map(|prop| {
            let (field, value) = if prop.kind_name() == "pair" {
                let key = prop.field("key")?;
                let value = prop.field("value").map(ast::unwrap_expr)?;
                (text(key, src).trim_matches(['"', '\'']), value)
            } else {
                (text(prop, src), prop)
            };
            if !matches!(value.kind_name(), "identifier" | "shorthand_property_identifier") {
                return None;
            }
            sources(text(value, src)).into_iter().find_map(|m| {
                let path = ast::member_path(m, src);
                (path.last().map(String::as_str) == Some(field)).then(|| loaded(path.first()?, at)).flatten()
            })
        })
}

/// `sequence.sentEmailIds.push(email.emailId)`: a list of ids used as a set. A replay adds an
/// id already there, which changes no membership test; a list of amounts or entries differs.
fn records_membership(push: Node, path: &[String], src: &str) -> bool {
    let names_ids = |name: &str| {
        let words = crate::model::best_effort::words(name);
        words.last().is_some_and(|w| matches!(w.as_str(), "ids" | "id"))
    };
    let list = &path[path.len() - 2];
    let args = ast::arguments(push);
    names_ids(list)
        && !args.is_empty()
        && args.iter().all(|a| {
            let a = ast::unwrap_expr(*a);
            matches!(a.kind_name(), "identifier" | "member_expression")
                && names_ids(text(a, src).rsplit('.').next().unwrap_or(""))
        })
}

/// The array a `for...of` loop around `at` takes `name` from: `for (const row of rows)` → `rows`.
fn loop_source(func: Node, name: &str, at: usize, src: &str) -> Option<String> {
    ast::descendants_of_kind(func, "for_in_statement").into_iter().find_map(|lp| {
        let inside = lp.start_byte() < at && at < lp.end_byte();
        let of = lp.field("operator").is_some_and(|o| text(o, src) == "of");
        let left = lp.field("left").filter(|l| l.kind_name() == "identifier")?;
        let right = lp.field("right").map(ast::unwrap_expr).filter(|r| r.kind_name() == "identifier")?;
        (inside && of && text(left, src) == name).then(|| text(right, src).to_string())
    })
}

fn read_modify_writes<'t>(func: Node<'t>, src: &str) -> Vec<(Node<'t>, String, Option<Node<'t>>)> {
    let mut out = Vec::new();
    // `const user = await db.user.findUnique(...)`, or supabase-js's
    // `const { data: profile } = await supabase.from("profiles").select().eq(...).maybeSingle()`.
    let loaded_as = |name: &str, at: usize| {
        ast::find_binding_init(func, name, src, at).or_else(|| ast::find_destructured_init(func, name, src, at)).filter(
            |init| {
                let t = text(*init, src);
                t.starts_with("await")
                    && crate::regex!(r"\.(find\w*|get\w*|load\w*|retrieve|fetch\w*|single|maybeSingle)\s*\(")
                        .is_match(t)
            },
        )
    };
    // `for (const recharge of recharges)` over loaded rows: each element is a loaded record.
    let loaded = |name: &str, at: usize| {
        loaded_as(name, at).or_else(|| loop_source(func, name, at, src).and_then(|rows| loaded_as(&rows, at)))
    };
    let saved_after = |name: &str, at: usize| {
        let rest = &src[at..func.end_byte()];
        // `name.save(` or `.save(name` / `.update(name` ... (no regex built per call).
        let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$');
        let saves_itself = rest.match_indices(name).any(|(i, _)| {
            !word(rest[..i].chars().next_back()) && rest[i + name.len()..].trim_start().starts_with(".save")
        });
        let saved_by_call = crate::regex!(r"\.(save|update|updateOne|put|merge)\s*\(\s*([A-Za-z_$][\w$]*)")
            .captures_iter(rest)
            .any(|c| &c[2] == name);
        saves_itself || saved_by_call
    };
    ast::walk(func, &mut |n| {
        match n.kind_name() {
            "augmented_assignment_expression" => {
                let op = n.field("operator").map(|o| text(o, src)).unwrap_or("");
                if let Some(left) = n.field("left")
                    && left.kind_name() == "member_expression"
                    && matches!(op, "+=" | "-=" | "*=")
                    && let Some(root) = ast::member_path(left, src).first().cloned()
                    && let Some(load) = loaded(&root, n.start_byte())
                    && saved_after(&root, n.end_byte())
                {
                    out.push((n, format!("read-modify-write `{}` on a loaded record", text(n, src)), Some(load)));
                }
            }
            "call_expression" => {
                let path = ast::callee_path_shared(n, src);
                if path.len() >= 3
                    && matches!(path.last().map(String::as_str), Some("push" | "unshift"))
                    && !records_membership(n, &path, src)
                    && let Some(load) = loaded(&path[0], n.start_byte())
                    && saved_after(&path[0], n.end_byte())
                {
                    let what = format!("read-modify-write `{}(...)` on a loaded record", path.join("."));
                    out.push((n, what, Some(load)));
                } else if effects::classify(n, src, true).is_some_and(|e| e.kind == EffectKind::DbUpdate) {
                    // The update's text, and the values of the locals it writes (`data: period`,
                    // `const period = { end: new Date(sub.end.getTime() + term) }`).
                    let mut texts = vec![text(n, src)];
                    for arg in ast::arguments(n) {
                        for id in ast::descendants_of_kind(arg, "identifier")
                            .into_iter()
                            .chain(ast::descendants_of_kind(arg, "shorthand_property_identifier"))
                        {
                            if let Some(init) = ast::find_binding_init(func, text(id, src), src, n.start_byte())
                                .filter(|i| matches!(i.kind_name(), "object" | "ternary_expression"))
                            {
                                texts.push(text(init, src));
                            }
                        }
                    }
                    let re = crate::regex!(
                        r"(\b[A-Za-z_$][\w$]*)\.\w+(?:\.getTime\(\))?\s*[+\-]\s*[\w(]|\.\.\.\s*([A-Za-z_$][\w$]*)\.\w+"
                    );
                    let load = texts.iter().flat_map(|t| re.captures_iter(t)).find_map(|c| {
                        let name = c.get(1).or_else(|| c.get(2)).map_or("", |m| m.as_str());
                        loaded(name, n.start_byte())
                    });
                    if let Some(load) = load.or_else(|| computed_from_loaded_field(n, func, src, &loaded)) {
                        let what = "read-modify-write (an update computed from the loaded record)".to_string();
                        out.push((n, what, Some(load)));
                    }
                }
            }
            "assignment_expression" => {
                if let (Some(left), Some(right)) = (n.field("left"), n.field("right"))
                    && left.kind_name() == "member_expression"
                {
                    let lt = text(left, src);
                    let rt = text(right, src);
                    // `{ ...record.meta, verifiedAt }` merges keys, which a replay writes again
                    // alike; `[...record.items, item]` appends.
                    let merges_keys = ast::unwrap_expr(right).kind_name() == "object";
                    let appends =
                        !merges_keys && rt.contains(&format!("...{lt}")) || rt.starts_with(&format!("{lt} +"));
                    if appends
                        && let Some(root) = ast::member_path(left, src).first().cloned()
                        && let Some(load) = loaded(&root, n.start_byte())
                        && saved_after(&root, n.end_byte())
                    {
                        out.push((n, format!("read-modify-write `{lt} = ...` on a loaded record"), Some(load)));
                    }
                }
            }
            _ => {}
        }
        true
    });
    out
}
