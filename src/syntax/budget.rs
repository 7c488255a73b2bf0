//! The per-file analysis budget: every node a walk visits or a climb passes is charged to the
//! file being analysed, and a file that spends more than its budget is abandoned with a note
//! instead of stalling the run. The budget counts work, not time, so the same input always
//! gets the same answer on any machine.

use std::cell::Cell;

thread_local! {
    /// Node visits left for the analysis running on this thread (`u64::MAX`: no budget).
    static LEFT: Cell<u64> = const { Cell::new(u64::MAX) };
}

/// The payload an exhausted budget unwinds with; only `run` catches it.
struct Exhausted;

/// The budget was spent before the analysis ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget {
    pub visits: u64,
}

/// Charges one visited node.
#[inline]
pub fn charge() {
    charge_many(1);
}

/// Charges `n` visited nodes.
#[inline]
pub fn charge_many(n: u64) {
    LEFT.with(|left| {
        let now = left.get();
        if now == u64::MAX {
            return;
        }
        if now < n {
            left.set(u64::MAX);
            // No panic hook runs for `resume_unwind`: this is control flow, not a crash.
            std::panic::resume_unwind(Box::new(Exhausted));
        }
        left.set(now - n);
    });
}

/// Runs `f` with `visits` node visits to spend on this thread. Budgets do not nest: an inner
/// `run` replaces the outer budget while it lasts.
pub fn run<T>(visits: u64, f: impl FnOnce() -> T) -> Result<T, OverBudget> {
    let previous = LEFT.with(|left| left.replace(visits));
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    LEFT.with(|left| left.set(previous));
    match outcome {
        Ok(value) => Ok(value),
        Err(payload) if payload.is::<Exhausted>() => Err(OverBudget { visits }),
        Err(payload) => std::panic::resume_unwind(payload),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spending_past_the_budget_stops_the_work_and_reports_it() {
        let mut done = 0;
        let result = run(10, || {
            for _ in 0..100 {
                charge();
                done += 1;
            }
        });
        assert_eq!(result, Err(OverBudget { visits: 10 }));
        assert_eq!(done, 10);
        // Outside a budget nothing is counted.
        for _ in 0..100 {
            charge();
        }
        assert_eq!(run(100, || 7), Ok(7));
    }
}
