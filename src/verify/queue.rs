//! Queue consumers: `retrysafe verify --queue bullmq:NAME --event job.json`. Jobs are delivered
//! through the app's own BullMQ client (the guard package's `verify-queue` producer, run in the
//! app's directory), and redelivered the way BullMQ redelivers: a completed job moved back to
//! wait, and a job whose worker died (or lost its lock while running) moved back to wait by
//! BullMQ's own stalled check.

use super::app::{App, Fault};
use super::runner::{Attempt, Event, Outcome, Reference, Runner, Verdict};
use super::scenario::Scenario;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// `--queue bullmq:NAME`.
#[derive(Clone, Debug)]
pub struct QueueTarget {
    pub name: String,
    pub redis_url: String,
    pub prefix: String,
}

/// Parses `--queue`: `bullmq:NAME` is delivered; `sqs:` is refused with the reason.
pub fn parse_queue(spec: &str, redis_url: Option<String>, prefix: &str) -> Result<QueueTarget, String> {
    let (kind, name) = spec.split_once(':').ok_or(format!("--queue `{spec}`: give KIND:NAME (bullmq:invoices)"))?;
    match kind {
        "bullmq" if !name.trim().is_empty() && !name.contains(':') => {
            let redis_url = redis_url
                .filter(|u| !u.is_empty())
                .ok_or("--queue bullmq:NAME needs --redis-url or $REDIS_URL (the Redis the worker uses)")?;
            Ok(QueueTarget { name: name.trim().to_string(), redis_url, prefix: prefix.to_string() })
        }
        "bullmq" => Err(format!("--queue `{spec}`: the queue name must be non-empty and hold no `:`")),
        "sqs" => Err(format!(
            "--queue `{spec}`: SQS is not supported yet (it needs a local SQS endpoint, and none is configured); use bullmq:NAME"
        )),
        other => Err(format!("--queue `{spec}`: unknown queue kind `{other}` (known: bullmq)")),
    }
}

/// The job a fixture stands for: `{ "name", "data", "opts", "id" }`, or, without `data`, the
/// whole file as the job's data. Its id is `opts.jobId`, else `id`, else one named after the
/// fixture's role, so every attempt of one fixture is the same job.
pub fn job_identity(path: &std::path::Path, body: &[u8], label: &str) -> Result<(String, String), String> {
    let json: serde_json::Value =
        serde_json::from_slice(body).map_err(|e| format!("{}: the job fixture is not JSON: {e}", path.display()))?;
    if !json.is_object() {
        return Err(format!("{}: the job fixture must be a JSON object", path.display()));
    }
    let id = json["opts"]["jobId"]
        .as_str()
        .or_else(|| json["id"].as_str())
        .map(str::to_string)
        .unwrap_or_else(|| format!("retrysafe-verify-{label}"));
    if id.contains(':') {
        return Err(format!("{}: job id `{id}`: BullMQ job ids cannot contain `:`", path.display()));
    }
    let name = json["name"].as_str().unwrap_or("").to_string();
    Ok((id, name))
}

/// The job to add: the fixture's name, data and options, with the job id fixed and, when the
/// fixture sets no `attempts`, BullMQ retries as a provider would (`max_attempts`, 1 s apart).
fn job_spec(event: &Event, queue: &str, max_attempts: usize) -> serde_json::Value {
    let json: serde_json::Value = serde_json::from_slice(&event.body).unwrap_or_default();
    let data = if json.get("data").is_some() { json["data"].clone() } else { json.clone() };
    let mut opts = json.get("opts").cloned().filter(|o| o.is_object()).unwrap_or_else(|| serde_json::json!({}));
    opts["jobId"] = serde_json::json!(event.id);
    if opts.get("attempts").is_none() {
        opts["attempts"] = serde_json::json!(max_attempts);
        opts["backoff"] = serde_json::json!({ "type": "fixed", "delay": 1000 });
    }
    let name = if event.kind.is_empty() { queue.to_string() } else { event.kind.clone() };
    serde_json::json!({ "name": name, "data": data, "opts": opts })
}

/// The producer process: one JSON request a line in, one JSON answer a line out.
pub struct Producer {
    child: Child,
    stdin: ChildStdin,
    answers: Receiver<String>,
}

impl Producer {
    pub fn start(queue: &QueueTarget, cwd: &std::path::Path, log: &std::path::Path) -> Result<Producer, String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("{}: cannot open the log: {e}", log.display()))?;
        let mut child = Command::new("node")
            .args(["-e", "require('@retrysafe/guard/verify-queue')"])
            .current_dir(cwd)
            .env("RETRYSAFE_VERIFY_QUEUE", &queue.name)
            .env("RETRYSAFE_VERIFY_REDIS_URL", &queue.redis_url)
            .env("RETRYSAFE_VERIFY_QUEUE_PREFIX", &queue.prefix)
            .env_remove("NODE_OPTIONS")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot run node for the queue producer: {e}"))?;
        let stdin = child.stdin.take().ok_or("the queue producer has no stdin")?;
        let stdout = child.stdout.take().ok_or("the queue producer has no stdout")?;
        let (send, answers) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut producer = Producer { child, stdin, answers };
        producer.call(serde_json::json!({ "op": "state", "id": "retrysafe-verify-ping" })).map_err(|e| {
            format!("the queue producer did not start ({e}): is @retrysafe/guard (with bullmq) installed in the app?")
        })?;
        Ok(producer)
    }

    pub fn call(&mut self, request: serde_json::Value) -> Result<serde_json::Value, String> {
        writeln!(self.stdin, "{request}").map_err(|e| format!("the queue producer exited: {e}"))?;
        let line = match self.answers.recv_timeout(Duration::from_secs(30)) {
            Ok(l) => l,
            Err(RecvTimeoutError::Timeout) => return Err("the queue producer did not answer within 30 s".into()),
            Err(RecvTimeoutError::Disconnected) => return Err("the queue producer exited".into()),
        };
        let answer: serde_json::Value =
            serde_json::from_str(&line).map_err(|_| format!("the queue producer answered `{line}`"))?;
        match answer["error"].as_str() {
            Some(e) => Err(format!("queue producer: {e}")),
            None => Ok(answer),
        }
    }

    fn state(&mut self, id: &str) -> Result<String, String> {
        Ok(self.call(serde_json::json!({ "op": "state", "id": id }))?["state"]
            .as_str()
            .unwrap_or("unknown")
            .to_string())
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs fetched and not yet finished, by the preload's trace.
fn in_flight(trace: &super::app::Trace) -> usize {
    let count = |ev: &str| trace.events.iter().filter(|e| e["ev"] == ev).count();
    count("req-start").saturating_sub(count("req-end"))
}

fn finished(state: &str) -> bool {
    state == "completed" || state == "failed"
}

impl Runner<'_> {
    fn producer(&self) -> Result<std::cell::RefMut<'_, Producer>, String> {
        let cell = self.producer.as_ref().ok_or("not a queue target")?;
        cell.try_borrow_mut().map_err(|_| "the queue producer is busy".to_string())
    }

    pub(super) fn queue_reset(&self) -> Result<(), String> {
        self.producer()?.call(serde_json::json!({ "op": "reset" }))?;
        Ok(())
    }

    fn queue_attempt(&self, event: &Event, state: &str, restarted: bool, concurrent: bool) -> Attempt {
        Attempt {
            event: event.label.to_string(),
            status: None,
            job: Some(state.to_string()),
            error: None,
            fault: None,
            restarted,
            signature: "none",
            concurrent,
            at_ms: self.epoch.elapsed().as_millis() as u64,
        }
    }

    /// Waits until the job is completed or failed (BullMQ's own retries included), or the
    /// app was killed at a crash point; returns the attempt.
    fn wait_job(&self, app: &App, event: &Event, restarted: bool) -> Result<Attempt, String> {
        let faults_before = app.trace().faults();
        // BullMQ's own retries (and their backoff) happen within this one wait.
        let patience = self.target.timeout * self.target.max_attempts as u32;
        let deadline = Instant::now() + patience;
        loop {
            let state = self.producer()?.state(&event.id)?;
            let trace = app.trace();
            if trace.faults() > faults_before && trace.fault().is_some_and(|f| f["action"] == "kill") {
                let mut a = self.queue_attempt(event, "killed", restarted, false);
                a.fault = super::runner::describe_fault(&trace);
                return Ok(a);
            }
            if finished(&state) {
                self.drain(app);
                let trace = app.trace();
                let mut a = self.queue_attempt(event, &state, restarted, false);
                if trace.faults() > faults_before {
                    a.fault = super::runner::describe_fault(&trace);
                }
                return Ok(a);
            }
            if Instant::now() > deadline {
                let mut a = self.queue_attempt(event, &state, restarted, false);
                a.error = Some(format!("the job was still `{state}` after {}s", patience.as_secs()));
                return Ok(a);
            }
            std::thread::sleep(Duration::from_millis(40));
        }
    }

    /// Adds the fixture's job and waits for it.
    pub(super) fn queue_deliver(&self, app: &App, event: &Event) -> Result<Attempt, String> {
        let job = job_spec(event, &self.queue_name(), self.target.max_attempts);
        self.producer()?.call(serde_json::json!({ "op": "add", "job": job }))?;
        self.wait_job(app, event, false)
    }

    fn queue_name(&self) -> String {
        self.target.queue.as_ref().map(|q| q.name.clone()).unwrap_or_default()
    }

    pub(super) fn queue_run(&mut self, scenario: &Scenario, reference: &Reference) -> Result<Outcome, String> {
        match scenario {
            Scenario::Retry => self.queue_retry(scenario, reference),
            Scenario::Concurrent(n) => self.queue_concurrent(scenario, reference, *n),
            Scenario::Crash { point, hit } => self.queue_crash(scenario, reference, point, *hit),
            Scenario::LostResponse => Ok(Self::skipped(
                scenario,
                "a queue has no response to lose: crash:before-ack is its equivalent (the work done, the ack never recorded)",
            )),
            Scenario::BadSignature => Ok(Self::skipped(scenario, "queue jobs carry no signature")),
            _ => Err("not a queue scenario".into()),
        }
    }

    /// The job again after it completed: BullMQ moves the completed job back to wait.
    fn queue_retry(&mut self, scenario: &Scenario, reference: &Reference) -> Result<Outcome, String> {
        self.reset()?;
        let mut app = self.start(None)?;
        let event = self.target.event.clone();
        let mut attempts = vec![self.queue_deliver(&app, &event)?];
        if attempts[0].job.as_deref() == Some("completed") {
            self.producer()?.call(serde_json::json!({ "op": "retry", "id": event.id }))?;
            attempts.push(self.wait_job(&app, &event, false)?);
        }
        let run = self.finish(&mut app)?;
        Ok(self.outcome(scenario, reference, attempts, run))
    }

    /// Killed at a point, restarted; BullMQ's stalled check in the restarted worker moves the
    /// job back to wait (the dead worker's lock expiring is fast-forwarded), and it runs again.
    fn queue_crash(
        &mut self,
        scenario: &Scenario,
        reference: &Reference,
        point: &str,
        hit: u32,
    ) -> Result<Outcome, String> {
        self.reset()?;
        let fault = Fault { action: "kill", point: point.to_string(), hit };
        let mut app = self.start(Some(&fault))?;
        let event = self.target.event.clone();
        let mut first = self.queue_deliver(&app, &event)?;
        if first.job.as_deref() != Some("killed") {
            // A kill after the ack lands just after BullMQ records the job done.
            first = self.await_kill(&app, first);
        }
        let mut points = app.trace().points();
        let killed = first.job.as_deref() == Some("killed");
        let mut attempts = vec![first];
        if !killed {
            app.stop();
            let mut out = Self::skipped(
                scenario,
                &format!(
                    "{point} was never reached (the reference reached: {})",
                    if reference.points.is_empty() { "none".to_string() } else { reference.points.join(", ") }
                ),
            );
            out.verdict = Verdict::Inconclusive;
            out.attempts = attempts;
            out.points = points;
            return Ok(out);
        }
        app.stop();
        self.producer()?.call(serde_json::json!({ "op": "stall", "id": event.id, "check": false }))?;
        app = self.start(None)?;
        attempts.push(self.wait_job(&app, &event, true)?);
        let mut run = self.finish(&mut app)?;
        for p in std::mem::take(&mut run.2) {
            if !points.contains(&p) {
                points.push(p);
            }
        }
        run.2 = points;
        Ok(self.outcome(scenario, reference, attempts, run))
    }

    /// The same job run twice at once: while the first run is held at its claim, its lock is
    /// lost and BullMQ's stalled check gives the job out again; the preload releases both runs
    /// together. BullMQ hands one job out at most `maxStalledCount` + 1 times (2 by default;
    /// a third would fail the job as stalled too often), so N is capped at 2 runs.
    fn queue_concurrent(&mut self, scenario: &Scenario, reference: &Reference, n: usize) -> Result<Outcome, String> {
        self.reset()?;
        let runs = n.min(2);
        let hold = Fault { action: "hold", point: "job-run".into(), hit: runs as u32 };
        let mut app = self.start(Some(&hold))?;
        let event = self.target.event.clone();
        let job = job_spec(&event, &self.queue_name(), self.target.max_attempts);
        self.producer()?.call(serde_json::json!({ "op": "add", "job": job }))?;
        for fetched in 1..runs {
            if !self.wait_fetches(&app, fetched, Duration::from_secs(10)) {
                break;
            }
            self.producer()?.call(serde_json::json!({ "op": "stall", "id": event.id, "check": true }))?;
        }
        let mut attempts = vec![self.wait_job(&app, &event, false)?];
        attempts[0].concurrent = true;
        let trace = app.trace();
        let run = self.finish(&mut app)?;
        let mut out = self.outcome(scenario, reference, attempts, run);
        let max = trace.max_in_flight().unwrap_or(0);
        if out.verdict == Verdict::Pass && max < 2 {
            out.verdict = Verdict::Inconclusive;
            out.reason =
                "the job never ran twice at once (BullMQ did not give it out again after its lock was lost)".into();
        } else if out.verdict == Verdict::Pass {
            out.reason = format!(
                "the job ran {max}× at once after its lock was lost (BullMQ gives a job out at most twice at once); processed once"
            );
        }
        Ok(out)
    }

    /// Waits (a few seconds at most) until no run of a job is still in the worker: a run whose
    /// lock was lost keeps working after the job is recorded done by another run.
    fn drain(&self, app: &App) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while app.trace().max_in_flight().is_some_and(|_| in_flight(&app.trace()) > 0) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The attempt, marked killed if the preload kills the app within a moment.
    fn await_kill(&self, app: &App, mut attempt: Attempt) -> Attempt {
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            let trace = app.trace();
            if trace.fault().is_some_and(|f| f["action"] == "kill") {
                attempt.job = Some("killed".into());
                attempt.fault = super::runner::describe_fault(&trace);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        attempt
    }

    /// Whether the worker has fetched the job `count` times within `wait`.
    fn wait_fetches(&self, app: &App, count: usize, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if app.trace().events.iter().filter(|e| e["ev"] == "req-start").count() >= count {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }
}
