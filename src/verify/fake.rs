//! The recording fake of the providers' APIs. The preload reroutes the app's outbound calls to
//! known provider hosts here, so the ledger lives in the verify process and survives the app
//! being killed. Each provider's idempotency rule decides whether a call is a new effect or a
//! replay of an earlier one; APIs without a key count every POST.

use serde::Serialize;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Where a provider takes its idempotency key from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySource {
    /// A request header (Stripe and Resend `Idempotency-Key`, PayPal `PayPal-Request-Id`).
    Header(&'static str),
    /// A top-level field of the JSON body (Square `idempotency_key`).
    BodyField(&'static str),
    /// SQS FIFO `MessageDeduplicationId`, as a form parameter (query protocol) or JSON field.
    SqsDedup,
    /// Every POST is a new effect.
    None,
}

/// A known provider API: the name `--effects` accepts, the hosts it answers on, its key rule.
pub struct Api {
    pub name: &'static str,
    pub hosts: &'static [&'static str],
    pub key: KeySource,
}

pub const APIS: &[Api] = &[
    Api { name: "stripe", hosts: &["api.stripe.com"], key: KeySource::Header("idempotency-key") },
    Api { name: "resend", hosts: &["api.resend.com"], key: KeySource::Header("idempotency-key") },
    Api {
        name: "paypal",
        hosts: &["api-m.paypal.com", "api-m.sandbox.paypal.com", "api.paypal.com", "api.sandbox.paypal.com"],
        key: KeySource::Header("paypal-request-id"),
    },
    Api {
        name: "square",
        hosts: &["connect.squareup.com", "connect.squareupsandbox.com"],
        key: KeySource::BodyField("idempotency_key"),
    },
    Api { name: "sqs", hosts: &["sqs.*.amazonaws.com"], key: KeySource::SqsDedup },
    Api { name: "sendgrid", hosts: &["api.sendgrid.com"], key: KeySource::None },
    Api { name: "postmark", hosts: &["api.postmarkapp.com"], key: KeySource::None },
    Api { name: "twilio", hosts: &["api.twilio.com"], key: KeySource::None },
    Api { name: "mailgun", hosts: &["api.mailgun.net", "api.eu.mailgun.net"], key: KeySource::None },
    Api { name: "slack", hosts: &["slack.com", "hooks.slack.com"], key: KeySource::None },
    Api { name: "github", hosts: &["api.github.com"], key: KeySource::None },
    Api { name: "shopify", hosts: &["*.myshopify.com"], key: KeySource::None },
];

fn host_matches(pattern: &str, host: &str) -> bool {
    match pattern.split_once('*') {
        Some((prefix, suffix)) => {
            host.len() > prefix.len() + suffix.len() && host.starts_with(prefix) && host.ends_with(suffix)
        }
        None => pattern.eq_ignore_ascii_case(host),
    }
}

pub fn api_for_host(host: &str) -> Option<&'static Api> {
    APIS.iter().find(|a| a.hosts.iter().any(|p| host_matches(p, host)))
}

/// The host patterns the preload reroutes for `--effects` names (all known APIs when empty);
/// a name containing a dot is taken as a host of its own, with no idempotency key.
pub fn effect_hosts(names: &[String]) -> Result<Vec<String>, String> {
    if names.is_empty() || names.iter().any(|n| n == "all") {
        return Ok(APIS.iter().flat_map(|a| a.hosts.iter().map(|h| h.to_string())).collect());
    }
    let mut hosts = Vec::new();
    for name in names {
        if name.contains('.') {
            hosts.push(name.clone());
        } else if let Some(api) = APIS.iter().find(|a| a.name == name) {
            hosts.extend(api.hosts.iter().map(|h| h.to_string()));
        } else {
            let known: Vec<_> = APIS.iter().map(|a| a.name).collect();
            return Err(format!("unknown effect API `{name}` (known: {}; or give a host name)", known.join(", ")));
        }
    }
    Ok(hosts)
}

/// One call the app made to a provider API.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Effect {
    pub host: String,
    pub method: String,
    pub path: String,
    pub key: Option<String>,
    /// `new`: performed; `replay`: answered from an earlier call with the same key;
    /// `conflict`: same key, different request (rejected as the provider would);
    /// `read`: a GET/HEAD; `failed`: an injected transient fault (503), not performed.
    pub outcome: String,
    pub status: u16,
}

impl Effect {
    pub fn performed(&self) -> bool {
        self.outcome == "new"
    }
    /// How effects are matched between a scenario and the reference.
    pub fn signature(&self) -> String {
        let path = self.path.split('?').next().unwrap_or("");
        format!("{} {}{}", self.method, self.host, path)
    }
}

#[derive(Default)]
struct Ledger {
    effects: Vec<Effect>,
    /// (host, key) → (request fingerprint, response body) of the first call with that key.
    keyed: HashMap<(String, String), (Vec<u8>, String)>,
    fail_next: usize,
    counter: usize,
}

/// The fake's handle: its address and its ledger.
#[derive(Clone)]
pub struct Fake {
    pub url: String,
    ledger: Arc<Mutex<Ledger>>,
}

fn sqs_dedup_id(body: &[u8]) -> Option<String> {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) {
        return json.get("MessageDeduplicationId").and_then(|v| v.as_str()).map(str::to_string);
    }
    let text = std::str::from_utf8(body).ok()?;
    text.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == "MessageDeduplicationId").then(|| v.to_string())
    })
}

/// The idempotency key of a call under `api`'s rule.
pub fn idempotency_key(api: Option<&Api>, headers: &[(String, String)], body: &[u8]) -> Option<String> {
    match api.map(|a| a.key).unwrap_or(KeySource::None) {
        KeySource::Header(name) => headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone()),
        KeySource::BodyField(field) => serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|j| j.get(field).and_then(|v| v.as_str()).map(str::to_string)),
        KeySource::SqsDedup => sqs_dedup_id(body),
        KeySource::None => None,
    }
}

fn object_for(host: &str, path: &str) -> (&'static str, &'static str) {
    if host.contains("stripe") {
        let resource = path.trim_start_matches("/v1/").split(['/', '?']).next().unwrap_or("");
        return match resource {
            "refunds" => ("re", "refund"),
            "charges" => ("ch", "charge"),
            "payment_intents" => ("pi", "payment_intent"),
            "customers" => ("cus", "customer"),
            "invoices" => ("in", "invoice"),
            "subscriptions" => ("sub", "subscription"),
            "transfers" => ("tr", "transfer"),
            "payouts" => ("po", "payout"),
            _ => ("obj", "object"),
        };
    }
    ("fake", "object")
}

impl Ledger {
    /// Records one call and returns the status and body the fake answers with.
    fn record(
        &mut self,
        host: &str,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> (u16, String) {
        let api = api_for_host(host);
        let key = idempotency_key(api, headers, body);
        let mut effect = Effect {
            host: host.to_string(),
            method: method.to_string(),
            path: path.to_string(),
            key: key.clone(),
            outcome: "new".into(),
            status: 200,
        };
        let reply;
        if method == "GET" || method == "HEAD" {
            effect.outcome = "read".into();
            reply = (200, format!("{{\"object\":\"list\",\"data\":[],\"id\":\"fake_read_{}\"}}", self.counter));
        } else if self.fail_next > 0 {
            self.fail_next -= 1;
            effect.outcome = "failed".into();
            effect.status = 503;
            reply = (
                503,
                "{\"error\":{\"type\":\"api_error\",\"message\":\"retrysafe verify: injected transient fault\"}}"
                    .into(),
            );
        } else {
            let fingerprint = [method.as_bytes(), b" ", path.as_bytes(), b"\n", body].concat();
            match key.as_ref().and_then(|k| self.keyed.get(&(host.to_string(), k.clone()))) {
                Some((earlier, response)) if *earlier == fingerprint => {
                    effect.outcome = "replay".into();
                    reply = (200, response.clone());
                }
                Some(_) => {
                    effect.outcome = "conflict".into();
                    effect.status = if host.contains("stripe") { 400 } else { 409 };
                    reply = (
                        effect.status,
                        "{\"error\":{\"type\":\"idempotency_error\",\"message\":\"Keys for idempotent requests can only be used with the same parameters they were first used with.\"}}".into(),
                    );
                }
                None => {
                    self.counter += 1;
                    let (prefix, object) = object_for(host, path);
                    let response = format!(
                        "{{\"id\":\"{prefix}_verify{}\",\"object\":\"{object}\",\"status\":\"succeeded\"}}",
                        self.counter
                    );
                    if let Some(k) = &key {
                        self.keyed.insert((host.to_string(), k.clone()), (fingerprint, response.clone()));
                    }
                    reply = (200, response);
                }
            }
        }
        self.effects.push(effect);
        reply
    }
}

impl Fake {
    /// Starts the fake on an ephemeral loopback port, serving until the process ends.
    pub fn start() -> Result<Fake, String> {
        let server =
            tiny_http::Server::http("127.0.0.1:0").map_err(|e| format!("cannot start the recording fake: {e}"))?;
        let port = server.server_addr().to_ip().map(|a| a.port()).ok_or("the recording fake has no IP address")?;
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let shared = Arc::clone(&ledger);
        std::thread::spawn(move || {
            for mut request in server.incoming_requests() {
                let headers: Vec<(String, String)> =
                    request.headers().iter().map(|h| (h.field.to_string(), h.value.to_string())).collect();
                let host = headers
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case("x-retrysafe-host"))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| "unknown".into());
                let mut body = Vec::new();
                let _ = request.as_reader().read_to_end(&mut body);
                let method = request.method().as_str().to_ascii_uppercase();
                let path = request.url().to_string();
                let (status, reply) = match shared.lock() {
                    Ok(mut l) => l.record(&host, &method, &path, &headers, &body),
                    Err(_) => (500, "{}".into()),
                };
                let response = tiny_http::Response::from_string(reply)
                    .with_status_code(status)
                    .with_header(
                        tiny_http::Header::from_bytes("content-type", "application/json").expect("static header"),
                    )
                    .with_header(
                        tiny_http::Header::from_bytes("request-id", "req_retrysafe_verify").expect("static header"),
                    );
                let _ = request.respond(response);
            }
        });
        Ok(Fake { url: format!("http://127.0.0.1:{port}"), ledger })
    }

    /// Forgets every call and key: each scenario starts with a fresh provider.
    pub fn clear(&self) {
        if let Ok(mut l) = self.ledger.lock() {
            *l = Ledger::default();
        }
    }

    /// Answers the next `n` non-read calls with a 503 (a transient provider fault).
    pub fn fail_next(&self, n: usize) {
        if let Ok(mut l) = self.ledger.lock() {
            l.fail_next = n;
        }
    }

    pub fn effects(&self) -> Vec<Effect> {
        self.ledger.lock().map(|l| l.effects.clone()).unwrap_or_default()
    }

    /// Records a call directly (the unit tests' way into the idempotency rules).
    pub fn record(
        &self,
        host: &str,
        method: &str,
        path: &str,
        headers: &[(String, String)],
        body: &[u8],
    ) -> (u16, String) {
        self.ledger.lock().map(|mut l| l.record(host, method, path, headers, body)).unwrap_or((500, String::new()))
    }
}
