//! Applies fixes in one forward pass. A fix whose edits overlap or touch an edit already
//! applied is deferred to the next pass; an edit identical to an applied one is merged, so
//! two fixes can both add the same import.

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
        if conflicts {
            deferred.push(i);
            continue;
        }
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
}
