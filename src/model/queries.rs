//! Tree-sitter queries from `transforms/`, compiled once per grammar.

use crate::source::{Dialect, SourceFile};
use std::sync::OnceLock;
use tree_sitter::{Node, Query, QueryCursor, StreamingIterator};

const ENTRY_POINTS: &str = include_str!("../../transforms/entry_points.scm");

/// What an entry-point candidate is (the query's capture name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Candidate {
    Call,
    Export,
    New,
    Method,
    Assignment,
}

fn entry_points(dialect: Dialect) -> &'static Query {
    static TYPESCRIPT: OnceLock<Query> = OnceLock::new();
    static TSX: OnceLock<Query> = OnceLock::new();
    let cell = if dialect == Dialect::TypeScript { &TYPESCRIPT } else { &TSX };
    // The query ships with the binary and is tested: failing to compile it is a build bug.
    cell.get_or_init(|| Query::new(&dialect.language(), ENTRY_POINTS).expect("transforms/entry_points.scm compiles"))
}

/// Entry-point candidates of a file, parents before children, in source order.
pub fn entry_point_candidates(file: &SourceFile) -> Vec<(Candidate, Node<'_>)> {
    let query = entry_points(file.dialect);
    let mut cursor = QueryCursor::new();
    let mut out = Vec::new();
    let mut matches = cursor.matches(query, file.root(), file.text.as_bytes());
    while let Some(m) = matches.next() {
        for capture in m.captures {
            let kind = match query.capture_names()[capture.index as usize] {
                "call" => Candidate::Call,
                "export" => Candidate::Export,
                "new" => Candidate::New,
                "method" => Candidate::Method,
                "assignment" => Candidate::Assignment,
                _ => continue,
            };
            out.push((kind, capture.node));
        }
    }
    out.sort_by_key(|(_, n)| (n.start_byte(), std::cmp::Reverse(n.end_byte())));
    out.dedup_by_key(|(_, n)| n.id());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_compile_for_both_grammars_and_find_registrations() {
        let text =
            "app.post('/webhooks/x', h);\nfoo.bar(1);\nexport const handler = async () => {};\nnew Worker('q', p);\n";
        for dialect in [Dialect::TypeScript, Dialect::Tsx] {
            let file = SourceFile::new("a.ts".into(), text.into(), dialect).unwrap();
            let kinds: Vec<Candidate> = entry_point_candidates(&file).into_iter().map(|(k, _)| k).collect();
            assert_eq!(kinds, vec![Candidate::Call, Candidate::Export, Candidate::New], "{dialect:?}");
        }
    }
}
