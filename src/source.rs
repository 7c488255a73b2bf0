//! A source file as the rules see it: text, parse tree, line index and the file's own style.

use crate::syntax::ast::KindName;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tree_sitter::{Language, Node, Parser, Tree};

/// Which grammar parses a file. TSX also parses plain JavaScript (JSX included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    TypeScript,
    Tsx,
    /// Schema files the rules read as text (Prisma schemas, SQL migrations): no JS tree.
    Text,
}

impl Dialect {
    pub fn for_path(path: &Path) -> Option<Dialect> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "ts" | "mts" | "cts" => Some(Dialect::TypeScript),
            "tsx" | "jsx" | "js" | "mjs" | "cjs" => Some(Dialect::Tsx),
            _ => None,
        }
    }

    pub fn language(self) -> Language {
        match self {
            Dialect::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            Dialect::Tsx | Dialect::Text => tree_sitter_typescript::LANGUAGE_TSX.into(),
        }
    }
}

/// Parses `text` with the grammar for `dialect`. Parsers are reused per thread.
pub fn parse(dialect: Dialect, text: &str) -> Option<Tree> {
    parse_reusing(dialect, text, None)
}

/// `parse`, reusing the unchanged subtrees of `old`: a tree of the previous text with every
/// edit since applied (`Tree::edit`). The result is the tree a fresh parse gives.
fn parse_reusing(dialect: Dialect, text: &str, old: Option<&Tree>) -> Option<Tree> {
    thread_local! {
        static PARSERS: std::cell::RefCell<[Option<Parser>; 3]> = const { std::cell::RefCell::new([None, None, None]) };
    }
    PARSERS.with(|cell| {
        let mut parsers = cell.borrow_mut();
        let slot = &mut parsers[dialect as usize];
        if slot.is_none() {
            let mut parser = Parser::new();
            parser.set_language(&dialect.language()).ok()?;
            *slot = Some(parser);
        }
        slot.as_mut()?.parse(text, old)
    })
}

/// The concrete style of a file, kept by every edit a fix makes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Style {
    pub eol: &'static str,
    pub indent_unit: String,
    pub quote: char,
    pub semicolons: bool,
}

impl Style {
    pub fn detect(text: &str) -> Style {
        // One pass over the bytes and one over the lines: the editor backend detects the
        // style of every edited buffer, and six passes over a large file were a few percent
        // of an edit.
        let bytes = text.as_bytes();
        let lf = memchr::memchr_iter(b'\n', bytes).count();
        let crlf = memchr::memchr_iter(b'\n', bytes).filter(|&i| i > 0 && bytes[i - 1] == b'\r').count();
        let eol = if crlf > 0 && crlf * 2 >= lf { "\r\n" } else { "\n" };
        // The indent unit is the most common increase of indentation between consecutive
        // code lines (robust to 3-space files and to aligned continuation lines).
        let mut tabs = 0;
        let mut spaced = 0;
        let mut steps = [0usize; 9];
        let mut previous = 0usize;
        let mut stmt_ends = 0;
        let mut with_semi = 0;
        for line in text.lines() {
            let end_trimmed = line.trim_end();
            if !end_trimmed.is_empty()
                && !end_trimmed.ends_with('{')
                && !end_trimmed.ends_with(',')
                && !end_trimmed.trim_start().starts_with("//")
            {
                stmt_ends += 1;
            }
            if end_trimmed.ends_with(';') {
                with_semi += 1;
            }
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('*') {
                continue;
            }
            if line.starts_with('\t') {
                tabs += 1;
                continue;
            }
            let n = line.len() - line.trim_start_matches(' ').len();
            if n > 0 {
                spaced += 1;
            }
            if n > previous && n - previous <= 8 {
                steps[n - previous] += 1;
            }
            previous = n;
        }
        let indent_unit = if tabs > spaced {
            "\t".to_string()
        } else {
            let best = (1..=8).max_by_key(|&n| (steps[n], std::cmp::Reverse(n))).filter(|&n| steps[n] > 0);
            " ".repeat(best.unwrap_or(2))
        };
        let single = memchr::memchr_iter(b'\'', bytes).count();
        let double = memchr::memchr_iter(b'"', bytes).count();
        let quote = if single > double { '\'' } else { '"' };
        let semicolons = stmt_ends == 0 || with_semi * 3 >= stmt_ends;
        Style { eol, indent_unit, quote, semicolons }
    }

    pub fn semi(&self) -> &'static str {
        if self.semicolons { ";" } else { "" }
    }

    pub fn quoted(&self, s: &str) -> String {
        format!("{q}{s}{q}", q = self.quote)
    }
}

/// How a local name was imported.
#[derive(Clone, Debug)]
pub struct Import {
    pub local: String,
    pub source: String,
    /// The exported name, `default`, or `*` for a namespace import / whole `require`.
    pub imported: String,
}

/// A parsed project file. Immutable once built; shared between threads behind `Arc`.
pub struct SourceFile {
    pub path: PathBuf,
    pub text: String,
    pub dialect: Dialect,
    pub tree: Tree,
    line_starts: Vec<usize>,
    style: OnceLock<Style>,
    /// Filled by `project::imports` on first use: call resolution asks for it per call.
    pub(crate) imports: OnceLock<Vec<Import>>,
    /// Filled by `project::local_function` on first use: the top-level declarations by the
    /// name they declare, in source order (call resolution looks a name up per call).
    pub(crate) declarations: OnceLock<std::collections::HashMap<String, Vec<Span>>>,
}

impl SourceFile {
    pub fn new(path: PathBuf, text: String, dialect: Dialect) -> Option<SourceFile> {
        // A BOM is kept in the text (fixes must preserve it) but hidden from the parser.
        let tree = match text.strip_prefix('\u{feff}') {
            _ if dialect == Dialect::Text => parse(dialect, "")?,
            Some(rest) => parse(dialect, &format!("   {rest}"))?,
            None => parse(dialect, &text)?,
        };
        let line_starts = line_starts(&text);
        Some(SourceFile {
            path,
            text,
            dialect,
            tree,
            line_starts,
            style: OnceLock::new(),
            imports: OnceLock::new(),
            declarations: OnceLock::new(),
        })
    }

    /// The file after `edits` (byte ranges of the previous text `self` holds, in the order
    /// they were made) turned it into `text`: parsed incrementally, so an edit in an editor
    /// costs a fraction of parsing the whole file again.
    pub fn reparsed(&self, text: String, edits: &[TextChange]) -> Option<SourceFile> {
        let bom = |t: &str| t.starts_with('\u{feff}');
        // The parser reads a BOM as three spaces; an edit near it is not worth the bookkeeping.
        if self.dialect == Dialect::Text || bom(&self.text) || bom(&text) {
            return SourceFile::new(self.path.clone(), text, self.dialect);
        }
        let mut tree = self.tree.clone();
        for change in edits {
            tree.edit(&change.input_edit);
        }
        let tree = parse_reusing(self.dialect, &text, Some(&tree))?;
        let line_starts = line_starts(&text);
        Some(SourceFile {
            path: self.path.clone(),
            text,
            dialect: self.dialect,
            tree,
            line_starts,
            style: OnceLock::new(),
            imports: OnceLock::new(),
            declarations: OnceLock::new(),
        })
    }

    pub fn root(&self) -> Node<'_> {
        self.tree.root_node()
    }

    pub fn style(&self) -> &Style {
        self.style.get_or_init(|| Style::detect(&self.text))
    }

    /// 1-based line and column (column counted in characters) of a byte offset.
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let line = match self.line_starts.binary_search(&offset) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.line_starts[line];
        let col = self.text.get(start..offset.min(self.text.len())).map_or(0, |s| s.chars().count());
        (line + 1, col + 1)
    }

    /// The text of 1-based line `line`, without its line ending.
    pub fn line_text(&self, line: usize) -> &str {
        let start = self.line_starts.get(line - 1).copied().unwrap_or(self.text.len());
        let end = self.line_starts.get(line).copied().unwrap_or(self.text.len());
        self.text[start..end].trim_end_matches(['\n', '\r'])
    }

    pub fn line_start(&self, offset: usize) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => self.line_starts[i],
            Err(i) => self.line_starts[i - 1],
        }
    }

    /// The leading whitespace of the line holding `offset`.
    pub fn indent_at(&self, offset: usize) -> &str {
        let start = self.line_start(offset);
        let rest = &self.text[start..];
        let n = rest.len() - rest.trim_start_matches([' ', '\t']).len();
        &rest[..n]
    }

    pub fn text_of(&self, node: Node) -> &str {
        &self.text[node.byte_range()]
    }

    /// Re-finds a node from a stored span: the outermost node of `kind` with exactly that range.
    pub fn node_at(&self, span: Span) -> Option<Node<'_>> {
        // Each rule re-finds its handler from the handler's span, and the descent from the root
        // and the climbs cost more than the rest of a small rule: the answer is found once per
        // analysis of the tree (when its node list is built).
        let root = self.root();
        let Some(index) = crate::syntax::node_index::existing(root) else { return self.find_node_at(span) };
        if let Some(known) = index.recall::<Span, Option<u32>>(&span) {
            return known.map(|at| index.node_at(at, root));
        }
        let found = self.find_node_at(span);
        let position = match found {
            None => Some(None),
            Some(node) => index.position_of(node).map(Some),
        };
        if let Some(position) = position {
            index.remember(span, position);
        }
        found
    }

    fn find_node_at(&self, span: Span) -> Option<Node<'_>> {
        let mut node = self.root().descendant_for_byte_range(span.start, span.end)?;
        loop {
            if node.kind_name() == span.kind && node.start_byte() == span.start && node.end_byte() == span.end {
                return Some(node);
            }
            let parent = node.parent()?;
            if parent.start_byte() != span.start || parent.end_byte() != span.end {
                return None;
            }
            node = parent;
        }
    }
}

impl std::fmt::Debug for SourceFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SourceFile({})", self.path.display())
    }
}

/// One replacement in a text, in the terms `Tree::edit` needs (bytes; rows and byte columns
/// counted by `\n`, as tree-sitter counts them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextChange {
    pub input_edit: tree_sitter::InputEdit,
}

impl TextChange {
    /// The change replacing `before[start..old_end]` with `inserted`.
    pub fn new(before: &str, start: usize, old_end: usize, inserted: &str) -> TextChange {
        TextChange::at(start, old_end, inserted, point_at(before, start), point_at(before, old_end))
    }

    /// The same, given where `start` and `old_end` are (for texts not held as one string).
    pub fn at(
        start: usize,
        old_end: usize,
        inserted: &str,
        start_position: tree_sitter::Point,
        old_end_position: tree_sitter::Point,
    ) -> TextChange {
        let new_end_position = match memchr::memrchr(b'\n', inserted.as_bytes()) {
            None => tree_sitter::Point::new(start_position.row, start_position.column + inserted.len()),
            Some(last) => tree_sitter::Point::new(
                start_position.row + memchr::memchr_iter(b'\n', inserted.as_bytes()).count(),
                inserted.len() - last - 1,
            ),
        };
        TextChange {
            input_edit: tree_sitter::InputEdit {
                start_byte: start,
                old_end_byte: old_end,
                new_end_byte: start + inserted.len(),
                start_position,
                old_end_position,
                new_end_position,
            },
        }
    }
}

/// The tree-sitter point (row, byte column) of a byte offset.
fn point_at(text: &str, offset: usize) -> tree_sitter::Point {
    let before = &text.as_bytes()[..offset.min(text.len())];
    let row = memchr::memchr_iter(b'\n', before).count();
    let column = before.len() - memchr::memrchr(b'\n', before).map_or(0, |i| i + 1);
    tree_sitter::Point::new(row, column)
}

/// A node remembered without borrowing its tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    pub kind: &'static str,
}

impl Span {
    pub fn of(node: Node) -> Span {
        Span { start: node.start_byte(), end: node.end_byte(), kind: node.kind_name() }
    }
}

fn line_starts(text: &str) -> Vec<usize> {
    let mut starts = vec![0];
    starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
    starts
}

/// Every JS/TS file of the fixtures and examples, parsed: for tests that prove two ways of
/// finding the same nodes agree.
#[cfg(test)]
pub fn fixture_and_example_files() -> Vec<SourceFile> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["tests/fixtures", "examples"] {
        for entry in ignore::WalkBuilder::new(root.join(dir)).hidden(false).build().flatten() {
            let path = entry.path();
            let Some(dialect) = Dialect::for_path(path).filter(|d| *d != Dialect::Text) else { continue };
            let Ok(text) = std::fs::read_to_string(path) else { continue };
            files.push(SourceFile::new(path.to_path_buf(), text, dialect).expect("a fixture parses"));
        }
    }
    files
}

/// Strips `//` and `/* */` comments and trailing commas so tsconfig (JSONC) parses as JSON.
pub fn jsonc_to_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut in_string = false;
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            if c == '\\' {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            } else if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                out.push(c);
            }
            '/' if chars.peek() == Some(&'/') => {
                for n in chars.by_ref() {
                    if n == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for n in chars.by_ref() {
                    if prev == '*' && n == '/' {
                        break;
                    }
                    // Kept, so a parse error after the comment names the right line.
                    if n == '\n' {
                        out.push('\n');
                    }
                    prev = n;
                }
            }
            _ => out.push(c),
        }
    }
    let re = crate::regex!(r",(\s*[}\]])");
    re.replace_all(&out, "$1").into_owned()
}

/// A path as users see it: relative to the working directory when under it.
pub fn display_path(path: &std::path::Path) -> String {
    let cwd = std::env::current_dir().ok();
    let rel = cwd.as_deref().and_then(|c| path.strip_prefix(c).ok()).unwrap_or(path);
    rel.to_string_lossy().replace('\\', "/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn detects_crlf_tabs_and_single_quotes() {
        let style = Style::detect("import x from 'y'\r\nfunction f() {\r\n\treturn 'a'\r\n}\r\n");
        assert_eq!(style.eol, "\r\n");
        assert_eq!(style.indent_unit, "\t");
        assert_eq!(style.quote, '\'');
        assert!(!style.semicolons);
    }

    /// The detection as it was written before it became one pass: the same answers.
    fn detect_by_passes(text: &str) -> Style {
        let crlf = text.matches("\r\n").count();
        let lf = text.matches('\n').count();
        let eol = if crlf > 0 && crlf * 2 >= lf { "\r\n" } else { "\n" };
        let (mut tabs, mut spaced, mut steps, mut previous) = (0, 0, [0usize; 9], 0usize);
        for line in text.lines() {
            let trimmed = line.trim_start();
            if trimmed.is_empty() || trimmed.starts_with('*') {
                continue;
            }
            if line.starts_with('\t') {
                tabs += 1;
                continue;
            }
            let n = line.len() - line.trim_start_matches(' ').len();
            if n > 0 {
                spaced += 1;
            }
            if n > previous && n - previous <= 8 {
                steps[n - previous] += 1;
            }
            previous = n;
        }
        let indent_unit = if tabs > spaced {
            "\t".to_string()
        } else {
            let best = (1..=8).max_by_key(|&n| (steps[n], std::cmp::Reverse(n))).filter(|&n| steps[n] > 0);
            " ".repeat(best.unwrap_or(2))
        };
        let quote = if text.matches('\'').count() > text.matches('"').count() { '\'' } else { '"' };
        let stmt_ends = text
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.is_empty() && !l.ends_with('{') && !l.ends_with(',') && !l.trim_start().starts_with("//"))
            .count();
        let with_semi = text.lines().filter(|l| l.trim_end().ends_with(';')).count();
        Style { eol, indent_unit, quote, semicolons: stmt_ends == 0 || with_semi * 3 >= stmt_ends }
    }

    #[test]
    fn one_pass_detection_answers_as_the_passes_did() {
        let texts = [
            "",
            "\r\n\n\r",
            "import x from 'y'\r\nfunction f() {\r\n\treturn 'a'\r\n}\r\n",
            "a(\n    b,\n    c)\nfunction f() {\n  x();\n  if (y) {\n    z();\n  }\n}\n",
            "/**\n * doc;\n */\nconst a = \"b\" // c;\n\tx()\n   // y,\n  z;  \n\u{a0}w;\r",
            "x\r\ny\nz\r\n'\"'\r\n;\n{\n,",
        ];
        for text in texts {
            assert_eq!(Style::detect(text), detect_by_passes(text), "{text:?}");
        }
        for entry in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/src")).unwrap() {
            let path = entry.unwrap().path();
            if let Ok(text) = std::fs::read_to_string(&path) {
                assert_eq!(Style::detect(&text), detect_by_passes(&text), "{}", path.display());
            }
        }
    }

    #[test]
    fn indent_unit_is_the_usual_step() {
        assert_eq!(Style::detect("function f() {\n   if (x) {\n      y();\n   }\n}\n").indent_unit, "   ");
        assert_eq!(
            Style::detect("a(\n    b,\n    c)\nfunction f() {\n  x();\n  if (y) {\n    z();\n  }\n}\n").indent_unit,
            "  "
        );
        assert_eq!(Style::detect("x = 1;\n").indent_unit, "  ");
    }

    #[test]
    fn line_col_counts_characters() {
        let file = SourceFile::new("a.ts".into(), "const é = 1;\nfoo();\n".into(), Dialect::TypeScript).unwrap();
        assert_eq!(file.line_col(0), (1, 1));
        let foo = file.text.find("foo").unwrap();
        assert_eq!(file.line_col(foo), (2, 1));
        assert_eq!(file.line_text(2), "foo();");
    }

    /// Every node's kind, range and point: what analysis can read of a tree.
    fn shape(file: &SourceFile) -> Vec<(&'static str, usize, usize, tree_sitter::Point, tree_sitter::Point)> {
        let mut out = Vec::new();
        let mut cursor = file.root().walk();
        'walk: loop {
            let n = cursor.node();
            out.push((n.kind_name(), n.start_byte(), n.end_byte(), n.start_position(), n.end_position()));
            if cursor.goto_first_child() {
                continue;
            }
            while !cursor.goto_next_sibling() {
                if !cursor.goto_parent() {
                    break 'walk;
                }
            }
        }
        out
    }

    #[test]
    fn an_incremental_reparse_gives_the_tree_a_fresh_parse_gives() {
        let edits: [(&str, &str); 4] = [("await ", ""), ("{", "{\n  x();\n"), (");", ") + 1;"), ("(", "((")];
        let mut compared = 0;
        for file in fixture_and_example_files().into_iter().filter(|f| !f.text.starts_with('\u{feff}')) {
            let file = Arc::new(file);
            for (find, replace) in edits {
                // A first change, then a second one before the next parse, as an editor sends them.
                let Some(at) = file.text.rfind(find) else { continue };
                let once = format!("{}{replace}{}", &file.text[..at], &file.text[at + find.len()..]);
                let first = TextChange::new(&file.text, at, at + find.len(), replace);
                let second = TextChange::new(&once, 0, 0, "\n");
                let twice = format!("\n{once}");
                let incremental = file.reparsed(twice.clone(), &[first, second]).unwrap();
                let fresh = SourceFile::new(file.path.clone(), twice, file.dialect).unwrap();
                assert_eq!(incremental.root().to_sexp(), fresh.root().to_sexp(), "{}", file.path.display());
                assert!(shape(&incremental) == shape(&fresh), "{}", file.path.display());
                compared += 1;
            }
        }
        assert!(compared > 100);
    }
}
