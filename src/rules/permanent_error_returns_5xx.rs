//! PLACEHOLDER: not implemented yet.

use super::{Context, Diagnostic, FixAvailability, Rule};

pub const RULE: Rule = Rule {
    id: "permanent-error-returns-5xx",
    summary: "not implemented yet",
    docs: "",
    fix: FixAvailability::None,
    check,
};

fn check(_cx: &Context, _out: &mut Vec<Diagnostic>) {}
