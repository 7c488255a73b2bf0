//! The fix model (as in ruff): an edit is a byte range of the current text and its
//! replacement; a fix is a sorted, non-overlapping set of edits applied all or nothing, with
//! one applicability.

pub mod apply;
pub mod callbacks;
pub mod edits;
pub mod guard_module;
pub mod imports;
pub mod policy;
pub mod text;
pub mod typecheck;
pub mod wrap_guard;
pub mod write;

pub use crate::config::GuardSpec;
use serde::Serialize;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Applicability {
    /// Mechanically certain; keeps behaviour for the first delivery.
    Safe,
    /// Restructures code or relies on a heuristic: applied only after review (the dry run).
    Unsafe,
    /// Shown, never applied (e.g. no guard configured, or no event key could be found).
    DisplayOnly,
}

impl Applicability {
    pub fn label(self) -> &'static str {
        match self {
            Applicability::Safe => "safe",
            Applicability::Unsafe => "unsafe (review)",
            Applicability::DisplayOnly => "display-only",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Edit {
    pub start: usize,
    pub end: usize,
    pub replacement: String,
}

impl Edit {
    pub fn insert(at: usize, text: impl Into<String>) -> Edit {
        Edit { start: at, end: at, replacement: text.into() }
    }

    pub fn replace(start: usize, end: usize, text: impl Into<String>) -> Edit {
        Edit { start, end, replacement: text.into() }
    }

    pub fn delete(start: usize, end: usize) -> Edit {
        Edit { start, end, replacement: String::new() }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Fix {
    pub title: String,
    pub applicability: Applicability,
    /// Sorted by start, non-overlapping (the constructor enforces it).
    pub edits: Vec<Edit>,
    /// The file the edits apply to, when it is not the diagnostic's file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<PathBuf>,
    /// Files the fix creates (a new SQL migration).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub new_files: Vec<(PathBuf, String)>,
    /// Why a fix needs review or cannot be applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Fix {
    pub fn new(title: impl Into<String>, applicability: Applicability, mut edits: Vec<Edit>) -> Fix {
        edits.sort_by_key(|e| (e.start, e.end));
        edits.dedup();
        Fix { title: title.into(), applicability, edits, target: None, new_files: Vec::new(), note: None }
    }

    pub fn safe(title: impl Into<String>, edits: Vec<Edit>) -> Fix {
        Fix::new(title, Applicability::Safe, edits)
    }

    pub fn unsafe_(title: impl Into<String>, edits: Vec<Edit>) -> Fix {
        Fix::new(title, Applicability::Unsafe, edits)
    }

    pub fn display_only(title: impl Into<String>, note: impl Into<String>) -> Fix {
        let mut fix = Fix::new(title, Applicability::DisplayOnly, Vec::new());
        fix.note = Some(note.into());
        fix
    }

    pub fn with_note(mut self, note: impl Into<String>) -> Fix {
        self.note = Some(note.into());
        self
    }

    /// Whether the edits overlap one another (a malformed fix, dropped by the engine).
    pub fn is_well_formed(&self) -> bool {
        self.edits.windows(2).all(|w| w[0].end <= w[1].start)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_spec_parses_module_and_export() {
        let spec = GuardSpec::parse("@/lib/guard#guard").unwrap();
        assert_eq!(spec.module, "@/lib/guard");
        assert_eq!(spec.export, "guard");
        assert_eq!(GuardSpec::parse("./g#default").unwrap().local_name(), "guard");
        assert!(GuardSpec::parse("nohash").is_none());
        assert!(GuardSpec::parse("#x").is_none());
        assert!(GuardSpec::parse("m#1bad").is_none());
    }
}
