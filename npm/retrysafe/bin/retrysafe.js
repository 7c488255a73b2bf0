#!/usr/bin/env node
// Runs the native retrysafe binary from the platform package npm installed next to this
// one (an optional dependency per os/cpu/libc), with the caller's stdio and exit code.
"use strict";

const { spawnSync } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const manifest = require("../package.json");
const exe = process.platform === "win32" ? "retrysafe.exe" : "retrysafe";

function fail(message) {
  process.stderr.write(`retrysafe: ${message}\n`);
  process.exit(2);
}

// glibc's runtime version appears in Node's diagnostic report header; musl builds of Node
// (Alpine) have none. The report is only consulted on Linux, and without network details,
// which are slow to collect on hosts with many interfaces.
function isMusl() {
  if (process.platform !== "linux") return false;
  try {
    if (process.report && "excludeNetwork" in process.report) process.report.excludeNetwork = true;
    const header = process.report && process.report.getReport().header;
    if (header) return !header.glibcVersionRuntime;
  } catch {
    // No diagnostic report (a trimmed Node build): fall back to the dynamic loader on disk.
  }
  try {
    return fs.readdirSync("/lib").some((name) => name.startsWith("ld-musl-"));
  } catch {
    return false;
  }
}

function platformPackage() {
  const libc = isMusl() ? "-musl" : "";
  return `@retrysafe/cli-${process.platform}-${process.arch}${libc}`;
}

function binaryPath() {
  const override = process.env.RETRYSAFE_BINARY;
  if (override) {
    if (!fs.existsSync(override)) fail(`RETRYSAFE_BINARY=${override}: no such file`);
    return override;
  }
  const name = platformPackage();
  const known = Object.keys(manifest.optionalDependencies || {});
  if (!known.includes(name)) {
    fail(
      `no prebuilt binary for ${process.platform}-${process.arch}${isMusl() ? " (musl)" : ""}; ` +
        `prebuilt: ${known.map((k) => k.replace("@retrysafe/cli-", "")).join(", ")}. ` +
        "Build it with `cargo install --git https://github.com/retrysafe/retrysafe` and set RETRYSAFE_BINARY to its path.",
    );
  }
  let dir;
  try {
    dir = path.dirname(require.resolve(`${name}/package.json`));
  } catch {
    const pinned = `${name}@${manifest.optionalDependencies[name]}`;
    fail(
      `the platform package ${pinned} is not installed, so there is no binary to run.\n` +
        `  npm installs it as an optional dependency of retrysafe; a package-lock.json written on another\n` +
        "  platform (or with --no-optional / --omit=optional) leaves it out, which is npm's optional-dependency\n" +
        "  lockfile bug (https://github.com/npm/cli/issues/4828). Fix it with either:\n" +
        `    npm install --save-dev ${pinned}\n` +
        "    rm -rf node_modules package-lock.json && npm install\n" +
        "  or point RETRYSAFE_BINARY at a retrysafe binary.",
    );
  }
  const binary = path.join(dir, "bin", exe);
  if (!fs.existsSync(binary)) fail(`${name} is installed but holds no binary at ${binary}; reinstall it`);
  return binary;
}

const binary = binaryPath();
// RETRYSAFE_LAUNCHER tells the binary how it was started, so the commands it suggests work.
const env = { ...process.env, RETRYSAFE_LAUNCHER: "npm" };
const result = spawnSync(binary, process.argv.slice(2), { stdio: "inherit", env, windowsHide: true });
if (result.error) fail(`cannot run ${binary}: ${result.error.message}`);
if (result.signal) {
  // Die of the same signal, so a shell or CI runner sees what happened to the binary.
  process.kill(process.pid, result.signal);
}
process.exit(result.status === null ? 2 : result.status);
