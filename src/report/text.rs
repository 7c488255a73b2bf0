//! Human output: a code frame with a caret under each finding, then a summary.

use super::{display_path, end_line_col, is_fixable};
use crate::rules::Diagnostic;
use std::fmt::Write;

pub struct Palette {
    pub on: bool,
}

impl Palette {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.on { format!("\x1b[{code}m{s}\x1b[0m") } else { s.to_string() }
    }
    pub fn bold(&self, s: &str) -> String {
        self.paint("1", s)
    }
    pub fn red(&self, s: &str) -> String {
        self.paint("31", s)
    }
    pub fn yellow(&self, s: &str) -> String {
        self.paint("33", s)
    }
    pub fn cyan(&self, s: &str) -> String {
        self.paint("36", s)
    }
    pub fn dim(&self, s: &str) -> String {
        self.paint("2", s)
    }
    pub fn green(&self, s: &str) -> String {
        self.paint("32", s)
    }
}

pub fn render(diags: &[Diagnostic], palette: &Palette) -> String {
    let mut out = String::new();
    for d in diags {
        let (line, col) = d.line_col();
        let (end_line, end_col) = end_line_col(d);
        let _ = writeln!(
            out,
            "{}:{line}:{col}: {} {}",
            palette.bold(&display_path(&d.file.path)),
            if d.severity == crate::config::Severity::Warning {
                palette.yellow(&format!("{} (warning)", d.rule))
            } else {
                palette.red(d.rule)
            },
            d.message
        );
        if let Some(h) = &d.handler {
            let provider = d.provider.map(|p| format!(" ({})", p.name())).unwrap_or_default();
            let _ = writeln!(out, "  {} {h}{provider}", palette.dim("handler:"));
        }
        let width = end_line.to_string().len().max(2);
        let full = d.file.line_text(line);
        let caret_start = col - 1;
        let caret_len = if end_line == line {
            (end_col.saturating_sub(col)).max(1)
        } else {
            full.chars().count().saturating_sub(caret_start).max(1)
        };
        let (code, caret_start, caret_len) = frame_window(full, caret_start, caret_len);
        let _ = writeln!(out, "{:>width$} {}", "", palette.dim("|"));
        let _ = writeln!(out, "{} {} {code}", palette.dim(&format!("{line:>width$}")), palette.dim("|"));
        let pad: String = code.chars().take(caret_start).map(|c| if c == '\t' { '\t' } else { ' ' }).collect();
        let _ = writeln!(out, "{:>width$} {} {pad}{}", "", palette.dim("|"), palette.red(&"^".repeat(caret_len)));
        if let Some(help) = &d.help {
            let _ = writeln!(out, "{:>width$} {} {help}", "", palette.cyan("= help:"));
        }
        if let Some(fix) = &d.fix {
            let _ = writeln!(
                out,
                "{:>width$} {} {} [{}]",
                "",
                palette.cyan("= fix:"),
                fix.title,
                fix.applicability.label()
            );
        }
        out.push('\n');
    }
    out
}

/// The widest code frame line, in characters: a minified or generated file can have one line
/// of megabytes, and a frame of it per finding would bury the report.
pub const MAX_FRAME_CHARS: usize = 160;

/// The part of `line` a frame shows: all of it when short, else a window around the caret
/// with `…` where it was cut. Returns the text and the caret's start and length in it.
fn frame_window(line: &str, caret_start: usize, caret_len: usize) -> (String, usize, usize) {
    let total = line.chars().count();
    if total <= MAX_FRAME_CHARS {
        return (line.to_string(), caret_start, caret_len);
    }
    let context = MAX_FRAME_CHARS / 4;
    let from = caret_start.saturating_sub(context);
    let to = (from + MAX_FRAME_CHARS).min(total);
    let mut text: String = line.chars().skip(from).take(to - from).collect();
    let mut start = caret_start - from;
    if from > 0 {
        text.insert(0, '…');
        start += 1;
    }
    if to < total {
        text.push('…');
    }
    let len = caret_len.min(to.saturating_sub(caret_start)).max(1);
    (text, start, len)
}

pub fn summary(diags: &[Diagnostic]) -> String {
    let mut files: Vec<&std::path::Path> = diags.iter().map(|d| d.file.path.as_path()).collect();
    files.sort();
    files.dedup();
    let fixable = diags.iter().filter(|d| is_fixable(d)).count();
    if diags.is_empty() {
        return "No issues found.".to_string();
    }
    format!(
        "Found {} issue{} in {} file{} ({fixable} fixable).",
        diags.len(),
        if diags.len() == 1 { "" } else { "s" },
        files.len(),
        if files.len() == 1 { "" } else { "s" }
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn long_lines_are_cut_to_a_window_around_the_caret() {
        let line = format!("{}target(){}", "a".repeat(5000), "b".repeat(5000));
        let (text, start, len) = super::frame_window(&line, 5000, 8);
        assert!(text.chars().count() <= super::MAX_FRAME_CHARS + 2, "{}", text.len());
        assert_eq!(text.chars().skip(start).take(len).collect::<String>(), "target()");
        assert!(text.starts_with('…') && text.ends_with('…'));
        let (short, s, l) = super::frame_window("abc", 1, 1);
        assert_eq!((short.as_str(), s, l), ("abc", 1, 1));
    }
}
