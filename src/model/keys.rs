//! Finds the expression of a handler's event key, using the names the handler already has.

use super::ast::{self, text};
use super::handlers::{Framework, Handler};
use super::providers::{EventKey, Provider};
use crate::config::Config;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

/// The event key of a handler, or None where it cannot be determined (the fix then asks for a
/// manual key rather than guessing).
pub fn event_key(handler: &Handler, func: Node, config: &Config) -> Option<EventKey> {
    let provider = handler.provider?;
    let src = &handler.file.text;
    let overrides = config.providers.get(provider.name());
    if let Some(header) = overrides.and_then(|o| o.key_header.as_deref()) {
        return Some(EventKey::new(provider, format!("${{{}}}", handler.header_expr(header)?)));
    }
    if let Some(field) = overrides.and_then(|o| o.key_field.as_deref()) {
        let body = event_variable(func, src, handler)?;
        return Some(EventKey::new(provider, format!("${{{body}.{field}}}")));
    }
    let first_param =
        || ast::parameter(func, 0).filter(|p| p.kind_name() == "identifier").map(|p| text(p, src).to_string());
    let template = match provider {
        // Octokit passes `{ id, name, payload }`: `id` is the x-github-delivery header.
        Provider::Github if handler.framework == Framework::Octokit => match ast::parameter(func, 0)? {
            p if p.kind_name() == "object_pattern" => {
                ast::parameter_names(func, src).iter().any(|n| n == "id").then(|| "${id}".to_string())?
            }
            _ => format!("${{{}.id}}", first_param()?),
        },
        // `callback: async (topic, shop, body, webhookId)`: the X-Shopify-Webhook-Id
        Provider::Shopify if handler.framework == Framework::ShopifyWebhook => {
            let id = ast::parameter(func, 3).filter(|p| p.kind_name() == "identifier")?;
            format!("${{{}}}", text(id, src))
        }
        Provider::Github
        | Provider::Shopify
        | Provider::Svix
        | Provider::Razorpay
        | Provider::Linear
        | Provider::Twilio => {
            let header = provider.key_header()?;
            let standard = src.contains("webhook-id") || src.contains("standardwebhooks");
            let actual =
                if provider == Provider::Svix && !src.contains("svix-id") && standard { "webhook-id" } else { header };
            let shopify_context = || (provider == Provider::Shopify).then(|| shopify_webhook_id(func, src)).flatten();
            match nest_header_param(func, src, actual)
                .or_else(shopify_context)
                .or_else(|| header_variable(func, src, actual))
            {
                Some(expr) => format!("${{{expr}}}"),
                None => format!("${{{}}}", handler.header_expr(actual)?),
            }
        }
        Provider::Stripe => match destructured_field(func, src, "constructEvent", "id") {
            Some(id) => format!("${{{id}}}"),
            None => format!("${{{}.id}}", event_variable(func, src, handler)?),
        },
        // Lemon Squeezy sends no event or delivery id: the event name, the object and its
        // update time together identify one event (docs/providers.md).
        Provider::LemonSqueezy => {
            let var = event_variable(func, src, handler)?;
            format!("${{{var}.meta.event_name}}:${{{var}.data.id}}:${{{var}.data.attributes.updated_at}}")
        }
        Provider::Paddle => {
            let var = event_variable(func, src, handler)?;
            let field = if src.contains("unmarshal") { "eventId" } else { "event_id" };
            format!("${{{var}.{field}}}")
        }
        Provider::Paypal => format!("${{{}.id}}", event_variable(func, src, handler)?),
        Provider::Square | Provider::Slack => {
            format!("${{{}.event_id}}", event_variable(func, src, handler)?)
        }
        Provider::Paystack | Provider::Flutterwave => {
            let var = event_variable(func, src, handler)?;
            format!("${{{var}.event}}:${{{var}.data.id}}")
        }
        Provider::Bullmq => format!("${{{}.id}}", first_param()?),
        Provider::Sqs => {
            // a batch of one read by index: `JSON.parse(event.Records[0].body)`
            let indexed = || {
                let event = first_param()?;
                let first = format!("{event}.Records[0]");
                text(func, src).contains(&first).then_some(first)
            };
            let record = loop_variable(func, src, &["Records", "Messages"]).or_else(indexed)?;
            // `event.Records` of a DynamoDB stream or SNS trigger has no `messageId`: a key on
            // it would be the same `undefined` for every record. S3 records have no id at all.
            let body = text(func, src);
            let reads = |field: &str| body.contains(&format!("{record}.{field}"));
            if reads("s3") {
                return None;
            }
            let field = if reads("dynamodb") {
                "eventID"
            } else if reads("Sns") {
                "Sns.MessageId"
            } else if handler.framework == Framework::SqsPolling {
                "MessageId"
            } else {
                "messageId"
            };
            format!("${{{record}.{field}}}")
        }
        Provider::Kafka => {
            let p = ast::parameter(func, 0)?;
            if p.kind_name() == "object_pattern" {
                let names = ast::parameter_names(func, src);
                let has = |n: &str| names.iter().any(|x| x == n);
                if !(has("topic") && has("partition") && has("message")) {
                    return None;
                }
                "${topic}:${partition}:${message.offset}".to_string()
            } else {
                let p = text(p, src);
                format!("${{{p}.topic}}:${{{p}.partition}}:${{{p}.message.offset}}")
            }
        }
        Provider::Amqp => format!("${{{}.properties.messageId}}", first_param()?),
        Provider::Pubsub => format!("${{{}.id}}", first_param()?),
        // `for (const message of batch.messages)`, `batch.messages.forEach((msg) => ...)`
        Provider::CloudflareQueue => format!("${{{}.id}}", loop_variable(func, src, &["messages"])?),
        Provider::Inngest => {
            if ast::parameter_names(func, src).iter().any(|n| n == "event") {
                "${event.id}".to_string()
            } else {
                format!("${{{}.event.id}}", first_param()?)
            }
        }
        Provider::Trigger => {
            if ast::parameter_names(func, src).iter().any(|n| n == "ctx") {
                "${ctx.run.id}".to_string()
            } else {
                let second = ast::parameter(func, 1).filter(|p| p.kind_name() == "identifier")?;
                format!("${{{}.ctx.run.id}}", text(second, src))
            }
        }
    };
    Some(EventKey::new(provider, template))
}

/// The variable holding the parsed/verified event: the result of `constructEvent`, `verify`,
/// `JSON.parse`, `req.json()`, `req.body` (in that order of preference), or an `event`/`evt`
/// parameter.
pub fn event_variable(func: Node, src: &str, handler: &Handler) -> Option<String> {
    let mut best: Option<(u8, String)> = None;
    let mut consider = |rank: u8, name: String| {
        if best.as_ref().is_none_or(|(r, _)| rank < *r) {
            best = Some((rank, name));
        }
    };
    ast::walk(func, &mut |n| {
        let (name, value) = match n.kind_name() {
            "variable_declarator" => (n.field("name"), n.field("value")),
            "assignment_expression" => (n.field("left"), n.field("right")),
            _ => return true,
        };
        let (Some(name), Some(value)) = (name, value) else {
            return true;
        };
        if name.kind_name() != "identifier" {
            return true;
        }
        let value_text = text(ast::unwrap_expr(value), src);
        let rank = if value_text.contains("constructEvent")
            || value_text.contains("parseEventNotification")
            || value_text.contains("unmarshal")
            || value_text.contains(".verify(")
            || value_text.contains("verifyWebhook")
            // project wrappers: `constructWebhookEvent(body, sig)`, `parseStripeEvent(...)`
            || crate::regex!(r"(?:construct|parse)\w*Event\s*\(|WebhookEvent\s*\(").is_match(value_text)
        {
            0
        } else if value_text.starts_with("JSON.parse")
            || value_text.ends_with(".json()")
            || (handler.framework == Framework::H3 && value_text.contains("readBody("))
        {
            1
        } else if value_text.ends_with(".body") || value_text.ends_with(".payload") {
            2
        } else {
            return true;
        };
        consider(rank, text(name, src).to_string());
        true
    });
    if let Some((_, name)) = best {
        return Some(name);
    }
    // an h3 handler's `event` parameter is the request, not the delivered event
    if handler.framework == Framework::H3 {
        return None;
    }
    let params = ast::parameter_names(func, src);
    if let Some(p) = params.iter().find(|p| matches!(p.as_str(), "event" | "evt" | "payload" | "body" | "data")) {
        return Some(p.clone());
    }
    // Express with a JSON body: `req.body` itself is the event (not with the parser turned off:
    // `req.body` is then undefined and every delivery would share one key).
    let parser_off = crate::regex!(r"bodyParser\s*:\s*false").is_match(&handler.file.text);
    match handler.framework {
        Framework::Express | Framework::NextPagesApi | Framework::Fastify if !parser_off => {
            handler.request.as_ref().map(|r| format!("{r}.body"))
        }
        _ => None,
    }
}

/// `for (const record of event.Records)` → "record"; also `.Records.map((r) => ...)`.
fn loop_variable(func: Node, src: &str, collections: &[&str]) -> Option<String> {
    let mut found = None;
    ast::walk(func, &mut |n| {
        if found.is_some() {
            return false;
        }
        if n.kind_name() == "for_in_statement"
            && let (Some(left), Some(right)) = (n.field("left"), n.field("right"))
            && collections.iter().any(|c| text(right, src).ends_with(c))
        {
            let mut names = Vec::new();
            ast::bound_names(left, src, &mut names);
            if left.kind_name() == "identifier" || names.len() == 1 {
                found = names.into_iter().next();
            }
        }
        if n.kind_name() == "call_expression"
            && let Some(f) = n.field("function")
            && f.kind_name() == "member_expression"
            && f.field("object").is_some_and(|o| collections.iter().any(|c| text(o, src).ends_with(c)))
            && let Some(cb) = ast::arguments(n).into_iter().find(|a| ast::is_function(*a))
            && let Some(p) = ast::parameter(cb, 0).filter(|p| p.kind_name() == "identifier")
        {
            found = Some(text(p, src).to_string());
        }
        // `const records = event.Records || []; ... const record = records[i]`
        if n.kind_name() == "variable_declarator"
            && let (Some(name), Some(value)) = (n.field("name"), n.field("value"))
            && name.kind_name() == "identifier"
            && value.kind_name() == "subscript_expression"
            && let Some(obj) = value.field("object")
            && (collections.iter().any(|c| text(obj, src).ends_with(c))
                || obj.kind_name() == "identifier" && {
                    let decl = format!("{} = ", text(obj, src));
                    text(func, src).split(&decl).skip(1).any(|rest| {
                        let line = rest.lines().next().unwrap_or("");
                        collections.iter().any(|c| line.contains(&format!(".{c}")))
                    })
                })
        {
            found = Some(text(name, src).to_string());
        }
        true
    });
    found
}

/// NestJS: `@Headers('x-github-delivery') id` → `id`; `@Headers() headers` → `headers['…']`.
fn nest_header_param(func: Node, src: &str, header: &str) -> Option<String> {
    let params = func.field("parameters")?;
    for param in ast::named_children(params) {
        let Some(decorator) = ast::named_children(param).into_iter().find(|c| c.kind_name() == "decorator") else {
            continue;
        };
        let Some(call) = decorator.named_child(0).filter(|c| c.kind_name() == "call_expression") else { continue };
        if ast::callee_path(call, src) != ["Headers"] {
            continue;
        }
        let name = param.field("pattern").map(|p| text(p, src).to_string())?;
        match ast::arguments(call).first().and_then(|a| ast::string_value(*a, src)) {
            Some(h) if h.eq_ignore_ascii_case(header) => return Some(name),
            Some(_) => continue,
            None => return Some(format!("{name}[\"{header}\"]")),
        }
    }
    None
}

/// Shopify's app packages: `const { webhookId } = await authenticate.webhook(request)` →
/// `webhookId`; `const ctx = await shopify.authenticate.webhook(request)` → `ctx.webhookId`.
fn shopify_webhook_id(func: Node, src: &str) -> Option<String> {
    if let Some(id) = destructured_field(func, src, "authenticate.webhook(", "webhookId") {
        return Some(id);
    }
    let mut found = None;
    ast::walk(func, &mut |n| {
        if found.is_none()
            && n.kind_name() == "variable_declarator"
            && let (Some(name), Some(value)) = (n.field("name"), n.field("value"))
            && name.kind_name() == "identifier"
            && text(value, src).contains("authenticate.webhook(")
        {
            found = Some(format!("{}.webhookId", text(name, src)));
        }
        found.is_none()
    });
    found
}

/// `const { id: eventId, type } = <call containing marker>` → the local name bound to `field`.
fn destructured_field(func: Node, src: &str, marker: &str, field: &str) -> Option<String> {
    // Only declarators matter: listing them by kind from the node list costs less than a walk
    // that builds and asks every node.
    for declarator in ast::descendants_of_kind(func, "variable_declarator") {
        let (Some(name), Some(value)) = (declarator.field("name"), declarator.field("value")) else { continue };
        if name.kind_name() != "object_pattern" || !text(value, src).contains(marker) {
            continue;
        }
        let mut found = None;
        for prop in ast::named_children(name) {
            match prop.kind_name() {
                "shorthand_property_identifier_pattern" if text(prop, src) == field => {
                    found = Some(field.to_string());
                }
                "object_assignment_pattern" if prop.field("left").is_some_and(|l| text(l, src) == field) => {
                    found = Some(field.to_string());
                }
                "pair_pattern"
                    if prop.field("key").is_some_and(|k| text(k, src) == field)
                        && prop.field("value").is_some_and(|v| v.kind_name() == "identifier") =>
                {
                    found = prop.field("value").map(|v| text(v, src).to_string());
                }
                _ => {}
            }
        }
        if found.is_some() {
            return found;
        }
    }
    None
}

/// `const svixId = headerPayload.get("svix-id")` declared directly in the handler's body →
/// `svixId` (the name the handler already has; a declaration in a nested block is out of scope).
fn header_variable(func: Node, src: &str, header: &str) -> Option<String> {
    let body = func.field("body").filter(|b| b.kind_name() == "statement_block")?;
    for stmt in ast::named_children(body) {
        if !matches!(stmt.kind_name(), "lexical_declaration" | "variable_declaration") {
            continue;
        }
        for d in ast::named_children(stmt).into_iter().filter(|c| c.kind_name() == "variable_declarator") {
            let (Some(name), Some(value)) = (d.field("name"), d.field("value")) else {
                continue;
            };
            let value = ast::unwrap_expr(value);
            let reads = match value.kind_name() {
                "call_expression" => {
                    let path = ast::callee_path_shared(value, src);
                    let args = ast::arguments(value);
                    // h3: `getHeader(event, name)`, `getRequestHeader(event, name)`
                    let h3 = path.len() == 1 && matches!(path[0].as_str(), "getHeader" | "getRequestHeader");
                    let name_arg = if h3 { args.get(1) } else { args.first() };
                    (h3 || path.last().is_some_and(|m| matches!(m.as_str(), "get" | "header")))
                        && name_arg
                            .and_then(|a| ast::string_value(*a, src))
                            .is_some_and(|h| h.eq_ignore_ascii_case(header))
                }
                "subscript_expression" => value
                    .field("index")
                    .and_then(|i| ast::string_value(i, src))
                    .is_some_and(|h| h.eq_ignore_ascii_case(header)),
                _ => false,
            };
            if reads && name.kind_name() == "identifier" && kept_by_handler(body, text(name, src), src) {
                return Some(text(name, src).to_string());
            }
        }
    }
    None
}

/// The handler itself needs the variable, so a fix that rewrites the dedupe marker keeps its
/// declaration: it is checked in a condition (`if (!svixId)`) or passed to a verify call.
fn kept_by_handler(body: Node, name: &str, src: &str) -> bool {
    let mut kept = false;
    ast::walk(body, &mut |n| {
        if kept {
            return false;
        }
        if n.kind_name() == "identifier" && text(n, src) == name {
            kept = ast::ancestors(n).take_while(|a| *a != body).any(|a| match a.kind_name() {
                "if_statement" => a.field("condition").is_some_and(|c| ast::contains(c, n)),
                "call_expression" => {
                    a.field("function").is_some_and(|f| text(f, src).to_ascii_lowercase().contains("verify"))
                }
                _ => false,
            });
        }
        true
    });
    kept
}
