//! The tree-sitter query files of `transforms/`, one per rule family, compiled once per
//! grammar: each locates candidates inside a handler's scopes, and Rust code decides.
//!
//! Entry points are the exception: `transforms/entry_points.scm` is their readable
//! specification and test oracle, but running it (or any full traversal) on every parsed file
//! costs a large fraction of parsing, while the shapes it matches all contain a telling token
//! (`export`, `.post`, `Worker`, `@`, `exports`, ...). So the hot path scans the text for
//! those tokens, looks up the node at each, climbs to the candidate and checks it exactly as
//! the query would; tests prove both agree on every fixture and example.

use crate::model::ast;
use crate::source::{Dialect, SourceFile};
use crate::syntax::ast::KindName;
use std::sync::OnceLock;
use tree_sitter::{Language, Node, Query, QueryCursor, StreamingIterator};

/// The query the token scan implements (used by the equivalence tests).
pub const ENTRY_POINTS: &str = include_str!("../../transforms/entry_points.scm");

/// What an entry-point candidate is (the query's capture name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Candidate {
    Call,
    Export,
    New,
    Method,
    Assignment,
    Pair,
}

/// Registration methods: `app.post(...)`, `queue.process(...)`, `consumer.run(...)`, ...
/// (matched case-insensitively, as the query's `(?i:...)`).
const MEMBER_NAMES: &[&str] = &[
    "post",
    "put",
    "patch",
    "all",
    "route",
    "process",
    "run",
    "consume",
    "on",
    "createFunction",
    "task",
    "schemaTask",
    "serve",
    "send",
    "handler",
    "createRunner",
    "getNextJob",
    "openapi",
    "create",
    "receiveMessage",
    "receiveMessages",
];

/// Bare registration calls: `serve(fn)`, `defineEventHandler(...)`, ...
const BARE_NAMES: &[&str] =
    &["serve", "task", "schemaTask", "createFunction", "defineEventHandler", "eventHandler", "Webhooks", "webhooks"];

/// Method names that are entry points without a decorator (BullMQ `process`, Cloudflare `queue`
/// and `fetch`).
const METHOD_NAMES: &[&str] = &["queue", "process", "fetch"];

/// Kind and field ids of one grammar.
struct Kinds {
    call_expression: u16,
    member_expression: u16,
    property_identifier: u16,
    identifier: u16,
    export_statement: u16,
    new_expression: u16,
    method_definition: u16,
    decorator: u16,
    expression_statement: u16,
    assignment_expression: u16,
    pair: u16,
    arrow_function: u16,
    function_expression: u16,
    string: u16,
    function_field: u16,
    property_field: u16,
    constructor_field: u16,
    name_field: u16,
    left_field: u16,
    key_field: u16,
    value_field: u16,
}

impl Kinds {
    fn of(language: &Language) -> Kinds {
        let kind = |name: &str| {
            let id = language.id_for_node_kind(name, true);
            assert!(id != 0, "the grammar has no node kind {name}");
            id
        };
        let field = |name: &str| language.field_id_for_name(name).map(|f| f.get()).expect("grammar field");
        Kinds {
            call_expression: kind("call_expression"),
            member_expression: kind("member_expression"),
            property_identifier: kind("property_identifier"),
            identifier: kind("identifier"),
            export_statement: kind("export_statement"),
            new_expression: kind("new_expression"),
            method_definition: kind("method_definition"),
            decorator: kind("decorator"),
            expression_statement: kind("expression_statement"),
            assignment_expression: kind("assignment_expression"),
            pair: kind("pair"),
            arrow_function: kind("arrow_function"),
            function_expression: kind("function_expression"),
            string: kind("string"),
            function_field: field("function"),
            property_field: field("property"),
            constructor_field: field("constructor"),
            name_field: field("name"),
            left_field: field("left"),
            key_field: field("key"),
            value_field: field("value"),
        }
    }

    fn for_dialect(dialect: Dialect) -> &'static Kinds {
        static TYPESCRIPT: OnceLock<Kinds> = OnceLock::new();
        static TSX: OnceLock<Kinds> = OnceLock::new();
        let cell = if dialect == Dialect::TypeScript { &TYPESCRIPT } else { &TSX };
        cell.get_or_init(|| Kinds::of(&dialect.language()))
    }

    /// What `node` is as the query sees it, if it is a candidate at all.
    fn candidate(&self, node: Node, src: &[u8]) -> Option<Candidate> {
        let kind = node.kind_id();
        let text = |n: Node| &src[n.byte_range()];
        if kind == self.call_expression {
            let function = node.child_by_field_id(self.function_field)?;
            let registers = if function.kind_id() == self.member_expression {
                let property = function.child_by_field_id(self.property_field)?;
                property.kind_id() == self.property_identifier
                    && MEMBER_NAMES.iter().any(|n| n.as_bytes().eq_ignore_ascii_case(text(property)))
            } else {
                function.kind_id() == self.identifier && BARE_NAMES.iter().any(|n| n.as_bytes() == text(function))
            };
            registers.then_some(Candidate::Call)
        } else if kind == self.export_statement {
            Some(Candidate::Export)
        } else if kind == self.new_expression {
            let ctor = node.child_by_field_id(self.constructor_field)?;
            (ctor.kind_id() == self.identifier && matches!(text(ctor), b"Worker" | b"Runner")).then_some(Candidate::New)
        } else if kind == self.method_definition {
            let named = node.child_by_field_id(self.name_field).is_some_and(|n| {
                n.kind_id() == self.property_identifier && METHOD_NAMES.iter().any(|m| m.as_bytes() == text(n))
            });
            let decorated = node.prev_named_sibling().is_some_and(|p| p.kind_id() == self.decorator);
            (named || decorated).then_some(Candidate::Method)
        } else if kind == self.expression_statement {
            let mut cursor = node.walk();
            let exports = node.named_children(&mut cursor).any(|c| {
                c.kind_id() == self.assignment_expression
                    && c.child_by_field_id(self.left_field)
                        .is_some_and(|l| l.kind_id() == self.member_expression && names_exports(text(l)))
            });
            exports.then_some(Candidate::Assignment)
        } else if kind == self.pair {
            let key = node.child_by_field_id(self.key_field)?;
            let value = node.child_by_field_id(self.value_field)?.kind_id();
            let named = |name: &[u8]| key.kind_id() == self.property_identifier && text(key) == name;
            let callback = named(b"callback") || named(b"queue");
            let function =
                value == self.arrow_function || value == self.function_expression || value == self.identifier;
            // a Pub/Sub worker object: `{ subscription: "api.new-view", handler: async (message) => {} }`
            let subscription = named(b"subscription") && value == self.string;
            (callback && function || subscription).then_some(Candidate::Pair)
        } else {
            None
        }
    }

    /// The node a token proposes: the smallest node at the token, climbed to where the
    /// candidate shape it belongs to would start.
    fn proposed<'t>(&self, root: Node<'t>, start: usize, end: usize) -> Option<Node<'t>> {
        let leaf = root.descendant_for_byte_range(start, end)?;
        let parent = leaf.parent()?;
        let kind = parent.kind_id();
        if kind == self.member_expression {
            // `app.post(...)` (property of the callee), `module.exports.x = ...` (any depth)
            let mut top = parent;
            while let Some(up) = top.parent().filter(|u| u.kind_id() == self.member_expression) {
                top = up;
            }
            let above = top.parent()?;
            if above.kind_id() == self.assignment_expression {
                return above.parent();
            }
            return Some(above);
        }
        if kind == self.assignment_expression {
            // `exports = ...` is no candidate, but the statement says so itself
            return parent.parent();
        }
        if kind == self.decorator {
            let mut next = parent.next_named_sibling();
            while let Some(n) = next.filter(|n| n.kind_id() == self.decorator) {
                next = n.next_named_sibling();
            }
            return next;
        }
        Some(parent)
    }
}

/// `module.exports`, `exports.handler`, `module.exports.handler` (the query's `#match?`).
fn names_exports(left: &[u8]) -> bool {
    let rest = match left.strip_prefix(b"module") {
        Some(after) => {
            let after = after.trim_ascii_start();
            match after.strip_prefix(b".") {
                Some(after) => after.trim_ascii_start(),
                None => left,
            }
        }
        None => left,
    };
    rest.strip_prefix(b"exports")
        .is_some_and(|after| after.first().is_none_or(|c| !(c.is_ascii_alphanumeric() || *c == b'_')))
}

/// A query file of `transforms/` that locates the candidates of one rule family inside a
/// handler's scopes, compiled once per grammar.
pub struct QueryFile {
    pub name: &'static str,
    source: &'static str,
    typescript: OnceLock<Query>,
    tsx: OnceLock<Query>,
    flat_typescript: OnceLock<Option<FlatPatterns>>,
    flat_tsx: OnceLock<Option<FlatPatterns>>,
}

/// The patterns of a query file whose every pattern is one node (a kind or an alternation of
/// kinds, one capture, text predicates on it), indexed by node kind. Matching them is a pass
/// over the tree's node list: a query cursor moving through the whole tree cost more than
/// the rest of locating candidates.
struct FlatPatterns {
    /// By kind id, the patterns that node kind can match, in pattern order.
    by_kind: Vec<Vec<FlatPattern>>,
}

struct FlatPattern {
    /// Its index in the query file.
    index: usize,
    capture: &'static str,
    condition: TextCondition,
}

/// A text predicate, as tree-sitter's Rust binding evaluates it on the captured node's text.
#[derive(Clone)]
enum TextCondition {
    Always,
    OneOf(Vec<Vec<u8>>),
    Equals(Vec<u8>),
    Matches(regex::bytes::Regex),
}

impl TextCondition {
    fn holds(&self, text: &[u8]) -> bool {
        match self {
            TextCondition::Always => true,
            TextCondition::OneOf(words) => words.iter().any(|w| w == text),
            TextCondition::Equals(word) => word == text,
            TextCondition::Matches(re) => re.is_match(text),
        }
    }
}

/// The tokens of a query file: parentheses, brackets, `@capture`, `#predicate?`, strings
/// (unescaped) and bare words (kinds, fields, anchors).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Open,
    Close,
    OpenAlternation,
    CloseAlternation,
    Capture(String),
    Predicate(String),
    Str(String),
    Word(String),
}

fn tokens(source: &str) -> Option<Vec<Token>> {
    let mut out = Vec::new();
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ';' => while chars.next_if(|c| *c != '\n').is_some() {},
            c if c.is_whitespace() => {}
            '(' => out.push(Token::Open),
            ')' => out.push(Token::Close),
            '[' => out.push(Token::OpenAlternation),
            ']' => out.push(Token::CloseAlternation),
            '"' => {
                let mut text = String::new();
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => text.push(match chars.next()? {
                            'n' => '\n',
                            't' => '\t',
                            'r' => '\r',
                            '0' => '\0',
                            other => other,
                        }),
                        other => text.push(other),
                    }
                }
                out.push(Token::Str(text));
            }
            _ => {
                let mut word = String::from(c);
                while let Some(next) = chars.next_if(|c| !c.is_whitespace() && !"()[]\";".contains(*c)) {
                    word.push(next);
                }
                out.push(match c {
                    '@' => Token::Capture(word[1..].to_string()),
                    '#' => Token::Predicate(word[1..].to_string()),
                    _ => Token::Word(word),
                });
            }
        }
    }
    Some(out)
}

/// One single-node pattern: (kinds, capture, predicates as (operator, capture, arguments)).
type SingleNode = (Vec<String>, String, Vec<(String, String, Vec<String>)>);

/// The single-node patterns of a query file, in order; None if any pattern is more.
fn single_node_patterns(source: &str) -> Option<Vec<SingleNode>> {
    let tokens = tokens(source)?;
    let mut at = 0;
    let mut out = Vec::new();
    let next = |at: &mut usize| {
        *at += 1;
        tokens.get(*at - 1).cloned()
    };
    // `(kind)`, with the opening parenthesis read.
    let kind = |at: &mut usize| match (next(at)?, next(at)?) {
        (Token::Word(k), Token::Close) => Some(k),
        _ => None,
    };
    // `(kind) @capture` or `[(a) (b)] @capture`, with the first token read.
    let node = |at: &mut usize, first: Token| -> Option<(Vec<String>, String)> {
        let kinds = match first {
            Token::Open => vec![kind(at)?],
            Token::OpenAlternation => {
                let mut kinds = Vec::new();
                loop {
                    match next(at)? {
                        Token::Open => kinds.push(kind(at)?),
                        Token::CloseAlternation if !kinds.is_empty() => break kinds,
                        _ => return None,
                    }
                }
            }
            _ => return None,
        };
        match next(at)? {
            Token::Capture(c) => Some((kinds, c)),
            _ => None,
        }
    };
    while at < tokens.len() {
        let first = next(&mut at)?;
        let grouped = first == Token::Open && matches!(tokens.get(at), Some(Token::Open | Token::OpenAlternation));
        if !grouped {
            let (kinds, capture) = node(&mut at, first)?;
            out.push((kinds, capture, Vec::new()));
            continue;
        }
        let inner = next(&mut at)?;
        let (kinds, capture) = node(&mut at, inner)?;
        let mut predicates = Vec::new();
        loop {
            match next(&mut at)? {
                Token::Close => break,
                Token::Open => {
                    let (Token::Predicate(operator), Token::Capture(of)) = (next(&mut at)?, next(&mut at)?) else {
                        return None;
                    };
                    let mut arguments = Vec::new();
                    loop {
                        match next(&mut at)? {
                            Token::Str(s) => arguments.push(s),
                            Token::Close => break,
                            _ => return None,
                        }
                    }
                    predicates.push((operator, of, arguments));
                }
                _ => return None,
            }
        }
        out.push((kinds, capture, predicates));
    }
    Some(out)
}

impl FlatPatterns {
    /// The query file's patterns for `language`, if every one is a single node with
    /// predicates this reads exactly as tree-sitter does.
    fn compile(source: &str, query: &'static Query, language: &Language) -> Option<FlatPatterns> {
        let patterns = single_node_patterns(source)?;
        if patterns.len() != query.pattern_count() {
            return None;
        }
        let names = query.capture_names();
        let mut by_kind: Vec<Vec<FlatPattern>> = Vec::new();
        by_kind.resize_with(language.node_kind_count(), Vec::new);
        for (index, (kinds, capture, predicates)) in patterns.into_iter().enumerate() {
            let capture = *names.iter().find(|n| **n == capture)?;
            let condition = match predicates.as_slice() {
                [] => TextCondition::Always,
                [(operator, of, arguments)] if of == capture => match (operator.as_str(), arguments.as_slice()) {
                    ("any-of?", words) => TextCondition::OneOf(words.iter().map(|w| w.as_bytes().to_vec()).collect()),
                    ("eq?", [word]) => TextCondition::Equals(word.as_bytes().to_vec()),
                    ("match?", [re]) => TextCondition::Matches(regex::bytes::Regex::new(re).ok()?),
                    _ => return None,
                },
                _ => return None,
            };
            let mut ids = Vec::new();
            for k in &kinds {
                let id = language.id_for_node_kind(k, true);
                if id == 0 {
                    return None;
                }
                ids.push(id as usize);
            }
            // Kinds of one alternation are one pattern: a node matches it once.
            ids.sort_unstable();
            ids.dedup();
            for id in ids {
                by_kind.get_mut(id)?.push(FlatPattern { index, capture, condition: condition.clone() });
            }
        }
        Some(FlatPatterns { by_kind })
    }

    /// What `QueryFile::matches` finds under `within`, in the same order: nodes in pre-order,
    /// kept where a query cursor limited to `within`'s bytes starts a match (it skips empty
    /// nodes at the range's end and the insides of nodes outside it). None when the node
    /// list does not hold `within`.
    fn matches<'t>(&self, within: Node<'t>, src: &str, captures: Option<&[&str]>) -> Option<Vec<Match<'t>>> {
        let index = crate::syntax::node_index::built_for(within);
        let kept = |p: &FlatPattern| captures.is_none_or(|names| names.contains(&p.capture));
        let start = within.start_byte();
        let end = match within.end_byte() {
            0 => usize::MAX,
            e => e,
        };
        let mut out = Vec::new();
        let wanted =
            |kind_id: u16, _: &'static str| self.by_kind.get(kind_id as usize).is_some_and(|p| p.iter().any(kept));
        for (kind_id, node, parent) in index.subtree_with_parents(within, wanted)? {
            let patterns = &self.by_kind[kind_id as usize];
            let empty = node.start_byte() == node.end_byte();
            let precedes = parent.is_some_and(|p| p.end_byte() <= start)
                || node.end_byte() < start
                || (!empty && node.end_byte() == start);
            let follows = parent.is_some_and(|p| p.start_byte() >= end) || node.start_byte() >= end;
            let inside = within.start_byte() <= node.start_byte() && node.end_byte() <= within.end_byte();
            if precedes || follows || !inside {
                continue;
            }
            for p in patterns.iter().filter(|p| kept(p)) {
                if p.condition.holds(&src.as_bytes()[node.byte_range()]) {
                    out.push(Match { pattern: p.index, captures: vec![(p.capture, node)] });
                }
            }
        }
        Some(out)
    }

    /// The captures in `root`'s tree, in the order a query cursor yields them: nodes in
    /// pre-order, each node's patterns in pattern order.
    fn captures<'t>(&self, root: Node<'t>, src: &str, found: &mut dyn FnMut(&'static str, Node<'t>)) {
        let index = crate::syntax::node_index::built_for(root);
        for (kind_id, node) in index.all_nodes(root) {
            let Some(patterns) = self.by_kind.get(kind_id as usize) else { continue };
            for p in patterns {
                if p.condition.holds(&src.as_bytes()[node.byte_range()]) {
                    found(p.capture, node);
                }
            }
        }
    }
}

/// Retry loops and retry-library calls (model::retry_loops).
pub static RETRY_LOOPS: QueryFile = QueryFile::new("retry_loops", include_str!("../../transforms/retry_loops.scm"));

/// In-memory dedupe stores and their checks and inserts (rules::in_memory_dedupe).
pub static IN_MEMORY_DEDUPE: QueryFile =
    QueryFile::new("in_memory_dedupe", include_str!("../../transforms/in_memory_dedupe.scm"));

/// Dedupe-key properties and random/time sources (model::dedupe_keys).
pub static DEDUPE_KEYS: QueryFile =
    QueryFile::new("nondeterministic_key", include_str!("../../transforms/nondeterministic_key.scm"));

/// Written columns and clock reads (rules::processing_time_write).
pub static PROCESSING_TIME_WRITE: QueryFile =
    QueryFile::new("processing_time_write", include_str!("../../transforms/processing_time_write.scm"));

/// Header names that are not a delivery's key (rules::wrong_event_field_as_key).
pub static WRONG_EVENT_FIELD: QueryFile =
    QueryFile::new("wrong_event_field_as_key", include_str!("../../transforms/wrong_event_field_as_key.scm"));

/// Answering statements and calls of HTTP handlers (model::responses).
pub static RESPONSES: QueryFile = QueryFile::new("responses", include_str!("../../transforms/responses.scm"));

/// Body-parser mounts and route registrations (model::express_app).
pub static EXPRESS_APP: QueryFile = QueryFile::new("express_app", include_str!("../../transforms/express_app.scm"));

/// Every query file but the entry points (which the token scan implements).
pub static FAMILIES: &[&QueryFile] = &[
    &RETRY_LOOPS,
    &IN_MEMORY_DEDUPE,
    &DEDUPE_KEYS,
    &PROCESSING_TIME_WRITE,
    &WRONG_EVENT_FIELD,
    &RESPONSES,
    &EXPRESS_APP,
];

/// Whether a walk from `from` that does not enter functions reaches `n` (a descendant of
/// `from`, or `from` itself): the walks query matches replace skipped callbacks.
pub fn reached_outside_functions(n: Node, from: Node) -> bool {
    let mut at = n;
    loop {
        if crate::model::ast::is_function(at) {
            return false;
        }
        if at == from {
            return true;
        }
        match ast::parent(at) {
            Some(p) => at = p,
            None => return false,
        }
    }
}

/// The call (or `new`) a matched callee name belongs to: `uuid` in `uuid()`, `randomUUID` in
/// `crypto.randomUUID()` or `crypto["randomUUID"]()`, through the wrappers `callee_path`
/// sees through (`(uuid as any)()`, `uuid!()`). The query files match such names as single
/// nodes: a pattern with nested nodes costs milliseconds to compile per grammar, a flat one
/// almost nothing, so the climb to the call is done here.
pub fn call_of_callee_name(name: Node) -> Option<Node> {
    let mut callee = name;
    if name.kind_name() == "string_fragment" {
        let string = ast::parent(name).filter(|p| p.kind_name() == "string")?;
        callee = ast::parent(string)
            .filter(|p| p.kind_name() == "subscript_expression" && ast::field(p, "index") == Some(string))?;
    } else if let Some(member) = ast::parent(name).filter(|p| p.kind_name() == "member_expression") {
        if ast::field(member, "property") != Some(name) {
            return None;
        }
        callee = member;
    }
    call_of_callee(callee)
}

/// `call_of_callee_name`, also through a template index: res[`json`](x) (`callee_path`
/// reads a template without substitutions as a name).
pub fn call_of_name(name: Node) -> Option<Node> {
    if let Some(template) = ast::parent(name).filter(|p| p.kind_name() == "template_string") {
        let subscript = ast::parent(template)
            .filter(|p| p.kind_name() == "subscript_expression" && ast::field(p, "index") == Some(template))?;
        return call_of_callee(subscript);
    }
    call_of_callee_name(name)
}

/// The call (or `new`) whose callee is `callee`, through the wrappers `callee_path` sees
/// through.
pub fn call_of_callee(mut callee: Node) -> Option<Node> {
    loop {
        let parent = ast::parent(callee)?;
        match parent.kind_name() {
            _ if ast::wraps(parent, callee) => callee = parent,
            "call_expression" if ast::field(parent, "function") == Some(callee) => return Some(parent),
            "new_expression" if ast::field(parent, "constructor") == Some(callee) => return Some(parent),
            _ => return None,
        }
    }
}

/// Nodes in the order a pre-order walk visits them (parents before children), each once:
/// the order the Rust walks a query replaces produced.
pub fn tree_order(nodes: &mut Vec<Node>) {
    // Nodes of one range are nested: the shallower one comes first.
    let depth = |n: &Node| ast::ancestors(*n).count();
    nodes.sort_by(|a, b| {
        (a.start_byte(), std::cmp::Reverse(a.end_byte()))
            .cmp(&(b.start_byte(), std::cmp::Reverse(b.end_byte())))
            .then_with(|| depth(a).cmp(&depth(b)))
    });
    nodes.dedup_by_key(|n| n.id());
}

impl QueryFile {
    const fn new(name: &'static str, source: &'static str) -> QueryFile {
        QueryFile {
            name,
            source,
            typescript: OnceLock::new(),
            tsx: OnceLock::new(),
            flat_typescript: OnceLock::new(),
            flat_tsx: OnceLock::new(),
        }
    }

    /// The query's patterns as single-node patterns (None: some pattern is more).
    fn flat(&'static self, dialect: Dialect) -> Option<&'static FlatPatterns> {
        let cell = if dialect == Dialect::TypeScript { &self.flat_typescript } else { &self.flat_tsx };
        cell.get_or_init(|| FlatPatterns::compile(self.source, self.query(dialect), &dialect.language())).as_ref()
    }

    /// Every capture in `root`'s tree in query-cursor order, before any climb.
    fn raw_captures<'t>(&'static self, root: Node<'t>, src: &str, found: &mut dyn FnMut(&'static str, Node<'t>)) {
        let dialect = dialect_of(root);
        if let Some(flat) = self.flat(dialect) {
            return flat.captures(root, src, found);
        }
        let query = self.query(dialect);
        let names = query.capture_names();
        let mut cursor = QueryCursor::new();
        let mut matches = cursor.matches(query, root, src.as_bytes());
        while let Some(m) = matches.next() {
            for c in m.captures {
                found(names[c.index as usize], c.node);
            }
        }
    }

    /// The compiled query for `dialect`. The files ship with the binary and are tested:
    /// failing to compile one is a build bug.
    pub fn query(&self, dialect: Dialect) -> &Query {
        let cell = if dialect == Dialect::TypeScript { &self.typescript } else { &self.tsx };
        cell.get_or_init(|| {
            Query::new(&dialect.language(), self.source)
                .unwrap_or_else(|e| panic!("transforms/{}.scm does not compile: {e}", self.name))
        })
    }

    /// Every match inside `within` (inclusive), in source order: the captures of each match
    /// by name.
    pub fn matches<'t>(&'static self, within: Node<'t>, src: &str) -> Vec<Match<'t>> {
        if let Some(found) = self.flat(dialect_of(within)).and_then(|flat| flat.matches(within, src, None)) {
            return found;
        }
        self.matches_by_cursor(within, src)
    }

    /// `matches` limited to the patterns whose capture is one of `captures`: a rule that
    /// needs the rare kinds of a file with common ones pays for the rare ones only.
    pub fn matches_of<'t>(&'static self, within: Node<'t>, src: &str, captures: &[&str]) -> Vec<Match<'t>> {
        if let Some(found) = self.flat(dialect_of(within)).and_then(|flat| flat.matches(within, src, Some(captures))) {
            return found;
        }
        let mut found = self.matches_by_cursor(within, src);
        found.retain(|m| m.captures.iter().any(|(name, _)| captures.contains(name)));
        found
    }

    /// `matches` by a query cursor (for query files with nested patterns).
    fn matches_by_cursor<'t>(&'static self, within: Node<'t>, src: &str) -> Vec<Match<'t>> {
        let query = self.query(dialect_of(within));
        let names = query.capture_names();
        let mut cursor = QueryCursor::new();
        cursor.set_byte_range(within.byte_range());
        let mut out = Vec::new();
        let mut matches = cursor.matches(query, within, src.as_bytes());
        while let Some(m) = matches.next() {
            let captures: Vec<(&'static str, Node<'t>)> =
                m.captures.iter().map(|c| (names[c.index as usize], c.node)).collect();
            if captures.iter().all(|(_, n)| within.start_byte() <= n.start_byte() && n.end_byte() <= within.end_byte())
            {
                out.push(Match { pattern: m.pattern_index, captures });
            }
        }
        out
    }
}

/// Candidates of single-node query files per tree: the handler scopes of a file are searched
/// many times (every rule, every branch), and a query cursor moving through a subtree, or
/// tree-sitter climbing to parents, costs more than the node-list walks a query replaces. So
/// each tree is matched and climbed once.
struct TreeCandidates {
    /// Keeps the nodes' subtrees alive, so a later tree at the same address has another
    /// first child.
    _tree: tree_sitter::Tree,
    /// The id of the root's first child (a root's own id is an address inside the tree
    /// struct, the same for a later tree at the same address), 0 for an empty tree.
    first_child: usize,
    /// (capture name, candidate, its enclosing function), in tree order.
    candidates: Vec<(&'static str, tree_sitter::ffi::TSNode, Option<tree_sitter::ffi::TSNode>)>,
}

thread_local! {
    static TREE_CANDIDATES: std::cell::RefCell<std::collections::HashMap<(usize, usize), std::rc::Rc<TreeCandidates>>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// Drops the candidates cached per tree (with the node lists, between analyses).
pub fn forget() {
    TREE_CANDIDATES.with(|m| m.borrow_mut().clear());
}

/// A candidate a query file located: the node Rust climbed to from a capture.
#[derive(Clone, Copy, Debug)]
pub struct Located<'t> {
    pub capture: &'static str,
    pub node: Node<'t>,
    /// The innermost function around `node` (not `node` itself) among those the query
    /// captures as `@function`.
    pub function: Option<Node<'t>>,
}

impl QueryFile {
    /// The candidates under `within` (inclusive), in tree order, of a query file whose
    /// patterns are single nodes: `climb` maps a capture (by name) to its candidate, the
    /// call of a callee name for instance. The whole tree is matched and climbed once per
    /// analysis; `climb` must be the same function for every call on one query file.
    pub fn located<'t>(
        &'static self,
        within: Node<'t>,
        src: &str,
        climb: for<'a> fn(&'static str, Node<'a>) -> Option<Node<'a>>,
    ) -> Vec<Located<'t>> {
        let raw = within.into_raw();
        // SAFETY: `within` borrows a live tree, so its tree pointer is valid.
        let root = unsafe { tree_sitter::ffi::ts_tree_root_node(raw.tree) };
        // SAFETY: as above.
        let first_child = match unsafe { tree_sitter::ffi::ts_node_child_count(root) } {
            0 => 0,
            _ => unsafe { tree_sitter::ffi::ts_node_child(root, 0) }.id as usize,
        };
        let key = (self as *const QueryFile as usize, raw.tree as usize);
        let cached = TREE_CANDIDATES.with(|m| m.borrow().get(&key).filter(|t| t.first_child == first_child).cloned());
        let cached = cached.unwrap_or_else(|| {
            // SAFETY: the tree is live (see above); the copy is released with the entry.
            let tree = unsafe { tree_sitter::Tree::from_raw(tree_sitter::ffi::ts_tree_copy(raw.tree)) };
            let mut found: Vec<(&'static str, Node)> = Vec::new();
            // The nodes of `within`'s own tree, not the copy's: climbs then read the node list
            // built for that tree instead of building one for the copy.
            self.raw_captures(crate::syntax::node_index::root_node(within), src, &mut |name, captured| {
                if let Some(node) = climb(name, captured) {
                    found.push((name, node));
                }
            });
            found.sort_by_key(|(_, n)| (n.start_byte(), std::cmp::Reverse(n.end_byte())));
            found.dedup_by_key(|(_, n)| n.id());
            // Equal ranges are nested: the shallower node first, as a walk visits them.
            let depth = |n: &Node| std::iter::successors(ast::parent(*n), |p| ast::parent(*p)).count();
            for i in 1..found.len() {
                let mut j = i;
                while j > 0
                    && found[j - 1].1.byte_range() == found[j].1.byte_range()
                    && depth(&found[j - 1].1) > depth(&found[j].1)
                {
                    found.swap(j - 1, j);
                    j -= 1;
                }
            }
            // The enclosing function of each candidate, from the functions the query captures
            // (a sweep in tree order instead of a climb per candidate).
            let mut open: Vec<Node> = Vec::new();
            let mut candidates = Vec::new();
            for (name, n) in found {
                while open.last().is_some_and(|f| !(f.start_byte() <= n.start_byte() && n.end_byte() <= f.end_byte())) {
                    open.pop();
                }
                if name == "function" {
                    open.push(n);
                } else {
                    candidates.push((name, n.into_raw(), open.last().map(|f| f.into_raw())));
                }
            }
            let entry = std::rc::Rc::new(TreeCandidates { _tree: tree, first_child, candidates });
            TREE_CANDIDATES.with(|m| m.borrow_mut().insert(key, entry.clone()));
            entry
        });
        // The cached nodes belong to the copy; handed out as nodes of `within`'s tree (the
        // same subtrees), they live as long as `within` does.
        // SAFETY: the copy shares the tree's subtrees, which `within`'s tree keeps alive.
        let node =
            |n: tree_sitter::ffi::TSNode| unsafe { Node::from_raw(tree_sitter::ffi::TSNode { tree: raw.tree, ..n }) };
        let (start, end) = (within.start_byte(), within.end_byte());
        let first = cached.candidates.partition_point(|c| node(c.1).start_byte() < start);
        cached.candidates[first..]
            .iter()
            .map(|&(capture, n, f)| Located { capture, node: node(n), function: f.map(node) })
            .take_while(|l| l.node.start_byte() <= end)
            .filter(|l| {
                l.node.end_byte() <= end
                    // a node of the same range may be above `within`
                    && (l.node.byte_range() != within.byte_range()
                        || l.node == within
                        || ast::ancestors(l.node).any(|a| a == within))
            })
            .collect()
    }
}

/// One match of a query file.
pub struct Match<'t> {
    pub pattern: usize,
    captures: Vec<(&'static str, Node<'t>)>,
}

impl<'t> Match<'t> {
    pub fn get(&self, capture: &str) -> Option<Node<'t>> {
        self.captures.iter().find(|(name, _)| *name == capture).map(|(_, n)| *n)
    }
}

/// The grammar a node was parsed with.
fn dialect_of(node: Node) -> Dialect {
    static TYPESCRIPT: OnceLock<usize> = OnceLock::new();
    let typescript = *TYPESCRIPT.get_or_init(|| Dialect::TypeScript.language().into_raw() as usize);
    // SAFETY: a node's language pointer is valid while the node is.
    let language = unsafe { tree_sitter::ffi::ts_node_language(node.into_raw()) } as usize;
    if language == typescript { Dialect::TypeScript } else { Dialect::Tsx }
}

/// Entry-point candidates of a file, parents before children, in source order.
pub fn entry_point_candidates(file: &SourceFile) -> Vec<(Candidate, Node<'_>)> {
    let kinds = Kinds::for_dialect(file.dialect);
    let src = file.text.as_bytes();
    let root = file.root();
    let tokens = crate::regex!(
        r"(?x)
        \.\s*(?i:post|put|patch|all|route|process|run|consume|on|createFunction|task|schemaTask|serve|send|handler|createRunner|getNextJob|openapi|create|receiveMessages?)(?-u:\b)
        | (?-u:\b)(?:serve|task|schemaTask|createFunction|defineEventHandler|eventHandler|Webhooks|webhooks
                    |export|Worker|Runner|queue|process|fetch|exports|callback|subscription)(?-u:\b)
        | @"
    );
    let mut out: Vec<(Candidate, Node)> = Vec::new();
    for m in tokens.find_iter(&file.text) {
        let mut start = m.start();
        if src[start] == b'.' {
            start += 1;
            while src[start].is_ascii_whitespace() {
                start += 1;
            }
        }
        if let Some(node) = kinds.proposed(root, start, m.end())
            && let Some(candidate) = kinds.candidate(node, src)
        {
            out.push((candidate, node));
        }
    }
    out.sort_by_key(|(_, n)| (n.start_byte(), std::cmp::Reverse(n.end_byte())));
    out.dedup_by_key(|(_, n)| n.id());
    out
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// The candidates as the query in `transforms/` finds them.
    pub fn by_query(file: &SourceFile) -> Vec<(Candidate, Node<'_>)> {
        static TYPESCRIPT: OnceLock<Query> = OnceLock::new();
        static TSX: OnceLock<Query> = OnceLock::new();
        let cell = if file.dialect == Dialect::TypeScript { &TYPESCRIPT } else { &TSX };
        let query = cell.get_or_init(|| {
            Query::new(&file.dialect.language(), ENTRY_POINTS).expect("transforms/entry_points.scm compiles")
        });
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
                    "pair" => Candidate::Pair,
                    _ => continue,
                };
                out.push((kind, capture.node));
            }
        }
        out.sort_by_key(|(_, n)| (n.start_byte(), std::cmp::Reverse(n.end_byte())));
        out.dedup_by_key(|(_, n)| n.id());
        out
    }

    #[test]
    fn single_node_patterns_match_what_the_query_matches_on_every_fixture_and_example() {
        for family in [&RESPONSES, &EXPRESS_APP] {
            for dialect in [Dialect::TypeScript, Dialect::Tsx] {
                assert!(family.flat(dialect).is_some(), "{} is read as single-node patterns", family.name);
            }
        }
        assert!(RETRY_LOOPS.flat(Dialect::TypeScript).is_none(), "nested patterns are left to the query cursor");
        let mut compared = 0;
        for file in crate::source::fixture_and_example_files() {
            crate::syntax::node_index::forget();
            for family in FAMILIES.iter().filter(|f| f.flat(file.dialect).is_some()) {
                let mut flat = Vec::new();
                family.raw_captures(file.root(), &file.text, &mut |name, n| flat.push((name, n.id())));
                let query = family.query(file.dialect);
                let names = query.capture_names();
                let mut by_query = Vec::new();
                let mut cursor = QueryCursor::new();
                let mut matches = cursor.matches(query, file.root(), file.text.as_bytes());
                while let Some(m) = matches.next() {
                    by_query.extend(m.captures.iter().map(|c| (names[c.index as usize], c.node.id())));
                }
                assert_eq!(flat, by_query, "{} on {}", family.name, file.path.display());
                compared += by_query.len();
                // Within a subtree, as the rules ask: every function, block and statement.
                let mut scopes = Vec::new();
                ast::walk(file.root(), &mut |n| {
                    if ast::is_function(n) || n.kind_name().ends_with("statement") || n.kind_name() == "statement_block"
                    {
                        scopes.push(n);
                    }
                    true
                });
                for within in scopes {
                    let shape = |found: Vec<Match>| -> Vec<(usize, Vec<(&str, usize)>)> {
                        found
                            .iter()
                            .map(|m| (m.pattern, m.captures.iter().map(|(c, n)| (*c, n.id())).collect()))
                            .collect()
                    };
                    assert_eq!(
                        shape(family.matches(within, &file.text)),
                        shape(family.matches_by_cursor(within, &file.text)),
                        "{} within {} at {} of {}",
                        family.name,
                        within.kind_name(),
                        within.start_byte(),
                        file.path.display()
                    );
                }
            }
        }
        crate::syntax::node_index::forget();
        assert!(compared > 1000);
    }

    #[test]
    fn every_query_file_compiles_for_both_grammars() {
        for family in FAMILIES {
            for dialect in [Dialect::TypeScript, Dialect::Tsx] {
                assert!(family.query(dialect).pattern_count() > 0, "{}", family.name);
            }
        }
        let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/transforms")).unwrap().count();
        assert_eq!(files, FAMILIES.len() + 1, "a query file in transforms/ that no code loads");
    }

    #[test]
    fn callee_names_climb_to_their_call() {
        let text = "a.has(k); b['add'](k); (uuid as any)(); new Date(); Date.now; x.get; f(has);\n";
        let file = SourceFile::new("a.ts".into(), text.into(), Dialect::TypeScript).unwrap();
        let mut calls = Vec::new();
        crate::model::ast::walk(file.root(), &mut |n| {
            if matches!(n.kind_name(), "property_identifier" | "string_fragment" | "identifier")
                && let Some(call) = call_of_callee_name(n)
            {
                calls.push(&file.text[call.byte_range()]);
            }
            true
        });
        // `f` is a callee; `has` as an argument, `Date.now` and `x.get` uncalled are not
        assert_eq!(calls, ["a.has(k)", "b['add'](k)", "(uuid as any)()", "new Date()", "f(has)"]);
    }

    #[test]
    fn traversal_finds_registrations() {
        let text = "app.post('/webhooks/x', h);\nfoo.bar(1);\nexport const handler = async () => {};\nnew Worker('q', p);\nx.POST(y);\nserve(h);\nnew Map();\nmodule.exports.handler = h;\nx.postMessage(1);\n";
        for dialect in [Dialect::TypeScript, Dialect::Tsx] {
            let file = SourceFile::new("a.ts".into(), text.into(), dialect).unwrap();
            let kinds: Vec<Candidate> = entry_point_candidates(&file).into_iter().map(|(k, _)| k).collect();
            assert_eq!(
                kinds,
                vec![
                    Candidate::Call,
                    Candidate::Export,
                    Candidate::New,
                    Candidate::Call,
                    Candidate::Call,
                    Candidate::Assignment
                ],
                "{dialect:?}"
            );
        }
    }

    /// The traversal and the query agree on every fixture and example file.
    #[test]
    fn traversal_equals_the_query_on_every_fixture_and_example() {
        let mut checked = 0;
        for file in crate::source::fixture_and_example_files() {
            let path = &file.path;
            let fast: Vec<_> = entry_point_candidates(&file).into_iter().map(|(k, n)| (k, n.id())).collect();
            let spec: Vec<_> = by_query(&file).into_iter().map(|(k, n)| (k, n.id())).collect();
            assert_eq!(fast, spec, "{}", path.display());
            checked += 1;
        }
        assert!(checked > 200, "only {checked} files compared");
    }
}
