//! The command line: parse flags, run the library, map outcomes to exit codes
//! (0 clean, 1 findings or pending fixes, 2 usage, config or I/O error).

use clap::{Args, Parser, Subcommand, ValueEnum};
use retrysafe::batch;
use retrysafe::engine::{Engine, Fatal, Options};
use retrysafe::fix::{Applicability, GuardSpec};
use retrysafe::report::{self, text::Palette};
use retrysafe::rules::{self, FixAvailability, Fixes};
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "retrysafe",
    version,
    about = "Finds and fixes webhook and queue handlers that break under at-least-once delivery"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Report every handler that is unsafe under retries (the default command).
    Check(CheckArgs),
    /// Fix what can be fixed: a unified diff, or `--write` to apply it.
    Fix(FixArgs),
    /// List the rules: id, summary, fix availability.
    Rules {
        #[arg(long, value_enum, default_value = "text")]
        format: RulesFormat,
    },
    /// Print a rule's documentation.
    Explain { rule: String },
    /// Serve diagnostics and quick fixes to an editor (Language Server Protocol over stdio).
    Lsp {
        /// The guard the fixes call: `MODULE#EXPORT`.
        #[arg(long)]
        guard: Option<String>,
    },
    /// Run the app and deliver a signed event again, concurrently and around crashes;
    /// compare state and provider-side effects with a single delivery.
    Verify(Box<retrysafe::verify::VerifyArgs>),
    /// Set a project up: retrysafe.json, the guard module, the claim table (Prisma or SQL).
    Init(InitArgs),
    /// Show what a run sees: platform, config per package, guard resolution, handlers found.
    Doctor {
        #[command(flatten)]
        common: Common,
    },
    /// Print a file's syntax tree and the handlers found in it (for rule authors).
    #[command(hide = true)]
    DumpTree { file: PathBuf },
    /// Every handler found and each function its analysis reaches (for finder authors: "why is
    /// this helper's bug not reported?").
    #[command(hide = true)]
    Reach {
        #[command(flatten)]
        common: Common,
    },
    /// Parse every file `check` would discover, and nothing else (the benchmark's baseline).
    #[command(hide = true)]
    ParseOnly {
        paths: Vec<PathBuf>,
        #[arg(long, default_value_t = 0)]
        threads: usize,
    },
}

#[derive(Args, Clone)]
struct Common {
    /// Files or directories (default: the current directory).
    paths: Vec<PathBuf>,
    /// Only these rules (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    select: Vec<String>,
    /// Never these rules (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    ignore: Vec<String>,
    /// Use this config file instead of the nearest retrysafe.json.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Disable colours.
    #[arg(long)]
    no_color: bool,
    /// Worker threads (default: all cores).
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Read the source from stdin and report it as this path.
    #[arg(long)]
    stdin_filename: Option<PathBuf>,
    /// Analyse every file, skipping none by the byte prefilter (for the benchmark).
    #[arg(long, hide = true)]
    no_prefilter: bool,
    /// Also run the preview rules (see `retrysafe rules`).
    #[arg(long)]
    preview: bool,
    /// Only files changed against this git ref (committed, staged, unstaged or untracked),
    /// plus the handlers that import them.
    #[arg(long, value_name = "REF", conflicts_with = "staged")]
    changed_since: Option<String>,
    /// Only staged files, plus the handlers that import them (for a pre-commit hook).
    #[arg(long)]
    staged: bool,
    /// Only shard I of N (1-based), by a stable hash of each path: a CI matrix splits the run.
    #[arg(long, value_name = "I/N")]
    shard: Option<retrysafe::batch::Shard>,
    /// Neither read nor write the result cache (.retrysafe-cache).
    #[arg(long)]
    no_cache: bool,
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    common: Common,
    #[arg(long, value_enum, default_value = "text")]
    format: CheckFormat,
    /// Print findings only, no summary or notes.
    #[arg(long, short)]
    quiet: bool,
    /// Write the report to this file instead of stdout (notes and errors stay on stderr).
    #[arg(long, short = 'o')]
    output_file: Option<PathBuf>,
    /// Exit 0 even when there are findings (errors still exit 2).
    #[arg(long)]
    exit_zero: bool,
}

#[derive(Args)]
struct InitArgs {
    /// The package directory (default: the current directory).
    dir: Option<PathBuf>,
    /// Overwrite files that exist with other content.
    #[arg(long)]
    force: bool,
}

#[derive(Args)]
struct FixArgs {
    #[command(flatten)]
    common: Common,
    /// The guard the fixes call: `MODULE#EXPORT` or `MODULE#default`.
    #[arg(long)]
    guard: Option<String>,
    /// Apply the safe fixes (atomically) instead of printing the diff.
    #[arg(long)]
    write: bool,
    /// With `--write`, also apply the review (unsafe) fixes the dry run shows.
    #[arg(long = "unsafe", visible_alias = "unsafe-fixes")]
    unsafe_fixes: bool,
    /// Only safe fixes, in the dry run too.
    #[arg(long, conflicts_with = "unsafe_fixes")]
    safe_only: bool,
    /// Type-check each changed file with the project's `node_modules/.bin/tsc` and drop a fix
    /// that adds an error.
    #[arg(long)]
    typecheck: bool,
    /// With --write: write even when the git work tree has uncommitted changes.
    #[arg(long)]
    allow_dirty: bool,
    #[arg(long, value_enum, default_value = "diff")]
    format: FixFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum CheckFormat {
    Text,
    /// One line per finding.
    Concise,
    Json,
    Sarif,
    Github,
    /// JUnit XML, one test case per finding.
    Junit,
    /// GitLab Code Quality JSON.
    Gitlab,
}

#[derive(Clone, Copy, ValueEnum)]
enum FixFormat {
    Diff,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum RulesFormat {
    Text,
    Json,
}

fn main() -> ExitCode {
    // `retrysafe explain x | head` must end quietly, as other command-line tools do.
    // SAFETY: restoring the default SIGPIPE disposition before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let mut argv: Vec<String> = std::env::args().collect();
    let known = [
        "check",
        "fix",
        "rules",
        "explain",
        "init",
        "doctor",
        "dump-tree",
        "reach",
        "parse-only",
        "lsp",
        "verify",
        "help",
        "-h",
        "--help",
        "-V",
        "--version",
    ];
    if argv.get(1).is_none_or(|a| !known.contains(&a.as_str())) {
        // `retrysafe chek .` is a typo, not a path to check: say so unless such a path exists.
        if let Some(word) = argv.get(1).filter(|a| !a.starts_with('-') && !std::path::Path::new(a).exists())
            && let Some(meant) =
                retrysafe::suggest::closest(word, known.iter().copied().filter(|k| !k.starts_with('-')))
        {
            eprintln!("retrysafe: unknown command `{word}` (did you mean `{meant}`?); see `retrysafe --help`");
            return ExitCode::from(2);
        }
        argv.insert(1, "check".into());
    }
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Check(args) => run_check(args),
        Command::Fix(args) => run_fix(args),
        Command::Rules { format } => list_rules(format),
        Command::Verify(args) => retrysafe::verify::run(*args, retrysafe::rules::check_id),
        Command::DumpTree { file } => dump_tree(&file),
        Command::Reach { common } => {
            let engine = match engine(&common, None) {
                Ok(e) => e,
                Err(code) => return code,
            };
            print!("{}", retrysafe::doctor::reach(&engine));
            ExitCode::SUCCESS
        }
        Command::ParseOnly { paths, threads } => {
            let paths = if paths.is_empty() { vec![PathBuf::from(".")] } else { paths };
            let start = std::time::Instant::now();
            let stats = retrysafe::bench::parse_all(&paths, threads);
            let secs = start.elapsed().as_secs_f64();
            println!("parsed {} files ({} bytes, {} failed) in {secs:.3}s", stats.files, stats.bytes, stats.failed);
            ExitCode::SUCCESS
        }
        Command::Lsp { guard } => {
            let guard = match guard.as_deref().map(|g| GuardSpec::parse(g).ok_or(g)) {
                Some(Err(g)) => {
                    eprintln!("retrysafe: --guard `{g}` is not of the form MODULE#EXPORT");
                    return ExitCode::from(2);
                }
                Some(Ok(g)) => Some(g),
                None => None,
            };
            match retrysafe::lsp::serve(guard) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("retrysafe lsp: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Explain { rule } => match rules::find(&rule) {
            Some(r) => {
                println!("# {}\n\n{}\n\nFix: {}\n\n{}", r.id, r.summary, fix_label(r.fix), r.docs.trim());
                ExitCode::SUCCESS
            }
            None => match rules::SUPPRESSION_IDS.iter().find(|(id, _, _)| *id == rule) {
                Some((id, summary, docs)) => {
                    println!("# {id}\n\n{summary}\n\nFix: none (edit the comment)\n\n{docs}");
                    ExitCode::SUCCESS
                }
                None => {
                    eprintln!("retrysafe: {}", rules::check_id(&rule).err().unwrap_or_default());
                    ExitCode::from(2)
                }
            },
        },
        Command::Init(args) => run_init(args),
        Command::Doctor { common } => {
            let engine = match engine(&common, None) {
                Ok(e) => e,
                Err(code) => return code,
            };
            let diagnosis = retrysafe::doctor::diagnose(&engine);
            print!("{}", diagnosis.text);
            if diagnosis.failed { ExitCode::from(2) } else { ExitCode::SUCCESS }
        }
    }
}

fn fix_label(f: FixAvailability) -> &'static str {
    match f {
        FixAvailability::None => "none",
        FixAvailability::Sometimes => "sometimes",
        FixAvailability::Always => "always",
    }
}

fn list_rules(format: RulesFormat) -> ExitCode {
    match format {
        RulesFormat::Text => {
            for r in rules::registry() {
                let group = if r.preview { "preview" } else { "default" };
                println!("{:<34} {:<10} {:<8} {}", r.id, fix_label(r.fix), group, r.summary);
            }
        }
        RulesFormat::Json => {
            let items: Vec<_> = rules::registry()
                .iter()
                .map(|r| serde_json::json!({ "id": r.id, "summary": r.summary, "fix": r.fix, "preview": r.preview }))
                .collect();
            println!("{}", serde_json::to_string_pretty(&items).unwrap_or_default());
        }
    }
    ExitCode::SUCCESS
}

fn options(common: &Common, guard: Option<GuardSpec>) -> Result<Options, String> {
    let stdin = match &common.stdin_filename {
        Some(path) => {
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).map_err(|e| format!("<stdin>: cannot read: {e}"))?;
            Some((path.clone(), text))
        }
        None => None,
    };
    let paths = if common.paths.is_empty() { vec![PathBuf::from(".")] } else { common.paths.clone() };
    Ok(Options {
        paths,
        select: common.select.clone(),
        ignore: common.ignore.clone(),
        config: common.config.clone(),
        threads: common.threads,
        stdin,
        guard,
        no_prefilter: common.no_prefilter,
        preview: common.preview,
        typecheck: false,
    })
}

fn engine(common: &Common, guard: Option<GuardSpec>) -> Result<Engine, ExitCode> {
    let opts = options(common, guard).map_err(|e| {
        eprintln!("retrysafe: {e}");
        ExitCode::from(2)
    })?;
    Engine::new(opts).map_err(|e: Fatal| {
        eprintln!("retrysafe: {e}");
        ExitCode::from(2)
    })
}

/// Narrows the run to changed files and to this shard, skips files the cache knows are clean,
/// and hooks the progress line and the cache into the analysis. `record` is false for `fix`,
/// whose later passes analyse edited texts the cache must not remember.
fn prepare_batch(
    engine: &mut Engine,
    common: &Common,
    record: bool,
) -> Result<Option<std::sync::Arc<batch::ResultCache>>, String> {
    if engine.options.stdin.is_some() {
        return Ok(None);
    }
    let which = match (&common.changed_since, common.staged) {
        (Some(r), _) => Some(batch::ChangedSet::Since(r.clone())),
        (None, true) => Some(batch::ChangedSet::Staged),
        (None, false) => None,
    };
    if let Some(which) = which {
        let first = engine.options.paths.first().cloned().unwrap_or_else(|| PathBuf::from("."));
        let dir = if first.is_dir() { first } else { first.parent().map(PathBuf::from).unwrap_or_default() };
        let dir = if dir.as_os_str().is_empty() { PathBuf::from(".") } else { dir };
        let changed = batch::changed_files(&dir, &which)?;
        let keep = batch::changed_with_importers(&engine.project, engine.files(), &changed);
        engine.retain_files(|p| keep.contains(p));
    }
    if let Some(shard) = common.shard {
        let base = batch::shard_base();
        engine.retain_files(|p| shard.owns(p, &base));
    }
    let cache = if common.no_cache {
        None
    } else {
        let signature = format!(
            "{:?} {:?} {:?} {:?} {} {}",
            common.select,
            common.ignore,
            common.config.as_ref().map(|c| std::fs::read_to_string(c).unwrap_or_default()),
            engine.options.guard,
            common.no_prefilter,
            common.preview
        );
        let cwd = std::env::current_dir().unwrap_or_default();
        let cache = batch::ResultCache::open(&cwd, &engine.project, engine.files(), &signature);
        engine.retain_files(|p| !cache.is_clean(p));
        Some(std::sync::Arc::new(cache))
    };
    let progress = batch::progress_allowed().then(|| {
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(engine.files().len() as u64),
            indicatif::ProgressDrawTarget::hidden(),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template("{spinner} {pos}/{len} files {wide_bar} {elapsed}") {
            bar.set_style(style);
        }
        (bar, std::time::Instant::now(), std::sync::atomic::AtomicBool::new(false))
    });
    let recorder = cache.clone().filter(|_| record);
    if progress.is_some() || recorder.is_some() {
        let files = engine.files().len() as u64;
        engine.on_file = Some(Box::new(move |path, diags| {
            if let Some(cache) = &recorder {
                cache.record(path, diags.len());
            }
            if let Some((bar, start, shown)) = &progress {
                // A short run draws nothing: the line appears once a run has taken a second.
                if !shown.load(std::sync::atomic::Ordering::Relaxed) && start.elapsed().as_secs() >= 1 {
                    shown.store(true, std::sync::atomic::Ordering::Relaxed);
                    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
                }
                // Each fix pass analyses the files again: the count starts over.
                if bar.position() >= files {
                    bar.set_position(0);
                }
                bar.inc(1);
                if bar.position() >= files && shown.load(std::sync::atomic::Ordering::Relaxed) {
                    bar.finish_and_clear();
                }
            }
        }));
    }
    Ok(cache)
}

/// Handlers, findings and fixes per package, at the end of a monorepo run.
fn print_package_summary<'a>(
    engine: &Engine,
    cache: Option<&batch::ResultCache>,
    findings: impl Iterator<Item = (&'a std::path::Path, bool)>,
    fixes: impl Iterator<Item = (&'a std::path::Path, usize)>,
) {
    let mut packages = batch::Packages::new();
    let mut rows: std::collections::BTreeMap<String, batch::PackageCounts> = Default::default();
    let handlers = engine.handlers_found.lock().unwrap().clone();
    for path in engine.files() {
        if let Some((_, name)) = packages.of(path) {
            let found = handlers.get(path.as_path()).or_else(|| handlers.get(&retrysafe::project::normalize(path)));
            let count = found
                .copied()
                .unwrap_or_else(|| cache.map_or(0, |c| if c.is_clean(path) { c.cached_handlers(path) } else { 0 }));
            rows.entry(name).or_default().handlers += count;
        }
    }
    for (path, fixable) in findings {
        if let Some((_, name)) = packages.of(path) {
            let row = rows.entry(name).or_default();
            row.findings += 1;
            if fixable {
                row.fixes += 1;
            }
        }
    }
    for (path, applied) in fixes {
        if let Some((_, name)) = packages.of(path) {
            rows.entry(name).or_default().fixes += applied;
        }
    }
    if let Some(table) = batch::package_summary(&rows) {
        eprint!("{table}");
    }
}

fn palette(no_color: bool) -> Palette {
    Palette { on: !no_color && std::env::var_os("NO_COLOR").is_none() && std::io::stdout().is_terminal() }
}

fn run_check(args: CheckArgs) -> ExitCode {
    let mut engine = match engine(&args.common, None) {
        Ok(e) => e,
        Err(code) => return code,
    };
    let cache = match prepare_batch(&mut engine, &args.common, true) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("retrysafe: {e}");
            return ExitCode::from(2);
        }
    };
    // Only these formats show a finding's fix (its title, or whether it is fixable).
    let fixes = match args.format {
        CheckFormat::Text | CheckFormat::Concise | CheckFormat::Json => Fixes::Build,
        CheckFormat::Sarif | CheckFormat::Github | CheckFormat::Junit | CheckFormat::Gitlab => Fixes::Skip,
    };
    let mut report = engine.check(fixes);
    if let Some(cache) = &cache
        && let Err(e) = cache.save(engine.files(), &engine.handlers_found.lock().unwrap())
    {
        eprintln!("note: {e}");
    }
    // One broken config fails every file under it: say it once.
    report.errors.sort();
    report.errors.dedup();
    // A report written to a file has no terminal to colour.
    let palette = palette(args.common.no_color || args.output_file.is_some());
    let failed = !report.errors.is_empty();
    let mut out = String::new();
    match args.format {
        CheckFormat::Text | CheckFormat::Concise => {
            if matches!(args.format, CheckFormat::Text) {
                out.push_str(&report::text::render(&report.diagnostics, &palette));
            } else {
                out.push_str(&report::ci::concise(&report.diagnostics));
            }
            if !args.quiet {
                for n in &report.notes {
                    eprintln!("note: {n}");
                }
                // With an error the run did not see everything: no all-clear.
                if !failed || !report.diagnostics.is_empty() {
                    out.push_str(&report::text::summary(&report.diagnostics));
                    out.push('\n');
                }
                print_package_summary(
                    &engine,
                    cache.as_deref(),
                    report.diagnostics.iter().map(|d| (d.file.path.as_path(), report::is_fixable(d))),
                    std::iter::empty(),
                );
            }
        }
        CheckFormat::Json => {
            out.push_str(&report::json::render(&report.diagnostics, Some(&engine.project)));
            out.push('\n');
        }
        CheckFormat::Sarif => {
            out.push_str(&report::sarif::render(&report.diagnostics));
            out.push('\n');
        }
        CheckFormat::Github => out.push_str(&report::github(&report.diagnostics)),
        CheckFormat::Junit => out.push_str(&report::ci::junit(&report.diagnostics)),
        CheckFormat::Gitlab => {
            out.push_str(&report::ci::gitlab(&report.diagnostics));
            out.push('\n');
        }
    }
    match &args.output_file {
        Some(path) => {
            if let Err(e) = retrysafe::fix::write::write_atomic(path, &out) {
                eprintln!("retrysafe: {}: cannot write the report: {e}", path.display());
                return ExitCode::from(2);
            }
        }
        None => print!("{out}"),
    }
    for e in &report.errors {
        eprintln!("error: {e}");
    }
    let code = if failed {
        ExitCode::from(2)
    } else if args.exit_zero || report.diagnostics.iter().all(|d| d.severity == retrysafe::config::Severity::Warning) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    };
    // The process ends here: freeing every parsed tree, file and finding one by one cost
    // more than a tenth of the analysis of a tree of handlers, and the system takes the
    // memory back at once. The per-file hook (the progress line) still drops as usual.
    drop(engine.on_file.take());
    std::mem::forget(report);
    std::mem::forget(engine);
    code
}

fn run_init(args: InitArgs) -> ExitCode {
    let dir = args.dir.unwrap_or_else(|| PathBuf::from("."));
    // The npm launcher says it started us, so the next command printed is one that works.
    let command = if std::env::var_os("RETRYSAFE_LAUNCHER").is_some() { "npx retrysafe" } else { "retrysafe" };
    let opts = retrysafe::init::Options { dir: dir.clone(), force: args.force, command: command.into() };
    match retrysafe::init::run(&opts) {
        Ok(outcome) => {
            for p in &outcome.written {
                println!("wrote {}", retrysafe::init::display(&dir, p));
            }
            for p in &outcome.unchanged {
                println!("unchanged {}", retrysafe::init::display(&dir, p));
            }
            for n in &outcome.notes {
                println!("note: {n}");
            }
            println!("\nNext:");
            for n in &outcome.next {
                println!("  {n}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("retrysafe init: {e}");
            ExitCode::from(2)
        }
    }
}

fn run_fix(args: FixArgs) -> ExitCode {
    let guard = match args.guard.as_deref().map(|g| GuardSpec::parse(g).ok_or(g)) {
        Some(Err(g)) => {
            eprintln!("retrysafe: --guard `{g}` is not of the form MODULE#EXPORT (e.g. \"@/lib/guard#guard\")");
            return ExitCode::from(2);
        }
        Some(Ok(g)) => Some(g),
        None => None,
    };
    let mut engine = match engine(&args.common, guard) {
        Ok(e) => e,
        Err(code) => return code,
    };
    engine.options.typecheck = args.typecheck;
    // As in ruff and Biome: writing applies safe fixes unless review fixes are asked for; the
    // dry run shows both, each hunk labelled.
    let review_allowed = args.unsafe_fixes || (!args.write && !args.safe_only);
    if args.write && !args.allow_dirty && engine.options.stdin.is_none() {
        let dirty = batch::dirty_files(&engine.options.paths);
        if !dirty.is_empty() {
            let shown: Vec<&str> = dirty.iter().take(5).map(String::as_str).collect();
            let more = if dirty.len() > 5 { format!(" and {} more", dirty.len() - 5) } else { String::new() };
            eprintln!(
                "retrysafe: the git work tree has uncommitted changes ({}{more}); commit or stash them first, or pass --allow-dirty",
                shown.join(", ")
            );
            return ExitCode::from(2);
        }
    }
    let cache = match prepare_batch(&mut engine, &args.common, false) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("retrysafe: {e}");
            return ExitCode::from(2);
        }
    };
    let allowed = move |a: Applicability| match a {
        Applicability::Safe => true,
        Applicability::Unsafe => review_allowed,
        Applicability::DisplayOnly => false,
    };
    let report = engine.fix(&allowed);
    let palette = palette(args.common.no_color);
    let changed: Vec<_> = report.files.iter().filter(|f| f.original != f.fixed).collect();
    let fixed_count: usize = report.files.iter().map(|f| f.applied.len()).sum();
    let manual: usize = report.files.iter().map(|f| f.manual.len()).sum();
    let held_back: usize = report.files.iter().map(|f| f.held_back.len()).sum();
    let review_shown: usize =
        report.files.iter().flat_map(|f| &f.applied).filter(|a| a.applicability == Applicability::Unsafe).count();
    let files_touched = changed.len() + report.new_files.len();
    match args.format {
        FixFormat::Json => {
            let out = serde_json::json!({
                "diagnostics": report.first_pass.iter().map(|d| report::json::diagnostic(d, Some(&engine.project))).collect::<Vec<_>>(),
                "files": report.files.iter().filter(|f| f.original != f.fixed || !f.manual.is_empty() || !f.held_back.is_empty()).map(|f| serde_json::json!({
                    "file": report::display_path(&f.path),
                    "applied": f.applied,
                    "manual": f.manual,
                    "held_back": f.held_back,
                    "problems": f.problems,
                    "fixed": f.fixed,
                })).collect::<Vec<_>>(),
                "new_files": report.new_files.iter().map(|(p, t)| serde_json::json!({ "file": report::display_path(p), "text": t })).collect::<Vec<_>>(),
            });
            println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
        }
        FixFormat::Diff if !args.write => {
            for f in &changed {
                print!("{}", report::diff::render(f, &palette));
            }
            for (p, t) in &report.new_files {
                print!("{}", report::diff::new_file(p, t, &palette));
            }
        }
        FixFormat::Diff => {}
    }
    for f in &report.files {
        for p in &f.problems {
            eprintln!("warning: {p}");
        }
        if !matches!(args.format, FixFormat::Json) {
            for m in &f.manual {
                let why = m.note.as_deref().map(|n| format!(": {n}")).unwrap_or_default();
                eprintln!("manual: {}:{}: {} ({}){why}", report::display_path(&f.path), m.line, m.rule, m.title);
            }
        }
    }
    let mut failed = !report.errors.is_empty();
    for e in &report.errors {
        eprintln!("error: {e}");
    }
    if let (true, Some((path, text))) = (args.write, &engine.options.stdin) {
        // Source from stdin goes back to stdout (as editors and formatters expect); nothing
        // on disk is touched.
        let fixed = report.files.iter().find(|f| &f.path == path).map_or(text.as_str(), |f| f.fixed.as_str());
        print!("{fixed}");
    } else if args.write {
        // A `--write` killed mid-rename leaves its temporary file behind; clear old ones.
        for stale in retrysafe::fix::write::remove_stale_temp_files(engine.files()) {
            eprintln!(
                "note: removed {}, left by an interrupted write",
                report::display_path(&stale).trim_start_matches("./")
            );
        }
        for f in &changed {
            if let Err(e) = retrysafe::fix::write::write_atomic(&f.path, &f.fixed) {
                eprintln!("error: {}: cannot write: {e}", f.path.display());
                failed = true;
            } else {
                eprintln!("wrote {}", report::display_path(&f.path));
            }
        }
        for (p, t) in &report.new_files {
            if p.exists() {
                eprintln!("error: {}: already exists; not overwritten", p.display());
                failed = true;
            } else if let Err(e) = retrysafe::fix::write::write_atomic(p, t) {
                eprintln!("error: {}: cannot write: {e}", p.display());
                failed = true;
            } else {
                eprintln!("created {}", report::display_path(p));
            }
        }
    }
    if !matches!(args.format, FixFormat::Json) {
        let verb = if args.write { "Fixed" } else { "Would fix" };
        let manual_note = if manual > 0 {
            format!("; {manual} need manual attention (no guard, no event key, or display-only)")
        } else {
            String::new()
        };
        eprintln!(
            "{verb} {fixed_count} issue{} in {files_touched} file{}{manual_note}.",
            if fixed_count == 1 { "" } else { "s" },
            if files_touched == 1 { "" } else { "s" }
        );
        if held_back > 0 {
            eprintln!(
                "{held_back} review fix{} held back (shown in the dry run); `--unsafe` applies {}.",
                if held_back == 1 { "" } else { "es" },
                if held_back == 1 { "it" } else { "them" }
            );
        } else if !args.write && review_shown > 0 {
            eprintln!(
                "{review_shown} of these {} review fix{} [unsafe (review)]: `--write` applies only the safe ones, \
                 `--write --unsafe` all.",
                if review_shown == 1 { "is a" } else { "are" },
                if review_shown == 1 { "" } else { "es" }
            );
        }
        print_package_summary(
            &engine,
            cache.as_deref(),
            report.first_pass.iter().map(|d| (d.file.path.as_path(), false)),
            report.files.iter().map(|f| (f.path.as_path(), f.applied.len())),
        );
    }
    if failed {
        ExitCode::from(2)
    } else if !args.write && files_touched > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

fn dump_tree(path: &std::path::Path) -> ExitCode {
    let project = retrysafe::project::Project::new();
    let file = match project.load(path) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("retrysafe: {e}");
            return ExitCode::from(2);
        }
    };
    fn print(node: tree_sitter::Node, src: &str, depth: usize) {
        let field_text =
            if node.child_count() == 0 { format!(" {:?}", &src[node.byte_range()]) } else { String::new() };
        println!("{}{} [{}..{}]{field_text}", "  ".repeat(depth), node.kind(), node.start_byte(), node.end_byte());
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            print(child, src, depth + 1);
        }
    }
    print(file.root(), &file.text, 0);
    let config = retrysafe::config::Config::default();
    for h in retrysafe::model::handlers::find_handlers(&file, &project, &config) {
        println!(
            "handler: {} {:?} provider={:?} key={:?} req={:?} res={:?}",
            h.name,
            h.framework,
            h.provider,
            h.event_key.as_ref().map(|k| &k.template),
            h.request,
            h.response
        );
    }
    ExitCode::SUCCESS
}
