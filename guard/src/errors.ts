/** The base class of every error the guard throws on purpose (`err instanceof GuardError`). */
export class GuardError extends Error {
  /** The key of the `run()` / `acceptEvent()` call, when there is one. */
  readonly key: string | undefined;
  constructor(message: string, key: string | undefined, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "GuardError";
    this.key = key;
    if (options && "cause" in options && (this as any).cause === undefined) (this as any).cause = options.cause;
  }
}

/**
 * The key cannot be stored or compared reliably (empty, whitespace only, U+0000, a lone
 * surrogate, too long). Thrown before any database or Redis call, so a retry with the
 * same key fails the same way: fix the key derivation.
 */
export class GuardKeyError extends GuardError {
  /** Why the key was refused, e.g. "contains U+0000". */
  readonly reason: string;
  constructor(key: unknown, reason: string) {
    super(`@retrysafe/guard: invalid key ${describeKey(key)}: ${reason}`, typeof key === "string" ? key : undefined);
    this.name = "GuardKeyError";
    this.reason = reason;
  }
}

/**
 * The callback returned but its work did not commit: the transaction was aborted by an
 * error the callback caught and ignored, the commit failed, or the claim vanished. Nothing
 * of this attempt is stored; answer 5xx so the provider retries. `cause` holds the
 * database's own error when there is one.
 */
export class GuardCommitError extends GuardError {
  constructor(key: string, detail: string, cause?: unknown) {
    super(`@retrysafe/guard: the work for key ${describeKey(key)} did not commit: ${detail}${causeText(cause)}`, key, { cause });
    this.name = "GuardCommitError";
  }
}

/** A store (Redis, a database) did not answer in time. The outcome of that command is unknown. */
export class GuardTimeoutError extends GuardError {
  /** What the guard was doing, e.g. "acquire the lease". */
  readonly operation: string;
  readonly timeoutMs: number | undefined;
  constructor(key: string | undefined, operation: string, timeoutMs: number | undefined, cause?: unknown) {
    const within = timeoutMs !== undefined ? ` within ${timeoutMs} ms` : "";
    const forKey = key !== undefined ? ` for key ${describeKey(key)}` : "";
    super(`@retrysafe/guard: no answer to "${operation}"${forKey}${within}${causeText(cause)}`, key, { cause });
    this.name = "GuardTimeoutError";
    this.operation = operation;
    this.timeoutMs = timeoutMs;
  }
}

/** The same key arrived with a different payload: the key derivation is wrong (two events share a key). */
export class GuardMismatchError extends GuardError {
  constructor(key: string) {
    super(`@retrysafe/guard: key ${describeKey(key)} was already used with a different payload (fingerprint mismatch)`, key);
    this.name = "GuardMismatchError";
  }
}

function causeText(cause: unknown): string {
  if (cause === undefined) return "";
  const e: any = cause;
  const code = e?.code ?? e?.cause?.code;
  const msg = e instanceof Error ? e.message || e.name : String(cause);
  return ` (${code ? `${code}: ` : ""}${msg})`;
}

/** JSON-quoted and cut at 80 characters, so an error message stays one readable line. */
export function describeKey(key: unknown): string {
  if (typeof key !== "string") return key === undefined ? "undefined" : `${JSON.stringify(key) ?? String(key)} (${typeof key})`;
  const shown = key.length > 80 ? `${key.slice(0, 80)}…` : key;
  return `${JSON.stringify(shown)}${key.length > 80 ? ` (${key.length} characters)` : ""}`;
}
