//! Database schemas as the rules read them: which tables are dedupe markers, their key
//! column, and whether the schema makes it unique. Readers: Prisma schemas, SQL migrations,
//! Drizzle tables and Mongoose schemas.

pub mod drizzle;
pub mod mongoose;
pub mod prisma;
pub mod sql;

use crate::model::ast::{self, text};
use crate::model::guards::is_marker_name;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

// Which tables are dedupe markers and which column is their key.

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Strength {
    /// `analytics_events`: only explicit idempotency/dedupe key columns.
    Weak,
    /// `events`, `Event`: often a calendar or analytics model, so only `eventId`, a
    /// provider-prefixed event id, and a textual `id` that is not already keyed.
    Bare,
    /// `stripe_events`, `events`, `seen_messages`: event id columns and a textual `id`.
    Provider,
    /// `processed_events`, `idempotency_keys`: any key column.
    Strong,
}

pub fn normalized(name: &str) -> String {
    name.trim_matches(['"', '`', '[', ']']).to_ascii_lowercase().replace(['_', '-'], "")
}

pub fn table_strength(names: &[String]) -> Option<Strength> {
    let mut best = None;
    for name in names.iter().filter(|n| is_marker_name(n)) {
        let n = normalized(name);
        const STRONG: &[&str] = &[
            "processed",
            "handled",
            "dedup",
            "idempot",
            "inbox",
            "webhookevent",
            "webhooklog",
            "eventlog",
            "receivedevent",
            "consumed",
        ];
        const PROVIDER: &[&str] = &[
            "webhook",
            "stripe",
            "github",
            "shopify",
            "svix",
            "clerk",
            "paddle",
            "paystack",
            "flutterwave",
            "razorpay",
            "paypal",
            "square",
            "lemonsqueezy",
            "resend",
            "twilio",
            "slack",
            "linear",
            "seen",
        ];
        let s = if STRONG.iter().any(|w| n.contains(w)) {
            Strength::Strong
        } else if PROVIDER.iter().any(|w| n.contains(w)) {
            Strength::Provider
        } else if n == "event" || n == "events" {
            Strength::Bare
        } else {
            Strength::Weak
        };
        best = best.max(Some(s));
    }
    best
}

/// How well a column name fits a dedupe key for a table of `strength`: lower is better.
pub fn key_tier(column: &str, strength: Strength) -> Option<u8> {
    let n = normalized(column);
    if ["idempotencykey", "idempotencyid", "dedupekey", "dedupkey", "dedupeid", "dedupid"].contains(&n.as_str()) {
        return Some(0);
    }
    if strength == Strength::Weak {
        return None;
    }
    if strength == Strength::Bare {
        const PREFIXES: &[&str] =
            &["", "stripe", "github", "shopify", "svix", "clerk", "paddle", "webhook", "provider"];
        return match n.as_str() {
            "id" => Some(3),
            _ if PREFIXES.iter().any(|p| n == format!("{p}eventid")) => Some(1),
            _ => None,
        };
    }
    if n.ends_with("eventid") || n.ends_with("deliveryid") || n == "svixid" || n == "eventkey" {
        return Some(1);
    }
    if strength == Strength::Strong && ["messageid", "key", "webhookid", "jobid"].contains(&n.as_str()) {
        return Some(2);
    }
    if n == "id" {
        return Some(3);
    }
    None
}

/// A column as every schema kind describes it.
#[derive(Clone, Debug, Default)]
pub struct Column {
    /// The name in code and, when different, the database name.
    pub names: Vec<String>,
    pub unique: bool,
    pub primary: bool,
    pub foreign: bool,
    pub textual: bool,
}

/// The index of the table's dedupe key column when it is not unique. `unique_sets` are the
/// column lists of table-level primary keys and unique constraints.
pub fn non_unique_key(columns: &[Column], unique_sets: &[Vec<String>], strength: Strength) -> Option<usize> {
    let has_pk = columns.iter().any(|c| c.primary) || !unique_sets.is_empty();
    let mut best: Option<(u8, usize)> = None;
    for (i, c) in columns.iter().enumerate() {
        if c.foreign {
            continue;
        }
        let Some(tier) = c.names.iter().filter_map(|n| key_tier(n, strength)).min() else { continue };
        // A generic `id` only stands for the event id in a table without any other key.
        if tier == 3 && strength < Strength::Strong && (!c.textual || has_pk) {
            continue;
        }
        if best.is_none_or(|(t, _)| tier < t) {
            best = Some((tier, i));
        }
    }
    let (_, i) = best?;
    let c = &columns[i];
    let in_set =
        unique_sets.iter().any(|set| set.iter().any(|s| c.names.iter().any(|n| normalized(n) == normalized(s))));
    if c.unique || c.primary || in_set { None } else { Some(i) }
}

/// The index of the dedupe key column of the table called `names` when the schema does not
/// make it unique; None for a table that is not a dedupe marker.
pub fn dedupe_key_gap(names: &[String], columns: &[Column], unique_sets: &[Vec<String>]) -> Option<usize> {
    let strength = table_strength(names)?;
    if strength < Strength::Strong && is_outbound_log(columns) || is_registration(columns) {
        return None;
    }
    non_unique_key(columns, unique_sets, strength)
}

/// Whether an index's own name says it exists to deduplicate (`account_ref_dedup_idx`,
/// `orders_idempotency_idx`): a plain index of that name lets two equal rows in, which is
/// what its author meant it to prevent.
fn names_dedupe_index(name: &str) -> bool {
    let n = normalized(name);
    n.contains("dedup") || n.contains("idempot")
}

/// Whether the schema makes rows unique through any of `index_columns`: a unique or primary
/// column among them, or a unique set (primary key, unique constraint) naming one of them. A
/// plain index beside a unique one on an overlapping key (`idempotency_key` next to a unique
/// `(period, idempotency_key)`) is a lookup aid, not the dedupe.
fn unique_through(index_columns: &[String], columns: &[Column], unique_sets: &[Vec<String>]) -> bool {
    let listed = |name: &str| index_columns.iter().any(|c| normalized(c) == normalized(name));
    columns.iter().any(|c| (c.unique || c.primary) && c.names.iter().any(|n| listed(n)))
        || unique_sets.iter().any(|set| set.iter().any(|s| listed(s)))
}

/// A plain index named for deduplication whose rows the schema does not make unique.
pub fn dedupe_index_gap(name: &str, index_columns: &[String], columns: &[Column], unique_sets: &[Vec<String>]) -> bool {
    names_dedupe_index(name)
        && !index_columns.iter().all(|c| is_time_column(c))
        && !unique_through(index_columns, columns, unique_sets)
}

/// A timestamp column (`createdAt`, `created_at`, `received_timestamp`): an index over such
/// columns only (`idempotency_key_created_at_idx`) serves cleanup by age, whatever the table is
/// called; equal times are not duplicates.
fn is_time_column(name: &str) -> bool {
    let name = name.trim_matches(['"', '`', '[', ']']);
    let lower = name.to_ascii_lowercase();
    name.ends_with("_at") || name.ends_with("At") || ["timestamp", "date", "time"].iter().any(|w| lower.contains(w))
}

/// A table that registers a webhook rather than logging its deliveries: it keeps the signing
/// secret (`mothership_inbox_webhook`: workspace, webhook id, secret), one row per endpoint.
fn is_registration(columns: &[Column]) -> bool {
    const SECRET: &[&str] = &["secret", "signingsecret", "webhooksecret", "secretkey", "signingkey"];
    columns.iter().any(|c| c.names.iter().any(|n| SECRET.contains(&normalized(n).as_str())))
}

/// A log of webhooks this app SENDS (`webhook_deliveries`: one event, one row per endpoint and
/// attempt): its event id repeats by design. Told apart by where the delivery went or what the
/// receiver answered.
fn is_outbound_log(columns: &[Column]) -> bool {
    const OUTBOUND: &[&str] = &[
        "url",
        "endpoint",
        "endpointid",
        "endpointurl",
        "webhookendpointid",
        "targeturl",
        "destination",
        "destinationurl",
        "subscriberid",
        "responsestatus",
        "responsecode",
        "responsebody",
        "httpstatus",
    ];
    columns.iter().any(|c| c.names.iter().any(|n| OUTBOUND.contains(&normalized(n).as_str())))
}

/// The name of a pair's key (`eventId`, `'event_id'`).
pub fn pair_key(pair: Node, src: &str) -> Option<String> {
    let k = pair.field("key")?;
    Some(ast::string_value(k, src).unwrap_or_else(|| text(k, src).to_string()))
}

/// The name a value is assigned to: `const processedEvents = <value>`.
pub fn assigned_name(node: Node, src: &str) -> Option<String> {
    let mut cur = node.parent()?;
    while matches!(cur.kind_name(), "parenthesized_expression" | "as_expression" | "satisfies_expression") {
        cur = cur.parent()?;
    }
    match cur.kind_name() {
        "variable_declarator" => cur.field("name").map(|n| text(n, src).to_string()),
        "assignment_expression" => cur.field("left").and_then(|l| ast::member_path(l, src).pop()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_events_tables_need_an_event_id_column() {
        let col = |n: &str| Column { names: vec![n.to_string()], textual: true, ..Column::default() };
        let id = Column { primary: true, ..col("id") };
        assert_eq!(table_strength(&["Event".into()]), Some(Strength::Bare));
        assert_eq!(non_unique_key(&[id.clone(), col("externalEventId")], &[], Strength::Bare), None);
        assert_eq!(non_unique_key(&[id.clone(), col("stripeEventId")], &[], Strength::Bare), Some(1));
        assert_eq!(non_unique_key(&[id, col("externalEventId")], &[], Strength::Strong), Some(1));
    }

    #[test]
    fn outbound_delivery_logs_repeat_their_event_id() {
        let col = |n: &str| Column { names: vec![n.to_string()], textual: true, ..Column::default() };
        let id = Column { primary: true, ..col("id") };
        let log = [id.clone(), col("event_id"), col("endpoint_id"), col("response_status")];
        assert_eq!(dedupe_key_gap(&["webhook_deliveries".into()], &log, &[]), None);
        let inbound = [id.clone(), col("event_id"), col("payload")];
        assert_eq!(dedupe_key_gap(&["webhook_deliveries".into()], &inbound, &[]), Some(1));
        // a processed-events table is a marker whatever else it records
        assert_eq!(dedupe_key_gap(&["processed_webhooks".into()], &log, &[]), Some(1));
    }
}
