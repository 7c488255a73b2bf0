//! `retrysafe doctor`: what a run would see, before any finding. The binary and platform, the
//! config each group of files resolves to, whether its guard spec reaches a module, and every
//! handler found (a new user's first question is "did it see my handler?").

use crate::engine::Engine;
use crate::fix::GuardSpec;
use crate::report::display_path;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::PathBuf;

pub struct Diagnosis {
    pub text: String,
    /// A config or path could not be read: the run itself would fail.
    pub failed: bool,
}

pub fn platform() -> String {
    let env = if cfg!(target_env = "musl") {
        " (musl)"
    } else if cfg!(target_env = "gnu") {
        " (glibc)"
    } else if cfg!(target_env = "msvc") {
        " (msvc)"
    } else {
        ""
    };
    format!("{} {}{env}", std::env::consts::OS, std::env::consts::ARCH)
}

pub fn diagnose(engine: &Engine) -> Diagnosis {
    let mut out = String::new();
    let mut failed = false;
    let binary = std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_else(|_| "?".into());
    let _ = writeln!(out, "retrysafe {} on {}", env!("CARGO_PKG_VERSION"), platform());
    let _ = writeln!(out, "binary: {binary}");
    if let Some(b) = std::env::var_os("RETRYSAFE_BINARY") {
        let _ = writeln!(out, "RETRYSAFE_BINARY: {}", b.to_string_lossy());
    }

    let mut groups: BTreeMap<Option<PathBuf>, Vec<&PathBuf>> = BTreeMap::new();
    for file in engine.files() {
        groups.entry(engine.config_source(file)).or_default().push(file);
    }
    let _ = writeln!(out, "\nconfig ({} files):", engine.files().len());
    if groups.is_empty() {
        let _ = writeln!(out, "  no source files found under {}", paths(engine));
    }
    for (source, files) in &groups {
        let name = source.as_ref().map_or("(none: the defaults)".to_string(), |p| display_path(p));
        let _ = writeln!(out, "  {name}: {} file{}", files.len(), if files.len() == 1 { "" } else { "s" });
        let config = match engine.config_for(files[0]) {
            Ok(c) => c,
            Err(e) => {
                failed = true;
                let _ = writeln!(out, "    error: {e}");
                continue;
            }
        };
        let mut settings = Vec::new();
        if !config.select.is_empty() {
            settings.push(format!("select {}", config.select.join(",")));
        }
        if !config.ignore.is_empty() {
            settings.push(format!("ignore {}", config.ignore.join(",")));
        }
        for (rule, level) in &config.severity {
            settings
                .push(format!("{rule}={}", serde_json::to_value(level).unwrap_or_default().as_str().unwrap_or("?")));
        }
        if !settings.is_empty() {
            let _ = writeln!(out, "    rules: {}", settings.join("; "));
        }
        let spec = engine.options.guard.clone().or_else(|| config.guard.as_deref().and_then(GuardSpec::parse));
        match spec {
            None => {
                let _ = writeln!(
                    out,
                    "    guard: none (fixes that need one are display-only; `retrysafe init` writes one)"
                );
            }
            Some(spec) => {
                let shown = format!("{}#{}", spec.module, spec.export);
                match engine.project.resolve(files[0], &spec.module) {
                    Some(module) => {
                        let text = std::fs::read_to_string(&module).unwrap_or_default();
                        let kind = ["prismaGuard", "postgresGuard", "drizzleGuard", "redisGuard"]
                            .into_iter()
                            .find(|k| text.contains(k))
                            .unwrap_or("no guard factory of @retrysafe/guard in it");
                        let exported = text.contains(&format!("export const {}", spec.export))
                            || text.contains(&format!("export {{ {}", spec.export))
                            || (spec.export == "default" && text.contains("export default"));
                        let export_note = if exported { "" } else { "; the export was not found in it" };
                        let _ = writeln!(out, "    guard: {shown} -> {} ({kind}{export_note})", display_path(&module));
                    }
                    None => {
                        let _ = writeln!(
                            out,
                            "    guard: {shown} does not resolve to a project file from {} (a package import, or no \
                             tsconfig `paths` entry maps it); database calls will not be moved onto the transaction",
                            display_path(files[0]).trim_start_matches("./")
                        );
                    }
                }
            }
        }
    }

    let (handlers, errors) = engine.entry_points();
    let mut files: Vec<&std::path::Path> = handlers.iter().map(|h| h.file.path.as_path()).collect();
    files.dedup();
    let _ = writeln!(
        out,
        "\nhandlers: {} in {} file{}",
        handlers.len(),
        files.len(),
        if files.len() == 1 { "" } else { "s" }
    );
    for h in &handlers {
        let (line, col) = h.file.line_col(h.function.start);
        let provider = h.provider.map(|p| p.name()).unwrap_or("provider unknown");
        let key = h.event_key.as_ref().map(|k| format!(", key {}", k.template)).unwrap_or_default();
        let _ = writeln!(
            out,
            "  {}:{line}:{col}: {} ({:?}, {provider}{key})",
            display_path(&h.file.path),
            h.name,
            h.framework
        );
    }
    if handlers.is_empty() {
        let _ = writeln!(
            out,
            "  none: no webhook route or queue consumer shape matched (see docs/rules.md, \"What counts as a handler\")"
        );
    }
    for e in errors {
        failed = true;
        let _ = writeln!(out, "error: {e}");
    }
    Diagnosis { text: out, failed }
}

fn paths(engine: &Engine) -> String {
    engine.options.paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// Each handler and the functions its analysis reaches, with the calls that led there; a
/// helper missing here is one whose findings no run can report.
pub fn reach(engine: &Engine) -> String {
    let mut out = String::new();
    let (handlers, errors) = engine.entry_points();
    for h in &handlers {
        let (line, _) = h.file.line_col(h.function.start);
        let (end, _) = h.file.line_col(h.function.end);
        let _ = writeln!(out, "{}:{line}-{end}: {} ({:?})", display_path(&h.file.path), h.name, h.framework);
        crate::model::reach::forget_resolutions();
        for scope in crate::model::reach::scopes(&engine.project, h).iter().skip(1) {
            let (line, _) = scope.file().line_col(scope.function.span.start);
            let (end, _) = scope.file().line_col(scope.function.span.end);
            let _ = writeln!(
                out,
                "  {}:{line}-{end}: {} <- {}",
                display_path(&scope.file().path),
                scope.function.name,
                scope.chain.join(" > ")
            );
        }
    }
    for e in errors {
        let _ = writeln!(out, "error: {e}");
    }
    out
}
