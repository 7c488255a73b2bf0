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
 *   call is a new effect or a replay.
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

function patchIoredis(ioredis: any): void {
  const Redis = ioredis?.Redis ?? ioredis?.default ?? ioredis;
  const proto = Redis?.prototype;
  if (!proto || typeof proto.sendCommand !== "function" || patched.has(proto)) return;
  patched.add(proto);
  const original: AnyFn = proto.sendCommand;
  proto.sendCommand = function (this: unknown, command: any, ...rest: any[]) {
    const name = String(command?.name ?? "").toLowerCase();
    const args: unknown[] = Array.isArray(command?.args) ? command.args : [];
    const isClaim = name === "set" && args.some((a) => String(a).toUpperCase() === "NX");
    if (isClaim) {
      reach("before-claim");
      command.promise?.then?.(() => reach("after-claim"), () => undefined);
    }
    return original.call(this, command, ...rest);
  };
}

function patchServer(): void {
  const originalEmit: AnyFn = http.Server.prototype.emit;
  let requests = 0;
  http.Server.prototype.emit = function (this: http.Server, event: string, ...args: any[]) {
    if (event === "request") {
      const n = ++requests;
      trace({ ev: "req-start", n });
      const res = args[1] as http.ServerResponse | undefined;
      res?.once("close", () => trace({ ev: "req-end", n }));
    }
    return originalEmit.call(this, event, ...args);
  } as typeof http.Server.prototype.emit;

  const responded = new WeakSet<object>();
  const originalEnd: AnyFn = http.ServerResponse.prototype.end;
  http.ServerResponse.prototype.end = function (this: http.ServerResponse, ...args: any[]) {
    if (!responded.has(this)) {
      responded.add(this);
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
  // A driver loaded later from another directory (a workspace package) is patched on load.
  const nodeModule = appRequire("node:module");
  const originalLoad: AnyFn = nodeModule._load;
  nodeModule._load = function (this: unknown, request: string, ...rest: any[]) {
    const exported = originalLoad.call(this, request, ...rest);
    if (request === "pg") patchPg(exported);
    else if (request === "ioredis") patchIoredis(exported);
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
