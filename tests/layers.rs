//! The crate's layers depend one way (ARCHITECTURE.md): each module may name only modules of
//! its own layer or the layers before it. This test reads every source file's `crate::` paths
//! and fails on a back-edge, and on any rule that imports another rule's internals.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Layers in data-flow order; a module may depend on its own layer and the ones before it.
const LAYERS: &[(&str, &[&str])] = &[
    ("syntax", &["source", "syntax", "regex", "suggest"]),
    ("workspace", &["workspace", "config"]),
    ("project", &["project"]),
    ("model", &["model"]),
    ("facts", &["facts"]),
    // Fix builders (edits, guard wraps, imports); rules call them. Applying fixes is the engine's.
    ("fix", &["fix"]),
    ("rules", &["rules"]),
    ("arbitration", &["suppress"]),
    ("engine", &["engine"]),
    ("front ends", &["report", "batch", "lsp", "bench", "main", "init", "doctor", "verify"]),
];

fn layer_of_module(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, modules)| modules.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a source file belongs to (`src/model/ast.rs` → `model`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next().unwrap().as_os_str().to_string_lossy().to_string();
    first.trim_end_matches(".rs").to_string()
}

/// The rule a file under `src/rules/` defines, if it is one.
fn rule_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src.join("rules")).ok()?;
    let name = rel.to_string_lossy().trim_end_matches(".rs").to_string();
    (name != "mod").then_some(name)
}

/// Code only: line comments and doc comments are dropped, so a comment may name any module.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().map(|(i, l)| (i + 1, l.split("//").next().unwrap_or(""))).filter(|(_, l)| !l.is_empty())
}

/// `crate::X` and `crate::rules::Y` (X, Y identifiers) mentioned on a line, also inside
/// `use crate::{X, ...}` groups.
fn crate_paths(line: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().last();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let path: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        let segments: Vec<String> = path.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect();
        if !segments.is_empty() {
            out.push(segments);
        }
    }
    out
}

/// The first segments of the paths a line names through `super::`, also in
/// `use super::{a, b::c}` groups.
fn super_names(line: &str) -> Vec<String> {
    let ident = |s: &str| s.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("super::") {
        rest = &rest[at + "super::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let inner = &group[..group.find('}').unwrap_or(group.len())];
                out.extend(inner.split(',').map(ident).filter(|n| !n.is_empty()));
            }
            None => out.push(ident(rest)),
        }
    }
    out
}

#[test]
fn no_module_depends_on_a_later_layer() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut back_edges = Vec::new();
    let mut rule_to_rule = BTreeSet::new();
    for file in &files {
        let module = module_of(&src, file);
        if module == "lib" {
            continue;
        }
        let Some(own) = layer_of_module(&module) else {
            back_edges.push(format!("{}: module `{module}` has no layer in this test", file.display()));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        let rule = rule_of(&src, file);
        for (line_no, line) in code_lines(&text) {
            // In a file's own test module `super::` is the file itself.
            if line.trim_start().starts_with("#[cfg(test)]") {
                break;
            }
            let mut paths = crate_paths(line);
            // Inside `rules/`, `super::x` names a sibling rule (or the registry, `super::Rule`).
            if rule.is_some() {
                for name in super_names(line) {
                    paths.push(vec!["rules".to_string(), name]);
                }
            }
            for path in paths {
                let target = &path[0];
                let Some(theirs) = layer_of_module(target) else { continue };
                if theirs > own {
                    back_edges.push(format!(
                        "{}:{line_no}: `{module}` ({}) uses `crate::{}` ({})",
                        file.display(),
                        LAYERS[own].0,
                        path.join("::"),
                        LAYERS[theirs].0
                    ));
                }
                // a rule is a file of `rules/`; the registry's own items in `rules/mod.rs`
                // (find, check_id, shared emitters) are for every rule
                let names_a_rule = target == "rules"
                    && path.get(1).is_some_and(|p| src.join("rules").join(format!("{p}.rs")).is_file());
                if names_a_rule {
                    match &rule {
                        Some(own_rule) if *own_rule != path[1] => {
                            rule_to_rule.insert((own_rule.clone(), path[1].clone()));
                        }
                        Some(_) => {}
                        // Outside `rules/`, only the registry may be named: `fix` building a
                        // fix from a rule's internals is a back-edge even though `fix` is
                        // layered before `rules`, and so is the engine reaching into one rule.
                        None if module != "rules" => back_edges.push(format!(
                            "{}:{line_no}: `{module}` uses the internals of rule `{}`",
                            file.display(),
                            path[1]
                        )),
                        None => {}
                    }
                }
            }
        }
    }
    assert!(back_edges.is_empty(), "dependencies against the data flow:\n{}", back_edges.join("\n"));
    // No exceptions: a predicate two rules share lives in `model` or `facts`, so disabling or
    // rewriting one rule cannot change another.
    let new: Vec<String> = rule_to_rule
        .iter()
        .map(|(a, b)| format!("rule `{a}` imports rule `{b}`: move the shared predicate into model or facts"))
        .collect();
    assert!(new.is_empty(), "{}", new.join("\n"));
}

#[test]
fn the_path_reader_sees_grouped_and_nested_paths() {
    assert_eq!(crate_paths("use crate::model::ast::{self, text};"), vec![vec!["model", "ast"]]);
    assert_eq!(
        crate_paths("let x = crate::rules::find(id).or(crate::fix::edits::set_status(r));"),
        vec![vec!["rules", "find"], vec!["fix", "edits", "set_status"]]
    );
    assert!(crate_paths("use my_crate::rules::x;").is_empty());
    assert_eq!(
        super_names("use super::{Context, Rule, check_then_insert_race};"),
        ["Context", "Rule", "check_then_insert_race"]
    );
    assert_eq!(super_names("x(super::ack_timing::deferrer(a))"), ["ack_timing"]);
}
