//! The scenarios `verify` runs, each compared with the single-delivery reference.

/// The crash points of seed 2's boundaries the preload knows how to reach in an HTTP handler.
pub const CRASH_POINTS: &[&str] =
    &["before-claim", "after-claim", "after-effect", "before-commit", "after-commit", "before-response"];

/// The same in a queue worker: the ack (BullMQ recording the job completed) instead of the response.
pub const QUEUE_CRASH_POINTS: &[&str] =
    &["before-claim", "after-claim", "after-effect", "before-commit", "after-commit", "before-ack", "after-ack"];

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scenario {
    Single,
    Retry,
    Concurrent(usize),
    /// `point` is a full point name (`after-effect:api.stripe.com`); `hit` the n-th time it is reached.
    Crash {
        point: String,
        hit: u32,
    },
    /// `crash:*`: every crash point, with one `after-effect:<host>` per host the reference called.
    CrashAll,
    LostResponse,
    OutOfOrder,
    DistinctEvents,
    BadSignature,
    FaultEffect,
    FaultDb,
}

pub const HELP: &str = "\
SCENARIOS (--scenarios, comma-separated; default `all`):
  single              the reference run: one delivery; every other scenario is compared with it
  retry               the same event again after success (re-signed, same id, same bytes)
  concurrent:N        N identical deliveries released together behind a barrier (default 8);
                      inconclusive if the app did not handle them at the same time
  crash:POINT[@N]     SIGKILL the app the N-th time it reaches POINT, restart it, redeliver:
                      before-claim, after-claim, after-effect:HOST, before-commit,
                      after-commit, before-response (queues: before-ack, after-ack
                      instead); crash:* runs them all; inconclusive if never reached
  lost-response       the work completes, the connection is reset before the response; redeliver
  out-of-order        the --newer-event fixture first, then --event; compared with in-order
  distinct-events     --event then --other-event (another event about the same object):
                      both must be processed
  bad-signature       negative control: a wrong signature must get 4xx and change nothing
  fault:effect        the first provider API call answers 503; the event must end processed
                      exactly once (a 5xx and the provider's retry, or a retry inside the app)
  fault:db            the first database write fails; as fault:effect
  all                 every scenario above (those needing a second fixture only when given)

QUEUES (--queue bullmq:NAME --event job.json, the job as `{ \"name\", \"data\", \"opts\" }`):
  retry moves the completed job back to wait; crash:POINT kills the worker, restarts it, and
  BullMQ's own stalled check gives the job out again (its lock's expiry fast-forwarded);
  concurrent:N loses the running job's lock so BullMQ gives it out again while it runs (at
  most maxStalledCount + 1 = 2 runs at once); lost-response and bad-signature do not apply.";

fn parse_one(item: &str) -> Result<Vec<Scenario>, String> {
    let item = item.trim();
    Ok(vec![match item {
        "all" => return Ok(all(true, true)),
        "single" => Scenario::Single,
        "retry" => Scenario::Retry,
        "concurrent" => Scenario::Concurrent(8),
        "crash" | "crash:*" => Scenario::CrashAll,
        "lost-response" => Scenario::LostResponse,
        "out-of-order" => Scenario::OutOfOrder,
        "distinct-events" => Scenario::DistinctEvents,
        "bad-signature" => Scenario::BadSignature,
        "fault:effect" => Scenario::FaultEffect,
        "fault:db" => Scenario::FaultDb,
        _ => {
            if let Some(n) = item.strip_prefix("concurrent:") {
                match n.parse::<usize>() {
                    Ok(n) if (2..=256).contains(&n) => Scenario::Concurrent(n),
                    _ => return Err(format!("`{item}`: concurrent:N needs N from 2 to 256")),
                }
            } else if let Some(rest) = item.strip_prefix("crash:") {
                let (point, hit) = match rest.rsplit_once('@') {
                    Some((p, n)) => {
                        (p, n.parse::<u32>().ok().filter(|n| *n >= 1).ok_or(format!("`{item}`: @N needs N ≥ 1"))?)
                    }
                    None => (rest, 1),
                };
                let base = point.split(':').next().unwrap_or("");
                let known = CRASH_POINTS.contains(&base) || QUEUE_CRASH_POINTS.contains(&base);
                if !known || (base == "after-effect") != point.starts_with("after-effect:") {
                    return Err(format!(
                        "`{item}`: unknown crash point (known: before-claim, after-claim, after-effect:HOST, before-commit, after-commit, before-response, before-ack, after-ack, *)"
                    ));
                }
                Scenario::Crash { point: point.to_string(), hit }
            } else {
                return Err(format!("unknown scenario `{item}` (see `retrysafe verify --help`)"));
            }
        }
    }])
}

/// Every scenario; those needing a second fixture only when it is there.
pub fn all(have_newer: bool, have_other: bool) -> Vec<Scenario> {
    let mut v =
        vec![Scenario::Single, Scenario::Retry, Scenario::Concurrent(8), Scenario::CrashAll, Scenario::LostResponse];
    if have_newer {
        v.push(Scenario::OutOfOrder);
    }
    if have_other {
        v.push(Scenario::DistinctEvents);
    }
    v.extend([Scenario::BadSignature, Scenario::FaultEffect, Scenario::FaultDb]);
    v
}

/// Parses `--scenarios`; `single` always runs first, as the reference.
pub fn parse(list: &str, have_newer: bool, have_other: bool) -> Result<Vec<Scenario>, String> {
    let mut out = vec![Scenario::Single];
    for item in list.split(',').filter(|s| !s.trim().is_empty()) {
        let expanded = if item.trim() == "all" { all(have_newer, have_other) } else { parse_one(item)? };
        for s in expanded {
            if !out.contains(&s) {
                out.push(s);
            }
        }
    }
    Ok(out)
}

impl Scenario {
    pub fn name(&self) -> String {
        match self {
            Scenario::Single => "single".into(),
            Scenario::Retry => "retry".into(),
            Scenario::Concurrent(n) => format!("concurrent:{n}"),
            Scenario::Crash { point, hit } if *hit == 1 => format!("crash:{point}"),
            Scenario::Crash { point, hit } => format!("crash:{point}@{hit}"),
            Scenario::CrashAll => "crash:*".into(),
            Scenario::LostResponse => "lost-response".into(),
            Scenario::OutOfOrder => "out-of-order".into(),
            Scenario::DistinctEvents => "distinct-events".into(),
            Scenario::BadSignature => "bad-signature".into(),
            Scenario::FaultEffect => "fault:effect".into(),
            Scenario::FaultDb => "fault:db".into(),
        }
    }
}
