//! processing-time-write

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::{Edit, Fix};
use crate::model::ast::{self, text};
use crate::model::reach::{self, Scope};
use crate::model::{EffectKind, Provider, effects, markers, queries};
use crate::project::FunctionDef;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
An update or upsert outside a guard (and outside a claim transaction) whose value depends on
WHEN the delivery is processed rather than on the event:
- a subscription/access period, or when the account went live (`activatedAt`, `onboardingCompletedAt`; not when a run of the work finished), computed from the clock: `expiresAt: new Date(Date.now() + ...)`,
  `periodStart: new Date()`, `addMonths(new Date(), 1)`, `dayjs().add(1, "month")`,
  `moment()`, `DateTime.now()`, `knex.fn.now()`, SQL `now()`; only for period-like columns
  (period, expires, renews, valid/until, trial, billing, access, paid through, start/end, and
  when the customer paid or purchased: `paidAt`, `datePaid`) and never for bookkeeping
  (`updatedAt`, `lastSeenAt`) or operational leases (`lockedUntil`, `retryAt`); also such a
  value handed to a project helper that writes that field (`saveBilling({ paidAt: new Date() })`,
  or `paidAt = new Date()` then `saveBilling({ paidAt })`), reported where the clock is read;
- a usage counter reset to `0` (`usageCount: 0`, `requestsUsed: 0`);
- credits/tokens, or what is left of a quota, set from the plan or to a fixed amount
  (`credits: plan.credits`, `tokens: PLAN_LIMITS[tier]`, `aiCredits: 500`,
  `quotaRemaining: plan.quota`); a balance set to a value is not reported, nor is a quota
  itself (`inviteQuota: 1`, `seatQuota: plan.seats`): it is a cap, and setting it again sets
  the same cap.

Values taken from the event (`new Date(event.created * 1000)`,
`new Date(sub.current_period_end * 1000)`) and writes inside a guard `run` are not reported;
neither is a write that follows `if (existing) return` on a record loaded by the same function
and inserted after the write (`select` the payment row by the checkout id, reset credits, insert
the payment row): a sequential replay stops at that check (the concurrent race is reported by
`unguarded-side-effect` on the insert). Nor is a handler that checks or claims its
processed-event marker (or writes it before the work): a replay of the same event stops
there, and the windows such a marker leaves open are reported by `check-then-insert-race` and
`record-before-effect-no-tx`. Nor is a write that changes what lets it run, so a replay no
longer reaches it: its branch tests the field it sets (`if (invoice.status !== "PAID")` then
`status: "PAID"`) or clears (`if (sub.scheduleId)` then `scheduleId: null`), or its own filter
requires a value it overwrites (`SET state = 'active' ... WHERE state = 'pending'`,
`where: { state: "pending" }, data: { state: "active" }`). A write that sets several such
fields is reported once.
Relative writes (`increment`) are `incrementing-write-unguarded`'s concern.

## Why retries break it
The provider redelivers days later (a retry after a timeout, a manual resend, a replay from
the dashboard): the write runs again and moves the period forward from the retry's time,
extends access that was not paid for, resets usage mid-period or re-grants credits the
customer already spent.

## Bad
```ts
await prisma.subscription.update({
  where: { stripeId: sub.id },
  data: { currentPeriodEnd: addMonths(new Date(), 1), creditsUsed: 0 },
});
```

## Good
```ts
await prisma.subscription.update({
  where: { stripeId: sub.id },
  data: { currentPeriodEnd: new Date(sub.current_period_end * 1000) },
});
```

## Fix (unsafe)
For Stripe handlers with a known event variable, the clock in the value is replaced by the
event's own creation time: `new Date()` → `new Date(event.created * 1000)`, `Date.now()` →
`event.created * 1000`, `dayjs()` → `dayjs.unix(event.created)`, `moment()` →
`moment.unix(event.created)`. Review: the object's own period fields
(`current_period_end`) are usually the better source. Other providers, counter resets and
plan grants get a display-only fix: take the value from the event, or run the write once per
event inside the guard `run`.
"#;

pub const RULE: Rule = Rule {
    id: "processing-time-write",
    summary: "write derived from processing time outside a guard: a replay moves periods, resets usage or re-grants credits",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Finding {
    Clock,
    CounterReset,
    PlanGrant,
}

/// `currentPeriodEnd` / `current_period_end` → ["current", "period", "end"].
fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in name.chars() {
        if c == '_' || c == '-' || c == '.' || c == '$' {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        } else if c.is_ascii_uppercase()
            && !cur.is_empty()
            && !cur.chars().last().is_some_and(|l| l.is_ascii_uppercase())
        {
            out.push(std::mem::take(&mut cur));
            cur.push(c.to_ascii_lowercase());
        } else {
            cur.push(c.to_ascii_lowercase());
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn period_name(name: &str) -> bool {
    let w = words(name);
    let has = |x: &[&str]| w.iter().any(|v| x.contains(&v.as_str()));
    !has(&[
        "lock",
        "locked",
        "lease",
        "retry",
        "attempt",
        "visible",
        "ttl",
        "updated",
        "created",
        "seen",
        "processed",
        "started",
        "ended",
        "sent",
        "synced",
        "last",
    ]) && has(&[
        "period",
        "expires",
        "expiry",
        "expiration",
        "expire",
        "renews",
        "renewal",
        "renew",
        "valid",
        "until",
        "trial",
        "billing",
        "access",
        "through",
        "start",
        "starts",
        "end",
        "ends",
        "cycle",
        "grace",
        // when the customer paid or bought: the event carries it; the clock gives the delivery's time
        "paid",
        "purchased",
        // when the account or plan went live (`activatedAt`, `onboardedAt`): a replay moves it
        // to the retry's time
        "activated",
        "onboarded",
    ]) || has(&["onboarding"]) && has(&["completed", "finished", "done"])
}

fn counter_name(name: &str) -> bool {
    let w = words(name);
    let has = |x: &[&str]| w.iter().any(|v| x.contains(&v.as_str()));
    has(&["usage", "used", "consumed"])
        || (has(&["count"])
            && has(&[
                "request",
                "requests",
                "call",
                "calls",
                "api",
                "generation",
                "generations",
                "message",
                "messages",
                "upload",
                "uploads",
                "export",
                "exports",
            ]))
}

/// A spendable amount: credits or tokens, or a quota or allowance counted down (`quotaRemaining`).
/// A quota alone (`inviteQuota`, `seatQuota`) is a cap: setting it again sets the same cap.
fn credit_name(name: &str) -> bool {
    let w = words(name);
    let has = |list: &[&str]| w.iter().any(|v| list.contains(&v.as_str()));
    !has(&["card"])
        && (has(&["credit", "credits", "token", "tokens", "balance"])
            || (has(&["quota", "allowance"]) && has(&["remaining", "left", "available", "unused"])))
}

/// Whether an expression reads the clock.
fn reads_clock(value: Node, src: &str) -> bool {
    let found = queries::PROCESSING_TIME_WRITE.matches(value, src);
    let calls = found.iter().filter_map(|m| queries::call_of_callee_name(m.get("clock_name")?));
    let strings = found.iter().filter_map(|m| m.get("clock"));
    calls.filter(|c| ast::contains(value, *c)).chain(strings).any(|n| match n.kind_name() {
        "new_expression" => n.field("arguments").map(|a| a.named_child_count()).unwrap_or(0) == 0,
        "call_expression" => {
            let path = ast::callee_path_shared(n, src);
            let p: Vec<&str> = path.iter().map(String::as_str).collect();
            match p.as_slice() {
                ["Date", "now"] | ["DateTime", "now"] | ["DateTime", "local"] => true,
                ["dayjs"] | ["moment"] => ast::arguments(n).is_empty(),
                // knex.fn.now(), sequelize.fn('NOW')
                [.., "fn", "now"] => true,
                [.., "fn"] => {
                    ast::arguments(n).first().is_some_and(|a| text(*a, src).to_ascii_lowercase().contains("now"))
                }
                _ => false,
            }
        }
        // strings and templates: the query matched `now()` / `current_timestamp`
        _ => true,
    })
}

/// A grant taken from the plan (`plan.credits`, `PLAN_LIMITS[tier]`) or a fixed positive amount.
fn plan_value(value: Node, src: &str) -> bool {
    let v = ast::unwrap_expr(value);
    match v.kind_name() {
        "member_expression" | "subscript_expression" => {
            let t = text(v, src).to_ascii_lowercase();
            t.contains("plan") || t.contains("tier") || t.contains("limit") || t.contains("product")
        }
        "number" => text(v, src).replace('_', "").parse::<f64>().is_ok_and(|n| n > 0.0),
        _ => false,
    }
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        // A replay of the same event never reaches the write when the handler's own marker
        // stops it first; the windows that marker leaves open are the marker rules' findings.
        if markers::stops_sequential_replays(cx.project, &model.scopes) {
            continue;
        }
        for scope in &model.scopes {
            if let Some(func) = scope.node() {
                check_scope(cx, model, scope, func, out);
            }
        }
    }
}

fn check_scope(cx: &Context, model: &super::HandlerModel, scope: &Scope, func: Node, out: &mut Vec<Diagnostic>) {
    {
        let file = scope.file();
        let src = &file.text;
        for call in ast::calls_in(func, false) {
            let target = reach::resolve_call(cx.project, file, call);
            let local = target.is_some();
            if let Some(def) = &target
                && !scope.guard_at(call).is_some_and(|g| g.dedupes())
            {
                let found = clock_arguments_written_by(call, func, def, src);
                if !found.is_empty() {
                    out.push(diagnostic(cx, model, scope, &found, &def.name));
                }
            }
            let label = match effects::classify(call, src, local) {
                Some(e) if matches!(e.kind, EffectKind::DbUpdate | EffectKind::DbUpsert) => e.label,
                Some(_) => continue,
                // Knex chains (`knex('t').where(...).update({...})`) the classifier leaves out.
                None if !local && is_query_builder_update(call, src) => ast::callee_path(call, src).join("."),
                None => continue,
            };
            if scope.guard_at(call).is_some_and(|g| g.dedupes())
                || existence_check_before(call, func, src)
                || clears_its_own_condition(call, func, src)
            {
                continue;
            }
            // One finding per write: its fields share one cause and one remedy.
            let found = findings(call, func, src);
            if !found.is_empty() {
                out.push(diagnostic(cx, model, scope, &found, &label));
            }
        }
    }
}

/// The write changes what lets it run, so a replay no longer does: its branch requires a field
/// the write clears or sets to the tested value (`if (sub.stripeSubscriptionId)` then
/// `stripeSubscriptionId: null`; `if (invoice.status !== "PAID")` then `status: "PAID"`), an
/// earlier guard clause leaves on the value the write sets (`if (payout.status === "completed")
/// return;` then `status: "completed"`; `if (order.paidAt) return;` then `paidAt: new Date()`),
/// or its own filter requires a value it overwrites (`SET status = 'paid' ... WHERE status =
/// 'pending'`, `where: { status: "pending" }, data: { status: "paid" }`).
fn clears_its_own_condition(call: Node, func: Node, src: &str) -> bool {
    let call_text = text(call, src);
    let written = |field: &str| {
        crate::regex!(r#"([A-Za-z_$][\w$]*)\s*:\s*(null|undefined|false|"[^"]*"|'[^']*'|[^,{}\[\s][^,{}]*)"#)
            .captures_iter(call_text)
            .filter(|c| &c[1] == field)
            .map(|c| c[2].trim().trim_matches(['"', '\'']).to_string())
            .collect::<Vec<_>>()
    };
    let sets = |field: &str, values: &[&str]| written(field).iter().any(|v| values.contains(&v.as_str()));
    let sets_present =
        |field: &str| written(field).iter().any(|v| !matches!(v.as_str(), "null" | "undefined" | "false"));
    // `leaves_when_true`: the condition of a guard clause (a replay leaves when it holds after
    // the write); otherwise the condition of the branch holding the write (a replay no longer
    // enters when it fails after the write).
    let falsified = |cond: Node, leaves_when_true: bool| {
        let (joiner, differs) = if leaves_when_true { ("||", ["===", "=="]) } else { ("&&", ["!==", "!="]) };
        let mut stack = vec![cond];
        while let Some(n) = stack.pop() {
            let n = ast::unwrap_expr(n);
            let op = n.field("operator").map_or("", |o| text(o, src));
            match n.kind_name() {
                "binary_expression" if op == joiner => {
                    stack.extend(n.field("left"));
                    stack.extend(n.field("right"));
                }
                "binary_expression" if differs.contains(&op) => {
                    let (Some(l), Some(r)) = (n.field("left"), n.field("right")) else {
                        continue;
                    };
                    let (member, literal) = if l.kind_name() == "member_expression" { (l, r) } else { (r, l) };
                    if let (Some(field), Some(value)) = (member.field("property"), ast::string_value(literal, src))
                        && sets(text(field, src), &[value.as_str()])
                    {
                        return true;
                    }
                }
                "member_expression" => {
                    if let Some(field) = n.field("property").map(|f| text(f, src))
                        && (if leaves_when_true {
                            sets_present(field)
                        } else {
                            sets(field, &["null", "undefined", "false"])
                        })
                    {
                        return true;
                    }
                }
                _ => {}
            }
        }
        false
    };
    let branch_falsified =
        ast::ancestors(call).take_while(|a| *a != func).filter(|a| a.kind_name() == "if_statement").any(|branch| {
            branch.field("consequence").is_some_and(|c| ast::contains(c, call))
                && branch.field("condition").is_some_and(|c| falsified(c, false))
        });
    let guard_falsified = || {
        ast::guard_clauses_before(call, func)
            .into_iter()
            .any(|clause| clause.field("condition").is_some_and(|c| falsified(c, true)))
    };
    branch_falsified || guard_falsified() || overwrites_its_filter(call, src)
}

/// `SET status = 'paid' ... WHERE ... status = 'pending'`, or Prisma's `where: { status: "pending" }`
/// with `data: { status: "paid" }`: a compare-and-set that matches no row the second time.
fn overwrites_its_filter(call: Node, src: &str) -> bool {
    let literal_columns = |part: &str, re: &regex::Regex| -> Vec<(String, String)> {
        re.captures_iter(part).map(|c| (c[1].to_ascii_lowercase(), c[2].to_string())).collect()
    };
    let differs = |set: &[(String, String)], filter: &[(String, String)]| {
        set.iter().any(|(col, v)| filter.iter().any(|(fc, fv)| fc == col && fv != v))
    };
    if let Some(sql) = effects::sql_text(call, &ast::arguments(call), src)
        && let Some(c) = crate::regex!(r"(?is)\bset\b(.*?)\bwhere\b(.*)").captures(&sql)
    {
        let re = crate::regex!(r"(\w+)\s*=\s*'([^']*)'");
        return differs(&literal_columns(&c[1], re), &literal_columns(&c[2], re));
    }
    let Some(options) = ast::arguments(call).first().copied().filter(|a| a.kind_name() == "object") else {
        return false;
    };
    let part = |name: &str| {
        ast::named_children(options)
            .into_iter()
            .find(|p| p.field("key").is_some_and(|k| text(k, src) == name))
            .and_then(|p| p.field("value"))
            .map_or("", |v| text(v, src))
    };
    let re = crate::regex!(r#"(\w+)\s*:\s*["']([^"']*)["']"#);
    differs(&literal_columns(part("data"), re), &literal_columns(part("where"), re))
}

/// `saveBilling({ userId, paidAt: new Date() })`: a clock value handed to a project helper
/// that writes that field (its update names it), reported at the argument.
fn clock_arguments_written_by<'t>(
    call: Node<'t>,
    func: Node<'t>,
    def: &FunctionDef,
    src: &str,
) -> Vec<(Node<'t>, String, Node<'t>, Finding)> {
    // The arguments first (cheap, and usually empty); the helper is read only for candidates.
    let mut candidates = Vec::new();
    for arg in ast::arguments(call).into_iter().filter(|a| a.kind_name() == "object") {
        let pairs = ast::descendants_of_kind(arg, "pair");
        let shorthands = ast::descendants_of_kind(arg, "shorthand_property_identifier");
        for pair in pairs.into_iter().chain(shorthands) {
            let shorthand = pair.kind_name() != "pair";
            let key = if shorthand {
                text(pair, src).to_string()
            } else {
                let Some(key) = pair.field("key") else { continue };
                ast::string_value(key, src).unwrap_or_else(|| text(key, src).to_string())
            };
            if !period_name(&key) {
                continue;
            }
            // `{ paidAt }` after `paidAt = new Date()`
            let value =
                if shorthand { last_assigned_before(func, &key, call.start_byte(), src) } else { pair.field("value") };
            let Some(value) = value.filter(|v| reads_clock(*v, src)) else { continue };
            // A shorthand is reported where the clock was read (`paidAt = new Date()`).
            let at = if shorthand { value } else { pair };
            candidates.push((at, key, value, Finding::Clock));
        }
    }
    if candidates.is_empty() {
        return candidates;
    }
    let Some(helper) = def.node() else { return Vec::new() };
    let helper_src = def.file.text.as_str();
    let writes: Vec<&str> = ast::calls_in(helper, false)
        .into_iter()
        .filter(|c| {
            effects::classify(*c, helper_src, false).is_some_and(|e| {
                matches!(e.kind, EffectKind::DbUpdate | EffectKind::DbUpsert | EffectKind::DbIncrement)
            })
        })
        .map(|c| text(c, helper_src))
        .collect();
    let identifier = crate::regex!(r"[A-Za-z_$][\w$]*");
    candidates
        .retain(|(_, key, _, _)| writes.iter().any(|w| identifier.find_iter(w).any(|m| m.as_str() == key.as_str())));
    candidates
}

/// The value `name` last received before `before`: its latest assignment, else its initializer.
fn last_assigned_before<'t>(func: Node<'t>, name: &str, before: usize, src: &str) -> Option<Node<'t>> {
    ast::descendants_of_kind(func, "assignment_expression")
        .into_iter()
        .rfind(|a| a.end_byte() <= before && a.field("left").is_some_and(|l| text(l, src) == name))
        .and_then(|a| a.field("right"))
        .or_else(|| ast::find_binding_init(func, name, src, before))
}

/// `const existing = await db...select/find(...); if (existing) return;` before the write and an
/// insert after it in the same function: the record the insert writes stops a sequential
/// replay (the concurrent race is `unguarded-side-effect`'s), so the write does not re-run.
fn existence_check_before(call: Node, func: Node, src: &str) -> bool {
    let inserts_after = ast::calls_in(func, false).into_iter().any(|c| {
        c.start_byte() > call.end_byte()
            && effects::classify(c, src, false).is_some_and(|e| e.kind == EffectKind::DbInsert)
    });
    inserts_after
        && ast::descendants_of_kind(func, "if_statement").into_iter().any(|i| {
            if i.end_byte() > call.start_byte() || ast::enclosing_function(i) != Some(func) {
                return false;
            }
            let leaves = i.field("consequence").is_some_and(|c| {
                let t = text(c, src).trim_start_matches('{').trim_start();
                t.starts_with("return") || t.starts_with("continue")
            });
            let Some(cond) = i.field("condition").map(ast::unwrap_expr) else { return false };
            let name = match cond.kind_name() {
                "identifier" => text(cond, src),
                "member_expression" => ast::member_path(cond, src).first().map_or("", |_| {
                    let t = text(cond, src);
                    &t[..t.find(['.', '?']).unwrap_or(t.len())]
                }),
                _ => return false,
            };
            leaves
                && !name.is_empty()
                && ast::descendants_of_kind(func, "variable_declarator").into_iter().any(|d| {
                    let mut names = Vec::new();
                    if let Some(n) = d.field("name") {
                        ast::bound_names(n, src, &mut names);
                    }
                    let t = d.field("value").map_or("", |v| text(v, src));
                    d.end_byte() <= i.start_byte()
                        && names.iter().any(|n| n == name)
                        && t.starts_with("await")
                        && crate::regex!(r"\.(select|find\w*|get\w*|maybeSingle|single|exists|count)\s*\(").is_match(t)
                })
        })
}

/// `knex('t').where(...).update({...})`: an update at the end of a builder chain.
fn is_query_builder_update(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    path.len() >= 2
        && path.first().is_some_and(|p| p.ends_with("()"))
        && path.last().is_some_and(|l| l == "update")
        && ast::arguments(call).first().is_some_and(|a| a.kind_name() == "object")
}

/// (pair, column name, value expression, what) for every processing-time value a write sets.
fn findings<'t>(call: Node<'t>, func: Node<'t>, src: &str) -> Vec<(Node<'t>, String, Node<'t>, Finding)> {
    let mut out = Vec::new();
    let last = ast::callee_name(call, src).unwrap_or_default();
    let is_upsert = last == "upsert";
    // Mongo's first argument is the filter.
    let filter = matches!(last.as_str(), "updateOne" | "updateMany" | "findOneAndUpdate" | "findByIdAndUpdate")
        .then(|| ast::arguments(call).first().copied())
        .flatten();
    // The whole chain (`db.update(t).set({...}).where(...)`), minus filters.
    let pruned = |n: Node| {
        if ast::is_function(n) || Some(n) == filter {
            return true;
        }
        if n.kind_name() == "arguments"
            && ast::parent(n)
                .and_then(|c| ast::callee_name(c, src))
                .is_some_and(|c| matches!(c.as_str(), "where" | "and" | "or" | "eq" | "lt" | "gt" | "lte" | "gte"))
        {
            return true;
        }
        let key = || n.field("key").map_or("", |k| text(k, src));
        // A Prisma upsert's `create` branch runs only for a new row.
        n.kind_name() == "pair" && (matches!(key(), "where" | "filter") || (is_upsert && key() == "create"))
    };
    let resolved = |value: Node<'t>| {
        let value = ast::unwrap_expr(value);
        if value.kind_name() == "identifier"
            && let Some(init) = ast::find_binding_init(func, text(value, src), src, value.start_byte())
        {
            return ast::unwrap_expr(init);
        }
        value
    };
    // Below `call`, a property is written unless it or a node above it is pruned, or a
    // property above it sets something other than an object.
    let written = |n: Node<'t>| {
        if pruned(n) {
            return false;
        }
        let mut at = n;
        while let Some(up) = ast::parent(at) {
            if up == call {
                return true;
            }
            if pruned(up)
                || (up.kind_name() == "pair" && up.field("value").is_some_and(|v| resolved(v).kind_name() != "object"))
            {
                return false;
            }
            at = up;
        }
        false
    };
    let mut properties: Vec<Node<'t>> =
        queries::PROCESSING_TIME_WRITE.matches(call, src).iter().filter_map(|m| m.get("property")).collect();
    queries::tree_order(&mut properties);
    for n in properties.into_iter().filter(|n| written(*n)) {
        let (key, value) = match n.kind_name() {
            "pair" => match (n.field("key"), n.field("value")) {
                (Some(k), Some(v)) => (ast::string_value(k, src).unwrap_or_else(|| text(k, src).to_string()), v),
                _ => continue,
            },
            _ => {
                let name = text(n, src).to_string();
                match ast::find_binding_init(func, &name, src, n.start_byte()) {
                    Some(init) => (name, init),
                    None => continue,
                }
            }
        };
        let value = resolved(value);
        if period_name(&key) && reads_clock(value, src) {
            out.push((n, key, value, Finding::Clock));
        } else if counter_name(&key) && text(value, src) == "0" {
            out.push((n, key, value, Finding::CounterReset));
        } else if credit_name(&key) && !words(&key).iter().any(|w| w == "balance") && plan_value(value, src) {
            out.push((n, key, value, Finding::PlanGrant));
        }
    }
    // SQL: `SET period_end = now() + interval '1 month'`
    if let Some(sql) = effects::sql_text(call, &ast::arguments(call), src) {
        let re = crate::regex!(r"(?i)\b(\w+)\s*=\s*(now\(\)|current_timestamp)");
        if let Some(c) = re.captures(&sql)
            && period_name(&c[1])
            && let Some(first) = ast::arguments(call).first().copied().or(call.field("arguments"))
        {
            out.push((first, c[1].to_string(), first, Finding::Clock));
        }
    }
    out
}

fn diagnostic(
    cx: &Context,
    model: &super::HandlerModel,
    scope: &Scope,
    found: &[(Node, String, Node, Finding)],
    label: &str,
) -> Diagnostic {
    let (pair, key, value, finding) = (found[0].0, found[0].1.as_str(), found[0].2, found[0].3);
    let others: Vec<&str> = found[1..].iter().map(|f| f.1.as_str()).collect();
    let file = scope.file();
    let src = &file.text;
    let mut message = match finding {
        Finding::Clock => format!(
            "`{key}` is computed from the time the delivery is processed (`{label}` outside a guard): a redelivery or replay moves it forward again"
        ),
        Finding::CounterReset => format!(
            "`{key}` is reset to 0 on every delivery (`{label}` outside a guard): a redelivery or an out-of-order replay resets usage mid-period"
        ),
        Finding::PlanGrant => format!(
            "`{key}` is re-granted from the plan on every delivery (`{label}` outside a guard): a redelivery restores what the customer already spent"
        ),
    };
    if !others.is_empty() {
        let names: Vec<String> = others.iter().map(|o| format!("`{o}`")).collect();
        message.push_str(&format!("; the same write also sets {}", names.join(", ")));
    }
    let fix = || match (finding, model.handler.provider, scope.event_key.as_ref()) {
        (Finding::Clock, Some(Provider::Stripe), Some(k)) if k.provider == Provider::Stripe => {
            let var = k.template.trim_start_matches("${").split(['.', '}']).next().unwrap_or("").to_string();
            clock_edits(value, &var, src)
                .map(|edits| {
                    Fix::unsafe_(format!("use the event's time (`{var}.created`) instead of the clock"), edits).with_note(
                        "Stripe's `created` is when the event happened; the object's own period fields (`current_period_end`) are often the better source",
                    )
                })
                .unwrap_or_else(|| manual(finding))
        }
        _ => manual(finding),
    };
    Diagnostic::new(RULE.id, file, pair, message)
        .in_handler(model, scope)
        .help("derive the value from the event (its timestamps, the object's period fields), or run the write once per event inside the guard `run`")
        .with_fix(cx, fix)
}

fn manual(finding: Finding) -> Fix {
    let note = match finding {
        Finding::Clock => {
            "take the time from the event (e.g. the object's `current_period_end`) instead of the clock, or run the write once per event inside the guard `run`"
        }
        _ => {
            "run the reset/grant once per event inside the guard `run`, or set it from the event's period so a replay writes the same value"
        }
    };
    Fix::display_only("make the value independent of when the delivery is processed", note)
}

fn clock_edits(value: Node, var: &str, src: &str) -> Option<Vec<Edit>> {
    if var.is_empty() {
        return None;
    }
    let mut edits = Vec::new();
    let mut unsupported = false;
    ast::walk(value, &mut |n| {
        match n.kind_name() {
            "new_expression" => {
                let ctor = n.field("constructor").map(|c| text(c, src)).unwrap_or("");
                let args = n.field("arguments").map(|a| a.named_child_count()).unwrap_or(0);
                if ctor == "Date" && args == 0 {
                    edits.push(Edit::replace(n.start_byte(), n.end_byte(), format!("new Date({var}.created * 1000)")));
                    return false;
                }
            }
            "call_expression" => {
                let path = ast::callee_path_shared(n, src);
                let p: Vec<&str> = path.iter().map(String::as_str).collect();
                let no_args = ast::arguments(n).is_empty();
                match p.as_slice() {
                    ["Date", "now"] => {
                        edits.push(Edit::replace(n.start_byte(), n.end_byte(), format!("{var}.created * 1000")));
                        return false;
                    }
                    ["dayjs"] | ["moment"] if no_args => {
                        edits.push(Edit::replace(
                            n.start_byte(),
                            n.end_byte(),
                            format!("{}.unix({var}.created)", p[0]),
                        ));
                        return false;
                    }
                    ["DateTime", "now"] | ["DateTime", "local"] => unsupported = true,
                    _ => {}
                }
            }
            "template_string" if text(n, src).to_ascii_lowercase().contains("now()") => unsupported = true,
            "string" if text(n, src).to_ascii_lowercase().contains("now()") => unsupported = true,
            _ => {}
        }
        true
    });
    (!edits.is_empty() && !unsupported).then_some(edits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_names() {
        assert_eq!(words("currentPeriodEnd"), ["current", "period", "end"]);
        assert_eq!(words("current_period_end"), ["current", "period", "end"]);
        assert!(period_name("currentPeriodEnd") && period_name("accessUntil") && period_name("trialEndsAt"));
        assert!(period_name("expiresAt") && period_name("period_start"));
        assert!(!period_name("startedAt") && !period_name("sendAt") && !period_name("updatedAt"));
        assert!(!period_name("lockedUntil") && !period_name("lastSeenAt"));
        assert!(counter_name("requestsUsed") && counter_name("usageCount") && counter_name("apiCallCount"));
        assert!(!counter_name("failedPaymentCount") && !counter_name("retryCount"));
        assert!(credit_name("aiCredits") && !credit_name("creditCardLast4"));
        assert!(credit_name("quota_remaining") && credit_name("allowanceLeft"));
        assert!(!credit_name("inviteQuota") && !credit_name("monthlyAllowance"));
    }
}
