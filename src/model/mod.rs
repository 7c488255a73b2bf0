//! The handler model: what each rule reads instead of re-deriving it from the tree.

pub mod ast;
pub mod effects;
pub mod guards;
pub mod handlers;
pub mod keys;
pub mod markers;
pub mod providers;
pub mod reach;

pub use effects::{Effect, EffectKind, Sdk};
pub use guards::GuardKind;
pub use handlers::{Framework, Handler};
pub use providers::{EventKey, Provider};
pub use reach::Scope;
