//! Statement-level questions: which names a statement declares, which it reads, its text
//! re-indented for another place (for the moving fixes), and whether a call's bound result is
//! tested by what follows.

use super::ast::{self, text};
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

/// Names a statement declares at its own level (`const a = ...`, `let { b } = ...`, functions).
pub fn declared_names(stmt: Node, src: &str) -> Vec<String> {
    let mut out = Vec::new();
    match stmt.kind_name() {
        "lexical_declaration" | "variable_declaration" => {
            for d in ast::named_children(stmt).into_iter().filter(|c| c.kind_name() == "variable_declarator") {
                if let Some(name) = d.field("name") {
                    ast::bound_names(name, src, &mut out);
                }
            }
        }
        "function_declaration" | "class_declaration" => {
            if let Some(n) = stmt.field("name") {
                out.push(text(n, src).to_string());
            }
        }
        _ => {}
    }
    out
}

/// Whether `node` reads any of `names`.
pub fn mentions_any(node: Node, src: &str, names: &[String]) -> bool {
    names.iter().any(|n| ast::mentions_identifier(node, src, n))
}

/// Names declared anywhere inside `node` (parameters of nested functions included).
pub fn all_declared_names(node: Node, src: &str) -> Vec<String> {
    let mut out = Vec::new();
    ast::walk(node, &mut |n| {
        if n.kind_name() == "variable_declarator"
            && let Some(name) = n.field("name")
        {
            ast::bound_names(name, src, &mut out);
        }
        if ast::is_function(n) {
            out.extend(ast::parameter_names(n, src));
        }
        if n.kind_name() == "catch_clause"
            && let Some(p) = n.field("parameter")
        {
            ast::bound_names(p, src, &mut out);
        }
        true
    });
    out
}

/// The full lines of `stmt` (from its line start to the end of its last line, with the line
/// break), re-indented from the statement's own indentation to `indent`.
pub fn reindented_lines(file: &SourceFile, stmt: Node, indent: &str) -> String {
    let start = file.line_start(stmt.start_byte());
    let own = file.indent_at(stmt.start_byte()).to_string();
    let end = line_end_with_break(file, stmt.end_byte());
    let mut out = String::new();
    for line in file.text[start..end].split_inclusive('\n') {
        match line.strip_prefix(own.as_str()) {
            Some(rest) if !line.trim().is_empty() => {
                out.push_str(indent);
                out.push_str(rest);
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// The offset just after the line break ending the line that holds `offset`.
pub fn line_end_with_break(file: &SourceFile, offset: usize) -> usize {
    file.text[offset..].find('\n').map_or(file.text.len(), |i| offset + i + 1)
}

/// Whether the statement occupies its lines alone (nothing but whitespace around it).
pub fn owns_its_lines(file: &SourceFile, stmt: Node) -> bool {
    let start = file.line_start(stmt.start_byte());
    let end = line_end_with_break(file, stmt.end_byte());
    file.text[start..stmt.start_byte()].trim().is_empty() && file.text[stmt.end_byte()..end].trim().is_empty()
}

/// The child of `block` that contains `node`.
pub fn child_containing<'t>(block: Node<'t>, node: Node<'t>) -> Option<Node<'t>> {
    ast::named_children(block).into_iter().find(|c| ast::contains(*c, node))
}

/// The code of a node without its comments (a `// TODO: verify` or a suppression comment
/// naming a rule is not code).
pub fn code_without_comments(node: Node, src: &str) -> String {
    // A comment starts with `//` or `/*`: code without either has none, and needs no walk.
    let code = &src[node.start_byte()..node.end_byte()];
    if memchr::memmem::find(code.as_bytes(), b"//").is_none() && memchr::memmem::find(code.as_bytes(), b"/*").is_none()
    {
        return code.to_string();
    }
    let mut out = String::new();
    let mut at = node.start_byte();
    for c in ast::descendants_of_kind(node, "comment") {
        if c.start_byte() >= at {
            out.push_str(&src[at..c.start_byte()]);
            at = c.end_byte();
        }
    }
    out.push_str(&src[at..node.end_byte()]);
    out
}

/// The value of `call` is bound (`const { error } = await insert(...)`) and one of the next two
/// statements satisfies `reads`: where a returned result is looked at.
pub fn bound_and_read_next(call: Node, reads: impl Fn(Node) -> bool) -> bool {
    bound_name(call).is_some()
        && ast::enclosing_statement(call).is_some_and(|stmt| {
            ast::following_siblings(stmt).into_iter().filter(|n| n.kind_name() != "comment").take(2).any(reads)
        })
}

/// The name (or pattern) the value of `call` is bound to, within its statement.
fn bound_name(call: Node) -> Option<Node> {
    ast::ancestors(call)
        .take_while(|a| !ast::is_function(*a) && a.kind_name() != "expression_statement")
        .find(|a| a.kind_name() == "variable_declarator")
        .and_then(|d| d.field("name"))
}

/// The value of `call` is bound to a name (`const r = await f()`, `const { ok } = f()`) and one
/// of the next two statements is an `if` that reads that name and leaves (returns, continues or
/// throws): the caller answers the outcome `f` reports instead of assuming it.
pub fn result_tested_then_leaves(call: Node, src: &str) -> bool {
    let Some(name) = bound_name(call) else { return false };
    let mut bound = Vec::new();
    ast::bound_names(name, src, &mut bound);
    let leaves = |n: Node| matches!(n.kind_name(), "return_statement" | "continue_statement" | "throw_statement");
    bound_and_read_next(call, |n| {
        n.kind_name() == "if_statement"
            && n.field("condition").is_some_and(|c| mentions_any(c, src, &bound))
            && n.field("consequence").is_some_and(|b| {
                leaves(b)
                    || (b.kind_name() == "statement_block"
                        && ast::named_children(b)
                            .into_iter()
                            .rev()
                            .find(|s| s.kind_name() != "comment")
                            .is_some_and(leaves))
            })
    })
}
