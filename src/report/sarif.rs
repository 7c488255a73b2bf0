//! SARIF 2.1.0 with one reporting descriptor (and help text) per rule.

use super::{display_path, end_line_col, severity};
use crate::config::Severity;
use crate::rules::{self, Diagnostic};
use serde_json::json;

pub fn render(diags: &[Diagnostic]) -> String {
    let registry = rules::registry();
    let mut descriptors: Vec<serde_json::Value> = registry
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.id,
                "shortDescription": { "text": r.summary },
                "fullDescription": { "text": r.summary },
                "help": { "text": r.docs, "markdown": r.docs },
                "helpUri": format!("https://github.com/retrysafe/retrysafe/blob/main/README.md#{}", r.id),
                "defaultConfiguration": { "level": "error" },
            })
        })
        .collect();
    for (id, text) in [
        (crate::suppress::UNUSED, "A retrysafe-ignore comment suppresses nothing."),
        (crate::suppress::INVALID, "A retrysafe-ignore comment is malformed or has no reason."),
    ] {
        descriptors
            .push(json!({ "id": id, "name": id, "shortDescription": { "text": text }, "help": { "text": text } }));
    }
    let index_of = |id: &str| descriptors.iter().position(|d| d["id"] == id).unwrap_or(0);
    let results: Vec<serde_json::Value> = diags
        .iter()
        .map(|d| {
            let (line, col) = d.line_col();
            let (end_line, end_col) = end_line_col(d);
            let mut message = d.message.clone();
            if let Some(h) = &d.handler {
                message.push_str(&format!(" (handler: {h})"));
            }
            json!({
                "ruleId": d.rule,
                "ruleIndex": index_of(d.rule),
                "level": if severity(d) == Severity::Warning { "warning" } else { "error" },
                "message": { "text": message },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": super::uri_path(&display_path(&d.file.path)) },
                        "region": { "startLine": line, "startColumn": col, "endLine": end_line, "endColumn": end_col }
                    }
                }]
            })
        })
        .collect();
    let doc = json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": {
                "name": "retrysafe",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://github.com/retrysafe/retrysafe",
                "rules": descriptors
            }},
            "results": results
        }]
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}
