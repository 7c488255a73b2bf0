//! The handler model: what each rule reads instead of re-deriving it from the tree.

pub mod ast;
pub mod best_effort;
pub mod dedupe_keys;
pub mod effects;
pub mod guards;
pub mod handlers;
pub mod keys;
pub mod markers;
pub mod node_index;
pub mod providers;
pub mod queries;
pub mod reach;
pub mod responses;
pub mod retry_loops;
pub mod schema;

pub use effects::{Effect, EffectKind, Sdk};
pub use guards::GuardKind;
pub use handlers::{Framework, Handler};
pub use providers::{EventKey, Provider};
pub use reach::Scope;
pub mod express_app;
pub mod pg_pool;
pub mod stmts;
pub mod verify;
