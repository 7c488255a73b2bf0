//! Provider signatures over the exact fixture bytes, as each provider's own verifier checks
//! them. Every attempt is signed again with its own timestamp; the event id and the body never
//! change between attempts, as with real redeliveries.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hmac::{Hmac, Mac};
use sha2::{Sha256, Sha512};

/// The providers `verify` can sign for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    Stripe,
    Github,
    /// Standard Webhooks (`webhook-*` headers).
    StandardWebhooks,
    /// Svix: Standard Webhooks signing under `svix-*` header names.
    Svix,
    Shopify,
    Paystack,
    Slack,
}

impl Provider {
    pub const ALL: [Provider; 7] = [
        Provider::Stripe,
        Provider::Github,
        Provider::StandardWebhooks,
        Provider::Svix,
        Provider::Shopify,
        Provider::Paystack,
        Provider::Slack,
    ];

    pub fn parse(name: &str) -> Option<Provider> {
        Some(match name.to_ascii_lowercase().as_str() {
            "stripe" => Provider::Stripe,
            "github" => Provider::Github,
            "standard-webhooks" | "standardwebhooks" => Provider::StandardWebhooks,
            "svix" | "clerk" | "resend" => Provider::Svix,
            "shopify" => Provider::Shopify,
            "paystack" => Provider::Paystack,
            "slack" => Provider::Slack,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Provider::Stripe => "stripe",
            Provider::Github => "github",
            Provider::StandardWebhooks => "standard-webhooks",
            Provider::Svix => "svix",
            Provider::Shopify => "shopify",
            Provider::Paystack => "paystack",
            Provider::Slack => "slack",
        }
    }
}

/// What identifies one delivery of one event; constant across attempts.
#[derive(Clone, Debug)]
pub struct Delivery<'a> {
    pub body: &'a [u8],
    /// The event id the provider sends in a header (GitHub's delivery GUID, the Standard
    /// Webhooks message id, Shopify's webhook id).
    pub event_id: &'a str,
    /// The event type, for providers that send it in a header (GitHub, Shopify topic).
    pub event_type: &'a str,
}

#[derive(Debug, PartialEq, Eq)]
pub struct SignError(pub String);

impl std::fmt::Display for SignError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn hmac256(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts keys of any length");
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().to_vec()
}

fn hmac512(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("HMAC accepts keys of any length");
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().to_vec()
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The Standard Webhooks key: base64 after the `whsec_` prefix (the prefix is optional).
fn standard_webhooks_key(secret: &str) -> Result<Vec<u8>, SignError> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    BASE64
        .decode(encoded)
        .map_err(|e| SignError(format!("the Standard Webhooks secret must be base64 after `whsec_`: {e}")))
}

/// The headers that sign `delivery` at unix time `timestamp` (besides `content-type`).
pub fn sign(
    provider: Provider,
    secret: &str,
    delivery: &Delivery,
    timestamp: u64,
) -> Result<Vec<(String, String)>, SignError> {
    let ts = timestamp.to_string();
    let body = delivery.body;
    let h = |k: &str, v: String| (k.to_string(), v);
    Ok(match provider {
        Provider::Stripe => {
            // Keyed by the whole secret string, `whsec_` included.
            let sig = hmac256(secret.as_bytes(), &[ts.as_bytes(), b".", body]);
            vec![h("stripe-signature", format!("t={ts},v1={}", hex(&sig)))]
        }
        Provider::Github => {
            let sig = hmac256(secret.as_bytes(), &[body]);
            vec![
                h("x-hub-signature-256", format!("sha256={}", hex(&sig))),
                h("x-github-event", delivery.event_type.to_string()),
                h("x-github-delivery", delivery.event_id.to_string()),
            ]
        }
        Provider::StandardWebhooks | Provider::Svix => {
            let key = standard_webhooks_key(secret)?;
            let id = delivery.event_id;
            let sig = hmac256(&key, &[id.as_bytes(), b".", ts.as_bytes(), b".", body]);
            let prefix = if provider == Provider::Svix { "svix" } else { "webhook" };
            vec![
                h(&format!("{prefix}-id"), id.to_string()),
                h(&format!("{prefix}-timestamp"), ts),
                h(&format!("{prefix}-signature"), format!("v1,{}", BASE64.encode(sig))),
            ]
        }
        Provider::Shopify => {
            let sig = hmac256(secret.as_bytes(), &[body]);
            vec![
                h("x-shopify-hmac-sha256", BASE64.encode(sig)),
                h("x-shopify-topic", delivery.event_type.to_string()),
                h("x-shopify-shop-domain", "retrysafe-verify.myshopify.com".to_string()),
                h("x-shopify-api-version", "2025-07".to_string()),
                h("x-shopify-webhook-id", delivery.event_id.to_string()),
                h("x-shopify-event-id", delivery.event_id.to_string()),
                h("x-shopify-triggered-at", "2026-01-01T00:00:00.000Z".to_string()),
            ]
        }
        Provider::Paystack => {
            let sig = hmac512(secret.as_bytes(), &[body]);
            vec![h("x-paystack-signature", hex(&sig))]
        }
        Provider::Slack => {
            let sig = hmac256(secret.as_bytes(), &[b"v0:", ts.as_bytes(), b":", body]);
            vec![h("x-slack-signature", format!("v0={}", hex(&sig))), h("x-slack-request-timestamp", ts)]
        }
    })
}

/// Reads the event id and type out of a fixture, where each provider puts them. Providers
/// that send the id only in a header (GitHub, Shopify) get one derived from the body bytes,
/// so it is stable across attempts and runs.
pub fn event_identity(provider: Provider, body: &[u8]) -> (String, String) {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let field = |path: &[&str]| -> Option<String> {
        let mut v = json.as_ref()?;
        for p in path {
            v = v.get(p)?;
        }
        match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    };
    let derived = || {
        let digest = hex(&hmac256(b"retrysafe-verify", &[body]));
        format!("{}-{}-{}-{}-{}", &digest[0..8], &digest[8..12], &digest[12..16], &digest[16..20], &digest[20..32])
    };
    let id = match provider {
        Provider::Stripe | Provider::StandardWebhooks | Provider::Svix => {
            field(&["id"]).or_else(|| field(&["data", "id"])).unwrap_or_else(derived)
        }
        Provider::Slack => field(&["event_id"]).unwrap_or_else(derived),
        Provider::Paystack => field(&["data", "id"]).unwrap_or_else(derived),
        Provider::Github | Provider::Shopify => derived(),
    };
    let kind = match provider {
        Provider::Github => "push".to_string(),
        Provider::Shopify => "orders/create".to_string(),
        Provider::Slack => field(&["event", "type"]).or_else(|| field(&["type"])).unwrap_or_default(),
        _ => field(&["type"]).or_else(|| field(&["event"])).unwrap_or_default(),
    };
    (id, kind)
}
