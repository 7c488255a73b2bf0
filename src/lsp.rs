//! `retrysafe lsp`: the same engine behind the Language Server Protocol (stdio). Diagnostics
//! on open/change/save; a quick fix per diagnostic (its own fix, safe or unsafe); and
//! `source.fixAll.retrysafe`, which runs the CLI's fixpoint on safe fixes only and returns one
//! minimal edit.

use crate::engine::{Engine, Options};
use crate::fix::{Applicability, GuardSpec};
use crate::rules::Diagnostic;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;

pub const FIX_ALL: &str = "source.fixAll.retrysafe";

pub fn serve(guard: Option<GuardSpec>) -> std::io::Result<()> {
    let stdin = std::io::stdin();
    let mut reader = BufReader::new(stdin.lock());
    let mut stdout = std::io::stdout();
    let mut server = Server { guard, documents: HashMap::new() };
    while let Some(message) = read_message(&mut reader)? {
        let method = message["method"].as_str().unwrap_or("").to_string();
        let id = message.get("id").cloned();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        let (result, notifications) = server.handle(&method, &params);
        for n in notifications {
            write_message(&mut stdout, &n)?;
        }
        if let Some(id) = id {
            let response = match result {
                Ok(r) => json!({ "jsonrpc": "2.0", "id": id, "result": r }),
                Err(e) => json!({ "jsonrpc": "2.0", "id": id, "error": { "code": -32601, "message": e } }),
            };
            write_message(&mut stdout, &response)?;
        }
        if method == "exit" {
            break;
        }
    }
    Ok(())
}

fn read_message(reader: &mut impl BufRead) -> std::io::Result<Option<Value>> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            length = v.trim().parse::<usize>().ok();
        }
    }
    let Some(length) = length else { return Ok(Some(Value::Null)) };
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(Some(serde_json::from_slice(&body).unwrap_or(Value::Null)))
}

fn write_message(out: &mut impl Write, value: &Value) -> std::io::Result<()> {
    let body = serde_json::to_string(value).unwrap_or_default();
    write!(out, "Content-Length: {}\r\n\r\n{body}", body.len())?;
    out.flush()
}

struct Server {
    guard: Option<GuardSpec>,
    documents: HashMap<String, String>,
}

impl Server {
    fn handle(&mut self, method: &str, params: &Value) -> (Result<Value, String>, Vec<Value>) {
        match method {
            "initialize" => (
                Ok(json!({
                    "capabilities": {
                        "textDocumentSync": { "openClose": true, "change": 1, "save": true },
                        "codeActionProvider": { "codeActionKinds": ["quickfix", FIX_ALL] }
                    },
                    "serverInfo": { "name": "retrysafe", "version": env!("CARGO_PKG_VERSION") }
                })),
                Vec::new(),
            ),
            "textDocument/didOpen" => {
                let uri = params["textDocument"]["uri"].as_str().unwrap_or("").to_string();
                let text = params["textDocument"]["text"].as_str().unwrap_or("").to_string();
                self.documents.insert(uri.clone(), text);
                (Ok(Value::Null), vec![self.publish(&uri)])
            }
            "textDocument/didChange" => {
                let uri = params["textDocument"]["uri"].as_str().unwrap_or("").to_string();
                if let Some(text) =
                    params["contentChanges"].as_array().and_then(|c| c.last()).and_then(|c| c["text"].as_str())
                {
                    self.documents.insert(uri.clone(), text.to_string());
                }
                (Ok(Value::Null), vec![self.publish(&uri)])
            }
            "textDocument/didSave" => {
                let uri = params["textDocument"]["uri"].as_str().unwrap_or("").to_string();
                (Ok(Value::Null), vec![self.publish(&uri)])
            }
            "textDocument/didClose" => {
                let uri = params["textDocument"]["uri"].as_str().unwrap_or("").to_string();
                self.documents.remove(&uri);
                let clear = json!({ "jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": { "uri": uri, "diagnostics": [] } });
                (Ok(Value::Null), vec![clear])
            }
            "textDocument/codeAction" => (Ok(self.code_actions(params)), Vec::new()),
            "shutdown" => (Ok(Value::Null), Vec::new()),
            "initialized" | "exit" | "$/cancelRequest" | "workspace/didChangeConfiguration" => {
                (Ok(Value::Null), Vec::new())
            }
            other => (Err(format!("method not supported: {other}")), Vec::new()),
        }
    }

    fn engine(&self, uri: &str) -> Option<(Engine, PathBuf, String)> {
        let path = uri_to_path(uri)?;
        let text = self.documents.get(uri)?.clone();
        let engine = Engine::new(Options {
            paths: vec![path.clone()],
            stdin: Some((path.clone(), text.clone())),
            threads: 1,
            guard: self.guard.clone(),
            ..Options::default()
        })
        .ok()?;
        Some((engine, path, text))
    }

    fn diagnostics(&self, uri: &str) -> Vec<(Diagnostic, Value)> {
        let Some((engine, path, text)) = self.engine(uri) else { return Vec::new() };
        engine
            .check()
            .diagnostics
            .into_iter()
            .filter(|d| d.file.path == path)
            .map(|d| {
                let range = range(&text, d.start, d.end);
                let mut message = d.message.clone();
                if let Some(h) = &d.help {
                    message.push_str(&format!("\nhelp: {h}"));
                }
                let lsp = json!({
                    "range": range,
                    "severity": 1,
                    "code": d.rule,
                    "source": "retrysafe",
                    "message": message,
                });
                (d, lsp)
            })
            .collect()
    }

    fn publish(&self, uri: &str) -> Value {
        let diagnostics: Vec<Value> = self.diagnostics(uri).into_iter().map(|(_, v)| v).collect();
        json!({ "jsonrpc": "2.0", "method": "textDocument/publishDiagnostics", "params": { "uri": uri, "diagnostics": diagnostics } })
    }

    fn code_actions(&self, params: &Value) -> Value {
        let uri = params["textDocument"]["uri"].as_str().unwrap_or("");
        let Some(text) = self.documents.get(uri) else { return json!([]) };
        let only: Vec<&str> = params["context"]["only"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let wants = |kind: &str| only.is_empty() || only.iter().any(|o| kind.starts_with(o));
        let mut actions = Vec::new();
        if wants("quickfix") {
            let requested = &params["range"];
            for (d, lsp) in self.diagnostics(uri) {
                let Some(fix) = &d.fix else { continue };
                if fix.applicability == Applicability::DisplayOnly || fix.target.is_some() || fix.edits.is_empty() {
                    continue;
                }
                if !ranges_touch(&lsp["range"], requested) {
                    continue;
                }
                let edits: Vec<Value> = fix
                    .edits
                    .iter()
                    .map(|e| json!({ "range": range(text, e.start, e.end), "newText": e.replacement }))
                    .collect();
                let review = if fix.applicability == Applicability::Unsafe { " (review)" } else { "" };
                actions.push(json!({
                    "title": format!("retrysafe: {}{review}", fix.title),
                    "kind": "quickfix",
                    "diagnostics": [lsp],
                    "isPreferred": fix.applicability == Applicability::Safe,
                    "edit": { "changes": { uri: edits } }
                }));
            }
        }
        if wants(FIX_ALL)
            && let Some((engine, path, original)) = self.engine(uri)
        {
            let report = engine.fix(&|a| a == Applicability::Safe);
            if let Some(f) = report.files.iter().find(|f| f.path == path && f.fixed != original) {
                let (start, end, replacement) = minimal_edit(&original, &f.fixed);
                actions.push(json!({
                    "title": "retrysafe: fix all safe issues",
                    "kind": FIX_ALL,
                    "edit": { "changes": { uri: [{ "range": range(&original, start, end), "newText": replacement }] } }
                }));
            }
        }
        Value::Array(actions)
    }
}

fn ranges_touch(a: &Value, b: &Value) -> bool {
    if b.is_null() {
        return true;
    }
    let pos = |v: &Value| (v["line"].as_u64().unwrap_or(0), v["character"].as_u64().unwrap_or(0));
    pos(&a["start"]) <= pos(&b["end"]) && pos(&b["start"]) <= pos(&a["end"])
}

/// The smallest single replacement that turns `old` into `new`.
pub fn minimal_edit(old: &str, new: &str) -> (usize, usize, String) {
    let prefix = old.bytes().zip(new.bytes()).take_while(|(a, b)| a == b).count();
    let mut prefix = prefix;
    while !old.is_char_boundary(prefix) || !new.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let max_suffix = (old.len() - prefix).min(new.len() - prefix);
    let mut suffix = old.bytes().rev().zip(new.bytes().rev()).take(max_suffix).take_while(|(a, b)| a == b).count();
    while !old.is_char_boundary(old.len() - suffix) || !new.is_char_boundary(new.len() - suffix) {
        suffix -= 1;
    }
    (prefix, old.len() - suffix, new[prefix..new.len() - suffix].to_string())
}

/// An LSP range (UTF-16 columns) for a byte range.
fn range(text: &str, start: usize, end: usize) -> Value {
    json!({ "start": position(text, start), "end": position(text, end) })
}

fn position(text: &str, offset: usize) -> Value {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count();
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let character: usize = text[line_start..offset].chars().map(char::len_utf16).sum();
    json!({ "line": line, "character": character })
}

fn uri_to_path(uri: &str) -> Option<PathBuf> {
    let rest = uri.strip_prefix("file://")?;
    let mut bytes = Vec::new();
    let raw = rest.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        if raw[i] == b'%' && i + 2 < raw.len() {
            if let Ok(b) = u8::from_str_radix(&rest[i + 1..i + 3], 16) {
                bytes.push(b);
                i += 3;
                continue;
            }
        }
        bytes.push(raw[i]);
        i += 1;
    }
    Some(PathBuf::from(String::from_utf8(bytes).ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_edit_spans_only_the_change() {
        assert_eq!(minimal_edit("abcXdef", "abcYYdef"), (3, 4, "YY".to_string()));
        assert_eq!(minimal_edit("same", "same"), (4, 4, String::new()));
    }

    #[test]
    fn positions_count_utf16_units() {
        assert_eq!(position("a😀b\nc", 5), json!({ "line": 0, "character": 3 }));
        assert_eq!(position("a😀b\nc", 7), json!({ "line": 1, "character": 0 }));
    }

    #[test]
    fn file_uris_decode() {
        assert_eq!(uri_to_path("file:///a%20b/c.ts"), Some(PathBuf::from("/a b/c.ts")));
    }
}
