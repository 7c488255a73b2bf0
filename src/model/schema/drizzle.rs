//! Drizzle tables: `pgTable`/`mysqlTable`/`sqliteTable`/`singlestoreTable`, table creators
//! (`pgTableCreator`) and `schema.table(...)`.

use super::{Column, assigned_name, pair_key};
use crate::model::ast;
use crate::project::Project;
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::sync::Arc;
use tree_sitter::Node;

const TABLES: &[&str] = &["pgTable", "mysqlTable", "sqliteTable", "singlestoreTable"];
const TEXTUAL: &[&str] = &["text", "varchar", "char", "uuid", "citext"];

/// A table definition: its names (SQL name, then the variable), its columns with their
/// `key: builder` pair and builder node, and its table-level unique column lists.
pub struct Table<'t> {
    pub names: Vec<String>,
    pub columns: Vec<Column>,
    /// `(pair, value)` per column, in the order of `columns`.
    pub nodes: Vec<(Node<'t>, Node<'t>)>,
    pub sets: Vec<Vec<String>>,
    /// Plain (non-unique) indexes declared with a name: `index("name").on(table.a, table.b)`.
    pub plain_indexes: Vec<PlainIndex<'t>>,
}

/// A named, non-unique Drizzle index.
pub struct PlainIndex<'t> {
    pub name: String,
    pub columns: Vec<String>,
    /// The whole `index("name").on(...)` call.
    pub call: Node<'t>,
    /// The `index` identifier (what a fix renames to `uniqueIndex`).
    pub builder: Node<'t>,
}

fn creators(src: &str) -> Vec<String> {
    if !src.contains("TableCreator(") {
        return Vec::new();
    }
    crate::regex!(r"(\w+)\s*=\s*(?:pg|mysql|sqlite|singlestore)TableCreator\(")
        .captures_iter(src)
        .map(|c| c[1].to_string())
        .collect()
}

/// The Drizzle tables defined in `file`.
pub fn tables(file: &SourceFile) -> Vec<Table<'_>> {
    let src = file.text.as_str();
    if !TABLES.iter().any(|t| src.contains(t)) && !src.contains("TableCreator(") && !src.contains(".table(") {
        return Vec::new();
    }
    let creators = creators(src);
    let schema_lib = src.contains("Schema(");
    let mut out = Vec::new();
    for call in ast::descendants_of_kind(file.root(), "call_expression") {
        let path = ast::callee_path_shared(call, src);
        let is_table = match &path[..] {
            [name] => TABLES.contains(&name.as_str()) || creators.contains(name),
            [_, last] => last == "table" && schema_lib,
            _ => false,
        };
        if is_table && let Some(t) = table(call, src) {
            out.push(t);
        }
    }
    out
}

/// The unique column sets (names in code) of the Drizzle table bound to `name` as `file` sees
/// it: declared there or imported from a project module. A column's `.unique()` or
/// `.primaryKey()` is a set of one.
pub fn unique_sets_of(project: &Project, file: &Arc<SourceFile>, name: &str) -> Vec<Vec<String>> {
    let sets = |t: &Table| {
        let mut out = t.sets.clone();
        out.extend(t.columns.iter().filter(|c| c.unique || c.primary).map(|c| vec![c.names[0].clone()]));
        out
    };
    if let Some(t) = tables(file).iter().find(|t| t.names.iter().skip(1).any(|n| n == name)) {
        return sets(t);
    }
    let Some((import, target)) = project.imported_module(file, name) else { return Vec::new() };
    tables(&target).iter().find(|t| t.names.iter().skip(1).any(|n| *n == import.imported)).map(sets).unwrap_or_default()
}

fn table<'t>(call: Node<'t>, src: &str) -> Option<Table<'t>> {
    let args = ast::arguments(call);
    let name = args.first().and_then(|a| ast::string_value(*a, src))?;
    let mut names = vec![name];
    names.extend(assigned_name(call, src));
    let columns_node = args.get(1).and_then(|a| columns_object(*a))?;
    let mut nodes = Vec::new();
    let mut columns = Vec::new();
    for pair in ast::named_children(columns_node).into_iter().filter(|p| p.kind_name() == "pair") {
        let (Some(key), Some(value)) = (pair_key(pair, src), pair.field("value")) else { continue };
        if value.kind_name() != "call_expression" {
            continue;
        }
        let chain: Vec<String> =
            ast::callee_path(value, src).into_iter().map(|s| s.trim_end_matches("()").to_string()).collect();
        let mut col_names = vec![key];
        // The base builder's database name: `text('event_id')`.
        let mut base = value;
        while let Some(inner) =
            base.field("function").and_then(|f| f.field("object")).filter(|o| o.kind_name() == "call_expression")
        {
            base = inner;
        }
        if let Some(db) = ast::arguments(base).first().and_then(|a| ast::string_value(*a, src)) {
            col_names.push(db);
        }
        let base_name = ast::callee_name(base, src).unwrap_or_default();
        columns.push(Column {
            names: col_names,
            unique: chain.iter().any(|c| c == "unique"),
            primary: chain.iter().any(|c| c == "primaryKey"),
            foreign: chain.iter().any(|c| c == "references"),
            textual: TEXTUAL.contains(&base_name.as_str()),
        });
        nodes.push((pair, value));
    }
    let sets = args.get(2).map(|extra| extra_sets(*extra, src)).unwrap_or_default();
    let plain_indexes = args.get(2).map(|extra| plain_indexes(*extra, src)).unwrap_or_default();
    Some(Table { names, columns, nodes, sets, plain_indexes })
}

/// The columns object: `{ ... }` or `(t) => ({ ... })`.
fn columns_object(arg: Node) -> Option<Node> {
    let arg = ast::unwrap_expr(arg);
    if arg.kind_name() == "object" {
        return Some(arg);
    }
    if ast::is_function(arg) {
        let body = ast::unwrap_expr(arg.field("body")?);
        if body.kind_name() == "object" {
            return Some(body);
        }
        if body.kind_name() == "statement_block" {
            let ret = ast::named_children(body).into_iter().rev().find(|s| s.kind_name() == "return_statement")?;
            let v = ast::unwrap_expr(ret.named_child(0)?);
            return (v.kind_name() == "object").then_some(v);
        }
    }
    None
}

/// `table.eventId`, also drizzle-kit's introspected `table.eventId.asc().nullsLast()`: the
/// column's name.
fn column_of(n: Node, src: &str) -> Option<String> {
    let mut n = ast::unwrap_expr(n);
    while n.kind_name() == "call_expression" {
        n = n.field("function")?.field("object")?;
    }
    ast::member_path(n, src).pop()
}

/// `index("name").on(table.a, ...)` (and drizzle-kit's `.using("btree", ...)`) in the
/// table's extra config.
fn plain_indexes<'t>(extra: Node<'t>, src: &str) -> Vec<PlainIndex<'t>> {
    let mut out = Vec::new();
    for call in ast::descendants_of_kind(extra, "call_expression") {
        let Some(inner) = call
            .field("function")
            .filter(|f| f.kind_name() == "member_expression")
            .and_then(|f| f.field("object"))
            .filter(|o| o.kind_name() == "call_expression")
        else {
            continue;
        };
        let Some(builder) = inner.field("function").filter(|f| f.kind_name() == "identifier") else {
            continue;
        };
        if ast::text(builder, src) != "index" {
            continue;
        }
        let Some(name) = ast::arguments(inner).first().and_then(|a| ast::string_value(*a, src)) else { continue };
        let skip = match ast::callee_name(call, src).as_deref() {
            Some("on") => 0,
            Some("using") => 1,
            _ => continue,
        };
        let columns = ast::arguments(call).iter().skip(skip).filter_map(|a| column_of(*a, src)).collect();
        out.push(PlainIndex { name, columns, call, builder });
    }
    out
}

/// Column lists of `primaryKey({ columns })`, `unique().on(..)`, `uniqueIndex().on(..)`.
fn extra_sets(extra: Node, src: &str) -> Vec<Vec<String>> {
    let last_prop = |n: Node| column_of(n, src);
    let mut sets = Vec::new();
    for call in ast::descendants_of_kind(extra, "call_expression") {
        let path = ast::callee_path_shared(call, src);
        let args = ast::arguments(call);
        match path.last().map(String::as_str) {
            Some("primaryKey") => {
                let cols = match args.first() {
                    Some(o) if o.kind_name() == "object" => ast::object_property(*o, "columns", src)
                        .map(|a| ast::named_children(a).into_iter().filter_map(last_prop).collect())
                        .unwrap_or_default(),
                    _ => args.iter().filter_map(|a| last_prop(*a)).collect(),
                };
                sets.push(cols);
            }
            Some("on") if path.iter().any(|p| p == "unique()" || p == "uniqueIndex()") => {
                sets.push(args.iter().filter_map(|a| last_prop(*a)).collect());
            }
            // drizzle-kit introspection: `uniqueIndex("n").using("btree", table.a.asc(), ...)`
            Some("using") if path.iter().any(|p| p == "uniqueIndex()") => {
                sets.push(args.iter().skip(1).filter_map(|a| last_prop(*a)).collect());
            }
            _ => {}
        }
    }
    sets
}
