//! Text-level building blocks for fixes that keep the file's style: indentation of wrapped
//! lines (never inside multi-line strings or templates), line ends, statement terminators.

use super::Edit;
use crate::model::ast;
use crate::source::SourceFile;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

/// Byte ranges of multi-line string-like nodes, whose inner lines must never be re-indented.
fn verbatim_ranges(within: Node) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    ast::walk(within, &mut |n| {
        if matches!(n.kind_name(), "template_string" | "string" | "comment" | "jsx_text")
            && n.start_position().row != n.end_position().row
        {
            // A block comment's continuation lines move with the code; strings do not.
            if n.kind_name() != "comment" {
                out.push((n.start_byte(), n.end_byte()));
            }
            return false;
        }
        true
    });
    out
}

/// One insertion of `unit` at the start of every non-blank line that begins in
/// `[start, end)`, except lines inside multi-line strings.
pub fn indent_lines(file: &SourceFile, within: Node, start: usize, end: usize, unit: &str) -> Vec<Edit> {
    let verbatim = verbatim_ranges(within);
    let text = &file.text;
    let mut edits = Vec::new();
    let mut line_start = file.line_start(start);
    while line_start < end {
        let line_end = text[line_start..].find('\n').map_or(text.len(), |i| line_start + i);
        let blank = text[line_start..line_end].trim().is_empty();
        let in_string = verbatim.iter().any(|&(s, e)| s < line_start && line_start < e);
        if !blank && !in_string {
            edits.push(Edit::insert(line_start, unit));
        }
        line_start = line_end + 1;
    }
    edits
}

/// The end of the line holding `offset` (before its `\r\n` or `\n`).
pub fn line_end(file: &SourceFile, offset: usize) -> usize {
    let text = &file.text;
    let end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    if end > 0 && text.as_bytes().get(end - 1) == Some(&b'\r') { end - 1 } else { end }
}

/// Wraps the statements `first..=last` (siblings in one block) in `open` ... `close`: a prefix
/// line, the statements re-indented by one unit, and a suffix line. Comments inside stay
/// byte-identical apart from the added indentation.
pub fn wrap_statements(file: &SourceFile, block: Node, first: Node, last: Node, open: &str, close: &str) -> Vec<Edit> {
    let style = file.style();
    let indent = file.indent_at(first.start_byte()).to_string();
    let first_line = file.line_start(first.start_byte());
    let last_end = line_end(file, last.end_byte());
    let mut edits = vec![Edit::insert(first_line, format!("{indent}{open}{}", style.eol))];
    edits.extend(indent_lines(file, block, first_line, last_end, &style.indent_unit));
    // The prefix and the first line's indentation share an offset: merge them.
    if edits.len() > 1 && edits[1].start == first_line {
        let unit = edits.remove(1).replacement;
        edits[0].replacement.push_str(&unit);
    }
    edits.push(Edit::insert(last_end, format!("{}{indent}{close}", style.eol)));
    edits
}
