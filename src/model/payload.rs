//! Whether the request an effect sends is the same on every attempt.
//!
//! A key derived from the event makes a redelivery harmless only when the redelivery sends
//! the same request under it. A payload that reads a value made per attempt (a column the
//! database generated for a row this attempt inserted, the clock, a random id) is another
//! request after a crash: Stripe answers a reused key with other parameters with
//! `idempotency_error` and Resend with 409 `invalid_idempotent_request`, on every later
//! redelivery, and deduplicating queues (SQS FIFO, Inngest) drop it for the first attempt's
//! payload, which may name a row that was rolled back.

use super::ast::{self, text};
use super::dedupe_keys;
use super::effects::{self, Effect, EffectKind, Sdk};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

/// A value in an effect's payload that is new on every attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PerAttempt {
    /// The expression the payload reads, as written (`order.id`, `subject`).
    pub shown: String,
    /// Why it differs between attempts, as a relative clause ("which the database generates …").
    pub why: String,
}

impl PerAttempt {
    /// "`order.id`, which the database generates …".
    pub fn sentence(&self) -> String {
        format!("`{}`, {}", self.shown, self.why)
    }

    /// Why a key derived from the event is not offered for such a payload, and what to do. A
    /// key there turns an occasional duplicate into a delivery that never completes.
    pub fn key_note(&self) -> String {
        format!(
            "no key is added: the payload reads {}, so a redelivery after a crash sends other parameters under \
             the same key, which Stripe (`idempotency_error`) and Resend (409 `invalid_idempotent_request`) reject \
             on every retry and deduplicating queues drop for the first attempt's payload; make the payload \
             retry-stable (derive the value from the event, or read it from a row keyed by the event), then key \
             the call on the event",
            self.sentence()
        )
    }
}

/// Locals holding locals: deep enough for `const ref = order.id; const subject = `#${ref}``,
/// bounded so a cycle of reassignments cannot loop.
const MAX_DEPTH: usize = 4;

/// Column names an insert leaves to the database when what it writes cannot be read.
const GENERATED: &[&str] =
    &["id", "_id", "uuid", "createdAt", "created_at", "updatedAt", "updated_at", "insertedAt", "inserted_at"];

/// The first value of `effect`'s payload (its arguments other than the request options that
/// carry the key) that differs between attempts, if any.
pub fn per_attempt_value(effect: &Effect, src: &str) -> Option<PerAttempt> {
    // The functions around the call, innermost first: a call retried in a closure
    // (`pRetry(() => send(...))`) reads the handler's locals. The module's own declarations
    // are not searched: the last one before the call may belong to another handler.
    let mut scopes: Vec<Node> = ast::ancestors(effect.call).filter(|a| ast::is_function(*a)).collect();
    if scopes.is_empty() {
        scopes.extend(ast::root_above(effect.call));
    }
    let scopes = Scopes(scopes);
    payload_arguments(effect, src).into_iter().find_map(|arg| find_in(arg, effect.key, &scopes, src, 0))
}

/// Where bindings are looked up, innermost first.
struct Scopes<'t>(Vec<Node<'t>>);

impl<'t> Scopes<'t> {
    fn binding(&self, name: &str, src: &str, before: usize) -> Option<(Node<'t>, Vec<String>)> {
        for scope in &self.0 {
            let found = ast::latest_binding(*scope, name, src, before)
                // `const [row] = await db.insert(t).values(v).returning()`: the first row.
                .or_else(|| Some((ast::find_destructured_init(*scope, name, src, before)?, Vec::new())));
            if found.is_some() {
                return found;
            }
            // A parameter of this function hides the outer bindings of its name.
            if ast::parameter_names(*scope, src).iter().any(|p| p == name) {
                return None;
            }
        }
        None
    }
}

fn payload_arguments<'t>(effect: &Effect<'t>, src: &str) -> Vec<Node<'t>> {
    let args = ast::arguments(effect.call);
    let options = match effect.sdk {
        Sdk::Stripe => args.last().copied().filter(|a| args.len() > 1 && effects::is_stripe_options(*a, src)),
        // `queue.add(name, data, opts)`: the job options are not the job.
        Sdk::Bullmq => args.get(2).copied(),
        _ => effect.options_index(src).and_then(|i| args.get(i).copied()),
    };
    args.into_iter().filter(|a| Some(*a) != options).collect()
}

fn find_in<'t>(
    expr: Node<'t>,
    skip: Option<Node<'t>>,
    scopes: &Scopes<'t>,
    src: &str,
    depth: usize,
) -> Option<PerAttempt> {
    let mut found = None;
    ast::walk(expr, &mut |n| {
        // A callback in the payload is not a value of it.
        if found.is_some() || Some(n) == skip || ast::is_function(n) {
            return false;
        }
        if dedupe_keys::is_nondeterministic(n, src) {
            found = Some(PerAttempt { shown: text(n, src).to_string(), why: "which is new on every call".into() });
            return false;
        }
        match n.kind_name() {
            "member_expression" | "subscript_expression" => {
                let root = chain_root(n);
                if root.kind_name() != "identifier" {
                    return true;
                }
                let path = ast::member_path(n, src);
                found =
                    binding(scopes, text(root, src), &path[1.min(path.len())..], n, src, depth).map(|(why, field)| {
                        // Shown up to the field that decided: `order.id`, not `order.id.toString`.
                        let shown = field.and_then(|f| chain_prefix(n, &f, src)).unwrap_or(root);
                        PerAttempt { shown: text(shown, src).to_string(), why }
                    });
                false
            }
            "identifier" | "shorthand_property_identifier" => {
                found = binding(scopes, text(n, src), &[], n, src, depth)
                    .map(|(why, _)| PerAttempt { shown: text(n, src).to_string(), why });
                false
            }
            _ => true,
        }
    });
    found
}

/// The object a member chain starts from: `order` in `order.items[0].name`.
fn chain_root(mut n: Node) -> Node {
    while matches!(n.kind_name(), "member_expression" | "subscript_expression" | "non_null_expression") {
        match n.field("object").or_else(|| n.named_child(0)) {
            Some(o) => n = ast::unwrap_expr(o),
            None => break,
        }
    }
    n
}

/// The part of the chain `n` that ends at property `field`: `order.id` in `order.id.toString`.
fn chain_prefix<'t>(mut n: Node<'t>, field: &str, src: &str) -> Option<Node<'t>> {
    while matches!(n.kind_name(), "member_expression" | "subscript_expression") {
        if ast::member_path(n, src).last().is_some_and(|l| l == field) {
            return Some(n);
        }
        n = ast::unwrap_expr(n.field("object")?);
    }
    None
}

/// Why `name` (read through `access`, the properties after it) differs between attempts, or
/// None when it is the same on each: a parameter, an import, a value derived from the event.
/// With it, the property of `access` that decided, if one did.
fn binding<'t>(
    scopes: &Scopes<'t>,
    name: &str,
    access: &[String],
    at: Node<'t>,
    src: &str,
    depth: usize,
) -> Option<(String, Option<String>)> {
    if depth >= MAX_DEPTH {
        return None;
    }
    let (init, destructured) = scopes.binding(name, src, at.start_byte())?;
    let init = ast::unwrap_expr(init);
    let path: Vec<&str> =
        destructured.iter().chain(access).map(String::as_str).filter(|p| *p != "[]" && !p.ends_with("()")).collect();
    if let Some(row) = inserted_row(init, src) {
        let (why, field) = row.field_why(&path, scopes, src, depth)?;
        return Some((why, field.filter(|_| destructured.is_empty())));
    }
    let inner = find_in(init, None, scopes, src, depth + 1)?;
    Some((format!("which holds {}", inner.sentence()), None))
}

/// A row an insert (or upsert) returns, and the fields it wrote.
struct Row<'t> {
    label: String,
    /// Field → the value written; None when the written object cannot be read (not a literal,
    /// a spread, SQL text).
    written: Option<Vec<(String, Node<'t>)>>,
    /// `.returning({ orderId: orders.id })`: result field → column.
    selection: Option<Vec<(String, String)>>,
    /// The driver wraps the rows (`{ data }` of Supabase, `{ rows }` of pg).
    wrapped: bool,
}

fn inserted_row<'t>(init: Node<'t>, src: &str) -> Option<Row<'t>> {
    if init.kind_name() != "call_expression" {
        return None;
    }
    let effect = effects::classify(init, src, false)?;
    if !matches!(effect.kind, EffectKind::DbInsert | EffectKind::DbUpsert) {
        return None;
    }
    let path = ast::callee_path_shared(init, src);
    let last = path.last().map(|l| l.trim_end_matches("()")).unwrap_or("");
    let first_object = ast::arguments(init).first().copied().filter(|a| a.kind_name() == "object");
    let (written, wrapped) = match last {
        // Prisma (`data`; an upsert's `create` is what a first attempt inserts), or Mongoose and
        // Sequelize (`Model.create({ ... })`).
        "create" | "createManyAndReturn" | "upsert" | "save" => {
            let field = if last == "upsert" { "create" } else { "data" };
            let written = first_object.map(|o| ast::object_property(o, field, src).unwrap_or(o));
            (written.and_then(|w| object_fields(w, src)), false)
        }
        // Drizzle, Kysely, Knex, Supabase chains: `.values({...})` or `.insert({...})`.
        _ => (
            chain_call(init, &["values", "insert"], src).and_then(|c| {
                let arg = ast::arguments(c).first().copied()?;
                object_fields(arg, src)
            }),
            true,
        ),
    };
    let selection = chain_call(init, &["returning"], src)
        .and_then(|c| ast::arguments(c).first().copied())
        .filter(|a| a.kind_name() == "object")
        .map(|o| {
            ast::named_children(o)
                .into_iter()
                .filter(|p| p.kind_name() == "pair")
                .filter_map(|p| {
                    let key = p.field("key")?;
                    let column = ast::member_path(p.field("value")?, src).pop()?;
                    Some((ast::string_value(key, src).unwrap_or_else(|| text(key, src).to_string()), column))
                })
                .collect()
        });
    Some(Row { label: effect.label, written, selection, wrapped })
}

impl<'t> Row<'t> {
    /// Why the row's `path` differs between attempts, and the field that decided.
    fn field_why(
        &self,
        path: &[&str],
        scopes: &Scopes<'t>,
        src: &str,
        depth: usize,
    ) -> Option<(String, Option<String>)> {
        let mut path = path;
        if self.wrapped && path.first().is_some_and(|p| matches!(*p, "data" | "rows")) {
            path = &path[1..];
        }
        let Some(&field) = path.first() else {
            let why =
                format!("which is the row `{}` inserts, with the columns the database generates for it", self.label);
            return Some((why, None));
        };
        self.column_why(field, scopes, src, depth).map(|why| (why, Some(field.to_string())))
    }

    fn column_why(&self, field: &str, scopes: &Scopes<'t>, src: &str, depth: usize) -> Option<String> {
        let column = match &self.selection {
            Some(selection) => &selection.iter().find(|(k, _)| k == field)?.1,
            None => field,
        };
        match &self.written {
            Some(written) => match written.iter().find(|(k, _)| k == column) {
                // Copied from what the attempt wrote: as stable as the value written.
                Some((_, value)) => find_in(*value, None, scopes, src, depth + 1)
                    .map(|inner| format!("which `{}` wrote from {}", self.label, inner.sentence())),
                None => Some(format!(
                    "which the database generates for the row `{}` inserts (`{column}` is not among the fields it writes)",
                    self.label
                )),
            },
            None => GENERATED
                .contains(&column)
                .then(|| format!("which the database generates for the row `{}` inserts", self.label)),
        }
    }
}

/// The call named one of `names` in the chain ending at `call` (`db.insert(t).values(v).returning()`).
fn chain_call<'t>(call: Node<'t>, names: &[&str], src: &str) -> Option<Node<'t>> {
    let mut cur = call;
    loop {
        if cur.kind_name() == "call_expression" {
            let function = cur.field("function")?;
            let name = function.field("property").map(|p| text(p, src));
            if name.is_some_and(|n| names.contains(&n)) {
                return Some(cur);
            }
            cur = function.field("object").map(ast::unwrap_expr)?;
        } else if cur.kind_name() == "member_expression" {
            cur = cur.field("object").map(ast::unwrap_expr)?;
        } else {
            return None;
        }
    }
}

/// The fields of an object literal and their values; None when a spread (or anything but a
/// literal) leaves them unknown.
fn object_fields<'t>(object: Node<'t>, src: &str) -> Option<Vec<(String, Node<'t>)>> {
    let object = ast::unwrap_expr(object);
    if object.kind_name() != "object" {
        return None;
    }
    let mut out = Vec::new();
    for child in ast::named_children(object) {
        match child.kind_name() {
            "pair" => {
                let key = child.field("key")?;
                let name = ast::string_value(key, src).unwrap_or_else(|| text(key, src).to_string());
                out.push((name, child.field("value")?));
            }
            "shorthand_property_identifier" => out.push((text(child, src).to_string(), child)),
            "comment" => {}
            _ => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Dialect, SourceFile};

    /// The per-attempt value of the file's last `resend.emails.send` / `stripe.*.create` call.
    fn judge(code: &str) -> Option<String> {
        let file = SourceFile::new("t.ts".into(), code.to_string(), Dialect::TypeScript).unwrap();
        let src = &file.text;
        let calls = ast::calls_in(file.root(), false);
        let effect = calls
            .into_iter()
            .filter_map(|c| effects::classify(c, src, false))
            .rfind(|e| e.kind.is_external())
            .expect("an effect");
        per_attempt_value(&effect, src).map(|p| p.shown)
    }

    #[test]
    fn generated_columns_and_clock_values_are_per_attempt() {
        let created = "async function h(event) {\n  const order = await prisma.order.create({ data: { email: event.email, total: event.total } });\n";
        assert_eq!(
            judge(&format!(
                "{created}  await resend.emails.send({{ to: order.email, subject: `#${{order.id}}` }});\n}}\n"
            )),
            Some("order.id".into())
        );
        assert_eq!(
            judge(&format!(
                "{created}  await resend.emails.send({{ to: order.email, html: `${{order.total}}` }});\n}}\n"
            )),
            None
        );
        // Through a local, and a destructured id.
        assert_eq!(
            judge(&format!(
                "{created}  const ref = order.id;\n  await resend.emails.send({{ to: order.email, subject: ref }});\n}}\n"
            )),
            Some("ref".into())
        );
        assert_eq!(
            judge(
                "async function h(event) {\n  const { id } = await tx.invoice.upsert({ where: { k: event.id }, create: { k: event.id }, update: {} });\n  await stripe.invoiceItems.create({ metadata: { id } });\n}\n"
            ),
            Some("id".into())
        );
        // A column the insert wrote from the clock.
        assert_eq!(
            judge(
                "async function h(event) {\n  const row = await prisma.order.create({ data: { placedAt: new Date() } });\n  await resend.emails.send({ subject: String(row.placedAt) });\n}\n"
            ),
            Some("row.placedAt".into())
        );
        // Drizzle's returned first row; the request options are not the payload.
        assert_eq!(
            judge(
                "async function h(event) {\n  const [row] = await db.insert(orders).values({ sessionId: event.id }).returning();\n  await stripe.transfers.create({ metadata: { s: row.sessionId } }, { stripeAccount: row.id });\n}\n"
            ),
            None
        );
        assert_eq!(
            judge(
                "async function h(event) {\n  const sentAt = Date.now();\n  await resend.emails.send({ subject: `at ${sentAt}` }, { idempotencyKey: event.id });\n}\n"
            ),
            Some("sentAt".into())
        );
        // A time taken from the event is the same on every attempt.
        assert_eq!(
            judge(
                "async function h(event) {\n  await resend.emails.send({ subject: new Date(event.created * 1000).toISOString() });\n}\n"
            ),
            None
        );
    }
}
