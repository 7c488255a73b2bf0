//! Prisma schema models (`schema.prisma`, `prisma/schema/*.prisma`), read line by line.

use super::Column;
use regex::Regex;
use std::sync::OnceLock;

/// A `model` block: its names (model, `@@map`), fields and `@@id`/`@@unique` lists, with
/// the fields used as foreign keys in `@relation(fields: [...])` marked `foreign`.
#[derive(Default)]
pub struct Model {
    pub names: Vec<String>,
    pub fields: Vec<Field>,
    pub sets: Vec<Vec<String>>,
    /// `@@index([...], map: "name")` (or `name:`) lines: plain, non-unique indexes.
    pub plain_indexes: Vec<Index>,
    foreign: Vec<String>,
}

/// A named `@@index`, with the byte span of its `@@index` token.
pub struct Index {
    pub name: String,
    pub columns: Vec<String>,
    pub start: usize,
    pub end: usize,
    /// Whether the line's code sets an index `type:` (which `@@unique` does not take).
    pub typed: bool,
}

pub struct Field {
    pub start: usize,
    /// End of the field's code (before a trailing comment).
    pub end: usize,
    pub column: Column,
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

/// The models of a Prisma schema file, with byte offsets into `text`.
pub fn models(text: &str) -> Vec<Model> {
    static MODEL: OnceLock<Regex> = OnceLock::new();
    static FIELD: OnceLock<Regex> = OnceLock::new();
    static MAP: OnceLock<Regex> = OnceLock::new();
    static ATTR: OnceLock<Regex> = OnceLock::new();
    static INDEX_NAME: OnceLock<Regex> = OnceLock::new();
    let model_re = MODEL.get_or_init(|| Regex::new(r"^\s*model\s+(\w+)\s*\{\s*$").unwrap());
    let field_re = FIELD.get_or_init(|| Regex::new(r"^\s*(\w+)\s+([\w.]+)(\[\])?\??(.*)$").unwrap());
    let map_re = MAP.get_or_init(|| Regex::new(r#"@map\(\s*(?:name:\s*)?"([^"]+)""#).unwrap());
    let attr_re = ATTR.get_or_init(|| Regex::new(r"(^|[^@\w])@(id|unique)\b").unwrap());
    let index_name_re = INDEX_NAME.get_or_init(|| Regex::new(r#"\b(?:map|name):\s*"([^"]+)""#).unwrap());

    let mut out = Vec::new();
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
            Some(Model { names, fields, sets, plain_indexes, foreign }) => {
                if trimmed == "}" {
                    if let Some(mut m) = model.take() {
                        for f in &mut m.fields {
                            f.column.foreign = f.column.names.iter().any(|n| m.foreign.contains(n));
                        }
                        out.push(m);
                    }
                    continue;
                }
                if trimmed.starts_with("@@") {
                    if trimmed.starts_with("@@id") || trimmed.starts_with("@@unique") {
                        sets.push(list_items(trimmed));
                    } else if trimmed.starts_with("@@index")
                        && let Some(c) = index_name_re.captures(trimmed)
                    {
                        let start = line_start + (code.len() - code.trim_start().len());
                        plain_indexes.push(Index {
                            name: c[1].to_string(),
                            columns: list_items(trimmed),
                            start,
                            end: start + "@@index".len(),
                            typed: trimmed.contains("type:"),
                        });
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
    out
}
