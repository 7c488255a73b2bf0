//! Adds the guard import once, in the file's module style, next to the existing imports,
//! reusing an existing import of the same module.

use super::{Edit, GuardSpec};
use crate::model::ast::{self, text};
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;

/// The edit that makes `spec` importable in `file`, or None when it already is.
pub fn ensure_import(file: &SourceFile, spec: &GuardSpec) -> Option<Edit> {
    let src = &file.text;
    let style = file.style();
    let local = spec.local_name();
    let root = file.root();
    // The name imported as a type only (`import type { X }`, `{ type X }`) becomes a value
    // import where it is, before any other import of the module is extended: a second
    // binding of the same name would not compile.
    if spec.export != "default" {
        for stmt in ast::named_children(root).into_iter().filter(|s| s.kind_name() == "import_statement") {
            let source = stmt.field("source").and_then(|s| ast::string_value(s, src));
            if source.as_deref() != Some(spec.module.as_str()) {
                continue;
            }
            let Some(named) = ast::descendants_of_kind(stmt, "named_imports").into_iter().next() else { continue };
            let Some(wanted) = ast::named_children(named)
                .into_iter()
                .find(|s| s.field("name").is_some_and(|n| text(n, src) == spec.export))
            else {
                continue;
            };
            if is_type_only(stmt, src) {
                return Some(value_import(stmt, named, wanted, src));
            }
            if text(wanted, src).starts_with("type ") {
                let name = wanted.field("name").map_or(wanted.start_byte(), |n| n.start_byte());
                return Some(Edit::delete(wanted.start_byte(), name));
            }
            return None;
        }
    }
    let mut last_import_end = None;
    let mut uses_require = false;
    for stmt in ast::named_children(root) {
        match stmt.kind_name() {
            "import_statement" => {
                last_import_end = Some(stmt.end_byte());
                let source = stmt.field("source").and_then(|s| ast::string_value(s, src));
                if source.as_deref() != Some(spec.module.as_str()) {
                    continue;
                }
                let clause = ast::named_children(stmt).into_iter().find(|c| c.kind_name() == "import_clause");
                let Some(clause) = clause else { continue };
                let parts = ast::named_children(clause);
                if spec.export == "default" {
                    // An existing default import of the guard module is reused as it is.
                    if parts.iter().any(|p| p.kind_name() == "identifier") {
                        return None;
                    }
                    continue;
                }
                if let Some(named) = parts.iter().find(|p| p.kind_name() == "named_imports") {
                    let specs = ast::named_children(*named);
                    let type_only = is_type_only(stmt, src);
                    let existing = specs.iter().find(|s| s.field("name").is_some_and(|n| text(n, src) == spec.export));
                    // A type-only import is erased: it cannot take a value name.
                    match existing {
                        Some(_) => return None,
                        None if type_only => continue,
                        None => {}
                    }
                    let close = named.end_byte() - 1;
                    let before = src[named.start_byte()..close].trim_end();
                    let sep = if before.ends_with(',') || before.ends_with('{') { " " } else { ", " };
                    let at = named.start_byte() + before.len();
                    return Some(Edit::insert(at, format!("{sep}{}", spec.export)));
                }
            }
            "lexical_declaration" | "variable_declaration" => {
                if text(stmt, src).contains("require(") {
                    uses_require = true;
                    if text(stmt, src).contains(&format!("{q}{}{q}", spec.module, q = style.quote))
                        && ast::mentions_identifier(stmt, src, local)
                    {
                        return None;
                    }
                    last_import_end = Some(stmt.end_byte());
                }
            }
            "comment" | "expression_statement" if last_import_end.is_none() && is_directive(stmt, src) => {
                last_import_end = Some(stmt.end_byte());
            }
            _ => {}
        }
    }
    if ast::named_children(root).iter().any(|s| s.kind_name() == "import_statement") {
        uses_require = false;
    }
    let is_cjs = file.path.extension().is_some_and(|e| e == "cjs") || uses_require;
    let module = style.quoted(&spec.module);
    let semi = style.semi();
    let statement = match (is_cjs, spec.export == "default") {
        (false, false) => format!("import {{ {} }} from {module}{semi}", spec.export),
        (false, true) => format!("import {local} from {module}{semi}"),
        (true, false) => format!("const {{ {} }} = require({module}){semi}", spec.export),
        (true, true) => format!("const {local} = require({module}){semi}"),
    };
    Some(match last_import_end {
        Some(end) => Edit::insert(end, format!("{}{statement}", style.eol)),
        None => {
            // After a shebang and a BOM, before everything else.
            let mut at = if src.starts_with('\u{feff}') { 3 } else { 0 };
            if src[at..].starts_with("#!") {
                at = src[at..].find('\n').map_or(src.len(), |i| at + i + 1);
            }
            Edit::insert(at, format!("{statement}{}", style.eol))
        }
    })
}

/// `import type { ... }` (the whole statement is erased).
fn is_type_only(stmt: tree_sitter::Node, src: &str) -> bool {
    let mut cursor = stmt.walk();
    let after_import = stmt.children(&mut cursor).nth(1);
    after_import.is_some_and(|c| text(c, src) == "type")
}

/// `import type { A, B } from "m"` with B wanted as a value: `import { type A, B } from "m"`.
fn value_import(stmt: tree_sitter::Node, named: tree_sitter::Node, wanted: tree_sitter::Node, src: &str) -> Edit {
    let specs: Vec<String> = ast::named_children(named)
        .into_iter()
        .filter(|s| s.kind_name() == "import_specifier")
        .map(|s| if s.id() == wanted.id() { text(s, src).to_string() } else { format!("type {}", text(s, src)) })
        .collect();
    Edit::replace(stmt.start_byte(), named.end_byte(), format!("import {{ {} }}", specs.join(", ")))
}

fn is_directive(stmt: tree_sitter::Node, src: &str) -> bool {
    stmt.kind_name() == "expression_statement" && stmt.named_child(0).is_some_and(|c| c.kind_name() == "string") && {
        let t = text(stmt, src);
        t.contains("use server") || t.contains("use client") || t.contains("use strict")
    }
}
