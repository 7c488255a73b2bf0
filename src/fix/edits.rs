//! Edits several rules' fixes make: a response's status, an event key in place of a wrong
//! key, a property merged into an object literal.

use super::Edit;
use crate::model::ast::{self, text};
use crate::model::dedupe_keys;
use crate::model::providers::EventKey;
use crate::model::responses::{self, Response, Style};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

/// The edit that makes `resp` answer `status`, keeping its body and headers.
pub fn set_status(resp: &Response, status: u16, src: &str, eol: &str) -> Option<Edit> {
    if resp.style == Style::Redirect || resp.style == Style::NestThrow {
        return None;
    }
    if let Some(s) = resp.status_node {
        let s = ast::unwrap_expr(s);
        responses::status_value(s, src)?;
        return Some(Edit::replace(s.start_byte(), s.end_byte(), status.to_string()));
    }
    match resp.style {
        Style::Chain => {
            let (root, _) = responses::chain(resp.node)?;
            Some(Edit::insert(root.end_byte(), format!(".status({status})")))
        }
        Style::Hono => {
            let first = ast::arguments(resp.node).first().copied()?;
            Some(Edit::insert(first.end_byte(), format!(", {status}")))
        }
        Style::Fetch => {
            let args_node = resp.node.field("arguments")?;
            let args = ast::named_children(args_node);
            match args.as_slice() {
                [] => Some(Edit::insert(args_node.end_byte() - 1, format!("null, {{ status: {status} }}"))),
                [body] => Some(Edit::insert(body.end_byte(), format!(", {{ status: {status} }}"))),
                [_, init, ..] if ast::unwrap_expr(*init).kind_name() == "object" => {
                    Some(merge_property(ast::unwrap_expr(*init), "status", &status.to_string(), src))
                }
                _ => None,
            }
        }
        // h3: `setResponseStatus(event, n)` before the return (Nest cannot: it throws instead).
        Style::Returned => {
            let func = ast::enclosing_function(resp.node)?;
            if func.kind_name() == "method_definition"
                || (src.contains("from 'h3'") || src.contains("from \"h3\"")) && !src.contains("setResponseStatus")
            {
                return None;
            }
            let params = func.field("parameters").map(ast::named_children).unwrap_or_default();
            let event = params.first().and_then(|p| p.field("pattern").or(Some(*p)))?;
            if event.kind_name() != "identifier" {
                return None;
            }
            let line = src[..resp.node.start_byte()].rfind('\n').map_or(0, |i| i + 1);
            let indent = &src[line..resp.node.start_byte()];
            if !indent.chars().all(char::is_whitespace) {
                return None;
            }
            let semi = if text(resp.node, src).trim_end().ends_with(';') { ";" } else { "" };
            Some(Edit::insert(
                resp.node.start_byte(),
                format!("setResponseStatus({}, {status}){semi}{eol}{indent}", text(event, src)),
            ))
        }
        Style::Koa => {
            let left = resp.node.field("left")?;
            let root = left.field("object")?;
            let stmt = ast::enclosing_statement(resp.node)?;
            let line = src[..stmt.start_byte()].rfind('\n').map_or(0, |i| i + 1);
            let indent = &src[line..stmt.start_byte()];
            if !indent.chars().all(char::is_whitespace) {
                return None;
            }
            let semi = if text(stmt, src).trim_end().ends_with(';') { ";" } else { "" };
            Some(Edit::insert(stmt.start_byte(), format!("{}.status = {status}{semi}{eol}{indent}", text(root, src))))
        }
        _ => None,
    }
}

/// An edit that puts the event key where `node` (a part of a key expression) is: inside a
/// template substitution that holds only `node`, the key's own substitutions replace it
/// (`` `refund:${session.id}` `` → `` `refund:${event.id}` ``); elsewhere a single-substitution
/// key is written as its bare expression, a composite one as a template literal.
pub fn key_replacement(node: Node, key: &EventKey) -> Edit {
    if let Some(sub) = node.parent().filter(|p| p.kind_name() == "template_substitution")
        && sub.named_child_count() == 1
    {
        return Edit::replace(sub.start_byte(), sub.end_byte(), key.template.clone());
    }
    Edit::replace(node.start_byte(), node.end_byte(), dedupe_keys::bare_key(key))
}

/// Inserts `prop: value` as the first property of an object literal, in its layout.
pub fn merge_property(object: Node, prop: &str, value: &str, src: &str) -> Edit {
    let open = object.start_byte() + 1;
    let first = ast::named_children(object).into_iter().find(|c| c.kind_name() != "comment");
    match first {
        None => Edit::replace(object.start_byte(), object.end_byte(), format!("{{ {prop}: {value} }}")),
        Some(first) => {
            let between = &src[open..first.start_byte()];
            if between.contains('\n') {
                let indent = &between[between.rfind('\n').map_or(0, |i| i + 1)..];
                let eol = if between.contains("\r\n") { "\r\n" } else { "\n" };
                Edit::insert(first.start_byte(), format!("{prop}: {value},{eol}{indent}"))
            } else {
                Edit::insert(first.start_byte(), format!("{prop}: {value}, "))
            }
        }
    }
}
