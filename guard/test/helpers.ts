import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import path from "node:path";
import pg from "pg";

export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:55432/retrysafe_test";
export const MYSQL_URL = process.env.MYSQL_URL ?? "mysql://root@127.0.0.1:53306/retrysafe_test";
export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:56379";
export const GUARD_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
export const uniq = (label: string) => `${label}:${Date.now().toString(36)}${randomBytes(4).toString("hex")}`;

export const SCHEMA = `
CREATE TABLE IF NOT EXISTS processed_events (key text PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS custom_claims (key text PRIMARY KEY, processed_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS ledger (id serial PRIMARY KEY, event_key text NOT NULL, amount integer NOT NULL);
CREATE TABLE IF NOT EXISTS counters (name text PRIMARY KEY, value integer NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS unique_things (id text PRIMARY KEY);
CREATE TABLE IF NOT EXISTS entitlements (event_key text PRIMARY KEY, account text NOT NULL, plan text NOT NULL);
CREATE TABLE IF NOT EXISTS entitlement_log (id serial PRIMARY KEY, event_key text NOT NULL, account text NOT NULL, plan text NOT NULL);
`;

/** Create the test tables (idempotent, serialised with an advisory lock). */
export async function ensureSchema(): Promise<void> {
  const { readFileSync } = await import("node:fs");
  const outboxSql = readFileSync(path.join(GUARD_DIR, "sql", "outbox.sql"), "utf8");
  const claimSql = readFileSync(path.join(GUARD_DIR, "sql", "processed_events.sql"), "utf8");
  const inboxSql = readFileSync(path.join(GUARD_DIR, "sql", "inbox.sql"), "utf8");
  const c = new pg.Client({ connectionString: DATABASE_URL });
  await c.connect();
  try {
    await c.query("SELECT pg_advisory_lock(4242)");
    await c.query(claimSql);
    // a database created by 0.1's suite has the claim table without the fingerprint column
    await c.query("ALTER TABLE processed_events ADD COLUMN IF NOT EXISTS fingerprint text");
    await c.query(SCHEMA);
    await c.query(outboxSql);
    // a database created by 0.1's suite has the old state check (no manual_review)
    await c.query("ALTER TABLE retrysafe_outbox DROP CONSTRAINT IF EXISTS retrysafe_outbox_state_check");
    await c.query("ALTER TABLE retrysafe_outbox ADD CONSTRAINT retrysafe_outbox_state_check CHECK (state IN ('pending', 'leased', 'completed', 'terminal_failure', 'manual_review'))");
    await c.query(inboxSql);
    await c.query("SELECT pg_advisory_unlock(4242)");
  } finally {
    await c.end();
  }
  await ensureMysqlSchema();
}

export const MYSQL_SCHEMA = [
  "CREATE TABLE IF NOT EXISTS custom_claims (`key` VARBINARY(512) NOT NULL PRIMARY KEY, processed_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6))",
  "CREATE TABLE IF NOT EXISTS ledger (id INT AUTO_INCREMENT PRIMARY KEY, event_key VARCHAR(600) NOT NULL, amount INT NOT NULL)",
  "CREATE TABLE IF NOT EXISTS counters (name VARBINARY(512) NOT NULL PRIMARY KEY, value INT NOT NULL DEFAULT 0)",
  "CREATE TABLE IF NOT EXISTS unique_things (id VARCHAR(200) NOT NULL PRIMARY KEY)",
  "CREATE TABLE IF NOT EXISTS entitlement_log (id INT AUTO_INCREMENT PRIMARY KEY, event_key VARCHAR(600) NOT NULL, account VARCHAR(200) NOT NULL, plan VARCHAR(50) NOT NULL)",
];

/** The MariaDB tables: the shipped sql/mysql.sql plus the test's business tables. */
export async function ensureMysqlSchema(): Promise<void> {
  const { readFileSync } = await import("node:fs");
  const mysql = (await import("mysql2/promise")).default;
  const shipped = readFileSync(path.join(GUARD_DIR, "sql", "mysql.sql"), "utf8")
    .split(";")
    .map((st) => st.replace(/^\s*--.*$/gm, "").trim())
    .filter(Boolean);
  const c = await mysql.createConnection({ uri: MYSQL_URL });
  try {
    for (const st of [...shipped, ...MYSQL_SCHEMA]) await c.query(st);
    // a database created by an earlier suite has the claim table without the fingerprint column
    await c.query("ALTER TABLE processed_events ADD COLUMN IF NOT EXISTS fingerprint CHAR(64) CHARACTER SET ascii NULL");
  } finally {
    await c.end();
  }
}

export interface Child {
  proc: ChildProcess;
  /** Resolves with the first stdout line containing `marker`. */
  waitFor(marker: string, timeoutMs?: number): Promise<string>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output(): string;
}

/** Spawn `node --import tsx <script> ...args` from the guard directory. */
export function spawnTs(script: string, args: string[], env: Record<string, string> = {}): Child {
  const proc = spawn(process.execPath, ["--import", "tsx", script, ...args], {
    cwd: GUARD_DIR,
    env: { ...process.env, DATABASE_URL, REDIS_URL, MYSQL_URL, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  const waiters: { marker: string; resolve: (l: string) => void }[] = [];
  proc.stdout!.setEncoding("utf8").on("data", (d: string) => {
    out += d;
    for (const w of [...waiters]) {
      const line = out.split("\n").find((l) => l.includes(w.marker));
      if (line !== undefined) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(line);
      }
    }
  });
  proc.stderr!.setEncoding("utf8").on("data", (d: string) => (err += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.on("exit", (code, signal) => resolve({ code, signal })),
  );
  return {
    proc,
    exited,
    output: () => `stdout:\n${out}\nstderr:\n${err}`,
    waitFor(marker, timeoutMs = 90_000) {
      const line = out.split("\n").find((l) => l.includes(marker));
      if (line !== undefined) return Promise.resolve(line);
      return new Promise<string>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`timed out waiting for ${marker}\n${out}\n${err}`)), timeoutMs);
        exited.then(({ code, signal }) => {
          clearTimeout(t);
          reject(new Error(`child exited (${code ?? signal}) before ${marker}\n${out}\n${err}`));
        });
        waiters.push({
          marker,
          resolve: (l) => {
            clearTimeout(t);
            resolve(l);
          },
        });
      });
    },
  };
}
