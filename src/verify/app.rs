//! The app under test: started from the user's command in its own process group (so a
//! `npm run start` wrapper and its node child die together), with the preload in
//! `NODE_OPTIONS` and the fault to inject in the environment; and the preload's trace.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A fault the preload injects at the `hit`-th time the app reaches `point`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// `kill` (SIGKILL the process), `reset` (drop the connection instead of responding),
    /// `error` (fail the database query with a transient error).
    pub action: &'static str,
    pub point: String,
    pub hit: u32,
}

pub struct AppConfig {
    pub start: String,
    pub cwd: PathBuf,
    /// Where the app listens; `None` for a queue worker, which is ready once the preload runs.
    pub addr: Option<SocketAddr>,
    pub env: Vec<(String, String)>,
    pub preload: Option<String>,
    pub start_timeout: Duration,
    pub log: PathBuf,
}

pub struct App {
    child: Child,
    addr: Option<SocketAddr>,
    stopped: bool,
    pub trace: PathBuf,
}

impl App {
    /// Starts the app and waits until it accepts connections on the target port.
    pub fn start(config: &AppConfig, fault: Option<&Fault>, trace: &Path) -> Result<App, String> {
        if let Some(addr) = config.addr.filter(|a| super::deliver::port_open(*a)) {
            return Err(format!(
                "something already listens on {addr} before the app was started: stop it, or verify would test that instead"
            ));
        }
        let _ = std::fs::remove_file(trace);
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&config.log)
            .map_err(|e| format!("{}: cannot open the app log: {e}", config.log.display()))?;
        let log_err = log.try_clone().map_err(|e| format!("{}: {e}", config.log.display()))?;
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(&config.start)
            .current_dir(&config.cwd)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .process_group(0)
            .env("RETRYSAFE_VERIFY_TRACE", trace);
        if let Some(addr) = config.addr {
            command.env("PORT", addr.port().to_string());
        }
        for (k, v) in &config.env {
            command.env(k, v);
        }
        if let Some(preload) = &config.preload {
            let existing = std::env::var("NODE_OPTIONS").unwrap_or_default();
            command.env("NODE_OPTIONS", format!("{existing} --require {preload}").trim());
        }
        if let Some(f) = fault {
            command
                .env("RETRYSAFE_VERIFY_FAULT_ACTION", f.action)
                .env("RETRYSAFE_VERIFY_FAULT_POINT", &f.point)
                .env("RETRYSAFE_VERIFY_FAULT_HIT", f.hit.to_string());
        }
        let child = command.spawn().map_err(|e| format!("cannot run `{}`: {e}", config.start))?;
        let mut app = App { child, addr: config.addr, stopped: false, trace: trace.to_path_buf() };
        let deadline = Instant::now() + config.start_timeout;
        let what = config.addr.map_or("start its worker".to_string(), |a| format!("listen on {a}"));
        loop {
            let ready = match config.addr {
                Some(addr) => super::deliver::port_open(addr),
                // A worker has no port: it is up once the preload has run in it (jobs added
                // before it connects wait in the queue).
                None => config.preload.is_none() || Trace::read(trace).present(),
            };
            if ready {
                return Ok(app);
            }
            if let Ok(Some(status)) = app.child.try_wait() {
                app.stop();
                return Err(format!(
                    "`{}` exited ({status}) before it could {what}; its output is in {}",
                    config.start,
                    config.log.display()
                ));
            }
            if Instant::now() > deadline {
                app.stop();
                return Err(format!(
                    "`{}` did not {what} within {}s; its output is in {}",
                    config.start,
                    config.start_timeout.as_secs(),
                    config.log.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the whole process group and waits until the port is free again.
    pub fn stop(&mut self) {
        if std::mem::replace(&mut self.stopped, true) {
            return;
        }
        let pgid = self.child.id() as i32;
        // SAFETY: signalling the process group this App created; a group that is already gone
        // only makes kill return ESRCH.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
        // The group's other processes (node under `sh -c` or `npm run`) release the port a
        // moment after the signal; the next start must not mistake it for a stray server.
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.addr.is_some_and(super::deliver::port_open) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The preload's trace so far.
    pub fn trace(&self) -> Trace {
        Trace::read(&self.trace)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the preload wrote: request starts and ends, points reached, faults injected.
#[derive(Default, Debug)]
pub struct Trace {
    pub events: Vec<serde_json::Value>,
}

impl Trace {
    pub fn read(path: &Path) -> Trace {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        Trace { events: text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect() }
    }

    pub fn present(&self) -> bool {
        self.events.iter().any(|e| e["ev"] == "start")
    }

    /// The fault the preload injected, if it did.
    pub fn fault(&self) -> Option<&serde_json::Value> {
        self.events.iter().find(|e| e["ev"] == "fault")
    }

    pub fn faults(&self) -> usize {
        self.events.iter().filter(|e| e["ev"] == "fault").count()
    }

    pub fn hits(&self, point: &str) -> usize {
        self.events.iter().filter(|e| e["ev"] == "hit" && e["point"] == point).count()
    }

    /// The points reached, in order, without repeats.
    pub fn points(&self) -> Vec<String> {
        let mut seen = Vec::new();
        for e in &self.events {
            if e["ev"] == "hit" {
                if let Some(p) = e["point"].as_str() {
                    if !seen.iter().any(|s: &String| s == p) {
                        seen.push(p.to_string());
                    }
                }
            }
        }
        seen
    }

    /// The most requests the app worked on at the same time; `None` without a preload trace.
    /// An HTTP request is worked on from its body's arrival (its start, when the handler
    /// never read the body) until its answer (its connection's close, when never answered);
    /// a queue job from its fetch until it finished.
    pub fn max_in_flight(&self) -> Option<usize> {
        if !self.present() {
            return None;
        }
        // A queue job's finish carries its id, not its number: jobs are counted, not keyed.
        let is_job = |e: &serde_json::Value| e.get("job").is_some();
        let key = |e: &serde_json::Value| (e["pid"].as_u64(), e["n"].as_u64());
        let with = |ev: &str| self.events.iter().filter(|e| e["ev"] == ev).map(key).collect::<HashSet<_>>();
        let (bodied, answered) = (with("req-body"), with("req-answer"));
        let (mut jobs, mut open, mut closed, mut max) = (0usize, HashSet::new(), HashSet::new(), 0usize);
        for e in &self.events {
            let (ev, k) = (e["ev"].as_str().unwrap_or_default(), key(e));
            match ev {
                "req-start" if is_job(e) => jobs += 1,
                "req-end" if is_job(e) => jobs = jobs.saturating_sub(1),
                "req-body" | "req-start" if !closed.contains(&k) && (ev == "req-body" || !bodied.contains(&k)) => {
                    open.insert(k);
                }
                "req-answer" | "req-end" if ev == "req-answer" || !answered.contains(&k) => {
                    open.remove(&k);
                    closed.insert(k);
                }
                _ => {}
            }
            max = max.max(jobs + open.len());
        }
        Some(max)
    }
}

#[cfg(test)]
mod tests {
    use super::Trace;

    fn trace(lines: &[&str]) -> Trace {
        let start = r#"{"ev":"start","pid":1}"#;
        Trace {
            events: std::iter::once(start)
                .chain(lines.iter().copied())
                .map(|l| serde_json::from_str(l).unwrap())
                .collect(),
        }
    }

    #[test]
    fn requests_answered_in_the_tick_their_body_completed_never_overlap() {
        let mut lines = Vec::new();
        let ev = |ev: &str, n: usize| format!(r#"{{"ev":"{ev}","n":{n},"pid":1}}"#);
        for n in 1..=4 {
            lines.push(ev("req-start", n));
        }
        for n in 1..=4 {
            lines.extend([ev("req-body", n), ev("req-answer", n)]);
        }
        for n in 1..=4 {
            lines.push(ev("req-end", n));
        }
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        assert_eq!(trace(&refs).max_in_flight(), Some(1));
    }

    #[test]
    fn a_request_awaiting_while_another_body_arrives_overlaps() {
        let t = trace(&[
            r#"{"ev":"req-start","n":1,"pid":1}"#,
            r#"{"ev":"req-body","n":1,"pid":1}"#,
            r#"{"ev":"req-start","n":2,"pid":1}"#,
            r#"{"ev":"req-body","n":2,"pid":1}"#,
            r#"{"ev":"req-answer","n":1,"pid":1}"#,
            r#"{"ev":"req-answer","n":2,"pid":1}"#,
        ]);
        assert_eq!(t.max_in_flight(), Some(2));
    }

    #[test]
    fn an_unread_body_counts_from_the_start_and_a_close_ends_an_unanswered_request() {
        let t = trace(&[
            r#"{"ev":"req-start","n":1,"pid":1}"#,
            r#"{"ev":"req-start","n":2,"pid":1}"#,
            r#"{"ev":"req-end","n":1,"pid":1}"#,
            r#"{"ev":"req-answer","n":2,"pid":1}"#,
        ]);
        assert_eq!(t.max_in_flight(), Some(2));
        let answered_before_its_body = trace(&[
            r#"{"ev":"req-start","n":1,"pid":1}"#,
            r#"{"ev":"req-answer","n":1,"pid":1}"#,
            r#"{"ev":"req-body","n":1,"pid":1}"#,
            r#"{"ev":"req-start","n":2,"pid":1}"#,
            r#"{"ev":"req-answer","n":2,"pid":1}"#,
        ]);
        assert_eq!(answered_before_its_body.max_in_flight(), Some(1));
    }

    #[test]
    fn queue_jobs_are_counted_from_fetch_to_finish() {
        let t = trace(&[
            r#"{"ev":"req-start","n":1,"job":"1","pid":1}"#,
            r#"{"ev":"req-start","n":2,"job":"2","pid":1}"#,
            r#"{"ev":"req-end","job":"1","pid":1}"#,
            r#"{"ev":"req-end","job":"2","pid":1}"#,
        ]);
        assert_eq!(t.max_in_flight(), Some(2));
        assert_eq!(trace(&[]).max_in_flight(), Some(0));
        assert_eq!(Trace { events: vec![] }.max_in_flight(), None);
    }
}
