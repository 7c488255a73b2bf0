//! Inserts that a unique constraint makes safe to repeat: the row sets every column of a
//! unique set of its table (Prisma `@id`/`@unique`/`@@id`/`@@unique`, Drizzle `uniqueIndex` or
//! `.unique()`), so a replay or a concurrent duplicate is rejected by the database.

use super::ast::{self, text};
use super::schema::{drizzle, mongoose, prisma, sql};
use crate::project::Project;
use crate::source::SourceFile;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::path::Path;
use std::sync::Arc;
use tree_sitter::Node;

/// A value made fresh on every call: a random or time-based id.
pub fn generated(value: &str) -> bool {
    let v = value.to_ascii_lowercase();
    ["uuid", "random", "cuid", "nanoid", "ulid", "date.now", "new date", "math."].iter().any(|r| v.contains(r))
}

/// The fields an object literal sets to a value that is not made fresh on every call.
pub fn row_fields(row: Node, src: &str) -> Vec<String> {
    ast::named_children(row)
        .into_iter()
        .filter_map(|p| match p.kind_name() {
            // A generated value (`id: crypto.randomUUID()`) is new on every delivery: it makes
            // no replay collide.
            "pair" if p.field("value").is_some_and(|v| generated(text(v, src))) => None,
            "pair" => p.field("key").map(|k| text(k, src).trim_matches(['"', '\'']).to_string()),
            "shorthand_property_identifier" => Some(text(p, src).to_string()),
            _ => None,
        })
        .collect()
}

/// Whether the insert `call` sets a unique set of its table (Prisma, Drizzle, supabase-js over
/// SQL migrations, or a Mongoose schema).
pub fn insert_sets_unique(project: &Project, file: &Arc<SourceFile>, call: Node) -> bool {
    !prisma_unique_sets_set(project, file, call).is_empty()
        || drizzle_insert_sets_unique(project, file, call)
        || supabase_insert_sets_unique(project, file, call)
        || mongoose_insert_sets_unique(project, file, call)
}

/// `Community.create({ username, ... })` or `new Community({ username, ... }).save()` (also
/// through a variable) where the Mongoose schema of `Community`, in this file or the module it
/// is imported from, marks a field the document sets `unique: true`, or has a unique index on
/// fields it sets: MongoDB rejects the replay with E11000.
fn mongoose_insert_sets_unique(project: &Project, file: &Arc<SourceFile>, call: Node) -> bool {
    let src = file.text.as_str();
    let Some((model, row)) = mongoose_model_and_row(call, src) else { return false };
    let fields = if row.kind_name() == "object" { row_fields(row, src) } else { Vec::new() };
    // `User.create(user)`, `Order.create({ ...order, buyer })`: the fields are not all written
    // here, but a field the schema requires is set on every document Mongoose accepts.
    let opaque =
        row.kind_name() != "object" || ast::named_children(row).iter().any(|c| c.kind_name() == "spread_element");
    let required = |definition: Node, schema_src: &str| {
        ast::object_property(definition, "required", schema_src)
            .is_some_and(|v| text(v, schema_src) == "true" || text(v, schema_src).starts_with("[true"))
    };
    let sets_unique = |schema: &mongoose::Schema, schema_src: &str| {
        schema.columns.iter().any(|c| c.unique && c.names.iter().any(|n| fields.contains(n)))
            || schema.sets.iter().any(|set| !set.is_empty() && set.iter().all(|f| fields.contains(f)))
            || opaque
                && schema
                    .columns
                    .iter()
                    .zip(&schema.nodes)
                    .any(|(c, (_, definition))| c.unique && required(*definition, schema_src))
    };
    let named = |schema: &mongoose::Schema| schema.names.iter().any(|n| n.eq_ignore_ascii_case(&model));
    let local = mongoose::schemas(file);
    if let Some(schema) = local.iter().find(|s| named(s)) {
        return sets_unique(schema, src);
    }
    let Some((_, module)) = project.imported_module(file, &model) else { return false };
    let schemas = mongoose::schemas(&module);
    match schemas.as_slice() {
        [only] => sets_unique(only, &module.text),
        many => many.iter().find(|s| named(s)).is_some_and(|s| sets_unique(s, &module.text)),
    }
}

/// The document a `save()` writes when it is built in the function: `new Model({...}).save()`,
/// or `const doc = new Model({...}); ...; doc.save()`.
pub fn saved_document<'t>(call: Node<'t>, src: &str) -> Option<Node<'t>> {
    let receiver = ast::method_receiver(call)?;
    let document = match receiver.kind_name() {
        "new_expression" => receiver,
        "identifier" => ast::enclosing_function(call)
            .and_then(|f| ast::find_binding_init(f, text(receiver, src), src, call.start_byte()))
            .map(ast::unwrap_expr)?,
        _ => return None,
    };
    (document.kind_name() == "new_expression").then_some(document)
}

/// The model a Mongoose insert writes and the document it writes (an object literal or any
/// other value): `Model.create({...})`, or a `save()` of `new Model({...})`, written in place
/// or bound to a variable first.
fn mongoose_model_and_row<'t>(call: Node<'t>, src: &str) -> Option<(String, Node<'t>)> {
    let path = ast::callee_path_shared(call, src);
    let constructed = |n: Node<'t>| {
        let n = ast::unwrap_expr(n);
        let ctor = n.field("constructor").filter(|_| n.kind_name() == "new_expression")?;
        let row = ast::arguments(n).first().map(|a| ast::unwrap_expr(*a))?;
        Some((text(ctor, src).rsplit('.').next()?.to_string(), row))
    };
    match path.last().map(|l| l.trim_end_matches("()")) {
        Some("save") => saved_document(call, src).and_then(constructed),
        Some("create") if path.len() == 2 => {
            let row = ast::arguments(call).first().map(|a| ast::unwrap_expr(*a))?;
            Some((path[0].trim_end_matches("()").to_string(), row))
        }
        _ => None,
    }
}

/// `supabase.from("users").insert({ clerk_id, email })` where the table, as the project's
/// `supabase/migrations` build it (a later `CREATE UNIQUE INDEX` or `ADD CONSTRAINT ... UNIQUE`
/// included), has a unique column or set the row sets in full.
fn supabase_insert_sets_unique(project: &Project, file: &SourceFile, call: Node) -> bool {
    let src = file.text.as_str();
    if ast::callee_name(call, src).as_deref() != Some("insert") {
        return false;
    }
    let Some(from) = ast::method_receiver(call).filter(|r| r.kind_name() == "call_expression") else { return false };
    if ast::callee_name(from, src).as_deref() != Some("from") {
        return false;
    }
    let Some(table) = ast::arguments(from).first().and_then(|a| ast::string_value(*a, src)) else { return false };
    let row = ast::arguments(call).first().map(|a| ast::unwrap_expr(*a)).and_then(|a| match a.kind_name() {
        "object" => Some(a),
        "array" => ast::named_children(a)
            .into_iter()
            .find(|e| e.kind_name() == "object")
            .filter(|_| a.named_child_count() == 1),
        _ => None,
    });
    let Some(row) = row else { return false };
    let fields = row_fields(row, src);
    let Some(migrations) = supabase_migrations_near(project, &file.path) else { return false };
    sql::replay(&migrations).iter().filter(|t| t.name.eq_ignore_ascii_case(&table)).any(|t| {
        t.columns
            .iter()
            .filter(|c| c.column.unique || c.column.primary)
            .any(|c| c.column.names.iter().any(|n| fields.contains(n)))
            || t.sets.iter().any(|set| !set.is_empty() && set.iter().all(|f| fields.contains(f)))
    })
}

/// The SQL files of the nearest `supabase/migrations` folder above `from` (eight levels at
/// most), in the order they are applied.
fn supabase_migrations_near(project: &Project, from: &Path) -> Option<Vec<(std::path::PathBuf, String)>> {
    from.ancestors().skip(1).take(8).find_map(|dir| {
        let folder = dir.join("supabase").join("migrations");
        let first = project.list_dir(&folder).into_iter().find(|(p, _)| {
            p.extension().is_some_and(|e| e == "sql")
                && p.file_name().and_then(|n| n.to_str()).and_then(sql::sequence).is_some()
        })?;
        let (set, _) = sql::migrations(project, &first.0, &first.1);
        (!set.is_empty()).then_some(set)
    })
}

/// The unique sets of a Prisma `create`'s model that its row sets in full (empty for any other
/// call): `@@unique([userId, albumId])` for `create({ data: { userId, albumId, price } })`.
pub fn prisma_unique_sets_set(project: &Project, file: &SourceFile, call: Node) -> Vec<Vec<String>> {
    let src = file.text.as_str();
    let callee = ast::callee_path(call, src);
    if callee.len() < 3 || !matches!(callee.last().map(String::as_str), Some("create" | "createMany")) {
        return Vec::new();
    }
    let model = callee[callee.len() - 2].as_str();
    let Some(data) = ast::arguments(call)
        .first()
        .filter(|a| a.kind_name() == "object")
        .and_then(|o| ast::object_property(*o, "data", src))
        .filter(|d| d.kind_name() == "object")
    else {
        return Vec::new();
    };
    let fields = row_fields(data, src);
    let Some(schema) = prisma_schema_near(project, &file.path) else { return Vec::new() };
    unique_sets(&schema, model)
        .into_iter()
        .filter(|set| !set.is_empty() && set.iter().all(|f| fields.contains(f)))
        .collect()
}

/// `db.insert(orders).values({ paymentIntentId, ... })` where the Drizzle table `orders` has
/// a unique index on the columns the row sets: a replay is rejected by the constraint.
pub fn drizzle_insert_sets_unique(project: &Project, file: &Arc<SourceFile>, call: Node) -> bool {
    let src = file.text.as_str();
    let mut values = None;
    let mut link = Some(call);
    while let Some(c) = link {
        match ast::callee_name(c, src).as_deref() {
            Some("values") => values = ast::arguments(c).first().map(|a| ast::unwrap_expr(*a)),
            Some("insert") => {
                let Some(table) = ast::arguments(c).first().copied().filter(|a| a.kind_name() == "identifier") else {
                    return false;
                };
                let Some(row) = values.filter(|v| v.kind_name() == "object") else { return false };
                let fields = row_fields(row, src);
                return drizzle::unique_sets_of(project, file, text(table, src))
                    .iter()
                    .any(|set| !set.is_empty() && set.iter().all(|f| fields.contains(f)));
            }
            _ => {}
        }
        link = ast::method_receiver(c).filter(|o| o.kind_name() == "call_expression");
    }
    false
}

/// The unique field sets of `model` (its name compared without case): single `@id`/`@unique`
/// fields and `@@id`/`@@unique` lists.
fn unique_sets(schema: &str, model: &str) -> Vec<Vec<String>> {
    prisma::models(schema)
        .into_iter()
        .filter(|m| m.names.first().is_some_and(|n| n.eq_ignore_ascii_case(model)))
        .flat_map(|m| {
            let singles: Vec<Vec<String>> = m
                .fields
                .iter()
                .filter(|f| f.column.unique || f.column.primary)
                .filter_map(|f| f.column.names.first().map(|n| vec![n.clone()]))
                .collect();
            singles.into_iter().chain(m.sets).collect::<Vec<_>>()
        })
        .collect()
}

/// The Prisma schema above `from`: `prisma/schema.prisma`, `schema.prisma`, or the files of a
/// `prisma/schema/` folder, in the nearest of eight parent directories. Read through the
/// project: loaded once, an editor's unsaved buffer included, and noted as a read so the fix
/// loop re-analyses the file when the schema changes.
fn prisma_schema_near(project: &Project, from: &Path) -> Option<String> {
    for dir in from.ancestors().skip(1).take(8) {
        for candidate in ["prisma/schema.prisma", "schema.prisma"] {
            if let Ok(file) = project.load(&dir.join(candidate)) {
                return Some(file.text.clone());
            }
        }
        let parts: Vec<String> = project
            .files_in(&dir.join("prisma/schema"))
            .iter()
            .filter(|p| p.extension().is_some_and(|x| x == "prisma"))
            .filter_map(|p| project.load(p).ok())
            .map(|f| f.text.clone())
            .collect();
        if !parts.is_empty() {
            return Some(parts.join("\n"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn unique_sets_from_schema() {
        let schema = "model Order {\n  id String @id @default(cuid())\n  sessionId String @unique\n  total Int\n  @@unique([shop, number])\n}\nmodel User { id Int @id }\n";
        let sets = super::unique_sets(schema, "order");
        assert!(sets.contains(&vec!["id".to_string()]));
        assert!(sets.contains(&vec!["sessionId".to_string()]));
        assert!(sets.contains(&vec!["shop".to_string(), "number".to_string()]));
        assert!(!sets.contains(&vec!["total".to_string()]));
    }
}
