//! What a `x.query(...)` receiver is: a node-postgres `Pool` (every query may take a different
//! connection) or a single client (`await pool.connect()`, a `PoolClient` parameter).

use super::ast::{self, text};
use crate::project::{self, Project};
use crate::source::SourceFile;
use std::sync::Arc;
use tree_sitter::Node;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Receiver {
    Pool,
    Client,
    Unknown,
}

/// Classifies the receiver expression of a `query` call.
pub fn receiver_kind(project: &Project, file: &Arc<SourceFile>, receiver: Node) -> Receiver {
    let src = &file.text;
    let receiver = ast::unwrap_expr(receiver);
    match receiver.kind() {
        "identifier" => identifier_kind(project, file, receiver, text(receiver, src), 0),
        "member_expression" => {
            // this.pool / deps.db.pool: only the name is known.
            let name = receiver.child_by_field_name("property").map(|p| text(p, src)).unwrap_or("");
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
    match init.kind() {
        "new_expression" => {
            let ctor = init.child_by_field_name("constructor").map(|c| text(c, src)).unwrap_or("");
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
            return init_kind(init, src);
        }
    }
    if let Some(init) = ast::find_binding_init(file.root(), name, src, usize::MAX) {
        return init_kind(init, src);
    }
    if depth < 3
        && let Some(import) = project::imports(file).into_iter().find(|i| i.local == name)
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
        if stmt.kind() == "export_statement" && name == "default" {
            if let Some(value) = stmt.child_by_field_name("value") {
                let value = ast::unwrap_expr(value);
                return if value.kind() == "identifier" {
                    identifier_kind(project, file, value, text(value, src), depth)
                } else {
                    init_kind(value, src)
                };
            }
        }
        // module.exports = { pool } / module.exports.pool = pool / exports.pool = new Pool()
        if stmt.kind() == "expression_statement"
            && let Some(assign) = stmt.named_child(0).filter(|n| n.kind() == "assignment_expression")
            && let (Some(left), Some(right)) = (assign.child_by_field_name("left"), assign.child_by_field_name("right"))
        {
            let path = ast::member_path(left, src);
            let is_exports =
                path.first().is_some_and(|p| p == "exports") || path.get(1).is_some_and(|p| p == "exports");
            if !is_exports {
                continue;
            }
            if path.last().is_some_and(|p| p == name) && path.last().is_some_and(|p| p != "exports") {
                let right = ast::unwrap_expr(right);
                return if right.kind() == "identifier" {
                    identifier_kind(project, file, right, text(right, src), depth)
                } else {
                    init_kind(right, src)
                };
            }
            if right.kind() == "object"
                && let Some(v) = ast::object_property(right, name, src)
            {
                return if matches!(v.kind(), "identifier" | "shorthand_property_identifier") {
                    identifier_kind(project, file, v, text(v, src), depth)
                } else {
                    init_kind(v, src)
                };
            }
            if name == "*" || name == "default" {
                return init_kind(right, src);
            }
        }
    }
    if name != "default" && name != "*" {
        if let Some(init) = ast::find_binding_init(file.root(), name, src, usize::MAX) {
            return init_kind(init, src);
        }
    }
    by_name(name)
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
