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
    let diff = TextDiff::from_lines(&file.original, &file.fixed);
    let mut unified = diff.unified_diff();
    unified.context_radius(3);
    let label = |a: &crate::engine::AppliedFix| format!("{} [{}] {}", a.rule, a.applicability.label(), a.title);
    let hunk_of =
        |line: usize| unified.iter_hunks().position(|h| h.ops().iter().any(|op| op.old_range().contains(&(line - 1))));
    // Fixes outside every hunk are listed before the file; the others label their hunk's
    // header, where `git apply` and `patch` ignore free text, so the diff stays applicable.
    for a in file.applied.iter().filter(|a| hunk_of(a.line).is_none()) {
        let _ = writeln!(out, "{}", palette.cyan(&format!("# {name}:{}: {}", a.line, label(a))));
    }
    let _ = writeln!(out, "{}", palette.bold(&format!("--- a/{name}")));
    let _ = writeln!(out, "{}", palette.bold(&format!("+++ b/{name}")));
    for (index, hunk) in unified.iter_hunks().enumerate() {
        let text = hunk.to_string();
        let mut lines = text.split_inclusive('\n');
        if let Some(header) = lines.next() {
            let labels: Vec<String> =
                file.applied.iter().filter(|a| hunk_of(a.line) == Some(index)).map(label).collect();
            let header = header.trim_end_matches('\n');
            let header = if labels.is_empty() { header.to_string() } else { format!("{header} {}", labels.join("; ")) };
            let _ = writeln!(out, "{}", palette.cyan(&header));
        }
        for line in lines {
            let bare = line.trim_end_matches('\n');
            let painted = if line.starts_with('+') {
                palette.green(bare)
            } else if line.starts_with('-') {
                palette.red(bare)
            } else {
                bare.to_string()
            };
            out.push_str(&painted);
            out.push('\n');
        }
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
