//! One snapshot per fixture (findings, then the fix diff) plus the harness guarantees that
//! hold for every fixture: `bad_*` fires, `ok_*` stays silent, fixes converge, add no syntax
//! errors, are idempotent, keep CRLF, and a `retrysafe-ignore` comment silences the finding.
//!
//! Layout: `tests/fixtures/<rule-id>/<bad_|ok_><name>.<ext>` or a directory of that name
//! (a small project, for cross-file cases).

use retrysafe::engine::{Engine, Options, error_count};
use retrysafe::fix::{Applicability, GuardSpec};
use retrysafe::rules::{Diagnostic, Fixes};
use retrysafe::source::Dialect;
use std::fmt::Write;
use std::path::{Path, PathBuf};

const GUARD: &str = "@/lib/guard#guard";

fn fixtures() -> Vec<(String, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut out = Vec::new();
    for rule_dir in std::fs::read_dir(&root).unwrap().flatten() {
        let rule = rule_dir.file_name().to_string_lossy().to_string();
        if retrysafe::rules::find(&rule).is_none() {
            continue;
        }
        for entry in std::fs::read_dir(rule_dir.path()).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with("bad_") || name.starts_with("ok_") {
                out.push((rule.clone(), entry.path()));
            }
        }
    }
    out.sort();
    out
}

fn engine(paths: Vec<PathBuf>, rule: &str) -> Engine {
    Engine::new(Options {
        paths,
        select: vec![rule.to_string()],
        threads: 1,
        guard: GuardSpec::parse(GUARD),
        preview: true,
        ..Options::default()
    })
    .unwrap()
}

/// Everything a finding says but its fix.
fn without_fix(diags: &[Diagnostic]) -> Vec<String> {
    diags
        .iter()
        .map(|d| {
            let place = format!("{}:{}-{}", d.file.path.display(), d.start, d.end);
            format!("{} {place} {:?} {:?} {:?} {:?}", d.rule, d.message, d.help, d.handler, d.severity)
        })
        .collect()
}

fn copy_tree(from: &Path, to: &Path, crlf: bool) {
    if from.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap().flatten() {
            copy_tree(&e.path(), &to.join(e.file_name()), crlf);
        }
    } else {
        let text = std::fs::read_to_string(from).unwrap();
        let text = if crlf { text.replace("\r\n", "\n").replace('\n', "\r\n") } else { text };
        std::fs::write(to, text).unwrap();
    }
}

fn rel(path: &Path, root: &Path) -> String {
    path.strip_prefix(root).unwrap_or(path).to_string_lossy().replace('\\', "/")
}

fn describe(diags: &[Diagnostic], root: &Path) -> String {
    let mut out = String::new();
    for d in diags {
        let (line, col) = d.line_col();
        let fix =
            d.fix.as_ref().map(|f| format!(" [fix: {} ({})]", f.title, f.applicability.label())).unwrap_or_default();
        // Handler names may embed the absolute (temporary) path of their file.
        let handler = d
            .handler
            .as_deref()
            .map(|h| format!(" (handler: {})", h.replace(&format!("{}/", root.display()), "")))
            .unwrap_or_default();
        let _ = writeln!(out, "{}:{line}:{col} {} {}{handler}{fix}", rel(&d.file.path, root), d.rule, d.message);
    }
    out
}

/// Runs fix on a copy of the fixture, writes the result, returns (diff text, final texts).
fn fix_copy(rule: &str, work: &Path, root_name: &Path) -> (String, Vec<(PathBuf, String)>) {
    let engine = engine(vec![work.to_path_buf()], rule);
    let report = engine.fix(&|a| a != Applicability::DisplayOnly);
    let mut diff = String::new();
    let mut texts = Vec::new();
    for f in &report.files {
        assert!(f.problems.is_empty(), "{}: fix problems: {:?}", root_name.display(), f.problems);
        if f.original != f.fixed {
            let name = rel(&f.path, work);
            let _ = writeln!(diff, "--- {name}");
            for a in &f.applied {
                let _ = writeln!(diff, "# line {}: {} [{}] {}", a.line, a.rule, a.applicability.label(), a.title);
            }
            let text =
                similar::TextDiff::from_lines(&f.original, &f.fixed).unified_diff().context_radius(2).to_string();
            diff.push_str(&text);
            std::fs::write(&f.path, &f.fixed).unwrap();
            texts.push((f.path.clone(), f.fixed.clone()));
        }
    }
    for (p, t) in &report.new_files {
        let _ = writeln!(diff, "+++ new file {}\n{t}", rel(p, work));
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, t).unwrap();
    }
    (diff, texts)
}

/// Runs `check` on every fixture (or those `FIXTURE` names), collecting every failure.
fn for_each_fixture(check: fn(&str, &Path)) {
    let mut failures = Vec::new();
    let filter = std::env::var("FIXTURE").ok();
    for (rule, path) in fixtures() {
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if filter.as_ref().is_some_and(|f| !format!("{rule}/{name}").contains(f.as_str())) {
            continue;
        }
        if let Err(e) = std::panic::catch_unwind(|| check(&rule, &path)) {
            let msg = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(format!("{rule}/{name}: {msg}"));
        }
    }
    assert!(failures.is_empty(), "{} fixture(s) failed:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn fixtures_snapshot_and_guarantees() {
    for_each_fixture(check_fixture);
}

fn check_fixture(rule: &str, path: &Path) {
    let name = path.file_stem().unwrap().to_string_lossy().to_string();
    let bad = name.starts_with("bad_");
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join(path.file_name().unwrap());
    copy_tree(path, &work, false);
    let root = if work.is_dir() { work.clone() } else { tmp.path().to_path_buf() };

    let report = engine(vec![work.clone()], rule).check(Fixes::Build);
    assert!(report.errors.is_empty(), "errors: {:?}", report.errors);
    let own: Vec<Diagnostic> = report.diagnostics.iter().filter(|d| d.rule == rule).cloned().collect();
    if bad {
        assert!(!own.is_empty(), "expected `{rule}` to fire");
    } else {
        assert!(own.is_empty(), "expected silence, got:\n{}", describe(&own, &root));
    }
    let findings = describe(&report.diagnostics, &root);
    // Fixes are built only for the front ends that show them: skipping them changes no finding.
    let without_fixes = engine(vec![work.clone()], rule).check(Fixes::Skip).diagnostics;
    assert_eq!(without_fix(&without_fixes), without_fix(&report.diagnostics), "findings differ without fixes");
    assert!(without_fixes.iter().all(|d| d.fix.is_none()), "a finding built its fix with fixes skipped");

    // Fix, then the guarantees.
    let originals: Vec<(PathBuf, String)> = walk_files(&work)
        .into_iter()
        .map(|p| {
            let t = std::fs::read_to_string(&p).unwrap();
            (p, t)
        })
        .collect();
    let (diff, fixed) = fix_copy(rule, &work, path);
    for (p, text) in &fixed {
        let dialect = Dialect::for_path(p).unwrap_or(Dialect::Text);
        let before = originals.iter().find(|(q, _)| q == p).map(|(_, t)| error_count(t, dialect)).unwrap_or(0);
        assert!(error_count(text, dialect) <= before, "fix introduced syntax errors in {}:\n{text}", p.display());
    }
    if !fixed.is_empty() {
        let (again, _) = fix_copy(rule, &work, path);
        assert!(again.is_empty(), "fix is not idempotent; second pass:\n{again}");
        let after = engine(vec![work.clone()], rule).check(Fixes::Build);
        let remaining: Vec<_> = after
            .diagnostics
            .iter()
            .filter(|d| d.rule == rule && d.fix.as_ref().is_some_and(|f| f.applicability != Applicability::DisplayOnly))
            .collect();
        assert!(
            remaining.is_empty(),
            "fixed output still reports fixable findings:\n{}",
            describe(&after.diagnostics, &root)
        );
    }

    // CRLF: the same fix, with CRLF kept.
    if !fixed.is_empty() {
        let crlf_tmp = tempfile::tempdir().unwrap();
        let crlf_work = crlf_tmp.path().join(path.file_name().unwrap());
        copy_tree(path, &crlf_work, true);
        let (_, crlf_fixed) = fix_copy(rule, &crlf_work, path);
        for (p, text) in &crlf_fixed {
            let relp = p.strip_prefix(crlf_tmp.path()).unwrap();
            let lf = fixed
                .iter()
                .find(|(q, _)| q.strip_prefix(tmp.path()).unwrap() == relp)
                .map(|(_, t)| t.clone())
                .unwrap_or_default();
            assert_eq!(text, &lf.replace('\n', "\r\n"), "CRLF copy of {} fixed differently", relp.display());
        }
    }

    // Suppression: a retrysafe-ignore comment above each finding silences it.
    if bad {
        let sup_tmp = tempfile::tempdir().unwrap();
        let sup_work = sup_tmp.path().join(path.file_name().unwrap());
        copy_tree(path, &sup_work, false);
        let diags = engine(vec![sup_work.clone()], rule).check(Fixes::Build).diagnostics;
        let mut by_file: std::collections::BTreeMap<PathBuf, Vec<usize>> = Default::default();
        for d in diags.iter().filter(|d| d.rule == rule) {
            by_file.entry(d.file.path.clone()).or_default().push(d.line_col().0);
        }
        for (p, mut lines) in by_file {
            lines.sort();
            lines.dedup();
            let text = std::fs::read_to_string(&p).unwrap();
            let mut out: Vec<String> = text.split('\n').map(String::from).collect();
            for line in lines.into_iter().rev() {
                let indent: String = out[line - 1].chars().take_while(|c| c.is_whitespace()).collect();
                out.insert(line - 1, format!("{indent}// retrysafe-ignore {rule}: fixture test"));
            }
            std::fs::write(&p, out.join("\n")).unwrap();
        }
        let after = engine(vec![sup_work.clone()], rule).check(Fixes::Build).diagnostics;
        let left: Vec<_> = after.iter().filter(|d| d.rule == rule || d.rule == "unused-suppression").cloned().collect();
        assert!(left.is_empty(), "suppression did not silence:\n{}", describe(&left, &sup_work));
    }

    let snapshot = format!("## findings\n{findings}\n## fix (--guard {GUARD})\n{diff}");
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(Path::new(env!("CARGO_MANIFEST_DIR")).join("snapshots"));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.bind(|| insta::assert_snapshot!(format!("{rule}__{name}"), snapshot));
}

fn walk_files(p: &Path) -> Vec<PathBuf> {
    if p.is_file() {
        return vec![p.to_path_buf()];
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(p).unwrap().flatten() {
        out.extend(walk_files(&e.path()));
    }
    out
}

fn engine_with(paths: Vec<PathBuf>, select: &[&str], ignore: &[&str]) -> Engine {
    Engine::new(Options {
        paths,
        select: select.iter().map(|s| s.to_string()).collect(),
        ignore: ignore.iter().map(|s| s.to_string()).collect(),
        threads: 1,
        guard: GuardSpec::parse(GUARD),
        preview: true,
        ..Options::default()
    })
    .unwrap()
}

/// A finding as selection must leave it: rule, file, and the reported source text (offsets
/// shift when a suppression comment is inserted; the text does not).
fn finding_keys(diags: &[Diagnostic], root: &Path, keep: &dyn Fn(&str) -> bool) -> Vec<String> {
    let mut keys: Vec<String> = diags
        .iter()
        .filter(|d| keep(d.rule) && !d.rule.ends_with("-suppression"))
        .map(|d| {
            let reported: Vec<&str> = d.file.text[d.start..d.end]
                .split('\n')
                .filter(|line| !line.trim_start().starts_with("// retrysafe-ignore"))
                .collect();
            format!("{} {} {:?}", d.rule, rel(&d.file.path, root), reported.join("\n"))
        })
        .collect();
    keys.sort();
    keys
}

/// A finding `rules::arbitrate` gives to `winner` where both report one call (see
/// `rules::OVERLAPS`): with `winner` off or suppressed there, the other rule reports it, as
/// the contract says. Matched by file and the text of the reported line, which a suppression
/// comment above it does not move.
fn handed_back(d: &Diagnostic, winner: &str, all: &[Diagnostic], root: &Path, all_root: &Path) -> bool {
    let line_at = |d: &Diagnostic| {
        let start = d.file.text[..d.start].rfind('\n').map_or(0, |i| i + 1);
        let end = d.file.text[d.start..].find('\n').map_or(d.file.text.len(), |i| d.start + i);
        d.file.text[start..end].to_string()
    };
    retrysafe::rules::OVERLAPS.iter().any(|(w, loser)| {
        *w == winner
            && d.rule == *loser
            && all.iter().any(|o| {
                o.rule == winner && rel(&o.file.path, all_root) == rel(&d.file.path, root) && line_at(o) == line_at(d)
            })
    })
}

/// Enabling, disabling or suppressing one rule never adds or removes another rule's
/// findings (the rule contract: selection never changes findings); and with every rule enabled at
/// once, the fixes still converge, add no syntax error and are idempotent.
#[test]
fn all_rules_at_once_and_selection_independence() {
    for_each_fixture(check_independence);
}

fn check_independence(fixture_rule: &str, path: &Path) {
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join(path.file_name().unwrap());
    copy_tree(path, &work, false);
    let root = tmp.path();
    let all = engine_with(vec![work.clone()], &[], &[]).check(Fixes::Build).diagnostics;
    let mut rules: Vec<&'static str> = all.iter().map(|d| d.rule).filter(|r| !r.ends_with("-suppression")).collect();
    rules.extend(retrysafe::rules::find(fixture_rule).map(|r| r.id));
    rules.sort();
    rules.dedup();
    for &toggled in &rules {
        let mut only = engine_with(vec![work.clone()], &[toggled], &[]).check(Fixes::Build).diagnostics;
        only.retain(|d| !retrysafe::rules::OVERLAPS.iter().any(|(w, _)| handed_back(d, w, &all, root, root)));
        assert_eq!(
            finding_keys(&only, root, &|r| r == toggled),
            finding_keys(&all, root, &|r| r == toggled),
            "--select {toggled} changed its findings"
        );
        let mut without = engine_with(vec![work.clone()], &[], &[toggled]).check(Fixes::Build).diagnostics;
        without.retain(|d| !handed_back(d, toggled, &all, root, root));
        assert_eq!(
            finding_keys(&without, root, &|r| r != toggled),
            finding_keys(&all, root, &|r| r != toggled),
            "--ignore {toggled} changed another rule's findings"
        );
    }

    // Suppress each rule's findings in turn; the others stay as they were.
    for &suppressed in &rules {
        let sup_tmp = tempfile::tempdir().unwrap();
        let sup_work = sup_tmp.path().join(path.file_name().unwrap());
        copy_tree(path, &sup_work, false);
        let mut by_file: std::collections::BTreeMap<PathBuf, Vec<usize>> = Default::default();
        for d in all.iter().filter(|d| d.rule == suppressed) {
            let moved = sup_work.join(d.file.path.strip_prefix(&work).unwrap_or(Path::new("")));
            let target = if work.is_dir() { moved } else { sup_work.clone() };
            by_file.entry(target).or_default().push(d.line_col().0);
        }
        if by_file.is_empty() {
            continue;
        }
        for (p, mut lines) in by_file {
            lines.sort();
            lines.dedup();
            let text = std::fs::read_to_string(&p).unwrap();
            let mut out: Vec<String> = text.split('\n').map(String::from).collect();
            for line in lines.into_iter().rev() {
                let indent: String = out[line - 1].chars().take_while(|c| c.is_whitespace()).collect();
                out.insert(line - 1, format!("{indent}// retrysafe-ignore {suppressed}: independence test"));
            }
            std::fs::write(&p, out.join("\n")).unwrap();
        }
        let mut after = engine_with(vec![sup_work.clone()], &[], &[]).check(Fixes::Build).diagnostics;
        after.retain(|d| !handed_back(d, suppressed, &all, sup_tmp.path(), root));
        assert_eq!(
            finding_keys(&after, sup_tmp.path(), &|r| r != suppressed),
            finding_keys(&all, root, &|r| r != suppressed),
            "suppressing {suppressed} changed another rule's findings"
        );
    }

    // Every rule's fixes together: converge, parse, idempotent.
    let originals: Vec<(PathBuf, String)> =
        walk_files(&work).into_iter().map(|p| (p.clone(), std::fs::read_to_string(&p).unwrap())).collect();
    let fix_all = |work: &Path| {
        let report = engine_with(vec![work.to_path_buf()], &[], &[]).fix(&|a| a != Applicability::DisplayOnly);
        let mut changed = Vec::new();
        for f in &report.files {
            assert!(f.problems.is_empty(), "fix problems with all rules: {:?}", f.problems);
            if f.original != f.fixed {
                std::fs::write(&f.path, &f.fixed).unwrap();
                changed.push((f.path.clone(), f.fixed.clone()));
            }
        }
        for (p, t) in &report.new_files {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, t).unwrap();
        }
        changed
    };
    let fixed = fix_all(&work);
    for (p, text) in &fixed {
        let dialect = Dialect::for_path(p).unwrap_or(Dialect::Text);
        let before = originals.iter().find(|(q, _)| q == p).map(|(_, t)| error_count(t, dialect)).unwrap_or(0);
        assert!(error_count(text, dialect) <= before, "all-rules fix added syntax errors in {}:\n{text}", p.display());
    }
    if !fixed.is_empty() {
        let again = fix_all(&work);
        assert!(
            again.is_empty(),
            "all-rules fix is not idempotent: {:?}",
            again.iter().map(|c| &c.0).collect::<Vec<_>>()
        );
    }
}
