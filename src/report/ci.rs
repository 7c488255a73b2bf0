//! Formats for CI systems and other tools: `concise` (one line per finding), JUnit XML (test
//! reports) and GitLab Code Quality JSON. All are deterministic for the same findings, so a
//! build system may cache them.

use super::{display_path, is_fixable, severity};
use crate::config::Severity;
use crate::rules::Diagnostic;
use std::collections::BTreeMap;
use std::fmt::Write;

/// `file:line:col: rule message`, one line per finding.
pub fn concise(diags: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diags {
        let (line, col) = d.line_col();
        let warning = if severity(d) == Severity::Warning { " (warning)" } else { "" };
        let fixable = if is_fixable(d) { " [fixable]" } else { "" };
        let _ =
            writeln!(out, "{}:{line}:{col}: {}{warning}{fixable} {}", display_path(&d.file.path), d.rule, d.message);
    }
    out
}

fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 cannot hold other control characters, even escaped.
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// One test suite per file with findings, one failing test case per finding.
pub fn junit(diags: &[Diagnostic]) -> String {
    let mut by_file: BTreeMap<String, Vec<&Diagnostic>> = BTreeMap::new();
    for d in diags {
        by_file.entry(display_path(&d.file.path)).or_default().push(d);
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(out, "<testsuites name=\"retrysafe\" tests=\"{0}\" failures=\"{0}\">", diags.len());
    for (file, diags) in &by_file {
        let file = xml_escape(file);
        let _ = writeln!(out, "  <testsuite name=\"{file}\" tests=\"{0}\" failures=\"{0}\" errors=\"0\">", diags.len());
        for d in diags {
            let (line, col) = d.line_col();
            let mut body = format!("{file}:{line}:{col}: {}", d.message);
            if let Some(h) = &d.handler {
                let _ = write!(body, "\nhandler: {h}");
            }
            if let Some(help) = &d.help {
                let _ = write!(body, "\nhelp: {help}");
            }
            let _ = writeln!(
                out,
                "    <testcase name=\"{} {line}:{col}\" classname=\"{file}\" file=\"{file}\" line=\"{line}\">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>",
                d.rule,
                xml_escape(&d.message),
                d.rule,
                xml_escape(&body)
            );
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// FNV-1a: a fingerprint that stays the same across builds and platforms.
fn fingerprint(parts: &[&str]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain([0]) {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

/// GitLab Code Quality: the fingerprint hashes the rule, the file and the flagged line's text
/// (not its number), so a finding keeps its identity when code above it moves.
pub fn gitlab(diags: &[Diagnostic]) -> String {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let items: Vec<serde_json::Value> = diags
        .iter()
        .map(|d| {
            let (line, _) = d.line_col();
            let (end_line, _) = super::end_line_col(d);
            let path = display_path(&d.file.path);
            let base = fingerprint(&[d.rule, &path, d.file.line_text(line).trim()]);
            // Two findings on identical lines stay distinct.
            let n = seen.entry(base.clone()).or_default();
            *n += 1;
            let fingerprint = if *n == 1 { base } else { fingerprint(&[&base, &n.to_string()]) };
            serde_json::json!({
                "description": d.message,
                "check_name": d.rule,
                "fingerprint": fingerprint,
                "severity": if severity(d) == Severity::Warning { "minor" } else { "major" },
                "location": { "path": path, "lines": { "begin": line, "end": end_line } },
            })
        })
        .collect();
    serde_json::to_string_pretty(&items).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn xml_escapes_markup_and_drops_control_characters() {
        assert_eq!(super::xml_escape("a<b & \"c\"\u{1}"), "a&lt;b &amp; &quot;c&quot;\u{fffd}");
    }

    #[test]
    fn fingerprints_are_stable() {
        assert_eq!(super::fingerprint(&["a", "b"]), super::fingerprint(&["a", "b"]));
        assert_ne!(super::fingerprint(&["ab", ""]), super::fingerprint(&["a", "b"]));
    }
}
