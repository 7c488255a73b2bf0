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

/// A pattern over source text, compiled with ASCII classes: `\w`, `\b` and `(?i)` over
/// Unicode tables compile to automata a hundred times larger, and identifiers are ASCII. A
/// pattern that needs Unicode mode (one that could match part of a UTF-8 sequence) keeps it.
pub fn ascii_regex(pattern: &str) -> regex::Regex {
    regex::RegexBuilder::new(pattern).unicode(false).build().or_else(|_| regex::Regex::new(pattern)).unwrap()
}

/// A regex compiled once per process: patterns in rule code run per call node, and compiling
/// them there dominated the profile.
#[macro_export]
macro_rules! regex {
    ($re:literal) => {{
        static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
        RE.get_or_init(|| $crate::ascii_regex($re))
    }};
}
