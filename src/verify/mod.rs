//! `retrysafe verify`: runs the user's app, delivers a signed event as the provider would —
//! again, concurrently, around a crash, with the response lost, out of order — and compares
//! the business state and the provider-side effects with a single delivery.

pub mod app;
pub mod deliver;
pub mod fake;
pub mod html;
pub mod queue;
pub mod report;
pub mod runner;
pub mod scenario;
pub mod sign;

use clap::{Args, ValueEnum};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Clone, Copy, ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerifyFormat {
    Text,
    Json,
    Junit,
}

#[derive(Args, Clone)]
#[command(after_help = scenario::HELP)]
pub struct VerifyArgs {
    /// The route to deliver to: "POST /api/webhooks/stripe". Without it, every target in the
    /// `verify.targets` of retrysafe.json is verified.
    pub target: Option<String>,
    /// Verify a queue consumer instead of a route: `bullmq:NAME` (jobs added through the app's
    /// own BullMQ client; the event fixture is the job: `{ "name", "data", "opts" }`).
    #[arg(long)]
    pub queue: Option<String>,
    /// The Redis the queue lives in (default: $REDIS_URL).
    #[arg(long)]
    pub redis_url: Option<String>,
    /// BullMQ's key prefix.
    #[arg(long, default_value = "bull")]
    pub queue_prefix: String,
    /// The config file with `verify.targets` (default: ./retrysafe.json).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Whose signature to send: stripe, github, standard-webhooks, svix, shopify, paystack, slack.
    #[arg(long)]
    pub provider: Option<String>,
    /// The event fixture, delivered byte for byte.
    #[arg(long)]
    pub event: Option<PathBuf>,
    /// A newer event about the same object, for `out-of-order`.
    #[arg(long)]
    pub newer_event: Option<PathBuf>,
    /// A different event about the same object, for `distinct-events`.
    #[arg(long)]
    pub other_event: Option<PathBuf>,
    /// The event id sent in headers (default: read from the fixture).
    #[arg(long)]
    pub event_id: Option<String>,
    /// The event type sent in headers (GitHub `X-GitHub-Event`, Shopify topic).
    #[arg(long)]
    pub event_type: Option<String>,
    /// The command that starts the app (run with `sh -c`, in its own process group).
    #[arg(long)]
    pub start: Option<String>,
    /// The port the app listens on (also passed to it as PORT).
    #[arg(long)]
    pub port: Option<u16>,
    /// The app's host: loopback only.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The directory the commands run in (default: the current one).
    #[arg(long)]
    pub cwd: Option<PathBuf>,
    /// The app reads its webhook secret from this variable; verify sets it (to its value in
    /// verify's environment, or a generated test secret).
    #[arg(long)]
    pub secret_env: Option<String>,
    /// The webhook secret (default: $SECRET_ENV, or a generated one).
    #[arg(long)]
    pub secret: Option<String>,
    /// Restores the world before each scenario (e.g. `psql $DATABASE_URL -f test/reset.sql`).
    #[arg(long)]
    pub reset: Option<String>,
    /// Prints the business state to compare (e.g. `psql $DATABASE_URL -Atc 'select ...'`).
    #[arg(long)]
    pub state: Option<String>,
    /// A SQL query whose rows are the state, run with psql against --database-url.
    #[arg(long)]
    pub state_sql: Option<String>,
    /// The connection string for --state-sql (default: $DATABASE_URL).
    #[arg(long)]
    pub database_url: Option<String>,
    /// Scenarios to run (see below).
    #[arg(long, default_value = "all")]
    pub scenarios: String,
    /// Provider APIs whose calls are rerouted to the recording fake: stripe, resend, paypal,
    /// square, sqs, sendgrid, postmark, twilio, mailgun, slack, github, shopify, or host names
    /// (default: all of them).
    #[arg(long, value_delimiter = ',')]
    pub effects: Vec<String>,
    /// Seeds the generated test secret.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    #[arg(long, value_enum, default_value = "text")]
    pub format: VerifyFormat,
    /// Also write a self-contained HTML report to this file.
    #[arg(long)]
    pub report: Option<PathBuf>,
    /// The Node preload to load into the app (`--require`); `none` to run without it.
    #[arg(long, default_value = "@retrysafe/guard/verify-preload")]
    pub preload: String,
    /// A regular expression for the SQL that claims an event (default: inserts into a table
    /// named like processed/idempotency/dedupe/seen/webhook_events/claims).
    #[arg(long)]
    pub claim_pattern: Option<String>,
    /// Seconds to wait for each response.
    #[arg(long, default_value_t = 15)]
    pub timeout: u64,
    /// Seconds to wait for the app to listen.
    #[arg(long, default_value_t = 60)]
    pub start_timeout: u64,
    /// Deliveries of one event in a scenario before giving up, as a provider's retry schedule.
    #[arg(long, default_value_t = 4)]
    pub max_attempts: usize,
}

fn setup_error(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("retrysafe verify: {message}");
    ExitCode::from(2)
}

fn read_event(
    path: &Path,
    provider: sign::Provider,
    label: &'static str,
    id: Option<&str>,
    kind: Option<&str>,
) -> Result<runner::Event, String> {
    let body = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    if body.is_empty() {
        return Err(format!("{}: the event fixture is empty", path.display()));
    }
    let (found_id, found_kind) = sign::event_identity(provider, &body);
    Ok(runner::Event {
        body,
        id: id.map_or(found_id, str::to_string),
        kind: kind.map_or(found_kind, str::to_string),
        label,
    })
}

/// A deterministic test secret of the provider's shape.
fn generated_secret(provider: sign::Provider, seed: u64) -> String {
    use base64::Engine as _;
    let mut x = seed ^ 0x9e37_79b9_7f4a_7c15;
    let bytes: Vec<u8> = (0..24)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    match provider {
        sign::Provider::StandardWebhooks | sign::Provider::Svix => {
            format!("whsec_{}", base64::engine::general_purpose::STANDARD.encode(&bytes))
        }
        sign::Provider::Stripe => format!("whsec_{}", sign::hex(&bytes)),
        _ => sign::hex(&bytes),
    }
}

fn build_target(args: &VerifyArgs, work_dir: &Path) -> Result<runner::Target, String> {
    if let Some(spec) = &args.queue {
        return build_queue_target(args, spec, work_dir);
    }
    let target =
        args.target.as_deref().ok_or("name the route to verify: retrysafe verify \"POST /api/webhooks/stripe\" ...")?;
    let (method, path) = match target.split_once(' ') {
        Some((m, p)) => (m.trim().to_ascii_uppercase(), p.trim().to_string()),
        None => ("POST".to_string(), target.trim().to_string()),
    };
    if !path.starts_with('/') {
        return Err(format!("target `{target}`: the path must start with `/` (\"POST /api/webhooks/stripe\")"));
    }
    let provider_name = args
        .provider
        .as_deref()
        .ok_or("--provider is required (stripe, github, standard-webhooks, svix, shopify, paystack, slack)")?;
    let provider = sign::Provider::parse(provider_name).ok_or_else(|| {
        format!(
            "unknown provider `{provider_name}` (stripe, github, standard-webhooks, svix, shopify, paystack, slack)"
        )
    })?;
    let event_path = args.event.as_deref().ok_or("--event FILE (the event fixture) is required")?;
    let event = read_event(event_path, provider, "event", args.event_id.as_deref(), args.event_type.as_deref())?;
    let newer = args.newer_event.as_deref().map(|p| read_event(p, provider, "newer", None, None)).transpose()?;
    let other = args.other_event.as_deref().map(|p| read_event(p, provider, "other", None, None)).transpose()?;
    let start = args.start.clone().ok_or("--start CMD (how to start the app) is required")?;
    let port = args.port.ok_or("--port N (where the app listens) is required")?;
    let addr = Some(deliver::loopback_target(&args.host, port)?);
    let secret = match (&args.secret, &args.secret_env) {
        (Some(s), _) => s.clone(),
        (None, Some(name)) => {
            std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| generated_secret(provider, args.seed))
        }
        (None, None) => {
            return Err(
                "give --secret-env NAME (the variable the app reads its webhook secret from) or --secret".into()
            );
        }
    };
    let cwd = work_cwd(args)?;
    let mut env = app_env(args)?;
    if let Some(name) = &args.secret_env {
        env.push((name.clone(), secret.clone()));
    }
    Ok(runner::Target {
        method,
        path,
        provider: Some(provider),
        queue: None,
        secret,
        event,
        newer,
        other,
        addr,
        host_header: format!("{}:{port}", args.host),
        app: app::AppConfig {
            start,
            cwd,
            addr,
            env,
            preload: (args.preload != "none").then(|| args.preload.clone()),
            start_timeout: Duration::from_secs(args.start_timeout),
            log: work_dir.join("app.log"),
        },
        reset: args.reset.clone(),
        state: state_source(args)?,
        timeout: Duration::from_secs(args.timeout.max(1)),
        max_attempts: args.max_attempts.max(2),
        work_dir: work_dir.to_path_buf(),
    })
}

/// The environment every app run gets: where the recording fake is, which hosts it answers,
/// and the claim pattern.
fn app_env(args: &VerifyArgs) -> Result<Vec<(String, String)>, String> {
    let fake = std::env::var("RETRYSAFE_VERIFY_FAKE_URL").unwrap_or_default();
    let hosts = fake::effect_hosts(&args.effects)?;
    let mut env = vec![
        ("RETRYSAFE_VERIFY_FAKE".to_string(), fake),
        ("RETRYSAFE_VERIFY_EFFECT_HOSTS".to_string(), hosts.join(",")),
    ];
    if let Some(p) = &args.claim_pattern {
        regex::Regex::new(p).map_err(|e| format!("--claim-pattern: {e}"))?;
        env.push(("RETRYSAFE_VERIFY_CLAIM".to_string(), p.clone()));
    }
    Ok(env)
}

fn work_cwd(args: &VerifyArgs) -> Result<PathBuf, String> {
    match &args.cwd {
        Some(d) if !d.is_dir() => Err(format!("{}: --cwd is not a directory", d.display())),
        Some(d) => Ok(d.clone()),
        None => std::env::current_dir().map_err(|e| format!("cannot read the current directory: {e}")),
    }
}

/// `--queue bullmq:NAME`: a worker with no port and no signature; the fixtures are jobs.
fn build_queue_target(args: &VerifyArgs, spec: &str, work_dir: &Path) -> Result<runner::Target, String> {
    if args.target.is_some() {
        return Err("give a route or --queue, not both".into());
    }
    let queue = queue::parse_queue(
        spec,
        args.redis_url.clone().or_else(|| std::env::var("REDIS_URL").ok()),
        &args.queue_prefix,
    )?;
    let read_job = |path: &Path, label: &'static str| -> Result<runner::Event, String> {
        let body = std::fs::read(path).map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
        let (id, name) = queue::job_identity(path, &body, label)?;
        Ok(runner::Event { body, id, kind: name, label })
    };
    let event_path = args.event.as_deref().ok_or("--event FILE (the job fixture) is required")?;
    let event = read_job(event_path, "event")?;
    let newer = args.newer_event.as_deref().map(|p| read_job(p, "newer")).transpose()?;
    let other = args.other_event.as_deref().map(|p| read_job(p, "other")).transpose()?;
    for (label, e) in [("--newer-event", &newer), ("--other-event", &other)] {
        if e.as_ref().is_some_and(|e| e.id == event.id) {
            return Err(format!("{label}: its job id `{}` is the --event job's: give each job its own id", event.id));
        }
    }
    let start = args.start.clone().ok_or("--start CMD (how to start the worker) is required")?;
    let mut env = app_env(args)?;
    env.push(("REDIS_URL".to_string(), queue.redis_url.clone()));
    Ok(runner::Target {
        method: "QUEUE".into(),
        path: spec.to_string(),
        provider: None,
        queue: Some(queue),
        secret: String::new(),
        event,
        newer,
        other,
        addr: None,
        host_header: String::new(),
        app: app::AppConfig {
            start,
            cwd: work_cwd(args)?,
            addr: None,
            env,
            preload: (args.preload != "none").then(|| args.preload.clone()),
            start_timeout: Duration::from_secs(args.start_timeout),
            log: work_dir.join("app.log"),
        },
        reset: args.reset.clone(),
        state: state_source(args)?,
        timeout: Duration::from_secs(args.timeout.max(1)),
        max_attempts: args.max_attempts.max(2),
        work_dir: work_dir.to_path_buf(),
    })
}

fn state_source(args: &VerifyArgs) -> Result<runner::StateSource, String> {
    Ok(match (&args.state, &args.state_sql) {
        (Some(_), Some(_)) => return Err("give --state or --state-sql, not both".into()),
        (Some(cmd), None) => runner::StateSource::Command(cmd.clone()),
        (None, Some(sql)) => {
            let url = args
                .database_url
                .clone()
                .or_else(|| std::env::var("DATABASE_URL").ok())
                .ok_or("--state-sql needs --database-url or $DATABASE_URL")?;
            runner::StateSource::Sql { sql: sql.clone(), url }
        }
        (None, None) => runner::StateSource::None,
    })
}

/// One entry of `verify.targets` in retrysafe.json; the command line's flags win over it.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TargetConfig {
    /// An HTTP route, or nothing when `queue` is given.
    route: Option<String>,
    queue: Option<String>,
    redis_url: Option<String>,
    queue_prefix: Option<String>,
    provider: Option<String>,
    event: Option<PathBuf>,
    newer_event: Option<PathBuf>,
    other_event: Option<PathBuf>,
    event_id: Option<String>,
    event_type: Option<String>,
    start: Option<String>,
    port: Option<u16>,
    host: Option<String>,
    cwd: Option<PathBuf>,
    secret_env: Option<String>,
    reset: Option<String>,
    state: Option<String>,
    state_sql: Option<String>,
    database_url: Option<String>,
    scenarios: Option<String>,
    effects: Option<Vec<String>>,
    preload: Option<String>,
    claim_pattern: Option<String>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct VerifySection {
    targets: Vec<TargetConfig>,
}

/// The targets declared in the config file, each as the flags it stands for. Relative paths
/// are taken from the config file's directory.
fn configured_targets(args: &VerifyArgs, check_rule: crate::config::CheckRule) -> Result<Vec<VerifyArgs>, String> {
    let path = args.config.clone().unwrap_or_else(|| PathBuf::from(crate::config::CONFIG_FILE));
    if !path.is_file() {
        return Err(format!(
            "name the route to verify (retrysafe verify \"POST /api/webhooks/stripe\" ...) or declare `verify.targets` in {}",
            path.display()
        ));
    }
    let config = crate::config::Config::load(&path, check_rule).map_err(|e| e.to_string())?;
    let section = config
        .verify
        .ok_or_else(|| format!("{}: no `verify` section (`verify: {{ targets: [...] }}`)", path.display()))?;
    let section: VerifySection =
        serde_json::from_value(section).map_err(|e| format!("{}: invalid config: verify: {e}", path.display()))?;
    if section.targets.is_empty() {
        return Err(format!("{}: verify.targets is empty", path.display()));
    }
    let base = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    let rel = |p: PathBuf| if p.is_absolute() { p } else { base.join(p) };
    section
        .targets
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let mut a = args.clone();
            match (t.route, t.queue) {
                (Some(route), None) => a.target = Some(route),
                (None, Some(queue)) => a.queue = Some(queue),
                _ => {
                    return Err(format!(
                        "{}: invalid config: verify.targets[{i}]: give either `route` or `queue`",
                        path.display()
                    ));
                }
            }
            a.redis_url = a.redis_url.or(t.redis_url);
            if let Some(p) = t.queue_prefix {
                a.queue_prefix = p;
            }
            a.provider = a.provider.or(t.provider);
            a.event = a.event.or(t.event.map(rel));
            a.newer_event = a.newer_event.or(t.newer_event.map(rel));
            a.other_event = a.other_event.or(t.other_event.map(rel));
            a.event_id = a.event_id.or(t.event_id);
            a.event_type = a.event_type.or(t.event_type);
            a.start = a.start.or(t.start);
            a.port = a.port.or(t.port);
            if let Some(h) = t.host {
                a.host = h;
            }
            a.cwd = a.cwd.or(Some(rel(t.cwd.unwrap_or_else(|| PathBuf::from(".")))));
            a.secret_env = a.secret_env.or(t.secret_env);
            a.reset = a.reset.or(t.reset);
            a.state = a.state.or(t.state);
            a.state_sql = a.state_sql.or(t.state_sql);
            a.database_url = a.database_url.or(t.database_url);
            if let (true, Some(s)) = (a.scenarios == "all", t.scenarios) {
                a.scenarios = s;
            }
            if a.effects.is_empty() {
                a.effects = t.effects.unwrap_or_default();
            }
            if let Some(p) = t.preload {
                a.preload = p;
            }
            a.claim_pattern = a.claim_pattern.or(t.claim_pattern);
            Ok(a)
        })
        .collect()
}

/// Runs `retrysafe verify`: 0 no divergence, 1 a scenario diverged, 2 a setup error. Without a
/// route, runs every target of `verify.targets`; the worst outcome is the exit code. The config
/// is loaded with `check_rule` for its rule ids (the CLI passes the rules' check, so verify
/// depends on no rule).
pub fn run(args: VerifyArgs, check_rule: crate::config::CheckRule) -> ExitCode {
    if args.target.is_some() || args.queue.is_some() {
        return ExitCode::from(run_target(args));
    }
    let targets = match configured_targets(&args, check_rule) {
        Ok(t) => t,
        Err(e) => return setup_error(e),
    };
    let mut worst = 0;
    for target in targets {
        let code = run_target(target);
        worst = if code == 2 || worst == 2 { 2 } else { worst.max(code) };
    }
    ExitCode::from(worst)
}

fn run_target(args: VerifyArgs) -> u8 {
    let setup_error = |m: String| {
        eprintln!("retrysafe verify: {m}");
        2u8
    };
    // Kept after a setup error (it holds the app's log and the preload's traces), removed
    // otherwise.
    let work_dir: PathBuf = match tempfile::Builder::new().prefix("retrysafe-verify-").tempdir() {
        Ok(d) => d.keep(),
        Err(e) => return setup_error(format!("cannot create a work directory: {e}")),
    };
    let fake = match fake::Fake::start() {
        Ok(f) => f,
        Err(e) => return setup_error(e),
    };
    // SAFETY: set before any thread that reads the environment is started by this command
    // (the fake's thread never reads it).
    unsafe { std::env::set_var("RETRYSAFE_VERIFY_FAKE_URL", &fake.url) };
    let target = match build_target(&args, &work_dir) {
        Ok(t) => t,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&work_dir);
            return setup_error(e);
        }
    };
    if let Some(dir) =
        args.report.as_deref().map(|p| p.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")))
    {
        if !dir.is_dir() {
            let _ = std::fs::remove_dir_all(&work_dir);
            return setup_error(format!("{}: --report: the directory does not exist", dir.display()));
        }
    }
    let scenarios = match scenario::parse(&args.scenarios, target.newer.is_some(), target.other.is_some()) {
        Ok(s) => s,
        Err(e) => return setup_error(format!("--scenarios: {e}")),
    };
    if target.state.is_none_source() {
        eprintln!(
            "retrysafe verify: note: no --state or --state-sql: only statuses and provider-side effects are compared"
        );
    }
    let keep = |e: String| setup_error(format!("{e} (the app log and traces are in {})", work_dir.display()));
    let mut runner = match runner::Runner::new(&target, &fake) {
        Ok(r) => r,
        Err(e) => return keep(e),
    };
    let (reference, single) = match runner.reference() {
        Ok(r) => r,
        Err(e) => return keep(e),
    };
    let mut outcomes = vec![single];
    for s in runner.expand(&scenarios, &reference) {
        match runner.run(&s, &reference) {
            Ok(o) => outcomes.push(o),
            Err(e) => return keep(format!("{}: {e}", s.name())),
        }
    }
    let report = report::Report {
        target: if target.queue.is_some() { target.path.clone() } else { format!("{} {}", target.method, target.path) },
        provider: target.provider.map_or("bullmq", |p| p.name()).to_string(),
        event_id: target.event.id.clone(),
        outcomes,
    };
    if let Some(path) = &args.report {
        let existed = path.exists();
        if let Err(e) = crate::fix::write::write_atomic(path, &html::render(&report)) {
            return setup_error(format!("{}: cannot write the report: {e}", path.display()));
        }
        if !existed {
            // A report is for reading and sharing: not the private mode of a temporary file.
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644));
        }
    }
    match args.format {
        VerifyFormat::Text => print!("{}", report::text(&report)),
        VerifyFormat::Json => println!("{}", report::json(&report)),
        VerifyFormat::Junit => print!("{}", report::junit(&report)),
    }
    if std::env::var_os("RETRYSAFE_VERIFY_KEEP").is_none() {
        let _ = std::fs::remove_dir_all(&work_dir);
    } else {
        eprintln!("retrysafe verify: the work directory is kept: {}", work_dir.display());
    }
    if report.count(runner::Verdict::Fail) > 0 { 1 } else { 0 }
}

impl runner::StateSource {
    pub fn is_none_source(&self) -> bool {
        matches!(self, runner::StateSource::None)
    }
}
