//! dedupe-key-not-unique

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::{Edit, Fix};
use crate::model::ast::{self, text};
use crate::model::schema::{self, drizzle, mongoose, prisma, sql};
use crate::source::{Dialect, SourceFile};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use std::path::PathBuf;
use std::sync::Arc;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A processed-events (dedupe marker) table or model whose key column (`id`, `eventId`,
`event_id`, `idempotency_key`, `stripe_event_id`, `key`, ...) has neither a primary key nor
a unique constraint. Read from Prisma schemas (`schema.prisma`, `prisma/schema/*.prisma`),
SQL migrations (`*.sql`), Drizzle tables (`pgTable`, `mysqlTable`, `sqliteTable`) and
Mongoose schemas.

## Why retries break it
Every dedupe pattern (claim-then-work in a transaction, `INSERT ... ON CONFLICT DO NOTHING`,
`skipDuplicates`, `E11000`/`P2002`/`23505` handling) relies on the database rejecting the
second insert of the same key. Without a unique constraint, two concurrent deliveries of one
event both insert their marker row and both run the handler's work: the dedupe only works
when deliveries are far enough apart to see each other's row.

## Bad
```prisma
model ProcessedEvent {
  id        Int      @id @default(autoincrement())
  eventId   String
  createdAt DateTime @default(now())
}
```

## Good
```prisma
model ProcessedEvent {
  id        Int      @id @default(autoincrement())
  eventId   String   @unique
  createdAt DateTime @default(now())
}
```

## Fix (safe)
Prisma: adds `@unique` to the field. Drizzle: appends `.unique()` to the column builder.
Mongoose: adds `unique: true` (the shorthand `eventId: String` becomes
`{ type: String, unique: true }`; Mongoose builds it as an index, so `autoIndex` or
`syncIndexes()` must run). SQL: an applied migration is never edited; the fix creates a NEW
migration in the folder's own naming style (next number, or the latest timestamp plus one
second; Prisma's `<timestamp>_<name>/migration.sql` directories; `.up.sql`/`.down.sql`
pairs) holding `CREATE UNIQUE INDEX <table>_<column>_key ON <table> (<column>)`, the name
Prisma gives the same index. Index creation fails if duplicate rows already exist: remove
them first. In a drizzle-kit folder (`meta/_journal.json`) a hand-written migration would
not be applied, and a lone `.sql` file outside a numbered series is not known to be a
migration: there the fix is display-only.

## Decisions
- A table is a marker table when its name (model name, `@@map`, SQL name, Drizzle name or
  variable, Mongoose model or schema variable) names processed/handled/deduplicated events,
  an inbox or idempotency keys, or webhook/provider events (`stripe_events`). Generic
  `*_events` tables (`calendar_events`, `analytics_events`) are only checked for explicit
  idempotency/dedupe key columns, so an analytics table's `event_id` is not reported; a bare
  `Event`/`events` model (often a calendar) only for `eventId` or a provider-prefixed event
  id (`stripeEventId`), or a textual `id` in a table with no key at all.
- The key column is, in order: an idempotency/dedupe key column, an event id column
  (`event_id`, `stripe_event_id`, `delivery_id`, `svix_id`), then (for dedupe tables)
  `message_id`/`key`/`job_id`, then `id`. A column that is a foreign key (`@relation`,
  `REFERENCES`, `.references()`, `ref:`) is not a dedupe key (an outgoing deliveries table).
- A composite unique constraint or primary key that includes the column counts (dedupe per
  provider, `@@unique([provider, eventId])`). A later migration's unique index counts.
- A Mongoose schema with a custom `_id` is keyed by `_id`, which is always unique.
- A plain index whose own name says it deduplicates (`index("grants_source_dedupe_idx")` in
  Drizzle, `@@index([...], map: "..._idempotency_idx")` in Prisma) is reported on any table:
  its author meant to keep equal rows out and it lets them in. Not when a unique column or a
  unique set shares a column with it (a lookup index beside the real unique key). The fix
  renames it to `uniqueIndex` (importing it beside `index`) or `@@unique` (review). SQL
  migrations' `CREATE INDEX` are not read for this yet.
- A log of webhooks the app SENDS (a target URL, endpoint or subscriber column, or the
  receiver's response status) repeats its event id once per endpoint and attempt: not a
  dedupe marker, unless its name says processed/idempotency/inbox.
- A table that keeps a signing secret (`secret`, `signing_secret`) registers a webhook
  endpoint, one row per endpoint, whatever its name (`inbox_webhook`): not a dedupe marker.
- A dedupe-named plain index over timestamp columns only (`idempotency_keys_created_at_idx`)
  serves cleanup by age: equal times are not duplicates.
- The schema readers live in `src/model/schema/` (Prisma, SQL migrations, Drizzle, Mongoose).
- Not read (yet): Knex and TypeORM schemas, and tables whose name does not say what they hold
  even when a handler uses them as its dedupe marker.
"#;

pub const RULE: Rule = Rule {
    id: "dedupe-key-not-unique",
    summary: "processed-events key column is not unique: concurrent duplicates both insert their claim and both run",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    safe_fixes: false,
    preview: false,
    check,
};

/// A unique key is right for a processed-events table and wrong for a log where many rows
/// share the key: only a reviewer knows which one the table is.
const SCHEMA_REVIEW: &str = "review: a schema change; if rows may share this key (an event log, a product id), \
    the index build fails or every later insert with the same key is rejected";

const HELP: &str =
    "make the key a primary key or unique: the second claim of an event must fail with a unique violation";

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    let file = cx.file;
    if file.dialect == Dialect::Text {
        let ext = file.path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        match ext.as_str() {
            "prisma" => check_prisma(cx, file, out),
            "sql" => check_sql(cx, out),
            _ => {}
        }
        return;
    }
    let t = &file.text;
    if t.contains("Table") {
        check_drizzle(cx, file, out);
    }
    if t.contains("Schema") {
        check_mongoose(cx, file, out);
    }
}

fn message(table: &str, column: &str) -> String {
    format!(
        "`{table}.{column}` is a dedupe key without a unique constraint: two concurrent deliveries of one event both insert their marker and both run (concurrent duplicate)"
    )
}

fn text_diagnostic(
    cx: &Context,
    file: &Arc<SourceFile>,
    start: usize,
    end: usize,
    msg: String,
    fix: impl FnOnce() -> Fix,
) -> Diagnostic {
    let mut d = Diagnostic::new(RULE.id, file, file.root(), msg).help(HELP).with_fix(cx, fix);
    d.start = start;
    d.end = end;
    d
}

// ---------------------------------------------------------------------------------------

fn check_prisma(cx: &Context, file: &Arc<SourceFile>, out: &mut Vec<Diagnostic>) {
    for m in prisma::models(&file.text) {
        let columns: Vec<schema::Column> = m.fields.iter().map(|f| f.column.clone()).collect();
        let model = &m.names[0];
        if let Some(i) = schema::dedupe_key_gap(&m.names, &columns, &m.sets) {
            let field = &m.fields[i];
            let name = &field.column.names[0];
            let fix = || {
                Fix::unsafe_(format!("add `@unique` to `{model}.{name}`"), vec![Edit::insert(field.end, " @unique")])
                    .with_note(SCHEMA_REVIEW)
            };
            out.push(text_diagnostic(cx, file, field.start, field.end, message(model, name), fix));
        }
        for index in m.plain_indexes.iter().filter(|x| schema::dedupe_index_gap(&x.name, &x.columns, &columns, &m.sets))
        {
            let title = format!("make `{}` a `@@unique`", index.name);
            let fix = || {
                if index.typed {
                    Fix::display_only(title, "`@@unique` takes no index `type:`: declare the unique constraint by hand")
                } else {
                    Fix::unsafe_(title, vec![Edit::replace(index.start, index.end, "@@unique")])
                        .with_note(SCHEMA_REVIEW)
                }
            };
            let msg = plain_index_message(&index.name, model, &index.columns);
            out.push(text_diagnostic(cx, file, index.start, index.end, msg, fix));
        }
    }
}

fn plain_index_message(index: &str, table: &str, columns: &[String]) -> String {
    format!(
        "index `{index}` on `{table}` ({}) is named for deduplication but is not unique: two concurrent deliveries of one event both insert their row and both run (concurrent duplicate)",
        columns.join(", ")
    )
}

/// The statements of the new migration and its down counterpart.
fn index_sql(found: &[(&sql::Table, &sql::SqlColumn)], mysql: bool, eol: &str) -> (String, String) {
    let mut up = format!(
        "-- retrysafe: a dedupe claim is only atomic when its key is unique.{eol}-- If this fails, remove the duplicate rows first.{eol}"
    );
    let mut down = String::new();
    for (t, c) in found {
        let quote =
            sql::split_qualified(&t.raw).pop().and_then(|l| l.chars().next()).filter(|q| *q == '"' || *q == '`');
        let bare = format!("{}_{}_key", t.name, c.column.names[0]);
        let index = match quote {
            Some(q) => format!("{q}{bare}{q}"),
            None => bare,
        };
        if mysql {
            up.push_str(&format!("CREATE UNIQUE INDEX {index} ON {} ({});{eol}", t.raw, c.raw));
            down.push_str(&format!("DROP INDEX {index} ON {};{eol}", t.raw));
        } else {
            up.push_str(&format!("CREATE UNIQUE INDEX IF NOT EXISTS {index} ON {} ({});{eol}", t.raw, c.raw));
            down.push_str(&format!("DROP INDEX IF EXISTS {index};{eol}"));
        }
    }
    (up, down)
}

fn check_sql(cx: &Context, out: &mut Vec<Diagnostic>) {
    let file = cx.file;
    if !sql::mentions_marker(&sql::mask(&file.text)) {
        return;
    }
    let (set, layout) = sql::migrations(cx.project, &file.path, &file.text);
    let tables = sql::replay(&set);
    let found = sql::findings(&tables);
    let here: Vec<&(&sql::Table, &sql::SqlColumn)> =
        found.iter().filter(|(_, c)| crate::project::normalize(&c.file) == file.path).collect();
    if here.is_empty() {
        return;
    }
    let eol = file.style().eol;
    let (up, down) = index_sql(&found, sql::is_mysql(&set, &layout, &found), eol);
    let last = set.last().map(|(p, _)| p.clone()).unwrap_or_else(|| file.path.clone());
    const NAME: &str = "unique_dedupe_keys";
    let new_files: Option<Vec<(PathBuf, String)>> = match &layout {
        sql::Layout::Dirs { root, file_name, down: has_down } => {
            let last_dir = last.parent().and_then(|d| d.file_name()).and_then(|n| n.to_str()).unwrap_or("");
            sql::sequence(last_dir).map(|(letters, digits, sep)| {
                let dir = root.join(format!("{letters}{}{sep}{NAME}", sql::next_sequence(&digits)));
                let mut files = vec![(dir.join(file_name), up.clone())];
                if *has_down {
                    files.push((dir.join(file_name.replace("up", "down")), down.clone()));
                }
                files
            })
        }
        sql::Layout::Flat { dir, up_suffix, down: has_down } => {
            let last_name = last.file_name().and_then(|n| n.to_str()).unwrap_or("");
            sql::sequence(last_name).map(|(letters, digits, sep)| {
                let stem = format!("{letters}{}{sep}{NAME}", sql::next_sequence(&digits));
                let mut files = Vec::new();
                if *up_suffix {
                    files.push((dir.join(format!("{stem}.up.sql")), up.clone()));
                } else {
                    files.push((dir.join(format!("{stem}.sql")), up.clone()));
                }
                if *has_down {
                    files.push((dir.join(format!("{stem}.down.sql")), down.clone()));
                }
                files
            })
        }
        sql::Layout::DrizzleKit | sql::Layout::Lone => None,
    };
    for (t, c) in here {
        let title = format!("add a migration with a unique index on `{}.{}`", t.name, c.column.names[0]);
        let fix = || match (&new_files, &layout) {
            (Some(files), _) => {
                let mut fix = Fix::unsafe_(title, Vec::new());
                fix.new_files = files.clone();
                fix.note = Some(format!("{SCHEMA_REVIEW}; an applied migration is never edited"));
                fix
            }
            (None, sql::Layout::DrizzleKit) => Fix::display_only(
                title,
                "drizzle-kit applies only migrations listed in meta/_journal.json: add `.unique()` to the Drizzle table and run `drizzle-kit generate`",
            ),
            (None, _) => Fix::display_only(
                title,
                "this file is not part of a numbered migration folder: add the unique index in a new migration",
            ),
        };
        out.push(text_diagnostic(cx, file, c.start, c.end, message(&t.name, &c.column.names[0]), fix));
    }
}

fn check_drizzle(cx: &Context, file: &Arc<SourceFile>, out: &mut Vec<Diagnostic>) {
    for t in drizzle::tables(file) {
        if let Some(i) = schema::dedupe_key_gap(&t.names, &t.columns, &t.sets) {
            let (pair, value) = t.nodes[i];
            let key = &t.columns[i].names[0];
            let fix = || {
                Fix::unsafe_(
                    format!("append `.unique()` to `{key}`"),
                    vec![Edit::insert(value.end_byte(), ".unique()")],
                )
                .with_note(SCHEMA_REVIEW)
            };
            out.push(Diagnostic::new(RULE.id, file, pair, message(&t.names[0], key)).help(HELP).with_fix(cx, fix));
        }
        for index in
            t.plain_indexes.iter().filter(|x| schema::dedupe_index_gap(&x.name, &x.columns, &t.columns, &t.sets))
        {
            let fix = || {
                let mut edits =
                    vec![Edit::replace(index.builder.start_byte(), index.builder.end_byte(), "uniqueIndex")];
                edits.extend(import_unique_index(file));
                Fix::unsafe_(format!("make `{}` a `uniqueIndex`", index.name), edits).with_note(SCHEMA_REVIEW)
            };
            let msg = plain_index_message(&index.name, &t.names[0], &index.columns);
            out.push(Diagnostic::new(RULE.id, file, index.call, msg).help(HELP).with_fix(cx, fix));
        }
    }
}

/// `uniqueIndex` added beside the `index` named import from Drizzle, unless already imported.
fn import_unique_index(file: &SourceFile) -> Option<Edit> {
    let src = file.text.as_str();
    let mut index_specifier = None;
    for import in ast::named_children(file.root()).into_iter().filter(|n| n.kind_name() == "import_statement") {
        let from_drizzle = import
            .field("source")
            .and_then(|s| ast::string_value(s, src))
            .is_some_and(|m| m.starts_with("drizzle-orm"));
        if !from_drizzle {
            continue;
        }
        for specifier in ast::descendants_of_kind(import, "import_specifier") {
            let name = specifier.field("name").map(|n| text(n, src));
            let alias = specifier.field("alias");
            match name {
                Some("uniqueIndex") => return None,
                Some("index") if alias.is_none() => index_specifier = Some(specifier),
                _ => {}
            }
        }
    }
    index_specifier.map(|s| Edit::insert(s.end_byte(), ", uniqueIndex"))
}

fn check_mongoose(cx: &Context, file: &Arc<SourceFile>, out: &mut Vec<Diagnostic>) {
    let src = file.text.as_str();
    for s in mongoose::schemas(file) {
        if s.custom_id {
            continue;
        }
        let Some(i) = schema::dedupe_key_gap(&s.names, &s.columns, &s.sets) else { continue };
        // `id` is a virtual in Mongoose, not a stored key.
        if s.columns[i].names[0] == "id" {
            continue;
        }
        let (pair, value) = s.nodes[i];
        let key = &s.columns[i].names[0];
        let edit = match value.kind_name() {
            "object" => match ast::object_property(value, "unique", src) {
                Some(v) => Edit::replace(v.start_byte(), v.end_byte(), "true"),
                None => append_property(value, "unique: true", src),
            },
            _ => Edit::replace(
                value.start_byte(),
                value.end_byte(),
                format!("{{ type: {}, unique: true }}", text(value, src)),
            ),
        };
        let fix = || {
            Fix::unsafe_(format!("add `unique: true` to `{key}`"), vec![edit]).with_note(format!(
                "{SCHEMA_REVIEW}; Mongoose builds `unique` as an index: autoIndex or `syncIndexes()` must run"
            ))
        };
        let table = s.names.first().cloned().unwrap_or_default();
        out.push(Diagnostic::new(RULE.id, file, pair, message(&table, key)).help(HELP).with_fix(cx, fix));
    }
}

/// Adds `prop` as the last property of an object literal, in its layout.
fn append_property(object: Node, prop: &str, src: &str) -> Edit {
    let props: Vec<Node> = ast::named_children(object).into_iter().filter(|c| c.kind_name() != "comment").collect();
    let Some(last) = props.last() else {
        return Edit::replace(object.start_byte(), object.end_byte(), format!("{{ {prop} }}"));
    };
    let close = object.end_byte() - 1;
    let after = &src[last.end_byte()..close];
    let trailing_comma = after.trim_start().starts_with(',');
    let between = &src[object.start_byte() + 1..props[0].start_byte()];
    if between.contains('\n') {
        let indent = &between[between.rfind('\n').map_or(0, |i| i + 1)..];
        let eol = if between.contains("\r\n") { "\r\n" } else { "\n" };
        if trailing_comma {
            let comma = last.end_byte() + after.find(',').unwrap_or(0) + 1;
            Edit::insert(comma, format!("{eol}{indent}{prop},"))
        } else {
            Edit::insert(last.end_byte(), format!(",{eol}{indent}{prop}"))
        }
    } else if trailing_comma {
        let comma = last.end_byte() + after.find(',').unwrap_or(0) + 1;
        Edit::insert(comma, format!(" {prop},"))
    } else {
        Edit::insert(last.end_byte(), format!(", {prop}"))
    }
}
