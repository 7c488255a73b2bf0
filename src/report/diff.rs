//! The dry run of `fix`: a unified diff per file, preceded by the fixes it holds.

use super::display_path;
use super::text::Palette;
use crate::engine::FileFix;
use similar::TextDiff;
use std::fmt::Write;

pub fn render(file: &FileFix, palette: &Palette) -> String {
    let mut out = String::new();
    if file.original == file.fixed {
        return out;
    }
    let name = display_path(&file.path);
    for a in &file.applied {
        let _ = writeln!(
            out,
            "{}",
            palette.cyan(&format!("# {name}:{}: {} [{}] {}", a.line, a.rule, a.applicability.label(), a.title))
        );
    }
    let diff = TextDiff::from_lines(&file.original, &file.fixed);
    let text = diff.unified_diff().context_radius(3).header(&format!("a/{name}"), &format!("b/{name}")).to_string();
    for line in text.split_inclusive('\n') {
        let painted = if line.starts_with("+++") || line.starts_with("---") {
            palette.bold(line.trim_end_matches('\n'))
        } else if line.starts_with('+') {
            palette.green(line.trim_end_matches('\n'))
        } else if line.starts_with('-') {
            palette.red(line.trim_end_matches('\n'))
        } else if line.starts_with("@@") {
            palette.cyan(line.trim_end_matches('\n'))
        } else {
            line.trim_end_matches('\n').to_string()
        };
        out.push_str(&painted);
        out.push('\n');
    }
    out
}

pub fn new_file(path: &std::path::Path, text: &str, palette: &Palette) -> String {
    let name = display_path(path);
    let diff = TextDiff::from_lines("", text);
    let body = diff.unified_diff().header("/dev/null", &format!("b/{name}")).to_string();
    body.lines()
        .map(|l| if l.starts_with('+') && !l.starts_with("+++") { palette.green(l) } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}
