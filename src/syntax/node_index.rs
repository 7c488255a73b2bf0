//! Pre-order node lists of the trees under analysis. The rules walk the same handler scopes
//! many times; iterating a vector costs a fraction of moving a tree cursor, which was the
//! largest single cost of analysing a handler.
//!
//! A list is built for a tree on its first walk or climb within one analysis (building it
//! costs about one cursor walk, and a tree under analysis is walked many times: waiting for
//! the third walk left the first two, and every climb before them, to the cursor) and
//! dropped by `forget`, which the engine calls before and after analysing each file.

use std::any::{Any, TypeId};
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::Hash;
use std::rc::Rc;
use tree_sitter::{Node, Tree, ffi};

pub struct NodeIndex {
    /// A reference-counted copy of the tree: it keeps every subtree the nodes point into
    /// alive for as long as this index is.
    _tree: Tree,
    nodes: Vec<Node<'static>>,
    /// For each node, its start byte: finding a node's position searches these, and asking
    /// tree-sitter for a start byte on every probe cost more than the rest of the search.
    starts: Vec<u32>,
    /// For each node, the position just past its subtree.
    ends: Vec<u32>,
    /// For each node, its parent's position (the root's is its own).
    parents: Vec<u32>,
    /// For each node, its kind id and kind: asking tree-sitter costs a symbol lookup per
    /// call, and whole-tree passes ask every node.
    kind_ids: Vec<u16>,
    kinds: Vec<&'static str>,
    /// For each node, the position of its nearest function ancestor (`NO_FUNCTION`: none).
    functions: Vec<u32>,
    /// The binding sites by name, built on the first lookup of a name.
    bindings: std::cell::OnceCell<super::bindings::Bindings>,
    /// Answers the model computes once per tree and analysis (see `recall`), one map per
    /// key type.
    memos: RefCell<Memos<TypeId, Box<dyn Any>>>,
}

/// A map of the memos: their keys are a few small integers, which SipHash made cost more to
/// hash than the answers they look up cost to copy.
type Memos<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<WordHasher>>;

/// A map keyed by a few words (integers, addresses), hashed with `WordHasher`.
pub(crate) type WordMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<WordHasher>>;

/// Mixes each word written with a rotation and one multiplication.
#[derive(Default)]
pub(crate) struct WordHasher(u64);

impl WordHasher {
    fn mix(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(7) ^ word).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl std::hash::Hasher for WordHasher {
    fn finish(&self) -> u64 {
        // The multiplication leaves its best-mixed bits at the top; the table indexes by the
        // low ones.
        self.0.rotate_left(29)
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.mix(u64::from(n));
    }

    fn write_u32(&mut self, n: u32) {
        self.mix(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.mix(n);
    }

    fn write_usize(&mut self, n: usize) {
        self.mix(n as u64);
    }
}

const NO_FUNCTION: u32 = u32::MAX;

/// The list's build: enter a node (with its parent's position), or close the subtree of the
/// node at a position.
enum Step<'t> {
    Enter(Node<'t>, u32),
    Close(u32),
}

enum Entry {
    /// The list, and the identity (`tree_identity`) of the tree it was built for.
    Built(Rc<NodeIndex>, usize),
}

/// Hashes a tree's address with one multiplication: the map is asked on every climb and walk,
/// and SipHash cost more than the rest of the lookup.
#[derive(Default)]
struct AddressHasher(u64);

impl std::hash::Hasher for AddressHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(26);
    }
}

type ByAddress = HashMap<usize, Entry, std::hash::BuildHasherDefault<AddressHasher>>;

thread_local! {
    static INDEXES: RefCell<ByAddress> = RefCell::new(ByAddress::default());
}

/// Drops every node list of this thread.
pub fn forget() {
    INDEXES.with(|m| m.borrow_mut().clear());
}

/// The node list of `node`'s tree if one is built (does not count as a walk).
pub fn existing(node: Node) -> Option<Rc<NodeIndex>> {
    let key = node.into_raw().tree as usize;
    INDEXES.with(|m| match m.borrow().get(&key) {
        Some(Entry::Built(index, identity)) if *identity == tree_identity(node.into_raw().tree) => Some(index.clone()),
        _ => None,
    })
}

/// The root of `node`'s own tree. A root's id is an address inside its tree, so the list's
/// copy of the root is another node than the root of the tree a caller holds: handing that
/// out made two top-level statements' parents compare unequal.
pub fn root_node(node: Node) -> Node {
    // SAFETY: `node` borrows a live tree, so its tree pointer is valid, and the root lives as
    // long as that tree.
    unsafe { Node::from_raw(ffi::ts_tree_root_node(node.into_raw().tree)) }
}

/// What tells one tree from another at the same address: its root subtree. A root node's id
/// is the address of the root field inside the tree struct, so a freed tree's address reused
/// by a new tree gives the same root id; the subtree that field points to is kept alive by
/// the index's own copy, so no later tree can have it. (The list's copy shares it too.)
fn tree_identity(tree: *const ffi::TSTree) -> usize {
    // SAFETY: `tree` is a live tree (callers hold a node of it); a root node's id points at
    // the tree's root field, one pointer-sized `Subtree` (a pointer, or inline data for a
    // tiny tree, which is then compared by value).
    unsafe { *(ffi::ts_tree_root_node(tree).id as *const usize) }
}

fn root_of(node: Node) -> *const std::ffi::c_void {
    // SAFETY: `node` borrows a live tree, so its tree pointer is valid.
    unsafe { ffi::ts_tree_root_node(node.into_raw().tree) }.id
}

/// The node list of `node`'s tree, built on the first walk or climb of the tree.
pub fn for_node(node: Node) -> Option<Rc<NodeIndex>> {
    Some(lookup(node))
}

/// The node list of `node`'s tree, built now if it is not yet: for a caller about to visit
/// every node of the tree, which costs more with a cursor than building the list.
pub fn built_for(node: Node) -> Rc<NodeIndex> {
    lookup(node)
}

fn lookup(node: Node) -> Rc<NodeIndex> {
    let tree = node.into_raw().tree;
    let root_id = tree_identity(tree);
    INDEXES.with(|m| {
        let mut map = m.borrow_mut();
        // The index holds its own copy of the tree, so a freed tree's address reused by
        // another tree shows as a different root subtree.
        if let Some(Entry::Built(index, built_for)) = map.get(&(tree as usize))
            && *built_for == root_id
        {
            return index.clone();
        }
        // SAFETY: `tree` is live (see above); the copy is released when the index drops.
        let copy = unsafe { Tree::from_raw(ffi::ts_tree_copy(tree)) };
        let index = Rc::new(NodeIndex::build(copy));
        let copy_root = index.nodes[0].into_raw();
        map.insert(tree as usize, Entry::Built(index.clone(), root_id));
        // Nodes handed out belong to the copy; walks and climbs starting from them find the
        // same list (before, they found the copy's other root id and rebuilt the list every
        // third call).
        map.insert(copy_root.tree as usize, Entry::Built(index.clone(), tree_identity(copy_root.tree)));
        index
    })
}

impl NodeIndex {
    fn build(tree: Tree) -> NodeIndex {
        // SAFETY: the nodes point into `tree`'s subtrees, which this index keeps alive by
        // owning `tree`; they are never handed out beyond the index's lifetime because
        // `forget` runs only between analyses, when no node of an analysis is held.
        let root: Node<'static> = unsafe { std::mem::transmute::<Node<'_>, Node<'static>>(tree.root_node()) };
        let count = root.descendant_count();
        let mut nodes = Vec::with_capacity(count);
        let mut starts = Vec::with_capacity(count);
        let mut ends = Vec::with_capacity(count);
        let mut parents = Vec::with_capacity(count);
        let mut kind_ids = Vec::with_capacity(count);
        let mut kinds = Vec::with_capacity(count);
        let mut functions = Vec::with_capacity(count);
        // The open nodes that are functions, innermost last.
        let mut open_functions: Vec<u32> = Vec::new();
        let mut pending = vec![Step::Enter(root, 0)];
        let mut wide_children = Vec::new();
        let mut cursor = root.walk();
        while let Some(step) = pending.pop() {
            let (node, parent) = match step {
                Step::Enter(node, parent) => (node, parent),
                Step::Close(at) => {
                    ends[at as usize] = nodes.len() as u32;
                    if open_functions.last() == Some(&at) {
                        open_functions.pop();
                    }
                    continue;
                }
            };
            let at = nodes.len() as u32;
            parents.push(parent);
            functions.push(open_functions.last().copied().unwrap_or(NO_FUNCTION));
            let kind_id = node.kind_id();
            let kind = super::ast::kind_of_id(node, kind_id);
            kind_ids.push(kind_id);
            kinds.push(kind);
            if super::ast::is_function_kind(kind) {
                open_functions.push(at);
            }
            nodes.push(node);
            starts.push(node.start_byte() as u32);
            ends.push(0);
            pending.push(Step::Close(at));
            // A cursor step to the next sibling costs hundreds of instructions; asking a
            // node for its i-th child costs a few per earlier child, so a narrow node's
            // children are asked for by index (a wide one's would cost the square).
            let child_count = node.child_count();
            if child_count <= super::ast::NARROW {
                pending.extend((0..child_count).rev().filter_map(|i| node.child(i)).map(|c| Step::Enter(c, at)));
            } else {
                wide_children.extend(node.children(&mut cursor));
                pending.extend(wide_children.drain(..).rev().map(|c| Step::Enter(c, at)));
            }
        }
        NodeIndex {
            _tree: tree,
            nodes,
            starts,
            ends,
            parents,
            kind_ids,
            kinds,
            functions,
            bindings: Default::default(),
            memos: Default::default(),
        }
    }

    /// The node at position `at` as a node of `like`'s tree (the original or the list's copy:
    /// they share every subtree but the root), so that nodes from the list and from the
    /// caller's own navigation compare and climb alike.
    fn home<'t>(&self, at: u32, like: Node<'t>) -> Node<'t> {
        if at == 0 {
            return root_node(like);
        }
        let raw = self.nodes[at as usize].into_raw();
        // SAFETY: both trees share the subtree `raw` points into, which `like`'s tree keeps
        // alive for as long as `like` lives.
        unsafe { Node::from_raw(ffi::TSNode { tree: like.into_raw().tree, ..raw }) }
    }

    fn position(&self, node: Node) -> Option<usize> {
        let start = node.start_byte() as u32;
        let first = self.starts.partition_point(|s| *s < start);
        let id = node.id();
        let found =
            (first..self.nodes.len()).take_while(|i| self.starts[*i] == start).find(|i| self.nodes[*i].id() == id);
        // A root's id is an address inside its tree, not its subtree: the root of the tree
        // this list copied has another id than the list's own, and no other node's id is
        // such an address, so only a node the list does not hold is asked whether it is the
        // root (which costs a call into tree-sitter).
        found.or_else(|| (id == root_of(node) as usize).then_some(0))
    }

    /// `node`'s position in this list (None: not a node of this tree), for memos whose
    /// answers hold nodes: `node_at` turns it back into a node.
    pub fn position_of(&self, node: Node) -> Option<u32> {
        self.position(node).map(|at| at as u32)
    }

    /// The node at `at` (from `position_of`) as a node of `like`'s tree.
    pub fn node_at<'t>(&self, at: u32, like: Node<'t>) -> Node<'t> {
        self.home(at, like)
    }

    /// The answer remembered for `key` on this tree. The map is chosen by the key's type, so
    /// each memo has a key type of its own. The tree's list lives for one analysis, and so
    /// do the answers.
    pub fn recall<K: Hash + Eq + 'static, V: Clone + 'static>(&self, key: &K) -> Option<V> {
        let memos = self.memos.borrow();
        memos.get(&TypeId::of::<Memos<K, V>>())?.downcast_ref::<Memos<K, V>>()?.get(key).cloned()
    }

    /// What `read` makes of the answer remembered for `key` (see `recall`), without copying
    /// the answer. `read` must not remember anything on this tree.
    pub fn recall_with<K: Hash + Eq + 'static, V: 'static, T>(&self, key: &K, read: impl FnOnce(&V) -> T) -> Option<T> {
        let memos = self.memos.borrow();
        memos.get(&TypeId::of::<Memos<K, V>>())?.downcast_ref::<Memos<K, V>>()?.get(key).map(read)
    }

    /// Remembers `value` for `key` (see `recall`). Not held across the computation of the
    /// value, which may itself recall and remember.
    pub fn remember<K: Hash + Eq + 'static, V: 'static>(&self, key: K, value: V) {
        let mut memos = self.memos.borrow_mut();
        let map = memos.entry(TypeId::of::<Memos<K, V>>()).or_insert_with(|| Box::new(Memos::<K, V>::default()));
        if let Some(map) = map.downcast_mut::<Memos<K, V>>() {
            map.insert(key, value);
        }
    }

    /// What `find` answers about `func`, found once per analysis of its tree: the answer is
    /// kept as positions in the node list (`store` turns one item's nodes into positions,
    /// `load` turns them back), under the question `asked` builds from `func`'s position.
    /// Without a node list the answer is found afresh.
    pub fn remembered<'t, K, R, P>(
        func: Node<'t>,
        asked: impl FnOnce(u32) -> K,
        find: impl FnOnce() -> Vec<R>,
        store: impl Fn(&NodeIndex, &R) -> Option<P>,
        load: impl Fn(&NodeIndex, P) -> R,
    ) -> Vec<R>
    where
        K: Hash + Eq + 'static,
        P: Clone + 'static,
    {
        let Some(index) = existing(func) else { return find() };
        let Some(at) = index.position_of(func) else { return find() };
        let asked = asked(at);
        // `load` only turns positions back into nodes, so the answer is read in place.
        if let Some(known) = index
            .recall_with::<K, Vec<P>, Vec<R>>(&asked, |known| known.iter().map(|p| load(&index, p.clone())).collect())
        {
            return known;
        }
        let found = find();
        if let Some(positions) = found.iter().map(|r| store(&index, r)).collect::<Option<Vec<P>>>() {
            index.remember(asked, positions);
        }
        found
    }

    /// `node`'s named children, in order; None when `node` is not in this tree. A node's
    /// children are the positions from the one after it, each next one just past the
    /// previous one's subtree.
    pub fn named_children<'t>(&self, node: Node<'t>) -> Option<Vec<Node<'t>>> {
        let at = self.position(node)?;
        let end = self.ends[at] as usize;
        let mut out = Vec::new();
        let mut child = at + 1;
        while child < end {
            if self.nodes[child].is_named() {
                out.push(self.home(child as u32, node));
            }
            child = self.ends[child] as usize;
        }
        Some(out)
    }

    /// `node`'s parent; None at the root, or when `node` is not in this tree.
    pub fn parent<'t>(&self, node: Node<'t>) -> Option<Option<Node<'t>>> {
        let at = self.position(node)?;
        Some((at != 0).then(|| self.home(self.parents[at], node)))
    }

    /// `node`'s nearest function ancestor; None when `node` is not in this tree.
    pub fn enclosing_function<'t>(&self, node: Node<'t>) -> Option<Option<Node<'t>>> {
        let at = self.position(node)?;
        let function = self.functions[at];
        Some((function != NO_FUNCTION).then(|| self.home(function, node)))
    }

    /// The binding sites of this tree, read from `src`; None when they were read from
    /// another text (a caller's wrong text must not answer for the right one).
    fn bindings(&self, src: &str) -> Option<&super::bindings::Bindings> {
        let bindings =
            self.bindings.get_or_init(|| super::bindings::Bindings::build(&self.nodes, &self.ends, &self.parents, src));
        bindings.reads(src).then_some(bindings)
    }

    /// `ast::find_binding_init` answered from the binding sites: the value of the last
    /// `const name = value` inside `scope` that starts before `before`. None when this index
    /// cannot answer (another tree or text).
    pub fn plain_init<'t>(&self, scope: Node<'t>, name: &str, src: &str, before: usize) -> Option<Option<Node<'t>>> {
        let at = self.position(scope)?;
        let bindings = self.bindings(src)?;
        Some(bindings.plain_init(name, at as u32, self.ends[at], before).map(|v| self.home(v, scope)))
    }

    /// `ast::module_declaration_init` answered from the binding sites (None: this index
    /// cannot answer).
    pub fn module_declaration_init<'t>(
        &self,
        like: Node<'t>,
        name: &str,
        src: &str,
        before: usize,
    ) -> Option<Option<Node<'t>>> {
        let bindings = self.bindings(src)?;
        let is_declaration = |top: u32| super::ast::is_declaration_statement(self.nodes[top as usize]);
        Some(bindings.module_init(name, before, is_declaration).map(|v| self.home(v, like)))
    }

    /// `ast::latest_binding` answered from the binding sites (None: this index cannot answer).
    pub fn latest_binding<'t>(
        &self,
        scope: Node<'t>,
        name: &str,
        src: &str,
        before: usize,
    ) -> Option<Option<(Node<'t>, Vec<String>)>> {
        let at = self.position(scope)?;
        let bindings = self.bindings(src)?;
        Some(bindings.latest(name, at as u32, self.ends[at], before).map(|(v, path)| (self.home(v, scope), path)))
    }

    /// Every node of the tree in pre-order with its kind id, as nodes of `like`'s tree. Not
    /// charged to the budget: it stands in for a query cursor, which is not either.
    pub fn all_nodes<'t, 'a>(&'a self, like: Node<'t>) -> impl Iterator<Item = (u16, Node<'t>)> + 'a
    where
        't: 'a,
    {
        (0..self.nodes.len() as u32).map(move |at| (self.kind_ids[at as usize], self.home(at, like)))
    }

    /// The nodes of `node`'s subtree whose kind (id and name) `wanted` accepts, in pre-order,
    /// each with its kind id and its parent (None for `node` itself), as nodes of `node`'s
    /// tree; None when `node` is not in this tree. The kind is read from the list before a
    /// node is built, so a search for a few kinds costs little more than a pass over the ids.
    /// Not charged to the budget, as `all_nodes`.
    pub fn subtree_with_parents<'t, 'a>(
        &'a self,
        node: Node<'t>,
        wanted: impl Fn(u16, &'static str) -> bool + 'a,
    ) -> Option<impl Iterator<Item = (u16, Node<'t>, Option<Node<'t>>)> + 'a>
    where
        't: 'a,
    {
        let at = self.position(node)?;
        let end = self.ends[at] as usize;
        Some((at..end).filter(move |i| wanted(self.kind_ids[*i], self.kinds[*i])).map(move |i| {
            let kind_id = self.kind_ids[i];
            if i == at {
                (kind_id, node, None)
            } else {
                (kind_id, self.home(i as u32, node), Some(self.home(self.parents[i], node)))
            }
        }))
    }

    /// The nodes of `node`'s subtree (itself included) whose kind `keep` accepts, in
    /// pre-order, not descending below a node other than `node` whose kind `prune` accepts:
    /// a walk that reads kinds from the list. None when `node` is not in this tree.
    pub fn of_kinds<'t>(
        &self,
        node: Node<'t>,
        keep: impl Fn(&'static str) -> bool,
        prune: impl Fn(&'static str) -> bool,
    ) -> Option<Vec<Node<'t>>> {
        let at = self.position(node)? as u32;
        let found = self.positions_of_kinds(at, keep, prune);
        // `node` itself rather than the list's copy of it, as `walk` hands out.
        Some(found.into_iter().map(|i| if i == at { node } else { self.home(i, node) }).collect())
    }

    /// `of_kinds` as positions in the list, below the node at position `at`.
    pub fn positions_of_kinds(
        &self,
        at: u32,
        keep: impl Fn(&'static str) -> bool,
        prune: impl Fn(&'static str) -> bool,
    ) -> Vec<u32> {
        let at = at as usize;
        let end = self.ends[at] as usize;
        let mut out = Vec::new();
        let mut i = at;
        while i < end {
            super::budget::charge();
            let kind = self.kinds[i];
            if i != at && prune(kind) {
                i = self.ends[i] as usize;
                continue;
            }
            if keep(kind) {
                out.push(i as u32);
            }
            i += 1;
        }
        out
    }

    /// Pre-order walk of `node`'s subtree; `visit` returns false to skip a node's children.
    /// False when `node` is not in this tree.
    pub fn walk<'t>(&self, node: Node<'t>, visit: &mut dyn FnMut(Node<'t>) -> bool) -> bool {
        let Some(at) = self.position(node) else {
            return false;
        };
        let end = self.ends[at] as usize;
        let mut i = at;
        while i < end {
            super::budget::charge();
            // `node` itself rather than the list's copy of it: a root's id differs between the two.
            let visited = if i == at { node } else { self.home(i as u32, node) };
            i = if visit(visited) { i + 1 } else { self.ends[i] as usize };
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use crate::source::{Dialect, SourceFile};
    use crate::syntax::ast;

    /// The walk with a tree cursor only, as `ast::walk` does without a node list.
    fn visited_by_cursor(file: &SourceFile, skip: &str) -> Vec<(usize, &'static str)> {
        let mut out = Vec::new();
        let mut cursor = file.root().walk();
        loop {
            let n = cursor.node();
            out.push((n.id(), n.kind()));
            if n.kind() != skip && cursor.goto_first_child() {
                continue;
            }
            if cursor.goto_next_sibling() {
                continue;
            }
            loop {
                if !cursor.goto_parent() {
                    return out;
                }
                if cursor.goto_next_sibling() {
                    break;
                }
            }
        }
    }

    fn visited(file: &SourceFile, skip: &str) -> Vec<(usize, &'static str)> {
        let mut out = Vec::new();
        ast::walk(file.root(), &mut |n| {
            out.push((n.id(), n.kind()));
            n.kind() != skip
        });
        out
    }

    #[test]
    fn indexed_walks_visit_what_cursor_walks_visit() {
        let text = "export async function POST(req: Request) {\n  const e = await req.json();\n  for (const x of e.items) { await db.insert(x); }\n  return new Response('ok');\n}\nclass A { m() { return () => 1; } }\n";
        let file = SourceFile::new("a.ts".into(), text.into(), Dialect::TypeScript).unwrap();
        super::forget();
        let by_cursor = visited_by_cursor(&file, "statement_block");
        // the first walk builds the list; every walk uses it
        for _ in 0..2 {
            assert_eq!(visited(&file, "statement_block"), by_cursor);
        }
        assert!(super::for_node(file.root()).is_some());
        assert_eq!(visited(&file, "statement_block"), by_cursor);
        // a walk of an inner node, from a node the index handed out
        let mut inner = None;
        ast::walk(file.root(), &mut |n| {
            if inner.is_none() && n.kind() == "for_in_statement" {
                inner = Some(n);
            }
            true
        });
        let inner = inner.unwrap();
        let mut kinds = Vec::new();
        ast::walk(inner, &mut |n| {
            kinds.push(n.kind());
            true
        });
        assert_eq!(kinds.first(), Some(&"for_in_statement"));
        assert!(kinds.contains(&"call_expression") && !kinds.contains(&"return_statement"));
        super::forget();
    }
}
