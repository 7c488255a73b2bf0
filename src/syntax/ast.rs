//! Small, shared questions about tree-sitter nodes of the TypeScript/TSX grammars.

use tree_sitter::Node;

pub const FUNCTION_KINDS: &[&str] = &[
    "function_declaration",
    "function_expression",
    "function",
    "arrow_function",
    "method_definition",
    "generator_function_declaration",
    "generator_function",
];

pub fn is_function(node: Node) -> bool {
    FUNCTION_KINDS.contains(&kind(node))
}

pub(crate) fn is_function_kind(kind: &str) -> bool {
    FUNCTION_KINDS.contains(&kind)
}

/// `kind(node)`, read from a table per grammar: tree-sitter's looks the name up and then
/// measures and validates it as a C string on every call, which was a tenth of analysing a
/// handler file (the walks ask every node's kind).
pub fn kind<'t>(node: impl std::borrow::Borrow<Node<'t>>) -> &'static str {
    let node = *node.borrow();
    kind_of_id(node, node.kind_id())
}

/// `kind(node)` for a node whose kind id is already known.
pub(crate) fn kind_of_id(node: Node, kind_id: u16) -> &'static str {
    struct Names {
        language: usize,
        names: Vec<&'static str>,
    }
    static GRAMMARS: std::sync::OnceLock<[Names; 2]> = std::sync::OnceLock::new();
    let grammars = GRAMMARS.get_or_init(|| {
        let names = |language: tree_sitter::Language| {
            let names =
                (0..language.node_kind_count() as u16).map(|id| language.node_kind_for_id(id).unwrap_or("")).collect();
            Names { language: language.into_raw() as usize, names }
        };
        [names(tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into()), names(tree_sitter_typescript::LANGUAGE_TSX.into())]
    });
    // SAFETY: a node's language pointer is valid while the node is.
    let language = unsafe { tree_sitter::ffi::ts_node_language(node.into_raw()) } as usize;
    grammars
        .iter()
        .find(|g| g.language == language)
        .and_then(|g| g.names.get(kind_id as usize).copied())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| node.kind())
}

/// `kind` as a method, for the chains that read a kind last: tree-sitter's own `Node::kind`
/// pays the lookup and validation `kind` avoids.
pub trait KindName {
    fn kind_name(&self) -> &'static str;
}

impl KindName for Node<'_> {
    fn kind_name(&self) -> &'static str {
        kind(*self)
    }
}

pub fn text<'a>(node: Node, src: &'a str) -> &'a str {
    &src[node.byte_range()]
}

pub fn named_children(node: Node) -> Vec<Node> {
    // From the tree's node list when it has one: asking tree-sitter counts the children and
    // then walks them again for each one asked for.
    if let Some(index) = super::node_index::existing(node)
        && let Some(children) = index.named_children(node)
    {
        return children;
    }
    // A cursor's step to the next sibling costs hundreds of instructions, asking for the i-th
    // named child a few per earlier child: by index unless the node is wide.
    let count = node.named_child_count();
    if count <= NARROW {
        return (0..count).filter_map(|i| node.named_child(i)).collect();
    }
    let mut cursor = node.walk();
    node.named_children(&mut cursor).collect()
}

/// The most children a node may have for them to be asked for by index (see `named_children`).
pub(crate) const NARROW: usize = 16;

/// Pre-order walk of `node`'s subtree. `visit` returns false to skip a node's children.
pub fn walk<'t>(node: Node<'t>, visit: &mut dyn FnMut(Node<'t>) -> bool) {
    if let Some(index) = super::node_index::for_node(node)
        && index.walk(node, visit)
    {
        return;
    }
    walk_by_cursor(node, visit);
}

/// `walk` with a tree cursor, for a tree without a node list.
fn walk_by_cursor<'t>(node: Node<'t>, visit: &mut dyn FnMut(Node<'t>) -> bool) {
    let mut cursor = node.walk();
    super::budget::charge();
    let mut descend = visit(node);
    // Depth below `node`, so ascending needs no node comparison.
    let mut depth = 0usize;
    loop {
        if descend && cursor.goto_first_child() {
            depth += 1;
            super::budget::charge();
            descend = visit(cursor.node());
            continue;
        }
        loop {
            if depth == 0 {
                return;
            }
            if cursor.goto_next_sibling() {
                super::budget::charge();
                descend = visit(cursor.node());
                break;
            }
            cursor.goto_parent();
            depth -= 1;
        }
    }
}

/// All nodes of `kind` under `node` (inclusive).
pub fn descendants_of_kind<'t>(node: Node<'t>, kind: &str) -> Vec<Node<'t>> {
    if let Some(found) =
        super::node_index::for_node(node).and_then(|index| index.of_kinds(node, |k| k == kind, |_| false))
    {
        return found;
    }
    let mut out = Vec::new();
    walk_by_cursor(node, &mut |n| {
        if self::kind(n) == kind {
            out.push(n);
        }
        true
    });
    out
}

/// The functions under `node` (inclusive), in pre-order.
pub fn functions_in(node: Node) -> Vec<Node> {
    if let Some(found) =
        super::node_index::for_node(node).and_then(|index| index.of_kinds(node, is_function_kind, |_| false))
    {
        return found;
    }
    let mut out = Vec::new();
    walk_by_cursor(node, &mut |n| {
        if is_function(n) {
            out.push(n);
        }
        true
    });
    out
}

/// Call expressions under `node`, not descending into nested functions other than `node`
/// itself when `same_function` is set.
pub fn calls_in<'t>(node: Node<'t>, same_function: bool) -> Vec<Node<'t>> {
    // Every rule and model lists the calls of the same handler scopes: each list is made
    // once per analysis of a tree and remembered in its node list as positions.
    if let Some(index) = super::node_index::for_node(node)
        && let Some(at) = index.position_of(node)
    {
        let asked = CallsIn { at, same_function };
        let positions = match index.recall::<CallsIn, std::rc::Rc<[u32]>>(&asked) {
            Some(known) => known,
            None => {
                let found: std::rc::Rc<[u32]> = index
                    .positions_of_kinds(at, |k| k == "call_expression", |k| same_function && is_function_kind(k))
                    .into();
                index.remember(asked, found.clone());
                found
            }
        };
        // `node` itself rather than the list's copy of it, as `walk` hands out.
        return positions.iter().map(|p| if *p == at { node } else { index.node_at(*p, node) }).collect();
    }
    let mut out = Vec::new();
    walk_by_cursor(node, &mut |n| {
        if same_function && n != node && is_function(n) {
            return false;
        }
        if kind(n) == "call_expression" {
            out.push(n);
        }
        true
    });
    out
}

/// What a remembered list of calls is looked up by: the scope's position in its tree's node
/// list, and whether nested functions were left out.
#[derive(Hash, PartialEq, Eq)]
struct CallsIn {
    at: u32,
    same_function: bool,
}

/// Wrappers that do not change what an expression denotes.
const TRANSPARENT_KINDS: &[&str] = &[
    "await_expression",
    "parenthesized_expression",
    "non_null_expression",
    "as_expression",
    "satisfies_expression",
    "type_assertion",
];

/// Strips wrappers that do not change what an expression denotes.
pub fn unwrap_expr(mut node: Node) -> Node {
    while TRANSPARENT_KINDS.contains(&kind(node)) {
        match node.named_child(0) {
            Some(inner) => node = inner,
            None => return node,
        }
    }
    node
}

/// `parent` only wraps `child`: `await child`, `(child)`, `child!`, `child as T`.
pub fn wraps(parent: Node, child: Node) -> bool {
    TRANSPARENT_KINDS.contains(&kind(parent)) && parent.named_child(0) == Some(child)
}

/// The dotted path of a callee or member chain: `stripe.refunds.create` → ["stripe", "refunds",
/// "create"]; `this.svc.run` → ["this", "svc", "run"]. Calls in the chain keep their callee's
/// name followed by `()` (`db.insert(t).values` → ["db", "insert()", "values"]).
pub fn member_path(node: Node, src: &str) -> Vec<String> {
    // Every rule and model reads the paths of the same callees, and building one costs a few
    // field lookups and an allocation per segment: each is built once per analysis of a tree
    // (when its node list is built) and copied out after.
    remembered_path(node, src, false, || member_path_of(node, src)).to_vec()
}

/// The path of `node` (of its callee when `of_callee`), remembered in the node list of its
/// tree by the node's position and the text it was read from. Shared: a caller that only
/// reads the path copies no segment.
fn remembered_path(
    node: Node,
    src: &str,
    of_callee: bool,
    build: impl FnOnce() -> Vec<String>,
) -> std::rc::Rc<[String]> {
    let Some(index) = super::node_index::existing(node) else { return build().into() };
    let Some(at) = index.position_of(node) else { return build().into() };
    let asked = PathAt { at, of_callee, src: (src.as_ptr() as usize, src.len()) };
    if let Some(known) = index.recall::<PathAt, std::rc::Rc<[String]>>(&asked) {
        return known;
    }
    let path: std::rc::Rc<[String]> = build().into();
    index.remember(asked, path.clone());
    path
}

/// What a remembered member or callee path is looked up by (see `remembered_path`).
#[derive(Hash, PartialEq, Eq)]
struct PathAt {
    at: u32,
    of_callee: bool,
    src: (usize, usize),
}

fn member_path_of(node: Node, src: &str) -> Vec<String> {
    let node = unwrap_expr(node);
    match kind(node) {
        "identifier" | "this" | "property_identifier" | "private_property_identifier" | "super" => {
            vec![text(node, src).to_string()]
        }
        "member_expression" => {
            let mut path = field(node, "object").map(|o| member_path_of(o, src)).unwrap_or_default();
            if let Some(p) = field(node, "property") {
                path.push(text(p, src).to_string());
            }
            path
        }
        "subscript_expression" => {
            let mut path = field(node, "object").map(|o| member_path_of(o, src)).unwrap_or_default();
            if let Some(index) = field(node, "index") {
                path.push(string_value(index, src).unwrap_or_else(|| "[]".into()));
            }
            path
        }
        "call_expression" => {
            let mut path = field(node, "function").map(|f| member_path_of(f, src)).unwrap_or_default();
            if let Some(last) = path.last_mut() {
                last.push_str("()");
            }
            path
        }
        "new_expression" => {
            let mut path = field(node, "constructor").map(|f| member_path_of(f, src)).unwrap_or_default();
            if let Some(last) = path.last_mut() {
                last.push_str("()");
            }
            path
        }
        _ => Vec::new(),
    }
}

/// The callee path of a call expression (see `member_path`).
pub fn callee_path(call: Node, src: &str) -> Vec<String> {
    callee_path_shared(call, src).to_vec()
}

/// `callee_path` for a caller that only reads it: the remembered path itself, not a copy.
pub fn callee_path_shared(call: Node, src: &str) -> std::rc::Rc<[String]> {
    // Remembered by the call as well: most asks come with the call, and finding its callee
    // costs a field lookup.
    remembered_path(call, src, true, || field(call, "function").map(|f| member_path(f, src)).unwrap_or_default())
}

/// Whether `call` is awaited where it stands: `await f(x)`, or `await f<T>(x)`, which the
/// TypeScript grammar reads as `(await f)<T>(x)`, a call whose callee is the await, also at the
/// start of a chain (`await qb<T>().insert().execute()` is `((await qb)<T>()).insert()...`).
pub fn is_awaited_call(call: Node) -> bool {
    if parent(call).is_some_and(|p| kind(p) == "await_expression") {
        return true;
    }
    let mut link = call;
    loop {
        let Some(f) = field(link, "function") else { return false };
        match kind(f) {
            "await_expression" => return true,
            "member_expression" => match field(f, "object").filter(|o| kind(*o) == "call_expression") {
                Some(receiver) => link = receiver,
                None => return false,
            },
            _ => return false,
        }
    }
}

/// The last name of a callee: `a.b.create(...)` → "create".
pub fn callee_name(call: Node, src: &str) -> Option<String> {
    callee_path_shared(call, src).last().cloned()
}

pub fn arguments(call: Node) -> Vec<Node> {
    field(call, "arguments").map(named_children).unwrap_or_default()
}

/// The literal value of a string or a template without substitutions.
pub fn string_value(node: Node, src: &str) -> Option<String> {
    match kind(node) {
        "string" => {
            let t = text(node, src);
            Some(t.get(1..t.len().saturating_sub(1)).unwrap_or("").to_string())
        }
        "template_string"
            if node.named_child_count()
                == named_children(node)
                    .iter()
                    .filter(|c| kind(*c) == "string_fragment" || kind(*c) == "escape_sequence")
                    .count() =>
        {
            let t = text(node, src);
            Some(t.get(1..t.len().saturating_sub(1)).unwrap_or("").to_string())
        }
        _ => None,
    }
}

/// The words a message spells out itself: the literal parts of a string, a template (without its
/// substitutions) or a `+` concatenation. A variable's name is not its value.
pub fn literal_words(node: Node, src: &str) -> String {
    match kind(node) {
        "string" => string_value(node, src).unwrap_or_default(),
        "template_string" => named_children(node)
            .iter()
            .filter(|c| kind(**c) == "string_fragment")
            .map(|c| text(*c, src))
            .collect::<Vec<_>>()
            .join(" "),
        "binary_expression" => [field(node, "left"), field(node, "right")]
            .into_iter()
            .flatten()
            .map(|side| literal_words(side, src))
            .collect::<Vec<_>>()
            .join(" "),
        "parenthesized_expression" => node.named_child(0).map(|n| literal_words(n, src)).unwrap_or_default(),
        _ => String::new(),
    }
}

/// The value node of property `key` in an object literal.
pub fn object_property<'t>(object: Node<'t>, key: &str, src: &str) -> Option<Node<'t>> {
    for child in named_children(object) {
        match kind(child) {
            "pair" => {
                let k = field(child, "key")?;
                let name = string_value(k, src).unwrap_or_else(|| text(k, src).to_string());
                if name == key {
                    return field(child, "value");
                }
            }
            "shorthand_property_identifier" if text(child, src) == key => return Some(child),
            "method_definition" => {
                if field(child, "name").is_some_and(|n| text(n, src) == key) {
                    return Some(child);
                }
            }
            _ => {}
        }
    }
    None
}

/// The nearest ancestor that is a function.
pub fn enclosing_function(node: Node) -> Option<Node> {
    // A climb per node of a deep nest would cost the square of its depth; a tree climbed
    // or walked often enough to have a node list answers in one lookup.
    if let Some(index) = super::node_index::for_node(node)
        && let Some(function) = index.enclosing_function(node)
    {
        super::budget::charge();
        return function;
    }
    ancestors(node).find(|n| is_function(*n))
}

pub fn ancestors(node: Node) -> impl Iterator<Item = Node> {
    std::iter::successors(parent(node), |n| parent(*n))
}

/// `node.parent()`, from the tree's node list: tree-sitter finds a parent by descending from
/// the root, so the rules' many upward climbs would cost the square of a nest's depth. A tree
/// climbed or walked a few times gets its list.
pub fn parent<'t>(node: impl std::borrow::Borrow<Node<'t>>) -> Option<Node<'t>> {
    let node = *node.borrow();
    super::budget::charge();
    match super::node_index::for_node(node).and_then(|index| index.parent(node)) {
        Some(parent) => parent,
        None => node.parent(),
    }
}

/// `node.child_by_field_name(name)` with the field id looked up once per grammar: the name
/// lookup compares strings against every field of the grammar, on every call.
pub fn field<'t>(node: impl std::borrow::Borrow<Node<'t>>, name: &'static str) -> Option<Node<'t>> {
    let node = *node.borrow();
    // By grammar and name (the name's address and length: the names are literals), in a
    // hashed map: a list searched from its start cost more than the lookup of the child.
    type FieldIds = super::node_index::WordMap<(usize, usize, usize), Option<std::num::NonZeroU16>>;
    thread_local! {
        static FIELD_IDS: std::cell::RefCell<FieldIds> = std::cell::RefCell::new(FieldIds::default());
    }
    // SAFETY: a node's language pointer is valid while the node is.
    let language = unsafe { tree_sitter::ffi::ts_node_language(node.into_raw()) } as usize;
    let key = (language, name.as_ptr() as usize, name.len());
    let id = FIELD_IDS.with(|ids| {
        if let Some(id) = ids.borrow().get(&key) {
            return *id;
        }
        let id = node.language().field_id_for_name(name);
        ids.borrow_mut().insert(key, id);
        id
    })?;
    node.child_by_field_id(id.get())
}

/// `node.field("name")`: `field` as a method, for the chains that read several fields.
pub trait Fields<'t> {
    fn field(&self, name: &'static str) -> Option<Node<'t>>;
}

impl<'t> Fields<'t> for Node<'t> {
    fn field(&self, name: &'static str) -> Option<Node<'t>> {
        field(*self, name)
    }
}

pub fn contains(outer: Node, inner: Node) -> bool {
    outer.start_byte() <= inner.start_byte() && inner.end_byte() <= outer.end_byte()
}

/// The body of a function node (a statement block or an expression for concise arrows).
pub fn function_body(func: Node) -> Option<Node> {
    field(func, "body")
}

/// Names bound by a function's parameters, in order; destructured names are flattened.
pub fn parameter_names(func: Node, src: &str) -> Vec<String> {
    let mut names = Vec::new();
    if let Some(single) = field(func, "parameter") {
        names.push(text(single, src).to_string());
        return names;
    }
    if let Some(params) = field(func, "parameters") {
        for p in named_children(params) {
            let pattern = field(p, "pattern").unwrap_or(p);
            bound_names(pattern, src, &mut names);
        }
    }
    names
}

/// The pattern node of the n-th parameter.
pub fn parameter(func: Node, index: usize) -> Option<Node> {
    if let Some(single) = field(func, "parameter") {
        return (index == 0).then_some(single);
    }
    let params = field(func, "parameters")?;
    let p = named_children(params).into_iter().filter(|n| kind(n) != "comment").nth(index)?;
    Some(field(p, "pattern").unwrap_or(p))
}

/// The type annotation text of the n-th parameter, if any.
pub fn parameter_type<'a>(func: Node, index: usize, src: &'a str) -> Option<&'a str> {
    let params = field(func, "parameters")?;
    let p = named_children(params).into_iter().filter(|n| kind(n) != "comment").nth(index)?;
    let ty = field(p, "type")?;
    Some(text(ty, src).trim_start_matches(':').trim())
}

pub fn bound_names(pattern: Node, src: &str, out: &mut Vec<String>) {
    match kind(pattern) {
        "identifier" | "shorthand_property_identifier_pattern" => out.push(text(pattern, src).to_string()),
        "assignment_pattern" | "object_assignment_pattern" => {
            if let Some(left) = field(pattern, "left").or_else(|| pattern.named_child(0)) {
                bound_names(left, src, out);
            }
        }
        "pair_pattern" => {
            if let Some(value) = field(pattern, "value") {
                bound_names(value, src, out);
            }
        }
        _ => {
            for child in named_children(pattern) {
                bound_names(child, src, out);
            }
        }
    }
}

/// Whether the node's text mentions `name` as a whole identifier.
pub fn mentions_identifier(node: Node, src: &str, name: &str) -> bool {
    let mut found = false;
    walk(node, &mut |n| {
        if found {
            return false;
        }
        if matches!(kind(n), "identifier" | "shorthand_property_identifier") && text(n, src) == name {
            found = true;
        }
        true
    });
    found
}

/// Whether `a` and `b` sit in different branches of one `if`/`else` or in different cases of
/// one `switch`, so that no single run executes both (fall-through aside).
pub fn exclusive_branches(a: Node, b: Node) -> bool {
    ancestors(a).any(|anc| match kind(anc) {
        "if_statement" => {
            let (Some(cons), Some(alt)) = (field(anc, "consequence"), field(anc, "alternative")) else { return false };
            (contains(cons, a) && contains(alt, b)) || (contains(alt, a) && contains(cons, b))
        }
        "switch_case" | "switch_default" => parent(anc).is_some_and(|body| contains(body, b)) && !contains(anc, b),
        _ => false,
    })
}

/// The last statement a branch runs: the last non-comment statement of a block, or the branch
/// itself when it is a single statement.
pub fn last_statement(branch: Node) -> Option<Node> {
    if kind(branch) == "statement_block" {
        named_children(branch).into_iter().rfind(|n| kind(n) != "comment")
    } else {
        Some(branch)
    }
}

/// The object a method is called on: `orders` in `orders.add(x)`, the inner call in
/// `db.insert(t).values(v)` (unwrapped: `(x as T).m()` gives `x`).
pub fn method_receiver(call: Node) -> Option<Node> {
    call.field("function").filter(|f| kind(*f) == "member_expression").and_then(|f| f.field("object")).map(unwrap_expr)
}

/// The guard clauses `node` runs after: each `if` without `else`, earlier in one of the blocks
/// between `func` and `node`, whose branch leaves (`if (done) return;`, `if (!ok) throw ...`).
/// Reaching `node` means each of their conditions was false.
pub fn guard_clauses_before<'t>(node: Node<'t>, func: Node<'t>) -> Vec<Node<'t>> {
    let mut out = Vec::new();
    let mut child = node;
    for anc in ancestors(node).take_while(|a| *a != func) {
        if kind(anc) == "statement_block" {
            out.extend(named_children(anc).into_iter().take_while(|st| st.end_byte() <= child.start_byte()).filter(
                |st| {
                    kind(*st) == "if_statement"
                        && st.field("alternative").is_none()
                        && st.field("consequence").and_then(last_statement).is_some_and(|last| {
                            matches!(kind(last), "return_statement" | "throw_statement" | "continue_statement")
                        })
                },
            ));
        }
        child = anc;
    }
    out
}

/// The statement that directly contains `node` inside a statement block.
pub fn enclosing_statement(node: Node) -> Option<Node> {
    let mut cur = node;
    loop {
        let parent = self::parent(cur)?;
        if matches!(kind(parent), "statement_block" | "program" | "switch_case" | "switch_default") {
            return Some(cur);
        }
        cur = parent;
    }
}

/// The initializer a destructuring declaration binds `name` from (`const { data: user } = ...`,
/// `const [row] = ...`), the last one before `before`.
pub fn find_destructured_init<'t>(scope: Node<'t>, name: &str, src: &str, before: usize) -> Option<Node<'t>> {
    let mut best = None;
    walk(scope, &mut |n| {
        if n.start_byte() >= before {
            return false;
        }
        if kind(n) == "variable_declarator"
            && let Some(pattern) = field(n, "name").filter(|p| kind(p) != "identifier")
        {
            let mut names = Vec::new();
            bound_names(pattern, src, &mut names);
            if names.iter().any(|x| x == name) {
                best = field(n, "value");
            }
        }
        true
    });
    best
}

/// The named siblings after `node`, in order.
pub fn following_siblings(node: Node) -> Vec<Node> {
    std::iter::successors(node.next_named_sibling(), |n| n.next_named_sibling()).collect()
}

/// The initializer of `const name = <init>` visible in the function scope containing `at`
/// (a simple, flow-insensitive lookup: the nearest declaration before `at`).
pub fn find_binding_init<'t>(scope: Node<'t>, name: &str, src: &str, before: usize) -> Option<Node<'t>> {
    if let Some(index) = super::node_index::for_node(scope)
        && let Some(found) = index.plain_init(scope, name, src, before)
    {
        super::budget::charge();
        return found;
    }
    find_binding_init_by_walk(scope, name, src, before)
}

fn find_binding_init_by_walk<'t>(scope: Node<'t>, name: &str, src: &str, before: usize) -> Option<Node<'t>> {
    let mut best: Option<Node> = None;
    walk(scope, &mut |n| {
        if n.start_byte() >= before {
            return false;
        }
        if kind(n) == "variable_declarator"
            && let Some(nm) = field(n, "name")
            && kind(nm) == "identifier"
            && text(nm, src) == name
            && let Some(v) = field(n, "value")
        {
            best = Some(v);
        }
        true
    });
    best
}

/// A binding of `name` visible at `before` inside `scope`: its initializer and the property
/// path a destructuring pattern adds (`const { data: { id } } = evt` → (evt, ["data", "id"])).
/// The last declarator wins, and after one a plain assignment (`let key = null; ...
/// key = `${prefix}${id}`;`).
pub fn latest_binding<'t>(scope: Node<'t>, name: &str, src: &str, before: usize) -> Option<(Node<'t>, Vec<String>)> {
    if let Some(index) = super::node_index::for_node(scope)
        && let Some(found) = index.latest_binding(scope, name, src, before)
    {
        super::budget::charge();
        return found;
    }
    latest_binding_by_walk(scope, name, src, before)
}

fn latest_binding_by_walk<'t>(
    scope: Node<'t>,
    name: &str,
    src: &str,
    before: usize,
) -> Option<(Node<'t>, Vec<String>)> {
    let mut best = None;
    walk(scope, &mut |n| {
        if n.start_byte() >= before {
            return false;
        }
        if kind(n) == "variable_declarator"
            && let (Some(pattern), Some(value)) = (field(n, "name"), field(n, "value"))
            && let Some(path) = pattern_path(pattern, name, src)
        {
            best = Some((value, path));
        }
        if kind(n) == "assignment_expression"
            && let (Some(left), Some(value)) = (field(n, "left"), field(n, "right"))
            && kind(left) == "identifier"
            && text(left, src) == name
            && best.is_some()
        {
            best = Some((value, Vec::new()));
        }
        true
    });
    best
}

/// Whether an identifier is a name a declarator binds (`profileError` in
/// `const { error: profileError } = ...`), rather than a read of it.
pub fn is_binding_position(id: Node) -> bool {
    let mut at = id;
    while let Some(parent) = at.parent() {
        match kind(parent) {
            // A default value or a computed key inside the pattern is a read.
            "assignment_pattern" | "object_assignment_pattern"
                if field(parent, "right").is_some_and(|r| r.id() == at.id()) =>
            {
                return false;
            }
            "pair_pattern" if field(parent, "key").is_some_and(|k| k.id() == at.id()) => return false,
            "object_pattern"
            | "array_pattern"
            | "pair_pattern"
            | "assignment_pattern"
            | "object_assignment_pattern"
            | "rest_pattern" => at = parent,
            "variable_declarator" => return field(parent, "name").is_some_and(|n| n.id() == at.id()),
            _ => return false,
        }
    }
    false
}

/// The property path under which a declarator's pattern binds `name`: empty for the name
/// itself, `["data", "id"]` for `{ data: { id } }`; None when the pattern does not bind it.
pub fn pattern_path(pattern: Node, name: &str, src: &str) -> Option<Vec<String>> {
    match kind(pattern) {
        "identifier" | "shorthand_property_identifier_pattern" => (text(pattern, src) == name).then(Vec::new),
        "object_pattern" => {
            for prop in named_children(pattern) {
                match kind(prop) {
                    "shorthand_property_identifier_pattern" if text(prop, src) == name => {
                        return Some(vec![name.to_string()]);
                    }
                    "object_assignment_pattern" => {
                        let left = prop.field("left")?;
                        if text(left, src) == name {
                            return Some(vec![name.to_string()]);
                        }
                    }
                    "pair_pattern" => {
                        let key = prop.field("key")?;
                        let value = prop.field("value")?;
                        let value = if kind(value) == "assignment_pattern" { value.field("left")? } else { value };
                        if let Some(mut rest) = pattern_path(value, name, src) {
                            let k = string_value(key, src).unwrap_or_else(|| text(key, src).to_string());
                            rest.insert(0, k);
                            return Some(rest);
                        }
                    }
                    _ => {}
                }
            }
            None
        }
        _ => None,
    }
}

/// The initializer of `const name = <init>` in the first declaration statement of the module
/// (exported or not) that declares `name` before `before` (the last such declarator in it).
/// `node` is any node of the tree.
pub fn module_declaration_init<'t>(node: Node<'t>, name: &str, src: &str, before: usize) -> Option<Node<'t>> {
    if let Some(index) = super::node_index::for_node(node)
        && let Some(found) = index.module_declaration_init(node, name, src, before)
    {
        super::budget::charge();
        return found;
    }
    module_declaration_init_by_walk(node, name, src, before)
}

fn module_declaration_init_by_walk<'t>(node: Node<'t>, name: &str, src: &str, before: usize) -> Option<Node<'t>> {
    let program = root_above(node).unwrap_or(node);
    named_children(program)
        .into_iter()
        .filter(|n| n.start_byte() < before && is_declaration_statement(*n))
        .find_map(|stmt| find_binding_init_by_walk(stmt, name, src, before))
}

/// `const`, `let` or `var` declarations, exported or not.
pub fn is_declaration_statement(stmt: Node) -> bool {
    let decl = if kind(stmt) == "export_statement" { stmt.named_child(0) } else { Some(stmt) };
    decl.is_some_and(|d| matches!(kind(d), "lexical_declaration" | "variable_declaration"))
}

/// The root of `node`'s tree; None when `node` is the root.
pub fn root_above(node: Node) -> Option<Node> {
    if let Some(index) = super::node_index::for_node(node)
        && index.parent(node).is_some()
    {
        super::budget::charge();
        let root = super::node_index::root_node(node);
        return (root != node).then_some(root);
    }
    ancestors(node).last()
}

/// A `throw` follows `stmt` in its block: whatever `stmt` does, the code leaves by failing.
pub fn followed_by_throw(stmt: Node) -> bool {
    std::iter::successors(stmt.next_named_sibling(), |n| n.next_named_sibling()).any(|n| kind(n) == "throw_statement")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_from_the_table_are_tree_sitters() {
        let mut compared = 0;
        for file in crate::source::fixture_and_example_files() {
            let mut cursor = file.root().walk();
            'walk: loop {
                let n = cursor.node();
                assert_eq!(kind(n), n.kind(), "{} at {}", file.path.display(), n.start_byte());
                compared += 1;
                if cursor.goto_first_child() {
                    continue;
                }
                while !cursor.goto_next_sibling() {
                    if !cursor.goto_parent() {
                        break 'walk;
                    }
                }
            }
        }
        assert!(compared > 10_000);
    }

    /// The node lists and children by index hold the nodes a cursor visits, in its order.
    #[test]
    fn nodes_by_index_are_the_cursors() {
        let mut compared = 0;
        for file in crate::source::fixture_and_example_files() {
            let mut by_cursor = Vec::new();
            walk_by_cursor(file.root(), &mut |n| {
                by_cursor.push(n);
                true
            });
            let index = super::super::node_index::built_for(file.root());
            let listed: Vec<usize> = index.all_nodes(file.root()).map(|(_, n)| n.id()).skip(1).collect();
            assert_eq!(listed, by_cursor.iter().skip(1).map(|n| n.id()).collect::<Vec<_>>(), "{}", file.path.display());
            for n in by_cursor {
                let mut cursor = n.walk();
                let expected: Vec<usize> = n.named_children(&mut cursor).map(|c| c.id()).collect();
                let by_index: Vec<usize> = named_children(n).iter().map(|c| c.id()).collect();
                assert_eq!(by_index, expected, "{} at {}", file.path.display(), n.start_byte());
                compared += 1;
            }
            super::super::node_index::forget();
        }
        assert!(compared > 10_000);
    }

    /// The binding sites answer every lookup as the walks they replace do: for each
    /// identifier of every fixture and example, in each function around it and the module.
    #[test]
    fn indexed_binding_lookups_equal_the_walks() {
        let mut compared = 0;
        for file in crate::source::fixture_and_example_files() {
            let src = &file.text;
            let mut identifiers = Vec::new();
            walk(file.root(), &mut |n| {
                if kind(n) == "identifier" {
                    identifiers.push(n);
                }
                true
            });
            let index = (0..4).find_map(|_| super::super::node_index::for_node(file.root())).expect("a node list");
            for id in identifiers {
                let name = text(id, src);
                let scopes = ancestors(id).filter(|a| is_function(*a) || kind(a) == "program");
                for scope in scopes {
                    let by_walk = find_binding_init_by_walk(scope, name, src, id.start_byte());
                    assert_eq!(
                        index.plain_init(scope, name, src, id.start_byte()),
                        Some(by_walk),
                        "{} {name}",
                        file.path.display()
                    );
                    let by_walk = latest_binding_by_walk(scope, name, src, id.start_byte());
                    assert_eq!(
                        index.latest_binding(scope, name, src, id.start_byte()),
                        Some(by_walk),
                        "{} {name}",
                        file.path.display()
                    );
                    compared += 1;
                }
                assert_eq!(
                    index.module_declaration_init(id, name, src, id.start_byte()),
                    Some(module_declaration_init_by_walk(id, name, src, id.start_byte())),
                    "{} {name}",
                    file.path.display()
                );
            }
            super::super::node_index::forget();
        }
        assert!(compared > 10_000, "only {compared} lookups compared");
    }
}
