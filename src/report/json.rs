//! Stable JSON output (documented in README.md): one object per finding.

use super::{display_path, end_line_col, is_fixable, severity};
use crate::rules::Diagnostic;
use serde::Serialize;

#[derive(Serialize)]
pub struct JsonEdit {
    pub start: usize,
    pub end: usize,
    pub start_line: usize,
    pub start_column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub replacement: String,
}

#[derive(Serialize)]
pub struct JsonFix {
    pub title: String,
    pub applicability: crate::fix::Applicability,
    pub file: String,
    pub edits: Vec<JsonEdit>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub new_files: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Serialize)]
pub struct JsonDiagnostic {
    pub rule: &'static str,
    pub severity: crate::config::Severity,
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
    pub message: String,
    pub help: Option<String>,
    pub handler: Option<String>,
    pub provider: Option<&'static str>,
    pub fixable: bool,
    pub fix: Option<JsonFix>,
}

pub fn diagnostic(d: &Diagnostic, project: Option<&crate::project::Project>) -> JsonDiagnostic {
    let (line, column) = d.line_col();
    let (end_line, end_column) = end_line_col(d);
    let fix = d.fix.as_ref().map(|f| {
        let target_file = match (&f.target, project) {
            (Some(t), Some(p)) => p.load(t).ok(),
            (Some(_), None) => None,
            (None, _) => Some(d.file.clone()),
        };
        let edits = target_file
            .map(|file| {
                f.edits
                    .iter()
                    .map(|e| {
                        let (start_line, start_column) = file.line_col(e.start);
                        let (end_line, end_column) = file.line_col(e.end);
                        JsonEdit {
                            start: e.start,
                            end: e.end,
                            start_line,
                            start_column,
                            end_line,
                            end_column,
                            replacement: e.replacement.clone(),
                        }
                    })
                    .collect()
            })
            .unwrap_or_default();
        JsonFix {
            title: f.title.clone(),
            applicability: f.applicability,
            file: display_path(f.target.as_deref().unwrap_or(&d.file.path)),
            edits,
            new_files: f.new_files.iter().map(|(p, _)| display_path(p)).collect(),
            note: f.note.clone(),
        }
    });
    JsonDiagnostic {
        rule: d.rule,
        severity: severity(d),
        file: display_path(&d.file.path),
        line,
        column,
        end_line,
        end_column,
        message: d.message.clone(),
        help: d.help.clone(),
        handler: d.handler.clone(),
        provider: d.provider.map(|p| p.name()),
        fixable: is_fixable(d),
        fix,
    }
}

pub fn render(diags: &[Diagnostic], project: Option<&crate::project::Project>) -> String {
    let items: Vec<JsonDiagnostic> = diags.iter().map(|d| diagnostic(d, project)).collect();
    serde_json::to_string_pretty(&items).unwrap_or_else(|_| "[]".into())
}
