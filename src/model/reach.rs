//! The functions a handler reaches: same-file functions, `this.` methods and project-local
//! imports (relative, tsconfig `paths`, index files, re-exports, CommonJS). Each reached
//! function is a `Scope` that remembers how it was reached, whether that call site was inside
//! a guard or transaction, and the event key under the callee's own parameter names.

use super::ast::{self, text};
use super::guards::{self, GuardKind};
use super::handlers::Handler;
use super::providers::EventKey;
use crate::project::{self, FunctionDef, Project};
use crate::source::{SourceFile, Span};
use std::sync::Arc;
use tree_sitter::Node;

const MAX_DEPTH: usize = 5;
const MAX_SCOPES: usize = 64;

#[derive(Clone, Debug)]
pub struct Scope {
    pub function: FunctionDef,
    /// 0 for the handler itself.
    pub depth: usize,
    /// Names of the calls that led here from the handler.
    pub chain: Vec<String>,
    /// The event key as this function names it (None where no argument carries it).
    pub event_key: Option<EventKey>,
    /// Set when every path here passes through a guard or transaction callback.
    pub guarded: Option<GuardKind>,
}

impl Scope {
    pub fn file(&self) -> &Arc<SourceFile> {
        &self.function.file
    }

    pub fn node(&self) -> Option<Node<'_>> {
        self.function.node()
    }

    /// The guard protecting `node` (inside this scope): its own context, or the call site's.
    pub fn guard_at(&self, node: Node) -> Option<GuardKind> {
        guards::guard_at(node, &self.function.file.text).or(self.guarded)
    }
}

/// A call resolved to a project function.
pub fn resolve_call(project: &Project, file: &Arc<SourceFile>, call: Node) -> Option<FunctionDef> {
    let src = &file.text;
    let path = ast::callee_path(call, src);
    match path.as_slice() {
        [name] => resolve_name(project, file, name),
        [this, method] if this == "this" => class_method(file, call, method),
        [ns, name] => {
            let import = project::imports(file).iter().find(|i| &i.local == ns && i.imported == "*")?;
            let target = project.resolve(&file.path, &import.source)?;
            let target = project.load(&target).ok()?;
            project.exported_function(&target, name, 0)
        }
        _ => None,
    }
}

fn resolve_name(project: &Project, file: &Arc<SourceFile>, name: &str) -> Option<FunctionDef> {
    if let Some(def) = project::local_function(file, name) {
        return Some(def);
    }
    let import = project::imports(file).iter().find(|i| i.local == name)?;
    let target = project.resolve(&file.path, &import.source)?;
    let target = project.load(&target).ok()?;
    let exported = if import.imported == "*" { "default" } else { import.imported.as_str() };
    project.exported_function(&target, exported, 0)
}

fn class_method(file: &Arc<SourceFile>, call: Node, method: &str) -> Option<FunctionDef> {
    let class = ast::ancestors(call)
        .find(|a| matches!(a.kind(), "class_declaration" | "class" | "abstract_class_declaration"))?;
    let body = class.child_by_field_name("body")?;
    let src = &file.text;
    ast::named_children(body)
        .into_iter()
        .find(|m| {
            m.kind() == "method_definition" && m.child_by_field_name("name").is_some_and(|n| text(n, src) == method)
        })
        .map(|m| FunctionDef { file: file.clone(), span: Span::of(m), name: method.to_string() })
}

/// Every function reachable from `handler`, the handler first.
pub fn scopes(project: &Project, handler: &Handler) -> Vec<Scope> {
    let Some(_) = handler.node() else {
        return Vec::new();
    };
    let root = Scope {
        function: FunctionDef { file: handler.file.clone(), span: handler.function, name: handler.name.clone() },
        depth: 0,
        chain: Vec::new(),
        event_key: handler.event_key.clone(),
        guarded: None,
    };
    let mut out = vec![root];
    let mut next = 0;
    while next < out.len() && out.len() < MAX_SCOPES {
        let scope = out[next].clone();
        next += 1;
        if scope.depth >= MAX_DEPTH {
            continue;
        }
        let file = scope.file().clone();
        let Some(func) = scope.node() else { continue };
        for call in ast::calls_in(func, false) {
            let Some(def) = resolve_call(project, &file, call) else {
                continue;
            };
            if out.iter().any(|s| s.function.span == def.span && Arc::ptr_eq(&s.function.file, &def.file))
                || (def.span.start <= func.start_byte()
                    && func.end_byte() <= def.span.end
                    && Arc::ptr_eq(&def.file, &file))
            {
                continue;
            }
            let event_key = scope.event_key.as_ref().and_then(|key| rebind_key(key, call, &file.text, &def));
            let mut chain = scope.chain.clone();
            chain.push(def.name.clone());
            out.push(Scope { guarded: scope.guard_at(call), function: def, depth: scope.depth + 1, chain, event_key });
            if out.len() >= MAX_SCOPES {
                break;
            }
        }
    }
    out
}

/// Renames the key's root to the callee parameter that receives it: `handlePaid(event)` with
/// `function handlePaid(evt)` turns `${event.id}` into `${evt.id}`.
fn rebind_key(key: &EventKey, call: Node, src: &str, def: &FunctionDef) -> Option<EventKey> {
    let roots = key.roots();
    let callee = def.node()?;
    let args = ast::arguments(call);
    let mut key = key.clone();
    for root in roots {
        let index = args.iter().position(|a| text(*a, src) == root)?;
        let param = ast::parameter(callee, index)?;
        if param.kind() != "identifier" {
            return None;
        }
        key = key.rebind(&root, text(param, &def.file.text));
    }
    Some(key)
}
