#!/usr/bin/env node
// The npm packages' one source of truth is Cargo.toml's version and npm/platforms.json:
//   node npm/build.mjs sync                      write that version into npm/retrysafe and guard/
//   node npm/build.mjs check                     fail when any package is out of lockstep
//   node npm/build.mjs launcher --out DIR        stage the `retrysafe` package (with the schema)
//   node npm/build.mjs platform --target T --binary PATH --out DIR
//                                                stage the platform package for rust target T
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const platforms = JSON.parse(fs.readFileSync(path.join(root, "npm/platforms.json"), "utf8"));
const launcherManifest = path.join(root, "npm/retrysafe/package.json");
const guardManifest = path.join(root, "guard/package.json");

function die(message) {
  process.stderr.write(`npm/build.mjs: ${message}\n`);
  process.exit(2);
}

function crateVersion() {
  const cargo = fs.readFileSync(path.join(root, "Cargo.toml"), "utf8");
  const section = cargo.split(/^\[/m).find((s) => s.startsWith("package]"));
  const match = section && section.match(/^version\s*=\s*"([^"]+)"/m);
  if (!match) die("Cargo.toml: no [package] version");
  return match[1];
}

function readJson(file) {
  try {
    return JSON.parse(fs.readFileSync(file, "utf8"));
  } catch (e) {
    die(`${path.relative(root, file)}: ${e.message}`);
  }
}

function writeJson(file, value) {
  fs.writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
}

/** The launcher's manifest as it must be for `version`. */
function expectedLauncher(current, version) {
  const optionalDependencies = Object.fromEntries(platforms.map((p) => [p.package, version]));
  return { ...current, version, optionalDependencies };
}

function problems(version) {
  const found = [];
  const launcher = readJson(launcherManifest);
  if (JSON.stringify(launcher) !== JSON.stringify(expectedLauncher(launcher, version))) {
    found.push(
      `npm/retrysafe/package.json: version and optionalDependencies must all be exactly ${version} (one per npm/platforms.json entry)`,
    );
  }
  const workflow = fs.readFileSync(path.join(root, ".github/workflows/release.yml"), "utf8");
  for (const p of platforms) {
    if (!workflow.includes(`target: ${p.rustTarget},`)) {
      found.push(`.github/workflows/release.yml: the build matrix has no ${p.rustTarget} (${p.package})`);
    }
  }
  const guard = readJson(guardManifest);
  if (guard.version !== version) found.push(`guard/package.json: version ${guard.version}, crate ${version}`);
  return found;
}

function optionOf(args, name) {
  const i = args.indexOf(`--${name}`);
  if (i < 0 || !args[i + 1]) die(`--${name} is required`);
  return args[i + 1];
}

function stageLauncher(args) {
  const problemsFound = problems(crateVersion());
  if (problemsFound.length) die(problemsFound.join("\n"));
  const dir = path.join(path.resolve(optionOf(args, "out")), "retrysafe");
  fs.rmSync(dir, { recursive: true, force: true });
  fs.cpSync(path.join(root, "npm/retrysafe"), dir, { recursive: true });
  fs.chmodSync(path.join(dir, "bin/retrysafe.js"), 0o755);
  // `retrysafe init` points `$schema` at node_modules/retrysafe/retrysafe.schema.json.
  fs.copyFileSync(path.join(root, "retrysafe.schema.json"), path.join(dir, "retrysafe.schema.json"));
  process.stdout.write(`${dir}\n`);
}

function stagePlatform(args) {
  const option = (name) => optionOf(args, name);
  const target = option("target");
  const binary = path.resolve(option("binary"));
  const out = path.resolve(option("out"));
  const platform = platforms.find((p) => p.rustTarget === target);
  if (!platform) die(`platform: ${target} is not in npm/platforms.json`);
  if (!fs.existsSync(binary)) die(`platform: ${binary}: no such file`);
  const version = crateVersion();
  const dir = path.join(out, platform.package.replace("@retrysafe/", ""));
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, "bin"), { recursive: true });
  const exe = platform.os === "win32" ? "retrysafe.exe" : "retrysafe";
  fs.copyFileSync(binary, path.join(dir, "bin", exe));
  fs.chmodSync(path.join(dir, "bin", exe), 0o755);
  const libc = platform.libc ? ` (${platform.libc})` : "";
  const manifest = {
    name: platform.package,
    version,
    description: `The retrysafe binary for ${platform.os} ${platform.cpu}${libc}. Install \`retrysafe\`, not this package.`,
    license: "MIT",
    repository: { type: "git", url: "git+https://github.com/retrysafe/retrysafe.git" },
    os: [platform.os],
    cpu: [platform.cpu],
    ...(platform.libc ? { libc: [platform.libc] } : {}),
    files: [`bin/${exe}`],
    publishConfig: { access: "public", provenance: true },
  };
  writeJson(path.join(dir, "package.json"), manifest);
  fs.writeFileSync(
    path.join(dir, "README.md"),
    `# ${platform.package}\n\nThe \`retrysafe\` binary built for \`${target}\`. The \`retrysafe\` package installs it as an optional dependency and runs it; install that one.\n`,
  );
  process.stdout.write(`${dir}\n`);
}

const [command, ...rest] = process.argv.slice(2);
switch (command) {
  case "version":
    process.stdout.write(`${crateVersion()}\n`);
    break;
  case "sync": {
    const version = crateVersion();
    writeJson(launcherManifest, expectedLauncher(readJson(launcherManifest), version));
    const guard = readJson(guardManifest);
    writeJson(guardManifest, { ...guard, version });
    break;
  }
  case "check": {
    const found = problems(crateVersion());
    if (found.length) die(`${found.join("\n")}\n(run \`node npm/build.mjs sync\`)`);
    break;
  }
  case "launcher":
    stageLauncher(rest);
    break;
  case "platform":
    stagePlatform(rest);
    break;
  default:
    die("usage: build.mjs version | sync | check | launcher --out DIR | platform --target T --binary PATH --out DIR");
}
