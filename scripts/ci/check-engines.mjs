#!/usr/bin/env node
// Fails when a runtime dependency (anything `npm ci --omit=dev` installs) declares an
// `engines.node` range that leaves out the Node versions the root package.json promises: its
// lowest (`>=20.19` → 20.19.0) and the one running this check. Development-only tools may need a
// newer Node; they are not what a user installs to run Chaos Core.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import semver from "semver";

const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const promised = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).engines?.node;
if (!promised) {
  console.error("package.json names no engines.node: nothing to check against");
  process.exit(1);
}
const lowest = semver.minVersion(promised)?.version;
const targets = [...new Set([lowest, process.versions.node])].filter(Boolean);

// `.prod`: every package in the tree that a production install keeps (workspaces included).
const packages = JSON.parse(execFileSync("npm", ["query", ".prod"], { cwd: root, encoding: "utf8", maxBuffer: 64 * 1024 * 1024 }));
const seen = new Set();
const refused = [];
for (const p of packages) {
  const range = p.engines?.node;
  const id = `${p.name}@${p.version}`;
  if (!range || seen.has(id)) continue;
  seen.add(id);
  const left = targets.filter((v) => !semver.satisfies(v, range));
  if (left.length > 0) refused.push(`${id} requires node ${range}, which leaves out ${left.join(" and ")} (${p.location})`);
}
if (refused.length > 0) {
  console.error(`runtime dependencies that do not run on the Node package.json promises (${promised}):`);
  for (const r of refused) console.error(`- ${r}`);
  console.error("pin a version that supports it, replace the package, or raise engines.node (and the README) to match");
  process.exit(1);
}
console.log(`${seen.size} runtime dependencies with an engines.node range all admit node ${targets.join(" and ")} (${promised})`);
