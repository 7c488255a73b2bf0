//! Output formats: text (code frames), json, sarif, github annotations, and the fix diff.

pub mod ci;
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

pub use crate::source::display_path;

pub fn is_fixable(d: &Diagnostic) -> bool {
    d.fix.as_ref().is_some_and(|f| {
        f.applicability != crate::fix::Applicability::DisplayOnly && (!f.edits.is_empty() || !f.new_files.is_empty())
    })
}

/// A workflow command's message: `%` and line breaks are escaped.
fn github_data(s: &str) -> String {
    s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A")
}

/// A workflow command's property value: also `:` and `,`, which end a value.
fn github_property(s: &str) -> String {
    github_data(s).replace(':', "%3A").replace(',', "%2C")
}

/// A path as a URI reference: every byte outside the unreserved set and `/` is
/// percent-encoded (SARIF requires valid URIs; a space or `#` in a path is not one).
pub fn uri_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub fn github(diags: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diags {
        let (line, col) = d.line_col();
        let (end_line, end_col) = end_line_col(d);
        let level = if severity(d) == Severity::Warning { "warning" } else { "error" };
        out.push_str(&format!(
            "::{level} file={},line={line},col={col},endLine={end_line},endColumn={end_col},title={}::{}\n",
            github_property(&display_path(&d.file.path)),
            github_property(&format!("retrysafe {}", d.rule)),
            github_data(&d.message),
        ));
    }
    out
}
