//! retrysafe: finds webhook and queue handlers that break under at-least-once delivery, and
//! fixes them. Data flows one way: workspace → source → project → model → rules → fix → report.

pub mod batch;
pub mod bench;
pub mod config;
pub mod doctor;
pub mod engine;
pub mod facts;
pub mod fix;
pub mod init;
pub mod lsp;
pub mod model;
pub mod project;
pub mod report;
pub mod rules;
pub mod source;
pub mod suggest;
pub mod suppress;
pub mod syntax;
pub mod verify;
pub mod workspace;

/// A regex compiled once per process: patterns in rule code run per call node, and compiling
/// them there dominated the profile.
#[macro_export]
macro_rules! regex {
    ($re:literal) => {{
        static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
        RE.get_or_init(|| regex::Regex::new($re).unwrap())
    }};
}
