import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

const run = promisify(execFile);

describe("the Node version the README promises", () => {
  it("is the one package.json's engines names", () => {
    const engines = (JSON.parse(readFileSync("package.json", "utf8")) as { engines: { node: string } }).engines.node;
    const readme = readFileSync("README.md", "utf8");
    const promised = /Requires Node\.js ≥ ([0-9]+(?:\.[0-9]+)*)/.exec(readme)?.[1];
    expect(promised).toBeDefined();
    expect(engines).toBe(`>=${promised}`);
  });

  it("runs every runtime dependency: none declares an engines range that leaves it out", async () => {
    // npm ci warned EBADENGINE for canonicalize@5.1.0 (node >=22), a runtime dependency of kit.
    const { stdout } = await run(process.execPath, ["scripts/ci/check-engines.mjs"], { encoding: "utf8" });
    expect(stdout).toMatch(/runtime dependencies with an engines\.node range all admit node 20\.19\.0/);
  });
});
