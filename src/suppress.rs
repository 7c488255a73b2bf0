//! `// retrysafe-ignore RULE[, RULE]: reason` (same line or the line before; `--` in SQL) and
//! `// retrysafe-ignore-file RULE: reason`. A suppression needs a reason, and one that
//! suppresses nothing is reported.

use crate::rules::Diagnostic;
use crate::source::SourceFile;
use regex::Regex;
use std::sync::{Arc, OnceLock};

pub use crate::rules::{INVALID_SUPPRESSION as INVALID, UNUSED_SUPPRESSION as UNUSED};

#[derive(Debug, Clone)]
pub struct Suppression {
    /// 1-based line of the comment.
    pub line: usize,
    pub offset: usize,
    pub len: usize,
    pub file_wide: bool,
    pub rules: Vec<String>,
    pub reason: Option<String>,
}

pub fn parse(file: &SourceFile) -> Vec<Suppression> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"(?://|--|/\*|\{/\*)\s*retrysafe-ignore(-file)?\b[ \t]*([a-z0-9,\- \t]*?)[ \t]*(?::[ \t]*([^\n*]*?))?[ \t]*(?:\*/\}?)?[ \t]*\r?$").unwrap()
    });
    let mut out = Vec::new();
    if !file.text.contains("retrysafe-ignore") {
        return out;
    }
    let mut offset = 0;
    for (i, line) in file.text.split('\n').enumerate() {
        if let Some(c) = re.captures(line) {
            let m = c.get(0).unwrap();
            out.push(Suppression {
                line: i + 1,
                offset: offset + m.start(),
                len: m.len(),
                file_wide: c.get(1).is_some(),
                rules: c[2]
                    .split([',', ' ', '\t'])
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
                reason: c.get(3).map(|r| r.as_str().trim().to_string()).filter(|r| !r.is_empty()),
            });
        }
        offset += line.len() + 1;
    }
    out
}

/// Removes suppressed diagnostics from `diagnostics` (all in `file`) and appends the
/// suppression problems of `file`.
pub fn apply(file: &Arc<SourceFile>, diagnostics: &mut Vec<Diagnostic>, enabled: &dyn Fn(&str) -> bool) {
    let suppressions = parse(file);
    if suppressions.is_empty() {
        return;
    }
    let mut used = vec![false; suppressions.len()];
    diagnostics.retain(|d| {
        let (line, _) = d.line_col();
        let hit = suppressions
            .iter()
            .position(|s| s.rules.iter().any(|r| r == d.rule) && (s.file_wide || s.line == line || s.line + 1 == line));
        if let Some(i) = hit {
            used[i] = true;
        }
        hit.is_none()
    });
    for (s, used) in suppressions.iter().zip(used) {
        let make = |rule: &'static str, message: String| Diagnostic {
            rule,
            file: file.clone(),
            start: s.offset,
            end: s.offset + s.len,
            message,
            help: None,
            handler: None,
            provider: None,
            fix: None,
            severity: if rule == UNUSED { crate::config::Severity::Warning } else { crate::config::Severity::Error },
        };
        if s.rules.is_empty() {
            diagnostics
                .push(make(INVALID, "retrysafe-ignore names no rule: write `retrysafe-ignore RULE: reason`".into()));
            continue;
        }
        if let Some(unknown) = s.rules.iter().find(|r| crate::rules::find(r).is_none()) {
            diagnostics.push(make(INVALID, format!("retrysafe-ignore names an unknown rule `{unknown}`")));
            continue;
        }
        if s.reason.is_none() {
            diagnostics.push(make(
                INVALID,
                format!("retrysafe-ignore {} has no reason: add `: why this is safe`", s.rules.join(", ")),
            ));
        }
        if !used && s.rules.iter().all(|r| enabled(r)) {
            diagnostics
                .push(make(UNUSED, format!("retrysafe-ignore {} suppresses nothing: remove it", s.rules.join(", "))));
        }
    }
}
