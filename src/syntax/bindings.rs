//! The declarations and plain assignments of one tree, by the name they bind, in tree order.
//!
//! "Which `const name = ...` is visible here" is asked for nearly every identifier a rule
//! follows; answered by walking the scope (often the whole module) before the identifier,
//! it made the analysis of a file grow as the square of its length. Built once per tree from
//! its node list, an answer is two binary searches.

use super::ast::{self, text};
use std::collections::HashMap;
use tree_sitter::Node;

/// One binding site: a declarator's pattern naming the name, or `name = value`.
struct Site {
    /// The site's position in the tree's pre-order node list.
    at: u32,
    start: u32,
    /// The position of the statement of the module (a child of the root) holding the site.
    top: u32,
    /// The position of the bound value.
    value: u32,
    /// The property path a destructuring pattern adds (empty for a plain name or an
    /// assignment); `None` for an assignment.
    path: Option<Vec<String>>,
}

#[derive(Default)]
struct Sites {
    /// Declarators and assignments in tree order.
    all: Vec<Site>,
    /// `declarators_before[i]`: how many of `all[..i]` are declarators.
    declarators_before: Vec<u32>,
    /// Positions in `all` of the declarators whose pattern is the bare name.
    plain: Vec<u32>,
}

pub struct Bindings {
    /// The text the names were read from: answers hold only for that text.
    src: (usize, usize),
    by_name: HashMap<String, Sites>,
}

impl Bindings {
    /// Collects every binding site of a tree from its pre-order node list (`ends[i]`: the
    /// position just past node `i`'s subtree).
    pub(super) fn build(nodes: &[Node], ends: &[u32], parents: &[u32], src: &str) -> Bindings {
        let position = |node: Node, from: usize| -> Option<u32> {
            // A child comes after its parent in pre-order, and soon after it.
            nodes[from..].iter().position(|n| n.id() == node.id()).map(|i| (from + i) as u32)
        };
        let mut by_name: HashMap<String, Sites> = HashMap::new();
        let mut top = 0;
        for (i, n) in nodes.iter().enumerate() {
            if i != 0 && parents[i] == 0 {
                top = i as u32;
            }
            let (names, value, plain) = match super::ast::kind(n) {
                "variable_declarator" => {
                    let (Some(pattern), Some(value)) = (ast::field(*n, "name"), ast::field(*n, "value")) else {
                        continue;
                    };
                    let Some(at) = position(pattern, i) else { continue };
                    // A name the pattern binds is the text of one of its nodes.
                    let mut candidates: Vec<&str> = Vec::new();
                    for p in &nodes[at as usize..ends[at as usize] as usize] {
                        let name = text(*p, src);
                        if !candidates.contains(&name) {
                            candidates.push(name);
                        }
                    }
                    let plain = super::ast::kind(pattern) == "identifier";
                    let names: Vec<(&str, Option<Vec<String>>)> = candidates
                        .into_iter()
                        .filter_map(|name| Some((name, Some(ast::pattern_path(pattern, name, src)?))))
                        .collect();
                    (names, value, plain)
                }
                "assignment_expression" => {
                    let (Some(left), Some(value)) = (ast::field(*n, "left"), ast::field(*n, "right")) else {
                        continue;
                    };
                    if super::ast::kind(left) != "identifier" {
                        continue;
                    }
                    (vec![(text(left, src), None)], value, false)
                }
                _ => continue,
            };
            let Some(value) = position(value, i) else { continue };
            for (name, path) in names {
                let sites = by_name.entry(name.to_string()).or_default();
                if plain {
                    sites.plain.push(sites.all.len() as u32);
                }
                sites.all.push(Site { at: i as u32, start: n.start_byte() as u32, top, value, path });
            }
        }
        for sites in by_name.values_mut() {
            let mut count = 0;
            sites.declarators_before.push(0);
            for site in &sites.all {
                count += u32::from(site.path.is_some());
                sites.declarators_before.push(count);
            }
        }
        Bindings { src: (src.as_ptr() as usize, src.len()), by_name }
    }

    pub(super) fn reads(&self, src: &str) -> bool {
        self.src == (src.as_ptr() as usize, src.len())
    }

    /// The sites of `name` inside the subtree spanning positions `from..to` that start
    /// before byte `before`: what a pre-order walk of that subtree, stopped at `before`, visits.
    fn range(&self, sites: &Sites, from: u32, to: u32, before: usize) -> (usize, usize) {
        let lo = sites.all.partition_point(|s| s.at < from);
        let hi = sites.all.partition_point(|s| s.at < to && (s.start as usize) < before);
        (lo, hi.max(lo))
    }

    /// The value of the last `const name = value` (a bare identifier pattern) in the subtree,
    /// as a position in the node list.
    pub(super) fn plain_init(&self, name: &str, from: u32, to: u32, before: usize) -> Option<u32> {
        let sites = self.by_name.get(name)?;
        let (lo, hi) = self.range(sites, from, to, before);
        let last = sites.plain.partition_point(|&i| (i as usize) < hi);
        let &i = sites.plain[..last].last()?;
        ((i as usize) >= lo).then(|| sites.all[i as usize].value)
    }

    /// The binding a walk that lets each declarator of `name`, and after the first one each
    /// plain assignment to it, replace the previous one would end with: the value's position
    /// and the destructuring path.
    pub(super) fn latest(&self, name: &str, from: u32, to: u32, before: usize) -> Option<(u32, Vec<String>)> {
        let sites = self.by_name.get(name)?;
        let (lo, hi) = self.range(sites, from, to, before);
        if sites.declarators_before[hi] == sites.declarators_before[lo] {
            return None;
        }
        let last = &sites.all[hi - 1];
        Some((last.value, last.path.clone().unwrap_or_default()))
    }

    /// The value of the last `const name = value` in the first module-level declaration
    /// statement (`const`, `let`, `var`, exported or not) that declares `name` before
    /// `before`; `is_declaration` says which statements of the module (by position) are such.
    pub(super) fn module_init(&self, name: &str, before: usize, is_declaration: impl Fn(u32) -> bool) -> Option<u32> {
        let sites = self.by_name.get(name)?;
        let mut found: Option<(u32, u32)> = None;
        for &i in &sites.plain {
            let site = &sites.all[i as usize];
            if site.start as usize >= before {
                break;
            }
            match found {
                Some((top, _)) if top == site.top => found = Some((top, site.value)),
                Some(_) => break,
                None if is_declaration(site.top) => found = Some((site.top, site.value)),
                None => {}
            }
        }
        found.map(|(_, value)| value)
    }
}
