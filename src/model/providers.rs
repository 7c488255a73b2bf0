//! Providers, their detection and the event key expression each one dedupes on
//! (docs/providers.md, "The event key").

use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Provider {
    Stripe,
    Github,
    Shopify,
    Svix,
    Paystack,
    Flutterwave,
    Paddle,
    Razorpay,
    Paypal,
    Square,
    Slack,
    Linear,
    Twilio,
    LemonSqueezy,
    Sqs,
    Bullmq,
    Kafka,
    Amqp,
    Pubsub,
    Inngest,
    Trigger,
    /// Cloudflare Queues consumers (`queue(batch, env, ctx)`): `message.id` names one message.
    CloudflareQueue,
}

impl Provider {
    pub const ALL: &[Provider] = &[
        Provider::Stripe,
        Provider::Github,
        Provider::Shopify,
        Provider::Svix,
        Provider::Paystack,
        Provider::Flutterwave,
        Provider::Paddle,
        Provider::Razorpay,
        Provider::Paypal,
        Provider::Square,
        Provider::Slack,
        Provider::Linear,
        Provider::Twilio,
        Provider::LemonSqueezy,
        Provider::Sqs,
        Provider::Bullmq,
        Provider::Kafka,
        Provider::Amqp,
        Provider::Pubsub,
        Provider::Inngest,
        Provider::Trigger,
        Provider::CloudflareQueue,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Provider::Stripe => "stripe",
            Provider::Github => "github",
            Provider::Shopify => "shopify",
            Provider::Svix => "svix",
            Provider::Paystack => "paystack",
            Provider::Flutterwave => "flutterwave",
            Provider::Paddle => "paddle",
            Provider::Razorpay => "razorpay",
            Provider::Paypal => "paypal",
            Provider::Square => "square",
            Provider::Slack => "slack",
            Provider::Linear => "linear",
            Provider::Twilio => "twilio",
            Provider::LemonSqueezy => "lemonsqueezy",
            Provider::Sqs => "sqs",
            Provider::Bullmq => "bullmq",
            Provider::Kafka => "kafka",
            Provider::Amqp => "amqp",
            Provider::Pubsub => "pubsub",
            Provider::Inngest => "inngest",
            Provider::Trigger => "trigger",
            Provider::CloudflareQueue => "cloudflare-queue",
        }
    }

    /// How long the provider keeps retrying (or allows a resend), in seconds. Unknown: 3 days.
    pub fn retry_window_seconds(self) -> u64 {
        const HOUR: u64 = 3600;
        const DAY: u64 = 24 * HOUR;
        match self {
            Provider::Shopify => 4 * HOUR,
            Provider::Svix => 28 * HOUR,
            Provider::Razorpay => DAY,
            // retries only through the URL's `#rc=` fragment (max 5), within the request timeouts
            Provider::Twilio => HOUR,
            // three more tries within minutes, then manual resends from the dashboard
            Provider::LemonSqueezy => DAY,
            Provider::Github => 3 * DAY,
            _ => 3 * DAY,
        }
    }

    /// The delivery header carrying the event key, for header-keyed providers.
    pub fn key_header(self) -> Option<&'static str> {
        match self {
            Provider::Github => Some("x-github-delivery"),
            Provider::Shopify => Some("x-shopify-webhook-id"),
            Provider::Svix => Some("svix-id"),
            Provider::Razorpay => Some("x-razorpay-event-id"),
            Provider::Linear => Some("linear-delivery"),
            Provider::Twilio => Some("i-twilio-idempotency-token"),
            _ => None,
        }
    }
}

/// Lower-cased markers in source text that identify an inbound provider.
const MARKERS: &[(&str, Provider)] = &[
    ("constructevent", Provider::Stripe),
    ("stripe-signature", Provider::Stripe),
    ("parseeventnotification", Provider::Stripe),
    ("stripe.event", Provider::Stripe),
    // Stripe event names compared as string literals (an unverified receiver still handles them).
    ("\"checkout.session.", Provider::Stripe),
    ("'checkout.session.", Provider::Stripe),
    ("\"customer.subscription.", Provider::Stripe),
    ("'customer.subscription.", Provider::Stripe),
    ("\"payment_intent.", Provider::Stripe),
    ("'payment_intent.", Provider::Stripe),
    ("x-github-delivery", Provider::Github),
    ("x-hub-signature", Provider::Github),
    ("x-github-event", Provider::Github),
    ("@octokit/webhooks", Provider::Github),
    ("x-shopify-", Provider::Shopify),
    ("authenticate.webhook(", Provider::Shopify),
    ("svix-id", Provider::Svix),
    ("svix-signature", Provider::Svix),
    ("from \"svix\"", Provider::Svix),
    ("from 'svix'", Provider::Svix),
    // Clerk's `verifyWebhook(req)` from `@clerk/<sdk>/webhooks` (a bare `verifyWebhook` is any
    // gateway's: Swish, PayPal, ...)
    ("@clerk/nextjs/webhooks", Provider::Svix),
    ("@clerk/express/webhooks", Provider::Svix),
    ("@clerk/fastify/webhooks", Provider::Svix),
    ("@clerk/backend/webhooks", Provider::Svix),
    ("@clerk/remix/webhooks", Provider::Svix),
    ("@clerk/astro/webhooks", Provider::Svix),
    ("@clerk/nuxt/webhooks", Provider::Svix),
    ("@clerk/react-router/webhooks", Provider::Svix),
    ("@clerk/tanstack-react-start/webhooks", Provider::Svix),
    ("webhook-id", Provider::Svix),
    // Standard Webhooks (Svix's open spec: Supabase Auth hooks, ...): `webhook-id` is the key
    ("standardwebhooks", Provider::Svix),
    ("x-paystack-signature", Provider::Paystack),
    ("verif-hash", Provider::Flutterwave),
    ("paddle-signature", Provider::Paddle),
    ("x-razorpay", Provider::Razorpay),
    ("paypal-transmission", Provider::Paypal),
    ("x-square-hmacsha256-signature", Provider::Square),
    ("x-slack-signature", Provider::Slack),
    ("x-slack-request-timestamp", Provider::Slack),
    ("linear-signature", Provider::Linear),
    ("linear-delivery", Provider::Linear),
    ("x-twilio-signature", Provider::Twilio),
    ("lemonsqueezy", Provider::LemonSqueezy),
    ("lemon-squeezy", Provider::LemonSqueezy),
    ("lemon_squeezy", Provider::LemonSqueezy),
    ("twiliosignature", Provider::Twilio),
    ("twilio.webhook(", Provider::Twilio),
    ("twilio.validaterequest", Provider::Twilio),
];

/// The provider whose markers appear first in `text` (the handler body, then the file).
pub fn detect(text: &str) -> Option<Provider> {
    // One search for all markers instead of one per marker. Leftmost-first matching picks
    // the earliest match and, among markers matching there, the one listed first: the
    // earliest marker, ties to the first listed.
    static ANY_MARKER: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let any_marker = ANY_MARKER.get_or_init(|| {
        let alternatives: Vec<String> = MARKERS.iter().map(|(marker, _)| regex::escape(marker)).collect();
        crate::ascii_regex(&format!("(?i){}", alternatives.join("|")))
    });
    let found = any_marker.find(text)?.as_str().to_ascii_lowercase();
    MARKERS.iter().find(|(marker, _)| *marker == found).map(|(_, p)| *p)
}

/// Signature verification calls and headers: their presence makes a route a webhook.
pub fn verifies_signature(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    checks_with_sdk(&lower) || digests_by_hand(&lower)
}

/// Whether a function's text verifies the sender of a delivery: `verifies_signature`, where a
/// digest computed by hand (`createHmac`, `timingSafeEqual`) counts only when the text reads a
/// request header. A checkout's `razorpay_signature` posted in the body by the customer's
/// browser is checked the same way, but by a route that serves people.
pub fn verifies_sender(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    checks_with_sdk(&lower) || (digests_by_hand(&lower) && lower.contains("header"))
}

fn digests_by_hand(lower: &str) -> bool {
    lower.contains("createhmac") || lower.contains("timingsafeequal")
}

/// How many arguments the call whose text starts just after its `(` passes: its commas outside
/// nested brackets and strings, plus one (0 for an unbalanced or empty call).
fn top_level_arguments(after_paren: &str) -> usize {
    let (mut depth, mut commas, mut quote, mut seen) = (0usize, 0usize, None::<char>, false);
    for c in after_paren.chars() {
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'' | '`') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') if depth == 0 => return if seen { commas + 1 } else { 0 },
            (None, ')' | ']' | '}') => depth -= 1,
            (None, ',') if depth == 0 => commas += 1,
            _ => {}
        }
        seen |= quote.is_some() || !c.is_whitespace();
    }
    0
}

/// A provider SDK's or a sender's own verification call in lowercased text.
fn checks_with_sdk(lower: &str) -> bool {
    // `jwt.verify(token)` checks a person's session token, `bcrypt.verify` a password,
    // `passwordVerification.verify(password)` or `codeVerification.verify(identifier, code)` a
    // person's sign-in step: none is a sender's signature.
    let person_check = crate::regex!(
        r"verification|password|passcode|otp|passkey|webauthn|mfa|captcha|session|credential|code|jwt|jsonwebtoken|bcrypt|argon2|jose|auth"
    );
    let sender_verify = lower.match_indices(".verify(").any(|(at, m)| {
        let receiver = lower[..at].rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap_or("");
        let first_arg = lower[at + m.len()..].split([',', ')']).next().unwrap_or("").trim();
        !person_check.is_match(receiver)
            && !matches!(first_arg, "password" | "code" | "otp" | "pin" | "token" | "passcode" | "credentials" | "ctx")
    });
    // Twilio's `validateRequest(authToken, signature, url, params)`, not a schema
    // middleware's `validateRequest({ body: schema })` nor an app's own session check
    // `validateRequest(request)`: Twilio's takes four arguments (three when the params are
    // left out).
    let twilio_check = crate::regex!(r"validaterequest(?:withbody)?\s*\(\s*[^{\s)]")
        .find_iter(lower)
        .any(|m| m.as_str().find('(').is_some_and(|open| top_level_arguments(&lower[m.start() + open + 1..]) >= 3));
    // livekit-server-sdk's `new WebhookReceiver(key, secret).receive(body, authorization)` checks
    // the signed token and the body's hash.
    let livekit_check = lower.contains("webhookreceiver") && lower.contains(".receive(");
    sender_verify
        || twilio_check
        || livekit_check
        || [
            "constructevent",
            "parseeventnotification",
            "verifywebhook",
            "verifyandreceive",
            "validatewebhooksignature",
            "verifysignature",
            "webhooks.validate",
            "webhooks.unmarshal",
            "authenticate.webhook",
        ]
        .iter()
        .any(|m| lower.contains(m))
}

/// An event key: the text that goes inside a template literal, e.g. `${event.id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct EventKey {
    pub provider: Provider,
    pub template: String,
}

impl EventKey {
    pub fn new(provider: Provider, template: impl Into<String>) -> EventKey {
        EventKey { provider, template: template.into() }
    }

    /// A provider-prefixed key for the guard: `` `stripe:${event.id}` ``.
    pub fn guard_key(&self) -> String {
        format!("`{}:{}`", self.provider.name(), self.template)
    }

    /// An operation key for an SDK idempotency key: `` `refund:${event.id}` ``.
    pub fn operation_key(&self, operation: &str) -> String {
        format!("`{operation}:{}`", self.template)
    }

    /// A BullMQ-safe job id (no `:` outside substitutions): `` `followup-${job.id}` ``.
    pub fn job_id(&self, name: &str) -> String {
        let mut out = String::new();
        let mut depth = 0;
        for c in self.template.chars() {
            match c {
                '{' if out.ends_with('$') => depth += 1,
                '}' if depth > 0 => depth -= 1,
                ':' if depth == 0 => {
                    out.push('-');
                    continue;
                }
                _ => {}
            }
            out.push(c);
        }
        format!("`{name}-{out}`")
    }

    /// Replaces a root identifier (the event variable of a caller) with a callee's parameter.
    pub fn rebind(&self, from: &str, to: &str) -> EventKey {
        let needle = format!("${{{from}");
        let mut out = String::with_capacity(self.template.len());
        let mut rest = self.template.as_str();
        while let Some(i) = rest.find(&needle) {
            let after = &rest[i + needle.len()..];
            let whole = !after.starts_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$');
            out.push_str(&rest[..i]);
            out.push_str(if whole { "${" } else { &needle });
            if whole {
                out.push_str(to);
            }
            rest = after;
        }
        out.push_str(rest);
        EventKey { provider: self.provider, template: out }
    }

    /// The identifiers the key reads (the roots of its substitutions).
    pub fn roots(&self) -> Vec<String> {
        let re = crate::regex!(r"\$\{([A-Za-z_$][\w$]*)");
        re.captures_iter(&self.template).map(|c| c[1].to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_tokens_and_passwords_are_no_sender_check() {
        assert!(!verifies_signature("const claims = jwt.verify(token, secret);"));
        assert!(!verifies_signature("await bcrypt.verify(hash, password)"));
        assert!(!verifies_signature("const data = await AuthService.verify(verifyData);"));
        assert!(verifies_signature("const event = wh.verify(body, headers);"));
        assert!(verifies_signature("jwt.verify(token, secret); const e = webhook.verify(raw, sig);"));
        // a digest by hand verifies a sender only over a signature read from a header
        let by_header = "const sig = req.headers['x-razorpay-signature']; crypto.createHmac('sha256', s).update(raw)";
        assert!(verifies_sender(by_header));
        assert!(!verifies_sender("const { razorpay_signature } = req.body; crypto.createHmac('sha256', s).update(id)"));
    }

    #[test]
    fn twilios_validate_request_takes_four_arguments() {
        assert!(verifies_signature(
            "if (!twilio.validateRequest(token, req.headers['x-twilio-signature'], url(req), req.body)) {"
        ));
        assert!(verifies_signature("validateRequestWithBody(authToken, signature, `${base}/sms`, raw)"));
        assert!(!verifies_signature("const { userId, error } = await validateRequest(request);"));
        assert!(!verifies_signature("router.post('/', validateRequest({ body: schema }), handler)"));
        assert!(!verifies_signature("await validateRequest(req, { roles: ['admin', 'owner'] })"));
    }

    #[test]
    fn job_ids_never_contain_colons() {
        let key = EventKey::new(Provider::Kafka, "${topic}:${partition}:${message.offset}");
        assert_eq!(key.job_id("sync"), "`sync-${topic}-${partition}-${message.offset}`");
    }

    #[test]
    fn rebinding_renames_the_root_only() {
        let key = EventKey::new(Provider::Stripe, "${event.id}");
        assert_eq!(key.rebind("event", "evt").template, "${evt.id}");
        assert_eq!(key.rebind("ev", "x").template, "${event.id}");
    }

    #[test]
    fn first_marker_wins() {
        assert_eq!(detect("req.headers['x-github-delivery']; stripe"), Some(Provider::Github));
    }
}
