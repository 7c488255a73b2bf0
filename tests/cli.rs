//! The command line end to end: output formats, config, suppressions, stdin, bad input and
//! exit codes, `fix --write` (atomic, equal to the dry run).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_retrysafe"));
    c.env("NO_COLOR", "1");
    c
}

fn run(args: &[&str], cwd: &Path) -> Output {
    bin().args(args).current_dir(cwd).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const STRIPE_HANDLER: &str = r#"import express from "express";
import Stripe from "stripe";

const stripe = new Stripe(process.env.STRIPE_KEY!);
const app = express();

app.post("/webhooks/stripe", express.raw({ type: "application/json" }), async (req, res) => {
  const event = stripe.webhooks.constructEvent(req.body, req.headers["stripe-signature"] as string, "whsec");
  if (event.type === "charge.refunded") {
    await stripe.refunds.create({ charge: "ch_1" });
  }
  res.json({ received: true });
});
"#;

fn project(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

const SELECT: &str = "--select=effect-missing-idempotency-key";

#[test]
fn text_output_has_code_frame_handler_and_summary() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let o = run(&["check", ".", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("server.ts:10:11: effect-missing-idempotency-key"), "{out}");
    assert!(out.contains("handler: POST /webhooks/stripe (stripe)"), "{out}");
    assert!(out.contains("await stripe.refunds.create"), "{out}");
    assert!(out.contains("^^^^"), "{out}");
    assert!(out.contains("= help:"), "{out}");
    assert!(out.contains("Found 1 issue in 1 file (1 fixable)."), "{out}");
}

#[test]
fn check_is_the_default_command() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let o = run(&[".", SELECT, "--quiet"], dir.path());
    assert_eq!(o.status.code(), Some(1));
    assert!(!stdout(&o).contains("Found"));
}

#[test]
fn json_output_is_stable() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let o = run(&["check", ".", SELECT, "--format", "json"], dir.path());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let d = &v[0];
    assert_eq!(d["rule"], "effect-missing-idempotency-key");
    assert_eq!(d["file"], "server.ts");
    assert_eq!(d["line"], 10);
    assert_eq!(d["column"], 11);
    assert_eq!(d["end_line"], 10);
    assert_eq!(d["provider"], "stripe");
    assert_eq!(d["handler"], "POST /webhooks/stripe");
    assert_eq!(d["fixable"], true);
    assert_eq!(d["fix"]["applicability"], "safe");
    assert!(d["fix"]["edits"][0]["start"].is_u64());
}

#[test]
fn sarif_is_2_1_0_with_rule_help() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let o = run(&["check", ".", SELECT, "--format", "sarif"], dir.path());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["version"], "2.1.0");
    let run0 = &v["runs"][0];
    let rules = run0["tool"]["driver"]["rules"].as_array().unwrap();
    assert!(rules.len() >= 28);
    assert!(rules.iter().all(|r| r["help"]["text"].is_string() && r["shortDescription"]["text"].is_string()));
    let result = &run0["results"][0];
    assert_eq!(result["ruleId"], "effect-missing-idempotency-key");
    let idx = result["ruleIndex"].as_u64().unwrap() as usize;
    assert_eq!(rules[idx]["id"], "effect-missing-idempotency-key");
    assert_eq!(result["locations"][0]["physicalLocation"]["region"]["startLine"], 10);
}

#[test]
fn github_annotations() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let o = run(&["check", ".", SELECT, "--format", "github"], dir.path());
    assert!(stdout(&o).starts_with("::error file=server.ts,line=10,col=11,"), "{}", stdout(&o));
}

#[test]
fn rules_and_explain() {
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["rules"], dir.path());
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o).lines().count(), 28);
    let o = run(&["explain", "effect-missing-idempotency-key"], dir.path());
    assert!(stdout(&o).contains("## Why retries break it"));
    let o = run(&["explain", "no-such-rule"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown rule `no-such-rule`"));
}

#[test]
fn nearest_config_applies_per_package() {
    let dir = project(&[
        ("packages/a/server.ts", STRIPE_HANDLER),
        ("packages/b/server.ts", STRIPE_HANDLER),
        ("packages/b/retrysafe.json", r#"{ "ignore": ["effect-missing-idempotency-key"] }"#),
    ]);
    let o = run(&["check", ".", SELECT, "--format", "json"], dir.path());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let files: Vec<&str> = v.as_array().unwrap().iter().map(|d| d["file"].as_str().unwrap()).collect();
    assert_eq!(files, vec!["packages/a/server.ts"]);
}

#[test]
fn broken_config_names_file_and_field() {
    let dir = project(&[("server.ts", STRIPE_HANDLER), ("retrysafe.json", r#"{ "selekt": [] }"#)]);
    let o = run(&["check", "."], dir.path());
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("retrysafe.json: invalid config: unknown field `selekt`"), "{err}");
    let dir = project(&[("server.ts", STRIPE_HANDLER), ("retrysafe.json", r#"{ "ignore": ["nope"] }"#)]);
    let o = run(&["check", "."], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown rule `nope`"), "{}", stderr(&o));
    let o = run(&["check", ".", "--config", "missing.json"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing.json"), "{}", stderr(&o));
}

#[test]
fn suppressions_need_a_reason_and_must_suppress_something() {
    let with_reason = STRIPE_HANDLER.replace(
        "    await stripe.refunds.create",
        "    // retrysafe-ignore effect-missing-idempotency-key: refund is idempotent per charge\n    await stripe.refunds.create",
    );
    let dir = project(&[("server.ts", &with_reason)]);
    let o = run(&["check", ".", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));

    let no_reason = STRIPE_HANDLER.replace(
        "    await stripe.refunds.create",
        "    // retrysafe-ignore effect-missing-idempotency-key\n    await stripe.refunds.create",
    );
    let dir = project(&[("server.ts", &no_reason)]);
    let o = run(&["check", ".", SELECT], dir.path());
    assert!(stdout(&o).contains("invalid-suppression"), "{}", stdout(&o));

    let unused = "// retrysafe-ignore-file effect-missing-idempotency-key: legacy\nexport const x = 1;\n".to_string();
    let dir = project(&[("webhook.ts", &unused)]);
    let o = run(&["check", ".", SELECT], dir.path());
    assert!(stdout(&o).contains("unused-suppression"), "{}", stdout(&o));

    let file_wide = format!("// retrysafe-ignore-file effect-missing-idempotency-key: legacy app\n{STRIPE_HANDLER}");
    let dir = project(&[("server.ts", &file_wide)]);
    let o = run(&["check", ".", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn stdin_filename_reads_source_from_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = bin()
        .args(["check", "--stdin-filename", "src/server.ts", SELECT, "--format", "json"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(STRIPE_HANDLER.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[0]["file"], "src/server.ts");
}

#[test]
fn bad_input_is_reported_per_file_and_the_run_goes_on() {
    let dir =
        project(&[("server.ts", STRIPE_HANDLER), ("broken.ts", "app.post('/webhook', async (req, res) => { if ( {\n")]);
    std::fs::write(dir.path().join("binary.ts"), b"\x00\x01\x02webhook\x00").unwrap();
    std::fs::write(dir.path().join("latin1.ts"), b"// webhook caf\xe9\n").unwrap();
    std::fs::write(dir.path().join("huge.js"), format!("// webhook\n{}", "x = 1;\n".repeat(400_000))).unwrap();
    let o = run(&["check", ".", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("binary.ts: skipped: binary file"), "{err}");
    assert!(err.contains("latin1.ts: skipped: not valid UTF-8"), "{err}");
    assert!(err.contains("huge.js: skipped:"), "{err}");
    assert!(stdout(&o).contains("server.ts:10:11"), "{}", stdout(&o));

    let o = run(&["check", "does-not-exist"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("does-not-exist"), "{}", stderr(&o));

    let o = run(&["check", "--no-such-flag"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    let o = run(&["check", "--select", "not-a-rule", "."], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown rule `not-a-rule`"));
}

#[test]
fn unreadable_directory_is_an_error_line() {
    let dir = project(&[("server.ts", STRIPE_HANDLER), ("locked/x.ts", "export {}")]);
    let locked = dir.path().join("locked");
    set_mode(dir.path(), 0o755);
    set_mode(&dir.path().join("server.ts"), 0o644);
    set_mode(&locked, 0o000);
    // Root reads everything: run as `nobody` so the permission bits apply.
    let o = if is_root() {
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                env!("CARGO_BIN_EXE_retrysafe"),
                "check",
                ".",
                SELECT,
            ])
            .current_dir(dir.path())
            .output()
            .unwrap()
    } else {
        run(&["check", ".", SELECT], dir.path())
    };
    set_mode(&locked, 0o755);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("locked: Permission denied"), "{}", stderr(&o));
    assert!(stdout(&o).contains("server.ts:10:11"), "the rest of the run goes on: {}", stdout(&o));
}

fn is_root() -> bool {
    std::process::Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn fix_dry_run_then_write_is_byte_identical_and_atomic() {
    let crlf = STRIPE_HANDLER.replace('\n', "\r\n");
    let dir = project(&[("server.ts", &crlf), ("untouched.ts", "export const webhook = 1;\n")]);
    let path: PathBuf = dir.path().join("server.ts");
    set_mode(&path, 0o640);
    let o = run(&["fix", ".", SELECT, "--format", "json"], dir.path());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let dry = v["files"][0]["fixed"].as_str().unwrap().to_string();
    assert!(dry.contains("{ idempotencyKey: `refund:${event.id}` }"));
    assert!(dry.contains("\r\n") && !dry.replace("\r\n", "").contains('\n'), "CRLF kept");

    let o = run(&["fix", ".", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(1), "pending changes exit 1");
    assert!(
        stdout(&o).contains(
            "+    await stripe.refunds.create({ charge: \"ch_1\" }, { idempotencyKey: `refund:${event.id}` });"
        ),
        "{}",
        stdout(&o)
    );
    assert!(stderr(&o).contains("Would fix 1 issue in 1 file"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), crlf, "dry run writes nothing");

    let untouched_before = std::fs::metadata(dir.path().join("untouched.ts")).unwrap().modified().unwrap();
    let o = run(&["fix", ".", SELECT, "--write"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("Fixed 1 issue in 1 file"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), dry, "--write equals the dry run");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o640);
    assert_eq!(std::fs::metadata(dir.path().join("untouched.ts")).unwrap().modified().unwrap(), untouched_before);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty());

    let o = run(&["fix", ".", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(0), "second run changes nothing: {}", stdout(&o));
}

#[test]
fn fix_rejects_a_malformed_guard_spec() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let o = run(&["fix", ".", "--guard", "no-hash"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("MODULE#EXPORT"));
}

#[test]
fn safe_only_skips_unsafe_fixes_in_dry_run_and_write() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let o = run(&["fix", ".", "--safe-only", "--format", "json"], dir.path());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for f in v["files"].as_array().unwrap() {
        for a in f["applied"].as_array().unwrap() {
            assert_eq!(a["applicability"], "safe", "{a}");
        }
    }
}

const PRISMA_STRIPE_ROUTE: &str = r#"import Stripe from "stripe";
import { prisma } from "@/lib/prisma";

const stripe = new Stripe(process.env.STRIPE_KEY!);

export async function POST(req: Request) {
  const body = await req.text();
  const event = stripe.webhooks.constructEvent(body, req.headers.get("stripe-signature")!, "whsec");
  if (event.type === "checkout.session.completed") {
    const session = event.data.object as Stripe.Checkout.Session;
    await prisma.order.create({ data: { sessionId: session.id } });
    await stripe.refunds.create({ charge: "ch_1" });
  }
  return new Response("ok");
}
"#;

fn prisma_project() -> tempfile::TempDir {
    project(&[
        // the guard wrap comes from unguarded-side-effect, a preview rule
        ("retrysafe.json", r#"{ "preview": true }"#),
        ("tsconfig.json", r#"{ "compilerOptions": { "baseUrl": ".", "paths": { "@/*": ["./src/*"] } } }"#),
        (
            "src/lib/prisma.ts",
            "import { PrismaClient } from \"@prisma/client\";\nexport const prisma = new PrismaClient();\n",
        ),
        ("src/app/api/stripe/route.ts", PRISMA_STRIPE_ROUTE),
    ])
}

#[test]
fn write_applies_safe_fixes_only_and_names_the_flag_for_the_rest() {
    let dir = prisma_project();
    let route = dir.path().join("src/app/api/stripe/route.ts");
    let guard = ["--guard", "@/lib/guard#guard"];
    let o = run(&["fix", ".", guard[0], guard[1], "--no-color"], dir.path());
    assert_eq!(o.status.code(), Some(1));
    let diff = stdout(&o);
    assert!(diff.contains("[unsafe (review)] wrap the handler's work"), "{diff}");
    assert!(diff.contains("effect-missing-idempotency-key [safe]"), "{diff}");
    assert!(stderr(&o).contains("`--write` applies only the safe ones"), "{}", stderr(&o));

    let o = run(&["fix", ".", guard[0], guard[1], "--write"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("review fixes held back") && stderr(&o).contains("`--unsafe` applies them"),
        "{}",
        stderr(&o)
    );
    let fixed = std::fs::read_to_string(&route).unwrap();
    assert!(fixed.contains("idempotencyKey: `refund:${event.id}`"), "the safe fix is applied: {fixed}");
    assert!(!fixed.contains("guard.run"), "the review fix is not: {fixed}");
    assert!(!dir.path().join("src/lib/guard.ts").exists(), "no file is created without --unsafe");
}

#[test]
fn a_missing_guard_module_is_created_from_the_handler_client_and_writes_go_to_tx() {
    let dir = prisma_project();
    let o = run(&["fix", ".", "--guard", "@/lib/guard#guard", "--write", "--unsafe-fixes"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let guard = std::fs::read_to_string(dir.path().join("src/lib/guard.ts")).unwrap();
    assert!(guard.contains("import { prismaGuard } from \"@retrysafe/guard\";"), "{guard}");
    assert!(guard.contains("import { prisma } from \"@/lib/prisma\";"), "{guard}");
    assert!(guard.contains("export const guard = prismaGuard(prisma);"), "{guard}");
    let fixed = std::fs::read_to_string(dir.path().join("src/app/api/stripe/route.ts")).unwrap();
    assert!(fixed.contains("async (tx) => {"), "{fixed}");
    assert!(fixed.contains("await tx.order.create("), "the write runs in the guard's transaction: {fixed}");
    assert!(!fixed.contains("prisma.order"), "{fixed}");
    let o = run(&["fix", ".", "--guard", "@/lib/guard#guard"], dir.path());
    assert_eq!(o.status.code(), Some(0), "a second run changes nothing: {}", stdout(&o));
}

#[test]
fn shipped_schema_lists_every_rule_and_config_field() {
    let schema: serde_json::Value = serde_json::from_str(include_str!("../retrysafe.schema.json")).unwrap();
    let ids: Vec<&str> =
        schema["definitions"]["ruleId"]["enum"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    for rule in retrysafe::rules::registry() {
        assert!(ids.contains(&rule.id), "schema misses {}", rule.id);
    }
    assert_eq!(ids.len(), retrysafe::rules::registry().len());
    let providers: Vec<&str> =
        schema["definitions"]["provider"]["enum"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    let known: Vec<&str> = retrysafe::model::Provider::ALL.iter().map(|p| p.name()).collect();
    assert_eq!(providers, known, "the schema's providers follow Provider::ALL");
    // Every field the schema documents is accepted by the loader.
    let dir = project(&[(
        "retrysafe.json",
        r#"{ "$schema": "x", "root": true, "extends": [], "select": [], "ignore": [], "severity": { "ack-timing": "warning" },
             "providers": { "shopify": { "keyHeader": "x-shopify-event-id" } }, "retryWindows": { "stripe": 259200 },
             "dedupeTtlSeconds": 604800, "guard": "@/lib/guard#guard", "effectWrappers": ["sendInvoice"], "bestEffort": ["track"], "preview": true }"#,
    )]);
    let props: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
    assert_eq!(props.len(), 14);
    assert!(retrysafe::config::Config::load(&dir.path().join("retrysafe.json"), retrysafe::rules::check_id).is_ok());
}

#[test]
fn configured_effect_wrappers_count_as_effects() {
    let handler = r#"import express from "express";
import Stripe from "stripe";
import { syncToErp } from "@acme/erp";

const stripe = new Stripe("sk");
const app = express();

app.post("/webhooks/stripe", express.raw({ type: "application/json" }), async (req, res) => {
  const event = stripe.webhooks.constructEvent(req.body, req.headers["stripe-signature"] as string, "whsec");
  await syncToErp(event.data.object);
  res.json({ received: true });
});
"#;
    let select = "--select=unguarded-side-effect";
    let dir = project(&[("server.ts", handler)]);
    let o = run(&["check", ".", select], dir.path());
    assert_eq!(o.status.code(), Some(0), "unknown package calls are not effects by default: {}", stdout(&o));
    let dir = project(&[("server.ts", handler), ("retrysafe.json", r#"{ "effectWrappers": ["syncToErp"] }"#)]);
    let o = run(&["check", ".", select], dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).contains("syncToErp"), "{}", stdout(&o));
}

#[test]
fn fix_with_stdin_prints_the_fixed_source_and_writes_nothing() {
    let dir = project(&[("server.ts", "// on disk\n")]);
    let mut child = bin()
        .args(["fix", "--stdin-filename", "server.ts", SELECT, "--write"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(STRIPE_HANDLER.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("{ idempotencyKey: `refund:${event.id}` }"), "{out}");
    assert!(out.starts_with("import express"), "{out}");
    assert_eq!(std::fs::read_to_string(dir.path().join("server.ts")).unwrap(), "// on disk\n");
}

#[test]
fn prefilter_keeps_generic_worker_constructors() {
    let worker = r#"import { Worker } from "bullmq";
export const w = new Worker<{ to: string }>("emails", async (job) => {
  await emailQueue.add("followup", { to: job.data.to });
});
"#;
    let dir = project(&[("src/worker.ts", worker)]);
    let o = run(&["check", ".", "--select=queue-add-without-job-id"], dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
}

#[test]
fn every_rule_is_documented() {
    let readme = include_str!("../README.md");
    for rule in retrysafe::rules::registry() {
        assert!(readme.contains(&format!("`{}`", rule.id)), "README misses {}", rule.id);
        for section in ["## What it finds", "## Why retries break it", "## Bad", "## Good", "## Fix"] {
            assert!(rule.docs.contains(section), "{}: docs miss `{section}`", rule.id);
        }
    }
}

/// Handler shapes seen in real webhook code (paraphrased): each file must yield one handler
/// with the framework, provider and event key `dump-tree` prints.
#[test]
fn dump_tree_recognises_real_world_http_handler_shapes() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "pages/api/cjs-hook.js",
            "const handler = async (req, res) => {\n  const event = stripe.webhooks.constructEvent(req.body, req.headers['stripe-signature'], 's');\n  res.json({ ok: true });\n};\nmodule.exports = handler;\n",
            "NextPagesApi provider=Some(Stripe) key=Some(\"${event.id}\")",
        ),
        (
            "pages/api/wrapped-hook.ts",
            "const handler = async (req, res) => {\n  const event = stripe.webhooks.constructEvent(req.body, req.headers['stripe-signature'], 's');\n  res.json({ ok: true });\n};\nexport default withSentry(handler);\n",
            "NextPagesApi provider=Some(Stripe)",
        ),
        (
            "src/app/api/pay/route.ts",
            "async function handle(req: Request) {\n  const event = await stripe.webhooks.constructEventAsync(await req.text(), req.headers.get('stripe-signature')!, 's');\n  return new Response(null);\n}\nexport { handle as POST };\n",
            "NextAppRouter provider=Some(Stripe) key=Some(\"${event.id}\")",
        ),
        (
            "srv/gh.ts",
            "import { App } from 'octokit';\nconst app = new App({ appId: 1, privateKey: 'k', webhooks: { secret: 's' } });\napp.webhooks.on('issues.opened', async ({ id, payload }) => {\n  await label(payload.issue.number);\n});\n",
            "Octokit provider=Some(Github) key=Some(\"${id}\")",
        ),
        (
            "srv/fastify-routes.ts",
            "export async function routes(app) {\n  app.post('/hooks/stripe', { config: { rawBody: true }, handler: async (request, reply) => {\n    const event = stripe.webhooks.constructEvent(request.rawBody, request.headers['stripe-signature'], 's');\n    return reply.send({ ok: true });\n  } });\n}\n",
            "Fastify provider=Some(Stripe)",
        ),
        (
            "app/routes/webhooks.app.uninstalled.tsx",
            "export const action = async ({ request }) => {\n  const { shop } = await authenticate.webhook(request);\n  await db.session.deleteMany({ where: { shop } });\n  return new Response();\n};\n",
            "Remix provider=Some(Shopify) key=Some(\"${request.headers.get(\\\"x-shopify-webhook-id\\\")}\")",
        ),
        (
            "app/routes/billing.webhook.ts",
            "export const action = async ({ request }) => {\n  const { id, type } = stripe.webhooks.constructEvent(await request.text(), request.headers.get('stripe-signature'), 's');\n  return new Response(type);\n};\n",
            "Remix provider=Some(Stripe) key=Some(\"${id}\")",
        ),
    ];
    for (name, text, expected) in cases {
        let dir = project(&[(name, text)]);
        let out = run(&["dump-tree", name], dir.path());
        let handlers: Vec<String> =
            stdout(&out).lines().filter(|l| l.starts_with("handler:")).map(str::to_string).collect();
        assert_eq!(handlers.len(), 1, "{name}: {handlers:?}\n{}", stderr(&out));
        assert!(handlers[0].contains(expected), "{name}: {} lacks {expected}", handlers[0]);
    }
}

#[test]
fn configured_warnings_are_reported_but_do_not_fail() {
    let dir = project(&[
        ("server.ts", STRIPE_HANDLER),
        ("retrysafe.json", r#"{ "severity": { "effect-missing-idempotency-key": "warning" } }"#),
    ]);
    let o = run(&["check", ".", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("effect-missing-idempotency-key (warning)"), "{}", stdout(&o));
    let o = run(&["check", ".", SELECT, "--format", "json"], dir.path());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[0]["severity"], "warning");
    let o = run(&["check", ".", SELECT, "--format", "sarif"], dir.path());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["runs"][0]["results"][0]["level"], "warning");
}

#[test]
fn dry_run_diff_applies_with_git_and_equals_write() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let o = run(&["fix", ".", "--no-color", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(1));
    let patch = stdout(&o);
    assert!(patch.contains(" @@ effect-missing-idempotency-key [safe]"), "{patch}");
    std::fs::write(dir.path().join("fix.patch"), &patch).unwrap();
    let git = |args: &[&str]| Command::new("git").args(args).current_dir(dir.path()).output().unwrap();
    assert!(git(&["init", "-q"]).status.success());
    let applied = git(&["apply", "fix.patch"]);
    assert!(applied.status.success(), "{}", String::from_utf8_lossy(&applied.stderr));
    let patched = std::fs::read_to_string(dir.path().join("server.ts")).unwrap();
    std::fs::write(dir.path().join("server.ts"), STRIPE_HANDLER).unwrap();
    std::fs::remove_file(dir.path().join("fix.patch")).unwrap();
    let o = run(&["fix", ".", "--write", "--allow-dirty", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(dir.path().join("server.ts")).unwrap(), patched);
}

#[test]
fn a_fix_inside_a_guard_wrap_is_indented_for_the_wrapped_code() {
    // The guard wrap re-indents the work; the supabase error check added after an insert inside
    // that work must follow the new indentation, not the one the line had before the wrap.
    let handler = r#"import { NextResponse } from "next/server";
import Stripe from "stripe";
import { createClient } from "@supabase/supabase-js";

const stripe = new Stripe(process.env.STRIPE_KEY!);
const supabase = createClient(process.env.SB_URL!, process.env.SB_KEY!);

export async function POST(req: Request) {
  const body = await req.text();
  const event = stripe.webhooks.constructEvent(body, req.headers.get("stripe-signature")!, "whsec");
  if (event.type === "checkout.session.completed") {
    const session = event.data.object as Stripe.Checkout.Session;
    await supabase.from("orders").insert({ session_id: session.id, paid: true });
    console.log("order stored");
  }
  return NextResponse.json({ received: true });
}
"#;
    let dir = project(&[("app/api/stripe/route.ts", handler)]);
    let o = run(
        &[
            "fix",
            ".",
            "--guard",
            "@/lib/guard#guard",
            "--select=unguarded-side-effect,swallowed-error-returns-2xx",
            "--write",
            "--unsafe",
        ],
        dir.path(),
    );
    assert!(o.status.code().is_some_and(|c| c <= 1), "{}", stderr(&o));
    let fixed = std::fs::read_to_string(dir.path().join("app/api/stripe/route.ts")).unwrap();
    assert!(fixed.contains("guard.run(`stripe:${event.id}`"), "{fixed}");
    assert!(fixed.contains("\n      const { error } = await supabase"), "{fixed}");
    assert!(fixed.contains("\n      if (error) throw error;\n      console.log"), "{fixed}");
}

// ---- CLI conventions (issue 12) ----

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn unknown_subcommands_and_rules_get_a_did_you_mean() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let o = run(&["chek", "."], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown command `chek` (did you mean `check`?)"), "{}", stderr(&o));
    assert!(!stdout(&o).contains("No issues found"), "{}", stdout(&o));
    let o = run(&["check", ".", "--select", "ack-timming"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("did you mean `ack-timing`?"), "{}", stderr(&o));
    let o = run(&["explain", "effect-missing-idempotency"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("did you mean `effect-missing-idempotency-key`?"), "{}", stderr(&o));
    // A directory that happens to look like a typo is still a path to check.
    let dir = project(&[("chek/server.ts", STRIPE_HANDLER)]);
    let o = run(&["chek", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

#[test]
fn suppression_ids_are_rule_ids_for_select_and_explain() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    for id in ["unused-suppression", "invalid-suppression"] {
        let o = run(&["explain", id], dir.path());
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert!(stdout(&o).starts_with(&format!("# {id}")), "{}", stdout(&o));
        let o = run(&["check", ".", "--select", id], dir.path());
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
}

#[test]
fn output_file_and_exit_zero() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let o = run(&["check", ".", SELECT, "--format", "json", "--output-file", "report.json", "--exit-zero"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("report.json")).unwrap()).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 1);
    // --exit-zero never hides an error.
    let o = run(&["check", "missing-dir", "--exit-zero"], dir.path());
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn concise_junit_and_gitlab_formats() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let o = run(&["check", ".", SELECT, "--format", "concise"], dir.path());
    assert_eq!(o.status.code(), Some(1));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("server.ts:10:11: effect-missing-idempotency-key [fixable] "), "{out}");
    assert_eq!(lines[1], "Found 1 issue in 1 file (1 fixable).");

    let o = run(&["check", ".", SELECT, "--format", "junit"], dir.path());
    let xml = stdout(&o);
    assert!(xml.starts_with("<?xml"), "{xml}");
    assert!(xml.contains(r#"<testsuites name="retrysafe" tests="1" failures="1">"#), "{xml}");
    assert!(xml.contains(r#"<testcase name="effect-missing-idempotency-key 10:11" classname="server.ts""#), "{xml}");
    assert_eq!(count(&xml, "<failure "), 1);

    let o = run(&["check", ".", SELECT, "--format", "gitlab"], dir.path());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[0]["check_name"], "effect-missing-idempotency-key");
    assert_eq!(v[0]["location"]["path"], "server.ts");
    assert_eq!(v[0]["location"]["lines"]["begin"], 10);
    assert_eq!(v[0]["severity"], "major");
    let fingerprint = v[0]["fingerprint"].as_str().unwrap().to_string();
    assert_eq!(fingerprint.len(), 16);
    // The fingerprint follows the line's text, not its number.
    std::fs::write(dir.path().join("server.ts"), format!("\n\n{STRIPE_HANDLER}")).unwrap();
    let o = run(&["check", ".", SELECT, "--format", "gitlab"], dir.path());
    let moved: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(moved[0]["location"]["lines"]["begin"], 12);
    assert_eq!(moved[0]["fingerprint"], fingerprint.as_str());
}

#[test]
fn config_allows_comments_and_trailing_commas() {
    let config = "{\n  // why: refunds are keyed upstream\n  \"ignore\": [\"effect-missing-idempotency-key\",],\n  /* a\n block */\n}\n";
    let dir = project(&[("server.ts", STRIPE_HANDLER), ("retrysafe.json", config)]);
    let o = run(&["check", ".", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("No issues found."));
    // An error after a block comment still names its own line.
    let dir = project(&[("server.ts", STRIPE_HANDLER), ("retrysafe.json", "{\n/* one\ntwo\n*/\n \"ignore\": [\n}\n")]);
    let o = run(&["check", "."], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("line 6"), "{}", stderr(&o));
}

#[test]
fn extends_and_root_compose_package_configs() {
    let dir = project(&[
        ("retrysafe.json", r#"{ "root": true, "ignore": ["effect-missing-idempotency-key"] }"#),
        ("packages/a/retrysafe.json", r#"{ "extends": "//", "severity": { "ack-timing": "warning" } }"#),
        ("packages/a/server.ts", STRIPE_HANDLER),
        ("packages/b/retrysafe.json", r#"{ "severity": { "ack-timing": "warning" } }"#),
        ("packages/b/server.ts", STRIPE_HANDLER),
        ("packages/c/retrysafe.json", r#"{ "extends": "../shared.json" }"#),
        ("packages/c/server.ts", STRIPE_HANDLER),
        ("packages/shared.json", r#"{ "ignore": ["effect-missing-idempotency-key"] }"#),
    ]);
    let o = run(&["check", ".", SELECT, "--format", "json"], dir.path());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let files: Vec<&str> = v.as_array().unwrap().iter().map(|d| d["file"].as_str().unwrap()).collect();
    // a inherits the root's ignore, c its shared file's; b is the nearest config alone.
    assert_eq!(files, vec!["packages/b/server.ts"], "{}", stderr(&o));

    let dir = project(&[
        ("a.json", r#"{ "extends": "b.json" }"#),
        ("b.json", r#"{ "extends": "a.json" }"#),
        ("server.ts", STRIPE_HANDLER),
    ]);
    let o = run(&["check", ".", "--config", "a.json"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("`extends` forms a cycle"), "{}", stderr(&o));
    let dir = project(&[("retrysafe.json", r#"{ "extends": "//" }"#), ("server.ts", STRIPE_HANDLER)]);
    let o = run(&["check", "."], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("no retrysafe.json with `\"root\": true`"), "{}", stderr(&o));
}

// ---- Robustness (issue 12) ----

#[test]
fn a_broken_config_is_one_error_and_no_all_clear() {
    let dir = project(&[
        ("a.ts", STRIPE_HANDLER),
        ("b.ts", STRIPE_HANDLER),
        ("c.ts", "export const x = 1;\n"),
        ("retrysafe.json", r#"{ "ignore": "#),
    ]);
    let o = run(&["check", "."], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(!stdout(&o).contains("No issues found"), "{}", stdout(&o));
    assert_eq!(count(&stderr(&o), "retrysafe.json: invalid config"), 1, "{}", stderr(&o));
}

#[test]
fn a_config_must_be_an_object_in_a_file() {
    let dir = project(&[("server.ts", STRIPE_HANDLER), ("retrysafe.json", "[]")]);
    let o = run(&["check", "."], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("retrysafe.json: invalid config: must be a JSON object"), "{}", stderr(&o));
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    std::fs::create_dir(dir.path().join("retrysafe.json")).unwrap();
    let o = run(&["check", "."], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("retrysafe.json: invalid config: is a directory"), "{}", stderr(&o));
}

#[test]
fn stale_temp_files_of_an_interrupted_write_are_removed() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let stale = dir.path().join(".retrysafe-killed.tmp");
    let live = dir.path().join(".retrysafe-live.tmp");
    std::fs::write(&stale, "partial").unwrap();
    std::fs::write(&live, "being written").unwrap();
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    std::fs::File::options().write(true).open(&stale).unwrap().set_modified(hour_ago).unwrap();
    let o = run(&["fix", ".", SELECT, "--write"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stale.exists(), "the stale temporary file is still there");
    assert!(live.exists(), "a fresh temporary file (another run's) was removed");
    assert!(stderr(&o).contains("removed .retrysafe-killed.tmp"), "{}", stderr(&o));
}

#[test]
fn code_frames_of_a_huge_line_are_capped() {
    let one_line = STRIPE_HANDLER.replace('\n', " ");
    let text = format!("{one_line} /*{}*/\n", "x".repeat(1_900_000));
    let dir = project(&[("min.ts", &text)]);
    let o = run(&["check", ".", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("effect-missing-idempotency-key"), "{}", &out[..out.len().min(2000)]);
    assert!(out.len() < 10_000, "{} bytes of output", out.len());
}

#[test]
fn github_and_sarif_escape_paths() {
    let dir = project(&[("a,b:c%d/my dir#1/server.ts", STRIPE_HANDLER)]);
    let o = run(&["check", ".", SELECT, "--format", "github"], dir.path());
    assert!(stdout(&o).contains("file=a%2Cb%3Ac%25d/my dir#1/server.ts,line=10,"), "{}", stdout(&o));
    let o = run(&["check", ".", SELECT, "--format", "sarif"], dir.path());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let uri = &v["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"];
    assert_eq!(uri, "a%2Cb%3Ac%25d/my%20dir%231/server.ts");
}

const DELEGATING_HANDLER: &str = r#"import express from "express";
import Stripe from "stripe";
import { refund } from "./billing";

const stripe = new Stripe(process.env.STRIPE_KEY!);
const app = express();

app.post("/webhooks/stripe", express.raw({ type: "application/json" }), async (req, res) => {
  const event = stripe.webhooks.constructEvent(req.body, req.headers["stripe-signature"] as string, "whsec");
  await refund(event);
  res.json({ received: true });
});
"#;

const BILLING: &str = r#"import Stripe from "stripe";
const stripe = new Stripe(process.env.STRIPE_KEY!);

export async function refund(event: Stripe.Event) {
  // retrysafe-ignore effect-missing-idempotency-key: the charge id keys refunds upstream
  await stripe.refunds.create({ charge: "ch_1" });
}
"#;

#[test]
fn a_callee_checked_alone_has_no_false_unused_suppression() {
    let dir = project(&[("server.ts", DELEGATING_HANDLER), ("billing.ts", BILLING)]);
    let o = run(&["check", ".", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(!stdout(&o).contains("unused-suppression"), "{}", stdout(&o));
    let o = run(&["check", "billing.ts", SELECT], dir.path());
    assert!(!stdout(&o).contains("unused-suppression"), "{}", stdout(&o));
    // With the handler among the files checked, a stale suppression is still reported.
    let stale = BILLING.replace("await stripe.refunds.create({ charge: \"ch_1\" });", "return;");
    std::fs::write(dir.path().join("billing.ts"), stale).unwrap();
    let o = run(&["check", "server.ts", "billing.ts", SELECT], dir.path());
    assert!(stdout(&o).contains("unused-suppression"), "{}", stdout(&o));
}

#[test]
fn stdin_filename_reports_only_the_file_from_stdin() {
    let unsuppressed = BILLING
        .replace("  // retrysafe-ignore effect-missing-idempotency-key: the charge id keys refunds upstream\n", "");
    let dir = project(&[("server.ts", DELEGATING_HANDLER), ("billing.ts", &unsuppressed)]);
    // Through the handler, the finding is in billing.ts.
    let o = run(&["check", ".", SELECT, "--format", "json"], dir.path());
    assert!(stdout(&o).contains("billing.ts"), "{}", stdout(&o));
    let mut child = bin()
        .args(["check", "--stdin-filename", "server.ts", SELECT, "--format", "json"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(DELEGATING_HANDLER.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 0, "{v}");
}

#[test]
fn a_handler_file_with_a_syntax_error_gets_a_note() {
    let dir = project(&[("server.ts", &format!("{STRIPE_HANDLER}\nconst = ;\n"))]);
    let o = run(&["check", ".", "--select=ack-timing"], dir.path());
    assert!(stdout(&o).contains("No issues found."), "{}", stdout(&o));
    assert!(
        stderr(&o).contains("note: server.ts:15:1: syntax error; the file was analysed as far as it parses"),
        "{}",
        stderr(&o)
    );
}

// ---- init and doctor (issue 12) ----

#[test]
fn init_sets_up_a_pg_project_once_and_refuses_to_overwrite() {
    let dir = project(&[
        ("package.json", r#"{ "name": "app", "type": "module", "dependencies": { "pg": "^8", "ioredis": "^5" } }"#),
        (
            "tsconfig.json",
            "{ // JSONC\n \"compilerOptions\": { \"baseUrl\": \".\", \"paths\": { \"@/*\": [\"./src/*\"] } } }",
        ),
        ("src/db.ts", "import pg from \"pg\";\nexport const pool = new pg.Pool();\n"),
        ("migrations/001_init.sql", "CREATE TABLE orders (id text PRIMARY KEY);\n"),
        ("src/server.ts", STRIPE_HANDLER),
    ]);
    let o = run(&["init"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let guard = std::fs::read_to_string(dir.path().join("src/lib/guard.ts")).unwrap();
    assert!(guard.contains("import { postgresGuard } from \"@retrysafe/guard\";"), "{guard}");
    assert!(guard.contains("import { pool } from \"../db\";"), "{guard}");
    assert!(guard.contains("export const guard = postgresGuard(pool);"), "{guard}");
    let config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("retrysafe.json")).unwrap()).unwrap();
    assert_eq!(config["guard"], "@/lib/guard#guard");
    assert!(config["$schema"].as_str().unwrap().ends_with("retrysafe.schema.json"));
    let sql = std::fs::read_to_string(dir.path().join("migrations/retrysafe_processed_events.sql")).unwrap();
    assert!(sql.contains("key          text        PRIMARY KEY"), "{sql}");
    assert!(stdout(&o).contains("retrysafe check"), "{}", stdout(&o));
    // The guard the config names is the one `fix` uses.
    let o = run(&["fix", "src", SELECT], dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));

    let o = run(&["init"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(count(&stdout(&o), "unchanged "), 3, "{}", stdout(&o));
    std::fs::write(dir.path().join("retrysafe.json"), "{ \"ignore\": [] }\n").unwrap();
    let o = run(&["init"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("retrysafe.json already exists with other content"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(dir.path().join("retrysafe.json")).unwrap(), "{ \"ignore\": [] }\n");
    let o = run(&["init", "--force"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read_to_string(dir.path().join("retrysafe.json")).unwrap().contains("@/lib/guard#guard"));
}

#[test]
fn init_sets_up_a_mysql2_project_with_the_mysql_guard() {
    let dir = project(&[
        ("package.json", r#"{ "name": "app", "dependencies": { "mysql2": "^3", "ioredis": "^5" } }"#),
        ("tsconfig.json", r#"{ "compilerOptions": { "baseUrl": ".", "paths": { "@/*": ["./src/*"] } } }"#),
        (
            "src/db.ts",
            "import mysql from \"mysql2/promise\";\nexport const pool = mysql.createPool(process.env.MYSQL_URL!);\n",
        ),
        ("src/server.ts", STRIPE_HANDLER),
    ]);
    let o = run(&["init"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let guard = std::fs::read_to_string(dir.path().join("src/lib/guard.ts")).unwrap();
    assert!(guard.contains("import { mysqlGuard } from \"@retrysafe/guard\";"), "{guard}");
    assert!(guard.contains("import { pool } from \"../db\";"), "{guard}");
    assert!(guard.contains("export const guard = mysqlGuard(pool);"), "{guard}");
    let sql = std::fs::read_to_string(dir.path().join("sql/retrysafe_processed_events.sql")).unwrap();
    // Binary keys: MySQL's default collations would make `evt_A` and `evt_a` one claim.
    assert!(sql.contains("`key`        VARBINARY(512) NOT NULL PRIMARY KEY"), "{sql}");
}

#[test]
fn init_keeps_a_project_that_is_already_set_up() {
    // The bundled example has its own guard module and no retrysafe.json.
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/stripe-express-prisma");
    let dir = tempfile::tempdir().unwrap();
    for rel in ["package.json", "tsconfig.json", "prisma/schema.prisma", "src/lib/guard.ts", "src/lib/clients.ts"] {
        let to = dir.path().join(rel);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(example.join(rel), &to).unwrap();
    }
    let own_guard = std::fs::read_to_string(dir.path().join("src/lib/guard.ts")).unwrap();
    let o = run(&["init"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("unchanged src/lib/guard.ts"), "{}", stdout(&o));
    assert_eq!(std::fs::read_to_string(dir.path().join("src/lib/guard.ts")).unwrap(), own_guard);
    // The example's ProcessedEvent model is another table: the claim table gets its own name.
    let schema = std::fs::read_to_string(dir.path().join("prisma/schema.prisma")).unwrap();
    assert!(schema.contains("model RetrysafeProcessedEvent {"), "{schema}");
    assert_eq!(schema.matches("@@map(\"processed_events\")").count(), 1, "{schema}");
}

#[test]
fn init_without_an_alias_or_a_client_says_what_it_could_not_do() {
    let dir = project(&[("package.json", r#"{ "name": "app", "dependencies": { "ioredis": "^5" } }"#)]);
    let o = run(&["init"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let guard = std::fs::read_to_string(dir.path().join("lib/guard.js")).unwrap();
    assert!(guard.contains("const { redisGuard } = require(\"@retrysafe/guard\");"), "{guard}");
    assert!(guard.contains("module.exports = { guard };"), "{guard}");
    assert!(stdout(&o).contains("no `paths` alias"), "{}", stdout(&o));
    let config = std::fs::read_to_string(dir.path().join("retrysafe.json")).unwrap();
    assert!(!config.contains("\"guard\""), "{config}");

    let dir = project(&[("package.json", r#"{ "name": "app", "dependencies": { "drizzle-orm": "^0.36" } }"#)]);
    let o = run(&["init"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("no `export const db = drizzle(...)` was found"), "{}", stdout(&o));
    assert!(!dir.path().join("lib/guard.js").exists());

    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let o = run(&["init"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("package.json: not found"), "{}", stderr(&o));
    let dir = project(&[("package.json", "{ nope")]);
    let o = run(&["init"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("package.json: invalid JSON"), "{}", stderr(&o));
}

#[test]
fn doctor_shows_config_guard_platform_and_handlers() {
    let dir = project(&[
        ("packages/a/retrysafe.json", r#"{ "guard": "@/lib/guard#guard", "ignore": ["ack-timing"] }"#),
        ("packages/a/tsconfig.json", r#"{ "compilerOptions": { "paths": { "@/*": ["./src/*"] } } }"#),
        (
            "packages/a/src/lib/guard.ts",
            "import { redisGuard } from \"@retrysafe/guard\";\nexport const guard = redisGuard(r);\n",
        ),
        ("packages/a/src/server.ts", STRIPE_HANDLER),
        ("packages/b/retrysafe.json", r#"{ "guard": "@acme/guard#guard" }"#),
        ("packages/b/server.ts", DELEGATING_HANDLER),
        ("packages/b/billing.ts", BILLING),
    ]);
    let o = run(&["doctor"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains(&format!("retrysafe {} on ", env!("CARGO_PKG_VERSION"))), "{out}");
    assert!(out.contains(std::env::consts::OS), "{out}");
    assert!(out.contains("packages/a/retrysafe.json: 2 files"), "{out}");
    assert!(out.contains("rules: ignore ack-timing"), "{out}");
    assert!(out.contains("guard: @/lib/guard#guard -> packages/a/src/lib/guard.ts (redisGuard)"), "{out}");
    assert!(
        out.contains("guard: @acme/guard#guard does not resolve to a project file from packages/b/billing.ts"),
        "{out}"
    );
    assert!(out.contains("handlers: 2 in 2 files"), "{out}");
    assert!(out.contains("packages/a/src/server.ts:7:"), "{out}");
    assert!(out.contains("POST /webhooks/stripe (Express, stripe"), "{out}");

    let dir = project(&[("server.ts", STRIPE_HANDLER), ("retrysafe.json", "{")]);
    let o = run(&["doctor"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("retrysafe.json: invalid config"), "{}", stdout(&o));
}

#[test]
fn overlapping_rules_report_once_after_selection_and_suppression() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    let at_refund = |args: &[&str]| -> Vec<String> {
        let o = run(args, dir.path());
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        let mut rules: Vec<String> = v
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["line"] == 10)
            .map(|d| d["rule"].as_str().unwrap().to_string())
            .collect();
        rules.sort();
        rules
    };
    // The refund lacks its key and no guard covers it: one defect, reported by the narrower rule.
    assert_eq!(at_refund(&["check", ".", "--format", "json"]), ["effect-missing-idempotency-key"]);
    // With that rule off, or suppressed at the call, the other still reports it.
    assert_eq!(
        at_refund(&["check", ".", "--format", "json", "--ignore", "effect-missing-idempotency-key"]),
        ["unguarded-side-effect"]
    );
    let suppressed = STRIPE_HANDLER.replace(
        "    await stripe.refunds.create",
        "    // retrysafe-ignore effect-missing-idempotency-key: keyed by the charge upstream\n    await stripe.refunds.create",
    );
    std::fs::write(dir.path().join("server.ts"), suppressed).unwrap();
    let o = run(&["check", ".", "--format", "json"], dir.path());
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let rules: Vec<&str> =
        v.as_array().unwrap().iter().filter(|d| d["line"] == 11).map(|d| d["rule"].as_str().unwrap()).collect();
    assert_eq!(rules, ["unguarded-side-effect"], "{}", stdout(&o));
}

#[test]
fn preview_rules_run_only_with_preview_or_when_selected() {
    let dir = project(&[("server.ts", STRIPE_HANDLER)]);
    // No rule may be in preview (the set then has nothing to show): the gate is checked for
    // whichever rules are, and the default run must keep every finding `--preview` adds to.
    let preview: Vec<&str> = retrysafe::rules::registry().iter().filter(|r| r.preview).map(|r| r.id).collect();
    let rules = |o: &Output| -> Vec<String> {
        let v: serde_json::Value = serde_json::from_str(&stdout(o)).unwrap();
        v.as_array().unwrap().iter().map(|d| d["rule"].as_str().unwrap().to_string()).collect()
    };
    let default = run(&["check", ".", "--format", "json"], dir.path());
    assert!(rules(&default).iter().all(|r| !preview.contains(&r.as_str())), "{}", stdout(&default));
    let with = run(&["check", ".", "--format", "json", "--preview"], dir.path());
    assert!(rules(&default).iter().all(|r| rules(&with).contains(r)), "{}", stdout(&with));
    assert!(rules(&with).iter().any(|r| r == "effect-missing-idempotency-key"), "{}", stdout(&with));
    let selected = run(&["check", ".", "--format", "json", "--select", "unguarded-side-effect"], dir.path());
    assert!(rules(&selected).iter().all(|r| r == "unguarded-side-effect"), "{}", stdout(&selected));
    assert!(rules(&selected).iter().any(|r| r == "unguarded-side-effect"), "{}", stdout(&selected));
    let listed = run(&["rules"], dir.path());
    for line in stdout(&listed).lines() {
        let id = line.split_whitespace().next().unwrap_or("");
        if retrysafe::rules::registry().iter().any(|r| r.id == id) {
            assert_eq!(line.contains("preview"), preview.contains(&id), "{line}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Batch runs on a generated git monorepo: --changed-since, --staged, --shard, the result
// cache, the per-package summary, and fix --write on a dirty work tree.

/// A handler with nothing unsafe of its own; what it does depends on the callee it imports.
fn monorepo_handler(route: &str, callee: &str) -> String {
    format!(
        r#"import express from "express";
import Stripe from "stripe";
import {{ {callee} }} from "./lib/{callee}";

const stripe = new Stripe(process.env.STRIPE_KEY!);
const app = express();

app.post("/webhooks/{route}", express.raw({{ type: "application/json" }}), async (req, res) => {{
  let event: Stripe.Event;
  try {{
    event = stripe.webhooks.constructEvent(req.body, req.headers["stripe-signature"] as string, "whsec");
  }} catch {{
    return res.status(400).end();
  }}
  await {callee}(event.id);
  res.json({{ received: true }});
}});
"#
    )
}

fn harmless_callee(name: &str) -> String {
    format!("export async function {name}(id: string) {{\n  console.log(\"{name}\", id);\n}}\n")
}

fn refunding_callee(name: &str) -> String {
    format!(
        "import Stripe from \"stripe\";\nconst stripe = new Stripe(process.env.STRIPE_KEY!);\nexport async function {name}(id: string) {{\n  await stripe.refunds.create({{ charge: id }});\n}}\n"
    )
}

fn git(dir: &Path, args: &[&str]) {
    let o = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&o.stderr));
}

/// Packages a, b (handlers with a harmless callee), c (a handler whose callee refunds) and d
/// (no handler), committed.
fn git_monorepo() -> tempfile::TempDir {
    let mut files: Vec<(String, String)> = Vec::new();
    for (pkg, callee, refunds) in [("a", "settle", false), ("b", "notify", false), ("c", "refund", true)] {
        files.push((format!("packages/{pkg}/package.json"), format!("{{ \"name\": \"@mono/{pkg}\" }}\n")));
        files.push((format!("packages/{pkg}/src/server.ts"), monorepo_handler(pkg, callee)));
        let body = if refunds { refunding_callee(callee) } else { harmless_callee(callee) };
        files.push((format!("packages/{pkg}/src/lib/{callee}.ts"), body));
    }
    files.push(("packages/d/package.json".into(), "{ \"name\": \"@mono/d\" }\n".into()));
    files.push(("packages/d/src/util.ts".into(), "export const add = (a: number, b: number) => a + b;\n".into()));
    files.push((
        "package.json".into(),
        "{ \"name\": \"mono\", \"private\": true, \"workspaces\": [\"packages/*\"] }\n".into(),
    ));
    let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let dir = project(&refs);
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "init"]);
    dir
}

/// (file, rule) of every finding of a JSON check run.
fn findings(o: &Output) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)));
    let mut out: Vec<(String, String)> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["file"].as_str().unwrap().to_string(), d["rule"].as_str().unwrap().to_string()))
        .collect();
    out.sort();
    out
}

fn files_of(found: &[(String, String)]) -> Vec<String> {
    let mut files: Vec<String> = found.iter().map(|(f, _)| f.clone()).collect();
    files.dedup();
    files
}

#[test]
fn changed_since_checks_changed_files_and_the_handlers_that_import_them() {
    let dir = git_monorepo();
    let o = run(&["check", ".", "--changed-since", "HEAD", "--format", "json", "--no-cache"], dir.path());
    assert_eq!(o.status.code(), Some(0), "nothing changed: {}", stderr(&o));
    assert!(findings(&o).is_empty());

    // b's callee starts refunding: b's handler (unchanged) reaches it and reports there, and at
    // its own call of `notify` (a thin wrapper named for the effect); c's existing findings are
    // not part of the run.
    std::fs::write(dir.path().join("packages/b/src/lib/notify.ts"), refunding_callee("notify")).unwrap();
    let o = run(&["check", ".", "--changed-since", "HEAD", "--format", "json", "--no-cache"], dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(files_of(&findings(&o)), vec!["packages/b/src/lib/notify.ts", "packages/b/src/server.ts"]);

    // Untracked files count as changed.
    std::fs::create_dir_all(dir.path().join("packages/d/src/lib")).unwrap();
    std::fs::write(dir.path().join("packages/d/src/server.ts"), monorepo_handler("d", "pay")).unwrap();
    std::fs::write(dir.path().join("packages/d/src/lib/pay.ts"), refunding_callee("pay")).unwrap();
    let o = run(&["check", ".", "--changed-since", "HEAD", "--format", "json", "--no-cache"], dir.path());
    assert_eq!(
        files_of(&findings(&o)),
        vec!["packages/b/src/lib/notify.ts", "packages/b/src/server.ts", "packages/d/src/lib/pay.ts"]
    );

    let o = run(&["check", ".", "--changed-since", "no-such-ref"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(err.contains("`no-such-ref` is not a commit") && err.lines().count() == 1, "{err}");
    assert!(!stdout(&o).contains("No issues"), "{}", stdout(&o));
}

#[test]
fn staged_checks_only_staged_changes() {
    let dir = git_monorepo();
    std::fs::write(dir.path().join("packages/a/src/lib/settle.ts"), refunding_callee("settle")).unwrap();
    std::fs::write(dir.path().join("packages/b/src/lib/notify.ts"), refunding_callee("notify")).unwrap();
    git(dir.path(), &["add", "packages/a/src/lib/settle.ts"]);
    let o = run(&["check", ".", "--staged", "--format", "json", "--no-cache"], dir.path());
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(files_of(&findings(&o)), vec!["packages/a/src/lib/settle.ts"]);
}

#[test]
fn shards_partition_the_run_and_together_equal_it() {
    let dir = git_monorepo();
    for pkg in ["e", "f", "g", "h"] {
        std::fs::create_dir_all(dir.path().join(format!("packages/{pkg}/src/lib"))).unwrap();
        std::fs::write(dir.path().join(format!("packages/{pkg}/src/server.ts")), monorepo_handler(pkg, "pay")).unwrap();
        std::fs::write(dir.path().join(format!("packages/{pkg}/src/lib/pay.ts")), refunding_callee("pay")).unwrap();
    }
    let all = findings(&run(&["check", ".", "--format", "json", "--no-cache"], dir.path()));
    assert!(files_of(&all).len() >= 5, "{all:?}");
    let mut union = Vec::new();
    let mut non_empty = 0;
    for i in 1..=3 {
        let shard = format!("{i}/3");
        let o = run(&["check", ".", "--shard", &shard, "--format", "json", "--no-cache"], dir.path());
        let part = findings(&o);
        assert_eq!(
            part,
            findings(&run(&["check", ".", "--shard", &shard, "--format", "json", "--no-cache"], dir.path()))
        );
        non_empty += usize::from(!part.is_empty());
        union.extend(part);
    }
    union.sort();
    assert_eq!(union, all, "the shards together are the whole run, each finding once");
    assert!(non_empty >= 2, "the work is split");
    for bad in ["0/3", "4/3", "x"] {
        let o = run(&["check", ".", "--shard", bad], dir.path());
        assert_eq!(o.status.code(), Some(2), "{bad}");
    }
}

#[test]
fn result_cache_skips_clean_files_and_follows_their_imports() {
    let dir = git_monorepo();
    let o = run(&["check", ".", "--format", "json"], dir.path());
    let first = findings(&o);
    let cache = std::fs::read_to_string(dir.path().join(".retrysafe-cache/results-v1.json")).unwrap();
    assert!(cache.contains("packages/a/src/server.ts") && !cache.contains("packages/c/src/server.ts"), "{cache}");
    assert_eq!(findings(&run(&["check", ".", "--format", "json"], dir.path())), first);
    // The cache is invisible to git (fix --write's dirty check included).
    let status = Command::new("git").args(["status", "--porcelain"]).current_dir(dir.path()).output().unwrap();
    assert_eq!(stdout(&status), "");

    // a's handler is cached clean; its callee now refunds: the handler is analysed again.
    std::fs::write(dir.path().join("packages/a/src/lib/settle.ts"), refunding_callee("settle")).unwrap();
    let o = run(&["check", ".", "--format", "json"], dir.path());
    assert!(files_of(&findings(&o)).contains(&"packages/a/src/lib/settle.ts".to_string()), "{}", stdout(&o));
    assert_eq!(findings(&o), findings(&run(&["check", ".", "--format", "json", "--no-cache"], dir.path())));

    // A config change invalidates it too.
    std::fs::write(dir.path().join("packages/a/src/lib/settle.ts"), harmless_callee("settle")).unwrap();
    run(&["check", "."], dir.path());
    std::fs::write(dir.path().join("retrysafe.json"), r#"{ "ignore": ["unguarded-side-effect"] }"#).unwrap();
    assert_eq!(
        findings(&run(&["check", ".", "--format", "json"], dir.path())),
        findings(&run(&["check", ".", "--format", "json", "--no-cache"], dir.path()))
    );

    let fresh = git_monorepo();
    run(&["check", ".", "--no-cache"], fresh.path());
    assert!(!fresh.path().join(".retrysafe-cache").exists());
}

#[test]
fn monorepo_run_ends_with_a_per_package_summary_and_no_progress_when_piped() {
    let dir = git_monorepo();
    let o = run(&["check", ".", "--no-cache"], dir.path());
    let err = stderr(&o);
    let row = |name: &str| {
        err.lines().find(|l| l.starts_with(name)).map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>())
    };
    assert!(err.contains("package") && err.contains("handlers") && err.contains("findings"), "{err}");
    assert_eq!(row("@mono/a"), Some(vec!["1", "0", "0"]), "{err}");
    assert_eq!(row("@mono/c").map(|r| r[0]), Some("1"), "{err}");
    assert_ne!(row("@mono/c").map(|r| r[1]), Some("0"), "{err}");
    assert_eq!(row("@mono/d"), Some(vec!["0", "0", "0"]), "{err}");
    assert!(!err.contains('\r') && !err.contains("files ["), "no progress line when piped: {err:?}");

    // One package: no table.
    let o = run(&["check", "packages/c", "--no-cache"], dir.path());
    assert!(!stderr(&o).contains("handlers"), "{}", stderr(&o));
}

#[test]
fn fix_write_refuses_a_dirty_work_tree_and_lists_what_it_wrote() {
    let dir = git_monorepo();
    // The guard wrap of c's handler is the fix (its callee refunds).
    let handler = dir.path().join("packages/c/src/server.ts");
    std::fs::write(dir.path().join("packages/d/src/util.ts"), "export const add = 1;\n").unwrap();
    let before = std::fs::read_to_string(&handler).unwrap();
    let o = run(&["fix", ".", "--guard", "@/lib/guard#guard", "--write"], dir.path());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("uncommitted changes (packages/d/src/util.ts)"), "{}", stderr(&o));
    assert!(stderr(&o).contains("--allow-dirty"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&handler).unwrap(), before, "nothing written");

    let o = run(
        &["fix", ".", "--guard", "@/lib/guard#guard", "--write", "--allow-dirty", "--unsafe", "--preview"],
        dir.path(),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read_to_string(&handler).unwrap().contains("guard.run("));
    assert!(stderr(&o).contains("wrote packages/c/src/server.ts"), "{}", stderr(&o));

    // A clean tree needs no flag.
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "fixed"]);
    let o = run(&["fix", ".", "--guard", "@/lib/guard#guard", "--write"], dir.path());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// A handler importing another workspace package by name, checked as `check .` from the
/// workspace root (relative paths, as CI and editors run it) and by absolute path: both reach
/// the package and report the refund there.
#[test]
fn a_workspace_package_is_reached_from_a_run_at_the_workspace_root() {
    let handler = monorepo_handler("app", "refund").replace("\"./lib/refund\"", "\"@mono/billing\"");
    let dir = project(&[
        ("package.json", "{ \"name\": \"mono\", \"private\": true, \"workspaces\": [\"packages/*\"] }\n"),
        ("packages/app/package.json", "{ \"name\": \"@mono/app\" }\n"),
        ("packages/app/src/server.ts", &handler),
        ("packages/billing/package.json", "{ \"name\": \"@mono/billing\", \"main\": \"src/index.ts\" }\n"),
        ("packages/billing/src/index.ts", &refunding_callee("refund")),
    ]);
    let expected = vec![("packages/billing/src/index.ts".to_string(), "effect-missing-idempotency-key".to_string())];
    let o = run(&["check", ".", SELECT, "--format", "json", "--no-cache"], dir.path());
    assert_eq!(findings(&o), expected, "{}", stderr(&o));
    let absolute = dir.path().to_string_lossy().into_owned();
    let o = run(&["check", &absolute, SELECT, "--format", "json", "--no-cache"], dir.path());
    let found: Vec<String> = findings(&o).into_iter().map(|(f, _)| f).collect();
    assert!(found.len() == 1 && found[0].ends_with("packages/billing/src/index.ts"), "{found:?}");
}
