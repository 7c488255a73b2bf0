import type { Inbox } from "./inbox.js";
import type { Outbox, OutboxMessage } from "./outbox.js";
import { describeError, queryOf } from "./outbox.js";
import { mysqlExec, mysqlText, sqlDialectOf, type SqlDialect } from "./dialect.js";

/** One disagreement a consistency check found, e.g. an account on "pro" whose subscription the provider shows as cancelled. */
export interface Discrepancy {
  /** What disagrees, e.g. "account acct_42". */
  subject: string;
  /** Why, in one line. */
  detail: string;
  /** An outbox message that repairs it (queued once: its key deduplicates). Without one, the discrepancy is an alert. */
  repair?: OutboxMessage;
}

/** A user-supplied comparison of local records with the provider's authoritative state. */
export interface ConsistencyCheck {
  name: string;
  run(): Promise<Discrepancy[]> | Discrepancy[];
}

export interface ReconcileOptions {
  /** Where the inbox and outbox live (a pg or mysql2 Pool, Prisma client or Drizzle db); repairs are enqueued through it. */
  db: object;
  /** `"postgresql"` or `"mysql"`; default: read from `db`. */
  dialect?: SqlDialect;
  inbox?: Inbox;
  outbox?: Outbox;
  checks?: ConsistencyCheck[];
  /** Most rows listed per category (default 100). */
  limit?: number;
  /** Drizzle's `sql` tag, when a bundler cannot resolve `drizzle-orm`. */
  sql?: any;
}

export interface ReconcileReport {
  checkedAt: string;
  /** Inbox events still `leased` after their lease expired: no worker is running, or it keeps dying on them. */
  stuckInbox: { key: string; kind: string | null; attempts: number; leaseExpiredForMs: number; lastError: string | null }[];
  /** Inbox events in terminal_failure. */
  failedInbox: { key: string; kind: string | null; attempts: number; lastError: string | null }[];
  /** Outbox rows needing a person: manual_review (ambiguous outcome, no idempotency) and terminal_failure. */
  outbox: { key: string; kind: string; state: string; attempts: number; lastError: string | null }[];
  /** What each consistency check found, and what was done about it. */
  discrepancies: { check: string; subject: string; detail: string; action: "repair-queued" | "repair-already-queued" | "alert"; repairKey?: string }[];
  repairsQueued: number;
  alerts: number;
  /** Nothing stuck, failed, ambiguous or inconsistent. */
  ok: boolean;
}

/**
 * One pass of the repair loop (seed 2): list inbox events stuck in `leased` past their
 * lease, inbox and outbox rows in terminal or manual-review states, and run your
 * consistency checks, turning each discrepancy into a queued repair (an outbox row) or an
 * alert. Print `formatReconcileReport(report)` or `JSON.stringify(report)`.
 */
export async function reconcile(options: ReconcileOptions): Promise<ReconcileReport> {
  if (!options?.db) throw new TypeError("@retrysafe/guard: reconcile({ db }) needs a database");
  const dialect = options.dialect ?? sqlDialectOf(options.db);
  for (const part of [options.inbox, options.outbox]) {
    if (part && part.dialect !== dialect) {
      throw new TypeError(`@retrysafe/guard: reconcile() on ${dialect} got an ${part === options.inbox ? "inbox" : "outbox"} made for ${part.dialect} (create it with the same db)`);
    }
  }
  const mysql = dialect === "mysql";
  const limit = Math.max(1, Math.floor(options.limit ?? 100));
  // the same listing on both dialects; keys are VARBINARY on MySQL, read back as text
  const pgQuery = mysql ? undefined : queryOf(options.db, "reconcile()", options.sql);
  const myQuery = mysql ? mysqlExec(options.db, "reconcile()", options.sql) : undefined;
  const q = async (text: string, params: unknown[]) => {
    if (pgQuery) return pgQuery(text, params);
    const rows = await myQuery!.rows(text, params);
    return rows.map((r) => ({ ...r, key: mysqlText(r.key), kind: mysqlText(r.kind) }));
  };
  const key = mysql ? "`key`" : "key";
  const limitParam = mysql ? "?" : "$1";
  const expiredMs = mysql ? "TIMESTAMPDIFF(MICROSECOND, lease_until, NOW(6)) / 1000" : "(extract(epoch FROM (now() - lease_until)) * 1000)::float8";
  const now = mysql ? "NOW(6)" : "now()";
  const report: ReconcileReport = {
    checkedAt: new Date().toISOString(),
    stuckInbox: [],
    failedInbox: [],
    outbox: [],
    discrepancies: [],
    repairsQueued: 0,
    alerts: 0,
    ok: true,
  };
  if (options.inbox) {
    const t = options.inbox.table;
    const stuck = await q(
      `SELECT ${key}, kind, attempts, last_error, ${expiredMs} AS expired_ms
         FROM ${t} WHERE state = 'leased' AND lease_until < ${now} ORDER BY lease_until LIMIT ${limitParam}`,
      [limit],
    );
    report.stuckInbox = stuck.map((r) => ({ key: r.key, kind: r.kind, attempts: Number(r.attempts), leaseExpiredForMs: Math.round(Number(r.expired_ms)), lastError: r.last_error }));
    const failed = await q(`SELECT ${key}, kind, attempts, last_error FROM ${t} WHERE state = 'terminal_failure' ORDER BY updated_at LIMIT ${limitParam}`, [limit]);
    report.failedInbox = failed.map((r) => ({ key: r.key, kind: r.kind, attempts: Number(r.attempts), lastError: r.last_error }));
  }
  if (options.outbox) {
    const rows = await q(
      `SELECT ${key}, kind, state, attempts, last_error FROM ${options.outbox.table}
        WHERE state IN ('manual_review', 'terminal_failure') ORDER BY updated_at LIMIT ${limitParam}`,
      [limit],
    );
    report.outbox = rows.map((r) => ({ key: r.key, kind: r.kind, state: r.state, attempts: Number(r.attempts), lastError: r.last_error }));
  }
  for (const check of options.checks ?? []) {
    let found: Discrepancy[];
    try {
      found = await check.run();
    } catch (err) {
      report.discrepancies.push({ check: check.name, subject: "(check)", detail: `the check itself failed: ${describeError(err)}`, action: "alert" });
      continue;
    }
    for (const d of found) {
      if (d.repair && options.outbox) {
        const inserted = await options.outbox.enqueue(options.db, d.repair);
        report.discrepancies.push({ check: check.name, subject: d.subject, detail: d.detail, action: inserted ? "repair-queued" : "repair-already-queued", repairKey: d.repair.key });
        if (inserted) report.repairsQueued++;
      } else {
        report.discrepancies.push({ check: check.name, subject: d.subject, detail: d.detail, action: "alert" });
      }
    }
  }
  report.alerts =
    report.stuckInbox.length + report.failedInbox.length + report.outbox.length + report.discrepancies.filter((d) => d.action === "alert").length;
  report.ok = report.alerts === 0 && report.discrepancies.length === 0;
  return report;
}

/** A plain-text summary for a terminal or a log: one line per finding, then a totals line. */
export function formatReconcileReport(report: ReconcileReport): string {
  const lines: string[] = [];
  for (const r of report.stuckInbox) lines.push(`inbox  stuck    ${r.key}  leased, lease expired ${Math.round(r.leaseExpiredForMs / 1000)} s ago, ${r.attempts} attempt(s)`);
  for (const r of report.failedInbox) lines.push(`inbox  failed   ${r.key}  terminal_failure after ${r.attempts} attempt(s): ${r.lastError ?? "?"}`);
  for (const r of report.outbox) lines.push(`outbox ${r.state === "manual_review" ? "review " : "failed "}  ${r.key}  ${r.kind}, ${r.state} after ${r.attempts} attempt(s): ${r.lastError ?? "?"}`);
  for (const d of report.discrepancies) {
    const action = d.action === "alert" ? "ALERT" : d.action === "repair-queued" ? `repair queued (${d.repairKey})` : `repair already queued (${d.repairKey})`;
    lines.push(`check  ${d.check}  ${d.subject}: ${d.detail} -> ${action}`);
  }
  lines.push(
    `reconcile: ${report.ok ? "ok" : "attention needed"}: ${report.stuckInbox.length} stuck, ${report.failedInbox.length + report.outbox.filter((r) => r.state === "terminal_failure").length} failed, ` +
      `${report.outbox.filter((r) => r.state === "manual_review").length} for review, ${report.discrepancies.length} discrepancies (${report.repairsQueued} repairs queued, ${report.alerts} alerts)`,
  );
  return lines.join("\n");
}
