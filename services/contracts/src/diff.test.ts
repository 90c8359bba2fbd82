import { describe, expect, it } from "vitest";
import { contractSet, NO_ENTITLEMENTS, NO_GATES, promptContract, resourceContract, toolContract, type Entitlements, type Gates, type ToolSource } from "./contract.js";
import { diffContracts, type Verdict } from "./diff.js";

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- JSON edited by hand to make each change
type Editable = any;

const baseTool: ToolSource = {
  name: "demo_tool",
  title: "Demo",
  description: "Does a demo thing",
  toolset: "core",
  inputSchema: {
    type: "object",
    properties: { key: { type: "string", maxLength: 64, description: "The key" }, tags: { type: "array", items: { type: "string" }, maxItems: 8 } },
    required: ["key"],
    additionalProperties: false,
  },
  outputSchema: { type: "object", properties: { items: { type: "array", items: { type: "string" }, maxItems: 10 } }, required: ["items"] },
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
};
const baseGates: Gates = { capabilities: ["memory.recall"], executor: true, approvalPath: true };

interface Variant {
  tool?: Partial<ToolSource>;
  annotations?: Partial<ToolSource["annotations"]>;
  input?: (s: Editable) => void;
  output?: (s: Editable) => void;
  gates?: Partial<Gates>;
  entitlements?: Partial<Entitlements>;
}

function tool(v: Variant = {}) {
  const input = structuredClone(baseTool.inputSchema) as Editable;
  const output = structuredClone(baseTool.outputSchema) as Editable;
  v.input?.(input);
  v.output?.(output);
  return toolContract(
    { ...baseTool, ...v.tool, inputSchema: input, outputSchema: output, annotations: { ...baseTool.annotations, ...v.annotations } },
    { gates: { ...baseGates, ...v.gates }, entitlements: { ...NO_ENTITLEMENTS, ...v.entitlements } },
  );
}

const set = (...tools: ReturnType<typeof tool>[]) => contractSet({ tools, prompts: [], resources: [], capabilities: [] });

function verdictOf(after: Variant | ReturnType<typeof tool>[], before: ReturnType<typeof tool>[] = [tool()]): { verdict: Verdict | "NONE"; reasons: string[] } {
  const d = diffContracts(set(...before), Array.isArray(after) ? set(...after) : set(tool(after)));
  return { verdict: d.verdict, reasons: d.changes.flatMap((c) => c.reasons) };
}

describe("diffContracts: the verdict table of docs/contracts.md §4, one test per row", () => {
  it("no change: NONE", () => expect(verdictOf({}).verdict).toBe("NONE"));

  describe("BREAKING", () => {
    it("tool removed", () => expect(verdictOf([])).toEqual({ verdict: "BREAKING", reasons: ["removed"] }));
    it("tool renamed (a removal and an addition, named as a rename)", () => {
      const d = verdictOf([tool({ tool: { name: "demo_tool_v2" } })]);
      expect(d.verdict).toBe("BREAKING");
      expect(d.reasons).toEqual(["renamed to demo_tool_v2", "added"]);
    });
    it("input schema changed incompatibly (a field's type)", () => {
      expect(verdictOf({ input: (s) => (s.properties.key.type = "number") })).toMatchObject({ verdict: "BREAKING" });
    });
    it("input field removed", () => expect(verdictOf({ input: (s) => delete s.properties.tags }).verdict).toBe("BREAKING"));
    it("new required field", () => {
      const d = verdictOf({ input: (s) => ((s.properties.scope = { type: "string" }), s.required.push("scope")) });
      expect(d).toEqual({ verdict: "BREAKING", reasons: ["new required field scope"] });
    });
    it("an existing field became required", () => {
      expect(verdictOf({ input: (s) => s.required.push("tags") })).toEqual({ verdict: "BREAKING", reasons: ["field tags became required"] });
    });
    it("destructive flipped", () => expect(verdictOf({ annotations: { destructiveHint: true } })).toEqual({ verdict: "BREAKING", reasons: ["destructive flipped from false to true"] }));
    it("read-only flipped", () => expect(verdictOf({ annotations: { readOnlyHint: false } })).toEqual({ verdict: "BREAKING", reasons: ["readOnly flipped from true to false"] }));
    it("output schema changed", () => {
      const d = verdictOf({ output: (s) => (s.properties.count = { type: "integer" }) });
      expect(d.verdict).toBe("BREAKING");
      expect(d.reasons).toEqual(["output schema changed: optional field count added"]);
    });
    it("entitlement gained (a flag, a service)", () => {
      expect(verdictOf({ entitlements: { network: true } })).toEqual({ verdict: "BREAKING", reasons: ["entitlement network gained"] });
      expect(verdictOf({ entitlements: { services: ["ledger"] } })).toEqual({ verdict: "BREAKING", reasons: ["services gained: ledger"] });
    });
    it("an evasion signal appeared", () => {
      expect(verdictOf({ entitlements: { evasion: ["eval @ x.ts"] } }).verdict).toBe("BREAKING");
    });
    it("inflation risk raised", () => {
      const d = verdictOf({ output: (s) => delete s.properties.items.maxItems });
      expect(d.verdict).toBe("BREAKING");
      expect(d.reasons).toContain("inflation risk raised from low to medium");
    });
    it("a gate removed (executor, approval path, a capability)", () => {
      expect(verdictOf({ gates: { executor: false } })).toEqual({ verdict: "BREAKING", reasons: ["gate executor removed"] });
      expect(verdictOf({ gates: { approvalPath: false } })).toEqual({ verdict: "BREAKING", reasons: ["gate approvalPath removed"] });
      expect(verdictOf({ gates: { capabilities: [] } })).toEqual({ verdict: "BREAKING", reasons: ["capability gate memory.recall removed"] });
    });
  });

  describe("RISKY", () => {
    it("idempotent flipped", () => expect(verdictOf({ annotations: { idempotentHint: false } })).toEqual({ verdict: "RISKY", reasons: ["idempotent flipped from true to false"] }));
    it("open-world flipped", () => expect(verdictOf({ annotations: { openWorldHint: true } }).verdict).toBe("RISKY"));
    it("a gate changed (a capability replaced, a gate added)", () => {
      expect(verdictOf({ gates: { capabilities: ["memory.remember"] } })).toEqual({
        verdict: "RISKY",
        reasons: ["capability gate changed from memory.recall to memory.remember"],
      });
      const before = [tool({ gates: { approvalPath: false } })];
      expect(verdictOf([tool()], before)).toEqual({ verdict: "RISKY", reasons: ["gate approvalPath added"] });
    });
    it("a collection became unbounded (input limit removed)", () => {
      expect(verdictOf({ input: (s) => delete s.properties.tags.maxItems })).toEqual({ verdict: "RISKY", reasons: ["limit maxItems removed"] });
    });
    it("a limit changed", () => expect(verdictOf({ input: (s) => (s.properties.key.maxLength = 32) }).verdict).toBe("RISKY"));
    it("toolset changed", () => expect(verdictOf({ tool: { toolset: "governance" } }).verdict).toBe("RISKY"));
  });

  describe("SAFE", () => {
    it("tool added", () => expect(verdictOf([tool(), tool({ tool: { name: "other", description: "Another" } })])).toEqual({ verdict: "SAFE", reasons: ["added"] }));
    it("required field made optional", () => {
      expect(verdictOf({ input: (s) => (s.required = []) })).toEqual({ verdict: "SAFE", reasons: ["required field key made optional"] });
    });
    it("optional field added", () => expect(verdictOf({ input: (s) => (s.properties.note = { type: "string" }) }).verdict).toBe("SAFE"));
    it("entitlement lost", () => {
      expect(verdictOf([tool()], [tool({ entitlements: { crypto: true } })])).toEqual({ verdict: "SAFE", reasons: ["entitlement crypto lost"] });
    });
    it("inflation risk reduced (a limit added to an output collection)", () => {
      const before = [tool({ output: (s) => delete s.properties.items.maxItems })];
      const d = diffContracts(set(...before), set(tool()));
      const economics = d.changes.filter((c) => c.section === "tokenEconomics");
      expect(economics.map((c) => [c.verdict, c.reasons])).toEqual([
        ["SAFE", ["inflation risk reduced from medium to low"]],
        ["SAFE", ["collection /properties/items got a limit"]],
      ]);
    });
    it("a limit added to an input field", () => {
      expect(verdictOf({ input: (s) => (s.properties.key.pattern = "^[a-z]+$") })).toEqual({ verdict: "SAFE", reasons: ['limit pattern "^[a-z]+$" added'] });
    });
  });

  describe("COSMETIC", () => {
    it("description changed", () => expect(verdictOf({ tool: { description: "Does it better" } })).toEqual({ verdict: "COSMETIC", reasons: ["description changed"] }));
    it("title changed", () => expect(verdictOf({ tool: { title: "Demo tool" } })).toEqual({ verdict: "COSMETIC", reasons: ["title changed"] }));
    it("a field's description changed", () => {
      expect(verdictOf({ input: (s) => (s.properties.key.description = "Which key") })).toEqual({ verdict: "COSMETIC", reasons: ["description changed"] });
    });
    it("evidence moved to another file", () => {
      const before = [tool({ entitlements: { crypto: true, evidence: ["crypto: createHash @ a.ts"] } })];
      expect(verdictOf([tool({ entitlements: { crypto: true, evidence: ["crypto: createHash @ b.ts"] } })], before).verdict).toBe("COSMETIC");
    });
  });

  it("both at once: a limit added to a field whose type also changed takes the graver verdict, in one change", () => {
    const d = diffContracts(set(tool()), set(tool({ input: (s) => (s.properties.tags = { type: "string", maxLength: 100 }) })));
    const tags = d.changes.filter((c) => c.path === "/properties/tags");
    expect(tags).toHaveLength(1);
    expect(tags[0]!.verdict).toBe("BREAKING");
    expect(tags[0]!.reasons).toEqual(expect.arrayContaining(['type changed from "array" to "string"', "limit maxLength 100 added"]));
  });

  it("prompts: a new required argument is BREAKING, an optional one SAFE", () => {
    const p = (args: Array<{ name: string; required: boolean }>) =>
      contractSet({ tools: [], resources: [], capabilities: [], prompts: [promptContract({ name: "p", title: "P", description: "d", arguments: args.map((a) => ({ ...a, description: "" })) })] });
    expect(diffContracts(p([]), p([{ name: "a", required: true }])).verdict).toBe("BREAKING");
    expect(diffContracts(p([]), p([{ name: "a", required: false }])).verdict).toBe("SAFE");
  });

  it("resources: a URI changed is BREAKING, a description COSMETIC", () => {
    const r = (uri: string, description = "d") =>
      contractSet({ tools: [], prompts: [], capabilities: [], resources: [resourceContract({ name: "r", title: "R", description, uri, mimeType: "application/json" })] });
    expect(diffContracts(r("chaoscore://a"), r("chaoscore://b")).verdict).toBe("BREAKING");
    expect(diffContracts(r("chaoscore://a"), r("chaoscore://a", "e")).verdict).toBe("COSMETIC");
  });

  it("gates are part of behavior and never the operator's policy: NO_GATES is a valid contract", () => {
    expect(tool({ gates: NO_GATES }).behavior.gates).toEqual({ capabilities: [], executor: false, approvalPath: false });
  });
});
