//! Mongoose schemas: `new Schema({...})`, the model names they are registered under, and
//! `schema.index({...}, { unique: true })`.

use super::{Column, assigned_name, pair_key};
use crate::model::ast::{self, text};
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

/// A schema: its names (model names first, then the schema variable), its fields with
/// their `key: definition` pair and definition node, and its unique index key lists.
pub struct Schema<'t> {
    pub names: Vec<String>,
    pub columns: Vec<Column>,
    /// `(pair, value)` per column, in the order of `columns`.
    pub nodes: Vec<(Node<'t>, Node<'t>)>,
    pub sets: Vec<Vec<String>>,
    /// Keyed by a custom `_id`, which MongoDB keeps unique.
    pub custom_id: bool,
}

/// The Mongoose schemas defined in `file`.
pub fn schemas(file: &SourceFile) -> Vec<Schema<'_>> {
    let src = file.text.as_str();
    let root = file.root();
    let news = ast::descendants_of_kind(root, "new_expression");
    let calls = ast::descendants_of_kind(root, "call_expression");
    let mut out = Vec::new();
    for new in news {
        let ctor = ast::member_path(new.field("constructor").unwrap_or(new), src);
        if ctor.last().map(String::as_str) != Some("Schema") {
            continue;
        }
        let Some(fields) = new
            .field("arguments")
            .and_then(|a| a.named_child(0))
            .map(ast::unwrap_expr)
            .filter(|o| o.kind_name() == "object")
        else {
            continue;
        };
        let var = assigned_name(new, src);
        let mut names: Vec<String> = Vec::new();
        let mut sets = Vec::new();
        for call in &calls {
            let path = ast::callee_path_shared(*call, src);
            let args = ast::arguments(*call);
            // mongoose.model('ProcessedEvent', schema)
            if path.last().is_some_and(|l| l == "model")
                && let (Some(name), Some(schema)) = (args.first(), args.get(1))
                && (*schema == new || var.as_deref().is_some_and(|v| text(*schema, src) == v))
                && let Some(model) = ast::string_value(*name, src)
            {
                names.push(model);
            }
            // schema.index({ eventId: 1 }, { unique: true })
            if path.len() == 2
                && path[1] == "index"
                && var.as_deref() == Some(path[0].as_str())
                && let (Some(keys), Some(opts)) = (args.first(), args.get(1))
                && keys.kind_name() == "object"
                && opts.kind_name() == "object"
                && ast::object_property(*opts, "unique", src).is_some_and(|v| text(v, src) == "true")
            {
                sets.push(ast::named_children(*keys).into_iter().filter_map(|p| pair_key(p, src)).collect());
            }
        }
        // The model name first: it names the collection in the message.
        names.extend(var);
        out.push(schema(fields, names, sets, src));
    }
    out
}

fn schema<'t>(fields: Node<'t>, names: Vec<String>, sets: Vec<Vec<String>>, src: &str) -> Schema<'t> {
    let mut s = Schema { names, columns: Vec::new(), nodes: Vec::new(), sets, custom_id: false };
    for pair in ast::named_children(fields).into_iter().filter(|p| p.kind_name() == "pair") {
        let (Some(key), Some(value)) = (pair_key(pair, src), pair.field("value")) else { continue };
        if key == "_id" {
            if text(value, src) != "false" {
                s.custom_id = true;
            }
            continue;
        }
        let mut column = Column { names: vec![key], ..Column::default() };
        match value.kind_name() {
            "object" => {
                let is_true = |n: Option<Node>| n.is_some_and(|v| text(v, src) == "true");
                column.unique = is_true(ast::object_property(value, "unique", src))
                    || ast::object_property(value, "index", src)
                        .filter(|i| i.kind_name() == "object")
                        .is_some_and(|i| is_true(ast::object_property(i, "unique", src)));
                column.foreign = ast::object_property(value, "ref", src).is_some();
            }
            "identifier" | "member_expression" => {}
            _ => continue,
        }
        s.columns.push(column);
        s.nodes.push((pair, value));
    }
    s
}
