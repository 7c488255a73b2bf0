//! The benchmark's baseline: discover the files `check` would see and parse every one of
//! them with tree-sitter, in parallel, doing nothing else. `scripts/bench` compares `check`
//! against it.

use crate::source::{self, Dialect};
use crate::workspace;
use rayon::prelude::*;
use std::path::PathBuf;

#[derive(Debug, Default, Clone, Copy)]
pub struct ParseStats {
    pub files: usize,
    pub bytes: usize,
    /// Files that could not be read or that the parser gave up on.
    pub failed: usize,
}

pub fn parse_all(paths: &[PathBuf], threads: usize) -> ParseStats {
    let threads = if threads == 0 { std::thread::available_parallelism().map_or(2, |n| n.get()) } else { threads };
    let found = workspace::discover(paths, threads);
    let run = || {
        found
            .files
            .par_iter()
            .map(|path| {
                // Schema files are read as text by the rules: there is no tree to build.
                let Some(dialect) = Dialect::for_path(path) else { return ParseStats::default() };
                let parsed = crate::project::read_text(path)
                    .ok()
                    .and_then(|text| source::parse(dialect, &text).map(|tree| (text.len(), tree)));
                match parsed {
                    Some((bytes, _tree)) => ParseStats { files: 1, bytes, failed: 0 },
                    None => ParseStats { files: 0, bytes: 0, failed: 1 },
                }
            })
            .reduce(ParseStats::default, |a, b| ParseStats {
                files: a.files + b.files,
                bytes: a.bytes + b.bytes,
                failed: a.failed + b.failed,
            })
    };
    match rayon::ThreadPoolBuilder::new().num_threads(threads).build() {
        Ok(pool) => pool.install(run),
        Err(_) => run(),
    }
}
