//! Runs the scenarios against the app: reset the world, start the app (with a fault when the
//! scenario injects one), deliver as the provider would, read the state and the effects
//! ledger, and compare them with the single-delivery reference.

use super::app::{App, AppConfig, Fault, Trace};
use super::deliver::{self, Response};
use super::fake::{Effect, Fake};
use super::scenario::Scenario;
use super::sign::{self, Delivery, Provider};
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// One event fixture: its exact bytes and the identity the provider would send.
#[derive(Clone)]
pub struct Event {
    pub body: Vec<u8>,
    pub id: String,
    pub kind: String,
    pub label: &'static str,
}

pub enum StateSource {
    None,
    Command(String),
    Sql { sql: String, url: String },
}

pub struct Target {
    pub method: String,
    pub path: String,
    /// Whose signature deliveries carry; `None` for a queue.
    pub provider: Option<Provider>,
    /// `--queue`: jobs are delivered through BullMQ instead of HTTP requests.
    pub queue: Option<super::queue::QueueTarget>,
    pub secret: String,
    pub event: Event,
    pub newer: Option<Event>,
    pub other: Option<Event>,
    /// The HTTP target; `None` for a queue.
    pub addr: Option<SocketAddr>,
    pub host_header: String,
    pub app: AppConfig,
    pub reset: Option<String>,
    pub state: StateSource,
    pub timeout: Duration,
    pub max_attempts: usize,
    pub work_dir: PathBuf,
}

#[derive(Clone, Debug, Serialize)]
pub struct Attempt {
    /// Which fixture was delivered (`event`, `newer`, `other`).
    pub event: String,
    pub status: Option<u16>,
    /// A queue job's state when the attempt ended (`completed`, `failed`, `killed`).
    pub job: Option<String>,
    pub error: Option<String>,
    /// The fault the preload injected during this attempt (`kill at after-claim`).
    pub fault: Option<String>,
    /// The app was restarted before this attempt.
    pub restarted: bool,
    pub signature: &'static str,
    /// Released together with others behind the barrier.
    pub concurrent: bool,
    pub at_ms: u64,
}

#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Inconclusive,
    Skipped,
}

#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub scenario: String,
    pub verdict: Verdict,
    /// One line: why it failed, why it is inconclusive, or what it showed.
    pub reason: String,
    pub attempts: Vec<Attempt>,
    pub state: Option<String>,
    pub state_equal: Option<bool>,
    pub expected_effects: usize,
    pub seen_effects: usize,
    pub effects: Vec<Effect>,
    /// The crash/fault points the app reached, in order.
    pub points: Vec<String>,
}

/// What one app run leaves: the state, the provider-side calls, the points reached.
type RunResult = (Option<String>, Vec<Effect>, Vec<String>);

/// The reference the scenarios are compared with.
pub struct Reference {
    pub state: Option<String>,
    pub effects: Vec<Effect>,
    pub points: Vec<String>,
}

pub struct Runner<'a> {
    pub target: &'a Target,
    pub fake: &'a Fake,
    pub(super) epoch: Instant,
    app_runs: usize,
    pub(super) producer: Option<std::cell::RefCell<super::queue::Producer>>,
}

fn is_2xx(s: Option<u16>) -> bool {
    s.is_some_and(|s| (200..300).contains(&s))
}

/// The delivery was acknowledged: a 2xx, or a queue job that completed.
fn acknowledged(a: &Attempt) -> bool {
    is_2xx(a.status) || a.job.as_deref() == Some("completed")
}

fn run_shell(what: &str, command: &str, cwd: &std::path::Path) -> Result<String, String> {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{what} `{command}`: cannot run: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("{what} `{command}` failed ({}): {first}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

/// Counts performed effects by signature (`POST api.stripe.com/v1/refunds`).
fn performed(effects: &[Effect]) -> BTreeMap<String, Vec<&Effect>> {
    let mut map: BTreeMap<String, Vec<&Effect>> = BTreeMap::new();
    for e in effects.iter().filter(|e| e.performed()) {
        map.entry(e.signature()).or_default().push(e);
    }
    map
}

/// The first way `seen` differs from `expected`, in one line; `None` when they match.
pub fn effects_divergence(expected: &[Effect], seen: &[Effect]) -> Option<String> {
    let (want, got) = (performed(expected), performed(seen));
    let mut names: Vec<&String> = want.keys().chain(got.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        let w = want.get(name).map_or(0, Vec::len);
        let g = got.get(name).map(Vec::as_slice).unwrap_or(&[]);
        if g.len() == w {
            continue;
        }
        let head = format!("`{name}` was performed {}× (reference {w}×)", g.len());
        if g.len() < w {
            return Some(format!("{head}: the effect was lost"));
        }
        let keys: Vec<&str> = g.iter().filter_map(|e| e.key.as_deref()).collect();
        if keys.is_empty() {
            let keyed = super::fake::api_for_host(&g[0].host).is_some_and(|a| a.key != super::fake::KeySource::None);
            return Some(if keyed {
                format!("{head}: it was sent without an idempotency key")
            } else {
                format!("{head}: this API has no idempotency key, so the handler must not repeat the call")
            });
        }
        let shown: Vec<String> = keys.iter().take(3).map(|k| format!("`{k}`")).collect();
        return Some(format!("{head}: the idempotency key was not stable ({})", shown.join(", ")));
    }
    None
}

fn state_divergence(reference: &Option<String>, got: &Option<String>) -> Option<String> {
    let (Some(want), Some(got)) = (reference, got) else { return None };
    if want == got {
        return None;
    }
    let (wl, gl): (Vec<&str>, Vec<&str>) = (want.lines().collect(), got.lines().collect());
    for i in 0..wl.len().max(gl.len()) {
        let (w, g) = (wl.get(i).copied(), gl.get(i).copied());
        if w != g {
            return Some(format!(
                "state differs from the reference at line {}: expected `{}`, got `{}`",
                i + 1,
                w.unwrap_or("<nothing>"),
                g.unwrap_or("<nothing>")
            ));
        }
    }
    Some("state differs from the reference".into())
}

pub(super) fn describe_fault(trace: &Trace) -> Option<String> {
    trace.fault().map(|f| {
        format!(
            "{} at {}{}",
            f["action"].as_str().unwrap_or("fault"),
            f["point"].as_str().unwrap_or("?"),
            match f["hit"].as_u64() {
                Some(n) if n > 1 => format!(" (hit {n})"),
                _ => String::new(),
            }
        )
    })
}

impl<'a> Runner<'a> {
    pub fn new(target: &'a Target, fake: &'a Fake) -> Result<Runner<'a>, String> {
        let producer = match &target.queue {
            Some(q) => Some(std::cell::RefCell::new(super::queue::Producer::start(
                q,
                &target.app.cwd,
                &target.work_dir.join("producer.log"),
            )?)),
            None => None,
        };
        Ok(Runner { target, fake, epoch: Instant::now(), app_runs: 0, producer })
    }

    fn addr(&self) -> Result<SocketAddr, String> {
        self.target.addr.ok_or_else(|| "this scenario needs an HTTP target".to_string())
    }

    pub(super) fn reset(&self) -> Result<(), String> {
        if self.producer.is_some() {
            self.queue_reset()?;
        }
        if let Some(cmd) = &self.target.reset {
            run_shell("--reset", cmd, &self.target.app.cwd)?;
        }
        self.fake.clear();
        Ok(())
    }

    pub fn state(&self) -> Result<Option<String>, String> {
        match &self.target.state {
            StateSource::None => Ok(None),
            StateSource::Command(cmd) => run_shell("--state", cmd, &self.target.app.cwd).map(Some),
            StateSource::Sql { sql, url } => {
                let out = std::process::Command::new("psql")
                    .arg(url)
                    .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
                    .stdin(std::process::Stdio::null())
                    .output()
                    .map_err(|e| format!("--state-sql: cannot run psql: {e}"))?;
                if !out.status.success() {
                    let err = String::from_utf8_lossy(&out.stderr);
                    return Err(format!("--state-sql failed: {}", err.lines().next().unwrap_or("")));
                }
                Ok(Some(String::from_utf8_lossy(&out.stdout).trim_end().to_string()))
            }
        }
    }

    pub(super) fn start(&mut self, fault: Option<&Fault>) -> Result<App, String> {
        self.app_runs += 1;
        let trace = self.target.work_dir.join(format!("trace-{}.jsonl", self.app_runs));
        App::start(&self.target.app, fault, &trace)
    }

    fn request(&self, event: &Event, secret: &str) -> Result<Vec<u8>, String> {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let delivery = Delivery { body: &event.body, event_id: &event.id, event_type: &event.kind };
        let provider = self.target.provider.ok_or("an HTTP delivery needs --provider")?;
        let headers = sign::sign(provider, secret, &delivery, now).map_err(|e| e.0)?;
        Ok(deliver::build_request(
            &self.target.method,
            &self.target.path,
            &self.target.host_header,
            &headers,
            &event.body,
        ))
    }

    fn attempt(&self, event: &Event, r: &Response, restarted: bool, concurrent: bool) -> Attempt {
        Attempt {
            event: event.label.to_string(),
            status: r.status,
            job: None,
            error: r.error.clone(),
            fault: None,
            restarted,
            signature: "valid",
            concurrent,
            at_ms: r.sent_at.as_millis() as u64,
        }
    }

    fn deliver_once(&self, app: &App, event: &Event, restarted: bool) -> Result<Attempt, String> {
        if self.producer.is_some() {
            return self.queue_deliver(app, event);
        }
        let request = self.request(event, &self.target.secret)?;
        let faults_before = app.trace().faults();
        let r = deliver::deliver(self.addr()?, &request, self.target.timeout, self.epoch);
        let mut attempt = self.attempt(event, &r, restarted, false);
        let trace = app.trace();
        if trace.faults() > faults_before {
            attempt.fault = describe_fault(&trace);
        }
        Ok(attempt)
    }

    /// Redelivers as the provider would until a 2xx or `max_attempts` in all.
    fn until_acknowledged(&self, app: &App, event: &Event, attempts: &mut Vec<Attempt>) -> Result<(), String> {
        if self.producer.is_some() {
            // BullMQ retries a failed job itself, within the one delivery.
            if attempts.is_empty() {
                attempts.push(self.deliver_once(app, event, false)?);
            }
            return Ok(());
        }
        let mut restarted = false;
        while attempts.len() < self.target.max_attempts && !attempts.last().is_some_and(acknowledged) {
            if !attempts.is_empty() {
                std::thread::sleep(Duration::from_millis(300));
            }
            let a = self.deliver_once(app, event, restarted)?;
            restarted = false;
            attempts.push(a);
        }
        Ok(())
    }

    pub(super) fn finish(&self, app: &mut App) -> Result<RunResult, String> {
        // The state is read with the app stopped, so nothing still running in the background
        // changes it while it is read.
        let trace = app.trace();
        app.stop();
        Ok((self.state()?, self.fake.effects(), trace.points()))
    }

    /// The reference: one delivery after a reset. A reference that is not acknowledged is a
    /// setup error: nothing can be compared with it.
    pub fn reference(&mut self) -> Result<(Reference, Outcome), String> {
        self.reset()?;
        let mut app = self.start(None)?;
        let attempt = self.deliver_once(&app, &self.target.event, false)?;
        if !acknowledged(&attempt) {
            let trace = app.trace();
            app.stop();
            let how = match (&attempt.job, attempt.status) {
                (Some(job), _) => format!(
                    "the job ended `{job}`{}",
                    attempt.error.as_ref().map_or(String::new(), |e| format!(": {e}"))
                ),
                (None, Some(s)) => format!("status {s}"),
                (None, None) => attempt.error.clone().unwrap_or_default(),
            };
            let hint = if trace.present() {
                ""
            } else {
                " (the preload did not load: is @retrysafe/guard installed in the app?)"
            };
            return Err(format!(
                "the reference delivery of {} {} was not acknowledged ({how}); see the app log {}{hint}",
                self.target.method,
                self.target.path,
                self.target.app.log.display()
            ));
        }
        let (state, effects, points) = self.finish(&mut app)?;
        let performed = effects.iter().filter(|e| e.performed()).count();
        let outcome = Outcome {
            scenario: "single".into(),
            verdict: Verdict::Pass,
            reason: format!(
                "the reference: {performed} effect{} performed; points reached: {}",
                if performed == 1 { "" } else { "s" },
                if points.is_empty() { "none".to_string() } else { points.join(", ") }
            ),
            attempts: vec![attempt],
            state: state.clone(),
            state_equal: state.as_ref().map(|_| true),
            expected_effects: performed,
            seen_effects: performed,
            effects: effects.clone(),
            points: points.clone(),
        };
        Ok((Reference { state, effects, points }, outcome))
    }

    /// Expands `crash:*` against what the reference called.
    pub fn expand(&self, scenarios: &[Scenario], reference: &Reference) -> Vec<Scenario> {
        let mut out = Vec::new();
        for s in scenarios {
            if *s == Scenario::CrashAll {
                let mut hosts: Vec<String> =
                    reference.effects.iter().filter(|e| e.performed()).map(|e| e.host.clone()).collect();
                hosts.dedup();
                let points = if self.producer.is_some() {
                    super::scenario::QUEUE_CRASH_POINTS
                } else {
                    super::scenario::CRASH_POINTS
                };
                for p in points {
                    if *p == "after-effect" {
                        for h in &hosts {
                            out.push(Scenario::Crash { point: format!("after-effect:{h}"), hit: 1 });
                        }
                    } else {
                        out.push(Scenario::Crash { point: p.to_string(), hit: 1 });
                    }
                }
            } else if *s != Scenario::Single && !out.contains(s) {
                out.push(s.clone());
            }
        }
        out
    }

    pub(super) fn outcome(
        &self,
        scenario: &Scenario,
        reference: &Reference,
        attempts: Vec<Attempt>,
        run: (Option<String>, Vec<Effect>, Vec<String>),
    ) -> Outcome {
        let unacknowledged = (!attempts.last().is_some_and(acknowledged))
            .then(|| format!("the event was never acknowledged in {} attempts", attempts.len()));
        self.outcome_given(scenario, reference, attempts, run, unacknowledged)
    }

    /// The verdict on what a scenario ended with; `unacknowledged` says why the provider
    /// would still be retrying, if it would.
    fn outcome_given(
        &self,
        scenario: &Scenario,
        reference: &Reference,
        attempts: Vec<Attempt>,
        run: (Option<String>, Vec<Effect>, Vec<String>),
        unacknowledged: Option<String>,
    ) -> Outcome {
        let (state, effects, points) = run;
        let expected = reference.effects.iter().filter(|e| e.performed()).count();
        let seen = effects.iter().filter(|e| e.performed()).count();
        let state_equal = match (&reference.state, &state) {
            (Some(a), Some(b)) => Some(a == b),
            _ => None,
        };
        let mut reason =
            effects_divergence(&reference.effects, &effects).or_else(|| state_divergence(&reference.state, &state));
        if reason.is_none() {
            reason = unacknowledged;
        }
        Outcome {
            scenario: scenario.name(),
            verdict: if reason.is_some() { Verdict::Fail } else { Verdict::Pass },
            reason: reason.unwrap_or_else(|| "the same state and effects as the reference".into()),
            attempts,
            state,
            state_equal,
            expected_effects: expected,
            seen_effects: seen,
            effects,
            points,
        }
    }

    pub(super) fn skipped(scenario: &Scenario, why: &str) -> Outcome {
        Outcome {
            scenario: scenario.name(),
            verdict: Verdict::Skipped,
            reason: why.to_string(),
            attempts: vec![],
            state: None,
            state_equal: None,
            expected_effects: 0,
            seen_effects: 0,
            effects: vec![],
            points: vec![],
        }
    }

    pub fn run(&mut self, scenario: &Scenario, reference: &Reference) -> Result<Outcome, String> {
        if self.producer.is_some() {
            match scenario {
                Scenario::Retry
                | Scenario::Concurrent(_)
                | Scenario::Crash { .. }
                | Scenario::LostResponse
                | Scenario::BadSignature => return self.queue_run(scenario, reference),
                _ => {}
            }
        }
        match scenario {
            Scenario::Single | Scenario::CrashAll => Ok(Self::skipped(scenario, "expanded elsewhere")),
            Scenario::Retry => self.retry(scenario, reference),
            Scenario::Concurrent(n) => self.concurrent(scenario, reference, *n),
            Scenario::Crash { point, hit } => self.crash(scenario, reference, point, *hit),
            Scenario::LostResponse => self.lost_response(scenario, reference),
            Scenario::OutOfOrder => self.out_of_order(scenario),
            Scenario::DistinctEvents => self.distinct_events(scenario, reference),
            Scenario::BadSignature => self.bad_signature(scenario),
            Scenario::FaultEffect => self.fault_effect(scenario, reference),
            Scenario::FaultDb => self.fault_db(scenario, reference),
        }
    }

    fn retry(&mut self, scenario: &Scenario, reference: &Reference) -> Result<Outcome, String> {
        self.reset()?;
        let mut app = self.start(None)?;
        let event = &self.target.event;
        let mut attempts = vec![self.deliver_once(&app, event, false)?];
        self.until_acknowledged(&app, event, &mut attempts)?;
        let duplicate = self.deliver_once(&app, event, false)?;
        let duplicate_status = duplicate.status;
        attempts.push(duplicate);
        let run = self.finish(&mut app)?;
        let mut out = self.outcome(scenario, reference, attempts, run);
        if out.verdict == Verdict::Pass && !is_2xx(duplicate_status) {
            out.verdict = Verdict::Fail;
            out.reason = format!(
                "the duplicate delivery got {}: the provider keeps retrying a processed event (answer 2xx to duplicates)",
                duplicate_status.map_or("no response".to_string(), |s| s.to_string())
            );
        }
        Ok(out)
    }

    fn concurrent(&mut self, scenario: &Scenario, reference: &Reference, n: usize) -> Result<Outcome, String> {
        self.reset()?;
        let mut app = self.start(None)?;
        let event = &self.target.event;
        let requests = (0..n).map(|_| self.request(event, &self.target.secret)).collect::<Result<Vec<_>, _>>()?;
        let responses = deliver::deliver_together(self.addr()?, requests, self.target.timeout, self.epoch);
        let trace = app.trace();
        // Overlap: the preload saw two or more requests in the handler at once; without a
        // preload trace, every request was complete before the first response began.
        let overlapped = match trace.max_in_flight() {
            Some(max) => max >= 2,
            None => {
                let last_sent = responses.iter().map(|r| r.sent_at).max().unwrap_or_default();
                responses.iter().filter_map(|r| r.first_byte_at).min().is_none_or(|first| first > last_sent)
            }
        };
        let mut attempts: Vec<Attempt> = responses.iter().map(|r| self.attempt(event, r, false, true)).collect();
        // The provider retries each delivery that was not acknowledged (409 in progress, 5xx)
        // on its own, so each one is redelivered until acknowledged; the verdict then does
        // not depend on which of the concurrent responses happened to arrive last.
        let unacknowledged: Vec<Attempt> = attempts.iter().filter(|a| !acknowledged(a)).cloned().collect();
        let mut abandoned = 0;
        for failed in unacknowledged {
            let mut chain = vec![failed];
            self.until_acknowledged(&app, event, &mut chain)?;
            abandoned += usize::from(!chain.last().is_some_and(acknowledged));
            attempts.extend(chain.into_iter().skip(1));
        }
        let run = self.finish(&mut app)?;
        let unacknowledged =
            (abandoned > 0).then(|| format!("{abandoned} of {n} concurrent deliveries were never acknowledged"));
        let mut out = self.outcome_given(scenario, reference, attempts, run, unacknowledged);
        if out.verdict == Verdict::Pass && !overlapped {
            out.verdict = Verdict::Inconclusive;
            out.reason = "the deliveries did not overlap in the app (each finished before the next began)".into();
        } else if out.verdict == Verdict::Pass {
            let max = trace.max_in_flight().map_or(String::new(), |m| format!(" ({m} in the handler at once)"));
            out.reason = format!("{n} concurrent deliveries overlapped{max}; one processed");
        }
        Ok(out)
    }

    /// Runs `fault` during the first attempt, then redelivers (restarting the app if the
    /// fault killed it) until acknowledged.
    fn with_fault(
        &mut self,
        scenario: &Scenario,
        reference: &Reference,
        fault: Fault,
        unreached: &str,
    ) -> Result<Outcome, String> {
        self.reset()?;
        let mut app = self.start(Some(&fault))?;
        let event = &self.target.event;
        let first = self.deliver_once(&app, event, false)?;
        let trace = app.trace();
        let mut points = trace.points();
        let mut attempts = vec![first];
        if trace.fault().is_none() {
            app.stop();
            let mut out = Self::skipped(scenario, unreached);
            out.verdict = Verdict::Inconclusive;
            out.attempts = attempts;
            out.points = points;
            return Ok(out);
        }
        let restarted = fault.action == "kill";
        if restarted {
            app.stop();
            app = self.start(None)?;
        }
        // A queue job that survived the fault was retried by BullMQ within its one delivery.
        if self.producer.is_none() || restarted {
            let second = self.deliver_once(&app, event, restarted)?;
            attempts.push(second);
            self.until_acknowledged(&app, event, &mut attempts)?;
        }
        let mut run = self.finish(&mut app)?;
        for p in std::mem::take(&mut run.2) {
            if !points.contains(&p) {
                points.push(p);
            }
        }
        run.2 = points;
        Ok(self.outcome(scenario, reference, attempts, run))
    }

    fn crash(&mut self, scenario: &Scenario, reference: &Reference, point: &str, hit: u32) -> Result<Outcome, String> {
        let fault = Fault { action: "kill", point: point.to_string(), hit };
        let unreached = if reference.points.is_empty() {
            format!("{point} was never reached (the preload saw no points: is it loaded?)")
        } else {
            format!("{point} was never reached (the reference reached: {})", reference.points.join(", "))
        };
        self.with_fault(scenario, reference, fault, &unreached)
    }

    fn lost_response(&mut self, scenario: &Scenario, reference: &Reference) -> Result<Outcome, String> {
        let fault = Fault { action: "reset", point: "before-response".into(), hit: 1 };
        self.with_fault(scenario, reference, fault, "the app never sent a response the preload could drop")
    }

    fn fault_db(&mut self, scenario: &Scenario, reference: &Reference) -> Result<Outcome, String> {
        let fault = Fault { action: "error", point: "db-write".into(), hit: 1 };
        self.with_fault(scenario, reference, fault, "the handler made no database write through pg")
    }

    fn fault_effect(&mut self, scenario: &Scenario, reference: &Reference) -> Result<Outcome, String> {
        if !reference.effects.iter().any(|e| e.performed()) {
            let mut out =
                Self::skipped(scenario, "the reference called no provider API, so there is no effect to fault");
            out.verdict = Verdict::Inconclusive;
            return Ok(out);
        }
        self.reset()?;
        let mut app = self.start(None)?;
        self.fake.fail_next(1);
        let event = &self.target.event;
        let first = self.deliver_once(&app, event, false)?;
        let first_status = first.status;
        let mut attempts = vec![first];
        self.until_acknowledged(&app, event, &mut attempts)?;
        let run = self.finish(&mut app)?;
        let mut out = self.outcome(scenario, reference, attempts, run);
        if out.verdict == Verdict::Fail && is_2xx(first_status) {
            out.reason = format!(
                "{}: the delivery was acknowledged ({}) although the provider API failed (503), so the provider never retries it",
                out.reason,
                first_status.unwrap_or(200)
            );
        }
        Ok(out)
    }

    fn bad_signature(&mut self, scenario: &Scenario) -> Result<Outcome, String> {
        self.reset()?;
        let mut app = self.start(None)?;
        let before = self.state()?;
        let wrong = wrong_secret(self.target.provider.ok_or("bad-signature needs --provider")?, &self.target.secret);
        let request = self.request(&self.target.event, &wrong)?;
        let r = deliver::deliver(self.addr()?, &request, self.target.timeout, self.epoch);
        let mut attempt = self.attempt(&self.target.event, &r, false, false);
        attempt.signature = "wrong";
        let (state, effects, points) = self.finish(&mut app)?;
        let performed = effects.iter().filter(|e| e.performed()).count();
        let status = r.status;
        let reason = if !status.is_some_and(|s| (400..500).contains(&s)) {
            Some(format!(
                "a delivery with a wrong signature got {}: it must get 4xx ({})",
                status.map_or("no response".to_string(), |s| s.to_string()),
                if status.is_some_and(|s| s >= 500) {
                    "the provider retries a 5xx for days"
                } else {
                    "it was accepted"
                }
            ))
        } else if performed > 0 {
            Some(format!("a delivery with a wrong signature caused {performed} provider API call(s)"))
        } else {
            state_divergence(&before, &state)
                .map(|d| format!("a delivery with a wrong signature changed the state: {d}"))
        };
        Ok(Outcome {
            scenario: scenario.name(),
            verdict: if reason.is_some() { Verdict::Fail } else { Verdict::Pass },
            reason: reason.unwrap_or_else(|| format!("rejected with {}; nothing changed", status.unwrap_or(0))),
            attempts: vec![attempt],
            state_equal: match (&before, &state) {
                (Some(a), Some(b)) => Some(a == b),
                _ => None,
            },
            state,
            expected_effects: 0,
            seen_effects: performed,
            effects,
            points,
        })
    }

    /// Delivers `events` in order on one app run; returns the attempts and the end state.
    fn sequence(&mut self, events: &[&Event]) -> Result<(Vec<Attempt>, RunResult), String> {
        self.reset()?;
        let mut app = self.start(None)?;
        let mut attempts = Vec::new();
        for event in events {
            let mut these = Vec::new();
            self.until_acknowledged(&app, event, &mut these)?;
            attempts.extend(these);
        }
        let run = self.finish(&mut app)?;
        Ok((attempts, run))
    }

    fn out_of_order(&mut self, scenario: &Scenario) -> Result<Outcome, String> {
        let Some(newer) = self.target.newer.clone() else {
            return Ok(Self::skipped(scenario, "needs --newer-event"));
        };
        let event = self.target.event.clone();
        let (_, in_order) = self.sequence(&[&event, &newer])?;
        let in_order_reference = Reference { state: in_order.0, effects: in_order.1, points: in_order.2 };
        let (attempts, run) = self.sequence(&[&newer, &event])?;
        let mut out = self.outcome(scenario, &in_order_reference, attempts, run);
        if out.verdict == Verdict::Fail {
            out.reason = format!(
                "the older event delivered after the newer one: {} (compared with in-order delivery)",
                out.reason
            );
        }
        Ok(out)
    }

    fn distinct_events(&mut self, scenario: &Scenario, reference: &Reference) -> Result<Outcome, String> {
        let Some(other) = self.target.other.clone() else {
            return Ok(Self::skipped(scenario, "needs --other-event"));
        };
        let event = self.target.event.clone();
        self.reset()?;
        let baseline = self.state()?;
        let (_, alone) = self.sequence(&[&other])?;
        let other_effects = alone.1.iter().filter(|e| e.performed()).count();
        let other_changes_state = baseline != alone.0;
        let (attempts, run) = self.sequence(&[&event, &other])?;
        let (state, effects, points) = run;
        let expected = reference.effects.iter().filter(|e| e.performed()).count() + other_effects;
        let seen = effects.iter().filter(|e| e.performed()).count();
        let dropped_effects = other_effects > 0 && seen < expected;
        let dropped_state = other_changes_state && state == reference.state;
        let reason = if !attempts.iter().all(acknowledged) {
            Some("one of the two events was not acknowledged".to_string())
        } else if dropped_effects || dropped_state {
            Some(format!(
                "the second event ({}) was not processed after the first ({}): {} — the dedupe key is probably built from the object id, not the event id",
                other.id,
                event.id,
                if dropped_effects {
                    format!("{seen} effects performed, {expected} expected")
                } else {
                    "the state is what the first event alone leaves".to_string()
                }
            ))
        } else {
            None
        };
        Ok(Outcome {
            scenario: scenario.name(),
            verdict: if reason.is_some() { Verdict::Fail } else { Verdict::Pass },
            reason: reason.unwrap_or_else(|| "both events were processed".into()),
            attempts,
            state_equal: None,
            state,
            expected_effects: expected,
            seen_effects: seen,
            effects,
            points,
        })
    }
}

/// A secret of the same shape that the app does not know, for the negative control.
pub fn wrong_secret(provider: Provider, secret: &str) -> String {
    match provider {
        Provider::StandardWebhooks | Provider::Svix => "whsec_cmV0cnlzYWZlLXZlcmlmeS13cm9uZy1rZXk=".to_string(),
        _ => format!("{secret}-not-the-app-secret"),
    }
}
