//! The handler model: what each rule reads instead of re-deriving it from the tree.

// The syntax helpers predate the split into layers; this path keeps every user's import.
pub use crate::syntax::ast;
pub mod best_effort;
pub mod claims;
pub mod dedupe_keys;
pub mod effects;
pub mod guards;
pub mod handlers;
pub mod keys;
pub mod markers;
pub mod payload;
pub mod providers;
pub mod queries;
pub mod queue_retries;
pub mod reach;
pub mod responses;
pub mod retry_loops;
pub mod ruled_out;
pub mod schema;

pub use effects::{Effect, EffectKind, Sdk};
pub use guards::GuardKind;
pub use handlers::{Framework, Handler};
pub use providers::{EventKey, Provider};
pub use reach::Scope;
pub mod express_app;
pub mod pg_pool;
pub mod stmts;
pub mod unique_writes;
pub mod verify;
