//! Dedupe key expressions: the values a handler dedupes on (a guard `run` key, the id of a
//! processed-event marker, a Redis `SET NX` key, an `idempotencyKey`, a BullMQ `jobId`, an SQS
//! `MessageDeduplicationId`), and what those values are built from once local bindings are
//! followed (`const key = uuid()`, `const session = event.data.object`, `const { id } = x`).

use super::ast::{self, text};
use super::effects::{self, Sdk};
use super::guards::{self, GuardKind};
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeySite {
    GuardRun,
    MarkerInsert,
    SetNx,
    IdempotencyKey,
    JobId,
    DeduplicationId,
    /// A Google Cloud Tasks task name (`client.taskPath(project, location, queue, id)`): the
    /// queue rejects a second task of the same name, so the name is the enqueue's dedupe key.
    TaskName,
    /// A property that names itself a deduplication key of the callee (`dedupeKey`, `uniqueKey`,
    /// or a colon-namespaced `key: \`paid:${id}\``, the shape notification and job services
    /// dedupe on), handed to a project or SDK call that is not a database write.
    NamedKey,
}

impl KeySite {
    pub fn label(self) -> &'static str {
        match self {
            KeySite::GuardRun => "guard key",
            KeySite::MarkerInsert => "processed-event marker id",
            KeySite::SetNx => "`SET NX` key",
            KeySite::IdempotencyKey => "idempotency key",
            KeySite::JobId => "`jobId`",
            KeySite::DeduplicationId => "deduplication id",
            KeySite::TaskName => "Cloud Tasks task name",
            KeySite::NamedKey => "dedupe key",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct DedupeKey<'t> {
    pub site: KeySite,
    /// The call that consumes the key.
    pub call: Node<'t>,
    /// The key expression as written at the site (may be an identifier or a shorthand property).
    pub value: Node<'t>,
}

/// The task id of `client.taskPath(project, location, queue, taskId)`, the Cloud Tasks client's
/// builder of a task's full name (a method call with exactly those four parts).
fn cloud_task_id<'t>(call: Node<'t>, args: &[Node<'t>], src: &str) -> Option<Node<'t>> {
    let method = call.field("function").filter(|f| f.kind_name() == "member_expression")?;
    let name = method.field("property").map(|p| text(p, src))?;
    (name == "taskPath" && args.len() == 4).then(|| args[3])
}

/// Property names that carry a key into an SDK or queue call.
fn pair_site(name: &str) -> Option<KeySite> {
    let lower = name.to_ascii_lowercase().replace(['-', '_'], "");
    match lower.as_str() {
        "idempotencykey" | "xidempotencykey" | "paypalrequestid" => Some(KeySite::IdempotencyKey),
        "jobid" => Some(KeySite::JobId),
        "messagededuplicationid" => Some(KeySite::DeduplicationId),
        "key" | "dedupekey" | "dedupkey" | "dedupeid" | "deduplicationkey" | "uniquekey" => Some(KeySite::NamedKey),
        _ => None,
    }
}

/// Every dedupe key expression written in `func` (nested callbacks included).
pub fn find<'t>(func: Node<'t>, src: &str) -> Vec<DedupeKey<'t>> {
    // Two rules ask about every scope: the keys of a function are found once per analysis and
    // remembered with its tree.
    #[derive(Hash, PartialEq, Eq)]
    struct KeysOf {
        at: u32,
        src: (usize, usize),
        wrappers: u64,
    }
    crate::syntax::node_index::NodeIndex::remembered(
        func,
        |at| KeysOf { at, src: (src.as_ptr() as usize, src.len()), wrappers: effects::wrappers_generation() },
        || find_once(func, src),
        |index, k| Some((k.site, index.position_of(k.call)?, index.position_of(k.value)?)),
        |index, (site, call, value)| DedupeKey {
            site,
            call: index.node_at(call, func),
            value: index.node_at(value, func),
        },
    )
}

fn find_once<'t>(func: Node<'t>, src: &str) -> Vec<DedupeKey<'t>> {
    let mut out: Vec<DedupeKey<'t>> = Vec::new();
    for call in ast::calls_in(func, false) {
        let args = ast::arguments(call);
        if guards::guard_call_kind(call, src) == Some(GuardKind::Guard) {
            if let Some(first) = args.first().filter(|a| !ast::is_function(**a)) {
                out.push(DedupeKey { site: KeySite::GuardRun, call, value: *first });
            }
            continue;
        }
        if guards::is_set_nx(call, src) {
            if let Some(first) = args.first() {
                out.push(DedupeKey { site: KeySite::SetNx, call, value: *first });
            }
            continue;
        }
        if guards::is_marker_insert(call, src) {
            if let Some(value) = marker_id(call, src) {
                out.push(DedupeKey { site: KeySite::MarkerInsert, call, value });
            }
            continue;
        }
        if let Some(id) = cloud_task_id(call, &args, src) {
            out.push(DedupeKey { site: KeySite::TaskName, call, value: id });
            continue;
        }
        if let Some(effect) = effects::classify(call, src, true)
            && effect.sdk == Sdk::Inngest
            && let Some(key) = effect.key
        {
            out.push(DedupeKey { site: KeySite::IdempotencyKey, call, value: key });
        }
    }
    let mut properties: Vec<Node<'t>> = super::queries::DEDUPE_KEYS
        .matches(func, src)
        .iter()
        .filter_map(|m| {
            if let Some(shorthand) = m.get("property") {
                return Some(shorthand);
            }
            // `idempotencyKey` of `{ idempotencyKey: k }`, the fragment of `{ "Idempotency-Key": k }`
            let name = m.get("key_name")?;
            let key = if name.kind_name() == "string_fragment" { ast::parent(name)? } else { name };
            ast::parent(key).filter(|p| p.kind_name() == "pair" && p.field("key") == Some(key))
        })
        .collect();
    super::queries::tree_order(&mut properties);
    for n in properties {
        let (key, value) = match n.kind_name() {
            "pair" => (n.field("key"), n.field("value")),
            _ => (Some(n), Some(n)),
        };
        let (Some(key), Some(value)) = (key, value) else { continue };
        let name = ast::string_value(key, src).unwrap_or_else(|| text(key, src).to_string());
        let site = if name == "id"
            && ast::parent(n).and_then(ast::parent).is_some_and(|p| {
                p.kind_name() == "pair" && p.field("key").is_some_and(|k| text(k, src) == "deduplication")
            }) {
            Some(KeySite::JobId)
        } else {
            pair_site(&name)
        };
        let Some(site) = site else { continue };
        let Some(call) =
            ast::ancestors(n).find(|a| a.kind_name() == "call_expression" || a.kind_name() == "new_expression")
        else {
            continue;
        };
        // A `jobId` column written to a database row is not a queue job id; an idempotency
        // key written to a row is the stored copy (read back later), not the key in use.
        if site == KeySite::JobId && !is_queue_call(call, src) {
            continue;
        }
        // `key`, and the AWS SDK's `Key` (an S3 object's name), only when namespaced like a dedupe key.
        if site == KeySite::NamedKey
            && (name.eq_ignore_ascii_case("key") && !is_namespaced_key(value, src) || in_object_of_array(n))
        {
            continue;
        }
        if matches!(site, KeySite::IdempotencyKey | KeySite::NamedKey)
            && effects::classify(call, src, true).is_some_and(|e| e.kind.is_db())
            && !guards::is_marker_insert(call, src)
        {
            continue;
        }
        if !out.iter().any(|k| k.value == value) {
            out.push(DedupeKey { site, call, value });
        }
    }
    out.sort_by_key(|k| k.value.start_byte());
    out
}

/// A template key whose leading text is a colon-separated namespace (`paid:${id}`), not a path
/// or file name (`uploads/${id}.png`, `s3` object keys) and not a cache or UI key of another shape.
fn is_namespaced_key(value: Node, src: &str) -> bool {
    let value = ast::unwrap_expr(value);
    if value.kind_name() != "template_string" {
        return false;
    }
    let literal: String = ast::named_children(value)
        .iter()
        .filter(|c| c.kind_name() == "string_fragment")
        .map(|c| text(*c, src))
        .collect();
    let head = literal.split(':').next().unwrap_or("");
    literal.contains(':')
        && !head.is_empty()
        && head.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && !literal.contains('/')
        && !literal.contains('.')
}

/// A `key` of an object inside an array literal (`[{ key: ... }]`): list items, not a call's key.
fn in_object_of_array(property: Node) -> bool {
    ast::parent(property).and_then(ast::parent).is_some_and(|p| p.kind_name() == "array")
}

fn is_queue_call(call: Node, src: &str) -> bool {
    effects::classify(call, src, true).is_some_and(|e| e.sdk == Sdk::Bullmq)
        || ast::callee_name(call, src).is_some_and(|n| n == "add" || n == "addBulk")
}

/// Marker column names, best first: the event's own id beats a row id.
fn marker_rank(name: &str) -> Option<u8> {
    let n = name.to_ascii_lowercase().replace(['_', '-'], "");
    if n.ends_with("eventid")
        || (["event", "delivery", "webhook", "message", "svix"].iter().any(|w| n.contains(w))
            && !["type", "name", "topic", "at", "time", "status", "data", "payload", "body"]
                .iter()
                .any(|w| n.ends_with(w)))
        || matches!(
            n.as_str(),
            "deliveryid" | "webhookid" | "messageid" | "svixid" | "idempotencykey" | "dedupekey" | "dedupkey"
        )
    {
        Some(0)
    } else if matches!(n.as_str(), "key" | "externalid") {
        Some(1)
    } else if n == "id" {
        Some(2)
    } else {
        None
    }
}

/// The key property of a processed-event marker insert.
pub fn marker_id<'t>(call: Node<'t>, src: &str) -> Option<Node<'t>> {
    let args = ast::arguments(call);
    // SQL: the parameter that fills the key column.
    if let Some(sql) = effects::sql_text(call, &args, src) {
        let cols = crate::regex!(r"(?is)insert\s+into\s+[`\x22]?\w+[`\x22]?\s*\(([^)]*)\)");
        let columns: Vec<String> = cols
            .captures(&sql)
            .map(|c| c[1].split(',').map(|s| s.trim().trim_matches(['"', '`']).to_string()).collect())
            .unwrap_or_default();
        let index =
            columns.iter().enumerate().filter_map(|(i, c)| marker_rank(c).map(|r| (r, i))).min().map(|(_, i)| i)?;
        let params = args.get(1).map(|a| ast::unwrap_expr(*a)).filter(|a| a.kind_name() == "array")?;
        return ast::named_children(params).get(index).copied();
    }
    // ORMs: the first object literal that names a key column.
    let mut best: Option<(u8, Node<'t>)> = None;
    ast::walk(call, &mut |n| {
        if ast::is_function(n) {
            return false;
        }
        if n.kind_name() == "object" {
            for prop in ast::named_children(n) {
                let (name, value) = match prop.kind_name() {
                    "pair" => match (prop.field("key"), prop.field("value")) {
                        (Some(k), Some(v)) => {
                            (ast::string_value(k, src).unwrap_or_else(|| text(k, src).to_string()), v)
                        }
                        _ => continue,
                    },
                    "shorthand_property_identifier" => (text(prop, src).to_string(), prop),
                    _ => continue,
                };
                if let Some(rank) = marker_rank(&name)
                    && value.kind_name() != "object"
                    && best.is_none_or(|(r, _)| rank < r)
                {
                    best = Some((rank, value));
                }
            }
        }
        true
    });
    best.map(|(_, v)| v)
}

/// The scope to look bindings up in for a node: its enclosing function, then the module.
fn lookup<'t>(at: Node<'t>, name: &str, src: &str) -> Option<(Node<'t>, Vec<String>)> {
    let mut scope = ast::enclosing_function(at);
    while let Some(func) = scope {
        if let Some(found) = ast::latest_binding(func, name, src, at.start_byte()) {
            return Some(found);
        }
        scope = ast::enclosing_function(func);
    }
    let root = ast::root_above(at)?;
    ast::latest_binding(root, name, src, at.start_byte())
}

/// The initializer of a plain `const name = <init>` binding an identifier or shorthand refers to.
pub fn initializer<'t>(node: Node<'t>, src: &str) -> Option<Node<'t>> {
    let node = ast::unwrap_expr(node);
    if !matches!(node.kind_name(), "identifier" | "shorthand_property_identifier") {
        return None;
    }
    lookup(node, text(node, src), src).filter(|(_, path)| path.is_empty()).map(|(init, _)| init)
}

/// `node` followed through plain identifier bindings to the expression that builds it.
pub fn resolve<'t>(node: Node<'t>, src: &str) -> Node<'t> {
    let mut cur = ast::unwrap_expr(node);
    for _ in 0..4 {
        match initializer(cur, src) {
            Some(init) => cur = ast::unwrap_expr(init),
            None => break,
        }
    }
    cur
}

/// The expression and, transitively, the initializers of the local identifiers it reads.
pub fn expand<'t>(node: Node<'t>, src: &str) -> Vec<Node<'t>> {
    expand_inner(node, src, false)
}

/// `expand`, stopping at the call that parses or verifies the delivery: the verify call an
/// event variable comes from passes the delivery headers (`wh.verify(body, { "svix-id": id })`),
/// and a field of that event does not read them.
pub fn expand_to_delivery<'t>(node: Node<'t>, src: &str) -> Vec<Node<'t>> {
    expand_inner(node, src, true)
}

fn expand_inner<'t>(node: Node<'t>, src: &str, stop_at_delivery: bool) -> Vec<Node<'t>> {
    let mut out = vec![node];
    let mut next = 0;
    while next < out.len() && out.len() < 16 {
        let cur = out[next];
        next += 1;
        let mut ids = Vec::new();
        ast::walk(cur, &mut |n| {
            if ast::is_function(n) {
                return false;
            }
            if matches!(n.kind_name(), "identifier" | "shorthand_property_identifier")
                && ast::parent(n).is_none_or(|p| p.kind_name() != "member_expression" || p.field("object") == Some(n))
            {
                ids.push(n);
            }
            true
        });
        for id in ids {
            if let Some((init, _)) = lookup(id, text(id, src), src)
                && !out.contains(&init)
                && !ast::contains(init, cur)
                && !(stop_at_delivery && parses_delivery(text(init, src)))
            {
                out.push(init);
            }
        }
    }
    out
}

/// The member path an expression denotes once local aliases are followed:
/// `session.id` with `const session = event.data.object` → ["event", "data", "object", "id"].
/// A parameter typed as a Stripe object (`invoice: Stripe.Invoice`) reads as `event.data.object`.
pub fn event_path(node: Node, src: &str) -> Vec<String> {
    event_path_depth(node, src, 0)
}

fn event_path_depth(node: Node, src: &str, depth: usize) -> Vec<String> {
    let node = ast::unwrap_expr(node);
    match node.kind_name() {
        "identifier" | "shorthand_property_identifier" => {
            let name = text(node, src);
            if depth < 5
                && let Some((init, suffix)) = lookup(node, name, src)
            {
                let mut path = event_path_depth(init, src, depth + 1);
                if !path.is_empty() {
                    path.extend(suffix);
                    return path;
                }
                // Bound to something other than the parsed/verified delivery (a database
                // row, a computed value): not a path into the event.
                if !parses_delivery(text(ast::unwrap_expr(init), src)) {
                    return Vec::new();
                }
            }
            if let Some(ty) = parameter_type(node, name, src)
                && let Some(object) = ty.strip_prefix("Stripe.")
                && !object.ends_with("Event")
            {
                return vec![name.to_string(), "data".into(), "object".into()];
            }
            vec![name.to_string()]
        }
        "member_expression" => {
            let Some(object) = node.field("object") else { return Vec::new() };
            let mut path = event_path_depth(object, src, depth);
            if path.is_empty() {
                return path;
            }
            if let Some(p) = node.field("property") {
                path.push(text(p, src).to_string());
            }
            path
        }
        "subscript_expression" => {
            let Some(object) = node.field("object") else { return Vec::new() };
            let mut path = event_path_depth(object, src, depth);
            match node.field("index").and_then(|i| ast::string_value(i, src)) {
                Some(k) if !path.is_empty() => path.push(k),
                _ => return Vec::new(),
            }
            path
        }
        _ => Vec::new(),
    }
}

/// An initializer that yields the delivery itself: a verify/construct/parse call.
fn parses_delivery(init: &str) -> bool {
    [
        "constructEvent",
        "verify",
        "JSON.parse",
        ".json()",
        "unmarshal",
        "parseEventNotification",
        ".body",
        ".payload",
        "validate",
        "authenticate.webhook",
    ]
    .iter()
    .any(|m| init.contains(m))
}

/// The type annotation of the parameter named `name` of the function enclosing `at`.
fn parameter_type<'a>(at: Node, name: &str, src: &'a str) -> Option<&'a str> {
    let mut scope = ast::enclosing_function(at);
    while let Some(func) = scope {
        let names = ast::parameter_names(func, src);
        if let Some(i) = names.iter().position(|n| n == name) {
            return ast::parameter_type(func, i, src);
        }
        scope = ast::enclosing_function(func);
    }
    None
}

/// Member paths read anywhere in `node` (outermost member chains only).
pub fn paths_in<'t>(node: Node<'t>, src: &str) -> Vec<(Node<'t>, Vec<String>)> {
    let mut out = Vec::new();
    ast::walk(node, &mut |n| {
        if ast::is_function(n) {
            return false;
        }
        match n.kind_name() {
            "member_expression" | "subscript_expression" => {
                let path = event_path(n, src);
                if !path.is_empty() {
                    out.push((n, path));
                }
                false
            }
            "identifier" | "shorthand_property_identifier" => {
                let path = event_path(n, src);
                if path.len() > 1 {
                    out.push((n, path));
                }
                false
            }
            _ => true,
        }
    });
    out
}

/// Calls whose value differs on every evaluation (time, randomness, fresh ids).
/// The first in tree order, outside nested functions (`node` itself included).
pub fn nondeterministic_call<'t>(node: Node<'t>, src: &str) -> Option<Node<'t>> {
    let mut sources: Vec<Node<'t>> = super::queries::DEDUPE_KEYS
        .matches(node, src)
        .iter()
        .filter_map(|m| super::queries::call_of_callee_name(m.get("source_name")?))
        .filter(|c| ast::contains(node, *c))
        .collect();
    super::queries::tree_order(&mut sources);
    sources.into_iter().find(|n| is_nondeterministic(*n, src) && super::queries::reached_outside_functions(*n, node))
}

pub fn is_nondeterministic(n: Node, src: &str) -> bool {
    match n.kind_name() {
        "call_expression" => {
            let path = ast::callee_path_shared(n, src);
            let joined = path.join(".");
            let last = path.last().map(String::as_str).unwrap_or("");
            matches!(joined.as_str(), "Date.now" | "Math.random" | "performance.now" | "process.hrtime.bigint")
                || matches!(
                    last,
                    "uuid"
                        | "v1"
                        | "v4"
                        | "v7"
                        | "uuidv4"
                        | "uuidV4"
                        | "uuidv7"
                        | "randomUUID"
                        | "nanoid"
                        | "cuid"
                        | "cuid2"
                        | "createId"
                        | "ulid"
                        | "randomBytes"
                        | "randomInt"
                )
        }
        "new_expression" => {
            let ctor = n.field("constructor").map(|c| text(c, src)).unwrap_or("");
            let args = n.field("arguments").map(|a| a.named_child_count()).unwrap_or(0);
            matches!(ctor, "Date" | "ObjectId") && args == 0
        }
        _ => false,
    }
}

/// The key as an expression: `event.id` for `${event.id}`, else `` `${a}:${b}` ``.
pub fn bare_key(key: &super::providers::EventKey) -> String {
    let t = &key.template;
    if t.starts_with("${") && t.ends_with('}') && t.matches("${").count() == 1 {
        t[2..t.len() - 1].to_string()
    } else {
        format!("`{t}`")
    }
}

/// The expressions inside the key's substitutions (`${event.id}` → "event.id").
pub fn key_parts(key: &super::providers::EventKey) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = key.template.as_str();
    while let Some(i) = rest.find("${") {
        let after = &rest[i + 2..];
        let mut depth = 0;
        let mut end = after.len();
        for (j, c) in after.char_indices() {
            match c {
                '{' => depth += 1,
                '}' if depth == 0 => {
                    end = j;
                    break;
                }
                '}' => depth -= 1,
                _ => {}
            }
        }
        out.push(after[..end].to_string());
        rest = &after[(end + 1).min(after.len())..];
    }
    out
}

/// Whether an expression (with its local initializers) already reads the event key.
pub fn reads_event_key(node: Node, key: &super::providers::EventKey, src: &str) -> bool {
    let parts = key_parts(key);
    let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>().replace('\'', "\"");
    let parts: Vec<String> = parts.iter().map(|p| squash(p)).collect();
    expand_to_delivery(node, src).iter().any(|n| {
        let t = squash(text(*n, src));
        parts.iter().any(|p| !p.is_empty() && t.contains(p.as_str()))
    })
}

/// The loop (or per-item callback) between `node` and `func`, if any.
pub fn enclosing_loop<'t>(node: Node<'t>, func: Node<'t>, src: &str) -> Option<Node<'t>> {
    ast::ancestors(node).take_while(|a| *a != func).find(|a| {
        matches!(a.kind_name(), "for_statement" | "for_in_statement" | "while_statement" | "do_statement")
            || (ast::is_function(*a)
                && ast::parent(a).and_then(ast::parent).is_some_and(|c| {
                    c.kind_name() == "call_expression"
                        && ast::callee_name(c, src)
                            .is_some_and(|n| matches!(n.as_str(), "map" | "forEach" | "flatMap" | "all"))
                }))
    })
}

/// A loop over items around `node` (not a retry loop, not the loop over deliveries that binds
/// the event key itself, such as `for (const record of event.Records)`).
pub fn items_loop<'t>(
    node: Node<'t>,
    func: Node<'t>,
    src: &str,
    key: Option<&super::providers::EventKey>,
) -> Option<Node<'t>> {
    let roots = key.map(|k| k.roots()).unwrap_or_default();
    let mut cur = node;
    while let Some(lp) = enclosing_loop(cur, func, src) {
        cur = lp;
        if super::retry_loops::is_retry_loop(lp, src) {
            continue;
        }
        let mut bound = Vec::new();
        if lp.kind_name() == "for_in_statement" {
            if let Some(left) = lp.field("left") {
                ast::bound_names(left, src, &mut bound);
            }
        } else if ast::is_function(lp) {
            bound = ast::parameter_names(lp, src);
        }
        if bound.iter().any(|b| roots.contains(b)) {
            continue;
        }
        return Some(lp);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Dialect, SourceFile};
    use std::path::PathBuf;

    fn file(src: &str) -> SourceFile {
        SourceFile::new(PathBuf::from("x.ts"), src.to_string(), Dialect::TypeScript).unwrap()
    }

    #[test]
    fn follows_aliases_and_destructuring() {
        let f = file(
            "async function h(event) {\n  const session = event.data.object as any;\n  const { id } = session;\n  await stripe.refunds.create({}, { idempotencyKey: id });\n}\n",
        );
        let root = f.root();
        let keys = find(root, &f.text);
        assert_eq!(keys.len(), 1);
        assert_eq!(event_path(keys[0].value, &f.text), ["event", "data", "object", "id"]);
    }

    #[test]
    fn marker_prefers_the_event_id_column() {
        let f = file(
            "async function h(event) {\n  await prisma.processedEvent.create({ data: { id: crypto.randomUUID(), stripeEventId: event.id } });\n}\n",
        );
        let keys = find(f.root(), &f.text);
        assert_eq!(keys.len(), 1);
        assert_eq!(text(keys[0].value, &f.text), "event.id");
    }

    #[test]
    fn resolves_random_initializers() {
        let f =
            file("async function h(job) {\n  const key = uuid();\n  await queue.add('x', {}, { jobId: key });\n}\n");
        let keys = find(f.root(), &f.text);
        assert_eq!(keys[0].site, KeySite::JobId);
        let resolved = resolve(keys[0].value, &f.text);
        assert!(nondeterministic_call(resolved, &f.text).is_some());
    }

    #[test]
    fn the_delivery_loop_is_not_an_items_loop() {
        let f = file(
            "async function h(event) {\n  for (const record of event.Records) {\n    await q.add('a', {}, { jobId: uuid() });\n  }\n  for (const item of items) {\n    await q.add('b', {}, { jobId: uuid() });\n  }\n}\n",
        );
        let func = f.root().named_child(0).unwrap();
        let key = super::super::providers::EventKey::new(super::super::Provider::Sqs, "${record.messageId}");
        let keys = find(func, &f.text);
        assert_eq!(keys.len(), 2);
        assert!(items_loop(keys[0].value, func, &f.text, Some(&key)).is_none());
        assert!(items_loop(keys[1].value, func, &f.text, Some(&key)).is_some());
    }

    #[test]
    fn quoted_and_separated_key_names() {
        let f = file(
            "async function h(event) {\n  await fetch(u, { headers: { 'Idempotency-Key': crypto['randomUUID']() } });\n  await q.add('a', {}, { job_id: (uuid as any)() });\n  await q.add('b', {}, { deduplication: { id: Date.now() }, attempts: 3 });\n}\n",
        );
        let keys = find(f.root(), &f.text);
        let sites: Vec<KeySite> = keys.iter().map(|k| k.site).collect();
        assert_eq!(sites, [KeySite::IdempotencyKey, KeySite::JobId, KeySite::JobId]);
        let sources: Vec<&str> =
            keys.iter().map(|k| text(nondeterministic_call(k.value, &f.text).unwrap(), &f.text)).collect();
        assert_eq!(sources, ["crypto['randomUUID']()", "(uuid as any)()", "Date.now()"]);
    }

    #[test]
    fn sources_inside_callbacks_are_not_the_key() {
        let f = file("const k = memo(() => uuid()) + ':' + new Date();\n");
        let value = f.root().named_child(0).unwrap().named_child(0).unwrap().field("value").unwrap();
        assert_eq!(text(nondeterministic_call(value, &f.text).unwrap(), &f.text), "new Date()");
    }
}
