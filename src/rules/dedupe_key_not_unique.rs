//! dedupe-key-not-unique

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::{Edit, Fix};
use crate::model::ast::{self, text};
use crate::model::guards::is_marker_name;
use crate::source::{Dialect, SourceFile};
use regex::Regex;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
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
- Not read (yet): Knex and TypeORM schemas, and tables whose name does not say what they hold
  even when a handler uses them as its dedupe marker.
"#;

pub const RULE: Rule = Rule {
    id: "dedupe-key-not-unique",
    summary: "processed-events key column is not unique: concurrent duplicates both insert their claim and both run",
    docs: DOCS,
    fix: FixAvailability::Sometimes,
    check,
};

const HELP: &str =
    "make the key a primary key or unique: the second claim of an event must fail with a unique violation";

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    let file = cx.file;
    if file.dialect == Dialect::Text {
        let ext = file.path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        match ext.as_str() {
            "prisma" => prisma::check(file, out),
            "sql" => sql::check(cx, out),
            _ => {}
        }
        return;
    }
    let t = &file.text;
    if t.contains("Table") {
        drizzle::check(file, out);
    }
    if t.contains("Schema") {
        mongoose::check(file, out);
    }
}

// ---------------------------------------------------------------------------------------
// Which tables are dedupe markers and which column is their key.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Strength {
    /// `analytics_events`: only explicit idempotency/dedupe key columns.
    Weak,
    /// `events`, `Event`: often a calendar or analytics model, so only `eventId`, a
    /// provider-prefixed event id, and a textual `id` that is not already keyed.
    Bare,
    /// `stripe_events`, `events`, `seen_messages`: event id columns and a textual `id`.
    Provider,
    /// `processed_events`, `idempotency_keys`: any key column.
    Strong,
}

fn normalized(name: &str) -> String {
    name.trim_matches(['"', '`', '[', ']']).to_ascii_lowercase().replace(['_', '-'], "")
}

fn table_strength(names: &[String]) -> Option<Strength> {
    let mut best = None;
    for name in names.iter().filter(|n| is_marker_name(n)) {
        let n = normalized(name);
        const STRONG: &[&str] = &[
            "processed",
            "handled",
            "dedup",
            "idempot",
            "inbox",
            "webhookevent",
            "webhooklog",
            "eventlog",
            "receivedevent",
            "consumed",
        ];
        const PROVIDER: &[&str] = &[
            "webhook",
            "stripe",
            "github",
            "shopify",
            "svix",
            "clerk",
            "paddle",
            "paystack",
            "flutterwave",
            "razorpay",
            "paypal",
            "square",
            "lemonsqueezy",
            "resend",
            "twilio",
            "slack",
            "linear",
            "seen",
        ];
        let s = if STRONG.iter().any(|w| n.contains(w)) {
            Strength::Strong
        } else if PROVIDER.iter().any(|w| n.contains(w)) {
            Strength::Provider
        } else if n == "event" || n == "events" {
            Strength::Bare
        } else {
            Strength::Weak
        };
        best = best.max(Some(s));
    }
    best
}

/// How well a column name fits a dedupe key for a table of `strength`: lower is better.
fn key_tier(column: &str, strength: Strength) -> Option<u8> {
    let n = normalized(column);
    if ["idempotencykey", "idempotencyid", "dedupekey", "dedupkey", "dedupeid", "dedupid"].contains(&n.as_str()) {
        return Some(0);
    }
    if strength == Strength::Weak {
        return None;
    }
    if strength == Strength::Bare {
        const PREFIXES: &[&str] =
            &["", "stripe", "github", "shopify", "svix", "clerk", "paddle", "webhook", "provider"];
        return match n.as_str() {
            "id" => Some(3),
            _ if PREFIXES.iter().any(|p| n == format!("{p}eventid")) => Some(1),
            _ => None,
        };
    }
    if n.ends_with("eventid") || n.ends_with("deliveryid") || n == "svixid" || n == "eventkey" {
        return Some(1);
    }
    if strength == Strength::Strong && ["messageid", "key", "webhookid", "jobid"].contains(&n.as_str()) {
        return Some(2);
    }
    if n == "id" {
        return Some(3);
    }
    None
}

/// A column as every schema kind describes it.
#[derive(Clone, Debug, Default)]
struct Column {
    /// The name in code and, when different, the database name.
    names: Vec<String>,
    unique: bool,
    primary: bool,
    foreign: bool,
    textual: bool,
}

/// The index of the table's dedupe key column when it is not unique. `unique_sets` are the
/// column lists of table-level primary keys and unique constraints.
fn non_unique_key(columns: &[Column], unique_sets: &[Vec<String>], strength: Strength) -> Option<usize> {
    let has_pk = columns.iter().any(|c| c.primary) || !unique_sets.is_empty();
    let mut best: Option<(u8, usize)> = None;
    for (i, c) in columns.iter().enumerate() {
        if c.foreign {
            continue;
        }
        let Some(tier) = c.names.iter().filter_map(|n| key_tier(n, strength)).min() else { continue };
        // A generic `id` only stands for the event id in a table without any other key.
        if tier == 3 && strength < Strength::Strong && (!c.textual || has_pk) {
            continue;
        }
        if best.is_none_or(|(t, _)| tier < t) {
            best = Some((tier, i));
        }
    }
    let (_, i) = best?;
    let c = &columns[i];
    let in_set =
        unique_sets.iter().any(|set| set.iter().any(|s| c.names.iter().any(|n| normalized(n) == normalized(s))));
    if c.unique || c.primary || in_set { None } else { Some(i) }
}

fn message(table: &str, column: &str) -> String {
    format!(
        "`{table}.{column}` is a dedupe key without a unique constraint: two concurrent deliveries of one event both insert their marker and both run (concurrent duplicate)"
    )
}

fn text_diagnostic(file: &Arc<SourceFile>, start: usize, end: usize, msg: String, fix: Fix) -> Diagnostic {
    let mut d = Diagnostic::new(RULE.id, file, file.root(), msg).help(HELP).with_fix(Some(fix));
    d.start = start;
    d.end = end;
    d
}

// ---------------------------------------------------------------------------------------

mod prisma {
    use super::*;

    /// A `model` block: its names (model, `@@map`), fields, `@@id`/`@@unique` lists and
    /// the fields used as foreign keys in `@relation(fields: [...])`.
    #[derive(Default)]
    struct Model {
        names: Vec<String>,
        fields: Vec<Field>,
        sets: Vec<Vec<String>>,
        foreign: Vec<String>,
    }

    struct Field {
        start: usize,
        /// End of the field's code (before a trailing comment).
        end: usize,
        column: Column,
    }

    /// The line with its `//` comment cut, outside strings.
    fn code_of(line: &str) -> &str {
        let mut in_str = false;
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'"' => in_str = !in_str,
                b'\\' if in_str => i += 1,
                b'/' if !in_str && b.get(i + 1) == Some(&b'/') => return &line[..i],
                _ => {}
            }
            i += 1;
        }
        line
    }

    fn list_items(s: &str) -> Vec<String> {
        let Some(open) = s.find('[') else { return Vec::new() };
        let Some(close) = s[open..].find(']') else { return Vec::new() };
        s[open + 1..open + close]
            .split(',')
            .map(|i| i.trim().split(['(', ' ']).next().unwrap_or("").to_string())
            .filter(|i| !i.is_empty())
            .collect()
    }

    pub fn check(file: &Arc<SourceFile>, out: &mut Vec<Diagnostic>) {
        static MODEL: OnceLock<Regex> = OnceLock::new();
        static FIELD: OnceLock<Regex> = OnceLock::new();
        static MAP: OnceLock<Regex> = OnceLock::new();
        static ATTR: OnceLock<Regex> = OnceLock::new();
        let model_re = MODEL.get_or_init(|| Regex::new(r"^\s*model\s+(\w+)\s*\{\s*$").unwrap());
        let field_re = FIELD.get_or_init(|| Regex::new(r"^\s*(\w+)\s+([\w.]+)(\[\])?\??(.*)$").unwrap());
        let map_re = MAP.get_or_init(|| Regex::new(r#"@map\(\s*(?:name:\s*)?"([^"]+)""#).unwrap());
        let attr_re = ATTR.get_or_init(|| Regex::new(r"(^|[^@\w])@(id|unique)\b").unwrap());

        let text = &file.text;
        let mut offset = 0;
        let mut model: Option<Model> = None;
        for raw in text.split_inclusive('\n') {
            let line_start = offset;
            offset += raw.len();
            let line = raw.trim_end_matches(['\n', '\r']);
            let code = code_of(line);
            let trimmed = code.trim();
            match &mut model {
                None => {
                    if let Some(c) = model_re.captures(code) {
                        model = Some(Model { names: vec![c[1].to_string()], ..Model::default() });
                    }
                }
                Some(Model { names, fields, sets, foreign }) => {
                    if trimmed == "}" {
                        if let Some(m) = model.take() {
                            report(file, m, out);
                        }
                        continue;
                    }
                    if trimmed.starts_with("@@") {
                        if trimmed.starts_with("@@id") || trimmed.starts_with("@@unique") {
                            sets.push(list_items(trimmed));
                        } else if trimmed.starts_with("@@map")
                            && let Some(c) = map_re.captures(trimmed)
                        {
                            names.push(c[1].to_string());
                        }
                        continue;
                    }
                    let Some(c) = field_re.captures(code) else { continue };
                    let attrs = c.get(4).map_or("", |m| m.as_str());
                    if let Some(rel) = attrs.find("@relation(") {
                        let rest = &attrs[rel..];
                        if let Some(f) = rest.find("fields:") {
                            foreign.extend(list_items(&rest[f..]));
                        }
                    }
                    if c.get(3).is_some() {
                        continue;
                    }
                    let mut col_names = vec![c[1].to_string()];
                    if let Some(m) = map_re.captures(attrs) {
                        col_names.push(m[1].to_string());
                    }
                    let mut column = Column { names: col_names, textual: &c[2] == "String", ..Column::default() };
                    for a in attr_re.captures_iter(attrs) {
                        match &a[2] {
                            "id" => column.primary = true,
                            _ => column.unique = true,
                        }
                    }
                    let indent = code.len() - code.trim_start().len();
                    let start = line_start + indent;
                    let end = line_start + code.trim_end().len();
                    fields.push(Field { start, end, column });
                }
            }
        }
    }

    fn report(file: &Arc<SourceFile>, m: Model, out: &mut Vec<Diagnostic>) {
        let Model { names, mut fields, sets, foreign } = m;
        let model = &names[0];
        let Some(strength) = table_strength(&names) else { return };
        for f in &mut fields {
            f.column.foreign = f.column.names.iter().any(|n| foreign.contains(n));
        }
        let columns: Vec<Column> = fields.iter().map(|f| f.column.clone()).collect();
        let Some(i) = non_unique_key(&columns, &sets, strength) else { return };
        let field = &fields[i];
        let name = &field.column.names[0];
        let fix = Fix::safe(format!("add `@unique` to `{model}.{name}`"), vec![Edit::insert(field.end, " @unique")]);
        out.push(text_diagnostic(file, field.start, field.end, message(model, name), fix));
    }
}

// ---------------------------------------------------------------------------------------

mod sql {
    use super::*;

    const IDENT: &str = r#"(?:"[^"]+"|`[^`]+`|\[[^\]]+\]|[\w$]+)"#;

    fn qname() -> String {
        format!(r"{IDENT}(?:\s*\.\s*{IDENT})*")
    }

    fn re(cell: &'static OnceLock<Regex>, pattern: impl FnOnce() -> String) -> &'static Regex {
        cell.get_or_init(|| Regex::new(&pattern()).unwrap())
    }

    /// The text with comments blanked and string contents blanked (same length), so that
    /// keywords and `;` are only found in code.
    pub fn mask(text: &str) -> String {
        let b = text.as_bytes();
        let mut out = b.to_vec();
        let mut i = 0;
        let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
            for c in out.iter_mut().take(to).skip(from) {
                if *c != b'\n' && *c != b'\r' {
                    *c = b' ';
                }
            }
        };
        let mut line_start = true;
        while i < b.len() {
            let c = b[i];
            let rest_line = |i: usize| b[i..].iter().position(|&c| c == b'\n').map_or(b.len(), |p| i + p);
            if (c == b'-' && b.get(i + 1) == Some(&b'-')) || c == b'#' && line_start {
                let end = rest_line(i);
                blank(&mut out, i, end);
                i = end;
                continue;
            }
            // A `//` line: not SQL, but where a retrysafe-ignore comment may be written.
            if line_start && c == b'/' && b.get(i + 1) == Some(&b'/') {
                let end = rest_line(i);
                blank(&mut out, i, end);
                i = end;
                continue;
            }
            if c == b'/' && b.get(i + 1) == Some(&b'*') {
                let end = text[i + 2..].find("*/").map_or(b.len(), |p| i + 2 + p + 2);
                blank(&mut out, i, end);
                i = end;
                continue;
            }
            if c == b'\'' {
                let mut j = i + 1;
                while j < b.len() {
                    if b[j] == b'\'' {
                        if b.get(j + 1) == Some(&b'\'') {
                            j += 2;
                            continue;
                        }
                        break;
                    }
                    j += 1;
                }
                blank(&mut out, i + 1, j);
                i = j + 1;
                line_start = false;
                continue;
            }
            if c == b'$' {
                let tag_end =
                    b[i + 1..].iter().position(|&c| !(c.is_ascii_alphanumeric() || c == b'_')).map(|p| i + 1 + p);
                if let Some(t) = tag_end.filter(|&t| b.get(t) == Some(&b'$')) {
                    let tag = &text[i..=t];
                    let end = text[t + 1..].find(tag).map_or(b.len(), |p| t + 1 + p + tag.len());
                    blank(&mut out, i, end);
                    i = end;
                    continue;
                }
            }
            if c == b'\n' {
                line_start = true;
            } else if !c.is_ascii_whitespace() {
                line_start = false;
            }
            i += 1;
        }
        // Only ASCII bytes were replaced, and whole characters at that.
        String::from_utf8(out).unwrap_or_else(|_| text.to_string())
    }

    /// `(start, end)` of each top-level piece of `s` split at `sep`, trimmed.
    fn split_top(s: &str, sep: u8) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        let mut depth = 0i32;
        let mut quote: Option<u8> = None;
        let mut start = 0;
        for (i, &c) in s.as_bytes().iter().enumerate() {
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None => match c {
                    b'"' | b'`' => quote = Some(c),
                    b'(' => depth += 1,
                    b')' => depth -= 1,
                    _ if c == sep && depth == 0 => {
                        out.push((start, i));
                        start = i + 1;
                    }
                    _ => {}
                },
            }
        }
        out.push((start, s.len()));
        out.into_iter()
            .filter_map(|(a, b)| {
                let piece = &s[a..b];
                let lead = piece.len() - piece.trim_start().len();
                let t = piece.trim();
                (!t.is_empty()).then_some((a + lead, a + lead + t.len()))
            })
            .collect()
    }

    /// The end of the parenthesised group opening at `open`.
    fn close_paren(s: &str, open: usize) -> Option<usize> {
        let mut depth = 0;
        let mut quote: Option<u8> = None;
        for (i, &c) in s.as_bytes().iter().enumerate().skip(open) {
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None => match c {
                    b'"' | b'`' => quote = Some(c),
                    b'(' => depth += 1,
                    b')' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(i);
                        }
                    }
                    _ => {}
                },
            }
        }
        None
    }

    pub fn unquote(name: &str) -> String {
        let last = split_qualified(name).pop().unwrap_or_default();
        last.trim_matches(['"', '`', '[', ']']).to_string()
    }

    fn split_qualified(name: &str) -> Vec<String> {
        let r = Regex::new(IDENT).unwrap();
        r.find_iter(name).map(|m| m.as_str().to_string()).collect()
    }

    /// The plain column names of a `(a, "b" DESC, lower(c))` list (expressions skipped).
    fn column_list(s: &str) -> Vec<String> {
        static R: OnceLock<Regex> = OnceLock::new();
        let r = re(&R, || format!(r"^({IDENT})\s*(\()?"));
        split_top(s, b',')
            .into_iter()
            .filter_map(|(a, b)| {
                let c = r.captures(&s[a..b])?;
                c.get(2).is_none().then(|| unquote(&c[1]))
            })
            .collect()
    }

    #[derive(Clone, Debug)]
    pub struct SqlColumn {
        pub column: Column,
        pub raw: String,
        pub file: PathBuf,
        pub start: usize,
        pub end: usize,
    }

    #[derive(Clone, Debug)]
    pub struct Table {
        /// As written: `public."ProcessedEvent"`.
        pub raw: String,
        pub name: String,
        pub columns: Vec<SqlColumn>,
        pub sets: Vec<Vec<String>>,
        pub foreign: Vec<String>,
    }

    fn column_def(def: &str, file: &Path, at: usize) -> Option<SqlColumn> {
        static NAME: OnceLock<Regex> = OnceLock::new();
        static UNIQUE: OnceLock<Regex> = OnceLock::new();
        static PK: OnceLock<Regex> = OnceLock::new();
        static TEXTUAL: OnceLock<Regex> = OnceLock::new();
        let name_re = re(&NAME, || format!(r"^({IDENT})\s+(\S.*)?$"));
        let c = name_re.captures(def.trim_end())?;
        let raw = c[1].to_string();
        let rest = c.get(2).map_or("", |m| m.as_str());
        let upper = raw.to_ascii_uppercase();
        // MySQL's `KEY name (cols)` / `INDEX (cols)` is an index; `key TEXT` is a column.
        static INDEX_DEF: OnceLock<Regex> = OnceLock::new();
        if re(&INDEX_DEF, || format!(r"(?is)^(?:key|index)\s+(?:{IDENT}\s*)?\(")).is_match(def) {
            return None;
        }
        if ["CONSTRAINT", "PRIMARY", "UNIQUE", "FOREIGN", "CHECK", "EXCLUDE", "FULLTEXT", "SPATIAL", "LIKE"]
            .contains(&upper.as_str())
            && !raw.starts_with(['"', '`', '['])
        {
            return None;
        }
        let primary = re(&PK, || r"(?is)\bprimary\s+key\b".into()).is_match(rest);
        let unique = re(&UNIQUE, || r"(?i)\bunique\b".into()).is_match(rest);
        let textual = re(&TEXTUAL, || r"(?i)^\s*(text|varchar|character|char|nvarchar|string|uuid|citext)\b".into())
            .is_match(rest);
        let foreign = crate::regex!(r"(?i)\breferences\b").is_match(rest);
        Some(SqlColumn {
            column: Column { names: vec![unquote(&raw)], unique, primary, foreign, textual },
            raw,
            file: file.to_path_buf(),
            start: at,
            end: at + def.trim_end().len(),
        })
    }

    /// A table-level constraint: (is unique/pk, is foreign, columns).
    fn table_constraint(def: &str) -> Option<(bool, Vec<String>)> {
        static R: OnceLock<Regex> = OnceLock::new();
        let r = re(&R, || {
            format!(
                r"(?is)^(?:constraint\s+{IDENT}\s+)?(primary\s+key|unique(?:\s+(?:key|index))?|foreign\s+key)(?:\s+(?:clustered|nonclustered))?(?:\s+({IDENT}))?\s*\("
            )
        });
        let c = r.captures(def)?;
        let open = c.get(0)?.end() - 1;
        let close = close_paren(def, open)?;
        let cols = column_list(&def[open + 1..close]);
        let unique = !c[1].to_ascii_lowercase().starts_with("foreign");
        Some((unique, cols))
    }

    /// Replays the migrations in order and returns the tables that exist at the end.
    pub fn replay(files: &[(PathBuf, String)]) -> Vec<Table> {
        static CREATE: OnceLock<Regex> = OnceLock::new();
        static INDEX: OnceLock<Regex> = OnceLock::new();
        static ALTER: OnceLock<Regex> = OnceLock::new();
        static DROP: OnceLock<Regex> = OnceLock::new();
        static ADD_CONSTRAINT: OnceLock<Regex> = OnceLock::new();
        static ADD_COLUMN: OnceLock<Regex> = OnceLock::new();
        let q = qname();
        let create = re(&CREATE, || {
            format!(
                r"(?is)^create\s+(?:or\s+replace\s+)?(?:(?:global|local)\s+)?(?:(?:temp|temporary|unlogged)\s+)?table\s+(?:if\s+not\s+exists\s+)?({q})\s*\("
            )
        });
        let index = re(&INDEX, || {
            format!(
                r"(?is)^create\s+unique\s+(?:(?:clustered|nonclustered)\s+)?index\s+(?:concurrently\s+)?(?:if\s+not\s+exists\s+)?(?:{q}\s+)?on\s+(?:only\s+)?({q})\s*(?:using\s+\w+\s*)?\("
            )
        });
        let alter = re(&ALTER, || format!(r"(?is)^alter\s+table\s+(?:if\s+exists\s+)?(?:only\s+)?({q})\s+"));
        let drop = re(&DROP, || format!(r"(?is)^drop\s+table\s+(?:if\s+exists\s+)?({q}(?:\s*,\s*{q})*)"));
        let add_constraint = re(&ADD_CONSTRAINT, || r"(?is)^add\s+(.*)$".into());
        let add_column = re(&ADD_COLUMN, || r"(?is)^add\s+(?:column\s+)?(?:if\s+not\s+exists\s+)?".into());
        let mut tables: Vec<Table> = Vec::new();
        let find = |tables: &mut Vec<Table>, name: &str| tables.iter().position(|t| t.name.eq_ignore_ascii_case(name));
        for (path, text) in files {
            let masked = mask(text);
            for (s, e) in split_top(&masked, b';') {
                let stmt = &masked[s..e];
                if let Some(c) = create.captures(stmt) {
                    let raw = c[1].to_string();
                    let name = unquote(&raw);
                    let open = c.get(0).unwrap().end() - 1;
                    let Some(close) = close_paren(stmt, open) else { continue };
                    let body = &stmt[open + 1..close];
                    let mut table =
                        Table { raw, name: name.clone(), columns: Vec::new(), sets: Vec::new(), foreign: Vec::new() };
                    for (a, b) in split_top(body, b',') {
                        let def = &body[a..b];
                        if let Some((unique, cols)) = table_constraint(def) {
                            if unique { table.sets.push(cols) } else { table.foreign.extend(cols) }
                        } else if let Some(col) = column_def(def, path, s + open + 1 + a) {
                            table.columns.push(col);
                        }
                    }
                    if let Some(i) = find(&mut tables, &name) {
                        tables.remove(i);
                    }
                    tables.push(table);
                } else if let Some(c) = index.captures(stmt) {
                    let open = c.get(0).unwrap().end() - 1;
                    let Some(close) = close_paren(stmt, open) else { continue };
                    let cols = column_list(&stmt[open + 1..close]);
                    if let Some(i) = find(&mut tables, &unquote(&c[1])) {
                        tables[i].sets.push(cols);
                    }
                } else if let Some(c) = alter.captures(stmt) {
                    let Some(i) = find(&mut tables, &unquote(&c[1])) else { continue };
                    let actions_at = c.get(0).unwrap().end();
                    let actions = &stmt[actions_at..];
                    for (a, b) in split_top(actions, b',') {
                        let action = &actions[a..b];
                        let Some(ac) = add_constraint.captures(action) else { continue };
                        let rest = ac.get(1).unwrap();
                        if let Some((unique, cols)) = table_constraint(rest.as_str()) {
                            if unique {
                                tables[i].sets.push(cols)
                            } else {
                                tables[i].foreign.extend(cols)
                            }
                            continue;
                        }
                        let Some(m) = add_column.find(action) else { continue };
                        if let Some(col) = column_def(&action[m.end()..], path, s + actions_at + a + m.end()) {
                            tables[i].columns.push(col);
                        }
                    }
                } else if let Some(c) = drop.captures(stmt) {
                    for name in split_top(&c[1], b',') {
                        if let Some(i) = find(&mut tables, &unquote(&c[1][name.0..name.1])) {
                            tables.remove(i);
                        }
                    }
                }
            }
        }
        tables
    }

    /// The dedupe tables whose key column is not unique, with that column.
    pub fn findings(tables: &[Table]) -> Vec<(&Table, &SqlColumn)> {
        let mut out = Vec::new();
        for t in tables {
            let Some(strength) = table_strength(std::slice::from_ref(&t.name)) else { continue };
            let columns: Vec<Column> = t
                .columns
                .iter()
                .map(|c| {
                    let mut col = c.column.clone();
                    col.foreign |= t.foreign.iter().any(|f| f.eq_ignore_ascii_case(&col.names[0]));
                    col
                })
                .collect();
            if let Some(i) = non_unique_key(&columns, &t.sets, strength) {
                out.push((t, &t.columns[i]));
            }
        }
        out
    }

    /// Whether this file defines a marker table or adds a column to one (the cheap test
    /// before the migration folder is read).
    fn mentions_marker(text: &str) -> bool {
        static R: OnceLock<Regex> = OnceLock::new();
        let r = re(&R, || {
            let q = qname();
            format!(
                r"(?is)(?:create\s+(?:\w+\s+)*?table\s+(?:if\s+not\s+exists\s+)?|alter\s+table\s+(?:if\s+exists\s+)?(?:only\s+)?)({q})"
            )
        });
        r.captures_iter(text).any(|c| is_marker_name(&unquote(&c[1])))
    }

    /// The leading sequence number of a migration name (`0003_x`, `20240101120000_x`,
    /// `V3__x`, `2024-01-01-120000_x`), with its prefix letters and separator.
    pub fn sequence(name: &str) -> Option<(String, String, String)> {
        static R: OnceLock<Regex> = OnceLock::new();
        let r = re(&R, || r"^([A-Za-z]?)(\d[\d-]*\d|\d)(_+|-|\.)".into());
        let c = r.captures(name)?;
        Some((c[1].to_string(), c[2].to_string(), c[3].to_string()))
    }

    fn order_key(path: &Path) -> (u128, String) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("").to_string();
        let n = sequence(&name).and_then(|(_, digits, _)| digits.replace('-', "").parse::<u128>().ok()).unwrap_or(0);
        (n, name)
    }

    /// The next sequence number after `digits`, in the same format.
    pub fn next_sequence(digits: &str) -> String {
        let plain: String = digits.chars().filter(|c| c.is_ascii_digit()).collect();
        if plain.len() == 14 {
            let v: Vec<u32> =
                [0..4, 4..6, 6..8, 8..10, 10..12, 12..14].into_iter().map(|r| plain[r].parse().unwrap_or(0)).collect();
            if (1..=12).contains(&v[1]) && (1..=31).contains(&v[2]) && v[3] < 24 && v[4] < 60 && v[5] < 60 {
                let next = add_second(v[0], v[1], v[2], v[3], v[4], v[5]);
                let s = format!("{:04}{:02}{:02}{:02}{:02}{:02}", next.0, next.1, next.2, next.3, next.4, next.5);
                // Keep the original's dashes (`2024-01-01-120000`).
                let mut out = String::new();
                let mut it = s.chars();
                for c in digits.chars() {
                    if c == '-' {
                        out.push('-');
                    } else if let Some(d) = it.next() {
                        out.push(d);
                    }
                }
                return out;
            }
        }
        let n: u128 = plain.parse().unwrap_or(0);
        let step = if plain.len() == 13 { 1000 } else { 1 };
        format!("{:0width$}", n + step, width = digits.len())
    }

    fn add_second(y: u32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> (u32, u32, u32, u32, u32, u32) {
        let (mut y, mut mo, mut d, mut h, mut mi, mut s) = (y, mo, d, h, mi, s + 1);
        if s == 60 {
            s = 0;
            mi += 1;
        }
        if mi == 60 {
            mi = 0;
            h += 1;
        }
        if h == 24 {
            h = 0;
            d += 1;
        }
        let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let days = match mo {
            2 if leap => 29,
            2 => 28,
            4 | 6 | 9 | 11 => 30,
            _ => 31,
        };
        if d > days {
            d = 1;
            mo += 1;
        }
        if mo == 13 {
            mo = 1;
            y += 1;
        }
        (y, mo, d, h, mi, s)
    }

    enum Layout {
        /// `<root>/<seq>_<name>/<file>.sql` (Prisma, Diesel).
        Dirs { root: PathBuf, file_name: String, down: bool },
        /// `<dir>/<seq>_<name>.sql` (numbered or timestamped files, Flyway, golang-migrate).
        Flat { dir: PathBuf, up_suffix: bool, down: bool },
        /// drizzle-kit's folder: the journal lists the migrations to apply.
        DrizzleKit,
        /// A lone schema file: not known to be a migration.
        Lone,
    }

    fn is_down(path: &Path) -> bool {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("").to_ascii_lowercase();
        name.ends_with(".down.sql") || name == "down.sql" || name.ends_with("_down.sql")
    }

    /// The migration files of `file`'s folder, in order, and the folder's layout.
    fn migrations(cx: &Context, file: &Path) -> (Vec<(PathBuf, String)>, Layout) {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let dir = file.parent().unwrap_or(Path::new("."));
        let dir_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if sequence(name).is_none()
            && sequence(dir_name).is_some()
            && let Some(root) = dir.parent()
        {
            let mut set = Vec::new();
            let mut down = false;
            let mut dirs = cx.project.list_subdirs(root);
            dirs.retain(|d| d.file_name().and_then(|n| n.to_str()).and_then(sequence).is_some());
            dirs.sort_by_key(|d| order_key(d));
            for d in dirs {
                for (p, t) in cx.project.list_dir(&d) {
                    if p.extension().is_some_and(|e| e == "sql") {
                        if is_down(&p) {
                            down = true;
                        } else {
                            set.push((p, t));
                        }
                    }
                }
            }
            return (set, Layout::Dirs { root: root.to_path_buf(), file_name: name.to_string(), down });
        }
        let mut set = Vec::new();
        let (mut up_suffix, mut down) = (false, false);
        if sequence(name).is_some() {
            for (p, t) in cx.project.list_dir(dir) {
                let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                if !n.ends_with(".sql") || sequence(n).is_none() {
                    continue;
                }
                if is_down(&p) {
                    down = true;
                } else {
                    up_suffix |= n.ends_with(".up.sql");
                    set.push((p, t));
                }
            }
            set.sort_by_key(|(p, _)| order_key(p));
            if dir.join("meta").join("_journal.json").is_file() {
                return (set, Layout::DrizzleKit);
            }
            return (set, Layout::Flat { dir: dir.to_path_buf(), up_suffix, down });
        }
        let text = cx.file.text.clone();
        (vec![(file.to_path_buf(), text)], Layout::Lone)
    }

    fn is_mysql(set: &[(PathBuf, String)], layout: &Layout, tables: &[(&Table, &SqlColumn)]) -> bool {
        if let Layout::Dirs { root, .. } = layout
            && let Ok(lock) = std::fs::read_to_string(root.join("migration_lock.toml"))
        {
            return lock.contains("mysql");
        }
        tables.iter().any(|(t, _)| t.raw.contains('`'))
            || set.iter().any(|(_, t)| t.to_ascii_uppercase().contains("ENGINE=") || t.contains("AUTO_INCREMENT"))
    }

    /// The statements of the new migration and its down counterpart.
    fn index_sql(found: &[(&Table, &SqlColumn)], mysql: bool, eol: &str) -> (String, String) {
        let mut up = format!(
            "-- retrysafe: a dedupe claim is only atomic when its key is unique.{eol}-- If this fails, remove the duplicate rows first.{eol}"
        );
        let mut down = String::new();
        for (t, c) in found {
            let quote = split_qualified(&t.raw).pop().and_then(|l| l.chars().next()).filter(|q| *q == '"' || *q == '`');
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

    pub fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
        let file = cx.file;
        if !mentions_marker(&mask(&file.text)) {
            return;
        }
        let (set, layout) = migrations(cx, &file.path);
        let tables = replay(&set);
        let found = findings(&tables);
        let here: Vec<&(&Table, &SqlColumn)> =
            found.iter().filter(|(_, c)| crate::project::normalize(&c.file) == file.path).collect();
        if here.is_empty() {
            return;
        }
        let eol = file.style().eol;
        let (up, down) = index_sql(&found, is_mysql(&set, &layout, &found), eol);
        let last = set.last().map(|(p, _)| p.clone()).unwrap_or_else(|| file.path.clone());
        const NAME: &str = "unique_dedupe_keys";
        let new_files: Option<Vec<(PathBuf, String)>> = match &layout {
            Layout::Dirs { root, file_name, down: has_down } => {
                let last_dir = last.parent().and_then(|d| d.file_name()).and_then(|n| n.to_str()).unwrap_or("");
                sequence(last_dir).map(|(letters, digits, sep)| {
                    let dir = root.join(format!("{letters}{}{sep}{NAME}", next_sequence(&digits)));
                    let mut files = vec![(dir.join(file_name), up.clone())];
                    if *has_down {
                        files.push((dir.join(file_name.replace("up", "down")), down.clone()));
                    }
                    files
                })
            }
            Layout::Flat { dir, up_suffix, down: has_down } => {
                let last_name = last.file_name().and_then(|n| n.to_str()).unwrap_or("");
                sequence(last_name).map(|(letters, digits, sep)| {
                    let stem = format!("{letters}{}{sep}{NAME}", next_sequence(&digits));
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
            Layout::DrizzleKit | Layout::Lone => None,
        };
        for (t, c) in here {
            let title = format!("add a migration with a unique index on `{}.{}`", t.name, c.column.names[0]);
            let fix = match (&new_files, &layout) {
                (Some(files), _) => {
                    let mut fix = Fix::safe(title, Vec::new());
                    fix.new_files = files.clone();
                    fix.note = Some(
                        "an applied migration is never edited; index creation fails if duplicate rows exist".into(),
                    );
                    fix
                }
                (None, Layout::DrizzleKit) => Fix::display_only(
                    title,
                    "drizzle-kit applies only migrations listed in meta/_journal.json: add `.unique()` to the Drizzle table and run `drizzle-kit generate`",
                ),
                (None, _) => Fix::display_only(
                    title,
                    "this file is not part of a numbered migration folder: add the unique index in a new migration",
                ),
            };
            out.push(text_diagnostic(file, c.start, c.end, message(&t.name, &c.column.names[0]), fix));
        }
    }
}

// ---------------------------------------------------------------------------------------

/// The name of a pair's key (`eventId`, `'event_id'`).
fn pair_key(pair: Node, src: &str) -> Option<String> {
    let k = pair.child_by_field_name("key")?;
    Some(ast::string_value(k, src).unwrap_or_else(|| text(k, src).to_string()))
}

/// The name a value is assigned to: `const processedEvents = <value>`.
fn assigned_name(node: Node, src: &str) -> Option<String> {
    let mut cur = node.parent()?;
    while matches!(cur.kind(), "parenthesized_expression" | "as_expression" | "satisfies_expression") {
        cur = cur.parent()?;
    }
    match cur.kind() {
        "variable_declarator" => cur.child_by_field_name("name").map(|n| text(n, src).to_string()),
        "assignment_expression" => cur.child_by_field_name("left").and_then(|l| ast::member_path(l, src).pop()),
        _ => None,
    }
}

mod drizzle {
    use super::*;

    const TABLES: &[&str] = &["pgTable", "mysqlTable", "sqliteTable", "singlestoreTable"];
    const TEXTUAL: &[&str] = &["text", "varchar", "char", "uuid", "citext"];

    fn creators(src: &str) -> Vec<String> {
        if !src.contains("TableCreator(") {
            return Vec::new();
        }
        crate::regex!(r"(\w+)\s*=\s*(?:pg|mysql|sqlite|singlestore)TableCreator\(")
            .captures_iter(src)
            .map(|c| c[1].to_string())
            .collect()
    }

    pub fn check(file: &Arc<SourceFile>, out: &mut Vec<Diagnostic>) {
        let src = file.text.as_str();
        if !TABLES.iter().any(|t| src.contains(t)) && !src.contains("TableCreator(") && !src.contains(".table(") {
            return;
        }
        let creators = creators(src);
        let schema_lib = src.contains("Schema(");
        for call in ast::descendants_of_kind(file.root(), "call_expression") {
            let path = ast::callee_path(call, src);
            let is_table = match path.as_slice() {
                [name] => TABLES.contains(&name.as_str()) || creators.contains(name),
                [_, last] => last == "table" && schema_lib,
                _ => false,
            };
            if is_table {
                table(file, call, out);
            }
        }
    }

    fn table(file: &Arc<SourceFile>, call: Node, out: &mut Vec<Diagnostic>) {
        let src = file.text.as_str();
        let args = ast::arguments(call);
        let Some(name) = args.first().and_then(|a| ast::string_value(*a, src)) else { return };
        let mut names = vec![name.clone()];
        names.extend(assigned_name(call, src));
        let Some(strength) = table_strength(&names) else { return };
        let Some(columns_node) = args.get(1).and_then(|a| columns_object(*a)) else { return };
        let mut pairs = Vec::new();
        let mut columns = Vec::new();
        for pair in ast::named_children(columns_node).into_iter().filter(|p| p.kind() == "pair") {
            let (Some(key), Some(value)) = (pair_key(pair, src), pair.child_by_field_name("value")) else { continue };
            if value.kind() != "call_expression" {
                continue;
            }
            let chain: Vec<String> =
                ast::callee_path(value, src).into_iter().map(|s| s.trim_end_matches("()").to_string()).collect();
            let mut col_names = vec![key];
            // The base builder's database name: `text('event_id')`.
            let mut base = value;
            while let Some(inner) = base
                .child_by_field_name("function")
                .and_then(|f| f.child_by_field_name("object"))
                .filter(|o| o.kind() == "call_expression")
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
            pairs.push((pair, value));
        }
        let sets = args.get(2).map(|extra| extra_sets(*extra, src)).unwrap_or_default();
        let Some(i) = non_unique_key(&columns, &sets, strength) else { return };
        let (pair, value) = pairs[i];
        let key = &columns[i].names[0];
        let fix =
            Fix::safe(format!("append `.unique()` to `{key}`"), vec![Edit::insert(value.end_byte(), ".unique()")]);
        out.push(Diagnostic::new(RULE.id, file, pair, message(&name, key)).help(HELP).with_fix(Some(fix)));
    }

    /// The columns object: `{ ... }` or `(t) => ({ ... })`.
    fn columns_object(arg: Node) -> Option<Node> {
        let arg = ast::unwrap_expr(arg);
        if arg.kind() == "object" {
            return Some(arg);
        }
        if ast::is_function(arg) {
            let body = ast::unwrap_expr(arg.child_by_field_name("body")?);
            if body.kind() == "object" {
                return Some(body);
            }
            if body.kind() == "statement_block" {
                let ret = ast::named_children(body).into_iter().rev().find(|s| s.kind() == "return_statement")?;
                let v = ast::unwrap_expr(ret.named_child(0)?);
                return (v.kind() == "object").then_some(v);
            }
        }
        None
    }

    /// Column lists of `primaryKey({ columns })`, `unique().on(..)`, `uniqueIndex().on(..)`.
    fn extra_sets(extra: Node, src: &str) -> Vec<Vec<String>> {
        // `table.eventId`, also drizzle-kit's introspected `table.eventId.asc().nullsLast()`.
        let last_prop = |n: Node| {
            let mut n = ast::unwrap_expr(n);
            while n.kind() == "call_expression" {
                n = n.child_by_field_name("function")?.child_by_field_name("object")?;
            }
            ast::member_path(n, src).pop()
        };
        let mut sets = Vec::new();
        for call in ast::descendants_of_kind(extra, "call_expression") {
            let path = ast::callee_path(call, src);
            let args = ast::arguments(call);
            match path.last().map(String::as_str) {
                Some("primaryKey") => {
                    let cols = match args.first() {
                        Some(o) if o.kind() == "object" => ast::object_property(*o, "columns", src)
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
}

// ---------------------------------------------------------------------------------------

mod mongoose {
    use super::*;

    pub fn check(file: &Arc<SourceFile>, out: &mut Vec<Diagnostic>) {
        let src = file.text.as_str();
        let root = file.root();
        let news = ast::descendants_of_kind(root, "new_expression");
        let calls = ast::descendants_of_kind(root, "call_expression");
        for new in news {
            let ctor = ast::member_path(new.child_by_field_name("constructor").unwrap_or(new), src);
            if ctor.last().map(String::as_str) != Some("Schema") {
                continue;
            }
            let Some(fields) = new
                .child_by_field_name("arguments")
                .and_then(|a| a.named_child(0))
                .map(ast::unwrap_expr)
                .filter(|o| o.kind() == "object")
            else {
                continue;
            };
            let var = assigned_name(new, src);
            let mut names: Vec<String> = Vec::new();
            let mut sets = Vec::new();
            for call in &calls {
                let path = ast::callee_path(*call, src);
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
                    && keys.kind() == "object"
                    && opts.kind() == "object"
                    && ast::object_property(*opts, "unique", src).is_some_and(|v| text(v, src) == "true")
                {
                    sets.push(ast::named_children(*keys).into_iter().filter_map(|p| pair_key(p, src)).collect());
                }
            }
            // The model name first: it names the collection in the message.
            names.extend(var);
            schema(file, fields, &names, &sets, out);
        }
    }

    fn schema(file: &Arc<SourceFile>, fields: Node, names: &[String], sets: &[Vec<String>], out: &mut Vec<Diagnostic>) {
        let src = file.text.as_str();
        let Some(strength) = table_strength(names) else { return };
        let mut pairs = Vec::new();
        let mut columns = Vec::new();
        for pair in ast::named_children(fields).into_iter().filter(|p| p.kind() == "pair") {
            let (Some(key), Some(value)) = (pair_key(pair, src), pair.child_by_field_name("value")) else { continue };
            if key == "_id" {
                if text(value, src) != "false" {
                    // Keyed by a custom `_id`, which MongoDB keeps unique.
                    return;
                }
                continue;
            }
            let mut column = Column { names: vec![key], ..Column::default() };
            match value.kind() {
                "object" => {
                    let is_true = |n: Option<Node>| n.is_some_and(|v| text(v, src) == "true");
                    column.unique = is_true(ast::object_property(value, "unique", src))
                        || ast::object_property(value, "index", src)
                            .filter(|i| i.kind() == "object")
                            .is_some_and(|i| is_true(ast::object_property(i, "unique", src)));
                    column.foreign = ast::object_property(value, "ref", src).is_some();
                }
                "identifier" | "member_expression" => {}
                _ => continue,
            }
            columns.push(column);
            pairs.push((pair, value));
        }
        let Some(i) = non_unique_key(&columns, sets, strength) else { return };
        // `id` is a virtual in Mongoose, not a stored key.
        if columns[i].names[0] == "id" {
            return;
        }
        let (pair, value) = pairs[i];
        let key = &columns[i].names[0];
        let edit = match value.kind() {
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
        let fix = Fix::safe(format!("add `unique: true` to `{key}`"), vec![edit])
            .with_note("Mongoose builds `unique` as an index: autoIndex or `syncIndexes()` must run");
        let table = names.first().cloned().unwrap_or_default();
        out.push(Diagnostic::new(RULE.id, file, pair, message(&table, key)).help(HELP).with_fix(Some(fix)));
    }

    /// Adds `prop` as the last property of an object literal, in its layout.
    fn append_property(object: Node, prop: &str, src: &str) -> Edit {
        let props: Vec<Node> = ast::named_children(object).into_iter().filter(|c| c.kind() != "comment").collect();
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
}

#[cfg(test)]
mod tests {
    use super::sql;

    #[test]
    fn next_sequence_keeps_format() {
        assert_eq!(sql::next_sequence("0003"), "0004");
        assert_eq!(sql::next_sequence("20240131235959"), "20240201000000");
        assert_eq!(sql::next_sequence("20241231235959"), "20250101000000");
        assert_eq!(sql::next_sequence("2024-02-28-235959"), "2024-02-29-000000");
        assert_eq!(sql::next_sequence("1700000000000"), "1700000001000");
        assert_eq!(sql::next_sequence("9"), "10");
    }

    #[test]
    fn replay_sees_later_unique_index_and_drops() {
        let files = vec![
            (
                "m/0001_init.sql".into(),
                "-- init; with a ; in a comment\nCREATE TABLE processed_events (\n  id serial PRIMARY KEY,\n  event_id text NOT NULL DEFAULT ';'\n);\nCREATE TABLE stripe_events (id text);\n".to_string(),
            ),
            ("m/0002_idx.sql".into(), "CREATE UNIQUE INDEX ON \"processed_events\" USING btree (event_id);\n".to_string()),
        ];
        let tables = sql::replay(&files);
        let found = sql::findings(&tables);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0.name, "stripe_events");
        assert_eq!(found[0].1.column.names[0], "id");
    }

    #[test]
    fn composite_and_foreign_keys() {
        let files = vec![(
            "a.sql".into(),
            "create table webhook_deliveries (id bigserial primary key, event_id bigint references events(id));\ncreate table processed_webhooks (provider text, event_id text, constraint pk primary key (provider, event_id));\nalter table idempotency_keys add column key text;".to_string(),
        )];
        assert!(sql::findings(&sql::replay(&files)).is_empty());
    }

    #[test]
    fn key_column_is_not_a_mysql_index() {
        let files = vec![(
            "0001_keys.sql".into(),
            "CREATE TABLE idempotency_keys (\n  id INT AUTO_INCREMENT,\n  `key` VARCHAR(255) NOT NULL,\n  KEY idx_key (`key`),\n  PRIMARY KEY (id)\n);".to_string(),
        )];
        let tables = sql::replay(&files);
        let found = sql::findings(&tables);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1.raw, "`key`");
        let plain = vec![("k.sql".into(), "create table idempotency_keys (key text not null);".to_string())];
        assert_eq!(sql::findings(&sql::replay(&plain)).len(), 1);
    }

    #[test]
    fn bare_events_tables_need_an_event_id_column() {
        use super::{Column, Strength, non_unique_key, table_strength};
        let col = |n: &str| Column { names: vec![n.to_string()], textual: true, ..Column::default() };
        let id = Column { primary: true, ..col("id") };
        assert_eq!(table_strength(&["Event".into()]), Some(Strength::Bare));
        assert_eq!(non_unique_key(&[id.clone(), col("externalEventId")], &[], Strength::Bare), None);
        assert_eq!(non_unique_key(&[id.clone(), col("stripeEventId")], &[], Strength::Bare), Some(1));
        assert_eq!(non_unique_key(&[id, col("externalEventId")], &[], Strength::Strong), Some(1));
    }

    #[test]
    fn sequences() {
        assert_eq!(sql::sequence("V3__init.sql").map(|s| s.1), Some("3".into()));
        assert_eq!(sql::sequence("20240101000000_init").map(|s| s.2), Some("_".into()));
        assert!(sql::sequence("schema.sql").is_none());
    }
}
