/** The heuristic (no model) reading and planning: deterministic, and grounded in the registry. */
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { defineCapability, type Capability } from "../capabilities/capability.js";
import { inputFromObjective } from "../upstreams/objective-input.js";
import { zodFromJsonSchema } from "../upstreams/json-schema.js";
import { BUILT_IN_CAPABILITIES } from "../capabilities/index.js";
import { createCapabilityRegistry } from "../capabilities/registry.js";
import { HeuristicProvider } from "../providers/heuristic.js";
import { NO_MODEL_NOTE, reason } from "./intent.js";
import { plan } from "./planner.js";
import { objectiveSignature } from "./signature.js";

const registry = createCapabilityRegistry(BUILT_IN_CAPABILITIES);
const deps = { provider: new HeuristicProvider(), registry };

const OBJECTIVES = [
  "Remember that the build server is ci-7.example.com",
  "recall what I stored about the postgres migration",
  "Fetch https://status.example.com/api/health and summarise it",
  "Write a short summary of our release notes",
  "request the page http://docs.example.org/guide.",
  "remember my favourite colour: teal",
  "zzz qqq",
  "search memory for deploy keys, then draft an answer",
  "GET https://example.com then remember that the homepage is up",
  "Generate a haiku about gRPC",
];

describe("heuristic reason and plan", () => {
  it("give the same intent and plan for the same objective, run after run", async () => {
    for (const objective of OBJECTIVES) {
      const first = { intent: await reason(objective, undefined, deps), plan: await plan(objective, undefined, deps) };
      for (let i = 0; i < 3; i++) {
        expect(await reason(objective, undefined, deps)).toEqual(first.intent);
        expect(await plan(objective, undefined, deps)).toEqual(first.plan);
      }
    }
  });

  it("never plan an unregistered capability, and every planned input passes its capability's schema", async () => {
    for (const objective of OBJECTIVES) {
      const result = await plan(objective, undefined, deps);
      const intent = await reason(objective, undefined, deps);
      expect(intent.candidateCapabilities.every((n) => registry.get(n) !== undefined)).toBe(true);
      for (const step of result.steps) {
        const capability = registry.get(step.capability);
        expect(capability, `${objective}: ${step.capability}`).toBeDefined();
        expect(capability!.inputSchema.safeParse(step.input).success, `${objective}: ${step.capability}`).toBe(true);
      }
      expect(new Set(result.steps.map((s) => s.id)).size).toBe(result.steps.length);
    }
  });

  it("say plainly that no model was used", async () => {
    const intent = await reason("Remember that the build server is ci-7", undefined, deps);
    expect(intent).toMatchObject({ provider: "heuristic", model: "none", goal: "Remember that the build server is ci-7" });
    expect(intent.ambiguities).toContain(NO_MODEL_NOTE);
    expect(intent.candidateCapabilities[0]).toBe("memory.remember");
    const p = await plan("Remember that the build server is ci-7", intent, deps);
    expect(p).toMatchObject({ source: "heuristic", provider: "heuristic", model: "none" });
  });

  it("derive inputs from the objective through each capability's hook", async () => {
    const remember = await plan("Remember that the build server is ci-7", undefined, deps);
    expect(remember.steps[0]).toMatchObject({
      id: "s1",
      capability: "memory.remember",
      input: { key: "build-server", value: "ci-7", tags: ["note"] },
    });
    const fetch = await plan("request the page https://docs.example.org/guide.", undefined, deps);
    expect(fetch.steps.find((s) => s.capability === "http.request")?.input).toEqual({ url: "https://docs.example.org/guide" });
    // No URL in the objective: http.request has nothing to act on and is not planned.
    const noUrl = await plan("request the status page", undefined, deps);
    expect(noUrl.steps.map((s) => s.capability)).not.toContain("http.request");
    expect(await plan("zzz qqq", undefined, deps)).toMatchObject({ steps: [] });
  });

  it("offer a remembered procedure first, and fall back to ranking when it cannot be filled", async () => {
    const objective = "Remember that the build server is ci-7";
    const offered = await plan(objective, undefined, deps, { procedure: ["memory.remember", "memory.recall"] });
    expect(offered.source).toBe("procedure");
    expect(offered.steps.map((s) => s.capability)).toEqual(["memory.remember", "memory.recall"]);
    // A stale procedure naming a capability no longer registered is not used, nor half-used.
    const stale = await plan(objective, undefined, deps, { procedure: ["memory.remember", "gone.away"] });
    expect(stale.source).toBe("heuristic");
    expect(stale.steps.map((s) => s.capability)).not.toContain("gone.away");
  });

  it("leave out capabilities that already executed when re-planning", async () => {
    const objective = "GET https://example.com then remember that the homepage is up";
    const first = await plan(objective, undefined, deps);
    expect(first.steps.map((s) => s.capability)).toContain("memory.remember");
    const again = await plan(objective, undefined, deps, {
      idPrefix: "p2-s",
      replan: { executed: ["memory.remember"], failed: { capability: "http.request", problems: ["handler: unavailable"] } },
    });
    expect(again.steps.map((s) => s.capability)).not.toContain("memory.remember");
    expect(again.steps.every((s) => s.id.startsWith("p2-s"))).toBe(true);
  });

  it("in a re-plan, point a remaining step's reference at the step that already executed", async () => {
    const again = await plan("fetch https://example.com and remember it as home", undefined, deps, {
      idPrefix: "p2-s",
      replan: {
        executed: ["http.request"],
        executedSteps: [{ stepId: "p1-s1", capability: "http.request" }],
        failed: { capability: "memory.remember", problems: ["handler: unavailable"] },
      },
    });
    expect(again.steps).toEqual([
      expect.objectContaining({ id: "p2-s1", capability: "memory.remember", input: { key: "home", value: { $step: "p1-s1", path: "/body" }, tags: ["note"] } }),
    ]);
    const first = await plan("fetch https://example.com and remember it as home", undefined, deps, { idPrefix: "p1-s" });
    expect(first.steps.map((s) => [s.id, s.input])).toEqual([
      ["p1-s1", { url: "https://example.com" }],
      ["p1-s2", { key: "home", value: { $step: "p1-s1", path: "/body" }, tags: ["note"] }],
    ]);
  });

  it("sign objectives the parser does not read by their key words, not their order, case or plurals", () => {
    expect(objectiveSignature("Calibrate the build servers")).toBe(objectiveSignature("build server: calibrate!"));
    expect(objectiveSignature("Calibrate the build server")).not.toBe(objectiveSignature("Calibrate the test server"));
    expect(objectiveSignature("x")).toMatch(/^[0-9a-f]{32}$/);
  });

  it("sign objectives the parser reads by their intent: the steps and inputs, not the wording", () => {
    const colour = objectiveSignature("Remember that my favourite colour is blue");
    expect(objectiveSignature("store my favourite colour: blue")).toBe(colour);
    expect(objectiveSignature("Save: my favourite colour is blue.")).toBe(colour);
    expect(objectiveSignature("store my favourite colour: red")).not.toBe(colour);
    // Asking is another intent than storing, on the same subject.
    expect(objectiveSignature("what is my favourite colour?")).not.toBe(colour);
    expect(objectiveSignature("what is my favourite colour?")).toBe(objectiveSignature("What's my favourite colour"));
  });
});

describe("heuristic planning with upstream tools (docs/federation-platform.md §4)", () => {
  /** An upstream tool as served: its pinned input schema, and its input read from an objective by that schema. */
  function tool(upstream: string, name: string, description: string, inputSchema: Record<string, unknown>): Capability {
    const base = defineCapability({
      name: `${upstream}.${name}`,
      description,
      risk: "low",
      inputSchema: zodFromJsonSchema(inputSchema),
      outputSchema: z.looseObject({}),
      annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
      fromObjective: (objective: string) => inputFromObjective(inputSchema, objective),
      handler: () => Promise.resolve({}),
    }) as unknown as Capability;
    return { ...base, upstream: { name: upstream, tool: name, mcpName: `${upstream}__${name}`, title: "", inputSchema, grants: [{ tenants: ["*"] }] } };
  }
  const path = { type: "object", properties: { path: { type: "string" } }, required: ["path"] };
  const upstreamDeps = {
    provider: new HeuristicProvider(),
    registry: createCapabilityRegistry([
      ...BUILT_IN_CAPABILITIES,
      tool("files", "list_directory", "Get a detailed listing of all files and directories in a specified path.", path),
      tool("files", "read_text_file", "Read the complete contents of a file from the file system as text.", path),
      tool("slack", "slack_list_channels", "List public channels in the workspace with pagination", { type: "object", properties: { limit: { type: "number" } } }),
      tool("everything", "get_sum", "Returns the sum of two numbers", { type: "object", properties: { a: { type: "number" }, b: { type: "number" } }, required: ["a", "b"] }),
      tool("github", "fork_repository", "Fork a GitHub repository to your account or specified organization", { type: "object", properties: { owner: { type: "string" }, repo: { type: "string" } }, required: ["owner", "repo"] }),
    ]),
  };

  it("plans the upstream tool an objective names, its input read from the objective by the tool's pinned schema", async () => {
    expect((await plan("list everything in the /var/log directory", undefined, upstreamDeps)).steps).toEqual([
      expect.objectContaining({ capability: "files.list_directory", input: { path: "/var/log" } }),
    ]);
    expect((await plan("read the file /srv/reports/q3.txt", undefined, upstreamDeps)).steps).toEqual([
      expect.objectContaining({ capability: "files.read_text_file", input: { path: "/srv/reports/q3.txt" } }),
    ]);
    expect((await plan("list the slack channels", undefined, upstreamDeps)).steps).toEqual([expect.objectContaining({ capability: "slack.slack_list_channels", input: {} })]);
    expect((await plan("sum the numbers 17 and 25", undefined, upstreamDeps)).steps).toEqual([expect.objectContaining({ capability: "everything.get_sum", input: { a: 17, b: 25 } })]);
  });

  it("keeps the parser's reading where the objective names memory, and says which input an upstream tool needs when it cannot read it", async () => {
    expect((await plan("recall what I stored about the slack channels", undefined, upstreamDeps)).steps.map((s) => s.capability)).toEqual(["memory.recall"]);
    expect((await plan("remember that the slack channel is #deploys", undefined, upstreamDeps)).steps.map((s) => s.capability)).toEqual(["memory.remember"]);
    const fork = await plan("fork the github repository", undefined, upstreamDeps);
    expect(fork.steps).toEqual([]);
    expect(fork.notes).toEqual([expect.stringMatching(/^The upstream tool github\.fork_repository matches the objective best, but its input \(owner, repo\) could not be read from it offline/)]);
  });
});
