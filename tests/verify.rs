//! `retrysafe verify`'s Rust side: signers (known answers computed with Python's hmac; the
//! providers' own verifiers check them in scripts/test-verify), the recording fake's
//! idempotency rules, scenario parsing, divergence messages and the loopback-only rule.

use retrysafe::verify::fake::{Effect, Fake, effect_hosts};
use retrysafe::verify::runner::effects_divergence;
use retrysafe::verify::scenario::{self, Scenario};
use retrysafe::verify::sign::{Delivery, Provider, sign};
use retrysafe::verify::{deliver, sign as signing};

const BODY: &[u8] = br#"{"id":"evt_1","type":"invoice.paid"}"#;
const TS: u64 = 1_700_000_000;

fn header(headers: &[(String, String)], name: &str) -> String {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()).unwrap_or_else(|| panic!("no {name} header"))
}

fn delivery() -> Delivery<'static> {
    Delivery { body: BODY, event_id: "msg_1", event_type: "invoice.paid" }
}

#[test]
fn stripe_signs_timestamp_dot_body_keyed_by_the_whole_secret() {
    let h = sign(Provider::Stripe, "whsec_test", &delivery(), TS).unwrap();
    assert_eq!(
        header(&h, "stripe-signature"),
        "t=1700000000,v1=4aa90aa69730f112c87accbf54203d1076675eae3b18a5cb82b5ab9e7f5cd5bc"
    );
}

#[test]
fn github_signs_the_body_and_sends_the_delivery_id() {
    let h = sign(Provider::Github, "gh", &delivery(), TS).unwrap();
    assert_eq!(
        header(&h, "x-hub-signature-256"),
        "sha256=9461aa7cbcbd72c20d16537972f33888fbdb69b061f4ad0f1b4ff397b7548da2"
    );
    assert_eq!(header(&h, "x-github-delivery"), "msg_1");
    assert_eq!(header(&h, "x-github-event"), "invoice.paid");
}

#[test]
fn svix_and_standard_webhooks_sign_id_ts_body_with_the_decoded_key() {
    let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    let svix = sign(Provider::Svix, secret, &delivery(), TS).unwrap();
    assert_eq!(header(&svix, "svix-signature"), "v1,OIVTiNRrhJSBx6zl79nIEOHpS2EbXqN7S6enn5T8DlQ=");
    assert_eq!(header(&svix, "svix-id"), "msg_1");
    assert_eq!(header(&svix, "svix-timestamp"), "1700000000");
    let standard = sign(Provider::StandardWebhooks, secret, &delivery(), TS).unwrap();
    assert_eq!(header(&standard, "webhook-signature"), header(&svix, "svix-signature"));
    assert!(sign(Provider::Svix, "whsec_not base64!", &delivery(), TS).is_err());
}

#[test]
fn shopify_paystack_slack() {
    let shopify = sign(Provider::Shopify, "shp", &delivery(), TS).unwrap();
    assert_eq!(header(&shopify, "x-shopify-hmac-sha256"), "Gk5HsOmL0YyMD1YwwQVAHTLviAVVaqdPmYdoyFRGruU=");
    for required in ["x-shopify-topic", "x-shopify-shop-domain", "x-shopify-api-version", "x-shopify-webhook-id"] {
        header(&shopify, required);
    }
    let paystack = sign(Provider::Paystack, "sk_test", &delivery(), TS).unwrap();
    assert_eq!(
        header(&paystack, "x-paystack-signature"),
        "5ab6d674ceeff9a9616bbadd0c8d8785dcb142c7e06e54e1d3013f260b3cb178bd980b6c6e0b358d881b8d3485394330b575cb126185995b5a1a2296d5ec34ef"
    );
    let slack = sign(Provider::Slack, "slk", &delivery(), TS).unwrap();
    assert_eq!(
        header(&slack, "x-slack-signature"),
        "v0=fd164bf7e614faf99c5c822d53fb3c0751164eebe03f507e13c5a58da991bd39"
    );
    assert_eq!(header(&slack, "x-slack-request-timestamp"), "1700000000");
}

#[test]
fn every_attempt_gets_a_fresh_signature_for_the_same_bytes() {
    let a = sign(Provider::Stripe, "whsec_test", &delivery(), TS).unwrap();
    let b = sign(Provider::Stripe, "whsec_test", &delivery(), TS + 1).unwrap();
    assert_ne!(a, b);
    assert!(header(&b, "stripe-signature").starts_with("t=1700000001,"));
}

#[test]
fn event_identity_reads_the_providers_id_field() {
    assert_eq!(signing::event_identity(Provider::Stripe, BODY), ("evt_1".to_string(), "invoice.paid".to_string()));
    let (gh1, _) = signing::event_identity(Provider::Github, b"{\"zen\":\"x\"}");
    let (gh2, _) = signing::event_identity(Provider::Github, b"{\"zen\":\"x\"}");
    assert_eq!(gh1, gh2, "a derived delivery id is stable across attempts");
    assert_eq!(gh1.len(), 36);
}

fn json_header(k: &str, v: &str) -> Vec<(String, String)> {
    vec![(k.to_string(), v.to_string())]
}

#[test]
fn fake_replays_a_keyed_call_and_counts_unkeyed_ones() {
    let fake = Fake::start().unwrap();
    let key = json_header("Idempotency-Key", "refund-ch_1");
    let (s1, r1) = fake.record("api.stripe.com", "POST", "/v1/refunds", &key, b"charge=ch_1");
    let (s2, r2) = fake.record("api.stripe.com", "POST", "/v1/refunds", &key, b"charge=ch_1");
    assert_eq!((s1, s2), (200, 200));
    assert_eq!(r1, r2, "a replay answers with the first response");
    assert!(r1.contains("\"object\":\"refund\""));
    // The same key with other parameters is rejected, as Stripe does.
    let (s3, _) = fake.record("api.stripe.com", "POST", "/v1/refunds", &key, b"charge=ch_2");
    assert_eq!(s3, 400);
    // No key: every POST is an effect. A GET is a read.
    fake.record("api.stripe.com", "POST", "/v1/refunds", &[], b"charge=ch_1");
    fake.record("api.sendgrid.com", "POST", "/v3/mail/send", &[], b"{}");
    fake.record("api.sendgrid.com", "POST", "/v3/mail/send", &[], b"{}");
    fake.record("api.stripe.com", "GET", "/v1/charges/ch_1", &[], b"");
    let outcomes: Vec<String> = fake.effects().iter().map(|e| e.outcome.clone()).collect();
    assert_eq!(outcomes, ["new", "replay", "conflict", "new", "new", "new", "read"]);
    fake.clear();
    assert!(fake.effects().is_empty());
}

#[test]
fn fake_knows_each_providers_key() {
    let fake = Fake::start().unwrap();
    let paypal = json_header("PayPal-Request-Id", "order-1");
    fake.record("api-m.paypal.com", "POST", "/v2/checkout/orders", &paypal, b"{}");
    fake.record("api-m.paypal.com", "POST", "/v2/checkout/orders", &paypal, b"{}");
    let square = br#"{"idempotency_key":"pay-1","amount_money":{"amount":100}}"#;
    fake.record("connect.squareup.com", "POST", "/v2/payments", &[], square);
    fake.record("connect.squareup.com", "POST", "/v2/payments", &[], square);
    let sqs = b"Action=SendMessage&MessageBody=x&MessageDeduplicationId=d-1";
    fake.record("sqs.eu-west-1.amazonaws.com", "POST", "/123/q.fifo", &[], sqs);
    fake.record("sqs.eu-west-1.amazonaws.com", "POST", "/123/q.fifo", &[], sqs);
    let resend = json_header("idempotency-key", "welcome/u1");
    fake.record("api.resend.com", "POST", "/emails", &resend, b"{\"to\":\"a\"}");
    fake.record("api.resend.com", "POST", "/emails", &resend, b"{\"to\":\"a\"}");
    let (status, _) = fake.record("api.resend.com", "POST", "/emails", &resend, b"{\"to\":\"b\"}");
    assert_eq!(status, 409, "Resend rejects a reused key with another payload");
    let outcomes: Vec<String> = fake.effects().iter().map(|e| e.outcome.clone()).collect();
    assert_eq!(outcomes, ["new", "replay", "new", "replay", "new", "replay", "new", "replay", "conflict"]);
}

#[test]
fn fake_injects_a_transient_fault_that_is_not_an_effect() {
    let fake = Fake::start().unwrap();
    fake.fail_next(1);
    let key = json_header("Idempotency-Key", "k");
    assert_eq!(fake.record("api.stripe.com", "POST", "/v1/refunds", &key, b"a").0, 503);
    assert_eq!(fake.record("api.stripe.com", "POST", "/v1/refunds", &key, b"a").0, 200);
    let effects = fake.effects();
    assert!(!effects[0].performed());
    assert!(effects[1].performed(), "the failed call did not store the key: the retry is the effect");
}

#[test]
fn fake_serves_over_http() {
    let fake = Fake::start().unwrap();
    let addr: std::net::SocketAddr = fake.url.trim_start_matches("http://").parse().unwrap();
    let headers = vec![("x-retrysafe-host".to_string(), "api.resend.com".to_string())];
    let request = deliver::build_request("POST", "/emails", "api.resend.com", &headers, b"{}");
    let r = deliver::deliver(addr, &request, std::time::Duration::from_secs(5), std::time::Instant::now());
    assert_eq!(r.status, Some(200));
    assert_eq!(fake.effects()[0].signature(), "POST api.resend.com/emails");
}

fn effect(key: Option<&str>) -> Effect {
    Effect {
        host: "api.resend.com".into(),
        method: "POST".into(),
        path: "/emails".into(),
        key: key.map(str::to_string),
        outcome: "new".into(),
        status: 200,
    }
}

#[test]
fn divergence_names_the_repeated_effect_and_why() {
    let reference = vec![effect(None)];
    assert_eq!(effects_divergence(&reference, &[effect(None)]), None);
    let unkeyed = effects_divergence(&reference, &[effect(None), effect(None)]).unwrap();
    assert!(unkeyed.contains("`POST api.resend.com/emails` was performed 2× (reference 1×)"), "{unkeyed}");
    assert!(unkeyed.contains("without an idempotency key"), "{unkeyed}");
    let unstable = effects_divergence(&reference, &[effect(Some("a-1")), effect(Some("a-2"))]).unwrap();
    assert!(unstable.contains("not stable (`a-1`, `a-2`)"), "{unstable}");
    let lost = effects_divergence(&reference, &[]).unwrap();
    assert!(lost.contains("lost"), "{lost}");
}

#[test]
fn scenarios_parse_and_single_always_runs_first() {
    let s = scenario::parse("retry,concurrent:4,crash:after-effect:api.stripe.com@2", false, false).unwrap();
    assert_eq!(
        s,
        vec![
            Scenario::Single,
            Scenario::Retry,
            Scenario::Concurrent(4),
            Scenario::Crash { point: "after-effect:api.stripe.com".into(), hit: 2 }
        ]
    );
    let all = scenario::parse("all", false, true).unwrap();
    assert!(all.contains(&Scenario::DistinctEvents) && !all.contains(&Scenario::OutOfOrder));
    assert!(all.contains(&Scenario::CrashAll));
    for bad in ["concurrent:1", "crash:somewhere", "crash:after-effect", "crash:after-claim@0", "twice"] {
        assert!(scenario::parse(bad, true, true).is_err(), "{bad} should be refused");
    }
}

#[test]
fn only_loopback_targets_are_accepted() {
    assert!(deliver::loopback_target("127.0.0.1", 3000).is_ok());
    assert!(deliver::loopback_target("localhost", 3000).is_ok());
    assert!(deliver::loopback_target("::1", 3000).is_ok());
    for other in ["10.0.0.8", "192.168.1.1", "8.8.8.8"] {
        let err = deliver::loopback_target(other, 3000).unwrap_err();
        assert!(err.contains("refusing"), "{err}");
    }
}

#[test]
fn effects_names_map_to_hosts() {
    assert_eq!(effect_hosts(&["stripe".into()]).unwrap(), ["api.stripe.com"]);
    assert!(effect_hosts(&[]).unwrap().contains(&"api.resend.com".to_string()));
    assert_eq!(effect_hosts(&["api.example.test".into()]).unwrap(), ["api.example.test"]);
    assert!(effect_hosts(&["nope".into()]).is_err());
}

fn retrysafe(args: &[&str], cwd: &std::path::Path) -> (i32, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_retrysafe")).args(args).current_dir(cwd).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn help_lists_the_scenarios() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out, _) = retrysafe(&["verify", "--help"], dir.path());
    assert_eq!(code, 0);
    for s in [
        "concurrent:N",
        "crash:POINT",
        "after-effect:HOST",
        "lost-response",
        "out-of-order",
        "distinct-events",
        "bad-signature",
    ] {
        assert!(out.contains(s), "--help does not mention {s}:\n{out}");
    }
}

#[test]
fn setup_errors_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, err) = retrysafe(&["verify"], dir.path());
    assert_eq!(code, 2);
    assert!(err.contains("verify.targets"), "{err}");
    let (code, _, err) = retrysafe(
        &[
            "verify",
            "POST /hook",
            "--provider",
            "stripe",
            "--event",
            "missing.json",
            "--start",
            "true",
            "--port",
            "47999",
            "--secret-env",
            "S",
        ],
        dir.path(),
    );
    assert_eq!(code, 2);
    assert!(err.contains("missing.json: cannot read"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let (code, _, err) = retrysafe(&["verify", "POST /hook", "--provider", "nope"], dir.path());
    assert_eq!(code, 2);
    assert!(err.contains("unknown provider `nope`"), "{err}");
    // A queue: a bad job fixture is named, SQS is refused with the reason, nothing starts.
    std::fs::write(dir.path().join("job.json"), "[1, 2]").unwrap();
    let queue = |spec: &str| {
        let args = [
            "verify",
            "--queue",
            spec,
            "--event",
            "job.json",
            "--start",
            "touch started",
            "--redis-url",
            "redis://127.0.0.1:1",
        ];
        retrysafe(&args, dir.path())
    };
    let (code, _, err) = queue("bullmq:emails");
    assert_eq!((code, err.trim().lines().count()), (2, 1), "{err}");
    assert!(err.contains("job.json: the job fixture must be a JSON object"), "{err}");
    let (code, _, err) = queue("sqs:orders");
    assert_eq!(code, 2);
    assert!(err.contains("SQS is not supported yet") && err.contains("local SQS endpoint"), "{err}");
    assert!(!dir.path().join("started").exists());
}

#[test]
fn a_config_target_is_a_route_or_a_queue() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("retrysafe.json"),
        r#"{ "verify": { "targets": [ { "route": "POST /x", "queue": "bullmq:emails" } ] } }"#,
    )
    .unwrap();
    let (code, _, err) = retrysafe(&["verify"], dir.path());
    assert_eq!(code, 2);
    assert!(err.contains("retrysafe.json: invalid config: verify.targets[0]: give either `route` or `queue`"), "{err}");
}

#[test]
fn config_targets_are_validated_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("retrysafe.json"),
        r#"{ "verify": { "targets": [ { "route": "POST /x", "prot": 1 } ] } }"#,
    )
    .unwrap();
    let (code, _, err) = retrysafe(&["verify"], dir.path());
    assert_eq!(code, 2);
    assert!(err.contains("retrysafe.json: invalid config: verify:") && err.contains("prot"), "{err}");
    // A declared target runs as its flags would: here the app never listens, a setup error.
    std::fs::write(dir.path().join("event.json"), br#"{"id":"evt_1","type":"invoice.paid"}"#).unwrap();
    std::fs::write(
        dir.path().join("retrysafe.json"),
        r#"{ "verify": { "targets": [ { "route": "POST /x", "provider": "stripe", "event": "event.json",
             "start": "exit 3", "port": 47998, "secretEnv": "S", "preload": "none" } ] } }"#,
    )
    .unwrap();
    let (code, _, err) = retrysafe(&["verify"], dir.path());
    assert_eq!(code, 2);
    assert!(err.contains("`exit 3` exited"), "{err}");
}

#[test]
fn queue_targets_are_bullmq_with_a_redis_and_sqs_is_refused_with_the_reason() {
    use retrysafe::verify::queue::parse_queue;
    let q = parse_queue("bullmq:emails", Some("redis://127.0.0.1:6379/2".into()), "bull").unwrap();
    assert_eq!(
        (q.name.as_str(), q.redis_url.as_str(), q.prefix.as_str()),
        ("emails", "redis://127.0.0.1:6379/2", "bull")
    );
    assert!(parse_queue("bullmq:emails", None, "bull").unwrap_err().contains("--redis-url"));
    assert!(parse_queue("bullmq:", Some("redis://x".into()), "bull").is_err());
    assert!(parse_queue("bullmq:a:b", Some("redis://x".into()), "bull").is_err());
    assert!(parse_queue("sqs:orders", Some("redis://x".into()), "bull").unwrap_err().contains("local SQS endpoint"));
    assert!(parse_queue("kafka:t", Some("redis://x".into()), "bull").unwrap_err().contains("unknown queue kind"));
    assert!(parse_queue("emails", Some("redis://x".into()), "bull").unwrap_err().contains("KIND:NAME"));
}

#[test]
fn a_job_fixture_names_its_job_id_or_gets_one_per_role() {
    use retrysafe::verify::queue::job_identity;
    let path = std::path::Path::new("job.json");
    let (id, name) = job_identity(path, br#"{"name":"welcome","data":{},"opts":{"jobId":"w-1"}}"#, "event").unwrap();
    assert_eq!((id.as_str(), name.as_str()), ("w-1", "welcome"));
    assert_eq!(job_identity(path, br#"{"id":"j-2","to":"a@b"}"#, "event").unwrap().0, "j-2");
    assert_eq!(job_identity(path, br#"{"to":"a@b"}"#, "other").unwrap().0, "retrysafe-verify-other");
    let bad = job_identity(path, b"[1]", "event").unwrap_err();
    assert!(bad.starts_with("job.json:"), "{bad}");
    assert!(
        job_identity(path, b"{not json", "event").unwrap_err().starts_with("job.json: the job fixture is not JSON")
    );
    assert!(job_identity(path, br#"{"opts":{"jobId":"a:b"}}"#, "event").unwrap_err().contains("cannot contain `:`"));
}

#[test]
fn queue_crash_points_parse_and_http_ones_still_do() {
    let s = scenario::parse("crash:before-ack,crash:after-ack@2,crash:before-response", false, false).unwrap();
    assert_eq!(
        s[1..],
        [
            Scenario::Crash { point: "before-ack".into(), hit: 1 },
            Scenario::Crash { point: "after-ack".into(), hit: 2 },
            Scenario::Crash { point: "before-response".into(), hit: 1 }
        ]
    );
    assert!(scenario::parse("crash:before-nack", false, false).is_err());
}
