//! The command line: parse flags, run the library, map outcomes to exit codes
//! (0 clean, 1 findings or pending fixes, 2 usage, config or I/O error).

use clap::{Args, Parser, Subcommand, ValueEnum};
use retrysafe::engine::{Engine, Fatal, Options};
use retrysafe::fix::{Applicability, GuardSpec};
use retrysafe::report::{self, text::Palette};
use retrysafe::rules::{self, FixAvailability};
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
    /// Print a file's syntax tree and the handlers found in it (for rule authors).
    #[command(hide = true)]
    DumpTree { file: PathBuf },
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
    #[arg(long, value_enum, default_value = "diff")]
    format: FixFormat,
}

#[derive(Clone, Copy, ValueEnum)]
enum CheckFormat {
    Text,
    Json,
    Sarif,
    Github,
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
        "dump-tree",
        "parse-only",
        "lsp",
        "help",
        "-h",
        "--help",
        "-V",
        "--version",
    ];
    if argv.get(1).is_none_or(|a| !known.contains(&a.as_str())) {
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
        Command::DumpTree { file } => dump_tree(&file),
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
            None => {
                eprintln!("retrysafe: unknown rule `{rule}` (see `retrysafe rules`)");
                ExitCode::from(2)
            }
        },
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
                println!("{:<34} {:<10} {}", r.id, fix_label(r.fix), r.summary);
            }
        }
        RulesFormat::Json => {
            let items: Vec<_> = rules::registry()
                .iter()
                .map(|r| serde_json::json!({ "id": r.id, "summary": r.summary, "fix": r.fix }))
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

fn palette(no_color: bool) -> Palette {
    Palette { on: !no_color && std::env::var_os("NO_COLOR").is_none() && std::io::stdout().is_terminal() }
}

fn run_check(args: CheckArgs) -> ExitCode {
    let engine = match engine(&args.common, None) {
        Ok(e) => e,
        Err(code) => return code,
    };
    let report = engine.check();
    let palette = palette(args.common.no_color);
    match args.format {
        CheckFormat::Text => {
            print!("{}", report::text::render(&report.diagnostics, &palette));
            if !args.quiet {
                for n in &report.notes {
                    eprintln!("note: {n}");
                }
                println!("{}", report::text::summary(&report.diagnostics));
            }
        }
        CheckFormat::Json => println!("{}", report::json::render(&report.diagnostics, Some(&engine.project))),
        CheckFormat::Sarif => println!("{}", report::sarif::render(&report.diagnostics)),
        CheckFormat::Github => print!("{}", report::github(&report.diagnostics)),
    }
    for e in &report.errors {
        eprintln!("error: {e}");
    }
    if !report.errors.is_empty() {
        ExitCode::from(2)
    } else if report.diagnostics.iter().all(|d| d.severity == retrysafe::config::Severity::Warning) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
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
        for f in &changed {
            if let Err(e) = retrysafe::fix::write::write_atomic(&f.path, &f.fixed) {
                eprintln!("error: {}: cannot write: {e}", f.path.display());
                failed = true;
            }
        }
        for (p, t) in &report.new_files {
            if p.exists() {
                eprintln!("error: {}: already exists; not overwritten", p.display());
                failed = true;
            } else if let Err(e) = retrysafe::fix::write::write_atomic(p, t) {
                eprintln!("error: {}: cannot write: {e}", p.display());
                failed = true;
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
