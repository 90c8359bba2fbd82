#!/usr/bin/env node
// Fails when a source file of services/*/src (tests, contract suites and test helpers aside) runs
// past MAX_LINES lines without saying why it is one piece: a file that needs a table of contents
// carries several responsibilities, and each belongs in a file named for it (CONVENTIONS.md, issue 31).
// A file that must stay whole says so in a line containing "one piece:" and the reason.
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const MAX_LINES = 500;
const root = join(import.meta.dirname, "..", "..");

const skipped = (name) => name.endsWith(".test.ts") || name.endsWith(".contract.ts") || name === "test-support" || name === "fixtures";

function* sources(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (skipped(entry.name)) continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* sources(path);
    else if (entry.name.endsWith(".ts")) yield path;
  }
}

const problems = [];
for (const service of readdirSync(join(root, "services"))) {
  let files;
  try {
    files = [...sources(join(root, "services", service, "src"))];
  } catch {
    continue;
  }
  for (const file of files) {
    const path = relative(root, file);
    const text = readFileSync(file, "utf8");
    const lines = text.split("\n").length - (text.endsWith("\n") ? 1 : 0);
    if (lines > MAX_LINES && !/one piece:/.test(text)) problems.push(`${path}: ${lines} lines, over ${MAX_LINES}: split it by responsibility, or say in a line why it is "one piece:"`);
  }
}
if (problems.length > 0) {
  for (const p of problems) console.error(p);
  process.exit(1);
}
console.log(`every source file is within ${MAX_LINES} lines or says why it is one piece`);
