//! Branches of a reached function that the literal arguments of its call rule out:
//! `sendUsageAndReset({ submitUsage: false })` never runs `if (submitUsage) {...}`, and
//! `receiveInboxMessage(data, "create-or-update")` never runs `case "create": ...`.

use super::ast::{self, text};
use crate::source::Span;
use crate::syntax::ast::Fields as _;
use crate::syntax::ast::KindName;
use tree_sitter::Node;

/// A literal argument's value, as far as a branch test can compare it.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Text(String),
    Number(String),
    Bool(bool),
    Nullish,
}

/// What a reached function knows of its parameters: names (or `param.field` paths) bound to
/// literal values by every call that reaches it.
pub type Known = Vec<(String, Value)>;

impl Value {
    fn of(node: Node, src: &str) -> Option<Value> {
        Value::given(node, src, &[])
    }

    /// A literal, or a name the caller itself knows the value of (`submitUsage` passed on).
    fn given(node: Node, src: &str, caller: &[(String, Value)]) -> Option<Value> {
        let node = ast::unwrap_expr(node);
        match node.kind_name() {
            "identifier" | "shorthand_property_identifier" => {
                caller.iter().find(|(k, _)| k == text(node, src)).map(|(_, v)| v.clone())
            }
            "string" => ast::string_value(node, src).map(Value::Text),
            "template_string" if ast::named_children(node).iter().all(|c| c.kind_name() == "string_fragment") => {
                ast::string_value(node, src).map(Value::Text)
            }
            "number" => Some(Value::Number(text(node, src).to_string())),
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            "null" | "undefined" => Some(Value::Nullish),
            _ => None,
        }
    }

    fn truthy(&self) -> bool {
        match self {
            Value::Text(t) => !t.is_empty(),
            Value::Number(n) => n != "0",
            Value::Bool(b) => *b,
            Value::Nullish => false,
        }
    }
}

/// The spans of `callee`'s statements that cannot run when `call` calls it: the branches of
/// an `if` or a `switch` on a parameter the call passes a literal for, where the literal
/// decides the test the other way. A parameter the function assigns is left alone.
pub fn ruled_out(
    call: Node,
    call_src: &str,
    callee: Node,
    callee_src: &str,
    caller: &[(String, Value)],
) -> (Vec<Span>, Known) {
    let args = ast::arguments(call);
    let mut known: Vec<(String, Value)> = Vec::new();
    for (index, arg) in args.iter().enumerate() {
        let Some(param) = ast::parameter(callee, index) else { break };
        match param.kind_name() {
            "identifier" => {
                let name = text(param, callee_src);
                // `const data = { action: "create", ... }; receive(subdomain, data)`
                let object = match ast::unwrap_expr(*arg) {
                    a if a.kind_name() == "identifier" => ast::enclosing_function(call)
                        .and_then(|scope| ast::find_binding_init(scope, text(a, call_src), call_src, call.start_byte()))
                        .map(ast::unwrap_expr)
                        .filter(|init| init.kind_name() == "object"),
                    a => Some(a).filter(|a| a.kind_name() == "object"),
                };
                if let Some(v) = Value::given(*arg, call_src, caller) {
                    known.push((name.to_string(), v));
                } else if let Some(object) = object {
                    // `receive(subdomain, { action: "create", payload })`, read as `data.action`
                    // or destructured in the body: `const { action } = data`
                    for (field, v) in literal_fields(object, call_src, caller) {
                        known.push((format!("{name}.{field}"), v.clone()));
                        if destructured_from(callee, name, &field, callee_src) {
                            known.push((field, v));
                        }
                    }
                }
            }
            // `({ submitUsage }) => ...` called with `{ submitUsage: false }`
            "object_pattern" if ast::unwrap_expr(*arg).kind_name() == "object" => {
                let passed = literal_fields(ast::unwrap_expr(*arg), call_src, caller);
                let written: Vec<String> = ast::named_children(ast::unwrap_expr(*arg))
                    .into_iter()
                    .filter_map(|p| match p.kind_name() {
                        "pair" => p.field("key").map(|k| text(k, call_src).to_string()),
                        "shorthand_property_identifier" => Some(text(p, call_src).to_string()),
                        _ => None,
                    })
                    .collect();
                let spread =
                    ast::named_children(ast::unwrap_expr(*arg)).iter().any(|p| p.kind_name() == "spread_element");
                for field in ast::named_children(param) {
                    // `{ submitUsage }`, or `{ submitUsage = true }` whose default applies when
                    // the call leaves the field out
                    let (name, default) = match field.kind_name() {
                        "shorthand_property_identifier_pattern" => (text(field, callee_src), None),
                        "object_assignment_pattern" => match field.field("left") {
                            Some(left) if left.kind_name() == "shorthand_property_identifier_pattern" => {
                                (text(left, callee_src), field.field("right"))
                            }
                            _ => continue,
                        },
                        _ => continue,
                    };
                    if let Some((_, v)) = passed.iter().find(|(k, _)| k == name) {
                        known.push((name.to_string(), v.clone()));
                    } else if !spread
                        && !written.iter().any(|w| w == name)
                        && let Some(v) = default.and_then(|d| Value::of(d, callee_src))
                    {
                        known.push((name.to_string(), v));
                    }
                }
            }
            _ => {}
        }
    }
    let Some(body) = callee.field("body") else { return (Vec::new(), Vec::new()) };
    known.retain(|(name, _)| {
        let base = name.split('.').next().unwrap_or(name);
        !assigned(body, name, callee_src) && !assigned(body, base, callee_src)
    });
    if known.is_empty() {
        return (Vec::new(), known);
    }
    let mut out = Vec::new();
    ast::walk(body, &mut |n| {
        if ast::is_function(n) {
            return false;
        }
        match n.kind_name() {
            "if_statement" => {
                let decided = n.field("condition").and_then(|c| decide(c, &known, callee_src));
                match decided {
                    Some(false) => out.extend(n.field("consequence").map(Span::of)),
                    Some(true) => out.extend(n.field("alternative").map(Span::of)),
                    None => {}
                }
            }
            "switch_statement" => switch_cases(n, &known, callee_src, &mut out),
            _ => {}
        }
        true
    });
    (out, known)
}

/// The fields of an object literal whose values are literals.
fn literal_fields(object: Node, src: &str, caller: &[(String, Value)]) -> Vec<(String, Value)> {
    ast::named_children(object)
        .into_iter()
        .filter_map(|p| match p.kind_name() {
            "pair" => {
                let key = p.field("key")?;
                let key = ast::string_value(key, src).unwrap_or_else(|| text(key, src).to_string());
                Some((key, Value::given(p.field("value")?, src, caller)?))
            }
            // `{ submitUsage }` passing on what the caller knows
            "shorthand_property_identifier" => Some((text(p, src).to_string(), Value::given(p, src, caller)?)),
            _ => None,
        })
        .collect()
}

/// Whether `func`'s body starts by destructuring `field` from its parameter `param`
/// (`const { action, payload } = data;`) at its top level.
fn destructured_from(func: Node, param: &str, field: &str, src: &str) -> bool {
    let Some(body) = func.field("body") else { return false };
    ast::named_children(body).into_iter().filter(|s| s.kind_name() == "lexical_declaration").any(|decl| {
        ast::named_children(decl).into_iter().any(|d| {
            d.field("value").is_some_and(|v| v.kind_name() == "identifier" && text(v, src) == param)
                && d.field("name").is_some_and(|pattern| {
                    pattern.kind_name() == "object_pattern"
                        && ast::named_children(pattern)
                            .into_iter()
                            .any(|f| f.kind_name() == "shorthand_property_identifier_pattern" && text(f, src) == field)
                })
        })
    })
}

/// Whether `body` assigns `name` (`name = ...`, `name += ...`).
fn assigned(body: Node, name: &str, src: &str) -> bool {
    let mut found = false;
    ast::walk(body, &mut |n| {
        if matches!(n.kind_name(), "assignment_expression" | "augmented_assignment_expression")
            && n.field("left").is_some_and(|l| text(l, src) == name)
        {
            found = true;
        }
        !found
    });
    found
}

/// The value of a test over known parameters: `flag`, `!flag`, `kind === "x"`, `kind !== "x"`,
/// and `&&` / `||` of them.
fn decide(cond: Node, known: &[(String, Value)], src: &str) -> Option<bool> {
    let cond = ast::unwrap_expr(cond);
    let value_of = |n: Node| {
        let n = ast::unwrap_expr(n);
        matches!(n.kind_name(), "identifier" | "member_expression")
            .then(|| known.iter().find(|(k, _)| k == text(n, src)).map(|(_, v)| v))
            .flatten()
    };
    match cond.kind_name() {
        "identifier" | "member_expression" => value_of(cond).map(Value::truthy),
        "unary_expression" if cond.child(0).is_some_and(|o| o.kind_name() == "!") => {
            decide(cond.field("argument")?, known, src).map(|b| !b)
        }
        "binary_expression" => {
            let op = cond.field("operator").map(|o| text(o, src))?;
            let left = cond.field("left")?;
            let right = cond.field("right")?;
            match op {
                "&&" => match (decide(left, known, src), decide(right, known, src)) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                },
                "||" => match (decide(left, known, src), decide(right, known, src)) {
                    (Some(true), _) | (_, Some(true)) => Some(true),
                    (Some(false), Some(false)) => Some(false),
                    _ => None,
                },
                "===" | "==" | "!==" | "!=" => {
                    let (known_value, literal) = match (value_of(left), value_of(right)) {
                        (Some(v), None) => (v, Value::of(right, src)?),
                        (None, Some(v)) => (v, Value::of(left, src)?),
                        _ => return None,
                    };
                    let equal = *known_value == literal;
                    Some(if op.starts_with('!') { !equal } else { equal })
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// `switch (kind) { case "a": ...; break; case "b": ... }` over a known parameter: the cases
/// whose value differs, when the case before them cannot fall through into them.
fn switch_cases(switch: Node, known: &[(String, Value)], src: &str, out: &mut Vec<Span>) {
    let Some(subject) = switch.field("value").map(ast::unwrap_expr) else { return };
    let Some((_, value)) = known.iter().find(|(k, _)| k == text(subject, src)) else {
        return;
    };
    let Some(body) = switch.field("body") else { return };
    let entries = ast::named_children(body);
    // a `default:` that another case follows can fall into it
    if entries.iter().rev().skip(1).any(|c| c.kind_name() == "switch_default") {
        return;
    }
    let cases: Vec<Node> = entries.into_iter().filter(|c| c.kind_name() == "switch_case").collect();
    // A case value that is not a literal (a constant) leaves the switch undecided.
    let mut values = Vec::new();
    for case in &cases {
        match case.field("value").and_then(|v| Value::of(v, src)) {
            Some(v) => values.push(v),
            None => return,
        }
    }
    let mut open = false; // whether control can fall into the next case
    for (case, case_value) in cases.iter().zip(&values) {
        let entered = case_value == value || open;
        if !entered {
            out.push(Span::of(*case));
        }
        let mut cursor = case.walk();
        let statements: Vec<Node> = case.children_by_field_name("body", &mut cursor).collect();
        let exits = statements.last().is_some_and(|s| {
            matches!(s.kind_name(), "break_statement" | "return_statement" | "throw_statement" | "continue_statement")
        });
        open = entered && !exits;
    }
}

/// The branches of an HTTP handler that run only for a request method no provider delivers
/// with (`if (req.method === "DELETE") {...}`, `case "GET":` of a `switch (req.method)`): a
/// route file serving a signed-in person's cancel button or a verification `GET` beside the
/// delivery's `POST`.
pub fn other_method_branches(func: Node, src: &str) -> Vec<Span> {
    let other_method = |n: Node| {
        ast::string_value(ast::unwrap_expr(n), src)
            .is_some_and(|m| matches!(m.to_ascii_uppercase().as_str(), "GET" | "DELETE" | "HEAD" | "OPTIONS"))
    };
    let reads_method = |n: Node| {
        let n = ast::unwrap_expr(n);
        n.kind_name() == "member_expression" && n.field("property").is_some_and(|p| text(p, src) == "method")
    };
    let mut out = Vec::new();
    // Both shapes read a `.method` property: a function whose text never says it has neither.
    if memchr::memmem::find(&src.as_bytes()[func.start_byte()..func.end_byte()], b"method").is_none() {
        return out;
    }
    for stmt in ast::descendants_of_kind(func, "if_statement") {
        let (Some(cond), Some(cons)) = (stmt.field("condition"), stmt.field("consequence")) else {
            continue;
        };
        let cond = ast::unwrap_expr(cond);
        let equals = cond.kind_name() == "binary_expression"
            && cond.field("operator").is_some_and(|o| matches!(text(o, src), "===" | "=="));
        let (Some(left), Some(right)) = (cond.field("left"), cond.field("right")) else {
            continue;
        };
        if equals && ((reads_method(left) && other_method(right)) || (reads_method(right) && other_method(left))) {
            out.push(Span::of(cons));
        }
    }
    for switch in ast::descendants_of_kind(func, "switch_statement") {
        if !switch.field("value").is_some_and(reads_method) {
            continue;
        }
        let Some(body) = switch.field("body") else { continue };
        for case in ast::named_children(body).into_iter().filter(|c| c.kind_name() == "switch_case") {
            if case.field("value").is_some_and(other_method) {
                out.push(Span::of(case));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::{Dialect, SourceFile};

    /// The ruled-out spans, as the first line of each.
    fn ruled(code: &str) -> Vec<String> {
        let file = SourceFile::new("t.ts".into(), code.to_string(), Dialect::TypeScript).unwrap();
        let src = &file.text;
        let calls = ast::calls_in(file.root(), false);
        let call = calls.iter().find(|c| ast::callee_name(**c, src).as_deref() == Some("run")).unwrap();
        let callee = ast::descendants_of_kind(file.root(), "function_declaration")[0];
        ruled_out(*call, src, callee, src, &[])
            .0
            .iter()
            .map(|s| src[s.start..s.end].lines().next().unwrap_or("").trim().to_string())
            .collect()
    }

    #[test]
    fn switch_cases_fall_through_into_the_next() {
        let code =
            "function f(kind) { switch (kind) { case 'a': x(); case 'b': y(); break; case 'c': z(); } }\nrun('a');";
        assert_eq!(ruled(code), vec!["case 'c': z();"]);
        let code = "function f(kind) { switch (kind) { case 'a': x(); break; case 'b': y(); break; } }\nrun('b');";
        assert_eq!(ruled(code), vec!["case 'a': x(); break;"]);
    }

    #[test]
    fn branches_for_methods_no_provider_uses() {
        let code = "async function handler(req, res) {\n  if (req.method === 'POST') { await a(); }\n  else if (req.method === 'DELETE') { await b(); }\n  switch (req.method) { case 'GET': c(); break; case 'PUT': d(); }\n}";
        let file = SourceFile::new("t.ts".into(), code.to_string(), Dialect::TypeScript).unwrap();
        let func = ast::descendants_of_kind(file.root(), "function_declaration")[0];
        let spans: Vec<&str> =
            other_method_branches(func, &file.text).iter().map(|s| file.text[s.start..s.end].trim()).collect();
        assert_eq!(spans, vec!["{ await b(); }", "case 'GET': c(); break;"]);
    }

    #[test]
    fn a_reassigned_or_unknown_flag_rules_nothing_out() {
        assert!(ruled("function f(flag) { flag = true; if (flag) { x(); } }\nrun(false);").is_empty());
        assert!(ruled("function f(flag) { if (flag) { x(); } }\nrun(other);").is_empty());
        assert_eq!(ruled("function f(flag) { if (!flag) { x(); } else { y(); } }\nrun(false);"), vec!["else { y(); }"]);
    }
}
