//! dedupe-ttl-short

use super::{Context, Diagnostic, FixAvailability, Rule};
use crate::fix::{Edit, Fix};
use crate::model::ast::{self, text};
use crate::model::dedupe_keys;
use crate::model::guards;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

const DOCS: &str = r#"
## What it finds
A Redis dedupe key whose expiry is shorter than the time the provider keeps retrying:
`set(k, v, 'EX', n, 'NX')` (also `'PX'` in milliseconds and `'NX', 'EX', n`), node-redis
`{ NX: true, EX: n }` and v5 `{ condition: 'NX', expiration: { type: 'EX', value: n } }`,
Upstash `{ nx: true, ex: n }`, `setex`/`psetex`, and `expire`/`pexpire` on a key claimed with
`SET NX`/`SETNX`. A `set`/`setex` without NX counts when the key is a processed marker (it is
read back with `get`/`exists`, or named like one: `processed:`, `dedupe:`, `webhook:`,
`event:`...). A project cache wrapper's `cache.set(key, value, ttl)` (a numeric third argument)
counts only when the key says it marks a finished event (`processed`, `dedupe`,
`idempotency`, `seen`, `handled`); its unit is unknown, so it is read as seconds and the fix is
display-only. A key assigned after a nullable declaration (`let key = null; key = ...`) is
read from its latest assignment. TTLs are evaluated from literals, products such as `60 * 60 * 24` and local or
module `const`s. Windows (docs/providers.md): Shopify 4 h, Svix senders 28 h, Razorpay 24 h,
Stripe/GitHub/Paystack/Paddle/PayPal/Square and unknown providers 3 days; the config's
`retryWindows` overrides them.

## Why retries break it
Once the marker expires, a retry (or a manual resend) of the same event finds no marker and
is processed again: a second charge, email or grant.

## Bad
```ts
await redis.set(`stripe:${event.id}`, "1", "EX", 3600, "NX");
```

## Good
```ts
await redis.set(`stripe:${event.id}`, "1", "EX", 60 * 60 * 24 * 7, "NX");
```

## Fix (safe)
Raises the TTL at that call to 7 days (or the config's `dedupeTtlSeconds`; never below the
provider's window), in the call's unit (milliseconds for `PX`/`psetex`/`pexpire`). A TTL held
in a `const` that nothing else reads is raised where it is declared (a same-line comment such as
`// 24 hours` follows), so no unused constant is left behind; a constant read elsewhere too, or
named after its duration (`ONE_HOUR_MS`, `DAY`), keeps its value and the call gets the new
literal; a constant imported from another module gets a display-only fix.
Not reported in a BullMQ worker whose file builds its queue and sets no `attempts`: no retry comes
late, only a stalled job runs again, within the stall interval.
Not reported: a key that names a cache or a credential (`token`, `cache`, `session`, `oauth`,
`rate limit`) and no finished event: a cached access token lives as long as it stays valid.
Not reported: a write whose value is computed data, serialised (`set(key, JSON.stringify(page),
"EX", ttl, "NX")`, directly or through a variable): a cache of that data, not a marker.
Not reported: a short in-progress lease: released (`del`/`unlink`/`release` of the same
key in the function), overwritten with a longer completed marker (another `set` of the same
key), named for work in progress (`processing:`, `lock:`, `lease:`, `inflight:` in the key or
the function that builds it), or living a minute or less (a lock that lets one of several
concurrent deliveries through, not a record of a finished event); a `SET NX` on a constant key (a literal, or a constant bound to one): the same key for
every event is a mutex around a batch, not a record of one event; a key set to serialised
computed data (`set(KEY, JSON.stringify(rules), { EX })`), a cache even where it is read back.
"#;

pub const RULE: Rule = Rule {
    id: "dedupe-ttl-short",
    summary: "dedupe key expires before the provider stops retrying: a late retry is processed again",
    docs: DOCS,
    fix: FixAvailability::Always,
    safe_fixes: true,
    preview: false,
    check,
};

const DAY: u64 = 24 * 3600;

struct Ttl<'t> {
    call: Node<'t>,
    key: Node<'t>,
    ttl: Node<'t>,
    millis: bool,
    /// `SET NX` / `SETNX`: a claim; otherwise a marker write.
    claim: bool,
    /// A cache wrapper's `set(key, value, ttl)`: the unit is not known (seconds assumed).
    positional: bool,
}

fn check(cx: &Context, out: &mut Vec<Diagnostic>) {
    for model in cx.handlers {
        // No retry comes late: only a stalled job runs again, within the stall interval.
        if crate::model::queue_retries::never_retried(cx.project, &model.handler) {
            continue;
        }
        let provider = model.handler.provider;
        let window = provider
            .map(|p| cx.config.retry_window_seconds(p.name()).unwrap_or(p.retry_window_seconds()))
            .unwrap_or(3 * DAY);
        let target = cx.config.dedupe_ttl_seconds.unwrap_or(7 * DAY).max(window);
        let who = provider.map_or("the provider".to_string(), |p| p.name().to_string());
        for scope in &model.scopes {
            let Some(func) = scope.node() else { continue };
            let file = scope.file();
            let src = &file.text;
            let calls = ast::calls_in(func, false);
            let ttls: Vec<Ttl> = calls.iter().filter_map(|c| ttl_of(*c, src)).collect();
            for t in &ttls {
                let Some(value) = eval(t.ttl, src, 0) else { continue };
                let seconds = if t.millis { value / 1000.0 } else { value };
                if seconds >= window as f64 || seconds <= 0.0 {
                    continue;
                }
                if !t.claim && !is_marker(t, &calls, src) {
                    continue;
                }
                // A cache wrapper's plain `set` is a dedupe marker only when its key says so.
                if t.positional && !dedupe_keys::expand(t.key, src).iter().any(|n| names_done_marker(text(*n, src))) {
                    continue;
                }
                if is_lease(t, seconds, &calls, &ttls, src) {
                    continue;
                }
                let message = format!(
                    "dedupe key {} expires after {}{}, but {who} retries for {}: a retry after it expires is processed again",
                    quoted(&squash(text(t.key, src))),
                    human(seconds as u64),
                    if t.positional { " (if the wrapper counts seconds; less if milliseconds)" } else { "" },
                    human(window)
                );
                let replacement = if target == 7 * DAY {
                    if t.millis { "1000 * 60 * 60 * 24 * 7".to_string() } else { "60 * 60 * 24 * 7".to_string() }
                } else if t.millis {
                    (target * 1000).to_string()
                } else {
                    target.to_string()
                };
                let fix = || {
                    if t.positional {
                        Fix::display_only(
                            format!("raise the TTL to {}", human(target)),
                            "the TTL is a cache wrapper's argument whose unit (seconds or milliseconds) is not known",
                        )
                    } else {
                        let title = format!("raise the TTL to {}", human(target));
                        match ttl_edit_site(t.ttl, src) {
                            Some(site) => {
                                let mut edits = vec![Edit::replace(site.start_byte(), site.end_byte(), replacement)];
                                edits.extend(stale_duration_comment(site, src, &human(target)));
                                Fix::safe(title, edits)
                            }
                            None => Fix::display_only(
                                title,
                                "the TTL is a constant defined elsewhere: raise it where it is defined",
                            ),
                        }
                    }
                };
                out.push(
                    Diagnostic::new(RULE.id, file, t.ttl, message)
                        .in_handler(model, scope)
                        .help("keep a completed marker at least as long as the provider retries (7 days covers the common ones)")
                        .with_fix(cx, fix),
                );
            }
        }
    }
}

fn squash(s: &str) -> String {
    let one: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if one.len() > 60 {
        format!("{}…", &one[..one.char_indices().nth(57).map_or(one.len(), |(i, _)| i)])
    } else {
        one
    }
}

fn quoted(s: &str) -> String {
    if s.starts_with('`') { s.to_string() } else { format!("`{s}`") }
}

fn human(seconds: u64) -> String {
    if seconds >= DAY && seconds.is_multiple_of(DAY) {
        format!("{} day{}", seconds / DAY, if seconds / DAY == 1 { "" } else { "s" })
    } else if seconds >= 3600 && seconds.is_multiple_of(3600) {
        format!("{} h", seconds / 3600)
    } else if seconds >= 60 && seconds.is_multiple_of(60) {
        format!("{} min", seconds / 60)
    } else {
        format!("{seconds} s")
    }
}

/// The key and TTL a Redis call writes, if it sets an expiry.
fn ttl_of<'t>(call: Node<'t>, src: &str) -> Option<Ttl<'t>> {
    let path = ast::callee_path_shared(call, src);
    if path.len() < 2 {
        return None;
    }
    let last = path.last()?.to_ascii_lowercase();
    let args = ast::arguments(call);
    let key = *args.first()?;
    match last.as_str() {
        "set" => {
            let claim = guards::is_set_nx(call, src);
            // ioredis: ..., 'EX', n, ...
            for (i, a) in args.iter().enumerate().skip(2) {
                if let Some(s) = ast::string_value(*a, src) {
                    let s = s.to_ascii_uppercase();
                    if (s == "EX" || s == "PX")
                        && let Some(n) = args.get(i + 1)
                    {
                        return Some(Ttl { call, key, ttl: *n, millis: s == "PX", claim, positional: false });
                    }
                }
            }
            // A cache wrapper: `cache.set(key, value, ttl)` with a numeric third argument.
            if args.len() == 3
                && let Some(n) = args.get(2).filter(|a| eval(**a, src, 0).is_some())
            {
                return Some(Ttl { call, key, ttl: *n, millis: false, claim, positional: true });
            }
            // node-redis / Upstash options object
            let opts = args.get(2).map(|a| ast::unwrap_expr(*a)).filter(|a| a.kind_name() == "object")?;
            for prop in ast::named_children(opts) {
                if prop.kind_name() != "pair" {
                    continue;
                }
                let (Some(k), Some(v)) = (prop.field("key"), prop.field("value")) else {
                    continue;
                };
                let name = ast::string_value(k, src).unwrap_or_else(|| text(k, src).to_string()).to_ascii_uppercase();
                match name.as_str() {
                    "EX" | "PX" => {
                        return Some(Ttl { call, key, ttl: v, millis: name == "PX", claim, positional: false });
                    }
                    "EXPIRATION" if v.kind_name() == "object" => {
                        let ty = ast::object_property(v, "type", src)
                            .and_then(|t| ast::string_value(t, src))
                            .unwrap_or_default()
                            .to_ascii_uppercase();
                        let value = ast::object_property(v, "value", src)?;
                        if ty == "EX" || ty == "PX" {
                            return Some(Ttl { call, key, ttl: value, millis: ty == "PX", claim, positional: false });
                        }
                    }
                    _ => {}
                }
            }
            None
        }
        "setex" | "psetex" => {
            Some(Ttl { call, key, ttl: *args.get(1)?, millis: last == "psetex", claim: false, positional: false })
        }
        "expire" | "pexpire" => {
            Some(Ttl { call, key, ttl: *args.get(1)?, millis: last == "pexpire", claim: false, positional: false })
        }
        _ => None,
    }
}

fn same_key(a: Node, b: Node, src: &str) -> bool {
    let norm = |n: Node| text(ast::unwrap_expr(n), src).split_whitespace().collect::<String>();
    norm(a) == norm(b)
}

/// A marker write: the key is claimed with SETNX elsewhere, read back, or named like a marker.
fn is_marker(t: &Ttl, calls: &[Node], src: &str) -> bool {
    // `set(KEY, JSON.stringify(rules), { EX })`: a copy of computed data, kept while it is fresh.
    if guards::caches_data(t.call, src) {
        return false;
    }
    let claimed_or_read = calls.iter().any(|c| {
        *c != t.call
            && ast::arguments(*c).first().is_some_and(|k| same_key(*k, t.key, src))
            && (guards::is_set_nx(*c, src)
                || ast::callee_name(*c, src)
                    .is_some_and(|n| matches!(n.to_ascii_lowercase().as_str(), "get" | "exists"))
                    // `JSON.parse(await redis.get(k))`: a data cache read back, not a marker check
                    && !ast::ancestors(*c).take(4).any(|a| {
                        a.kind_name() == "call_expression" && ast::callee_path(a, src).join(".") == "JSON.parse"
                    }))
    });
    let key_text = text(dedupe_keys::resolve(t.key, src), src).to_ascii_lowercase();
    // `minupay_token_${user}`, `cacheKey`: a cached access token or response lives as long as
    // it stays valid, whatever a provider's retry window is.
    let written_as = format!("{} {key_text}", text(t.key, src).to_ascii_lowercase());
    if crate::regex!(r"token|cache|session|credential|oauth|jwt|rate_?limit|ratelimit").is_match(&written_as)
        && !names_done_marker(&written_as)
    {
        return false;
    }
    let named = crate::regex!(r"processed|dedup|idempot|seen|handled|webhook|event|deliver|evt_").is_match(&key_text);
    claimed_or_read || named
}

/// Key text that says "this event was done": `processed:`, `dedupe:`, `idempotency:`...
fn names_done_marker(key: &str) -> bool {
    crate::regex!(r"processed|dedup|idempot|seen|handled").is_match(&key.to_ascii_lowercase())
}

/// A lease: the same key is released (deleted) or overwritten by a later `set`, or the key
/// says it marks work in progress (`processing:`, `lock:`, `lease:`, `inflight:`), or it lives
/// a minute or less: no one keeps a record of a finished event for seconds, but a lock that
/// lets one of several concurrent deliveries through does.
fn is_lease(t: &Ttl, seconds: f64, calls: &[Node], ttls: &[Ttl], src: &str) -> bool {
    let names_in_progress = dedupe_keys::expand(t.key, src).iter().any(|n| {
        crate::regex!(r"(?i)processing|in-?progress|in_progress|inflight|in-flight|\block|lease|mutex|running")
            .is_match(text(*n, src))
    });
    if names_in_progress || seconds <= 60.0 {
        return true;
    }
    let released = calls.iter().any(|c| {
        *c != t.call
            && ast::arguments(*c).iter().any(|a| same_key(*a, t.key, src))
            && ast::callee_name(*c, src).is_some_and(|n| {
                let n = n.to_ascii_lowercase();
                ["del", "unlink", "release", "unlock", "remove", "clear"].iter().any(|w| n.contains(w))
            })
    });
    let overwritten = calls.iter().any(|c| {
        *c != t.call
            && c.start_byte() > t.call.start_byte()
            && ast::callee_name(*c, src).is_some_and(|n| n.eq_ignore_ascii_case("set"))
            && ast::arguments(*c).first().is_some_and(|k| same_key(*k, t.key, src))
            && ttls.iter().find(|o| o.call == *c).is_none_or(|o| {
                let theirs = eval(o.ttl, src, 0).map(|v| if o.millis { v / 1000.0 } else { v });
                theirs.is_some_and(|x| x > seconds)
            })
    });
    released || overwritten
}

/// A numeric TTL: literals, `60 * 60 * 24`, parentheses, and `const` bindings.
/// Where the new TTL is written. A constant read only here (`ex: DEDUP_TTL`) is raised where
/// it is declared: replacing the use would leave an unused declaration (`noUnusedLocals`).
/// A constant used elsewhere too keeps its value and this use gets the literal; one declared
/// in another module (imported) has no safe local edit.
fn ttl_edit_site<'t>(ttl: Node<'t>, src: &str) -> Option<Node<'t>> {
    let ttl_expr = ast::unwrap_expr(ttl);
    if ttl_expr.kind_name() != "identifier" {
        return Some(ttl);
    }
    let name = text(ttl_expr, src);
    let mut root = ttl_expr;
    while let Some(p) = ast::parent(root) {
        root = p;
    }
    let mut uses = 0;
    ast::walk(root, &mut |n| {
        if matches!(n.kind_name(), "identifier" | "shorthand_property_identifier") && text(n, src) == name {
            uses += 1;
        }
        true
    });
    // `ONE_HOUR_MS`, `DAY`: a name that states its duration must keep meaning it.
    let states_duration = crate::regex!(r"(?i)hour|day|minute|week|month|\d+_?[hdm](?:_|$)").is_match(name);
    match dedupe_keys::initializer(ttl_expr, src) {
        // the declaration's name and this use
        Some(init) if uses <= 2 && !states_duration => Some(init),
        Some(_) => Some(ttl),
        None if uses > 2 => Some(ttl),
        None => None,
    }
}

/// `const DEDUP_TTL = 86400; // 24 hours`: the comment that states the old duration.
fn stale_duration_comment(site: Node, src: &str, new: &str) -> Option<Edit> {
    let rest = &src[site.end_byte()..];
    let line = &rest[..rest.find(['\n', '\r']).unwrap_or(rest.len())];
    let c = crate::regex!(
        r"(?i)^\s*;?\s*//\s*((?:\d+(?:[.,]\d+)?|an?|one|two|three|six|twelve|twenty-four|half an?)\s*(?:hours?|hrs?|h|days?|d|minutes?|mins?|seconds?|secs?|s))\b"
    )
    .captures(line)?;
    let m = c.get(1)?;
    Some(Edit::replace(site.end_byte() + m.start(), site.end_byte() + m.end(), new.to_string()))
}

fn eval(node: Node, src: &str, depth: usize) -> Option<f64> {
    let node = ast::unwrap_expr(node);
    match node.kind_name() {
        "number" => text(node, src).replace('_', "").parse().ok(),
        "string" => ast::string_value(node, src)?.trim().parse().ok(),
        "binary_expression" => {
            let l = eval(node.field("left")?, src, depth)?;
            let r = eval(node.field("right")?, src, depth)?;
            match text(node.field("operator")?, src) {
                "*" => Some(l * r),
                "+" => Some(l + r),
                "-" => Some(l - r),
                "/" if r != 0.0 => Some(l / r),
                "**" => Some(l.powf(r)),
                _ => None,
            }
        }
        "identifier" if depth < 4 => eval(dedupe_keys::initializer(node, src)?, src, depth + 1),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(human(3600), "1 h");
        assert_eq!(human(3 * DAY), "3 days");
        assert_eq!(human(90), "90 s");
    }
}
