//! What a `x.query(...)` receiver is: a node-postgres `Pool` (every query may take a different
//! connection) or a single client (`await pool.connect()`, a `PoolClient` parameter).

use super::ast::{self, text};
use crate::project::{self, Project};
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::sync::Arc;
use tree_sitter::Node;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receiver {
    Pool,
    /// A project object whose `query` forwards to a pool (`export default { query: (t, p) =>
    /// pool.query(t, p) }`, the node-postgres docs' layout): same problem, no `connect`.
    PoolWrapper,
    Client,
    Unknown,
}

/// Classifies the receiver expression of a `query` call.
pub fn receiver_kind(project: &Project, file: &Arc<SourceFile>, receiver: Node) -> Receiver {
    let src = &file.text;
    let receiver = ast::unwrap_expr(receiver);
    match receiver.kind_name() {
        "identifier" => identifier_kind(project, file, receiver, text(receiver, src), 0),
        "member_expression" => {
            // this.pool / deps.db.pool: only the name is known.
            let name = receiver.field("property").map(|p| text(p, src)).unwrap_or("");
            by_name(name)
        }
        _ => Receiver::Unknown,
    }
}

fn by_name(name: &str) -> Receiver {
    let lower = name.to_ascii_lowercase();
    if lower.contains("pool") && !lower.contains("client") {
        Receiver::Pool
    } else if lower.contains("client") || lower == "conn" || lower == "connection" || lower == "tx" {
        Receiver::Client
    } else {
        Receiver::Unknown
    }
}

/// What an initializer creates.
fn init_kind(init: Node, src: &str) -> Receiver {
    let init = ast::unwrap_expr(init);
    match init.kind_name() {
        "new_expression" => {
            let ctor = init.field("constructor").map(|c| text(c, src)).unwrap_or("");
            if ctor == "Pool" || ctor.ends_with(".Pool") {
                Receiver::Pool
            } else if ctor == "Client" || ctor.ends_with(".Client") {
                Receiver::Client
            } else {
                Receiver::Unknown
            }
        }
        "call_expression" => {
            let name = ast::callee_name(init, src).unwrap_or_default();
            if name == "connect" { Receiver::Client } else { Receiver::Unknown }
        }
        _ => Receiver::Unknown,
    }
}

fn identifier_kind(project: &Project, file: &Arc<SourceFile>, at: Node, name: &str, depth: usize) -> Receiver {
    let src = &file.text;
    // A parameter of an enclosing function: its type, else its name.
    for func in ast::ancestors(at).filter(|a| ast::is_function(*a)) {
        let params = ast::parameter_names(func, src);
        if let Some(i) = params.iter().position(|p| p == name) {
            return match ast::parameter_type(func, i, src) {
                Some(t) if t == "Pool" || t.ends_with(".Pool") => Receiver::Pool,
                Some(t) if t.contains("Client") => Receiver::Client,
                _ => match by_name(name) {
                    Receiver::Pool => Receiver::Pool,
                    // A client handed to a helper is the caller's transaction.
                    _ => Receiver::Client,
                },
            };
        }
        if let Some(init) = ast::find_binding_init(func, name, src, at.start_byte()) {
            return value_kind(project, file, init, depth);
        }
    }
    if let Some(init) = ast::find_binding_init(file.root(), name, src, usize::MAX)
        && ast::callee_name(ast::unwrap_expr(init), src).is_none_or(|n| n != "require")
    {
        return value_kind(project, file, init, depth);
    }
    if depth < 3
        && let Some(import) = project::imports(file).iter().find(|i| i.local == name)
        && let Some(target) = project.resolve(&file.path, &import.source)
        && let Ok(target) = project.load(&target)
    {
        return exported_kind(project, &target, &import.imported, depth + 1);
    }
    by_name(name)
}

/// What `file` exports under `name` (`export const pool = new Pool()`, `export default pool`).
fn exported_kind(project: &Project, file: &Arc<SourceFile>, name: &str, depth: usize) -> Receiver {
    let src = &file.text;
    for stmt in ast::named_children(file.root()) {
        if stmt.kind_name() == "export_statement" && name == "default" {
            if let Some(value) = stmt.field("value") {
                let value = ast::unwrap_expr(value);
                return if value.kind_name() == "identifier" {
                    identifier_kind(project, file, value, text(value, src), depth)
                } else {
                    value_kind(project, file, value, depth)
                };
            }
        }
        // module.exports = { pool } / module.exports.pool = pool / exports.pool = new Pool()
        if stmt.kind_name() == "expression_statement"
            && let Some(assign) = stmt.named_child(0).filter(|n| n.kind_name() == "assignment_expression")
            && let (Some(left), Some(right)) = (assign.field("left"), assign.field("right"))
        {
            let path = ast::member_path(left, src);
            let is_exports =
                path.first().is_some_and(|p| p == "exports") || path.get(1).is_some_and(|p| p == "exports");
            if !is_exports {
                continue;
            }
            if path.last().is_some_and(|p| p == name) && path.last().is_some_and(|p| p != "exports") {
                let right = ast::unwrap_expr(right);
                return if right.kind_name() == "identifier" {
                    identifier_kind(project, file, right, text(right, src), depth)
                } else {
                    value_kind(project, file, right, depth)
                };
            }
            if right.kind_name() == "object"
                && name != "*"
                && name != "default"
                && let Some(v) = ast::object_property(right, name, src)
            {
                return if matches!(v.kind_name(), "identifier" | "shorthand_property_identifier") {
                    identifier_kind(project, file, v, text(v, src), depth)
                } else {
                    init_kind(v, src)
                };
            }
            if name == "*" || name == "default" {
                return value_kind(project, file, right, depth);
            }
        }
    }
    if name == "*"
        && let Some(def) = project.exported_function(file, "query", 0)
        && def.node().is_some_and(|f| wraps_pool(project, &def.file, f, depth))
    {
        return Receiver::PoolWrapper;
    }
    if name != "default" && name != "*" {
        if let Some(init) = ast::find_binding_init(file.root(), name, src, usize::MAX) {
            return value_kind(project, file, init, depth);
        }
    }
    by_name(name)
}

/// What a value creates, including objects whose `query` forwards to a pool.
fn value_kind(project: &Project, file: &Arc<SourceFile>, value: Node, depth: usize) -> Receiver {
    let src = &file.text;
    let value = ast::unwrap_expr(value);
    if value.kind_name() == "object"
        && let Some(query) = ast::object_property(value, "query", src)
    {
        let query = ast::unwrap_expr(query);
        if query.kind_name() == "shorthand_property_identifier" {
            return match project::local_function(file, text(query, src)) {
                Some(def) if def.node().is_some_and(|f| wraps_pool(project, file, f, depth)) => Receiver::PoolWrapper,
                _ => Receiver::Unknown,
            };
        }
        if ast::is_function(query) && wraps_pool(project, file, query, depth) {
            return Receiver::PoolWrapper;
        }
        return Receiver::Unknown;
    }
    init_kind(value, src)
}

/// Whether a function forwards to `pool.query(...)` on a pool.
pub fn wraps_pool(project: &Project, file: &Arc<SourceFile>, func: Node, depth: usize) -> bool {
    let src = &file.text;
    depth < 4
        && ast::calls_in(func, true).into_iter().any(|c| {
            let Some(f) = c.field("function").filter(|f| f.kind_name() == "member_expression") else {
                return false;
            };
            f.field("property").is_some_and(|p| text(p, src) == "query")
                && f.field("object").is_some_and(|o| {
                    o.kind_name() == "identifier"
                        && identifier_kind(project, file, o, text(o, src), depth + 1) == Receiver::Pool
                })
        })
}

/// `BEGIN` / `START TRANSACTION` sent as its own statement.
pub fn is_begin(sql: &str) -> bool {
    let u = sql.trim_start_matches(['`', '"', '\'']).trim_start().to_ascii_uppercase();
    (u.starts_with("BEGIN") || u.starts_with("START TRANSACTION")) && !u.contains("COMMIT")
}

pub fn is_end(sql: &str) -> bool {
    let u = sql.trim_start_matches(['`', '"', '\'']).trim_start().to_ascii_uppercase();
    u.starts_with("COMMIT") || u.starts_with("ROLLBACK") || u.starts_with("END")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_and_names() {
        assert!(
            is_begin("'BEGIN'")
                && is_begin("\"start transaction\"")
                && is_begin("`BEGIN ISOLATION LEVEL SERIALIZABLE`")
        );
        assert!(!is_begin("`BEGIN; INSERT INTO t VALUES (1); COMMIT;`"));
        assert!(is_end("'COMMIT'") && is_end("'ROLLBACK'") && !is_end("'INSERT INTO x'"));
        assert_eq!(by_name("pool"), Receiver::Pool);
        assert_eq!(by_name("pgPool"), Receiver::Pool);
        assert_eq!(by_name("poolClient"), Receiver::Client);
        assert_eq!(by_name("db"), Receiver::Unknown);
    }
}
