//! The rule registry. One file per rule: its documentation, metadata, check and fix.

use crate::config::Severity;
pub use crate::facts::{Context, Fixes, HandlerModel};
use crate::fix::Fix;
use crate::model::{Provider, Scope};
use crate::source::SourceFile;
use crate::syntax::ast::KindName;
use serde::Serialize;
use std::sync::Arc;
use tree_sitter::Node;

pub mod ack_timing;
pub mod check_then_insert_race;
pub mod claim_before_verify;
pub mod dedupe_key_not_unique;
pub mod dedupe_ttl_short;
pub mod duplicate_not_2xx;
pub mod effect_before_record;
pub mod effect_missing_idempotency_key;
pub mod in_memory_dedupe;
pub mod in_progress_not_retryable;
pub mod incrementing_write_unguarded;
pub mod missing_signature_verification;
pub mod nondeterministic_key;
pub mod order_dependence_assumed;
pub mod permanent_error_returns_5xx;
pub mod processing_time_write;
pub mod queue_add_without_job_id;
pub mod raw_body_not_preserved;
pub mod record_before_effect_no_tx;
pub mod remote_call_in_transaction;
pub mod response_missing;
pub mod retry_loop_with_effect;
pub mod sqs_batch_all_or_nothing;
pub mod swallowed_error_returns_2xx;
pub mod transaction_on_pool;
pub mod unbounded_retry;
pub mod unguarded_side_effect;
pub mod wrong_event_field_as_key;

/// Whether a rule can fix what it finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FixAvailability {
    None,
    Sometimes,
    Always,
}

pub struct Rule {
    pub id: &'static str,
    /// One line: the failure mode and the remedy.
    pub summary: &'static str,
    /// Markdown: what it finds, why retries break it, a bad and a good example, the fix.
    pub docs: &'static str,
    pub fix: FixAvailability,
    /// Whether a fix of this rule can be safe. The fix loop re-runs only these rules after
    /// its first pass when review fixes are not applied: no other rule's finding could be
    /// applied, and a rule's findings do not depend on which other rules run.
    pub safe_fixes: bool,
    /// Off unless preview is on (`--preview`, `"preview": true`) or the rule is selected by
    /// id: a rule stays in preview until its precision on real code earns it a default place.
    pub preview: bool,
    pub check: fn(&Context, &mut Vec<Diagnostic>),
}

/// Pairs of rules that describe one defect at one call: where both report the same span,
/// the first (the narrower finding, with the narrower fix) reports and the second does not.
/// Decided after selection and suppression, so turning either rule off or suppressing it
/// leaves the other's finding in place.
pub const OVERLAPS: &[(&str, &str)] = &[
    // an SDK call without its idempotency key, which no guard covers either
    ("effect-missing-idempotency-key", "unguarded-side-effect"),
    // a queue add without a jobId, which no guard covers either
    ("queue-add-without-job-id", "unguarded-side-effect"),
];

/// Drops the findings `OVERLAPS` gives to another rule reporting the same span.
pub fn arbitrate(diags: &mut Vec<Diagnostic>) {
    let taken = |d: &Diagnostic| {
        OVERLAPS.iter().any(|(winner, loser)| {
            d.rule == *loser
                && diags.iter().any(|o| o.rule == *winner && o.file.path == d.file.path && o.start == d.start)
        })
    };
    let keep: Vec<bool> = diags.iter().map(|d| !taken(d)).collect();
    let mut keep = keep.into_iter();
    diags.retain(|_| keep.next().unwrap_or(true));
}

pub fn registry() -> &'static [Rule] {
    static RULES: &[Rule] = &[
        wrong_event_field_as_key::RULE,
        nondeterministic_key::RULE,
        unguarded_side_effect::RULE,
        incrementing_write_unguarded::RULE,
        check_then_insert_race::RULE,
        effect_before_record::RULE,
        record_before_effect_no_tx::RULE,
        dedupe_key_not_unique::RULE,
        effect_missing_idempotency_key::RULE,
        queue_add_without_job_id::RULE,
        dedupe_ttl_short::RULE,
        swallowed_error_returns_2xx::RULE,
        permanent_error_returns_5xx::RULE,
        ack_timing::RULE,
        retry_loop_with_effect::RULE,
        order_dependence_assumed::RULE,
        remote_call_in_transaction::RULE,
        unbounded_retry::RULE,
        missing_signature_verification::RULE,
        raw_body_not_preserved::RULE,
        in_memory_dedupe::RULE,
        in_progress_not_retryable::RULE,
        transaction_on_pool::RULE,
        claim_before_verify::RULE,
        processing_time_write::RULE,
        duplicate_not_2xx::RULE,
        response_missing::RULE,
        sqs_batch_all_or_nothing::RULE,
    ];
    RULES
}

pub fn find(id: &str) -> Option<&'static Rule> {
    registry().iter().find(|r| r.id == id)
}

/// A `retrysafe-ignore` comment that suppresses nothing.
pub const UNUSED_SUPPRESSION: &str = "unused-suppression";
/// A `retrysafe-ignore` comment without a rule or a reason.
pub const INVALID_SUPPRESSION: &str = "invalid-suppression";

/// The ids of the findings about suppression comments themselves, with their summary and
/// documentation; `--select`, `--ignore`, the config and `explain` accept them like rules.
pub const SUPPRESSION_IDS: &[(&str, &str, &str)] = &[
    (
        UNUSED_SUPPRESSION,
        "a retrysafe-ignore comment suppresses nothing",
        "A `// retrysafe-ignore RULE: reason` comment whose rule reports nothing on its line or the next \
(or anywhere in the file, for `retrysafe-ignore-file`). Stale suppressions hide the next real finding \
there; remove the comment. Reported as a warning. When only some files are checked, it is reported only \
in files that hold a handler or that a checked handler reaches, because elsewhere the finding may come \
from a handler that was not checked.",
    ),
    (
        INVALID_SUPPRESSION,
        "a retrysafe-ignore comment names no rule, an unknown rule, or gives no reason",
        "A suppression must name the rule ids it silences and say why the code is safe: \
`// retrysafe-ignore effect-missing-idempotency-key: refunds are keyed by charge upstream`. One without a \
reason, or naming an id `retrysafe rules` does not list, is reported as an error.",
    ),
];

/// Accepts a rule id or a suppression id; otherwise says which id was probably meant.
pub fn check_id(id: &str) -> Result<(), String> {
    if find(id).is_some() || SUPPRESSION_IDS.iter().any(|(s, _, _)| *s == id) {
        return Ok(());
    }
    let known = registry().iter().map(|r| r.id).chain(SUPPRESSION_IDS.iter().map(|(s, _, _)| *s));
    let hint = crate::suggest::closest(id, known).map(|m| format!("did you mean `{m}`? ")).unwrap_or_default();
    Err(format!("unknown rule `{id}` ({hint}see `retrysafe rules`)"))
}

#[derive(Clone, Debug)]
pub struct Diagnostic {
    pub rule: &'static str,
    pub file: Arc<SourceFile>,
    pub start: usize,
    pub end: usize,
    pub message: String,
    pub help: Option<String>,
    /// The handler(s) that reach this code.
    pub handler: Option<String>,
    pub provider: Option<Provider>,
    pub fix: Option<Fix>,
    /// From the config (`severity`); warnings do not fail the run.
    pub severity: Severity,
}

impl Diagnostic {
    pub fn new(rule: &'static str, file: &Arc<SourceFile>, node: Node, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            rule,
            file: file.clone(),
            start: node.start_byte(),
            end: node.end_byte(),
            message: message.into(),
            help: None,
            handler: None,
            provider: None,
            fix: None,
            severity: Severity::Error,
        }
    }

    /// Names the handler the code belongs to (and, for a callee, the call chain).
    pub fn in_handler(mut self, model: &HandlerModel, scope: &Scope) -> Diagnostic {
        let mut name = model.handler.name.clone();
        if !scope.chain.is_empty() {
            name = format!("{name} → {}", scope.chain.join(" → "));
        }
        self.handler = Some(name);
        self.provider = model.handler.provider;
        self
    }

    pub fn help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    /// Attaches the fix `build` gives, when the analysis builds fixes: keep the fix's
    /// planning inside `build`, so an analysis that shows no fixes never pays for it.
    pub fn with_fix(mut self, cx: &Context, build: impl FnOnce() -> Fix) -> Diagnostic {
        if cx.fixes == Fixes::Build {
            self.fix = Some(build());
        }
        self
    }

    pub fn line_col(&self) -> (usize, usize) {
        self.file.line_col(self.start)
    }
}

/// Reports each hand-written dedupe pattern of `kind` in the handlers where it is the most
/// specific kind, with the guard wrap that replaces it. Shared by the three rules that name
/// the kinds (check-then-insert-race, effect-before-record, record-before-effect-no-tx).
pub(crate) fn report_dedupe_patterns(
    cx: &Context,
    out: &mut Vec<Diagnostic>,
    kind: crate::model::markers::PatternKind,
    rule: &'static str,
    message: &dyn Fn(&str) -> String,
) {
    for model in cx.handlers {
        for p in crate::model::markers::most_specific(model.dedupe_patterns(cx.project), kind) {
            let scope = &model.scopes[p.scope];
            let file = scope.file();
            let Some(node) = file.root().descendant_for_byte_range(p.at.0, p.at.1) else { continue };
            let whole = crate::model::ast::text(node, &file.text);
            let first_line = whole.lines().next().unwrap_or("");
            // A chain broken over lines (`db\n  .insert(payment)`, `db()\n  .select()`) reads
            // better as its callee path.
            let broken = whole.contains('\n') && (!first_line.contains('(') || first_line.ends_with("()"));
            let shown = if node.kind_name() == "call_expression" && broken {
                crate::model::ast::callee_path(node, &file.text).join(".")
            } else {
                first_line.trim_end_matches(['(', '{']).to_string()
            };
            let fix = || {
                let remove: Vec<(usize, usize)> = if p.scope == 0 { p.calls.clone() } else { Vec::new() };
                let mut fix = match p.manual_fix {
                    Some(reason) => crate::fix::Fix::display_only("make the marker and the work one unit", reason),
                    None => crate::fix::wrap_guard::wrap_fix(cx, model, &remove, &[]),
                };
                if p.scope != 0 && fix.applicability != crate::fix::Applicability::DisplayOnly {
                    let note = fix.note.take().unwrap_or_default();
                    fix.note = Some(format!(
                        "{note}; the hand-written marker code in `{}` is now redundant: delete it",
                        scope.function.name
                    ));
                }
                fix
            };
            out.push(
                Diagnostic::new(rule, file, node, message(&shown))
                    .in_handler(model, scope)
                    .help("let one guard `run` claim the event and do the work, instead of a hand-written marker")
                    .with_fix(cx, fix),
            );
        }
    }
}
