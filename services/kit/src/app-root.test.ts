import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { appRoot } from "./app-root.js";

function writePackage(dir: string, name: string): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name, version: "0.1.0" }));
}

describe("appRoot", () => {
  const tmp = mkdtempSync(join(tmpdir(), "chaos-core-app-root-"));
  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it("is the repository root in a checkout", () => {
    expect(appRoot()).toBe(fileURLToPath(new URL("../../..", import.meta.url)).replace(/\/$/, ""));
  });

  it("is the package directory of an installed tarball, where the workspaces sit under node_modules/@chaos-core", () => {
    const pkg = join(tmp, "prefix/lib/node_modules/chaos-core");
    writePackage(pkg, "chaos-core");
    const edge = join(pkg, "node_modules/@chaos-core/edge");
    writePackage(edge, "@chaos-core/edge");
    mkdirSync(join(edge, "dist"));
    expect(appRoot(join(edge, "dist"))).toBe(pkg);
  });

  it("names where it started when no chaos-core package is above it", () => {
    const stray = join(tmp, "elsewhere/node_modules/@chaos-core/kit/dist");
    writePackage(join(tmp, "elsewhere"), "not-chaos-core");
    mkdirSync(stray, { recursive: true });
    expect(() => appRoot(stray)).toThrow(`no directory above ${stray} holds the chaos-core package`);
  });
});
