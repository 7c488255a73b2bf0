//! Which fixes may be applied without review. A rule proposes an applicability; this module
//! has the last word, so a wrong finding cannot turn into an unreviewed edit of the kinds a
//! reviewer would reject: a schema change, a new file, an edit in another file or outside the
//! function the finding is in, or verification moved to another place.

use super::{Applicability, Edit, Fix};
use crate::model::ast;
use crate::source::{Dialect, SourceFile};
use crate::syntax::ast::KindName;

/// Downgrades a safe fix to review when it does something only a reviewer may accept; the
/// reason goes into the fix's note (the dry run's hunk header shows it).
pub fn settle(file: &SourceFile, start: usize, end: usize, fix: &mut Fix) {
    if fix.applicability != Applicability::DisplayOnly
        && let Some(style) = foreign_answer(file, &fix.edits)
    {
        fix.applicability = Applicability::DisplayOnly;
        fix.note = Some(format!(
            "the fix would answer in {style} style, but this function answers in another framework's style: \
             make the failure reach the provider as a 5xx by hand"
        ));
        fix.edits.clear();
        return;
    }
    if fix.applicability != Applicability::Safe {
        return;
    }
    let Some(reason) = review_reason(file, start, end, fix) else { return };
    fix.applicability = Applicability::Unsafe;
    fix.note = Some(match fix.note.take() {
        Some(n) => format!("review: {reason}; {n}"),
        None => format!("review: {reason}"),
    });
}

fn review_reason(file: &SourceFile, start: usize, end: usize, fix: &Fix) -> Option<&'static str> {
    if !fix.new_files.is_empty() {
        return Some("creates a file");
    }
    if fix.target.as_ref().is_some_and(|t| t != &file.path) {
        return Some("edits another file than the finding's");
    }
    if file.dialect == Dialect::Text || crate::workspace::is_schema_file(&file.path) {
        return Some("changes a schema (existing rows may violate it)");
    }
    let root = file.root();
    let at = root.descendant_for_byte_range(start, end.max(start))?;
    let Some(function) = ast::ancestors(at).chain(std::iter::once(at)).filter(|n| ast::is_function(*n)).last() else {
        return Some("edits code outside any function (a schema, model or app definition)");
    };
    let outside = fix.edits.iter().any(|e| {
        let inside = function.start_byte() <= e.start && e.end <= function.end_byte();
        !inside && !is_import(file, e)
    });
    if outside {
        return Some("edits code outside the function the finding is in");
    }
    if moves_verification(file, &fix.edits) {
        return Some("moves the signature verification");
    }
    None
}

/// An answer added in one framework's style (`new Response(...)`, `res.status(...).end()`)
/// into a function whose own answers are all in the other's: the handler was taken for the
/// wrong framework, and the added answer would not compile or never reach the client.
fn foreign_answer(file: &SourceFile, edits: &[Edit]) -> Option<&'static str> {
    let node_style = crate::regex!(r"\b\w+\.(status|code)\(\d+\)\.(end|send|json)\(|\b\w+\.sendStatus\(");
    let fetch_style = |t: &str| t.contains("new Response(") || t.contains("Response.json(");
    let receiver = crate::regex!(r"\b(\w+)\.(?:status|code|sendStatus)\(");
    for e in edits {
        let (adds_fetch, adds_node) = (fetch_style(&e.replacement), node_style.is_match(&e.replacement));
        if !adds_fetch && !adds_node {
            continue;
        }
        let Some(at) = file.root().descendant_for_byte_range(e.start, e.end) else { continue };
        let Some(function) = std::iter::once(at).chain(ast::ancestors(at)).filter(|n| ast::is_function(*n)).last()
        else {
            continue;
        };
        let own = &file.text[function.start_byte()..function.end_byte()];
        let (has_fetch, has_node) = (fetch_style(own) || own.contains("NextResponse."), node_style.is_match(own));
        if adds_fetch && !has_fetch && has_node {
            return Some("fetch (`new Response`)");
        }
        if adds_node && !has_node && has_fetch {
            return Some("Express (`res.status(...)`)");
        }
        // `stripe.status(200).end()`: the receiver was taken for the response object, but the
        // function never answers through it.
        if let Some(r) = receiver.captures(&e.replacement).map(|c| c[1].to_string()) {
            let typical = matches!(r.as_str(), "res" | "response" | "reply" | "resp" | "rep" | "ctx" | "c");
            if !typical && !answers_through(&r, own) {
                return Some("Express (`res.status(...)`) through a value that is not the response");
            }
        }
    }
    None
}

/// Whether `text` answers through `receiver` (`receiver.status(`, `receiver.json`, ...). The
/// pattern depends on the receiver's name, and compiling it costs far more than matching:
/// settling runs for every fix, so each name's pattern is compiled once per thread.
fn answers_through(receiver: &str, text: &str) -> bool {
    thread_local! {
        static COMPILED: std::cell::RefCell<std::collections::HashMap<String, regex::Regex>> = Default::default();
    }
    COMPILED.with(|compiled| {
        let mut compiled = compiled.borrow_mut();
        // A long-lived server sees unboundedly many names; a reset keeps the cache small.
        if compiled.len() > 256 {
            compiled.clear();
        }
        let re = compiled.entry(receiver.to_string()).or_insert_with(|| {
            regex::Regex::new(&format!(
                r"\b{}\.(status|code|send|json|end|sendStatus|redirect|set|header|type|writeHead)\b",
                regex::escape(receiver)
            ))
            .unwrap()
        });
        re.is_match(text)
    })
}

/// An edit that adds an import (or a `require`) at module level, or extends an import.
fn is_import(file: &SourceFile, e: &Edit) -> bool {
    let Some(node) = file.root().descendant_for_byte_range(e.start, e.end) else { return false };
    let lineage: Vec<_> = std::iter::once(node).chain(ast::ancestors(node)).collect();
    if lineage.iter().any(|n| ast::is_function(*n)) {
        return false;
    }
    let added = e.replacement.trim_start();
    (e.start == e.end && (added.starts_with("import ") || added.contains("require(")))
        || lineage.iter().any(|n| n.kind_name() == "import_statement")
}

/// A deleted statement whose text is inserted elsewhere, and that verifies a signature.
fn moves_verification(file: &SourceFile, edits: &[Edit]) -> bool {
    let verifying = crate::regex!(r"(?i)verif|signature|constructEvent|hmac|timingSafeEqual|webhooks?\.");
    edits.iter().filter(|e| e.end > e.start).any(|deleted| {
        let moved = file.text[deleted.start..deleted.end].trim();
        moved.len() > 8
            && verifying.is_match(moved)
            && edits.iter().any(|other| other != deleted && other.replacement.contains(first_line(moved)))
    })
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s).trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn file(path: &str, text: &str) -> SourceFile {
        let path = PathBuf::from(path);
        let dialect = Dialect::for_path(&path).unwrap_or(Dialect::Text);
        SourceFile::new(path, text.to_string(), dialect).unwrap()
    }

    #[test]
    fn schema_edits_and_module_level_edits_need_review() {
        let prisma = file("schema.prisma", "model E {\n  key String\n}\n");
        let mut fix = Fix::safe("add @unique", vec![Edit::insert(22, " @unique")]);
        settle(&prisma, 12, 22, &mut fix);
        assert_eq!(fix.applicability, Applicability::Unsafe);
        assert!(fix.note.as_deref().unwrap().contains("schema"));

        let mongoose = file("m.ts", "const S = new Schema({ productId: String });\n");
        let mut fix = Fix::safe("unique", vec![Edit::replace(34, 40, "{ type: String, unique: true }")]);
        settle(&mongoose, 23, 40, &mut fix);
        assert_eq!(fix.applicability, Applicability::Unsafe);
    }

    #[test]
    fn edits_inside_the_finding_function_stay_safe_and_imports_may_be_added() {
        let src = "import x from \"x\";\nasync function h(e) {\n  await s.create({});\n}\n";
        let f = file("h.ts", src);
        let at = src.find("{}").unwrap();
        let mut fix = Fix::safe(
            "key",
            vec![Edit::insert(19, "import y from \"y\";\n"), Edit::insert(at + 3, ", { idempotencyKey: k }")],
        );
        settle(&f, at, at + 2, &mut fix);
        assert_eq!(fix.applicability, Applicability::Safe, "{:?}", fix.note);

        let mut outside = Fix::safe("x", vec![Edit::insert(src.len(), "await s.flush();\n")]);
        settle(&f, at, at + 2, &mut outside);
        assert_eq!(outside.applicability, Applicability::Unsafe);
    }

    #[test]
    fn an_answer_in_another_framework_style_is_not_applied() {
        let src = "app.post(\"/hook\", async (req, res) => {\n  try {\n    await work();\n  } catch (e) {\n    res.status(400).send(\"bad\");\n  }\n});\n";
        let f = file("h.ts", src);
        let at = src.find("res.status(400)").unwrap();
        let mut fix =
            Fix::unsafe_("answer 500", vec![Edit::insert(at, "return new Response(null, { status: 500 });\n    ")]);
        settle(&f, at, at + 3, &mut fix);
        assert_eq!(fix.applicability, Applicability::DisplayOnly);
        assert!(fix.edits.is_empty());

        let mut same = Fix::unsafe_("answer 500", vec![Edit::insert(at, "return res.status(500).end();\n    ")]);
        settle(&f, at, at + 3, &mut same);
        assert_eq!(same.applicability, Applicability::Unsafe);
    }

    #[test]
    fn an_answer_through_a_value_that_is_not_the_response_is_not_applied() {
        let src = "export async function handleCheckout(event, stripe) {\n  if (!event.id) {\n    return;\n  }\n  await stripe.refunds.create({});\n}\n";
        let f = file("h.ts", src);
        let at = src.find("return;").unwrap();
        let mut fix = Fix::unsafe_("answer", vec![Edit::replace(at, at + 7, "return stripe.status(400).end();")]);
        settle(&f, at, at + 7, &mut fix);
        assert_eq!(fix.applicability, Applicability::DisplayOnly);
    }

    #[test]
    fn moving_the_verification_needs_review() {
        let src = "async function h(req) {\n  if (req.apiKey) { await a(); }\n  const e = verifySignature(req);\n}\n";
        let f = file("h.ts", src);
        let v = src.find("const e").unwrap();
        let end = src[v..].find('\n').unwrap() + v;
        let first = src.find("if (").unwrap();
        let mut fix =
            Fix::safe("move", vec![Edit::insert(first, "const e = verifySignature(req);\n  "), Edit::delete(v, end)]);
        settle(&f, first, first + 2, &mut fix);
        assert_eq!(fix.applicability, Applicability::Unsafe);
    }
}
