/**
 * `retrysafe verify`'s preload (`NODE_OPTIONS=--require @retrysafe/guard/verify-preload`).
 *
 * Inert unless `retrysafe verify` started the process (RETRYSAFE_VERIFY_TRACE is set). Then it
 * - names the points a delivery passes (before/after the claim insert, before/after COMMIT,
 *   after each provider API call, before the response) and appends each hit to the trace file
 *   synchronously, so the trace survives a SIGKILL;
 * - injects the fault the environment names at the n-th hit of a point: `kill` (SIGKILL this
 *   process), `reset` (drop the connection instead of responding), `error` (fail the query);
 * - reroutes `https.request` and `globalThis.fetch` calls to provider API hosts to the recording
 *   fake in the verify process, which decides by the provider's idempotency rules whether each
 *   call is a new effect or a replay;
 * - for queue workers, names BullMQ's ack (its moveToFinished script, seen as ioredis runs it)
 *   `before-ack`/`after-ack`, and Redis claims (SET NX, a claiming EVAL) through ioredis and
 *   node-redis alike.
 */
import * as fs from "node:fs";
import * as http from "node:http";
import * as path from "node:path";
import { createRequire } from "node:module";

type AnyFn = (...args: any[]) => any;

const DEFAULT_CLAIM = String.raw`^\s*insert\s+into\s+[^\s(]*(processed|idempot|dedup|seen|webhook_?event|claim)`;

const env = process.env;
const traceFile = env.RETRYSAFE_VERIFY_TRACE;
const fakeUrl = env.RETRYSAFE_VERIFY_FAKE ? new URL(env.RETRYSAFE_VERIFY_FAKE) : undefined;
const effectHosts = (env.RETRYSAFE_VERIFY_EFFECT_HOSTS ?? "").split(",").map((h) => h.trim().toLowerCase()).filter(Boolean);
const fault = env.RETRYSAFE_VERIFY_FAULT_ACTION
  ? { action: env.RETRYSAFE_VERIFY_FAULT_ACTION, point: env.RETRYSAFE_VERIFY_FAULT_POINT ?? "", hit: Number(env.RETRYSAFE_VERIFY_FAULT_HIT ?? "1") || 1 }
  : undefined;
const claimPattern = new RegExp(env.RETRYSAFE_VERIFY_CLAIM || DEFAULT_CLAIM, "i");
const hits = new Map<string, number>();
// Drivers resolve from the app, not from this package; builtins are taken through require so
// they are the mutable CommonJS objects (an ES namespace is read-only).
const appRequire = createRequire(path.join(process.cwd(), "__retrysafe_verify__.js"));
const https: any = appRequire("node:https");

function trace(event: Record<string, unknown>): void {
  if (!traceFile) return;
  try {
    fs.appendFileSync(traceFile, JSON.stringify({ ...event, pid: process.pid, t: Date.now() }) + "\n");
  } catch {
    // A trace that cannot be written must not break the app; verify reports the point unreached.
  }
}

/** Records one hit of `point`; returns the fault's action when this is the hit to fault. */
function reach(point: string): string | undefined {
  const n = (hits.get(point) ?? 0) + 1;
  hits.set(point, n);
  trace({ ev: "hit", point, hit: n });
  if (!fault || fault.point !== point || fault.hit !== n) return undefined;
  trace({ ev: "fault", action: fault.action, point, hit: n });
  if (fault.action === "kill") process.kill(process.pid, "SIGKILL");
  return fault.action;
}

function transientDbError(): Error {
  const err = new Error("retrysafe verify: injected transient database fault") as Error & { code?: string };
  // 40001 (serialization_failure) is the transient error drivers and ORMs expect to retry.
  err.code = "40001";
  return err;
}

function hostMatches(pattern: string, host: string): boolean {
  const star = pattern.indexOf("*");
  if (star < 0) return pattern === host;
  const prefix = pattern.slice(0, star);
  const suffix = pattern.slice(star + 1);
  return host.length > prefix.length + suffix.length && host.startsWith(prefix) && host.endsWith(suffix);
}

function isEffectHost(host: string | undefined | null): host is string {
  if (!fakeUrl || !host) return false;
  const h = host.toLowerCase();
  return effectHosts.some((p) => hostMatches(p, h));
}

function sqlText(config: unknown): string {
  if (typeof config === "string") return config;
  if (config && typeof (config as { text?: unknown }).text === "string") return (config as { text: string }).text;
  return "";
}

/** The points a query passes before it is sent and after it succeeds. */
function queryPoints(text: string): { before: string[]; after: string[]; write: boolean } {
  const before: string[] = [];
  const after: string[] = [];
  if (claimPattern.test(text)) {
    before.push("before-claim");
    after.push("after-claim");
  }
  if (/^\s*(commit|end)\b/i.test(text)) {
    before.push("before-commit");
    after.push("after-commit");
  }
  return { before, after, write: /^\s*(insert|update|delete|merge|upsert)\b/i.test(text) || /^\s*with\b[\s\S]*\b(insert|update|delete)\b/i.test(text) };
}

const patched = new WeakSet<object>();

function patchPg(pg: any): void {
  const proto = pg?.Client?.prototype;
  if (!proto || patched.has(proto)) return;
  patched.add(proto);
  const original: AnyFn = proto.query;
  proto.query = function (this: unknown, ...args: any[]) {
    const text = sqlText(args[0]);
    const { before, after, write } = queryPoints(text);
    const callback = typeof args[args.length - 1] === "function" ? (args[args.length - 1] as AnyFn) : undefined;
    const failure = (write && reach("db-write") === "error") || before.some((p) => reach(p) === "error") ? transientDbError() : undefined;
    if (failure) {
      if (callback) {
        process.nextTick(() => callback(failure));
        return undefined;
      }
      return Promise.reject(failure);
    }
    const wait = callback ? undefined : holdRun();
    if (wait) {
      return wait.then(() => original.apply(this, args)).then((res: unknown) => {
        after.forEach((p) => reach(p));
        return res;
      });
    }
    if (after.length === 0) return original.apply(this, args);
    if (callback) {
      args[args.length - 1] = (err: unknown, res: unknown) => {
        if (!err) after.forEach((p) => reach(p));
        callback(err, res);
      };
      return original.apply(this, args);
    }
    const result = original.apply(this, args);
    if (result && typeof result.then === "function") {
      return result.then((res: unknown) => {
        after.forEach((p) => reach(p));
        return res;
      });
    }
    return result;
  };
}

/** What a Redis command is to verify: a claim, the guard's completion, a BullMQ ack or fetch. */
type RedisRole = {
  claim: boolean;
  commit: boolean;
  ack?: { jobId: string };
  fetch: boolean;
  finish?: { jobId: string };
  /** The worker's own bookkeeping (BullMQ's scripts, blocking waits), not the job's work. */
  internal: boolean;
};

const BLOCKING = new Set(["bzpopmin", "bzpopmax", "brpoplpush", "blmove", "brpop", "blpop", "xread", "xreadgroup", "info", "client", "ping", "select", "hello", "auth", "quit"]);

// An EVAL script that sets a key only if absent claims it (redisGuard's lease, hand-written
// SET NX scripts); one that turns a lease into a `done:` marker is the guard's commit.
const CLAIM_SCRIPT = /\bset['"]?\s*,[^\n]*['"]nx['"]/i;
const COMMIT_SCRIPT = /\bset['"]?\s*,[^\n]*['"]done:['"]/i;
// ioredis runs a script defined with defineCommand (BullMQ's) as EVALSHA of its SHA-1: the
// definitions are recorded here so the calls can be named.
const scriptNames = new Map<string, string>();
const scriptTexts = new Map<string, string>();

function recordScript(lua: unknown, name: string): void {
  if (typeof lua !== "string") return;
  const sha = (appRequire("node:crypto") as typeof import("node:crypto")).createHash("sha1").update(lua).digest("hex");
  scriptNames.set(sha, name);
  scriptTexts.set(sha, lua);
}

function redisRole(name: string, args: unknown[]): RedisRole {
  const role: RedisRole = { claim: false, commit: false, fetch: false, internal: BLOCKING.has(name) };
  if (name === "set") {
    role.claim = args.some((a) => String(a).toUpperCase() === "NX");
    return role;
  }
  if (name !== "eval" && name !== "evalsha") return role;
  const first = String(args[0] ?? "");
  const script = name === "eval" ? first : (scriptTexts.get(first) ?? "");
  const defined = name === "evalsha" ? (scriptNames.get(first) ?? "") : "";
  role.internal = defined !== "";
  if (defined.startsWith("moveToFinished")) {
    // BullMQ's moveToFinished: ARGV[1] the job id, ARGV[5] the target list.
    const argv = args.slice(2 + Number(args[1] ?? 0));
    const jobId = String(argv[0] ?? "");
    role.finish = { jobId };
    if (String(argv[4]) === "completed") role.ack = { jobId };
    return role;
  }
  if (defined.startsWith("moveToActive")) {
    role.fetch = true;
    return role;
  }
  role.claim = CLAIM_SCRIPT.test(script);
  role.commit = !role.claim && COMMIT_SCRIPT.test(script);
  return role;
}

// concurrent:N for a queue: each run of the job is held at the first thing it does (its first
// Redis command or query of its own, its first provider call, or its ack) until N runs are
// held (BullMQ gave the same job out again after its lock was lost) or the wait runs out,
// then all are released together, as the HTTP barrier releases N requests.
const holdRuns = fault?.action === "hold" ? fault.hit : 0;
let holdsOver = holdRuns < 2;
const held: Array<() => void> = [];
let heldTimer: NodeJS.Timeout | undefined;
let jobsStarted = 0;
let runsNotYetHeld = 0;

function releaseHeld(): void {
  holdsOver = true;
  if (heldTimer) clearTimeout(heldTimer);
  heldTimer = undefined;
  held.splice(0).forEach((release) => release());
}

/** A promise to wait on before a run's first operation, while runs are gathered; else undefined. */
function holdRun(): Promise<void> | undefined {
  if (holdsOver || runsNotYetHeld === 0) return undefined;
  runsNotYetHeld--;
  return new Promise<void>((resolve) => {
    held.push(resolve);
    trace({ ev: "held", n: held.length });
    if (held.length >= holdRuns) releaseHeld();
    else heldTimer ??= setTimeout(releaseHeld, 12000);
  });
}

function traceFetchedJob(reply: unknown): void {
  const fetched = Array.isArray(reply) && Array.isArray(reply[0]) && reply[0].length > 0;
  if (!fetched) return;
  trace({ ev: "req-start", n: ++jobsStarted, job: String((reply as unknown[])[1] ?? "") });
  if (!holdsOver) runsNotYetHeld++;
}

/** Names the points of one Redis command; returns what to do with its reply. */
function redisPoints(role: RedisRole): { failure?: Error; after: () => void; fetch: boolean; hold: boolean } {
  const after: string[] = [];
  let failure: Error | undefined;
  const hit = (point: string) => {
    if (reach(point) === "error") failure = transientDbError();
  };
  if (role.claim) {
    hit("before-claim");
    after.push("after-claim");
  }
  if (role.commit) {
    hit("before-commit");
    after.push("after-commit");
  }
  if (role.finish) trace({ ev: "req-end", job: role.finish.jobId });
  if (role.ack) {
    reach("before-ack");
    after.push("after-ack");
  }
  return { failure, after: () => after.forEach((p) => reach(p)), fetch: role.fetch, hold: !role.internal || !!role.ack };
}

function patchIoredis(ioredis: any): void {
  const Redis = ioredis?.Redis ?? ioredis?.default ?? ioredis;
  const proto = Redis?.prototype;
  if (!proto || typeof proto.sendCommand !== "function" || patched.has(proto)) return;
  patched.add(proto);
  const originalDefine: AnyFn | undefined = proto.defineCommand;
  if (typeof originalDefine === "function") {
    proto.defineCommand = function (this: unknown, name: string, definition: { lua?: string }) {
      recordScript(definition?.lua, String(name));
      return originalDefine.call(this, name, definition);
    };
  }
  const original: AnyFn = proto.sendCommand;
  proto.sendCommand = function (this: unknown, command: any, ...rest: any[]) {
    const name = String(command?.name ?? "").toLowerCase();
    const args: unknown[] = Array.isArray(command?.args) ? command.args : [];
    const points = redisPoints(redisRole(name, args));
    if (points.failure) {
      command.reject?.(points.failure);
      return command.promise ?? Promise.reject(points.failure);
    }
    const wait = points.hold ? holdRun() : undefined;
    const result = wait ? wait.then(() => original.call(this, command, ...rest)) : original.call(this, command, ...rest);
    if (result && typeof result.then === "function") {
      const observed = result.then((reply: unknown) => {
        points.after();
        if (points.fetch) traceFetchedJob(reply);
        return reply;
      });
      // A command whose reply nobody awaits must not become an unhandled rejection here.
      observed.catch(() => undefined);
      return observed;
    }
    return result;
  };
}

/** node-redis v4 and v5: every command, typed or `sendCommand`, goes through the queue's addCommand. */
function patchNodeRedisQueue(queueModule: any): void {
  const Queue = queueModule?.default ?? queueModule;
  const proto = Queue?.prototype;
  if (!proto || typeof proto.addCommand !== "function" || patched.has(proto)) return;
  patched.add(proto);
  const original: AnyFn = proto.addCommand;
  proto.addCommand = function (this: unknown, args: unknown[], ...rest: any[]) {
    const list = Array.isArray(args) ? args : [];
    const points = redisPoints(redisRole(String(list[0] ?? "").toLowerCase(), list.slice(1)));
    if (points.failure) return Promise.reject(points.failure);
    const wait = points.hold ? holdRun() : undefined;
    const result = wait ? wait.then(() => original.call(this, args, ...rest)) : original.call(this, args, ...rest);
    if (result && typeof result.then === "function") {
      return result.then((reply: unknown) => {
        points.after();
        return reply;
      });
    }
    return result;
  };
}

/**
 * node-redis v5 writes a queued command only when `sendCommand` schedules the write right after
 * queueing it: a command queued later, by a hold released in the queue, would sit unwritten.
 * So a run is held here, before `sendCommand`, and the queue's own hold finds the gathering over.
 */
function patchNodeRedisClient(clientModule: any): void {
  const Client = clientModule?.default ?? clientModule;
  const proto = Client?.prototype;
  if (!proto || typeof proto.sendCommand !== "function" || patched.has(proto)) return;
  patched.add(proto);
  const original: AnyFn = proto.sendCommand;
  proto.sendCommand = function (this: unknown, args: unknown[], ...rest: any[]) {
    const list = Array.isArray(args) ? args : [];
    const role = redisRole(String(list[0] ?? "").toLowerCase(), list.slice(1));
    const wait = !role.internal || role.ack ? holdRun() : undefined;
    return wait ? wait.then(() => original.call(this, args, ...rest)) : original.call(this, args, ...rest);
  };
}

function patchNodeRedis(): void {
  // The queue module is internal to @redis/client; it is found next to the package's entry,
  // from the app or from the `redis` package that depends on it.
  const bases = [appRequire];
  try {
    bases.push(createRequire(appRequire.resolve("redis")));
  } catch {
    // No `redis` package: @redis/client may still be installed directly.
  }
  for (const base of bases) {
    try {
      const entry = base.resolve("@redis/client");
      const clientDir = path.join(path.dirname(entry), "lib", "client");
      patchNodeRedisQueue(base(path.join(clientDir, "commands-queue.js")));
      patchNodeRedisClient(base(path.join(clientDir, "index.js")));
      return;
    } catch {
      // Not installed from here.
    }
  }
}

function patchServer(): void {
  const originalEmit: AnyFn = http.Server.prototype.emit;
  let requests = 0;
  const requestNumber = new WeakMap<object, number>();
  http.Server.prototype.emit = function (this: http.Server, event: string, ...args: any[]) {
    if (event === "request") {
      const n = ++requests;
      trace({ ev: "req-start", n });
      // The handler's own work runs from the body's arrival to the answer: two requests
      // whose headers arrived together did not overlap if each was answered in the tick
      // its body completed. An `end` listener does not start the body flowing.
      (args[0] as http.IncomingMessage | undefined)?.once("end", () => trace({ ev: "req-body", n }));
      const res = args[1] as http.ServerResponse | undefined;
      if (res) requestNumber.set(res, n);
      res?.once("close", () => trace({ ev: "req-end", n }));
    }
    return originalEmit.call(this, event, ...args);
  } as typeof http.Server.prototype.emit;

  const responded = new WeakSet<object>();
  const originalEnd: AnyFn = http.ServerResponse.prototype.end;
  http.ServerResponse.prototype.end = function (this: http.ServerResponse, ...args: any[]) {
    if (!responded.has(this)) {
      responded.add(this);
      const n = requestNumber.get(this);
      if (n !== undefined) trace({ ev: "req-answer", n });
      if (reach("before-response") === "reset") {
        // The work is done; the provider never sees the answer.
        this.socket?.destroy();
        return this;
      }
    }
    return originalEnd.apply(this, args);
  } as typeof http.ServerResponse.prototype.end;
}

function patchHttpsRequest(): void {
  const wrap = (original: AnyFn, isGet: boolean): AnyFn =>
    function (this: unknown, ...args: any[]) {
      let url: URL | undefined;
      let options: Record<string, any> = {};
      let callback: AnyFn | undefined;
      for (const a of args) {
        if (typeof a === "string") url = new URL(a);
        else if (a instanceof URL) url = a;
        else if (typeof a === "function") callback = a;
        else if (a && typeof a === "object") options = a;
      }
      const host = (options.hostname ?? (typeof options.host === "string" ? options.host.replace(/:\d+$/, "") : undefined) ?? url?.hostname) as string | undefined;
      if (!isEffectHost(host) || !fakeUrl) return original.apply(this, args);
      const requestPath = options.path ?? (url ? url.pathname + url.search : "/");
      const headers: Record<string, any> = {};
      const given = options.headers;
      if (Array.isArray(given)) {
        for (let i = 0; i + 1 < given.length; i += 2) headers[String(given[i])] = given[i + 1];
      } else if (given) {
        Object.assign(headers, given);
      }
      for (const k of Object.keys(headers)) if (k.toLowerCase() === "host") delete headers[k];
      headers["x-retrysafe-host"] = host;
      const rerouted = {
        method: options.method ?? (url ? "GET" : undefined),
        path: requestPath,
        headers,
        hostname: fakeUrl.hostname,
        port: Number(fakeUrl.port),
        protocol: "http:",
        timeout: options.timeout,
        signal: options.signal,
      };
      const req = http.request(rerouted, callback);
      req.prependListener("response", () => reach(`after-effect:${host}`));
      if (isGet) req.end();
      return req;
    };
  https.request = wrap(https.request, false);
  https.get = wrap(https.get, true);
}

function patchFetch(): void {
  const original = (globalThis as any).fetch as AnyFn | undefined;
  if (typeof original !== "function" || !fakeUrl) return;
  (globalThis as any).fetch = async function (input: any, init?: any) {
    const href = typeof input === "string" ? input : input instanceof URL ? input.href : input?.url;
    let target: URL | undefined;
    try {
      target = href ? new URL(href) : undefined;
    } catch {
      target = undefined;
    }
    if (!target || !isEffectHost(target.hostname)) return original(input, init);
    const RequestClass = (globalThis as any).Request;
    const HeadersClass = (globalThis as any).Headers;
    const request = new RequestClass(input, init);
    const headers = new HeadersClass(request.headers);
    headers.set("x-retrysafe-host", target.hostname);
    const body = request.method === "GET" || request.method === "HEAD" ? undefined : await request.arrayBuffer();
    const rerouted = new URL(target.pathname + target.search, fakeUrl);
    await holdRun();
    const response = await original(rerouted.href, { method: request.method, headers, body, signal: request.signal });
    reach(`after-effect:${target.hostname}`);
    return response;
  };
}

function patchLoadedModules(): void {
  const tryPatch = (name: string, patch: (m: any) => void) => {
    try {
      patch(appRequire(name));
    } catch {
      // Not installed in this app: nothing to patch.
    }
  };
  tryPatch("pg", patchPg);
  tryPatch("ioredis", patchIoredis);
  patchNodeRedis();
  // A driver loaded later from another directory (a workspace package) is patched on load.
  const nodeModule = appRequire("node:module");
  const originalLoad: AnyFn = nodeModule._load;
  nodeModule._load = function (this: unknown, request: string, ...rest: any[]) {
    const exported = originalLoad.call(this, request, ...rest);
    if (request === "pg") patchPg(exported);
    else if (request === "ioredis") patchIoredis(exported);
    else if (request === "redis" || request === "@redis/client") patchNodeRedis();
    return exported;
  };
  nodeModule.syncBuiltinESMExports?.();
}

if (traceFile) {
  trace({ ev: "start", argv: process.argv.slice(1, 3) });
  patchServer();
  patchHttpsRequest();
  patchFetch();
  patchLoadedModules();
}
