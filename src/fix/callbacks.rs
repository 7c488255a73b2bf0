//! Callback-style completion (`queue.process((job, done) => ...)` in Bull): the job's outcome
//! is what `done` is called with, not what the function throws. A `throw` added after `done()`
//! is an uncaught exception (it crashes the process on Node 15 and later), and a path that
//! returns without calling `done` leaves the job active until it stalls.

use crate::model::ast::{self, text};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const NAMES: &[&str] = &["done", "cb", "callback"];

/// The name of `func`'s completion callback: its second parameter, when it is named as one.
pub fn done_callback(func: Node, src: &str) -> Option<String> {
    callback_parameter(func, src, 1)
}

/// The name of an AWS Lambda handler's completion callback: its third parameter
/// (`(event, context, callback)`), when it is named as one.
pub fn lambda_callback(func: Node, src: &str) -> Option<String> {
    callback_parameter(func, src, 2)
}

/// `func`'s parameter at `index`, when it is named as a completion callback.
fn callback_parameter(func: Node, src: &str, index: usize) -> Option<String> {
    let params = func.field("parameters")?;
    let param = ast::named_children(params).into_iter().filter(|p| p.kind_name() != "comment").nth(index)?;
    let name = match param.kind_name() {
        "identifier" => param,
        // TypeScript: `done: DoneCallback`
        "required_parameter" | "optional_parameter" => param.field("pattern")?,
        _ => return None,
    };
    let name = text(name, src);
    NAMES.contains(&name).then(|| name.to_string())
}

/// The calls of `done` inside `node`.
pub fn done_calls<'t>(node: Node<'t>, src: &str, done: &str) -> Vec<Node<'t>> {
    ast::calls_in(node, true)
        .into_iter()
        .filter(|c| c.field("function").is_some_and(|f| f.kind_name() == "identifier" && text(f, src) == done))
        .collect()
}
