//! remote-call-in-transaction

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::{Edit, Fix};
use crate::model::ast;
use crate::model::guards::{self, GuardKind};
use crate::model::reach::{self, Scope};
use crate::model::{EffectKind, effects, stmts};
use crate::source::SourceFile;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
An external effect (payment, email, SMS, chat message, enqueue, outbound HTTP, or an
unresolved call named like one) made inside a database transaction: a
`prisma.$transaction(async (tx) => ...)`, `db.transaction(...)` (Drizzle, Knex, TypeORM,
Sequelize, Kysely), Mongoose `session.withTransaction(...)`, a pg `BEGIN` … `COMMIT` on a
client, or the `run` callback of a database guard (`guard.run(key, async (tx) => ...)`).
Also in a function that is only called from inside such a transaction. A lease guard's
callback (`redisGuard`, no `tx` parameter) is not a transaction and is not reported.

## Why retries break it
The effect cannot roll back: when the transaction aborts afterwards (a constraint, a
deadlock, a crash, a timeout) the customer was charged or emailed but nothing was recorded, and
the redelivery does it again. It also holds the transaction and its row locks open for the
duration of a network call, so concurrent deliveries of the same event pile up behind it and
time out, which causes more retries.

## Bad
```ts
await prisma.$transaction(async (tx) => {
  await tx.order.update({ where: { id }, data: { status: "refunded" } });
  await stripe.refunds.create({ payment_intent: pi });
});
```

## Good
```ts
await prisma.$transaction(async (tx) => {
  await tx.order.update({ where: { id }, data: { status: "refunded" } });
});
await stripe.refunds.create({ payment_intent: pi }, { idempotencyKey: `refund:${event.id}` });
```
or write an outbox row inside the transaction and let a worker perform the call.

## Fix (unsafe)
Moves the statement holding the call to right after the transaction statement, when it is a
direct statement of the transaction callback, uses nothing declared inside the callback (the
`tx` client, locals), and the transaction is an `await`ed statement (not `return`ed). The call
then runs only after the commit; review that a failure there is retried (give the call an
idempotency key) or use an outbox row. In a `BEGIN … COMMIT` (or `startTransaction()` …
`commitTransaction()`) block, the statement moves to just after the COMMIT statement of the same
block; its failure then no longer rolls the transaction back, and a `catch` that sends
ROLLBACK/abort runs after a commit: review both. Everything else (guard callbacks, calls using
values computed in the transaction callback, callees) gets a display-only fix.
"#;

pub const RULE: Rule = Rule {
    id: "remote-call-in-transaction",
    summary: "external call inside a DB transaction: cannot roll back, holds the transaction open over the network",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

/// The transaction around a node: its kind, and the callback and the call that opens it.
struct TxContext<'t> {
    kind: GuardKind,
    callback: Option<Node<'t>>,
    opener: Option<Node<'t>>,
}

fn tx_context<'t>(node: Node<'t>, scope: &Scope, src: &str) -> Option<TxContext<'t>> {
    for anc in ast::ancestors(node) {
        if ast::is_function(anc)
            && let Some(args) = ast::parent(anc).filter(|p| p.kind_name() == "arguments")
            && let Some(call) = ast::parent(args).filter(|c| c.kind_name() == "call_expression")
            && let Some(kind) = guards::guard_call_kind(call, src)
        {
            // A lease guard's callback takes no transaction client.
            if kind == GuardKind::Guard && ast::parameter_names(anc, src).is_empty() {
                return None;
            }
            return Some(TxContext { kind, callback: Some(anc), opener: Some(call) });
        }
    }
    if let Some(kind) = guards::guard_at(node, src) {
        return Some(TxContext { kind, callback: None, opener: None });
    }
    if in_unmanaged_transaction(node, src) {
        return Some(TxContext { kind: GuardKind::Transaction, callback: None, opener: None });
    }
    match scope.guarded {
        Some(k @ (GuardKind::Transaction | GuardKind::ClaimTransaction)) => {
            Some(TxContext { kind: k, callback: None, opener: None })
        }
        _ => None,
    }
}

/// Between `session.startTransaction()` / `const t = await sequelize.transaction()` and the
/// matching `commitTransaction()` / `t.commit()` of the same function.
fn in_unmanaged_transaction(node: Node, src: &str) -> bool {
    let Some(func) = ast::enclosing_function(node) else { return false };
    let calls = ast::calls_in(func, true);
    let opened = calls.iter().any(|c| {
        c.end_byte() <= node.start_byte() && {
            let name = ast::callee_name(*c, src).unwrap_or_default();
            name == "startTransaction"
                || (matches!(name.as_str(), "transaction" | "beginTransaction")
                    && !ast::arguments(*c).iter().any(|a| ast::is_function(*a)))
        }
    });
    let committed_after = calls.iter().any(|c| {
        c.start_byte() >= node.end_byte()
            && ast::callee_name(*c, src).is_some_and(|n| n == "commitTransaction" || n == "commit")
    });
    let committed_before = calls.iter().any(|c| {
        c.end_byte() <= node.start_byte()
            && ast::callee_name(*c, src).is_some_and(|n| n == "commitTransaction" || n == "commit")
    });
    opened && committed_after && !committed_before
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for (model, scope, func) in cx.scopes() {
        let file = scope.file();
        let src = &file.text;
        for call in ast::calls_in(func, false) {
            let local = reach::resolve_call(cx.project, file, call).is_some();
            let Some(effect) = effects::classify(call, src, local) else { continue };
            if !effect.kind.is_external() {
                continue;
            }
            let Some(tx) = tx_context(call, scope, src) else { continue };
            let place = match (tx.kind, tx.callback) {
                (GuardKind::Guard, _) => "the guard's database transaction",
                (_, Some(_)) => "a database transaction",
                (_, None) if guards::guard_at(call, src).is_some() => "a BEGIN … COMMIT transaction",
                (_, None) if in_unmanaged_transaction(call, src) => {
                    "an open transaction (committed later in this function)"
                }
                _ => "a database transaction (it is called from inside one)",
            };
            let possible =
                if effect.kind == EffectKind::Possible { " (a possible effect, judged by its name)" } else { "" };
            let message = format!(
                "`{}` ({}{possible}) runs inside {place}: it cannot be rolled back if the transaction aborts, so a retry repeats it, and it holds the transaction open over the network",
                effect.label,
                effect.kind.noun()
            );
            out.push(
                Diagnostic::new(RULE.id, file, call, message)
                    .in_handler(model, scope)
                    .help("run it after the commit (with an idempotency key), or record it in an outbox row inside the transaction")
                    .with_fix(cx, || fix(file, call, &tx)),
            );
        }
    }
}

fn manual(reason: &str) -> Fix {
    Fix::display_only("move the call after the commit, or into an outbox row", reason.to_string())
}

fn fix(file: &SourceFile, call: Node, tx: &TxContext) -> Fix {
    let src = &file.text;
    let (Some(callback), Some(opener)) = (tx.callback, tx.opener) else {
        return after_commit_statement(file, call).unwrap_or_else(|| {
            manual("the transaction is not a callback in this function: move the call after COMMIT by hand, or write an outbox row")
        });
    };
    if tx.kind == GuardKind::Guard {
        return manual(
            "outside the guard the call would also run for duplicates: keep it in the guard as an outbox row processed after commit, or give it an idempotency key",
        );
    }
    let Some(body) = ast::function_body(callback).filter(|b| b.kind_name() == "statement_block") else {
        return manual("the transaction callback has no block body");
    };
    let Some(stmt) = stmts::child_containing(body, call) else { return manual("no statement") };
    if stmt.kind_name() != "expression_statement" || !stmts::owns_its_lines(file, stmt) {
        return manual("the call's result is used inside the transaction");
    }
    let inner = stmts::all_declared_names(callback, src);
    if stmts::mentions_any(stmt, src, &inner) {
        return manual(
            "the call uses values produced inside the transaction: record them and call after the commit, or use an outbox row",
        );
    }
    let Some(tx_stmt) = ast::enclosing_statement(opener) else { return manual("no statement") };
    if tx_stmt.kind_name() == "return_statement" || !ast::is_function(callback) {
        return manual("the transaction's result is returned: move the call to the caller, after the commit");
    }
    // The statement must await the transaction, else the call would run before the commit.
    let awaited = ast::ancestors(opener).take_while(|a| *a != tx_stmt).any(|a| a.kind_name() == "await_expression");
    if !awaited {
        return manual("the transaction is not awaited here, so the call would run before the commit");
    }
    let indent = file.indent_at(tx_stmt.start_byte()).to_string();
    let moved = stmts::reindented_lines(file, stmt, &indent);
    let start = file.line_start(stmt.start_byte());
    let end = stmts::line_end_with_break(file, stmt.end_byte());
    let after = stmts::line_end_with_break(file, tx_stmt.end_byte());
    let mut moved = moved;
    if after == src.len() && !src.ends_with('\n') {
        moved.insert_str(0, file.style().eol);
    }
    let edits = vec![Edit::delete(start, end), Edit::insert(after, moved)];
    Fix::unsafe_("move the call after the transaction commits", edits).with_note(
        "the call now runs only after the commit; if it fails, the DB work is already committed: give it an idempotency key so a retry can redo it, or use an outbox row",
    )
}

/// `BEGIN … effect … COMMIT` in one block: moves the effect's statement to just after the
/// statement that sends COMMIT (`client.query('COMMIT')`, `session.commitTransaction()`).
fn after_commit_statement(file: &SourceFile, call: Node) -> Option<Fix> {
    let src = &file.text;
    let stmt = ast::enclosing_statement(call)?;
    if stmt.kind_name() != "expression_statement" || !stmts::owns_its_lines(file, stmt) {
        return None;
    }
    let block = ast::parent(stmt).filter(|b| b.kind_name() == "statement_block")?;
    let commit = ast::named_children(block).into_iter().find(|s| {
        s.start_byte() > stmt.end_byte()
            && ast::calls_in(*s, true).iter().any(|c| {
                let name = ast::callee_name(*c, src).unwrap_or_default();
                name == "commitTransaction"
                    || name == "commit"
                    || effects::sql_text(*c, &ast::arguments(*c), src).is_some_and(|q| {
                        q.to_ascii_uppercase().trim_start_matches(['`', '"', '\'']).starts_with("COMMIT")
                    })
            })
    })?;
    if commit.kind_name() != "expression_statement" || !stmts::owns_its_lines(file, commit) {
        return None;
    }
    let moved = stmts::reindented_lines(file, stmt, file.indent_at(commit.start_byte()));
    let edits = vec![
        Edit::delete(file.line_start(stmt.start_byte()), stmts::line_end_with_break(file, stmt.end_byte())),
        Edit::insert(stmts::line_end_with_break(file, commit.end_byte()), moved),
    ];
    Some(Fix::unsafe_("move the call after COMMIT", edits).with_note(
        "the call now runs only after the commit, and its failure no longer rolls the transaction back: give it an idempotency key so a retry can redo it, or use an outbox row",
    ))
}
