import type { RunOptions } from "./fingerprint.js";

/** The result of `guard.run(key, fn)`. Every guard returns the same union. */
export type GuardResult<T> =
  | {
      status: "processed";
      result: T;
      /** lease guards only: another attempt took the lease over while the callback ran */
      leaseLost?: boolean;
      /** lease guards only: the callback ran but Redis did not take the completed marker; a redelivery may run it again */
      unrecorded?: boolean;
    }
  | { status: "duplicate" }
  | { status: "in-progress" };

/**
 * The result of `guard.run(key, fn, { payload })`: also `mismatch` when the key is already
 * claimed with another payload's fingerprint (the callback did not run; answer 422).
 */
export type GuardRunResult<T> = GuardResult<T> | { status: "mismatch" };

/** A guard: `run(key, fn)` claims `key` and runs `fn` at most once per key. */
export interface Guard<Tx> {
  run<T>(key: string, fn: (tx: Tx) => Promise<T> | T): Promise<GuardResult<T>>;
  /** With `{ payload }`: the payload's fingerprint is stored with the claim and compared on duplicates. */
  run<T>(key: string, fn: (tx: Tx) => Promise<T> | T, options?: RunOptions): Promise<GuardRunResult<T>>;
}
