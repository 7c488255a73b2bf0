//! The functions a handler reaches: same-file functions, `this.` methods, project-local
//! imports (relative, tsconfig `paths`, index files, re-exports, CommonJS) and methods of
//! project classes called through an instance: `this.billing.handle()` where `billing` is an
//! injected constructor parameter property, a typed field or `new X()`, or a local
//! `const svc = new X(); svc.run()`. Each reached
//! function is a `Scope` that remembers how it was reached, whether that call site was inside
//! a guard or transaction, and the event key under the callee's own parameter names.

use super::ast::{self, text};
use super::guards::{self, GuardKind};
use super::handlers::Handler;
use super::providers::EventKey;
use crate::project::{self, ClassDef, FunctionDef, Project};
use crate::source::{SourceFile, Span};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::sync::Arc;
use tree_sitter::Node;

const MAX_DEPTH: usize = 5;
// Breadth first, a handler's helpers at depth 1 (a logger singleton's methods, small
// utilities) fill the budget before the per-event functions a dispatcher calls at depth 3-5;
// 64 cut real handlers short (a Linear webhook's email sender, Shelf's per-event handlers).
const MAX_SCOPES: usize = 128;

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
    /// Callbacks this function hands back without running them (`registered_callbacks`).
    pub registered: Vec<Span>,
    /// Branches that the literal arguments of every call reaching this function rule out
    /// (`ruled_out::ruled_out`).
    pub ruled_out: Vec<Span>,
    /// Parameters every call reaching this function binds to the same literal.
    pub known: super::ruled_out::Known,
    /// Parameters the call reaching this function binds to a project function
    /// (`handleRoute(webpackWebhook, req, reply)` binds `handler` to `webpackWebhook`), so a
    /// call of the parameter (`await handler(req, reply)`) reaches that function.
    pub function_params: Vec<(String, FunctionDef)>,
}

impl Scope {
    pub fn file(&self) -> &Arc<SourceFile> {
        &self.function.file
    }

    pub fn node(&self) -> Option<Node<'_>> {
        self.function.node()
    }

    /// Whether this function runs `node` when it runs: not inside a callback it only hands back.
    pub fn executes(&self, node: Node) -> bool {
        !self.registered.iter().any(|r| r.start <= node.start_byte() && node.end_byte() <= r.end)
    }

    /// The calls this function makes when it runs (`executes`), nested callbacks included.
    pub fn calls<'t>(&self, func: Node<'t>) -> Vec<Node<'t>> {
        let mut calls = ast::calls_in(func, false);
        if !self.registered.is_empty() {
            calls.retain(|c| self.executes(*c));
        }
        calls
    }

    /// The guard protecting `node` (inside this scope): its own context, or the call site's.
    pub fn guard_at(&self, node: Node) -> Option<GuardKind> {
        guards::guard_at(node, &self.function.file.text).or(self.guarded)
    }
}

/// A call resolved to a project function.
pub fn resolve_call(project: &Project, file: &Arc<SourceFile>, call: Node) -> Option<FunctionDef> {
    // Every rule asks about the same calls; the answer is remembered for the file being
    // analysed. The entry holds the file, so its address cannot be reused meanwhile.
    let key = (Arc::as_ptr(file) as usize, call.start_byte(), call.end_byte());
    if let Some(found) = RESOLVED.with(|m| m.borrow().get(&key).map(|(_, def)| def.clone())) {
        return found;
    }
    let found = resolve_uncached(project, file, call);
    RESOLVED.with(|m| m.borrow_mut().insert(key, (file.clone(), found.clone())));
    found
}

type Resolutions = std::collections::HashMap<(usize, usize, usize), (Arc<SourceFile>, Option<FunctionDef>)>;

thread_local! {
    static RESOLVED: std::cell::RefCell<Resolutions> = std::cell::RefCell::new(Resolutions::new());
}

/// Forgets remembered call resolutions (the engine calls it around each analysed file).
pub fn forget_resolutions() {
    RESOLVED.with(|m| m.borrow_mut().clear());
    crate::syntax::node_index::forget();
    super::queries::forget();
}

fn resolve_uncached(project: &Project, file: &Arc<SourceFile>, call: Node) -> Option<FunctionDef> {
    let src = &file.text;
    let path = ast::callee_path_shared(call, src);
    match &path[..] {
        [name] => resolve_name(project, file, name).or_else(|| enclosing_scope_function(file, call, name)),
        [this, method] if this == "this" => {
            let class = enclosing_class(call)?;
            method_in(project, file, class, method, method, 0)
        }
        [this, field, method] if this == "this" => {
            let class = field_class(file, enclosing_class(call)?, field)?;
            class_method(project, file, &class, method)
        }
        [ns, name] => namespace_function(project, file, ns, name).or_else(|| {
            if ns.ends_with("()") {
                return None;
            }
            match instance_class(project, file, call, ns) {
                Some((class_file, class)) => class_method(project, &class_file, &class, name),
                // `Invoice.create(...)`: a static method of a project class.
                None => class_method(project, file, ns, name).or_else(|| object_method(project, file, call, ns, name)),
            }
        }),
        _ => None,
    }
}

/// `handler(req, reply)` where `handler` is a parameter the calls reaching `scope` bound to
/// project functions: each of them.
fn passed_functions(scope: &Scope, call: Node, src: &str) -> Vec<FunctionDef> {
    if scope.function_params.is_empty() {
        return Vec::new();
    }
    let Some(callee) = call.field("function").map(ast::unwrap_expr).filter(|c| ast::kind(c) == "identifier") else {
        return Vec::new();
    };
    let name = text(callee, src);
    scope.function_params.iter().filter(|(param, _)| param == name).map(|(_, def)| def.clone()).collect()
}

/// The parameters of `callee` that `call` (in `scope`, in `file`) binds to project functions:
/// an argument naming a function of the project (declared, imported, or a parameter `scope`
/// itself was given one for).
fn functions_bound_to_params(
    project: &Project,
    scope: &Scope,
    file: &Arc<SourceFile>,
    call: Node,
    callee: Node,
    callee_src: &str,
) -> Vec<(String, FunctionDef)> {
    let src = &file.text;
    let mut out = Vec::new();
    for (at, arg) in ast::arguments(call).into_iter().enumerate() {
        let arg = ast::unwrap_expr(arg);
        if ast::kind(arg) != "identifier" {
            continue;
        }
        let Some(param) = ast::parameter(callee, at).filter(|p| ast::kind(p) == "identifier") else { continue };
        let name = text(arg, src);
        let passed = scope
            .function_params
            .iter()
            .find(|(p, _)| p == name)
            .map(|(_, def)| def.clone())
            .or_else(|| resolve_name(project, file, name))
            .or_else(|| enclosing_scope_function(file, call, name));
        if let Some(def) = passed {
            out.push((text(param, callee_src).to_string(), def));
        }
    }
    out
}

/// A function bound in a scope enclosing the call rather than at the module's top level:
/// `const onMessage = async (message) => {...}` inside a `start()` whose consumer callback calls
/// `onMessage(message)`.
fn enclosing_scope_function(file: &Arc<SourceFile>, call: Node, name: &str) -> Option<FunctionDef> {
    let src = &file.text;
    let found = ast::ancestors(call).filter(|a| ast::is_function(*a)).find_map(|scope| {
        let bound = ast::find_binding_init(scope, name, src, call.start_byte())
            .map(ast::unwrap_expr)
            .filter(|f| ast::is_function(*f));
        // `async function onMessage(...) {}` declared in the scope's own body (hoisted)
        bound.or_else(|| {
            let body = scope.field("body")?;
            let mut declared = None;
            ast::walk(body, &mut |n| {
                if declared.is_some() {
                    return false;
                }
                if ast::kind(n) == "function_declaration" && n.field("name").is_some_and(|x| text(x, src) == name) {
                    declared = Some(n);
                }
                !ast::is_function(n)
            });
            declared
        })
    })?;
    Some(FunctionDef { file: file.clone(), span: Span::of(found), name: name.to_string() })
}

fn namespace_function(project: &Project, file: &Arc<SourceFile>, ns: &str, name: &str) -> Option<FunctionDef> {
    let (_, target) = project.imported_module(file, ns).filter(|(i, _)| i.imported == "*")?;
    project.exported_function(&target, name, 0)
}

fn resolve_name(project: &Project, file: &Arc<SourceFile>, name: &str) -> Option<FunctionDef> {
    if let Some(def) = project::local_function(file, name) {
        return Some(def);
    }
    let (import, target) = project.imported_module(file, name)?;
    let exported = if import.imported == "*" { "default" } else { import.imported.as_str() };
    project.exported_function(&target, exported, 0)
}

fn enclosing_class(node: Node) -> Option<Node> {
    ast::ancestors(node).find(|a| matches!(ast::kind(a), "class_declaration" | "class" | "abstract_class_declaration"))
}

/// The class named `name` as seen from `file`: declared there or imported from a project file.
fn class_named(project: &Project, file: &Arc<SourceFile>, name: &str) -> Option<ClassDef> {
    // `billing.BillingService` through `import * as billing from "./billing.service"`.
    if let Some((ns, class)) = name.split_once('.') {
        let (_, target) = project.imported_module(file, ns).filter(|(i, _)| i.imported == "*")?;
        return project.exported_class(&target, class, 0);
    }
    if let Some(class) = project::local_class(file, name) {
        return Some(class);
    }
    let (import, target) = project.imported_module(file, name)?;
    let exported = if import.imported == "*" { "default" } else { import.imported.as_str() };
    project.exported_class(&target, exported, 0)
}

/// `method` of the class named `class` (seen from `file`), shown as `Class.method`.
fn class_method(project: &Project, file: &Arc<SourceFile>, class: &str, method: &str) -> Option<FunctionDef> {
    let def = class_named(project, file, class)?;
    let node = def.node()?;
    method_in(project, &def.file, node, method, &format!("{}.{method}", def.name), 0)
}

/// The method `method` of `class` (a class node of `file`), looking through `extends` chains.
fn method_in(
    project: &Project,
    file: &Arc<SourceFile>,
    class: Node,
    method: &str,
    shown: &str,
    depth: usize,
) -> Option<FunctionDef> {
    let src = &file.text;
    let body = class.field("body")?;
    let found = ast::named_children(body)
        .into_iter()
        .find(|m| ast::kind(m) == "method_definition" && m.field("name").is_some_and(|n| text(n, src) == method));
    if let Some(m) = found {
        return Some(FunctionDef { file: file.clone(), span: Span::of(m), name: shown.to_string() });
    }
    if depth >= 3 {
        return None;
    }
    let base = ast::named_children(class)
        .into_iter()
        .filter(|c| ast::kind(c) == "class_heritage")
        .flat_map(ast::named_children)
        .filter(|c| ast::kind(c) == "extends_clause")
        .find_map(|e| e.field("value"))
        .filter(|v| ast::kind(v) == "identifier")?;
    let base = class_named(project, file, text(base, src))?;
    let node = base.node()?;
    method_in(project, &base.file, node, method, shown, depth + 1)
}

/// The class name of `this.<field>`: a constructor parameter property's type, a field's type
/// annotation or `new X()` initializer, or a `this.<field> = new X()` / `= param` assignment in
/// the constructor.
fn field_class(file: &Arc<SourceFile>, class: Node, field: &str) -> Option<String> {
    let src = &file.text;
    let body = class.field("body")?;
    for member in ast::named_children(body) {
        match ast::kind(member) {
            "public_field_definition" if member.field("name").is_some_and(|n| text(n, src) == field) => {
                if let Some(name) = member.field("type").and_then(|t| type_name(t, src)) {
                    return Some(name);
                }
                if let Some(name) = member.field("value").and_then(|v| constructed_class(v, src)) {
                    return Some(name);
                }
            }
            "method_definition" if member.field("name").is_some_and(|n| text(n, src) == "constructor") => {
                let params = member.field("parameters").map(ast::named_children).unwrap_or_default();
                let param_type = |name: &str| {
                    params.iter().find_map(|p| {
                        let pattern = p.field("pattern")?;
                        (ast::kind(pattern) == "identifier" && text(pattern, src) == name)
                            .then(|| p.field("type").and_then(|t| type_name(t, src)))
                            .flatten()
                    })
                };
                let is_property = |p: &Node| {
                    (0..p.child_count())
                        .filter_map(|i| p.child(i))
                        .any(|c| matches!(ast::kind(c), "accessibility_modifier" | "readonly" | "override_modifier"))
                };
                if params.iter().any(|p| {
                    is_property(p)
                        && p.field("pattern").is_some_and(|n| ast::kind(n) == "identifier" && text(n, src) == field)
                }) && let Some(name) = param_type(field)
                {
                    return Some(name);
                }
                let mut assigned = None;
                if let Some(block) = member.field("body") {
                    for assign in ast::descendants_of_kind(block, "assignment_expression") {
                        let (Some(left), Some(right)) = (assign.field("left"), assign.field("right")) else {
                            continue;
                        };
                        if ast::member_path(left, src) != ["this", field] {
                            continue;
                        }
                        let right = ast::unwrap_expr(right);
                        assigned = constructed_class(right, src).or_else(|| {
                            (ast::kind(right) == "identifier").then(|| param_type(text(right, src))).flatten()
                        });
                        if assigned.is_some() {
                            break;
                        }
                    }
                }
                if assigned.is_some() {
                    return assigned;
                }
            }
            _ => {}
        }
    }
    None
}

/// The class of the instance `name` holds at `call`, and the file that names that class: a
/// local `const <name> = new X()` (innermost function first, then the module), one a factory
/// returns (`const consumer = createConsumer(env)` with `createConsumer` returning `new
/// Consumer(...)`), or a module's exported singleton (`import { jobs } from "./jobs"` with
/// `export const jobs = new JobRunner()` there), also through an IIFE that returns one and a
/// fluent method that returns `this` (`export const jobs = (() => new JobRunner())().register(A)`).
fn instance_class(
    project: &Project,
    file: &Arc<SourceFile>,
    call: Node,
    name: &str,
) -> Option<(Arc<SourceFile>, String)> {
    project.with_binding_init(file, call, name, |file, init| initialized_class(project, file, init, 0))
}

/// `name.method` where `name` holds an object of functions: a module's object literal
/// (`export const mailer = { send: async (...) => ... }`) or what a project factory returns
/// (`export const jobs = createQueue()` with `createQueue` returning `{ enqueue, drain }`). Its
/// method is the app's own code, followed like any other.
fn object_method(
    project: &Project,
    file: &Arc<SourceFile>,
    call: Node,
    name: &str,
    method: &str,
) -> Option<FunctionDef> {
    let shown = format!("{name}.{method}");
    project.with_binding_init(file, call, name, |file, init| member_function_of(project, file, init, method, &shown, 0))
}

/// The function an object-valued expression holds under `method`: a property of an object
/// literal (a function, a method, or a name bound to a function where the object is built), or
/// of the object a project factory returns (two factories deep).
fn member_function_of(
    project: &Project,
    file: &Arc<SourceFile>,
    value: Node,
    method: &str,
    shown: &str,
    depth: usize,
) -> Option<FunctionDef> {
    let src = &file.text;
    let value = ast::unwrap_expr(value);
    let def = |node: Node| Some(FunctionDef { file: file.clone(), span: Span::of(node), name: shown.to_string() });
    match ast::kind(value) {
        "object" => {
            let member = ast::named_children(value).into_iter().find(|m| match ast::kind(m) {
                "pair" | "method_definition" => m
                    .field(if ast::kind(m) == "pair" { "key" } else { "name" })
                    .is_some_and(|k| text(k, src).trim_matches(['"', '\'']) == method),
                "shorthand_property_identifier" => text(*m, src) == method,
                _ => false,
            })?;
            let bound = match ast::kind(member) {
                "method_definition" => return def(member),
                "pair" => member.field("value").map(ast::unwrap_expr)?,
                _ => member,
            };
            if ast::is_function(bound) {
                return def(bound);
            }
            if !matches!(ast::kind(bound), "identifier" | "shorthand_property_identifier") {
                return None;
            }
            let bound_name = text(bound, src);
            let found = enclosing_scope_function(file, value, bound_name)
                .or_else(|| project::local_function(file, bound_name))?;
            Some(FunctionDef { name: shown.to_string(), ..found })
        }
        "call_expression" if depth < 2 => {
            let factory = match ast::callee_path(value, src).as_slice() {
                [name] => resolve_name(project, file, name),
                [ns, name] => namespace_function(project, file, ns, name),
                _ => None,
            }?;
            let node = factory.node()?;
            returned_values(node)
                .into_iter()
                .find_map(|r| member_function_of(project, &factory.file, r, method, shown, depth + 1))
        }
        _ => None,
    }
}

/// The class an initializer constructs: `new X()` directly, or through a project function that
/// returns one (followed two factories deep).
fn initialized_class(
    project: &Project,
    file: &Arc<SourceFile>,
    init: Node,
    depth: usize,
) -> Option<(Arc<SourceFile>, String)> {
    let init = ast::unwrap_expr(init);
    if let Some(class) = constructed_class(init, &file.text) {
        return Some((file.clone(), class));
    }
    if ast::kind(init) != "call_expression" || depth >= 2 {
        return None;
    }
    let callee = init.field("function").map(ast::unwrap_expr)?;
    // `(() => { switch (mode) { case "a": return new Runner(a); ... } })()`: what the IIFE returns.
    if ast::is_function(callee) {
        return returned_values(callee).into_iter().find_map(|r| initialized_class(project, file, r, depth + 1));
    }
    // `(...).register(A, B)`: a fluent method of the receiver's class that returns `this`.
    if callee.kind_name() == "member_expression"
        && let Some(receiver) = callee.field("object").filter(|o| o.kind_name() != "identifier")
        && let Some(method) = callee.field("property").map(|p| text(p, &file.text).to_string())
        && let Some((class_file, class)) = initialized_class(project, file, receiver, depth)
    {
        let fluent = class_method(project, &class_file, &class, &method).is_some_and(|def| {
            def.node().is_some_and(|m| returned_values(m).iter().all(|r| ast::unwrap_expr(*r).kind_name() == "this"))
        });
        return fluent.then_some((class_file, class));
    }
    // A factory named by an import or a module function (`createManager(tx)`,
    // `billing.createService()` of a namespace import); not a method of another instance, whose
    // binding may be this one again (`const db = db.extend()`).
    let factory = match ast::callee_path(init, &file.text).as_slice() {
        [name] => resolve_name(project, file, name),
        [ns, name] => namespace_function(project, file, ns, name),
        _ => None,
    }?;
    let node = factory.node()?;
    let returned = returned_values(node);
    returned.into_iter().find_map(|r| initialized_class(project, &factory.file, r, depth + 1))
}

/// What a function returns: an arrow's expression body, else the values of its own `return`
/// statements (not those of functions nested in it).
pub fn returned_values(func: Node) -> Vec<Node> {
    let Some(body) = func.field("body") else { return Vec::new() };
    if ast::kind(body) != "statement_block" {
        return vec![body];
    }
    let mut out = Vec::new();
    ast::walk(body, &mut |n| {
        if n != body && ast::is_function(n) {
            return false;
        }
        if ast::kind(n) == "return_statement"
            && let Some(value) = n.named_child(0)
        {
            out.push(value);
        }
        true
    });
    out
}

/// `new X(...)` → "X".
fn constructed_class(node: Node, src: &str) -> Option<String> {
    let node = ast::unwrap_expr(node);
    if ast::kind(node) != "new_expression" {
        return None;
    }
    let ctor = node.field("constructor")?;
    match ast::kind(ctor) {
        "identifier" => Some(text(ctor, src).to_string()),
        // `new billing.BillingService()`: a namespace import's class.
        "member_expression" => match ast::member_path(ctor, src).as_slice() {
            [ns, class] => Some(format!("{ns}.{class}")),
            _ => None,
        },
        _ => None,
    }
}

/// The class a type annotation names: `: X` or `: X<T>`.
fn type_name(ty: Node, src: &str) -> Option<String> {
    let ty = if ast::kind(ty) == "type_annotation" { ty.named_child(0)? } else { ty };
    match ast::kind(ty) {
        "type_identifier" => Some(text(ty, src).to_string()),
        // `billing.BillingService` (a namespace import's class): resolved by `class_named`.
        "nested_type_identifier" => Some(text(ty, src).split_whitespace().collect()),
        "generic_type" => ty
            .field("name")
            .filter(|n| matches!(ast::kind(n), "type_identifier" | "nested_type_identifier"))
            .map(|n| text(n, src).split_whitespace().collect()),
        _ => None,
    }
}

/// Every function reachable from `handler`, the handler first.
pub fn scopes(project: &Project, handler: &Handler) -> Vec<Scope> {
    let root = FunctionDef { file: handler.file.clone(), span: handler.function, name: handler.name.clone() };
    let other_methods = match (handler.framework.is_http(), root.node()) {
        (true, Some(func)) => super::ruled_out::other_method_branches(func, &handler.file.text),
        _ => Vec::new(),
    };
    scopes_from_with(project, root, handler.event_key.clone(), other_methods)
}

/// The method that does a job object's work (`perform`, `run`, `process`, `handle`,
/// `execute`) when `value` constructs a project class: `jobs.enqueue(new DunningStopJob(...))`.
pub fn job_work(project: &Project, file: &Arc<SourceFile>, value: Node) -> Option<FunctionDef> {
    let value = ast::unwrap_expr(value);
    if ast::kind(value) != "new_expression" {
        return None;
    }
    let class = text(value.field("constructor")?, &file.text);
    let def = class_named(project, file, class)?;
    let node = def.node()?;
    ["perform", "run", "process", "handle", "execute"]
        .iter()
        .find_map(|m| method_in(project, &def.file, node, m, &format!("{}.{m}", def.name), 0))
}

/// Every function reachable from `root`, `root` first.
pub fn scopes_from(project: &Project, root: FunctionDef, event_key: Option<EventKey>) -> Vec<Scope> {
    scopes_from_with(project, root, event_key, Vec::new())
}

/// Every function reachable from `root`, whose branches `ruled_out` never run: nothing is
/// reached through a call in them.
fn scopes_from_with(
    project: &Project,
    root: FunctionDef,
    event_key: Option<EventKey>,
    ruled_out: Vec<Span>,
) -> Vec<Scope> {
    if root.node().is_none() {
        return Vec::new();
    }
    let registered = handed_back_in(project, &root);
    let root = Scope {
        function: root,
        depth: 0,
        chain: Vec::new(),
        event_key,
        guarded: None,
        registered,
        ruled_out,
        known: Vec::new(),
        function_params: Vec::new(),
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
        for call in scope.calls(func) {
            if scope.ruled_out.iter().any(|r| r.start <= call.start_byte() && call.end_byte() <= r.end) {
                continue;
            }
            for def in call_targets(project, &scope, call) {
                let seen =
                    out.iter().position(|s| s.function.span == def.span && Arc::ptr_eq(&s.function.file, &def.file));
                // The handler reached again, or a function enclosing the call: nothing to add.
                if seen == Some(0)
                    || (seen.is_none()
                        && def.span.start <= func.start_byte()
                        && func.end_byte() <= def.span.end
                        && Arc::ptr_eq(&def.file, &file))
                {
                    continue;
                }
                let (ruled_out, known) = def
                    .node()
                    .map(|callee| super::ruled_out::ruled_out(call, &file.text, callee, &def.file.text, &scope.known))
                    .unwrap_or_default();
                // Reached again from another call: only what both calls rule out stays ruled out.
                if let Some(seen) = seen.map(|i| &mut out[i]) {
                    seen.ruled_out.retain(|r| ruled_out.contains(r));
                    seen.known.retain(|k| known.contains(k));
                    // Another function handed in here (`run(a, req)`, then `run(b, req)`) is
                    // followed too, while this scope's calls are still to be read.
                    if let Some(callee) = def.node() {
                        for bound in functions_bound_to_params(project, &scope, &file, call, callee, &def.file.text) {
                            let known_already = seen.function_params.iter().any(|(p, d)| {
                                *p == bound.0 && d.span == bound.1.span && Arc::ptr_eq(&d.file, &bound.1.file)
                            });
                            if !known_already {
                                seen.function_params.push(bound);
                            }
                        }
                    }
                    continue;
                }
                let event_key = scope.event_key.as_ref().and_then(|key| rebind_key(key, call, &file.text, &def));
                let mut chain = scope.chain.clone();
                chain.push(def.name.clone());
                let function_params = def
                    .node()
                    .map(|callee| functions_bound_to_params(project, &scope, &file, call, callee, &def.file.text))
                    .unwrap_or_default();
                out.push(Scope {
                    function_params,
                    guarded: scope.guard_at(call),
                    registered: handed_back_in(project, &def),
                    ruled_out,
                    known,
                    function: def,
                    depth: scope.depth + 1,
                    chain,
                    event_key,
                });
                if out.len() >= MAX_SCOPES {
                    break;
                }
            }
            if out.len() >= MAX_SCOPES {
                break;
            }
        }
    }
    out
}

/// `registered_callbacks` of a reached function.
fn handed_back_in(project: &Project, def: &FunctionDef) -> Vec<Span> {
    def.node().map(|func| registered_callbacks(project, &def.file, func)).unwrap_or_default()
}

/// Function literals in `func` that it hands back without running them: callbacks set in an
/// object literal that `func` returns, directly or through a library call
/// (`return betterAuth({ emailAndPassword: { sendResetPassword: async (d) => ... } })`,
/// `return { user: { create: { after: async (user) => ... } } }`). Whoever receives them runs
/// them later, for other requests (a password reset, a sign-up), not as part of this one.
/// A call into the project is followed instead, and Effect's constructors describe work that
/// runs when the returned effect does.
pub fn registered_callbacks(project: &Project, file: &Arc<SourceFile>, func: Node) -> Vec<Span> {
    // The functions from the node list rather than a walk that builds and asks every node.
    // What a handed-back callback holds is not looked into: in pre-order it follows the
    // callback, the last one kept.
    let mut out: Vec<Span> = Vec::new();
    for n in ast::functions_in(func) {
        let inside_kept = out.last().is_some_and(|kept| kept.start <= n.start_byte() && n.end_byte() <= kept.end);
        if n != func && !inside_kept && handed_back(project, file, func, n) {
            out.push(Span::of(n));
        }
    }
    out
}

fn handed_back(project: &Project, file: &Arc<SourceFile>, func: Node, callback: Node) -> bool {
    let src = &file.text;
    let Some(holder) = ast::parent(callback) else { return false };
    let in_object = match ast::kind(callback) {
        "method_definition" => ast::kind(holder) == "object",
        _ => ast::kind(holder) == "pair" && holder.field("value") == Some(callback),
    };
    if !in_object {
        return false;
    }
    let mut cur = holder;
    while let Some(up) = ast::parent(cur) {
        match ast::kind(up) {
            "object"
            | "array"
            | "pair"
            | "spread_element"
            | "parenthesized_expression"
            | "as_expression"
            | "satisfies_expression"
            | "await_expression"
            | "ternary_expression" => cur = up,
            "arguments" => {
                let Some(call) =
                    ast::parent(up).filter(|c| matches!(ast::kind(c), "call_expression" | "new_expression"))
                else {
                    return false;
                };
                let callee = call.field("function").or_else(|| call.field("constructor"));
                let library = callee.is_some_and(|c| {
                    let root = text(c, src).split(['.', '(', '<']).next().unwrap_or("");
                    !matches!(root, "Effect" | "Micro" | "Stream" | "Layer")
                });
                if !library || (ast::kind(call) == "call_expression" && resolve_call(project, file, call).is_some()) {
                    return false;
                }
                cur = call;
            }
            "return_statement" => return ast::ancestors(up).find(|a| ast::is_function(*a)) == Some(func),
            // `const auth = betterAuth({ ... }); return auth;`
            "variable_declarator" if up.field("value") == Some(cur) => {
                let Some(name) = up.field("name").filter(|n| ast::kind(n) == "identifier") else {
                    return false;
                };
                let name = text(name, src);
                return ast::descendants_of_kind(func, "return_statement").into_iter().any(|r| {
                    r.named_child(0)
                        .map(ast::unwrap_expr)
                        .is_some_and(|v| ast::kind(v) == "identifier" && text(v, src) == name)
                        && ast::ancestors(r).find(|a| ast::is_function(*a)) == Some(func)
                });
            }
            _ => return up == func && func.field("body") == Some(cur),
        }
    }
    false
}

/// The project functions a call in `scope` can run: its resolved callee, else the functions
/// the scope's parameters are bound to (`handler(req)` where `handler` was passed in), else the
/// entries of a dispatch table (`handlers[type](event)`).
pub fn call_targets(project: &Project, scope: &Scope, call: Node) -> Vec<FunctionDef> {
    let file = scope.file();
    match resolve_call(project, file, call) {
        Some(def) => vec![def],
        None => {
            let passed = passed_functions(scope, call, &file.text);
            if passed.is_empty() { dispatch_targets(project, file, call) } else { passed }
        }
    }
}

/// The functions a dispatch table can call: `handlers[event.type](event)`, or a handler taken
/// from one first, directly (`const handle = handlers[type]`) or through a lookup function
/// (`const handle = handlerFor(type)` returning `type in handlers ? handlers[type] : ignore`).
/// The table is an object literal of this module or one it imports; each function value in it
/// is a possible callee.
fn dispatch_targets(project: &Project, file: &Arc<SourceFile>, call: Node) -> Vec<FunctionDef> {
    let src = &file.text;
    let Some(callee) = call.field("function").map(ast::unwrap_expr) else { return Vec::new() };
    let lookup = match ast::kind(callee) {
        "subscript_expression" => Some((file.clone(), Span::of(callee))),
        "identifier" => {
            let name = text(callee, src);
            let init = ast::ancestors(call)
                .filter(|a| ast::is_function(*a) || ast::kind(a) == "program")
                .find_map(|scope| ast::find_binding_init(scope, name, src, call.start_byte()))
                .map(ast::unwrap_expr);
            match init {
                Some(init) if ast::kind(init) == "subscript_expression" => Some((file.clone(), Span::of(init))),
                Some(init) if ast::kind(init) == "call_expression" => resolve_call(project, file, init).and_then(|f| {
                    let node = f.node()?;
                    let subscript = returned_values(node).into_iter().find_map(first_subscript)?;
                    Some((f.file.clone(), Span::of(subscript)))
                }),
                _ => None,
            }
        }
        _ => None,
    };
    let Some((table_file, span)) = lookup else { return Vec::new() };
    let Some(subscript) = table_file.node_at(span) else { return Vec::new() };
    // a computed key picks among the entries; a literal one names a single property
    if subscript.field("index").is_none_or(|i| matches!(ast::kind(i), "string" | "number")) {
        return Vec::new();
    }
    let Some(table) = subscript.field("object").filter(|o| ast::kind(o) == "identifier") else {
        return Vec::new();
    };
    let table = text(table, &table_file.text).to_string();
    let (table_file, init) = match ast::find_binding_init(table_file.root(), &table, &table_file.text, usize::MAX) {
        Some(init) => (table_file.clone(), Span::of(init)),
        None => {
            let Some(import) = project::imports(&table_file).iter().find(|i| i.local == table && i.imported != "*")
            else {
                return Vec::new();
            };
            let Some(target) = project.resolve(&table_file.path, &import.source).and_then(|t| project.load(&t).ok())
            else {
                return Vec::new();
            };
            match project::exported_binding_init(&target, &import.imported) {
                Some(init) => {
                    let span = Span::of(init);
                    (target.clone(), span)
                }
                None => return Vec::new(),
            }
        }
    };
    let Some(object) = table_file.node_at(init).map(ast::unwrap_expr).filter(|o| ast::kind(o) == "object") else {
        return Vec::new();
    };
    let tsrc = &table_file.text;
    let mut out: Vec<FunctionDef> = Vec::new();
    for entry in ast::named_children(object) {
        let def = match ast::kind(entry) {
            "method_definition" => Some(FunctionDef {
                file: table_file.clone(),
                span: Span::of(entry),
                name: entry.field("name").map(|n| text(n, tsrc)).unwrap_or("").to_string(),
            }),
            "pair" => entry.field("value").map(ast::unwrap_expr).and_then(|v| match ast::kind(v) {
                "identifier" => resolve_name(project, &table_file, text(v, tsrc)),
                _ if ast::is_function(v) => Some(FunctionDef {
                    file: table_file.clone(),
                    span: Span::of(v),
                    name: entry
                        .field("key")
                        .map(|k| ast::string_value(k, tsrc).unwrap_or_else(|| text(k, tsrc).to_string()))
                        .unwrap_or_default(),
                }),
                _ => None,
            }),
            // `{ handleSaleCompleted }`
            "shorthand_property_identifier" => resolve_name(project, &table_file, text(entry, tsrc)),
            _ => None,
        };
        if let Some(def) = def
            && !out.iter().any(|d| d.span == def.span && Arc::ptr_eq(&d.file, &def.file))
        {
            out.push(def);
        }
    }
    out
}

/// The first `table[key]` in an expression (a lookup's `key in table ? table[key] : fallback`).
fn first_subscript(expr: Node) -> Option<Node> {
    let mut found = None;
    ast::walk(expr, &mut |n| {
        if found.is_some() || (n != expr && ast::is_function(n)) {
            return false;
        }
        if ast::kind(n) == "subscript_expression" {
            found = Some(n);
            return false;
        }
        true
    });
    found
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
        if ast::kind(param) != "identifier" {
            return None;
        }
        key = key.rebind(&root, text(param, &def.file.text));
    }
    Some(key)
}
