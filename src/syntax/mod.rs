//! Syntax helpers over tree-sitter trees that every later layer uses: node navigation,
//! expression unwrapping, and the per-tree parent index.

pub mod ast;
mod bindings;
pub mod budget;
pub mod node_index;
