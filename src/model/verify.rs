//! Signature verification calls: which call verifies a provider signature, and which
//! arguments carry the payload it verifies.

use super::ast::{self, text};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

/// Whether `call` verifies (or computes, for an HMAC) a webhook signature.
pub fn is_verification_call(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    let lower: Vec<String> = path.iter().map(|s| s.trim_end_matches("()").to_ascii_lowercase()).collect();
    let Some(last) = lower.last().map(String::as_str) else {
        return false;
    };
    let root = lower.first().map(String::as_str).unwrap_or("");
    match last {
        "constructevent"
        | "constructeventasync"
        | "verifywebhook"
        | "verifysignature"
        | "verifywebhooksignature"
        | "validatewebhook"
        | "validatewebhooksignature"
        | "verifyandreceive"
        | "timingsafeequal"
        | "isvalidsignature"
        | "verifyrequestsignature"
        | "createhmac"
        | "parseeventnotification" => true,
        // jwt/bcrypt/argon `verify` check tokens and passwords, not deliveries.
        "verify" => !matches!(root, "jwt" | "jsonwebtoken" | "bcrypt" | "argon2" | "jose" | "totp" | "otp"),
        "unmarshal" => lower.iter().any(|s| s == "webhooks"),
        "webhook" => lower.iter().any(|s| s == "authenticate"),
        "validate" => lower.iter().any(|s| s == "webhooks"),
        _ => false,
    }
}

/// The payload arguments of a verification call: `constructEvent(payload, ...)`,
/// `wh.verify(payload, headers)`, `createHmac(...).update(payload)`.
pub fn payload_arguments<'t>(call: Node<'t>, src: &str) -> Vec<Node<'t>> {
    let last = ast::callee_name(call, src).unwrap_or_default().to_ascii_lowercase();
    let args = ast::arguments(call);
    match last.trim_end_matches("()") {
        "createhmac" | "timingsafeequal" => Vec::new(),
        _ => args.into_iter().take(1).collect(),
    }
}

/// `createHmac(...).update(x)` calls: `x` is the signed payload.
pub fn hmac_update_payload<'t>(call: Node<'t>, src: &str) -> Option<Node<'t>> {
    let func = call.field("function")?;
    if func.kind_name() != "member_expression" || func.field("property").map(|p| text(p, src)) != Some("update") {
        return None;
    }
    let object = func.field("object")?;
    let mut inner = ast::unwrap_expr(object);
    // createHmac(...) directly, or a `const hmac = createHmac(...)` binding
    if inner.kind_name() == "identifier" {
        let scope = ast::enclosing_function(call).unwrap_or(call);
        inner = ast::find_binding_init(scope, text(inner, src), src, call.start_byte()).map(ast::unwrap_expr)?;
    }
    if inner.kind_name() != "call_expression" || ast::callee_name(inner, src).is_none_or(|n| n != "createHmac") {
        return None;
    }
    ast::arguments(call).into_iter().next()
}

/// Every (verification call, payload argument) pair in `node`.
pub fn verified_payloads<'t>(node: Node<'t>, src: &str) -> Vec<(Node<'t>, Node<'t>)> {
    let mut out = Vec::new();
    for call in ast::calls_in(node, false) {
        if let Some(p) = hmac_update_payload(call, src) {
            out.push((call, p));
        } else if is_verification_call(call, src) {
            for p in payload_arguments(call, src) {
                out.push((call, p));
            }
        }
    }
    out
}

/// The first verification call in `node` (source order).
pub fn first_verification<'t>(node: Node<'t>, src: &str) -> Option<Node<'t>> {
    ast::calls_in(node, false)
        .into_iter()
        .filter(|c| is_verification_call(*c, src) || hmac_update_payload(*c, src).is_some())
        .min_by_key(|c| c.start_byte())
}

/// A call that throws on a malformed payload. The route's own parameters
/// (`ParamsSchema.parse(params)`, `schema.parse(req.params)`) are not the payload: the route
/// matched, so they are there, and the URL is the one the provider was given.
pub fn is_parse(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    let route_params =
        ast::arguments(call).first().is_some_and(|a| crate::regex!(r"^(?:\w+\.)*params$").is_match(text(*a, src)));
    if route_params {
        return false;
    }
    match &path[..] {
        [json, parse] if json == "JSON" && parse == "parse" => true,
        [schema, parse] if parse == "parse" => schema.to_ascii_lowercase().ends_with("schema"),
        _ => false,
    }
}

/// Whether a try block only reads and checks the request (no processing work).
pub fn only_checks(
    block: Node,
    src: &str,
    project: &crate::project::Project,
    file: &std::sync::Arc<crate::source::SourceFile>,
) -> bool {
    ast::calls_in(block, false).into_iter().all(|c| {
        if is_verify(c, src) || is_parse(c, src) || verifies_through(project, file, c) {
            return true;
        }
        let path = ast::callee_path_shared(c, src);
        let last = path.last().map(|s| s.trim_end_matches("()")).unwrap_or("");
        let root = path.first().map(String::as_str).unwrap_or("");
        let reads = matches!(
            last,
            "text"
                | "json"
                | "arrayBuffer"
                | "get"
                | "header"
                | "headers"
                | "toString"
                | "from"
                | "buffer"
                | "getRawBody"
                | "rawBody"
                | "raw"
                | "entries"
                | "fromEntries"
                | "trim"
        ) || matches!(root, "JSON" | "Buffer" | "console" | "logger" | "log" | "String" | "Object")
            || last == "Webhook()";
        reads && super::effects::classify(c, src, super::reach::resolve_call(project, file, c).is_some()).is_none()
    })
}

/// A call to a project helper that verifies the signature itself
/// (`const evt = await verifyWebhook({ rawBody, headers })` wrapping `wh.verify`).
pub fn verifies_through(
    project: &crate::project::Project,
    file: &std::sync::Arc<crate::source::SourceFile>,
    call: Node,
) -> bool {
    super::reach::resolve_call(project, file, call).is_some_and(|def| {
        def.node().is_some_and(|body| ast::calls_in(body, false).into_iter().any(|c| is_verify(c, &def.file.text)))
    })
}

/// A call that throws on a bad signature.
pub fn is_verify(call: Node, src: &str) -> bool {
    let path = ast::callee_path_shared(call, src);
    let Some(last) = path.last().map(|s| s.trim_end_matches("()")) else {
        return false;
    };
    match last {
        "constructEvent" | "constructEventAsync" | "verifyWebhook" | "parseEventNotification" => true,
        // Octokit's `app.webhooks.verifyAndReceive` throws on a bad signature before dispatching.
        "unmarshal" | "verifyAndReceive" => path.iter().any(|p| p == "webhooks"),
        "verify" => {
            let root = path.first().map(|r| r.to_ascii_lowercase()).unwrap_or_default();
            (root == "resend" && path.iter().any(|p| p == "webhooks"))
                || ((src.contains("\"svix\"") || src.contains("'svix'") || src.contains("standardwebhooks"))
                    && path.len() == 2
                    && (root.starts_with("wh") || root.contains("webhook") || root.contains("svix")))
                || path.first().is_some_and(|r| r == "Webhook()")
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Dialect, SourceFile};

    fn first_call_verifies(code: &str) -> bool {
        let file = SourceFile::new("t.ts".into(), code.to_string(), Dialect::TypeScript).unwrap();
        let call = ast::calls_in(file.root(), false).into_iter().next().unwrap();
        is_verification_call(call, &file.text) || hmac_update_payload(call, &file.text).is_some()
    }

    #[test]
    fn verification_calls() {
        assert!(first_call_verifies("stripe.webhooks.constructEvent(body, sig, secret)"));
        assert!(first_call_verifies("wh.verify(payload, headers)"));
        assert!(first_call_verifies("crypto.createHmac('sha256', s).update(body)"));
        assert!(!first_call_verifies("jwt.verify(token, secret)"));
        assert!(!first_call_verifies("hash.update(body)"));
    }
}
