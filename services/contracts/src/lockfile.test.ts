import { createHash } from "node:crypto";
import { canonicalJsonRfc8785 } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { contractSet, entryDigest, NO_ENTITLEMENTS, NO_GATES, sectionDigests, serverDigest, toolContract, violationsOf, type ToolSource } from "./contract.js";
import { checkLock, parseLock, serializeLock } from "./lockfile.js";
import { tokenEconomics } from "./token-economics.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON edited by hand to make each change
type Editable = any;

const source = (name: string, description = "A tool"): ToolSource => ({
  name,
  title: name,
  description,
  toolset: "core",
  inputSchema: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
  outputSchema: { type: "object", properties: { n: { type: "number" } } },
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
});
const derived = { gates: NO_GATES, entitlements: NO_ENTITLEMENTS };
const setOf = (...names: string[]) => contractSet({ tools: names.map((n) => toolContract(source(n), derived)), prompts: [], resources: [], capabilities: [] });
const sha = (v: unknown) => `sha256:${createHash("sha256").update(canonicalJsonRfc8785(v)).digest("hex")}`;

describe("digests", () => {
  it("hash each section's RFC 8785 form, the section digests for the tool, the sorted tool digests for the server", () => {
    const c = toolContract(source("a"), derived);
    const sections = sectionDigests(c);
    expect(sections).toEqual({ surface: sha(c.surface), behavior: sha(c.behavior), tokenEconomics: sha(c.tokenEconomics), entitlements: sha(c.entitlements) });
    expect(entryDigest(c)).toBe(sha(sections));
    const b = toolContract(source("b"), derived);
    expect(serverDigest(setOf("b", "a"))).toBe(sha({ tools: [entryDigest(c), entryDigest(b)].sort(), prompts: [], resources: [], capabilities: [] }));
  });

  it("the schema digests are the schemas' own", () => {
    const c = toolContract(source("a"), derived);
    expect(c.surface.inputSchemaDigest).toBe(sha(source("a").inputSchema));
    expect(c.behavior.outputSchemaDigest).toBe(sha(source("a").outputSchema));
  });
});

describe("token economics", () => {
  it("grades inflation risk by the explicit rules", () => {
    const obj = (properties: Record<string, unknown>) => ({ type: "object", properties });
    expect(tokenEconomics(obj({}), obj({ a: { type: "string" } })).inflationRisk).toBe("low");
    expect(tokenEconomics(obj({}), obj({ a: { type: "array", items: { type: "string" } } }))).toEqual({
      inputFieldCount: 0,
      outputFieldCount: 1,
      unboundedCollections: ["/properties/a"],
      inflationRisk: "medium",
    });
    expect(tokenEconomics(obj({}), obj({ a: { type: "array", items: obj({ x: { type: "string" } }) } })).inflationRisk).toBe("high");
    expect(tokenEconomics(obj({}), obj({ m: { type: "object", additionalProperties: { type: "string" } } })).unboundedCollections).toEqual(["/properties/m"]);
    const many = (n: number) => obj(Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, { type: "string" }])));
    expect(tokenEconomics(obj({}), many(25)).inflationRisk).toBe("low");
    expect(tokenEconomics(obj({}), many(26)).inflationRisk).toBe("medium");
    expect(tokenEconomics(obj({}), many(61)).inflationRisk).toBe("high");
    const three = obj({ a: { type: "array", items: { type: "string" } }, b: { type: "array", items: { type: "string" } }, c: { type: "array", items: { type: "number" } } });
    expect(tokenEconomics(obj({}), three).inflationRisk).toBe("high");
  });
});

describe("violations", () => {
  it("a read-only tool whose code writes files, opens sockets or spawns processes", () => {
    const c = toolContract(source("r"), { gates: NO_GATES, entitlements: { ...NO_ENTITLEMENTS, filesystemWrite: true, network: true, subprocess: true } });
    expect(violationsOf("r", c)).toEqual([
      "r is marked read-only but its code writes files",
      "r is marked read-only and closed-world but its code opens network connections",
      "r is marked read-only but its code spawns processes",
    ]);
    const reading = toolContract(source("r"), { gates: NO_GATES, entitlements: { ...NO_ENTITLEMENTS, filesystem: true, crypto: true, services: ["memory"] } });
    expect(violationsOf("r", reading)).toEqual([]);
  });
});

describe("the lockfile", () => {
  it("is deterministic: sorted keys, two-space indent, trailing newline, the same bytes for the same contracts in any order", () => {
    const text = serializeLock(setOf("b", "a"));
    expect(serializeLock(setOf("a", "b"))).toBe(text);
    expect(text.endsWith("}\n")).toBe(true);
    expect(text.split("\n")[1]).toBe('  "capabilities": {},');
    const keys = Object.keys(JSON.parse(text) as object);
    expect(keys).toEqual([...keys].sort());
    expect(text).toContain('\n    "a": {\n      "behavior": {');
  });

  it("round-trips: the parsed contracts are the ones written", () => {
    const set = setOf("a", "b");
    const lock = parseLock(serializeLock(set));
    expect(lock.contracts).toEqual(JSON.parse(JSON.stringify(set)));
    expect(lock.integrityDigest).toBe(serverDigest(set));
  });

  it("--check passes on the code's own lock and fails on a change, with the verdict", () => {
    const text = serializeLock(setOf("a"));
    expect(checkLock(text, setOf("a")).ok).toBe(true);
    const changed = contractSet({ tools: [toolContract(source("a", "A better tool"), derived)], prompts: [], resources: [], capabilities: [] });
    const check = checkLock(text, changed);
    expect(check.ok).toBe(false);
    expect(check.diff.changes.map((c) => [c.verdict, c.reasons])).toEqual([["COSMETIC", ["description changed"]]]);
  });

  it("never trusts the file's digests: a section edited with its digests recomputed still fails against the code", () => {
    const doc = JSON.parse(serializeLock(setOf("a"))) as Editable;
    doc.tools.a.behavior.readOnly = false;
    const forged = contractSet({ tools: [doc.tools.a], prompts: [], resources: [], capabilities: [] });
    const text = serializeLock(JSON.parse(JSON.stringify(forged)));
    const check = checkLock(text, setOf("a"));
    expect(check.ok).toBe(false);
    expect(check.diff.changes[0]).toMatchObject({ verdict: "BREAKING", reasons: ["readOnly flipped from false to true"] });
  });

  it("reports a stated digest that is not its section's (a tampered file)", () => {
    const doc = JSON.parse(serializeLock(setOf("a"))) as Editable;
    doc.tools.a.sections.surface = `sha256:${"0".repeat(64)}`;
    const check = checkLock(`${JSON.stringify(doc, null, 2)}\n`, setOf("a"));
    expect(check.ok).toBe(false);
    expect(check.problems[0]).toMatch(/^tools\/a: the file states surface digest sha256:0{64}, but its surface section hashes to sha256:/);
  });

  it("refuses a reformatted file though its content matches", () => {
    const text = serializeLock(setOf("a"));
    const check = checkLock(JSON.stringify(JSON.parse(text)), setOf("a"));
    expect(check.problems).toEqual(["chaoscore.lock is not in the form chaos-core contracts lock writes (keys, indentation or trailing newline)"]);
  });

  it("refuses a malformed file naming the field at its depth", () => {
    const doc = JSON.parse(serializeLock(setOf("a"))) as Editable;
    delete doc.tools.a.entitlements;
    expect(() => parseLock(JSON.stringify(doc))).toThrow("chaoscore.lock: tools.a.entitlements: must be an object");
    expect(() => parseLock('{"lockfileVersion": 2}')).toThrow("chaoscore.lock: lockfileVersion: must be 1, got 2");
    expect(() => parseLock("{")).toThrow("chaoscore.lock: (file): not JSON");
  });
});
