//! SQL migrations: the tables that exist after a migration folder is replayed in order, and
//! the folder's naming layout (so a new migration can follow it).

use super::{Column, dedupe_key_gap};
use crate::model::guards::is_marker_name;
use crate::project::Project;
use regex::Regex;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

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
            let tag_end = b[i + 1..].iter().position(|&c| !(c.is_ascii_alphanumeric() || c == b'_')).map(|p| i + 1 + p);
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

pub fn split_qualified(name: &str) -> Vec<String> {
    static R: OnceLock<Regex> = OnceLock::new();
    re(&R, || IDENT.to_string()).find_iter(name).map(|m| m.as_str().to_string()).collect()
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
    let textual =
        re(&TEXTUAL, || r"(?i)^\s*(text|varchar|character|char|nvarchar|string|uuid|citext)\b".into()).is_match(rest);
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
                // A ClickHouse table (`ENGINE = MergeTree ...`) has no unique constraints: it is
                // an analytics store, never a dedupe marker.
                if crate::regex!(r"(?i)^\s*engine\s*=?\s*\w*(?:MergeTree|Log|Memory|Distributed|Kafka|Buffer)\b")
                    .is_match(&stmt[close + 1..])
                {
                    continue;
                }
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
        let columns: Vec<Column> = t
            .columns
            .iter()
            .map(|c| {
                let mut col = c.column.clone();
                col.foreign |= t.foreign.iter().any(|f| f.eq_ignore_ascii_case(&col.names[0]));
                col
            })
            .collect();
        if let Some(i) = dedupe_key_gap(std::slice::from_ref(&t.name), &columns, &t.sets) {
            out.push((t, &t.columns[i]));
        }
    }
    out
}

/// Whether this file defines a marker table or adds a column to one (the cheap test
/// before the migration folder is read).
pub fn mentions_marker(text: &str) -> bool {
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

pub enum Layout {
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
pub fn migrations(project: &Project, file: &Path, text: &str) -> (Vec<(PathBuf, String)>, Layout) {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let dir = file.parent().unwrap_or(Path::new("."));
    let dir_name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if sequence(name).is_none()
        && sequence(dir_name).is_some()
        && let Some(root) = dir.parent()
    {
        let mut set = Vec::new();
        let mut down = false;
        let mut dirs = project.list_subdirs(root);
        dirs.retain(|d| d.file_name().and_then(|n| n.to_str()).and_then(sequence).is_some());
        dirs.sort_by_key(|d| order_key(d));
        for d in dirs {
            for (p, t) in project.list_dir(&d) {
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
        for (p, t) in project.list_dir(dir) {
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
    (vec![(file.to_path_buf(), text.to_string())], Layout::Lone)
}

/// Whether the migrations are MySQL's (Prisma's lock file, backquotes, `ENGINE=`).
pub fn is_mysql(set: &[(PathBuf, String)], layout: &Layout, tables: &[(&Table, &SqlColumn)]) -> bool {
    if let Layout::Dirs { root, .. } = layout
        && let Ok(lock) = std::fs::read_to_string(root.join("migration_lock.toml"))
    {
        return lock.contains("mysql");
    }
    tables.iter().any(|(t, _)| t.raw.contains('`'))
        || set.iter().any(|(_, t)| t.to_ascii_uppercase().contains("ENGINE=") || t.contains("AUTO_INCREMENT"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_sequence_keeps_format() {
        assert_eq!(next_sequence("0003"), "0004");
        assert_eq!(next_sequence("20240131235959"), "20240201000000");
        assert_eq!(next_sequence("20241231235959"), "20250101000000");
        assert_eq!(next_sequence("2024-02-28-235959"), "2024-02-29-000000");
        assert_eq!(next_sequence("1700000000000"), "1700000001000");
        assert_eq!(next_sequence("9"), "10");
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
        let tables = replay(&files);
        let found = findings(&tables);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0.name, "stripe_events");
        assert_eq!(found[0].1.column.names[0], "id");
    }

    #[test]
    fn clickhouse_tables_hold_no_markers() {
        let files = vec![(
            "0000_init.sql".into(),
            "CREATE TABLE IF NOT EXISTS default.events (\n  `id` UUID,\n  `name` String\n)\nENGINE MergeTree\nORDER BY (name, id);\nCREATE TABLE webhook_events (id String) ENGINE = ReplacingMergeTree ORDER BY id;\nCREATE TABLE stripe_events (id text) ENGINE=InnoDB;".to_string(),
        )];
        let tables = replay(&files);
        let found = findings(&tables);
        assert_eq!(found.len(), 1, "only the MySQL table: {found:?}");
        assert_eq!(found[0].0.name, "stripe_events");
    }

    #[test]
    fn composite_and_foreign_keys() {
        let files = vec![(
            "a.sql".into(),
            "create table webhook_deliveries (id bigserial primary key, event_id bigint references events(id));\ncreate table processed_webhooks (provider text, event_id text, constraint pk primary key (provider, event_id));\nalter table idempotency_keys add column key text;".to_string(),
        )];
        assert!(findings(&replay(&files)).is_empty());
    }

    #[test]
    fn key_column_is_not_a_mysql_index() {
        let files = vec![(
            "0001_keys.sql".into(),
            "CREATE TABLE idempotency_keys (\n  id INT AUTO_INCREMENT,\n  `key` VARCHAR(255) NOT NULL,\n  KEY idx_key (`key`),\n  PRIMARY KEY (id)\n);".to_string(),
        )];
        let tables = replay(&files);
        let found = findings(&tables);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].1.raw, "`key`");
        let plain = vec![("k.sql".into(), "create table idempotency_keys (key text not null);".to_string())];
        assert_eq!(findings(&replay(&plain)).len(), 1);
    }

    #[test]
    fn sequences() {
        assert_eq!(sequence("V3__init.sql").map(|s| s.1), Some("3".into()));
        assert_eq!(sequence("20240101000000_init").map(|s| s.2), Some("_".into()));
        assert!(sequence("schema.sql").is_none());
    }
}
