//! The pipeline: discover files → prefilter → parse → find handlers and their scopes → run
//! rules → suppressions. `check` reports; `fix` applies fixes to a fixpoint.

use crate::config::{Config, ConfigError, ConfigResolver};
use crate::facts::{Context, Fixes, HandlerModel};
use crate::fix::{Applicability, GuardSpec, apply};
use crate::model::{handlers, reach};
use crate::project::{self, Project};
use crate::rules::{self, Diagnostic};
use crate::source::{Dialect, SourceFile};
use crate::syntax::budget;
use crate::{suppress, workspace};
use rayon::prelude::*;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Clone, Debug, Default)]
pub struct Options {
    pub paths: Vec<PathBuf>,
    pub select: Vec<String>,
    pub ignore: Vec<String>,
    pub config: Option<PathBuf>,
    pub threads: usize,
    /// `--stdin-filename`: the path the text read from stdin stands for.
    pub stdin: Option<(PathBuf, String)>,
    pub guard: Option<GuardSpec>,
    /// Parse and analyse every discovered file, as if the byte prefilter let all of them
    /// through (the benchmark's "every file is relevant" case).
    pub no_prefilter: bool,
    /// Run the preview rules too (`--preview`).
    pub preview: bool,
    /// `fix --typecheck`: drop a fix that adds a type error (the project's own `tsc`).
    pub typecheck: bool,
}

#[derive(Debug)]
pub enum Fatal {
    Config(ConfigError),
    Usage(String),
}

impl std::fmt::Display for Fatal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fatal::Config(e) => e.fmt(f),
            Fatal::Usage(m) => f.write_str(m),
        }
    }
}

#[derive(Default)]
pub struct Report {
    pub diagnostics: Vec<Diagnostic>,
    /// Files skipped for a reason worth a note (binary, too large, not UTF-8).
    pub notes: Vec<String>,
    /// Paths or configs that could not be read: the run itself failed for them.
    pub errors: Vec<String>,
    pub files_checked: usize,
}

pub struct Engine {
    pub options: Options,
    pub project: Project,
    configs: ConfigResolver,
    files: Vec<PathBuf>,
    /// Set while fixing: edited texts live only in the project cache.
    keep_parsed: AtomicBool,
    /// Set by the fix loop after its first pass when only safe fixes are applied: the later
    /// passes look only for more fixes to apply, which only rules with safe fixes can give.
    safe_fixers_only: AtomicBool,
    discovery_errors: Vec<String>,
    /// Files holding a handler analysed in this run, or a function one reaches: only there
    /// can a run over a few files tell that a suppression suppresses nothing.
    reached: std::sync::Mutex<HashSet<PathBuf>>,
    /// Called for every file `check` analysed, with that file's own raw findings (batch runs:
    /// the progress line and the result cache).
    pub on_file: Option<FileHook>,
    /// Handlers found per analysed file (the per-package summary).
    pub handlers_found: std::sync::Mutex<BTreeMap<PathBuf, usize>>,
}

pub type FileHook = Box<dyn Fn(&Path, &[Diagnostic]) + Send + Sync>;

impl Engine {
    pub fn new(mut options: Options) -> Result<Engine, Fatal> {
        for id in options.select.iter().chain(&options.ignore) {
            rules::check_id(id).map_err(Fatal::Usage)?;
        }
        let explicit = match &options.config {
            Some(path) => Some(Config::load(path, rules::check_id).map_err(Fatal::Config)?),
            None => None,
        };
        if options.threads == 0 {
            options.threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        }
        let mut project = Project::new();
        let (files, discovery_errors) = match &options.stdin {
            Some((path, text)) => {
                project.stdin_override = Some((path.clone(), text.clone()));
                (vec![path.clone()], Vec::new())
            }
            None => {
                let found = workspace::discover(&options.paths, options.threads);
                (found.files, found.errors)
            }
        };
        Ok(Engine {
            options,
            project,
            configs: ConfigResolver::new(explicit, rules::check_id),
            files,
            discovery_errors,
            keep_parsed: AtomicBool::new(false),
            safe_fixers_only: AtomicBool::new(false),
            reached: std::sync::Mutex::default(),
            on_file: None,
            handlers_found: Default::default(),
        })
    }

    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// Narrows the run to some of the discovered files (`--changed-since`, `--shard`, cache
    /// hits).
    pub fn retain_files(&mut self, keep: impl Fn(&Path) -> bool) {
        self.files.retain(|p| keep(p));
    }

    fn rule_enabled(&self, config: &Config, id: &str) -> bool {
        let selected = self.options.select.iter().any(|r| r == id);
        config.rule_enabled(id, rules::find(id).is_some_and(|r| r.preview), self.options.preview, selected)
            && (self.options.select.is_empty() || selected)
            && !self.options.ignore.iter().any(|r| r == id)
    }

    /// Every file's findings; with `Fixes::Skip` they carry no fixes (for a report that shows
    /// none), which saves planning them.
    pub fn check(&self, fixes: Fixes) -> Report {
        let outcomes = self.analyse_paths(&self.files, false, fixes);
        self.report(outcomes.iter().map(|(o, _)| o))
    }

    /// Analyses `paths` in parallel, in order; with `record`, each with the project files its
    /// analysis read (what the fix loop needs to know which files an edit can affect).
    fn analyse_paths(&self, paths: &[PathBuf], record: bool, fixes: Fixes) -> Vec<(Outcome, Option<HashSet<PathBuf>>)> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(self.options.threads).build();
        let run = || {
            paths
                .par_iter()
                .map(|path| {
                    let (outcome, reads) = if record {
                        let (outcome, reads) = project::recording_reads(|| self.analyse_path(path, fixes));
                        (outcome, Some(reads))
                    } else {
                        (self.analyse_path(path, fixes), None)
                    };
                    if let (Some(hook), Outcome::Checked(diags, _)) = (&self.on_file, &outcome) {
                        hook(path, diags);
                    }
                    (outcome, reads)
                })
                .collect::<Vec<_>>()
        };
        match pool {
            Ok(pool) => pool.install(run),
            Err(_) => run(),
        }
    }

    /// The report of a run from each file's outcome, in the order the files were discovered.
    fn report<'o>(&self, outcomes: impl Iterator<Item = &'o Outcome>) -> Report {
        let mut report = Report { errors: self.discovery_errors.clone(), ..Report::default() };
        for result in outcomes {
            match result {
                Outcome::Checked(diags, syntax) => {
                    report.files_checked += 1;
                    report.diagnostics.extend(diags.iter().cloned());
                    report.notes.extend(syntax.iter().cloned());
                }
                Outcome::Skipped => {}
                Outcome::Note(n) => report.notes.push(n.clone()),
                Outcome::Error(e) => report.errors.push(e.clone()),
            }
        }
        report.diagnostics = self.finish(report.diagnostics);
        // The source from stdin is the one file asked about: findings its handlers reach in
        // files on disk belong to those files' own runs.
        if let Some((path, _)) = &self.options.stdin {
            report.diagnostics.retain(|d| &d.file.path == path);
        }
        report
    }

    /// Dedupes findings reached from several handlers and applies suppressions per file.
    fn finish(&self, mut diags: Vec<Diagnostic>) -> Vec<Diagnostic> {
        // Files with suppressions but no findings still report unused suppressions. The
        // prefilter lets every file with a suppression through, so all of them are loaded.
        let with_suppressions: Vec<Arc<SourceFile>> =
            self.project.loaded_files().into_iter().filter(|file| file.text.contains("retrysafe-ignore")).collect();
        // Paths compare component by component, which cost more than the rest of finishing
        // when every finding was sorted and grouped by its path: each file's place in path
        // order is found once, and the findings are sorted and grouped by it.
        let mut paths: Vec<&Path> = diags
            .iter()
            .map(|d| d.file.path.as_path())
            .chain(with_suppressions.iter().map(|file| file.path.as_path()))
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        paths.sort();
        let place: HashMap<PathBuf, usize> =
            paths.iter().enumerate().map(|(i, path)| (path.to_path_buf(), i)).collect();
        diags.sort_by_cached_key(|d| (place[&d.file.path], d.start, d.rule, d.end));
        let mut merged: Vec<Diagnostic> = Vec::new();
        for d in diags {
            if let Some(last) = merged.last_mut()
                && last.rule == d.rule
                && last.file.path == d.file.path
                && last.start == d.start
                && last.end == d.end
            {
                if let (Some(a), Some(b)) = (&mut last.handler, &d.handler)
                    && !a.split("; ").any(|h| h == b)
                {
                    a.push_str("; ");
                    a.push_str(b);
                }
                continue;
            }
            merged.push(d);
        }
        let mut by_file: Vec<Option<(Arc<SourceFile>, Vec<Diagnostic>)>> = (0..place.len()).map(|_| None).collect();
        for d in merged {
            by_file[place[&d.file.path]].get_or_insert_with(|| (d.file.clone(), Vec::new())).1.push(d);
        }
        for file in with_suppressions {
            by_file[place[&file.path]].get_or_insert_with(|| (file.clone(), Vec::new()));
        }
        // Checking a few files alone, a finding in a callee appears only when its handler's
        // file is among them; elsewhere "suppresses nothing" cannot be known.
        let partial = self.options.stdin.is_some() || self.options.paths.iter().all(|p| p.is_file());
        let reached = self.reached.lock().unwrap();
        let mut out = Vec::new();
        for (file, mut diags) in by_file.into_iter().flatten() {
            let config = self.configs.for_file(&file.path).unwrap_or_default();
            suppress::apply(&file, &mut diags, &|id| self.rule_enabled(&config, id));
            rules::arbitrate(&mut diags);
            if partial && file.dialect != Dialect::Text && !reached.contains(&file.path) {
                diags.retain(|d| d.rule != suppress::UNUSED);
            }
            out.extend(diags);
        }
        out
    }

    fn analyse_path(&self, path: &Path, fixes: Fixes) -> Outcome {
        let config = match self.configs.for_file(path) {
            Ok(c) => c,
            Err(e) => return Outcome::Error(e.to_string()),
        };
        let file = match self.load_if_relevant(path) {
            Ok(Some(f)) => f,
            Ok(None) => return Outcome::Skipped,
            Err(outcome) => return outcome,
        };
        let diagnostics = match self.analyse_within_budget(&file, &config, fixes) {
            Ok(diagnostics) => diagnostics,
            Err(note) => return Outcome::Note(note),
        };
        let syntax = syntax_error_note(&file);
        // A checked file nobody imported need not stay parsed: trees are large, and a handler
        // that imports it later parses it again. The fix loop keeps its edited texts.
        if diagnostics.is_empty()
            && !self.keep_parsed.load(Ordering::Relaxed)
            && !file.text.contains("retrysafe-ignore")
        {
            self.project.evict(path);
        }
        Outcome::Checked(diagnostics, syntax)
    }

    /// The parsed file, or None when the byte prefilter shows it can hold nothing a rule
    /// reads (it is parsed later only if a handler imports it).
    fn load_if_relevant(&self, path: &Path) -> Result<Option<Arc<SourceFile>>, Outcome> {
        let explicit = self.options.paths.iter().any(|p| p == path) || self.options.stdin.is_some();
        // A pages-router API file is a route by its path, whatever its text contains.
        let slashed = path.to_string_lossy().replace('\\', "/");
        // pages/api, Vercel `api/` and Netlify function modules: the default export is the handler
        let pages_api = slashed.contains("/pages/api/")
            || ((slashed.contains("/api/") || slashed.contains("netlify/functions/"))
                && crate::model::handlers::names_webhook(&slashed));
        if !explicit && !pages_api && !self.options.no_prefilter && !workspace::is_schema_file(path) {
            // The prefilter reads bytes only; a file failing it is parsed only if imported.
            let bytes = match project::read_bytes(path) {
                Ok(b) => b,
                Err(e @ project::LoadError::Io(..)) => return Err(Outcome::Error(e.to_string())),
                Err(e) => return Err(Outcome::Note(e.to_string())),
            };
            if !workspace::may_be_relevant(&bytes) {
                return match project::decode(path, bytes) {
                    Ok(_) => Ok(None),
                    Err(e) => Err(Outcome::Note(e.to_string())),
                };
            }
        }
        match self.project.load(path) {
            Ok(f) => Ok(Some(f)),
            Err(e @ project::LoadError::Io(..)) => Err(Outcome::Error(e.to_string())),
            Err(e) => Err(Outcome::Note(e.to_string())),
        }
    }

    /// The handlers `check` analyses, file by file (what `doctor` shows), with the files
    /// that could not be read.
    pub fn entry_points(&self) -> (Vec<handlers::Handler>, Vec<String>) {
        let mut found = Vec::new();
        let mut errors = self.discovery_errors.clone();
        for path in &self.files {
            let config = match self.configs.for_file(path) {
                Ok(c) => c,
                Err(e) => {
                    errors.push(e.to_string());
                    continue;
                }
            };
            match self.load_if_relevant(path) {
                Ok(Some(file)) if file.dialect != Dialect::Text => {
                    found.extend(handlers::find_handlers(&file, &self.project, &config));
                }
                Ok(_) | Err(Outcome::Note(_)) => {}
                Err(Outcome::Error(e)) => errors.push(e),
                Err(_) => {}
            }
        }
        (found, errors)
    }

    /// The config file that applies to `file` (None: the defaults).
    pub fn config_source(&self, file: &Path) -> Option<PathBuf> {
        match &self.options.config {
            Some(explicit) => Some(explicit.clone()),
            None => self.configs.source_for(file),
        }
    }

    /// The resolved config for `file`.
    pub fn config_for(&self, file: &Path) -> Result<Arc<Config>, ConfigError> {
        self.configs.for_file(file)
    }

    /// `analyse` with the per-file budget: a file whose analysis visits more nodes than its
    /// budget allows is reported in a note, without findings, and the run goes on.
    fn analyse_within_budget(
        &self,
        file: &Arc<SourceFile>,
        config: &Config,
        fixes: Fixes,
    ) -> Result<Vec<Diagnostic>, String> {
        let visits = analysis_budget(file);
        budget::run(visits, || self.analyse(file, config, fixes)).map_err(|over| {
            // The unwound analysis may have left this thread's per-tree caches half filled.
            reach::forget_resolutions();
            format!(
                "{}: analysis stopped after {} node visits (the budget for a file of {} syntax nodes); \
                 its findings are not reported",
                file.path.display(),
                over.visits,
                file.root().descendant_count()
            )
        })
    }

    /// Every enabled rule on one file (and the callees its handlers reach).
    pub fn analyse(&self, file: &Arc<SourceFile>, config: &Config, fixes: Fixes) -> Vec<Diagnostic> {
        reach::forget_resolutions();
        let handlers: Vec<HandlerModel> = if file.dialect == Dialect::Text {
            Vec::new()
        } else {
            handlers::find_handlers(file, &self.project, config)
                .into_iter()
                .map(|handler| {
                    let scopes = reach::scopes(&self.project, &handler);
                    HandlerModel::new(handler, scopes)
                })
                .collect()
        };
        if !handlers.is_empty() {
            let mut reached = self.reached.lock().unwrap();
            reached.insert(file.path.clone());
            for h in &handlers {
                reached.extend(h.scopes.iter().map(|s| s.function.file.path.clone()));
            }
        }
        let guard = self.options.guard.clone().or_else(|| config.guard.as_deref().and_then(GuardSpec::parse));
        if !handlers.is_empty() {
            self.handlers_found.lock().unwrap().insert(file.path.clone(), handlers.len());
        }
        let cx = Context { file, project: &self.project, config, handlers: &handlers, guard: guard.as_ref(), fixes };
        let mut out = Vec::new();
        let safe_fixers_only = self.safe_fixers_only.load(Ordering::Relaxed);
        crate::model::effects::with_effect_wrappers(&config.effect_wrappers, || {
            for rule in rules::registry() {
                if self.rule_enabled(config, rule.id) && (rule.safe_fixes || !safe_fixers_only) {
                    let before = out.len();
                    (rule.check)(&cx, &mut out);
                    debug_assert!(
                        rule.safe_fixes
                            || out[before..]
                                .iter()
                                .all(|d| d.fix.as_ref().is_none_or(|f| f.applicability != Applicability::Safe)),
                        "{} gave a safe fix but does not declare `safe_fixes`",
                        rule.id
                    );
                }
            }
        });
        out.retain(|d| {
            !crate::facts::only_in_registered_callbacks(&handlers, &d.file.path, d.start, d.end)
                && !crate::facts::only_in_ruled_out_branches(&handlers, &d.file.path, d.start, d.end)
        });
        for d in &mut out {
            d.severity = config.severity(d.rule);
            if let Some(fix) = d.fix.as_mut() {
                crate::fix::policy::settle(&d.file, d.start, d.end, fix);
            }
        }
        reach::forget_resolutions();
        out
    }
}

/// Node visits one file's analysis may spend: linear in the file's size. The analysis of
/// real handlers visits each node a few dozen times (callees in other files included), so
/// this catches only work that grows faster than the file.
pub fn analysis_budget(file: &SourceFile) -> u64 {
    const VISITS_PER_NODE: u64 = 2_000;
    const MINIMUM: u64 = 50_000_000;
    MINIMUM.max(VISITS_PER_NODE.saturating_mul(file.root().descendant_count() as u64))
}

impl Engine {
    /// One file's own analysis (its handlers and what they reach), for callers that cache
    /// results per file and re-analyse only what changed (the editor backend). Files the
    /// prefilter skips give no findings; an unreadable file is the error.
    pub fn analyse_file(&self, path: &Path, fixes: Fixes) -> Result<Vec<Diagnostic>, String> {
        match self.analyse_path(path, fixes) {
            Outcome::Checked(diags, _) => Ok(diags),
            Outcome::Skipped | Outcome::Note(_) => Ok(Vec::new()),
            Outcome::Error(e) => Err(e),
        }
    }

    /// What `check` reports for `path`, given the raw findings of every analysed file:
    /// duplicates merged and the file's suppressions applied, as `check` does.
    pub fn finish_file(&self, path: &Path, diags: Vec<Diagnostic>) -> Vec<Diagnostic> {
        let key = project::normalize(path);
        let mine: Vec<Diagnostic> = diags.into_iter().filter(|d| d.file.path == key).collect();
        // Loaded, so that `finish` sees its suppressions even when it has no findings.
        if self.project.load(&key).is_err() {
            return mine;
        }
        let mut merged = self.finish(mine);
        merged.retain(|d| d.file.path == key);
        merged
    }
}

#[derive(Clone)]
enum Outcome {
    /// The findings, and a note when the file does not parse cleanly.
    Checked(Vec<Diagnostic>, Option<String>),
    Skipped,
    Note(String),
    Error(String),
}

/// One fix applied (or offered) by `fix`.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AppliedFix {
    pub rule: &'static str,
    pub title: String,
    pub applicability: Applicability,
    pub line: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct FileFix {
    pub path: PathBuf,
    pub original: String,
    pub fixed: String,
    pub applied: Vec<AppliedFix>,
    /// Findings whose fix could not be applied (display-only, or dropped).
    pub manual: Vec<AppliedFix>,
    /// Review fixes not applied because only safe ones were asked for.
    pub held_back: Vec<AppliedFix>,
    pub problems: Vec<String>,
}

#[derive(Default)]
pub struct FixReport {
    pub files: Vec<FileFix>,
    pub new_files: Vec<(PathBuf, String)>,
    /// Findings of the first pass, with their fixes (the editor backend's view).
    pub first_pass: Vec<Diagnostic>,
    pub errors: Vec<String>,
    pub notes: Vec<String>,
}

pub const MAX_PASSES: usize = 10;

impl Engine {
    /// Fixes every file to a fixpoint. Nothing is written here.
    pub fn fix(&self, allowed: &dyn Fn(Applicability) -> bool) -> FixReport {
        self.keep_parsed.store(true, Ordering::Relaxed);
        let mut report = FixReport::default();
        let mut files: BTreeMap<PathBuf, FileFix> = BTreeMap::new();
        let mut seen: BTreeMap<PathBuf, HashSet<u64>> = BTreeMap::new();
        let mut stuck: HashSet<PathBuf> = HashSet::new();
        let mut rejected: HashSet<Rejection> = HashSet::new();
        // Each file's outcome in the last pass and the files its analysis read. A pass
        // re-analyses only the files an edit of the pass before can affect: an unchanged file
        // whose analysis read no edited file gets the same findings again.
        let mut outcomes: Vec<(Outcome, Option<HashSet<PathBuf>>)> = Vec::new();
        // The files the last pass edited; None: analyse every file.
        let mut edited: Option<HashSet<PathBuf>> = None;
        for pass in 0..MAX_PASSES {
            match &edited {
                None => outcomes = self.analyse_paths(&self.files, true, Fixes::Build),
                Some(edited) => {
                    let stale: Vec<usize> =
                        (0..self.files.len()).filter(|&i| affected(&self.files[i], &outcomes[i], edited)).collect();
                    let paths: Vec<PathBuf> = stale.iter().map(|&i| self.files[i].clone()).collect();
                    for (i, fresh) in stale.into_iter().zip(self.analyse_paths(&paths, true, Fixes::Build)) {
                        outcomes[i] = fresh;
                    }
                }
            }
            let check = self.report(outcomes.iter().map(|(o, _)| o));
            // Later passes only look for fixes to apply: without review fixes, only the rules
            // that can give a safe fix can give one.
            self.safe_fixers_only.store(!allowed(Applicability::Unsafe), Ordering::Relaxed);
            let mut edited_now: HashSet<PathBuf> = HashSet::new();
            // A new file or a fix dropped for one can change what any file resolves or reads.
            let mut everything = false;
            if pass == 0 {
                report.first_pass = check.diagnostics.clone();
                report.errors = check.errors;
                report.notes = check.notes;
            }
            let mut by_target: BTreeMap<PathBuf, (Arc<SourceFile>, Vec<Diagnostic>)> = BTreeMap::new();
            for d in check.diagnostics {
                let Some(fix) = &d.fix else { continue };
                let target = fix.target.clone().unwrap_or_else(|| d.file.path.clone());
                let has_edits = !fix.edits.is_empty() || !fix.new_files.is_empty();
                if !has_edits || !allowed(fix.applicability) {
                    if pass == 0 {
                        let entry = files.entry(d.file.path.clone()).or_insert_with(|| new_file_fix(&d.file));
                        if has_edits && fix.applicability == Applicability::Unsafe {
                            entry.held_back.push(describe(&d));
                        } else {
                            entry.manual.push(describe(&d));
                        }
                    }
                    continue;
                }
                if stuck.contains(&target) || rejected.contains(&rejection(&d)) {
                    continue;
                }
                let file = match self.project.load(&target) {
                    Ok(f) => f,
                    Err(e) => {
                        report.errors.push(e.to_string());
                        continue;
                    }
                };
                by_target.entry(target).or_insert_with(|| (file, Vec::new())).1.push(d);
            }
            let mut changed = false;
            for (target, (file, mut diags)) in by_target {
                // Two fixes creating the same file differently (two handlers, two clients for
                // one guard module): the first wins; the other is recomputed next pass against it.
                let before = diags.len();
                diags.retain(|d| {
                    d.fix.as_ref().is_none_or(|f| {
                        f.new_files.iter().all(|(p, t)| report.new_files.iter().all(|(q, u)| q != p || u == t))
                    })
                });
                if diags.len() != before {
                    changed = true;
                    everything = true;
                }
                let fixes: Vec<&crate::fix::Fix> = diags.iter().filter_map(|d| d.fix.as_ref()).collect();
                for fix in &fixes {
                    for (path, text) in &fix.new_files {
                        if !report.new_files.iter().any(|(p, _)| p == path) {
                            self.project.add_virtual_file(path.clone(), text.clone());
                            report.new_files.push((path.clone(), text.clone()));
                            changed = true;
                            everything = true;
                        }
                    }
                }
                // A fix that only creates files (a new migration) is applied once its files exist.
                for d in &diags {
                    if let Some(fix) = d.fix.as_ref().filter(|f| f.edits.is_empty() && !f.new_files.is_empty())
                        && fix.new_files.iter().all(|f| report.new_files.contains(f))
                    {
                        files.entry(target.clone()).or_insert_with(|| new_file_fix(&file)).applied.push(describe(d));
                    }
                }
                let edit_fixes: Vec<(usize, &crate::fix::Fix)> =
                    fixes.iter().copied().enumerate().filter(|(_, f)| !f.edits.is_empty()).collect();
                if edit_fixes.is_empty() {
                    continue;
                }
                let only: Vec<&crate::fix::Fix> = edit_fixes.iter().map(|(_, f)| *f).collect();
                let mut result = apply::apply(&file.text, &only);
                let entry = files.entry(target.clone()).or_insert_with(|| new_file_fix(&file));
                // Syntax guard: a pass must not add error nodes. Retry the fixes one by one and
                // drop those that break the file.
                if error_count(&result.text, file.dialect) > error_count(&file.text, file.dialect) {
                    let mut text = file.text.clone();
                    let mut kept = Vec::new();
                    for (i, fix) in only.iter().enumerate() {
                        let attempt = apply::apply(&text, &[fix]);
                        if attempt.applied.is_empty() {
                            continue;
                        }
                        if error_count(&attempt.text, file.dialect) > error_count(&file.text, file.dialect) {
                            let d = &diags[edit_fixes[i].0];
                            entry.problems.push(format!(
                                "{}:{}: the `{}` fix would break the syntax; it was dropped (please report this)",
                                target.display(),
                                d.line_col().0,
                                d.rule
                            ));
                            entry.manual.push(describe(d));
                            continue;
                        }
                        // Later fixes were computed on the original text: apply them in
                        // subsequent passes instead.
                        text = attempt.text;
                        kept.push(i);
                        break;
                    }
                    result = apply::Applied { text, applied: kept, deferred: Vec::new() };
                }
                if self.options.typecheck && result.text != file.text {
                    result =
                        self.typecheck_pass(&file, &only, result, &|i| &diags[edit_fixes[i].0], entry, &mut rejected);
                }
                for &i in &result.applied {
                    entry.applied.push(describe(&diags[edit_fixes[i].0]));
                }
                if result.text != file.text {
                    let hash = hash_text(&result.text);
                    if !seen.entry(target.clone()).or_default().insert(hash) {
                        entry.problems.push(format!(
                            "{}: fixes did not converge (a cycle between {}); left at the last state",
                            target.display(),
                            rule_list(&diags)
                        ));
                        stuck.insert(target.clone());
                        continue;
                    }
                    match SourceFile::new(target.clone(), result.text.clone(), file.dialect) {
                        Some(updated) => {
                            entry.fixed = result.text;
                            self.project.insert(Arc::new(updated));
                            edited_now.insert(target.clone());
                            changed = true;
                        }
                        None => {
                            entry.problems.push(format!("{}: the fixed text could not be parsed", target.display()))
                        }
                    }
                }
            }
            if !changed {
                break;
            }
            // Only modules are followed by what an analysis reads; an edited schema or config
            // file can change any file's analysis.
            everything |= edited_now.iter().any(|p| Dialect::for_path(p).is_none());
            edited = (!everything).then_some(edited_now);
            if pass == MAX_PASSES - 1 {
                for f in files.values_mut().filter(|f| f.original != f.fixed) {
                    f.problems.push(format!("{}: fixes did not converge after {MAX_PASSES} passes", f.path.display()));
                }
            }
        }
        self.safe_fixers_only.store(false, Ordering::Relaxed);
        report.files = files.into_values().collect();
        report
    }
}

/// Whether a file's last outcome can change after `edited` were edited: the file itself, a
/// file its analysis read, or one its findings point into or fix was edited.
fn affected(path: &Path, (outcome, reads): &(Outcome, Option<HashSet<PathBuf>>), edited: &HashSet<PathBuf>) -> bool {
    let Some(reads) = reads else { return true };
    if edited.contains(&project::normalize(path)) || edited.contains(path) || reads.iter().any(|r| edited.contains(r)) {
        return true;
    }
    let Outcome::Checked(diags, _) = outcome else { return false };
    diags.iter().any(|d| {
        edited.contains(&d.file.path)
            || d.fix.as_ref().and_then(|f| f.target.as_ref()).is_some_and(|t| edited.contains(t))
    })
}

/// Where a file stops parsing: the analysis covers what parses, and a user who sees no
/// findings there should know why.
fn syntax_error_note(file: &SourceFile) -> Option<String> {
    if file.dialect == Dialect::Text || !file.root().has_error() {
        return None;
    }
    let mut first = None;
    crate::model::ast::walk(file.root(), &mut |node| {
        if first.is_none() && (node.is_error() || node.is_missing()) {
            first = Some(node.start_byte());
        }
        first.is_none() && node.has_error()
    });
    let (line, col) = file.line_col(first.unwrap_or(0));
    Some(format!(
        "{}:{line}:{col}: syntax error; the file was analysed as far as it parses",
        crate::source::display_path(&file.path)
    ))
}

impl Engine {
    /// `--typecheck`: when the pass adds a type error, the fixes are tried one at a time on
    /// the pass's input; those that add one are dropped and named, the first clean one is kept
    /// (the others were computed on the same input: the next pass recomputes them).
    fn typecheck_pass<'d>(
        &self,
        file: &SourceFile,
        fixes: &[&crate::fix::Fix],
        result: apply::Applied,
        diag: &dyn Fn(usize) -> &'d Diagnostic,
        entry: &mut FileFix,
        rejected: &mut HashSet<Rejection>,
    ) -> apply::Applied {
        use crate::fix::typecheck;
        let Some(tsc) = typecheck::checks(&file.path).then(|| typecheck::find_tsc(&file.path)).flatten() else {
            return result;
        };
        let before = match typecheck::errors(&tsc, &file.path, &file.text) {
            Ok(e) => e,
            Err(e) => {
                entry.problems.push(format!("{e}; the fixes were not type-checked"));
                return result;
            }
        };
        let fails =
            |text: &str| typecheck::errors(&tsc, &file.path, text).ok().and_then(|e| typecheck::added(&before, &e));
        if fails(&result.text).is_none() {
            return result;
        }
        let mut kept = apply::Applied { text: file.text.clone(), applied: Vec::new(), deferred: Vec::new() };
        for &i in &result.applied {
            let attempt = apply::apply(&file.text, &[fixes[i]]);
            if attempt.applied.is_empty() {
                continue;
            }
            let d = diag(i);
            if let Some(error) = fails(&attempt.text) {
                entry.problems.push(format!(
                    "{}:{}: the `{}` fix ({}) adds a type error ({error}); it was dropped",
                    file.path.display(),
                    d.line_col().0,
                    d.rule,
                    fixes[i].title
                ));
                entry.manual.push(describe(d));
                rejected.insert(rejection(d));
                continue;
            }
            if kept.applied.is_empty() {
                kept = apply::Applied { text: attempt.text, applied: vec![i], deferred: Vec::new() };
            }
        }
        kept
    }
}

/// A fix dropped by the type check, recognised again in later passes.
type Rejection = (PathBuf, &'static str, String);

fn rejection(d: &Diagnostic) -> Rejection {
    (d.file.path.clone(), d.rule, d.fix.as_ref().map(|f| f.title.clone()).unwrap_or_default())
}

fn new_file_fix(file: &SourceFile) -> FileFix {
    FileFix { path: file.path.clone(), original: file.text.clone(), fixed: file.text.clone(), ..FileFix::default() }
}

fn describe(d: &Diagnostic) -> AppliedFix {
    let fix = d.fix.as_ref();
    AppliedFix {
        rule: d.rule,
        title: fix.map(|f| f.title.clone()).unwrap_or_default(),
        applicability: fix.map_or(Applicability::DisplayOnly, |f| f.applicability),
        line: d.line_col().0,
        note: fix.and_then(|f| f.note.clone()),
    }
}

fn rule_list(diags: &[Diagnostic]) -> String {
    let mut ids: Vec<&str> = diags.iter().map(|d| d.rule).collect();
    ids.sort();
    ids.dedup();
    ids.join(", ")
}

fn hash_text(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// ERROR and MISSING nodes in a parse of `text`.
pub fn error_count(text: &str, dialect: Dialect) -> usize {
    if dialect == Dialect::Text {
        return 0;
    }
    let parse_text = match text.strip_prefix('\u{feff}') {
        Some(rest) => format!("   {rest}"),
        None => text.to_string(),
    };
    let Some(tree) = crate::source::parse(dialect, &parse_text) else {
        return usize::MAX;
    };
    if !tree.root_node().has_error() {
        return 0;
    }
    let mut n = 0;
    crate::model::ast::walk(tree.root_node(), &mut |node| {
        if node.is_error() || node.is_missing() {
            n += 1;
        }
        node.has_error()
    });
    n
}
