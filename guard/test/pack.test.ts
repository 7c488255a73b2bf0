// npm pack -> install the tarball into a temp app -> require() and import() it,
// and type-check both module kinds against the shipped declarations.
import { execFile, execFileSync } from "node:child_process";
import { promisify } from "node:util";
import { mkdtempSync, readdirSync, rmSync, writeFileSync, existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { GUARD_DIR } from "./helpers.ts";

const tmp = mkdtempSync(path.join(os.tmpdir(), "retrysafe-guard-pack-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

// async, so the test worker's event loop keeps answering vitest while npm and tsc run
// (a minute-long execFileSync makes vitest's worker RPC time out on a loaded machine)
const run = promisify(execFile);
const npm = async (args: string[], cwd: string) =>
  (await run("npm", args, { cwd, encoding: "utf8", env: { ...process.env, npm_config_audit: "false", npm_config_fund: "false", npm_config_update_notifier: "false" } })).stdout;

describe("npm pack", () => {
  it("produces a tarball that installs, require()s, import()s and type-checks", { timeout: 240_000 }, async () => {
    // --ignore-scripts: dist/ is built by `npm test` before this runs
    await npm(["pack", "--ignore-scripts", "--pack-destination", tmp], GUARD_DIR);
    const tgz = readdirSync(tmp).find((f) => f.endsWith(".tgz"));
    expect(tgz).toBeDefined();
    const listing = execFileSync("tar", ["-tzf", path.join(tmp, tgz!)], { encoding: "utf8" });
    for (const f of [
      "package/dist/esm/index.js", "package/dist/esm/index.d.ts", "package/dist/cjs/index.js", "package/dist/cjs/index.d.ts",
      "package/dist/cjs/package.json", "package/sql/processed_events.sql", "package/sql/outbox.sql", "package/sql/inbox.sql", "package/sql/mysql.sql", "package/prisma/models.prisma",
      "package/README.md", "package/package.json",
    ]) expect(listing).toContain(f);
    expect(listing).not.toContain("package/test/");
    expect(listing).not.toContain("package/src/");

    const app = path.join(tmp, "app");
    execFileSync("mkdir", ["-p", app]);
    writeFileSync(path.join(app, "package.json"), JSON.stringify({ name: "app", version: "1.0.0", private: true }));
    await npm(["install", "--no-package-lock", "--ignore-scripts", path.join(tmp, tgz!)], app);
    expect(existsSync(path.join(app, "node_modules/@retrysafe/guard/dist/esm/index.js"))).toBe(true);
    // no runtime dependencies came along
    expect(readdirSync(path.join(app, "node_modules")).filter((d) => !d.startsWith("."))).toEqual(["@retrysafe"]);

    const names = [
      "createInbox", "createOutbox", "drizzleGuard", "eventKey", "postgresGuard", "prismaGuard", "redisGuard",
      "GuardCommitError", "GuardKeyError", "GuardTimeoutError", "statusFor", "toResponse", "mysqlGuard", "reconcile",
    ];
    const cjs = execFileSync(
      process.execPath,
      ["-e", `const g = require("@retrysafe/guard"); console.log(JSON.stringify([Object.keys(g).sort(), g.eventKey.stripe({ id: "evt_1" })]))`],
      { cwd: app, encoding: "utf8" },
    );
    const esm = execFileSync(
      process.execPath,
      ["--input-type=module", "-e", `const g = await import("@retrysafe/guard"); console.log(JSON.stringify([Object.keys(g).sort(), g.eventKey.github({ "x-github-delivery": "d" })]))`],
      { cwd: app, encoding: "utf8" },
    );
    const [cjsKeys, cjsKey] = JSON.parse(cjs);
    const [esmKeys, esmKey] = JSON.parse(esm);
    for (const n of names) {
      expect(cjsKeys).toContain(n);
      expect(esmKeys).toContain(n);
    }
    expect(cjsKey).toBe("stripe:evt_1");
    expect(esmKey).toBe("github:d");
    // the SQL ships and is reachable through exports
    const sqlPath = execFileSync(process.execPath, ["-p", `require.resolve("@retrysafe/guard/sql/processed_events.sql")`], { cwd: app, encoding: "utf8" });
    expect(sqlPath.trim()).toMatch(/processed_events\.sql$/);

    // the declarations resolve for both `import` and `require` consumers (tsc, NodeNext)
    const src = `import { postgresGuard, eventKey, type GuardResult } from "@retrysafe/guard";
const pool = { connect: async () => ({ query: async (_sql: string) => ({ rowCount: 1, rows: [] as unknown[] }), release() {} }) };
export async function handler(): Promise<number> {
  const guard = postgresGuard(pool);
  const result: GuardResult<number> = await guard.run(eventKey.stripe({ id: "evt_1" }), async (tx) => { await tx.query("select 1"); return 1; });
  if (result.status === "in-progress") return 409;
  return result.status === "processed" ? result.result : 200;
}
`;
    writeFileSync(path.join(app, "esm.mts"), src);
    writeFileSync(path.join(app, "cjs.cts"), src);
    const tsc = path.join(GUARD_DIR, "node_modules/typescript/bin/tsc");
    writeFileSync(
      path.join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { noEmit: true, strict: true, module: "nodenext", moduleResolution: "nodenext", target: "es2022", types: [] },
        files: ["esm.mts", "cjs.cts"],
      }),
    );
    try {
      await run(process.execPath, [tsc, "-p", "."], { cwd: app, encoding: "utf8" });
    } catch (err: any) {
      throw new Error(`tsc failed on the installed package:\n${err.stdout}${err.stderr}`);
    }
  });
});
