//! Facts about each handler that several rules read, computed once per file: the handler
//! with the functions it reaches, and what the rules see of a file (`Context`).

use crate::config::{Config, GuardSpec};
use crate::model::Framework;
use crate::model::responses::{self, Response};
use crate::model::{Handler, Scope};
use crate::project::Project;
use crate::source::SourceFile;
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

    /// Whether any scope checks, claims or writes a processed marker by hand, a business row
    /// (its existence or its status) serving as one included.
    pub fn has_hand_written_dedupe(&self, project: &Project) -> bool {
        *self.hand_written_dedupe.get_or_init(|| {
            crate::model::markers::has_hand_written_dedupe(project, &self.scopes)
                || !self.dedupe_patterns(project).is_empty()
        })
    }
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
