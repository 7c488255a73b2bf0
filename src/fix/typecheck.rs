//! `fix --typecheck`: the project's own TypeScript compiler as a guard in the fixpoint. A
//! pass's text is type-checked next to the file it replaces (so relative imports and the
//! nearest tsconfig apply) and compared with the original's errors; a fix that adds an error
//! is dropped and named. Only where the project has `node_modules/.bin/tsc`: a compiler of
//! another version, or one without the project's types, would report noise, not the fix.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The project's compiler: `node_modules/.bin/tsc` in the nearest ancestor that has one.
pub fn find_tsc(file: &Path) -> Option<PathBuf> {
    let file = std::path::absolute(file).ok()?;
    file.ancestors().skip(1).map(|d| d.join("node_modules").join(".bin").join("tsc")).find(|p| p.is_file())
}

/// Whether the compiler checks this file (TypeScript sources).
pub fn checks(file: &Path) -> bool {
    file.extension().and_then(|e| e.to_str()).is_some_and(|e| matches!(e, "ts" | "tsx" | "mts" | "cts"))
}

/// Type errors of `text` standing in for `file`, as (code, message) with their counts.
pub type Errors = HashMap<(String, String), usize>;

static SEQ: AtomicUsize = AtomicUsize::new(0);

pub fn errors(tsc: &Path, file: &Path, text: &str) -> Result<Errors, String> {
    // The compiler runs in the file's folder: every path it is given is absolute.
    let file = &std::path::absolute(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let dir = file.parent().ok_or_else(|| format!("{}: no parent directory", file.display()))?;
    let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("ts");
    let stem = format!(".retrysafe-typecheck-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
    let probe = dir.join(format!("{stem}.{ext}"));
    let config = dir.join(format!("{stem}.json"));
    let base = file.ancestors().skip(1).find_map(|d| Some(d.join("tsconfig.json")).filter(|p| p.is_file()));
    let mut cfg = serde_json::json!({
        "compilerOptions": {
            "noEmit": true, "skipLibCheck": true, "incremental": false, "composite": false,
            "declaration": false, "tsBuildInfoFile": null
        },
        "files": [probe.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()],
        // The base config's `include` would pull the whole project in: only the probe.
        "include": [],
    });
    if let Some(base) = &base {
        cfg["extends"] = serde_json::Value::String(base.to_string_lossy().to_string());
    }
    let cleanup = || {
        let _ = std::fs::remove_file(&probe);
        let _ = std::fs::remove_file(&config);
    };
    let written = std::fs::write(&probe, text).and_then(|_| std::fs::write(&config, cfg.to_string()));
    if let Err(e) = written {
        cleanup();
        return Err(format!("{}: cannot write the type-check probe: {e}", dir.display()));
    }
    let out = Command::new(tsc).arg("-p").arg(&config).arg("--pretty").arg("false").current_dir(dir).output();
    cleanup();
    let out = out.map_err(|e| format!("{}: cannot run: {e}", tsc.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let probe_name = probe.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let mut found = Errors::new();
    for line in stdout.lines() {
        // `path(line,col): error TS1234: message`
        let Some((location, rest)) = line.split_once("): error ") else { continue };
        if !location.contains(&probe_name) {
            continue;
        }
        let Some((code, message)) = rest.split_once(": ") else { continue };
        *found.entry((code.to_string(), message.replace(&stem, "…"))).or_default() += 1;
    }
    Ok(found)
}

/// The first error `after` has more of than `before`, as `TS1234: message`.
pub fn added(before: &Errors, after: &Errors) -> Option<String> {
    let mut new: Vec<_> = after.iter().filter(|(k, n)| **n > before.get(*k).copied().unwrap_or(0)).collect();
    new.sort();
    new.first().map(|((code, message), _)| format!("{code}: {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn added_errors_are_the_ones_the_fix_brings() {
        let mut before = Errors::new();
        before.insert(("TS2307".into(), "Cannot find module".into()), 1);
        let mut after = before.clone();
        assert_eq!(added(&before, &after), None);
        after.insert(("TS1361".into(), "used as a value".into()), 1);
        assert_eq!(added(&before, &after).as_deref(), Some("TS1361: used as a value"));
        assert!(checks(Path::new("a/b.tsx")) && !checks(Path::new("a/b.js")));
    }
}
