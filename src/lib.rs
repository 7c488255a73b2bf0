//! retrysafe: finds webhook and queue handlers that break under at-least-once delivery, and
//! fixes them. Data flows one way: workspace → source → project → model → rules → fix → report.

pub mod bench;
pub mod config;
pub mod engine;
pub mod fix;
pub mod lsp;
pub mod model;
pub mod project;
pub mod report;
pub mod rules;
pub mod source;
pub mod suppress;
pub mod workspace;
