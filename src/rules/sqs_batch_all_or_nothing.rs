//! sqs-batch-all-or-nothing

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::{Edit, Fix, text as fixtext};
use crate::model::Framework;
use crate::model::ast::{self, text};
use crate::model::stmts;
use crate::source::{Dialect, SourceFile};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A Lambda SQS handler that processes `event.Records` (a `for...of` / indexed `for` loop,
`Promise.all(event.Records.map(...))`, or a synchronous `event.Records.forEach(...)` callback) where one record's failure throws out of the handler: no
`try/catch` per record, or a catch that rethrows. Not reported when the handler returns
`{ batchItemFailures }`, or when failures are caught and not rethrown (that is a swallowed
error, another rule's concern). In a handler that does return `{ batchItemFailures }`: an
awaited call in a record's `catch`, outside a `try` of its own (`await recordFailure(db, ...)`
before the push), reported at the call: when it throws, the handler rejects after all.

## Why retries break it
When the invocation throws, SQS makes the WHOLE batch visible again: the records that were
already processed successfully are delivered and processed again (a retry after success),
and one poison record keeps re-running its nine healthy neighbours until it reaches the
dead-letter queue.

## Bad
```ts
export const handler: SQSHandler = async (event) => {
  for (const record of event.Records) {
    await processOrder(JSON.parse(record.body));
  }
};
```

## Good
```ts
export const handler: SQSHandler = async (event) => {
  const batchItemFailures: { itemIdentifier: string }[] = [];
  for (const record of event.Records) {
    try {
      await processOrder(JSON.parse(record.body));
    } catch (err) {
      console.error(err);
      batchItemFailures.push({ itemIdentifier: record.messageId });
    }
  }
  return { batchItemFailures };
};
```
The event source mapping must have `ReportBatchItemFailures` in its `FunctionResponseTypes`
(serverless: `functionResponseType: ReportBatchItemFailures`; CDK:
`reportBatchItemFailures: true`), otherwise the response is ignored.

## Fix (unsafe)
For a `for...of` loop over `event.Records` directly in the handler with no other `return`:
declares `batchItemFailures`, wraps the loop body in `try/catch` that logs the error and pushes
`{ itemIdentifier: record.messageId }`, and returns `{ batchItemFailures }` at the end of the
handler. Review: enable `ReportBatchItemFailures` on the event source mapping; a handler typed
to return `void` needs `SQSBatchResponse` (an explicit `Promise<void>` return type is rewritten).
For `await Promise.all(event.Records.map(...))` as a statement of the handler: switches to
`Promise.allSettled` and returns the rejected records' `messageId`s as `batchItemFailures`.
A loop body that is one `try` whose `catch` rethrows its error: the `throw` becomes the
`batchItemFailures.push(...)`. Other shapes (nested loops, handlers that already return,
several rethrows) get a display-only fix.
"#;

pub const RULE: Rule = Rule {
    id: "sqs-batch-all-or-nothing",
    summary: "one failed SQS record fails the whole batch: processed records are redelivered",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        if model.handler.framework != Framework::LambdaSqs {
            continue;
        }
        let Some(scope) = model.scopes.first() else { continue };
        let Some(func) = scope.node() else { continue };
        let file = scope.file();
        let src = &file.text;
        if text(func, src).contains("batchItemFailures") {
            if let Some((_, body)) = records_loop(func, src) {
                for call in throwing_calls_in_failure_path(body, src) {
                    let name = ast::callee_path(call, src).join(".");
                    let message = format!(
                        "`{name}` in the record's catch can throw before the failure is reported: the handler then rejects and SQS redelivers the whole batch, the records already processed included"
                    );
                    out.push(
                        Diagnostic::new(RULE.id, file, call, message)
                            .in_handler(model, scope)
                            .help("give the call its own try/catch so the record still goes into `batchItemFailures`")
                            .with_fix(cx, || {
                                Fix::display_only(
                                    "give the call its own try/catch",
                                    "the record must still reach `batchItemFailures` when this call throws",
                                )
                            }),
                    );
                }
            }
            continue;
        }
        if text(func, src).contains("allSettled") {
            continue;
        }
        if !is_sqs(func, src) {
            continue;
        }
        let Some((lp, body)) = records_loop(func, src) else { continue };
        if handled_per_record(body, src) || inside_swallowing_try(lp, func, src) {
            continue;
        }
        let message = "a failure of one record throws out of the handler and SQS redelivers the whole batch: the records already processed run again";
        out.push(
            Diagnostic::new(RULE.id, file, lp, message)
                .in_handler(model, scope)
                .help("catch per record and return `{ batchItemFailures: [{ itemIdentifier: record.messageId }] }` (with ReportBatchItemFailures enabled)")
                .with_fix(cx, || fix(file, func, lp, body)),
        );
    }
}

/// The loop over the records and its body (a block or a callback body).
fn records_loop<'t>(func: Node<'t>, src: &str) -> Option<(Node<'t>, Node<'t>)> {
    let mut found = None;
    ast::walk(func, &mut |n| {
        if found.is_some() {
            return false;
        }
        match n.kind_name() {
            "for_in_statement" => {
                let right = n.field("right");
                let bound = right
                    .filter(|r| r.kind_name() == "identifier")
                    .and_then(|r| ast::find_binding_init(func, text(r, src), src, r.start_byte()))
                    .map(|i| text(ast::unwrap_expr(i), src));
                let right = right.map(|r| text(r, src)).unwrap_or("");
                let records = |t: &str| t.ends_with(".Records") || t == "Records";
                if records(right) || bound.is_some_and(records) {
                    found = n.field("body").map(|b| (n, b));
                }
            }
            "for_statement" => {
                let cond = n.field("condition").map(|c| text(c, src)).unwrap_or("");
                // `i < event.Records.length`, or `i < records.length` with `records = event.Records`
                let bound = crate::regex!(r"(\w+)\.length").captures(cond).is_some_and(|c| {
                    ast::find_binding_init(func, &c[1], src, n.start_byte())
                        .is_some_and(|i| text(i, src).contains(".Records"))
                });
                if cond.contains("Records.length") || bound {
                    found = n.field("body").map(|b| (n, b));
                }
            }
            "call_expression" => {
                let path = ast::callee_path_shared(n, src);
                if path.len() >= 2
                    && path[path.len() - 2] == "Records"
                    && path.last().is_some_and(|m| m == "map")
                    && ast::ancestors(n)
                        .take(3)
                        .any(|a| a.kind_name() == "call_expression" && text(a, src).starts_with("Promise.all("))
                    && let Some(cb) = ast::arguments(n).first().filter(|a| ast::is_function(**a))
                {
                    found = ast::function_body(*cb).map(|b| (n, b));
                }
                // `event.Records.forEach((record) => { ... })`: a synchronous callback's throw
                // leaves the handler (an async one's is an unhandled rejection instead).
                if path.len() >= 2
                    && path[path.len() - 2] == "Records"
                    && path.last().is_some_and(|m| m == "forEach")
                    && let Some(cb) = ast::arguments(n).first().filter(|a| ast::is_function(**a))
                    && !text(*cb, src).starts_with("async")
                {
                    found = ast::function_body(*cb).map(|b| (n, b));
                }
            }
            _ => {}
        }
        true
    });
    found
}

/// Awaited calls in a record's `catch` that reports the record (`batchItemFailures.push`),
/// outside a `try` of their own: the first of each catch. Logging calls are left out.
fn throwing_calls_in_failure_path<'t>(body: Node<'t>, src: &str) -> Vec<Node<'t>> {
    let owner = ast::enclosing_function(body);
    let mut out = Vec::new();
    for try_stmt in ast::descendants_of_kind(body, "try_statement") {
        let Some(catch_body) = try_stmt.field("handler").and_then(|h| h.field("body")) else {
            continue;
        };
        if ast::enclosing_function(try_stmt) != owner || !text(catch_body, src).contains("batchItemFailures") {
            continue;
        }
        let first = ast::descendants_of_kind(catch_body, "await_expression").into_iter().find_map(|awaited| {
            let call = awaited.named_child(0).map(ast::unwrap_expr).filter(|c| c.kind_name() == "call_expression")?;
            let protected = ast::ancestors(awaited).take_while(|a| *a != catch_body).any(|a| {
                ast::is_function(a)
                    || (a.kind_name() == "statement_block"
                        && ast::parent(a).is_some_and(|t| t.kind_name() == "try_statement"))
            });
            (!protected && !crate::model::best_effort::is_logging_call(call, src)).then_some(call)
        });
        out.extend(first);
    }
    out
}

/// Every statement of the body sits in a `try` whose catch does not rethrow.
fn handled_per_record(body: Node, src: &str) -> bool {
    let statements: Vec<Node> = if body.kind_name() == "statement_block" {
        ast::named_children(body).into_iter().filter(|c| c.kind_name() != "comment").collect()
    } else {
        vec![body]
    };
    let tries: Vec<&Node> = statements.iter().filter(|s| s.kind_name() == "try_statement").collect();
    !tries.is_empty()
        && tries.iter().all(|t| !catch_rethrows(**t, src))
        && statements.iter().filter(|s| s.kind_name() != "try_statement").all(|s| {
            // declarations and guards before the try rarely throw
            matches!(
                s.kind_name(),
                "lexical_declaration" | "variable_declaration" | "if_statement" | "continue_statement"
            )
        })
}

fn catch_rethrows(try_stmt: Node, _src: &str) -> bool {
    try_stmt.field("handler").is_some_and(|h| !ast::descendants_of_kind(h, "throw_statement").is_empty())
}

fn inside_swallowing_try(lp: Node, func: Node, src: &str) -> bool {
    ast::ancestors(lp)
        .take_while(|a| *a != func)
        .any(|a| a.kind_name() == "try_statement" && a.field("handler").is_some() && !catch_rethrows(a, src))
}

fn manual(reason: &str) -> Fix {
    Fix::display_only("report batch item failures per record", reason.to_string())
}

fn fix(file: &SourceFile, func: Node, lp: Node, body: Node) -> Fix {
    let src = &file.text;
    if lp.kind_name() == "call_expression"
        && let Some(fix) = all_settled_fix(file, func, lp)
    {
        return fix;
    }
    if lp.kind_name() != "for_in_statement" || body.kind_name() != "statement_block" {
        return manual(
            "catch each record's failure, collect `{ itemIdentifier: record.messageId }` and return `{ batchItemFailures }`",
        );
    }
    let Some(fbody) = ast::function_body(func).filter(|b| b.kind_name() == "statement_block") else {
        return manual("the handler has no block body");
    };
    if ast::parent(lp) != Some(fbody) {
        return manual(
            "the records loop is nested: collect failures and return `{ batchItemFailures }` from the handler",
        );
    }
    let has_return =
        ast::descendants_of_kind(fbody, "return_statement").iter().any(|r| ast::enclosing_function(*r) == Some(func));
    if has_return {
        return manual("the handler already returns: add `batchItemFailures` to what it returns");
    }
    let Some(left) = lp.field("left") else { return manual("unknown loop variable") };
    let record = match left.kind_name() {
        "identifier" => format!("{}.messageId", text(left, src)),
        "object_pattern"
            if ast::mentions_identifier(left, src, "messageId") || text(left, src).contains("messageId") =>
        {
            let mut names = Vec::new();
            ast::bound_names(left, src, &mut names);
            if names.iter().any(|n| n == "messageId") {
                "messageId".to_string()
            } else {
                return manual("the loop destructures the record without `messageId`");
            }
        }
        _ => return manual("the loop destructures the record without `messageId`"),
    };
    let stmts: Vec<Node> = ast::named_children(body);
    let (Some(first), Some(last)) = (stmts.first(), stmts.last()) else {
        return manual("empty loop body");
    };
    if ast::mentions_identifier(func, src, "batchItemFailures") {
        return manual("`batchItemFailures` is already used in the handler");
    }
    let style = file.style();
    let semi = style.semi();
    let eol = style.eol;
    let loop_indent = file.indent_at(lp.start_byte()).to_string();
    let ty = if file.dialect == Dialect::TypeScript || file.path.extension().is_some_and(|e| e == "tsx") {
        ": { itemIdentifier: string }[]"
    } else {
        ""
    };
    let declare = Edit::insert(
        file.line_start(lp.start_byte()),
        format!("{loop_indent}const batchItemFailures{ty} = []{semi}{eol}"),
    );
    let last_stmt = ast::named_children(fbody).into_iter().rfind(|c| c.kind_name() != "comment").unwrap_or(lp);
    let ret = Edit::insert(
        fixtext::line_end(file, last_stmt.end_byte()),
        format!("{eol}{loop_indent}return {{ batchItemFailures }}{semi}"),
    );
    // try { ... } catch (e) { ...; throw e }: the rethrow becomes the report.
    let real: Vec<&Node> = stmts.iter().filter(|s| s.kind_name() != "comment").collect();
    if let [only] = real.as_slice()
        && only.kind_name() == "try_statement"
        && only.field("finalizer").is_none()
        && let Some(handler) = only.field("handler")
        && let Some(cblock) = handler.field("body")
    {
        let throws = ast::descendants_of_kind(handler, "throw_statement");
        let param = handler.field("parameter").map(|p| text(p, src).to_string());
        return match throws.as_slice() {
            [t] if ast::parent(t) == Some(cblock)
                && t.named_child(0).is_some_and(|e| Some(text(e, src).to_string()) == param)
                && stmts::owns_its_lines(file, *t) =>
            {
                let edits = vec![
                    declare,
                    Edit::replace(
                        t.start_byte(),
                        t.end_byte(),
                        format!("batchItemFailures.push({{ itemIdentifier: {record} }}){semi}"),
                    ),
                    ret,
                ]
                .into_iter()
                .chain(void_return_edit(func, src))
                .collect();
                Fix::unsafe_("report the failed record instead of failing the batch", edits).with_note(
                    "enable ReportBatchItemFailures on the SQS event source mapping, or Lambda ignores the response",
                )
            }
            _ => manual(
                "the catch rethrows in several places: push `{ itemIdentifier: record.messageId }` to `batchItemFailures` instead",
            ),
        };
    }
    if ast::mentions_identifier(func, src, "err") {
        return manual("`batchItemFailures` or `err` is already used in the handler");
    }
    let unit = &style.indent_unit;
    let inner = file.indent_at(first.start_byte()).to_string();
    let mut edits = vec![declare];
    let close = format!(
        "}} catch (err) {{{eol}{inner}{unit}console.error(err){semi}{eol}{inner}{unit}batchItemFailures.push({{ itemIdentifier: {record} }}){semi}{eol}{inner}}}"
    );
    edits.extend(fixtext::wrap_statements(file, body, *first, *last, "try {", &close));
    edits.push(ret);
    edits.extend(void_return_edit(func, src));
    Fix::unsafe_("collect per-record failures and return `{ batchItemFailures }`", edits).with_note(
        "enable ReportBatchItemFailures on the SQS event source mapping, or Lambda ignores the response; a handler typed to return void must return SQSBatchResponse",
    )
}

/// SQS records, not S3/SNS/DynamoDB/Kinesis ones (whose failure handling differs).
fn is_sqs(func: Node, src: &str) -> bool {
    let t = text(func, src);
    if [".Sns", ".s3", ".dynamodb", ".kinesis", "S3Event", "SNSEvent", "DynamoDBStreamEvent", "KinesisStreamEvent"]
        .iter()
        .any(|m| t.contains(m))
    {
        return false;
    }
    if src.contains("SQS") || t.contains("messageId") || t.contains("receiptHandle") || t.contains(".body") {
        return true;
    }
    // The records may be read only in a helper of the same file (`processMessage(record)` reading
    // `record.body`), as long as nothing there names another event source.
    !["Sns", ".s3", ".dynamodb", ".kinesis"].iter().any(|m| src.contains(m))
        && (src.contains("messageId") || src.contains(".body"))
}

/// `await Promise.all(event.Records.map(async (record) => ...))` as a statement of the handler:
/// `Promise.allSettled`, then the rejected records' ids as `batchItemFailures`.
fn all_settled_fix(file: &SourceFile, func: Node, map_call: Node) -> Option<Fix> {
    let src = &file.text;
    let fbody = ast::function_body(func).filter(|b| b.kind_name() == "statement_block")?;
    let all = ast::ancestors(map_call).find(|a| a.kind_name() == "call_expression")?;
    if ast::callee_path(all, src) != ["Promise", "all"] {
        return None;
    }
    let stmt = ast::enclosing_statement(all)?;
    let awaited = stmt.named_child(0).filter(|e| e.kind_name() == "await_expression")?;
    if stmt.kind_name() != "expression_statement"
        || ast::parent(stmt) != Some(fbody)
        || ast::unwrap_expr(awaited) != all
    {
        return None;
    }
    let has_return =
        ast::descendants_of_kind(fbody, "return_statement").iter().any(|r| ast::enclosing_function(*r) == Some(func));
    if has_return || ast::mentions_identifier(func, src, "results") {
        return None;
    }
    let records = map_call.field("function")?.field("object")?;
    let records = text(records, src);
    let callee = all.field("function")?;
    let style = file.style();
    let semi = style.semi();
    let eol = style.eol;
    let unit = &style.indent_unit;
    let indent = file.indent_at(stmt.start_byte()).to_string();
    let last_stmt = ast::named_children(fbody).into_iter().rfind(|c| c.kind_name() != "comment")?;
    let end = fixtext::line_end(file, last_stmt.end_byte());
    let ret = format!(
        "{eol}{indent}return {{{eol}{indent}{unit}batchItemFailures: results.flatMap((result, i) =>{eol}{indent}{unit}{unit}result.status === {q}rejected{q} ? [{{ itemIdentifier: {records}[i].messageId }}] : [],{eol}{indent}{unit}),{eol}{indent}}}{semi}",
        q = style.quote
    );
    let mut edits = vec![
        Edit::insert(awaited.start_byte(), "const results = "),
        Edit::replace(callee.start_byte(), callee.end_byte(), "Promise.allSettled"),
        Edit::insert(end, ret),
    ];
    edits.extend(void_return_edit(func, src));
    Some(Fix::unsafe_("settle every record and return the rejected ones as `batchItemFailures`", edits).with_note(
        "enable ReportBatchItemFailures on the SQS event source mapping, or Lambda ignores the response; a handler typed to return void must return SQSBatchResponse",
    ))
}

/// `async function handler(event): Promise<void>` must return the batch response now.
fn void_return_edit(func: Node, src: &str) -> Option<Edit> {
    let ty = func.field("return_type")?;
    let t = text(ty, src).trim_start_matches(':').trim();
    let inner = ty.named_child(0).unwrap_or(ty);
    (t == "Promise<void>" || t == "void").then(|| {
        Edit::replace(
            inner.start_byte(),
            inner.end_byte(),
            "Promise<{ batchItemFailures: { itemIdentifier: string }[] }>",
        )
    })
}
