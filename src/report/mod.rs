//! Output formats: text (code frames), json, sarif, github annotations, and the fix diff.

pub mod diff;
pub mod json;
pub mod sarif;
pub mod text;

use crate::config::Severity;
use crate::rules::Diagnostic;

/// Where a diagnostic ends, 1-based.
pub fn end_line_col(d: &Diagnostic) -> (usize, usize) {
    d.file.line_col(d.end)
}

pub fn severity(d: &Diagnostic) -> Severity {
    d.severity
}

/// A path as users see it: relative to the working directory when under it.
pub fn display_path(path: &std::path::Path) -> String {
    let cwd = std::env::current_dir().ok();
    let rel = cwd.as_deref().and_then(|c| path.strip_prefix(c).ok()).unwrap_or(path);
    rel.to_string_lossy().replace('\\', "/")
}

pub fn is_fixable(d: &Diagnostic) -> bool {
    d.fix.as_ref().is_some_and(|f| {
        f.applicability != crate::fix::Applicability::DisplayOnly && (!f.edits.is_empty() || !f.new_files.is_empty())
    })
}

pub fn github(diags: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diags {
        let (line, col) = d.line_col();
        let (end_line, end_col) = end_line_col(d);
        let level = if severity(d) == Severity::Warning { "warning" } else { "error" };
        let msg = d.message.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A");
        out.push_str(&format!(
            "::{level} file={},line={line},col={col},endLine={end_line},endColumn={end_col},title=retrysafe {}::{msg}\n",
            display_path(&d.file.path),
            d.rule
        ));
    }
    out
}
