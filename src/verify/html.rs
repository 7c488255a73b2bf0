//! `--report report.html`: one self-contained page (inline CSS and script, no network, no
//! external assets). Per scenario, failing ones first: the timeline of deliveries (status,
//! fault, restart), the provider-side calls with their keys, and the state against the
//! reference.

use super::report::{Report, statuses, xml_escape as esc};
use super::runner::{Outcome, Verdict};

const STYLE: &str = "
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:18px 28px}
header h1{font-size:20px;margin:0 0 4px}
header .sub{opacity:.8}
.counts span{display:inline-block;margin:10px 10px 0 0;padding:3px 10px;border-radius:12px;font-weight:600}
main{padding:18px 28px;max-width:1200px}
.first{background:#fff3f2;border:1px solid #f2b8b5;border-radius:8px;padding:10px 14px;margin-bottom:16px}
.card{background:#fff;border:1px solid #dde1e8;border-radius:8px;margin:0 0 14px;padding:12px 16px}
.card h2{font-size:16px;margin:0;display:flex;gap:10px;align-items:center}
.badge{font-size:12px;padding:2px 9px;border-radius:10px;color:#fff;text-transform:uppercase;letter-spacing:.03em}
.fail{background:#c62828}.pass{background:#2e7d32}.inconclusive{background:#b26a00}.skipped{background:#78808f}
.reason{margin:6px 0 10px;color:#38404f}
.timeline{display:flex;flex-wrap:wrap;align-items:center;gap:6px;margin:6px 0 10px}
.att{border:1px solid #c9ced8;border-radius:6px;padding:4px 8px;background:#fafbfc;font-size:12.5px}
.att b{font-size:13.5px}
.att.ok{border-color:#8bc48f;background:#f1f8f1}.att.bad{border-color:#e59a96;background:#fdf1f0}
.restart{font-size:12px;color:#6a5acd;font-weight:600}
.arrow{color:#9aa1ad}
table{border-collapse:collapse;font-size:12.5px;margin:4px 0 10px}
td,th{border-bottom:1px solid #eceef2;padding:3px 10px 3px 0;text-align:left;vertical-align:top}
th{color:#5b6372;font-weight:600}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px}
pre{margin:0;padding:6px 8px;background:#f6f7f9;border-radius:6px;white-space:pre-wrap}
.diff .del{background:#fde8e7}.diff .add{background:#e6f4e6}
.new{color:#c62828;font-weight:600}.replay{color:#2e7d32}
.controls{margin-bottom:12px}
.hidden{display:none}
";

const SCRIPT: &str = "
document.getElementById('only-failing').addEventListener('change', function (e) {
  var cards = document.querySelectorAll('.card');
  for (var i = 0; i < cards.length; i++) {
    var failing = cards[i].getAttribute('data-verdict') === 'fail';
    cards[i].classList.toggle('hidden', e.target.checked && !failing);
  }
});
";

fn verdict_class(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Fail => "fail",
        Verdict::Inconclusive => "inconclusive",
        Verdict::Skipped => "skipped",
    }
}

fn timeline(o: &Outcome) -> String {
    let mut out = String::from("<div class=\"timeline\">");
    for (i, a) in o.attempts.iter().enumerate() {
        if a.restarted {
            out.push_str("<span class=\"restart\">⟳ app restarted</span>");
        }
        if i > 0 {
            out.push_str("<span class=\"arrow\">→</span>");
        }
        let ok = a.status.is_some_and(|s| (200..300).contains(&s));
        let status = match (a.status, &a.fault) {
            (_, Some(f)) if f.starts_with("kill") => "killed".to_string(),
            (Some(s), _) => s.to_string(),
            (None, _) => a.error.clone().unwrap_or_else(|| "no response".into()),
        };
        let mut detail = format!("#{} {}", i + 1, esc(&a.event));
        if a.concurrent {
            detail.push_str(" · concurrent");
        }
        if a.signature != "valid" {
            detail.push_str(" · wrong signature");
        }
        if let Some(f) = &a.fault {
            detail.push_str(&format!(" · {}", esc(f)));
        }
        out.push_str(&format!(
            "<span class=\"att {}\" title=\"sent at {} ms\"><b>{}</b> <span>{detail}</span></span>",
            if ok { "ok" } else { "bad" },
            a.at_ms,
            esc(&status)
        ));
    }
    out.push_str("</div>");
    out
}

fn effects(o: &Outcome) -> String {
    if o.effects.is_empty() {
        return "<div>No provider API calls.</div>".into();
    }
    let mut out = String::from("<table><tr><th>call</th><th>idempotency key</th><th>outcome</th><th>status</th></tr>");
    for e in &o.effects {
        out.push_str(&format!(
            "<tr><td><code>{}</code></td><td><code>{}</code></td><td class=\"{}\">{}</td><td>{}</td></tr>",
            esc(&e.signature()),
            esc(e.key.as_deref().unwrap_or("— none —")),
            if e.performed() { "new" } else { "replay" },
            esc(&e.outcome),
            e.status
        ));
    }
    out.push_str("</table>");
    out
}

fn state_diff(reference: Option<&str>, o: &Outcome) -> String {
    let (Some(want), Some(got)) = (reference, o.state.as_deref()) else {
        return String::new();
    };
    if o.scenario == "single" {
        return format!(
            "<div><b>State (the reference)</b></div><pre>{}</pre>",
            esc(if want.is_empty() { "(empty)" } else { want })
        );
    }
    if want == got {
        return "<div><b>State:</b> equal to the reference</div>".into();
    }
    let diff = similar::TextDiff::from_lines(want, got);
    let mut out = String::from(
        "<div><b>State against the reference</b> (− reference, + this scenario)</div><pre class=\"diff\">",
    );
    for change in diff.iter_all_changes() {
        let (class, sign) = match change.tag() {
            similar::ChangeTag::Delete => ("del", "−"),
            similar::ChangeTag::Insert => ("add", "+"),
            similar::ChangeTag::Equal => ("", " "),
        };
        out.push_str(&format!("<div class=\"{class}\">{sign} {}</div>", esc(change.value().trim_end_matches('\n'))));
    }
    out.push_str("</pre>");
    out
}

pub fn render(r: &Report) -> String {
    let reference = r.outcomes.iter().find(|o| o.scenario == "single").and_then(|o| o.state.as_deref());
    let mut ordered: Vec<&Outcome> = r.outcomes.iter().collect();
    let rank = |v: Verdict| match v {
        Verdict::Fail => 0,
        Verdict::Inconclusive => 1,
        Verdict::Pass => 2,
        Verdict::Skipped => 3,
    };
    ordered.sort_by_key(|o| rank(o.verdict));
    let mut body = String::new();
    if let Some(o) = r.first_failure() {
        body.push_str(&format!(
            "<div class=\"first\"><b>First divergence:</b> {} — {}</div>",
            esc(&o.scenario),
            esc(&o.reason)
        ));
    }
    body.push_str("<div class=\"controls\"><label><input type=\"checkbox\" id=\"only-failing\"> only failing scenarios</label></div>");
    for o in ordered {
        body.push_str(&format!(
            "<section class=\"card\" data-verdict=\"{v}\"><h2><span class=\"badge {v}\">{v}</span>{name}<small style=\"font-weight:400;color:#5b6372\">deliveries {st} · effects expected/seen {e}/{s}</small></h2><div class=\"reason\">{reason}</div>{tl}{fx}{diff}</section>",
            v = verdict_class(o.verdict),
            name = esc(&o.scenario),
            st = esc(&statuses(o)),
            e = o.expected_effects,
            s = o.seen_effects,
            reason = esc(&o.reason),
            tl = timeline(o),
            fx = if o.verdict == Verdict::Skipped { String::new() } else { effects(o) },
            diff = state_diff(reference, o),
        ));
    }
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>retrysafe verify {target}</title><style>{STYLE}</style></head><body><header><h1>retrysafe verify {target}</h1><div class=\"sub\">provider {provider} · event <code>{event}</code></div><div class=\"counts\"><span class=\"fail\">{f} failed</span><span class=\"inconclusive\">{i} inconclusive</span><span class=\"pass\">{p} passed</span><span class=\"skipped\">{k} skipped</span></div></header><main>{body}</main><script>{SCRIPT}</script></body></html>\n",
        target = esc(&r.target),
        provider = esc(&r.provider),
        event = esc(&r.event_id),
        f = r.count(Verdict::Fail),
        i = r.count(Verdict::Inconclusive),
        p = r.count(Verdict::Pass),
        k = r.count(Verdict::Skipped),
    )
}
