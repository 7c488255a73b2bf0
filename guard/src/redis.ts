import { randomBytes } from "node:crypto";
import type { Guard, GuardRunResult } from "./types.js";
import { fingerprintFor, mismatchFor, type RunOptions } from "./fingerprint.js";
import { describeKey, GuardError, GuardTimeoutError } from "./errors.js";
import { checkKey } from "./util.js";

export interface RedisGuardOptions {
  /** How long the completed marker is kept, in seconds (default 7 days). Values above 2^31 ms work. */
  ttlSeconds?: number;
  /** How long an in-progress lease lives without renewal, in seconds (default 30; fractions allowed). */
  leaseSeconds?: number;
  /** Renew the lease while the callback runs (default true), every leaseSeconds/3. */
  renew?: boolean;
  /** Prefix for the Redis keys (default `retrysafe:`). */
  prefix?: string;
  /** Called when this attempt finds its lease was taken over (renewal or completion failed). */
  onLeaseLost?: (key: string) => void;
  /**
   * How long one Redis command may take before `run()` gives up with a GuardTimeoutError
   * (default 5000 ms). Without it, a client's own reconnect policy decides: ioredis and
   * node-redis v4 queue commands during an outage for a minute or more.
   */
  commandTimeoutMs?: number;
}

/** ioredis (`Redis`, `Cluster`) or node-redis v4/v5/v6 (`createClient()`), connected. */
export type RedisLike = object;

const DAY = 24 * 60 * 60;

// KEYS[1] = key, ARGV[1] = token, ARGV[2] = lease ms, ARGV[3] = payload fingerprint or ''.
// SET key lease:token NX PX lease, atomically with the lookup. A token ends in
// ".<fingerprint>" when the claim was made with a payload: a holder or marker of another
// payload is a mismatch, whatever its state.
const ACQUIRE = `
local v = redis.call('GET', KEYS[1])
if v then
  local stored = string.match(v, '%.(%x+)$')
  if ARGV[3] ~= '' and stored and stored ~= ARGV[3] then return 'mismatch' end
  if string.sub(v, 1, 5) == 'done:' then return 'duplicate' end
  return 'in-progress'
end
redis.call('SET', KEYS[1], 'lease:' .. ARGV[1], 'NX', 'PX', ARGV[2])
return 'acquired'`;

// compare-and-set: extend the lease if we still own it (1); if it expired and nobody took
// it (the event loop was blocked past the lease), take it back (2); else it is lost (0)
const RENEW = `
local v = redis.call('GET', KEYS[1])
if v == 'lease:' .. ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not v then
  redis.call('SET', KEYS[1], 'lease:' .. ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0`;

// compare-and-set: lease:token -> done:token for ttl ms if we still own the lease (1), or
// if the lease expired and nobody took over (2): the callback did finish, so the next
// delivery must see it as done. Another owner's lease or marker is left alone (0).
const COMPLETE = `
local v = redis.call('GET', KEYS[1])
if v == 'lease:' .. ARGV[1] then
  redis.call('SET', KEYS[1], 'done:' .. ARGV[1], 'PX', ARGV[2])
  return 1
end
if not v then
  redis.call('SET', KEYS[1], 'done:' .. ARGV[1], 'PX', ARGV[2])
  return 2
end
return 0`;

// compare-and-delete: release only our own lease
const RELEASE = `
if redis.call('GET', KEYS[1]) == 'lease:' .. ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`;

type Eval = (script: string, key: string, args: string[]) => Promise<unknown>;

/** Detect ioredis vs node-redis at runtime and return an EVAL function for it. */
export function redisEval(client: any): Eval {
  if (!client || typeof client !== "object") throw new TypeError("@retrysafe/guard: redisGuard(redis) needs an ioredis or node-redis client");
  // node-redis v4+: createClient() has isOpen and sendCommand(string[])
  if ("isOpen" in client && typeof client.sendCommand === "function") {
    return (script, key, args) => client.sendCommand(["EVAL", script, "1", key, ...args]);
  }
  // ioredis: Redis and Cluster have call(command, ...args)
  if (typeof client.call === "function") {
    return (script, key, args) => client.call("EVAL", script, 1, key, ...args);
  }
  if (typeof client.eval === "function") {
    return (script, key, args) => client.eval(script, 1, key, ...args);
  }
  throw new TypeError("@retrysafe/guard: redisGuard(redis): unrecognised client (expected ioredis or node-redis)");
}

function positive(name: string, v: number): number {
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0) {
    throw new RangeError(`@retrysafe/guard: redisGuard ${name} must be a positive number of seconds, got ${v}`);
  }
  return v;
}

/**
 * A lease guard for work that cannot roll back (emails, API calls). `run(key, fn)`:
 * - `SET key lease:<token> NX PX lease` (in one Lua script with the lookup);
 *   another attempt holding it gives `in-progress`, a completed marker gives `duplicate`;
 * - renews the lease while `fn` runs; on success swaps it for `done:<token>` kept
 *   `ttlSeconds`; on failure deletes it (and rethrows);
 * - every renew/complete/release compares the owner token, so a stale owner whose
 *   lease expired cannot complete or release another attempt's lease.
 * The callback gets no transaction (`undefined`).
 */
export function redisGuard(redis: RedisLike, options: RedisGuardOptions = {}): Guard<undefined> {
  const evalScript = redisEval(redis);
  const ttlMs = Math.round(positive("ttlSeconds", options.ttlSeconds ?? 7 * DAY) * 1000);
  const leaseMs = Math.max(1, Math.round(positive("leaseSeconds", options.leaseSeconds ?? 30) * 1000));
  const prefix = options.prefix ?? "retrysafe:";
  const renew = options.renew ?? true;
  const commandTimeoutMs = options.commandTimeoutMs ?? 5000;
  if (typeof commandTimeoutMs !== "number" || !Number.isFinite(commandTimeoutMs) || commandTimeoutMs <= 0) {
    throw new RangeError(`@retrysafe/guard: redisGuard commandTimeoutMs must be a positive number of milliseconds, got ${commandTimeoutMs}`);
  }

  /** One script call, bounded by commandTimeoutMs; client errors keep their message or get one. */
  function call(operation: string, key: string, script: string, rkey: string, args: string[]): Promise<unknown> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new GuardTimeoutError(key, `Redis: ${operation}`, commandTimeoutMs)), commandTimeoutMs);
    });
    const reply = Promise.resolve()
      .then(() => evalScript(script, rkey, args))
      .catch((err: any) => {
        if (/timeout/i.test(String(err?.name)) || err?.code === "ETIMEDOUT") throw new GuardTimeoutError(key, `Redis: ${operation}`, undefined, err);
        const why = err instanceof Error && err.message ? err.message : `${err?.name ?? typeof err} with no message`;
        throw new GuardError(`@retrysafe/guard: Redis failed to ${operation} for key ${describeKey(key)}: ${why}`, key, { cause: err });
      });
    return Promise.race([reply, timeout]).finally(() => clearTimeout(timer));
  }

  return {
    async run<T>(key: string, fn: (tx: undefined) => Promise<T> | T, runOptions?: RunOptions): Promise<GuardRunResult<T>> {
      checkKey(key);
      const fingerprint = fingerprintFor(runOptions);
      const rkey = prefix + key;
      // the fingerprint rides in the owner token, so every compare-and-set keeps fencing on one string
      const token = randomBytes(16).toString("hex") + (fingerprint === null ? "" : `.${fingerprint}`);
      const got = String(await call("acquire the lease", key, ACQUIRE, rkey, [token, String(leaseMs), fingerprint ?? ""]));
      if (got === "mismatch") return mismatchFor(key, runOptions);
      if (got === "duplicate") return { status: "duplicate" };
      if (got === "in-progress") return { status: "in-progress" };
      if (got !== "acquired") throw new GuardError(`@retrysafe/guard: unexpected reply from Redis for key ${describeKey(key)}: ${got}`, key);

      let lost = false;
      const markLost = () => {
        if (!lost) {
          lost = true;
          options.onLeaseLost?.(key);
        }
      };
      let timer: ReturnType<typeof setInterval> | undefined;
      if (renew) {
        let renewing = false;
        timer = setInterval(() => {
          if (renewing || lost) return;
          renewing = true;
          call("renew the lease", key, RENEW, rkey, [token, String(leaseMs)])
            .then((r) => {
              if (Number(r) === 0) markLost();
            })
            .catch(() => {
              /* a transient Redis error: try again on the next tick */
            })
            .finally(() => {
              renewing = false;
            });
        }, Math.max(1, Math.floor(leaseMs / 3)));
        timer.unref?.();
      }

      let result: T;
      try {
        result = await fn(undefined);
      } catch (err) {
        if (timer) clearInterval(timer);
        try {
          await call("release the lease", key, RELEASE, rkey, [token]);
        } catch {
          /* the lease will expire on its own */
        }
        throw err;
      }
      if (timer) clearInterval(timer);
      let done: number;
      try {
        done = Number(await call("record completion", key, COMPLETE, rkey, [token, String(ttlMs)]));
      } catch {
        // the callback ran; only its marker is missing, and a redelivery may run it again
        return { status: "processed", result, unrecorded: true };
      }
      if (done === 0) markLost();
      return lost ? { status: "processed", result, leaseLost: true } : { status: "processed", result };
    },
  } as Guard<undefined>;
}
