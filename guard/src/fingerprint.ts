import { createHash } from "node:crypto";
import { describeKey, GuardError, GuardMismatchError } from "./errors.js";

/** A stable JSON text (object keys sorted) so the same payload always hashes the same. */
export function canonicalJson(value: unknown): string {
  if (value === undefined) return "null";
  if (value === null || typeof value !== "object") return JSON.stringify(value) ?? "null";
  if (typeof (value as any).toJSON === "function") return canonicalJson((value as any).toJSON());
  if (Array.isArray(value)) return `[${value.map((v) => canonicalJson(v)).join(",")}]`;
  const entries = Object.keys(value as object)
    .filter((k) => (value as any)[k] !== undefined)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as any)[k])}`);
  return `{${entries.join(",")}}`;
}

/** SHA-256 (hex) of the canonical JSON of a payload; Buffers and strings are hashed as bytes. */
export function payloadFingerprint(payload: unknown): string {
  const h = createHash("sha256");
  if (typeof payload === "string" || payload instanceof Uint8Array) h.update(payload);
  else h.update(canonicalJson(payload));
  return h.digest("hex");
}

/** The third argument of `guard.run(key, fn, options)`. */
export interface RunOptions {
  /**
   * The event's payload. When given, a SHA-256 of it is stored with the claim, and a later
   * `run()` of the same key with another payload answers `{ status: "mismatch" }` instead of
   * `duplicate`: two different events derive one key, a bug in the key derivation. Needs the
   * claim table's `fingerprint` column (see the README's migration).
   */
  payload?: unknown;
  /** A mismatch `"return"`s `{ status: "mismatch" }` (default) or `"throw"`s a GuardMismatchError. */
  onMismatch?: "return" | "throw";
}

/** The fingerprint to store for this call, or null when the caller passed no payload. */
export function fingerprintFor(options: RunOptions | undefined): string | null {
  if (options === undefined || options === null) return null;
  if (typeof options !== "object") throw new TypeError("@retrysafe/guard: run(key, fn, options): options must be an object such as { payload }");
  if (options.onMismatch !== undefined && options.onMismatch !== "return" && options.onMismatch !== "throw") {
    throw new TypeError(`@retrysafe/guard: onMismatch must be "return" or "throw", got ${JSON.stringify(options.onMismatch)}`);
  }
  return "payload" in options && options.payload !== undefined ? payloadFingerprint(options.payload) : null;
}

/**
 * The answer for a key that is already claimed: `mismatch` when both this call and the
 * stored claim have a fingerprint and they differ; otherwise `same` (a claim stored without a
 * fingerprint cannot be compared, so it counts as the same event).
 */
export function compareFingerprints(key: string, stored: unknown, fingerprint: string | null, options: RunOptions | undefined): "same" | "mismatch" {
  if (fingerprint === null || stored === null || stored === undefined) return "same";
  const text = Buffer.isBuffer(stored) ? stored.toString("utf8") : String(stored);
  if (text === fingerprint) return "same";
  return mismatchFor(key, options).status;
}

/** `{ status: "mismatch" }`, or a GuardMismatchError when the caller asked for one. */
export function mismatchFor(key: string, options: RunOptions | undefined): { status: "mismatch" } {
  if (options?.onMismatch === "throw") throw new GuardMismatchError(key);
  return { status: "mismatch" };
}

/** A claim table without the fingerprint column (a 0.1 table): PostgreSQL 42703, MySQL 1054, Prisma P2010/P2022 wrapping them. */
export function isMissingFingerprintColumn(err: unknown): boolean {
  let e: any = err;
  for (let i = 0; i < 4 && e; i++) {
    if (e.code === "42703" || e.code === "ER_BAD_FIELD_ERROR" || e.errno === 1054 || e.code === "P2022") return true;
    const original = e.meta?.driverAdapterError?.cause?.originalCode ?? e.meta?.code;
    if (original === "42703" || original === "1054" || original === 1054) return true;
    if (typeof e.message === "string" && /fingerprint/.test(e.message) && /(does not exist|Unknown column)/i.test(e.message)) return true;
    e = e.cause;
  }
  return false;
}

/** The error for `{ payload }` on a claim table that predates fingerprints. */
export function missingFingerprintColumn(key: string, table: string, cause: unknown): GuardError {
  return new GuardError(
    `@retrysafe/guard: run(${describeKey(key)}, fn, { payload }) needs a fingerprint column in ${table}: ` +
      `ALTER TABLE ${table} ADD COLUMN fingerprint ${table.startsWith("`") ? "CHAR(64) NULL" : "text"} (or call run() without payload)`,
    key,
    { cause },
  );
}
