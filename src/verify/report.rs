//! The verify report: a text table, JSON and JUnit for CI.

use super::runner::{Outcome, Verdict};
use serde::Serialize;

#[derive(Serialize)]
pub struct Report {
    pub target: String,
    pub provider: String,
    pub event_id: String,
    pub outcomes: Vec<Outcome>,
}

impl Report {
    pub fn count(&self, v: Verdict) -> usize {
        self.outcomes.iter().filter(|o| o.verdict == v).count()
    }

    pub fn first_failure(&self) -> Option<&Outcome> {
        self.outcomes.iter().find(|o| o.verdict == Verdict::Fail)
    }

    pub fn summary(&self) -> String {
        format!(
            "{} passed, {} failed, {} inconclusive, {} skipped",
            self.count(Verdict::Pass),
            self.count(Verdict::Fail),
            self.count(Verdict::Inconclusive),
            self.count(Verdict::Skipped)
        )
    }
}

fn verdict_label(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Fail => "FAIL",
        Verdict::Inconclusive => "inconclusive",
        Verdict::Skipped => "skipped",
    }
}

/// `200 200 ×8 500 reset`: each attempt's status, runs of the same status collapsed.
pub fn statuses(o: &Outcome) -> String {
    let labels: Vec<String> = o
        .attempts
        .iter()
        .map(|a| match (a.status, &a.fault) {
            (_, Some(f)) if f.starts_with("kill") => "killed".to_string(),
            (None, _) if a.job.is_some() => a.job.clone().unwrap_or_default(),
            (None, Some(_)) => "dropped".to_string(),
            (Some(s), _) => s.to_string(),
            (None, None) => "no-response".to_string(),
        })
        .collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < labels.len() {
        let mut j = i;
        while j < labels.len() && labels[j] == labels[i] {
            j += 1;
        }
        out.push(if j - i > 2 { format!("{}×{}", labels[i], j - i) } else { labels[i..j].join(" ") });
        i = j;
    }
    out.join(" ")
}

fn state_label(o: &Outcome) -> &'static str {
    match (o.scenario.as_str(), o.state_equal) {
        ("single", Some(_)) => "reference",
        (_, Some(true)) => "equal",
        (_, Some(false)) => "differs",
        (_, None) => "-",
    }
}

pub fn text(r: &Report) -> String {
    let mut out = format!("retrysafe verify {} ({}, event {})\n\n", r.target, r.provider, r.event_id);
    let width = r.outcomes.iter().map(|o| o.scenario.len()).max().unwrap_or(8).max(8) + 2;
    out.push_str(&format!(
        "{:<width$}{:<14}{:<24}{:<11}{}\n",
        "scenario", "result", "deliveries", "state", "effects expected/seen"
    ));
    for o in &r.outcomes {
        let effects = if o.verdict == Verdict::Skipped {
            "-".to_string()
        } else {
            format!("{}/{}", o.expected_effects, o.seen_effects)
        };
        out.push_str(&format!(
            "{:<width$}{:<14}{:<24}{:<11}{}\n",
            o.scenario,
            verdict_label(o.verdict),
            statuses(o),
            state_label(o),
            effects
        ));
    }
    out.push('\n');
    for o in &r.outcomes {
        if matches!(o.verdict, Verdict::Inconclusive | Verdict::Skipped) {
            out.push_str(&format!("{} {}: {}\n", verdict_label(o.verdict), o.scenario, o.reason));
        }
    }
    match r.first_failure() {
        Some(o) => out.push_str(&format!("first divergence: {} — {}\n", o.scenario, o.reason)),
        None => out.push_str("no divergence from the reference\n"),
    }
    out.push_str(&r.summary());
    out.push('\n');
    out
}

pub fn json(r: &Report) -> String {
    let value = serde_json::json!({
        "target": r.target,
        "provider": r.provider,
        "event_id": r.event_id,
        "scenarios": r.outcomes,
        "first_divergence": r.first_failure().map(|o| format!("{} — {}", o.scenario, o.reason)),
        "summary": {
            "passed": r.count(Verdict::Pass),
            "failed": r.count(Verdict::Fail),
            "inconclusive": r.count(Verdict::Inconclusive),
            "skipped": r.count(Verdict::Skipped),
        },
    });
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

pub fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#39;")
}

pub fn junit(r: &Report) -> String {
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let skipped = r.count(Verdict::Inconclusive) + r.count(Verdict::Skipped);
    out.push_str(&format!(
        "<testsuites>\n  <testsuite name=\"retrysafe verify {}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{skipped}\">\n",
        xml_escape(&r.target),
        r.outcomes.len(),
        r.count(Verdict::Fail)
    ));
    for o in &r.outcomes {
        let name = xml_escape(&o.scenario);
        let class = xml_escape(&format!("verify.{}", r.target));
        let detail = xml_escape(&format!(
            "deliveries: {}; state: {}; effects expected/seen: {}/{}",
            statuses(o),
            state_label(o),
            o.expected_effects,
            o.seen_effects
        ));
        match o.verdict {
            Verdict::Pass => out.push_str(&format!("    <testcase name=\"{name}\" classname=\"{class}\"/>\n")),
            Verdict::Fail => out.push_str(&format!(
                "    <testcase name=\"{name}\" classname=\"{class}\">\n      <failure message=\"{}\">{detail}</failure>\n    </testcase>\n",
                xml_escape(&o.reason)
            )),
            Verdict::Inconclusive | Verdict::Skipped => out.push_str(&format!(
                "    <testcase name=\"{name}\" classname=\"{class}\">\n      <skipped message=\"{}: {}\"/>\n    </testcase>\n",
                verdict_label(o.verdict),
                xml_escape(&o.reason)
            )),
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}
