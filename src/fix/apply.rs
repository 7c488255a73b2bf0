//! Applies fixes in one forward pass. A fix whose edits overlap or touch an edit already
//! applied is deferred to the next pass; an edit identical to an applied one is merged, so
//! two fixes can both add the same import. A fix that adds new lines inside the lines another
//! fix re-indents (a guard wrap) is deferred too: its indentation was computed before the
//! re-indent, so it is recomputed on the next pass.

use super::{Edit, Fix};

pub struct Applied {
    pub text: String,
    /// Indices (into the input) of the fixes applied in this pass.
    pub applied: Vec<usize>,
    /// Indices of fixes deferred because they conflict with an applied one.
    pub deferred: Vec<usize>,
}

pub fn apply(text: &str, fixes: &[&Fix]) -> Applied {
    let mut order: Vec<usize> = (0..fixes.len()).filter(|&i| !fixes[i].edits.is_empty()).collect();
    order.sort_by_key(|&i| fixes[i].edits.first().map(|e| (e.start, e.end)));
    let mut accepted: Vec<Edit> = Vec::new();
    let mut reindented: Vec<(usize, usize)> = Vec::new();
    let mut applied = Vec::new();
    let mut deferred = Vec::new();
    for i in order {
        let fix = fixes[i];
        if !fix.is_well_formed()
            || fix
                .edits
                .iter()
                .any(|e| e.end > text.len() || !text.is_char_boundary(e.start) || !text.is_char_boundary(e.end))
        {
            deferred.push(i);
            continue;
        }
        let fresh: Vec<&Edit> = fix.edits.iter().filter(|e| !accepted.contains(e)).collect();
        let conflicts = fresh.iter().any(|e| accepted.iter().any(|a| overlaps_or_touches(a, e)));
        let span = reindent_span(text, &fresh);
        let stale_indent =
            fresh.iter().any(|e| adds_line(e) && reindented.iter().any(|&(s, t)| s < e.start && e.start < t))
                || span.is_some_and(|(s, t)| accepted.iter().any(|a| adds_line(a) && s < a.start && a.start < t));
        if conflicts || stale_indent {
            deferred.push(i);
            continue;
        }
        reindented.extend(span);
        accepted.extend(fresh.into_iter().cloned());
        applied.push(i);
    }
    accepted.sort_by_key(|e| (e.start, e.end));
    let mut out = String::with_capacity(text.len() + accepted.iter().map(|e| e.replacement.len()).sum::<usize>());
    let mut pos = 0;
    for e in &accepted {
        out.push_str(&text[pos..e.start]);
        out.push_str(&e.replacement);
        pos = e.end;
    }
    out.push_str(&text[pos..]);
    Applied { text: out, applied, deferred }
}

/// The lines a fix re-indents: from its first pure-whitespace insertion at a line start to
/// the end of the line of its last one (two or more of them).
fn reindent_span(text: &str, edits: &[&Edit]) -> Option<(usize, usize)> {
    let starts: Vec<usize> = edits
        .iter()
        .filter(|e| {
            e.start == e.end
                && !e.replacement.is_empty()
                && e.replacement.chars().all(|c| c == ' ' || c == '\t')
                && (e.start == 0 || text.as_bytes()[e.start - 1] == b'\n')
        })
        .map(|e| e.start)
        .collect();
    let (first, last) = (starts.iter().min()?, starts.iter().max()?);
    let end = text[*last..].find('\n').map_or(text.len(), |n| last + n + 1);
    (starts.len() >= 2).then_some((*first, end))
}

fn adds_line(e: &Edit) -> bool {
    e.replacement.contains('\n')
}

fn overlaps_or_touches(a: &Edit, b: &Edit) -> bool {
    a.start <= b.end && b.start <= a.end
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fix::Applicability;

    fn fix(edits: Vec<Edit>) -> Fix {
        Fix::new("t", Applicability::Safe, edits)
    }

    #[test]
    fn identical_edits_merge_and_overlaps_defer() {
        let a = fix(vec![Edit::insert(0, "import g;\n"), Edit::replace(4, 5, "X")]);
        let b = fix(vec![Edit::insert(0, "import g;\n"), Edit::replace(9, 10, "Y")]);
        let c = fix(vec![Edit::replace(4, 6, "Z")]);
        let r = apply("abc d fg h i", &[&a, &b, &c]);
        assert_eq!(r.text, "import g;\nabc X fg Y i");
        assert_eq!(r.applied, vec![0, 1]);
        assert_eq!(r.deferred, vec![2]);
    }

    #[test]
    fn new_lines_inside_a_reindented_block_wait_for_the_next_pass() {
        let text = "{\na();\nb();\nc();\n}\n";
        let wrap = fix(vec![Edit::insert(2, "  "), Edit::insert(7, "  "), Edit::insert(12, "  ")]);
        let check = fix(vec![Edit::insert(6, "\nif (e) throw e;")]);
        let r = apply(text, &[&wrap, &check]);
        assert_eq!(r.applied, vec![0]);
        assert_eq!(r.deferred, vec![1]);
        let after = fix(vec![Edit::insert(17, "\nd();")]);
        assert_eq!(apply(text, &[&wrap, &after]).applied, vec![0, 1]);
    }
}
