#!/usr/bin/env node
// Packs a built checkout (npm ci && npm run build done) into one npm package, the `chaos-core`
// command line: `npm install -g chaos-core-<version>.tgz` (or `--prefix DIR`) puts `chaos-core` on
// the PATH, for any directory, with no clone beside it.
//
// The files are the ones the container image runs (deploy/stage-app.sh --no-node-modules: each
// workspace's package.json, dist/ and the standalone's bin/; chaoscore.lock with its note and
// history at the root, where the edge looks for it: kit's appRoot). The workspaces go under
// lib/node_modules/@chaos-core/, where Node finds `@chaos-core/kit` from any of them as it does in a
// checkout. They are plain files of the package, not bundleDependencies: npm takes everything a
// bundled package depends on to be in the tarball too, and then installs none of it.
// Their third-party dependencies are the package's own, installed by npm from the registry (or its
// cache) at the versions package-lock.json pins for them. (npm reads no npm-shrinkwrap.json from a
// tarball, so what those depend on in turn resolves within its ranges, as for any npm package.)
//   node scripts/pack.mjs [--out DIR]     (npm run pack; DIR defaults to the current directory)
// Prints the tarball's path.
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

/** Where the workspaces go in the package. */
const WORKSPACES_DIR = "lib/node_modules";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const { values } = parseArgs({ options: { out: { type: "string" } } });
const out = resolve(values.out ?? process.cwd());

const readJson = (file) => JSON.parse(readFileSync(file, "utf8"));
const rootPackage = readJson(join(root, "package.json"));
const lock = readJson(join(root, "package-lock.json"));

const work = mkdtempSync(join(tmpdir(), "chaos-core-pack-"));
try {
  const stage = join(work, "package");
  execFileSync("sh", [join(root, "deploy/stage-app.sh"), "--no-node-modules", root, stage], { stdio: ["ignore", "ignore", "inherit"] });

  const workspaces = rootPackage.workspaces.map((path) => ({ path, manifest: readJson(join(stage, path, "package.json")) }));
  mkdirSync(join(stage, WORKSPACES_DIR, "@chaos-core"), { recursive: true });
  for (const ws of workspaces) renameSync(join(stage, ws.path), join(stage, WORKSPACES_DIR, ws.manifest.name));
  // The image's own files, and the folder the workspaces left.
  for (const left of ["services", "deploy", "package-lock.json"]) rmSync(join(stage, left), { recursive: true, force: true });
  copyFileSync(join(root, "README.md"), join(stage, "README.md"));

  const standalone = workspaces.find((ws) => ws.path === "services/standalone").manifest;
  const manifest = {
    name: rootPackage.name,
    version: rootPackage.version,
    description: rootPackage.description,
    license: rootPackage.license,
    // Not for a registry: the name there is not this project's, and `npm publish` refuses a private package.
    private: true,
    engines: rootPackage.engines,
    bin: Object.fromEntries(Object.entries(standalone.bin).map(([cmd, file]) => [cmd, `${WORKSPACES_DIR}/${standalone.name}/${file}`])),
    dependencies: thirdParty(workspaces, lock),
  };
  writeFileSync(join(stage, "package.json"), `${JSON.stringify(manifest, null, 2)}\n`);

  const packed = JSON.parse(execFileSync("npm", ["pack", "--json", "--pack-destination", out, "--loglevel=error"], { cwd: stage, encoding: "utf8" }));
  process.stdout.write(`${join(out, packed[0].filename)}\n`);
} finally {
  rmSync(work, { recursive: true, force: true });
}

/**
 * Every workspace's third-party dependency, at the version package-lock.json installs for that
 * workspace (its own nested copy, else the hoisted one): the versions the repository is tested with.
 */
function thirdParty(workspaces, repoLock) {
  const pinned = {};
  for (const { path, manifest } of workspaces) {
    for (const name of Object.keys(manifest.dependencies ?? {})) {
      if (name.startsWith("@chaos-core/")) continue;
      const version = (repoLock.packages[`${path}/node_modules/${name}`] ?? repoLock.packages[`node_modules/${name}`])?.version;
      if (!version) throw new Error(`pack: package-lock.json installs no ${name} for ${path} (run npm install)`);
      if (pinned[name] !== undefined && pinned[name] !== version) throw new Error(`pack: ${path} is installed with ${name} ${version}, another workspace with ${pinned[name]}`);
      pinned[name] = version;
    }
  }
  return Object.fromEntries(Object.entries(pinned).sort(([a], [b]) => (a < b ? -1 : 1)));
}
