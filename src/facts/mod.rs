//! Facts about each handler that several rules read, computed once per file: the handler
//! with the functions it reaches, and what the rules see of a file (`Context`).

use crate::config::{Config, GuardSpec};
use crate::model::Framework;
use crate::model::ast;
use crate::model::reach;
use crate::model::responses::{self, Response};
use crate::model::{Handler, Scope};
use crate::project::Project;
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::sync::Arc;
use tree_sitter::Node;

/// A handler with the functions it reaches.
pub struct HandlerModel {
    pub handler: Handler,
    /// `scopes[0]` is the handler itself.
    pub scopes: Vec<Scope>,
    /// Hand-written dedupe found in the scopes; several rules read it, so it is computed once.
    dedupe_patterns: std::sync::OnceLock<Vec<crate::model::markers::Pattern>>,
    hand_written_dedupe: std::sync::OnceLock<bool>,
}

impl HandlerModel {
    pub fn new(handler: Handler, scopes: Vec<Scope>) -> HandlerModel {
        HandlerModel { handler, scopes, dedupe_patterns: Default::default(), hand_written_dedupe: Default::default() }
    }

    /// The racy hand-written dedupe patterns of this handler (`markers::patterns`).
    pub fn dedupe_patterns(&self, project: &Project) -> &[crate::model::markers::Pattern] {
        self.dedupe_patterns.get_or_init(|| crate::model::markers::patterns(project, &self.scopes))
    }

    /// For each scope, the calls of its function made from the handler's other scopes, as
    /// `(caller scope, call)`.
    pub fn call_sites<'a>(&'a self, project: &Project) -> Vec<Vec<(usize, Node<'a>)>> {
        let mut sites: Vec<Vec<(usize, Node<'a>)>> = self.scopes.iter().map(|_| Vec::new()).collect();
        for (k, scope) in self.scopes.iter().enumerate() {
            let Some(func) = scope.node() else { continue };
            for call in ast::calls_in(func, true) {
                for def in reach::call_targets(project, scope, call) {
                    let callee = self
                        .scopes
                        .iter()
                        .position(|s| s.function.span == def.span && s.function.file.path == def.file.path);
                    if let Some(j) = callee.filter(|j| *j != k) {
                        sites[j].push((k, call));
                    }
                }
            }
        }
        sites
    }

    /// Whether any scope checks, claims or writes a processed marker by hand, a business row
    /// (its existence or its status) serving as one included.
    pub fn has_hand_written_dedupe(&self, project: &Project) -> bool {
        *self.hand_written_dedupe.get_or_init(|| {
            crate::model::markers::has_hand_written_dedupe(project, &self.scopes)
                || !self.dedupe_patterns(project).is_empty()
        })
    }

    /// Whether the hand-written dedupe lets a retry or a concurrent duplicate run the work
    /// again: the marker is checked before the work but written after it, or only written
    /// after it. Only a marker claimed before the work stops a second run.
    pub fn has_racy_dedupe(&self, project: &Project) -> bool {
        use crate::model::markers::PatternKind;
        self.dedupe_patterns(project)
            .iter()
            .any(|p| matches!(p.kind, PatternKind::CheckThenInsert | PatternKind::EffectBeforeRecord))
    }
}

/// Whether a finding at `start..end` of `path` lies only in callbacks a reached function hands
/// back without running (`reach::registered_callbacks`): code the delivery does not execute.
/// A finding inside a function that is itself reached (a dispatch table's entry) stays.
pub fn only_in_registered_callbacks(
    handlers: &[HandlerModel],
    path: &std::path::Path,
    start: usize,
    end: usize,
) -> bool {
    let scopes = || handlers.iter().flat_map(|m| m.scopes.iter()).filter(|s| s.file().path == path);
    scopes().any(|owner| {
        owner.registered.iter().any(|r| {
            r.start <= start
                && end <= r.end
                && !scopes().any(|s| {
                    let f = &s.function.span;
                    r.start <= f.start && f.end <= r.end && f.start <= start && end <= f.end
                })
        })
    })
}

/// Whether a finding at `start..end` of `path` lies in a branch that the calls reaching its
/// function rule out (`Scope::ruled_out`), for every handler whose reach contains it: code no
/// delivery runs.
pub fn only_in_ruled_out_branches(handlers: &[HandlerModel], path: &std::path::Path, start: usize, end: usize) -> bool {
    let mut containing = handlers.iter().flat_map(|m| m.scopes.iter()).filter(|s| {
        let f = &s.function.span;
        s.file().path == path && f.start <= start && end <= f.end
    });
    let mut any = false;
    let all_ruled_out = containing.all(|s| {
        any = true;
        s.ruled_out.iter().any(|r| r.start <= start && end <= r.end)
    });
    any && all_ruled_out
}

/// Whether an analysis builds the fix of each finding. Planning a fix (the guard wrap above
/// all) is a large part of an analysis, and only the front ends that show or apply fixes need
/// it: the editor's diagnostics and the fix-less report formats do not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixes {
    Build,
    Skip,
}

/// What a rule sees for one file.
pub struct Context<'a> {
    pub file: &'a Arc<SourceFile>,
    pub project: &'a Project,
    pub config: &'a Config,
    /// Handlers defined in this file, each with its reachable scopes.
    pub handlers: &'a [HandlerModel],
    /// The guard the fixes call (from `--guard` or the config), if any.
    pub guard: Option<&'a GuardSpec>,
    /// Whether findings carry their fixes (`Diagnostic::with_fix` builds them only then).
    pub fixes: Fixes,
}

impl Context<'_> {
    pub fn src(&self) -> &str {
        &self.file.text
    }

    /// Every function this file's handlers reach, with its handler and its syntax node.
    pub fn scopes(&self) -> impl Iterator<Item = (&HandlerModel, &Scope, Node<'_>)> {
        self.handlers
            .iter()
            .flat_map(|model| model.scopes.iter().filter_map(move |scope| Some((model, scope, scope.node()?))))
    }
}

/// Every response sent by this file's HTTP handlers and the functions they reach, with the
/// handler, the scope and the scope's function node.
pub fn http_responses<'a>(cx: &'a Context) -> Vec<(&'a HandlerModel, &'a Scope, Node<'a>, Response<'a>)> {
    let mut out = Vec::new();
    for model in cx.handlers.iter().filter(|m| m.handler.framework.is_http()) {
        for (i, scope) in model.scopes.iter().enumerate() {
            let Some(func) = scope.node() else { continue };
            let names = if i == 0 { responses::handler_names(&model.handler) } else { Vec::new() };
            for resp in responses::responses_in(func, &scope.file().text, &names, false) {
                out.push((model, scope, func, resp));
            }
            if i == 0 && matches!(model.handler.framework, Framework::H3 | Framework::Nest) {
                let nest = model.handler.framework == Framework::Nest;
                for resp in responses::returned_values(func, &scope.file().text, &names, nest) {
                    out.push((model, scope, func, resp));
                }
            }
        }
    }
    out
}

/// Whether a function between the handler and `scope` is called from a loop
/// (`for (const item of items) await refundItem(item, event)`): one event key per call would
/// make every item after the first replay the first item's response.
pub fn reached_in_loop(cx: &Context, model: &HandlerModel, scope: &Scope) -> bool {
    reached_where(cx, model, scope, in_loop)
}

/// Whether one of the calls that lead from the handler to `scope` satisfies `at_site` (the
/// call, and the scope it is made in).
pub fn reached_where(
    cx: &Context,
    model: &HandlerModel,
    scope: &Scope,
    at_site: impl Fn(Node, &Scope) -> bool,
) -> bool {
    let mut cur = scope;
    while cur.depth > 0 {
        let parent_chain = &cur.chain[..cur.chain.len() - 1];
        let Some(parent) = model.scopes.iter().find(|s| s.depth + 1 == cur.depth && s.chain == parent_chain) else {
            return false;
        };
        let Some(func) = parent.node() else { return false };
        let file = parent.file();
        let hit = ast::calls_in(func, false).into_iter().any(|call| {
            reach::resolve_call(cx.project, file, call)
                .is_some_and(|def| def.span == cur.function.span && Arc::ptr_eq(&def.file, &cur.function.file))
                && at_site(call, parent)
        });
        if hit {
            return true;
        }
        cur = parent;
    }
    false
}

/// Whether `call` runs in a loop of its scope (a `for`/`while`, or a `.map`/`.forEach` callback).
pub fn in_loop(call: Node, scope: &Scope) -> bool {
    let Some(func) = scope.node() else {
        return false;
    };
    ast::ancestors(call).take_while(|a| *a != func).any(|a| {
        matches!(a.kind_name(), "for_statement" | "for_in_statement" | "while_statement" | "do_statement")
            || (a.kind_name() == "arguments"
                && a.parent().is_some_and(|c| {
                    c.kind_name() == "call_expression"
                        && c.field("function").is_some_and(|f| {
                            let t = f.utf8_text(scope.file().text.as_bytes()).unwrap_or("");
                            t.ends_with(".map") || t.ends_with(".forEach") || t.ends_with(".flatMap")
                        })
                }))
    })
}
