//! Express middleware order: where body parsers are mounted (`app.use(express.json())`) and
//! where a handler's route is registered, so a rule can tell which parser a route sees.

use super::ast::{self, text};
use super::queries;
use crate::project::Project;
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::path::Path;
use std::sync::Arc;
use tree_sitter::Node;

const ROUTE_METHODS: &[&str] = &["post", "put", "patch", "all", "use"];

/// `app.use([prefix,] express.json(opts?))` and the parser call inside it.
#[derive(Clone, Copy, Debug)]
pub struct JsonMount<'t> {
    pub use_call: Node<'t>,
    pub parser: Node<'t>,
}

impl<'t> JsonMount<'t> {
    /// The object it is mounted on: `app`, `router`.
    pub fn target(&self, src: &str) -> String {
        ast::callee_path(self.use_call, src).first().cloned().unwrap_or_default()
    }

    pub fn prefix(&self, src: &str) -> Option<String> {
        ast::arguments(self.use_call).first().and_then(|a| ast::string_value(*a, src))
    }

    /// `express.json({ verify: (req, res, buf) => ... })` keeps the raw bytes.
    pub fn keeps_raw(&self, src: &str) -> bool {
        ast::arguments(self.parser)
            .first()
            .is_some_and(|o| o.kind_name() == "object" && ast::object_property(*o, "verify", src).is_some())
    }
}

/// Whether `call` creates a JSON body parser: `express.json()`, `bodyParser.json()`, `json()`.
pub fn is_json_parser(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    match &path[..] {
        [name] => name == "json" && !src.contains("from 'hono") && !src.contains("from \"hono"),
        [obj, name] => {
            name == "json" && {
                let o = obj.to_ascii_lowercase();
                o == "express" || o.contains("bodyparser") || o == "parser"
            }
        }
        _ => false,
    }
}

/// Raw body middleware on a route: `express.raw(...)`, `bodyParser.raw(...)`, `express.text(...)`.
pub fn is_raw_parser(node: Node, src: &str) -> bool {
    let node = ast::unwrap_expr(node);
    node.kind_name() == "call_expression"
        && ast::callee_name(node, src).is_some_and(|n| n == "raw" || n == "text")
        && ast::callee_path(node, src).len() <= 2
}

/// Every `X.use(..., express.json(), ...)` in the file, in source order.
pub fn json_mounts<'t>(root: Node<'t>, src: &str) -> Vec<JsonMount<'t>> {
    // Asked once per route registration: the file's mounts are found once per analysis and
    // remembered with its tree.
    #[derive(Hash, PartialEq, Eq)]
    struct MountsOf {
        at: u32,
        src: (usize, usize),
    }
    let Some(index) = crate::syntax::node_index::existing(root) else { return find_json_mounts(root, src) };
    let Some(at) = index.position_of(root) else { return find_json_mounts(root, src) };
    let asked = MountsOf { at, src: (src.as_ptr() as usize, src.len()) };
    if let Some(known) = index.recall::<MountsOf, Vec<(u32, u32)>>(&asked) {
        return known
            .into_iter()
            .map(|(use_call, parser)| JsonMount {
                use_call: index.node_at(use_call, root),
                parser: index.node_at(parser, root),
            })
            .collect();
    }
    let found = find_json_mounts(root, src);
    let positions: Option<Vec<(u32, u32)>> =
        found.iter().map(|m| Some((index.position_of(m.use_call)?, index.position_of(m.parser)?))).collect();
    if let Some(positions) = positions {
        index.remember(asked, positions);
    }
    found
}

fn find_json_mounts<'t>(root: Node<'t>, src: &str) -> Vec<JsonMount<'t>> {
    let mut out = Vec::new();
    for call in calls(root, src) {
        let path = ast::callee_path_shared(call, src);
        if path.len() != 2 || path[1] != "use" {
            continue;
        }
        for arg in ast::arguments(call) {
            let arg = ast::unwrap_expr(arg);
            if arg.kind_name() == "call_expression" && is_json_parser(arg, src) {
                out.push(JsonMount { use_call: call, parser: arg });
            }
        }
    }
    out
}

/// The calls under `root` a mount or a registration may be (`X.use(...)`, `X.post(...)`, ...),
/// in walk order: those `transforms/express_app.scm` locates.
fn calls<'t>(root: Node<'t>, src: &str) -> Vec<Node<'t>> {
    queries::EXPRESS_APP
        .located(root, src, |_, name| queries::call_of_name(name))
        .into_iter()
        .map(|l| l.node)
        .filter(|c| c.kind_name() == "call_expression")
        .collect()
}

/// The `app.post(path, ...middleware, handler)` call that registers `func`, found either as
/// the call `func` is an argument of, or by the function's name.
pub fn registration<'t>(root: Node<'t>, func: Node<'t>, src: &str) -> Option<Node<'t>> {
    for anc in ast::ancestors(func) {
        if anc.kind_name() == "call_expression" && is_route_call(anc, src) {
            return Some(anc);
        }
        if ast::is_function(anc) {
            break;
        }
    }
    let name = function_name(func, src)?;
    calls(root, src).into_iter().find(|c| {
        is_route_call(*c, src)
            && ast::arguments(*c).last().is_some_and(|a| a.kind_name() == "identifier" && text(*a, src) == name)
    })
}

fn is_route_call(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    let args = ast::arguments(call);
    path.len() == 2
        && ROUTE_METHODS.contains(&path[1].to_ascii_lowercase().as_str())
        && path[1] != "use"
        && args.len() >= 2
        && args.first().is_some_and(|a| a.kind_name() == "string" || a.kind_name() == "template_string")
}

/// The name a function is bound to: `function f`, `const f = () => ...`.
pub fn function_name(func: Node, src: &str) -> Option<String> {
    if let Some(n) = func.field("name") {
        return Some(text(n, src).to_string());
    }
    let parent = func.parent()?;
    if parent.kind_name() == "variable_declarator" {
        return parent.field("name").map(|n| text(n, src).to_string());
    }
    None
}

/// The route path of a registration call.
pub fn route_path(registration: Node, src: &str) -> Option<String> {
    ast::arguments(registration).first().and_then(|a| ast::string_value(*a, src))
}

/// `app.use(prefix, router)`: where `router` is mounted on `app`.
pub fn router_mount<'t>(root: Node<'t>, router: &str, src: &str) -> Option<Node<'t>> {
    calls(root, src).into_iter().find(|c| {
        let path = ast::callee_path_shared(*c, src);
        path.len() == 2
            && path[1] == "use"
            && ast::arguments(*c).iter().any(|a| a.kind_name() == "identifier" && text(*a, src) == router)
    })
}

/// Whether the Express router this file exports is mounted, in the app file of its own or a
/// parent directory (`app.js`, `server.ts`, `index.js`, ...), behind middleware that
/// `guards_users` recognises: `app.use("/:project/webhooks", [passport.authenticate("jwt"),
/// hasRole("admin")], webhooks)`. Every route of such a router serves signed-in people.
pub fn mounted_behind(project: &Project, file: &Arc<SourceFile>, guards_users: &dyn Fn(&str) -> bool) -> bool {
    if !file.text.contains("Router(") {
        return false;
    }
    let app_file = crate::regex!(r"(?i)(?:^|[-_])(?:app|server|index|main|routes?|router|api)$");
    let mut dir = file.path.parent();
    for _ in 0..3 {
        let Some(here) = dir else { break };
        for candidate in project.files_in(here).iter() {
            if !may_name_app_file(candidate) {
                continue;
            }
            let name = candidate.file_name().and_then(|n| n.to_str()).unwrap_or("");
            let stem = name.split('.').next().unwrap_or("");
            if !app_file.is_match(stem)
                || candidate == &file.path
                || crate::source::Dialect::for_path(candidate).is_none()
            {
                continue;
            }
            let Ok(app) = project.load(candidate) else { continue };
            if mounts_behind(project, &app, file, guards_users) {
                return true;
            }
        }
        if here.join("package.json").exists() {
            break;
        }
        dir = here.parent();
    }
    false
}

/// Whether `path`'s file name can match the app-file pattern of `mounted_behind`, read from
/// the path's bytes: every router asks about each file of up to three directories, where
/// the regex, and parsing each path into components for its name, cost more than the rest.
fn may_name_app_file(path: &Path) -> bool {
    const ENDINGS: [&[u8]; 8] = [b"app", b"server", b"index", b"main", b"route", b"routes", b"router", b"api"];
    let bytes = path.as_os_str().as_encoded_bytes();
    let name = bytes.rsplit(|b| *b == b'/' || *b == std::path::MAIN_SEPARATOR as u8).next().unwrap_or(bytes);
    // A name the components would read otherwise (`dir/.`), or one the pattern folds by
    // Unicode rules (`ſ` matches `s`), is left to the full test.
    if matches!(name, b"" | b"." | b"..") || !name.is_ascii() {
        return true;
    }
    let stem = name.split(|b| *b == b'.').next().unwrap_or(name);
    ENDINGS
        .iter()
        .any(|ending| stem.len() >= ending.len() && stem[stem.len() - ending.len()..].eq_ignore_ascii_case(ending))
}

fn mounts_behind(
    project: &Project,
    app: &Arc<SourceFile>,
    router: &Arc<SourceFile>,
    guards_users: &dyn Fn(&str) -> bool,
) -> bool {
    let src = &app.text;
    if !src.contains(".use(") {
        return false;
    }
    // `import webhooks from "./routers/webhooks"`, or through an index that gathers the routers:
    // `import routers from "./routers"` ... `app.use("/webhooks", auth, routers.webhooksRouter)`
    let mut locals: Vec<String> = Vec::new();
    for import in crate::project::imports(app) {
        let Some(target) = project.resolve(&app.path, &import.source) else { continue };
        if target == router.path {
            locals.push(import.local.clone());
        } else if matches!(import.imported.as_str(), "default" | "*")
            && target.file_stem().is_some_and(|s| s == "index")
            && let Ok(index) = project.load(&target)
        {
            let gathered = crate::project::imports(&index)
                .iter()
                .filter(|i| project.resolve(&index.path, &i.source).is_some_and(|p| p == router.path));
            locals.extend(gathered.map(|i| format!("{}.{}", import.local, i.local)));
        }
    }
    if locals.is_empty() {
        return false;
    }
    calls(app.root(), src).into_iter().any(|c| {
        let path = ast::callee_path_shared(c, src);
        let args = ast::arguments(c);
        path.len() == 2
            && path[1] == "use"
            && args.last().is_some_and(|a| {
                matches!(a.kind_name(), "identifier" | "member_expression") && locals.iter().any(|l| l == text(*a, src))
            })
            && args[..args.len() - 1].iter().any(|m| m.kind_name() != "string" && guards_users(text(*m, src)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Dialect, SourceFile};

    /// The located calls are every mount and registration a walk of all calls finds, in
    /// every fixture and example file.
    #[test]
    fn located_calls_are_every_mount_and_registration() {
        let mut compared = 0;
        for file in crate::source::fixture_and_example_files() {
            let path = &file.path;
            let src = &file.text;
            let relevant = |c: &Node| {
                let path = ast::callee_path_shared(*c, src);
                path.len() == 2 && (path[1] == "use" || is_route_call(*c, src))
            };
            let walked: Vec<Node> = ast::calls_in(file.root(), false).into_iter().filter(relevant).collect();
            let located: Vec<Node> = calls(file.root(), src).into_iter().filter(relevant).collect();
            assert_eq!(located, walked, "{}", path.display());
            compared += walked.len();
        }
        assert!(compared > 100, "only {compared} calls compared");
    }

    #[test]
    fn quoted_methods_are_located() {
        let text = "app['use'](express.json());\napp[`post`]('/x', h);\nexpress().use(bodyParser.json());\n";
        let file = SourceFile::new("a.ts".into(), text.into(), Dialect::TypeScript).unwrap();
        assert_eq!(json_mounts(file.root(), &file.text).len(), 2);
        assert_eq!(calls(file.root(), &file.text).len(), 3);
    }
}
