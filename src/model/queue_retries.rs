//! Whether a BullMQ (or Bull) consumer's failed jobs are ever retried. Both run a job once unless the
//! queue (`defaultJobOptions`) or the `add` call sets `attempts`; a job whose worker crashes is
//! still run again (a stalled job), so duplicates stay possible, but a thrown error is final.

use super::ast::{self, text};
use super::handlers::{Framework, Handler};
use super::reach::Scope;
use crate::project::Project;
use crate::syntax::ast::Fields as _;
use tree_sitter::Node;

/// A BullMQ (or Bull) handler whose failed jobs are never retried: its file builds its queue,
/// adds its jobs and consumes them, sets `attempts` nowhere, spreads no options into them and
/// does not export the queue; or its queue is registered in the package with
/// `defaultJobOptions: { attempts: 1 }`; or no file of its workspace sets `attempts` at all.
/// Without that evidence (options read from elsewhere, spread in) retries are assumed.
pub fn never_retried(project: &Project, handler: &Handler) -> bool {
    if handler.framework != Framework::Bullmq {
        return false;
    }
    let src = &handler.file.text;
    let built_here = crate::regex!(r"new\s+(?:Queue|Bull)\b").is_match(src)
        && (src.contains("new Worker(") || src.contains(".process("))
        // the jobs are added here too: a producer elsewhere may set `attempts` on its own `add`
        && src.contains(".add(")
        && !crate::regex!(r#"\battempts['"]?\s*:"#).is_match(src)
        && !options_spread(&handler.file)
        && !queue_exported(&handler.file);
    built_here || registered_with_one_attempt(project, handler) || attempts_set_nowhere(project, handler)
}

/// For each scope of a BullMQ handler, whether the jobs that reach it are never retried: every
/// call leading to it from the handler's other scopes (`sites`, as `HandlerModel::call_sites`
/// gives them) is dispatched on a job name (`switch (job.name) { case SYNC_JOB: return sync(job) }`)
/// whose every enqueue in the workspace sets `attempts: 1`, or is made in such a scope.
pub fn scopes_run_once(
    project: &Project,
    handler: &Handler,
    scopes: &[Scope],
    sites: &[Vec<(usize, Node)>],
) -> Vec<bool> {
    let mut once = vec![false; scopes.len()];
    if handler.framework != Framework::Bullmq {
        return once;
    }
    let mut order: Vec<usize> = (1..scopes.len()).collect();
    order.sort_by_key(|i| scopes[*i].depth);
    for i in order {
        let Some(callers) = sites.get(i).filter(|s| !s.is_empty()) else { continue };
        once[i] = callers.iter().all(|(k, call)| {
            once[*k]
                || dispatched_job_name(*call, &scopes[*k].file().text)
                    .is_some_and(|name| enqueued_with_one_attempt(project, handler, &name))
        });
    }
    once
}

/// The job name a dispatch on the job's name gives `call`: `case SYNC_JOB:` or `case "sync":`
/// of a `switch (job.name)`, as written.
fn dispatched_job_name(call: Node, src: &str) -> Option<String> {
    let case = ast::ancestors(call).take_while(|a| !ast::is_function(*a)).find(|a| ast::kind(*a) == "switch_case")?;
    let switch = ast::parent(case).and_then(ast::parent).filter(|s| ast::kind(*s) == "switch_statement")?;
    let on = switch.field("value")?;
    if !crate::regex!(r"\.name\b|^\(?\s*name\s*\)?$").is_match(text(on, src)) {
        return None;
    }
    let value = case.field("value")?;
    matches!(ast::kind(value), "identifier" | "member_expression" | "string").then(|| text(value, src).to_string())
}

/// Every `add(name, data, options)` of the job `name` (written as the dispatch writes it) in the
/// handler's workspace sets `attempts: 1`, and there is at least one.
fn enqueued_with_one_attempt(project: &Project, handler: &Handler, name: &str) -> bool {
    let Some(package) = crate::project::package_root(&handler.file.path) else { return false };
    let root = crate::project::workspace_root(&package).unwrap_or(package);
    let searched = name.trim_matches(|c| c == '"' || c == '\'' || c == '`');
    let mut adds = 0;
    for path in project.files_containing(&root, searched).iter() {
        let Ok(file) = project.load(path) else { return false };
        let src = &file.text;
        for call in ast::calls_in(file.root(), false) {
            let args = ast::arguments(call);
            if ast::callee_name(call, src).as_deref() != Some("add")
                || args.first().map(|a| text(*a, src)) != Some(name)
            {
                continue;
            }
            let attempts = args.get(2).and_then(|o| ast::object_property(*o, "attempts", src));
            if attempts.is_none_or(|a| text(a, src) != "1") {
                return false;
            }
            adds += 1;
        }
    }
    adds > 0
}

/// A job named for a sweep (`cleanup-logs`, `pruneTrash`, `PURGE_EXPIRED_JOB`, `/api/cron/sweep`):
/// each run selects what is still left to remove, so work a failed run skipped is the next
/// run's, whether or not the failure was reported.
pub fn redone_by_next_run(handler: &Handler) -> bool {
    let words = super::best_effort::words(&handler.name);
    words.iter().enumerate().any(|(i, word)| match word.as_str() {
        "cleanup" | "prune" | "purge" | "sweep" | "sweeper" | "retention" | "housekeeping" | "vacuum" | "gc" => true,
        "clean" => words.get(i + 1).is_some_and(|next| next == "up"),
        _ => false,
    })
}

/// No file of the handler's workspace (its package, outside a workspace) sets `attempts` on
/// any job or queue options (`attempts: 3`, `{ attempts }`, `opts.attempts = n`), so every
/// job of every queue there runs once. A file that cannot be read counts as setting it.
fn attempts_set_nowhere(project: &Project, handler: &Handler) -> bool {
    let Some(package) = crate::project::package_root(&handler.file.path) else { return false };
    let root = crate::project::workspace_root(&package).unwrap_or(package);
    // `{ attempts }` shorthand, but not a template's `${attempts}`
    let sets_attempts = crate::regex!(r#"\battempts['"]?\s*:|(?:^|[^$])[{,]\s*attempts\s*[,}]|\.attempts\s*="#);
    project
        .files_containing(&root, "attempts")
        .iter()
        .all(|path| project.load(path).is_ok_and(|file| !sets_attempts.is_match(&file.text)))
}

/// Whether a queue built in the file is exported (`export const queue = new Queue(...)`,
/// `module.exports = { queue }`): other modules may add its jobs with `attempts`.
fn queue_exported(file: &crate::source::SourceFile) -> bool {
    let src = &file.text;
    let names: Vec<&str> = queues_built(file)
        .into_iter()
        .filter_map(|n| {
            let declarator = ast::ancestors(n).find(|a| ast::kind(*a) == "variable_declarator")?;
            let name = declarator.field("name")?;
            if ast::ancestors(declarator).any(|a| ast::kind(a) == "export_statement") {
                return Some("");
            }
            Some(text(name, src))
        })
        .collect();
    // `export { queue }`, `export default queue`, `module.exports = { queue }`, `exports.queue = queue`:
    // the binding itself, not a use inside an exported function's body.
    let exports_name = |value: Node, name: &str| {
        let value = ast::unwrap_expr(value);
        match ast::kind(value) {
            "identifier" => text(value, src) == name,
            "object" | "export_clause" => ast::named_children(value).into_iter().any(|p| {
                let shown = p.field("value").or_else(|| p.field("name")).unwrap_or(p);
                text(shown, src) == name
            }),
            _ => false,
        }
    };
    let exported = |name: &str| {
        ast::descendants_of_kind(file.root(), "export_statement").into_iter().any(|e| {
            ast::named_children(e).into_iter().any(|c| exports_name(c, name))
                || e.field("value").is_some_and(|v| exports_name(v, name))
        }) || ast::descendants_of_kind(file.root(), "assignment_expression").into_iter().any(|a| {
            a.field("left").is_some_and(|l| text(l, src).contains("exports"))
                && a.field("right").is_some_and(|r| exports_name(r, name))
        })
    };
    names.iter().any(|name| name.is_empty() || exported(name))
}

/// Whether a queue built in the file (`new Queue(...)`, Bull's `new Bull(...)`) or a job added
/// there (`queue.add(name, data, opts)`) takes options spread in from elsewhere, which may set
/// `attempts`.
fn options_spread(file: &crate::source::SourceFile) -> bool {
    let src = &file.text;
    let adds = ast::descendants_of_kind(file.root(), "call_expression")
        .into_iter()
        .filter(|c| ast::callee_name(*c, src).is_some_and(|n| n == "add" || n == "addBulk"));
    queues_built(file).into_iter().chain(adds).any(|n| !ast::descendants_of_kind(n, "spread_element").is_empty())
}

/// The queues a file builds: `new Queue(...)` (BullMQ, Bull) and Bull's `new Bull(...)`.
fn queues_built(file: &crate::source::SourceFile) -> Vec<Node<'_>> {
    let src = &file.text;
    ast::descendants_of_kind(file.root(), "new_expression")
        .into_iter()
        .filter(|n| n.field("constructor").is_some_and(|c| matches!(text(c, src), "Queue" | "Bull")))
        .collect()
}

/// The handler's queue is registered in its package (`BullModule.registerQueue({ name,
/// defaultJobOptions })` or `new Queue(name, { defaultJobOptions })`) with at most one attempt.
fn registered_with_one_attempt(project: &Project, handler: &Handler) -> bool {
    let Some(node) = handler.file.node_at(handler.function) else { return false };
    let Some(queue) = queue_name(node, &handler.file.text) else { return false };
    let Some(root) = crate::project::package_root(&handler.file.path) else { return false };
    project.files_containing(&root, "defaultJobOptions").iter().any(|path| {
        let Ok(file) = project.load(path) else { return false };
        if !file.text.contains(queue.as_str()) {
            return false;
        }
        let src = &file.text;
        ast::descendants_of_kind(file.root(), "call_expression")
            .into_iter()
            .chain(ast::descendants_of_kind(file.root(), "new_expression"))
            .flat_map(|c| registrations(c, src))
            .any(|(name, options)| {
                same_queue(name, &queue, src)
                    && ast::object_property(options, "defaultJobOptions", src)
                        .and_then(|o| ast::object_property(ast::unwrap_expr(o), "attempts", src))
                        .and_then(|a| text(a, src).trim().parse::<u32>().ok())
                        .is_some_and(|n| n <= 1)
            })
    })
}

/// The queue names and option objects a call registers.
fn registrations<'t>(call: Node<'t>, src: &str) -> Vec<(Node<'t>, Node<'t>)> {
    let args: Vec<Node> = ast::arguments(call).into_iter().map(ast::unwrap_expr).collect();
    if ast::kind(call) == "new_expression" {
        let ctor = call.field("constructor").map(|c| text(c, src)).unwrap_or("");
        return match (ctor, args.as_slice()) {
            ("Queue", [name, options, ..]) if ast::kind(options) == "object" => vec![(*name, *options)],
            _ => Vec::new(),
        };
    }
    if !ast::callee_name(call, src).is_some_and(|n| n == "registerQueue" || n == "registerQueueAsync") {
        return Vec::new();
    }
    args.into_iter()
        .filter(|a| ast::kind(a) == "object")
        .filter_map(|o| Some((ast::object_property(o, "name", src)?, o)))
        .collect()
}

/// The queue a consumer reads, as written: `@Processor(QueueName.EMAIL)` on its class,
/// `@Processor({ name })`, or `new Worker(name, fn)` around it.
fn queue_name(func: Node, src: &str) -> Option<String> {
    let written = ast::ancestors(func).find_map(|a| match ast::kind(a) {
        "new_expression" if a.field("constructor").is_some_and(|c| text(c, src) == "Worker") => {
            ast::arguments(a).first().copied()
        }
        "class_declaration" | "class" => super::handlers::decorators_of(a).into_iter().find_map(|d| {
            let call = d.named_child(0).filter(|c| ast::kind(c) == "call_expression")?;
            (ast::callee_name(call, src)? == "Processor").then_some(())?;
            let arg = ast::unwrap_expr(*ast::arguments(call).first()?);
            if ast::kind(arg) == "object" { ast::object_property(arg, "name", src) } else { Some(arg) }
        }),
        _ => None,
    })?;
    let written = ast::unwrap_expr(written);
    ast::string_value(written, src).or_else(|| Some(text(written, src).rsplit('.').next()?.to_string()))
}

/// Whether a registration's name is the queue: the same string, or the same constant
/// (`QueueName.EMAIL` and `EMAIL` alike).
fn same_queue(name: Node, queue: &str, src: &str) -> bool {
    let name = ast::unwrap_expr(name);
    match ast::string_value(name, src) {
        Some(s) => s == queue,
        None => text(name, src).rsplit('.').next() == Some(queue),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::project::Project;
    use crate::source::{Dialect, SourceFile};
    use std::sync::Arc;

    fn handlers_of(code: &str) -> Vec<Handler> {
        let file = Arc::new(SourceFile::new("jobs/worker.ts".into(), code.to_string(), Dialect::TypeScript).unwrap());
        super::super::handlers::find_handlers(&file, &Project::new(), &crate::config::Config::default())
    }

    #[test]
    fn queue_and_worker_without_attempts_are_never_retried() {
        let code = "import { Queue, Worker } from 'bullmq';\nconst q = new Queue('mail', { connection });\n\
                    export const add = (d) => q.add('send', d, { jobId: d.id });\n\
                    new Worker('mail', async (job) => { await send(job.data); }, { connection });\n";
        let found = handlers_of(code);
        assert!(!found.is_empty());
        assert!(found.iter().all(|h| never_retried(&Project::new(), h)));
    }

    #[test]
    fn attempts_anywhere_in_the_file_or_spread_options_mean_retries() {
        for options in ["{ attempts: 3 }", "{ defaultJobOptions: { attempts: 5 } }", "{ ...jobOptions }"] {
            let code = format!(
                "import {{ Queue, Worker }} from 'bullmq';\nconst q = new Queue('mail', {options});\n\
                 new Worker('mail', async (job) => {{ await send(job.data); }});\n"
            );
            assert!(handlers_of(&code).iter().all(|h| !never_retried(&Project::new(), h)), "{options}");
        }
    }

    #[test]
    fn a_bull_queue_with_default_options_but_no_attempts_is_never_retried() {
        let code = "import Bull from 'bull';\nconst q = new Bull('verify', { defaultJobOptions: { removeOnFail: true } });\n\
                    export const add = (d) => q.add(d, { jobId: `verify-${d.id}` });\n\
                    q.process(2, async (job) => { await verify(job.data.id); });\n";
        let found = handlers_of(code);
        assert!(!found.is_empty());
        assert!(found.iter().all(|h| never_retried(&Project::new(), h)));
        let spread = code.replace("{ jobId: `verify-${d.id}` }", "{ ...retryOptions, jobId: d.id }");
        assert!(handlers_of(&spread).iter().all(|h| !never_retried(&Project::new(), h)));
    }

    #[test]
    fn a_worker_without_its_queue_in_the_file_is_assumed_retried() {
        let code = "import { Worker } from 'bullmq';\nnew Worker('mail', async (job) => { await send(job.data); });\n";
        let found = handlers_of(code);
        assert!(!found.is_empty());
        assert!(found.iter().all(|h| !never_retried(&Project::new(), h)));
    }
}
