// Prints one plain closing line, "guard: N passed, N failed[, N skipped]", after vitest's own summary.
import type { Reporter } from "vitest/reporters";

function walk(tasks: any[], acc: { passed: number; failed: number; skipped: number }) {
  for (const t of tasks) {
    if (t.type === "suite") {
      walk(t.tasks ?? [], acc);
      if (t.result?.state === "fail" && (t.tasks ?? []).length === 0) acc.failed++;
      continue;
    }
    const state = t.result?.state;
    if (state === "pass") acc.passed++;
    else if (state === "fail") acc.failed++;
    else acc.skipped++;
  }
}

export default class SummaryReporter implements Reporter {
  onFinished(files: any[] = [], errors: unknown[] = []) {
    const acc = { passed: 0, failed: 0, skipped: 0 };
    for (const f of files) {
      walk(f.tasks ?? [], acc);
      // a file that failed to load (or a failing hook) with no failed test still fails the run
      if (f.result?.state === "fail" && acc.failed === 0) acc.failed++;
    }
    if (errors.length > 0 && acc.failed === 0) acc.failed += errors.length;
    const skipped = acc.skipped ? `, ${acc.skipped} skipped` : "";
    process.stdout.write(`\nguard: ${acc.passed} passed, ${acc.failed} failed${skipped}\n`);
  }
}
