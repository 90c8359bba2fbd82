import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { connectInMemory, uniqueTenant, type Connected } from "../test-support/in-memory.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import type { EdgeDeps } from "../deps/edge-deps.js";

// The cognition tools against the real cognition handlers (heuristic provider, built-in
// capabilities), policy and memory on Postgres: nothing is faked.

interface StepResult {
  step_id: string;
  capability: string;
  decision: string;
  policy?: { matched_rule: string; reason: string; policy_version: number };
  status: string;
  ran: boolean;
  output?: unknown;
  evaluation: { succeeded: boolean; problems: string[] };
  error?: { code: string; message: string };
}

interface Plan {
  plan_id: string;
  steps: Array<{ id: string; capability: string; input: Record<string, unknown>; rationale: string }>;
  source: string;
  provider: string;
  model: string;
  expires_at: string;
}

let services: TestServices;
let deps: EdgeDeps;
const open: Connected[] = [];

async function connect(tenant = uniqueTenant("cognition")): Promise<Connected> {
  const c = await connectInMemory(deps, { tenant, principal: "agent" });
  open.push(c);
  return c;
}

function ok<T = Record<string, unknown>>(res: CallToolResult): T {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  expect(JSON.parse((res.content[0] as { text: string }).text)).toEqual(res.structuredContent);
  return res.structuredContent as T;
}

function text(res: CallToolResult): string {
  return res.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

async function stored(tenant: string, key: string): Promise<unknown> {
  const res = await services.memory.recall({ key }, { ctx: { tenant, principal: "test" } });
  return res.item;
}

const REMEMBER_STEP = {
  id: "s1",
  capability: "memory.remember",
  input: { key: "deploy-window", value: "friday" },
  rationale: "hand-written",
};

beforeAll(async () => {
  services = await startTestServices("cognition_tools");
  deps = services.deps(createMemorySessionStore());
});

afterAll(async () => {
  for (const c of open) await c.close();
  await services?.close();
});

describe("the cognition tools in the list", () => {
  it("state honest annotations", async () => {
    const c = await connect();
    const { tools } = await c.client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    for (const name of ["chaoscore_reason", "chaoscore_plan"]) {
      expect(byName[name]!.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false, openWorldHint: true });
    }
    for (const name of ["chaoscore_execute", "chaoscore_achieve"]) {
      expect(byName[name]!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true, openWorldHint: true });
    }
    expect(byName.chaoscore_achieve!.inputSchema.required).toEqual(["objective"]);
  });
});

describe("chaoscore_reason", () => {
  it("reads an objective into an intent and says no model was used", async () => {
    const c = await connect();
    const { intent } = ok<{ intent: Record<string, unknown> & { ambiguities: string[]; candidate_capabilities: string[] } }>(
      await c.call("chaoscore_reason", { objective: "remember that the deploy window is friday" }),
    );
    expect(intent).toMatchObject({ goal: "remember that the deploy window is friday", provider: "heuristic", model: "none" });
    expect(intent.candidate_capabilities[0]).toBe("memory.remember");
    expect(intent.ambiguities.join(" ")).toMatch(/No language model was used/);
  });
});

describe("chaoscore_plan and chaoscore_execute", () => {
  it("plans with registered capabilities and executes the stored plan in the same session", async () => {
    const tenant = uniqueTenant("plan");
    const c = await connect(tenant);
    const { intent } = ok<{ intent: Record<string, unknown> }>(
      await c.call("chaoscore_reason", { objective: "remember that the deploy window is friday" }),
    );
    const plan = ok<Plan>(await c.call("chaoscore_plan", { objective: "remember that the deploy window is friday", intent }));
    expect(plan).toMatchObject({ source: "heuristic", provider: "heuristic", model: "none" });
    expect(plan.steps.map((s) => s.capability)).toEqual(["memory.remember"]);
    expect(Date.parse(plan.expires_at)).toBeGreaterThan(Date.now());
    const key = plan.steps[0]!.input.key as string;
    expect(await stored(tenant, key)).toBeUndefined();

    const { results } = ok<{ results: StepResult[] }>(await c.call("chaoscore_execute", { plan_id: plan.plan_id }));
    expect(results).toEqual([
      expect.objectContaining({
        step_id: plan.steps[0]!.id,
        capability: "memory.remember",
        decision: "ALLOW",
        status: "executed",
        ran: true,
        evaluation: { succeeded: true, problems: [] },
      }),
    ]);
    expect(results[0]!.output).toMatchObject({ item: { key } });
    expect(await stored(tenant, key)).toBeDefined();
  });

  it("does not find another session's plan", async () => {
    const tenant = uniqueTenant("sessions");
    const mine = await connect(tenant);
    const theirs = await connect(tenant);
    const plan = ok<Plan>(await mine.call("chaoscore_plan", { objective: "remember that the deploy window is friday" }));
    const res = await theirs.call("chaoscore_execute", { plan_id: plan.plan_id });
    expect(res.isError).toBe(true);
    expect((res.structuredContent as { error: { code: string } }).error.code).toBe("not_found");
    expect(await stored(tenant, plan.steps[0]!.input.key as string)).toBeUndefined();
  });

  it("executes hand-written steps", async () => {
    const tenant = uniqueTenant("steps");
    const c = await connect(tenant);
    const { results } = ok<{ results: StepResult[] }>(await c.call("chaoscore_execute", { steps: [REMEMBER_STEP] }));
    expect(results[0]).toMatchObject({ step_id: "s1", status: "executed", decision: "ALLOW" });
    expect(await stored(tenant, "deploy-window")).toMatchObject({ key: "deploy-window" });
  });

  it("never runs a step policy denies, and skips the steps after it", async () => {
    const tenant = uniqueTenant("denied");
    const version = await services.putPolicy(tenant, { deniedCapabilities: ["memory.remember"] });
    const c = await connect(tenant);
    const { results } = ok<{ results: StepResult[] }>(
      await c.call("chaoscore_execute", {
        steps: [REMEMBER_STEP, { id: "s2", capability: "memory.recall", input: { key: "deploy-window" } }],
      }),
    );
    expect(results[0]).toMatchObject({
      step_id: "s1",
      decision: "DENY",
      policy: { matched_rule: "deniedCapabilities", policy_version: version },
      status: "denied",
      ran: false,
    });
    expect(results[0]).not.toHaveProperty("output");
    expect(results[1]).toMatchObject({ step_id: "s2", status: "skipped", decision: "NOT_ASKED", ran: false });
    // The handler never ran: nothing was written, and the audit says so.
    expect(await stored(tenant, "deploy-window")).toBeUndefined();
    const outcomes = services.audit.events().filter((e) => e.call.tenant === tenant && e.type === "step.outcome");
    expect(outcomes).toEqual([expect.objectContaining({ capability: "memory.remember", status: "denied", ran: false })]);
  });

  it("fails an unknown capability without asking policy", async () => {
    const c = await connect();
    const { results } = ok<{ results: StepResult[] }>(
      await c.call("chaoscore_execute", { steps: [{ id: "x", capability: "shell.exec", input: {} }] }),
    );
    expect(results[0]).toMatchObject({ status: "failed", decision: "NOT_ASKED", ran: false });
    expect(results[0]!.error?.message).toMatch(/shell\.exec/);
  });
});

describe("chaoscore_achieve", () => {
  it("sends a progress notification per stage and returns the trace", async () => {
    const tenant = uniqueTenant("achieve");
    const c = await connect(tenant);
    const progress: Array<{ progress: number; total?: number; message?: string }> = [];
    const res = (await c.client.callTool(
      { name: "chaoscore_achieve", arguments: { objective: "remember that the deploy window is friday", max_replans: 1 } },
      undefined,
      { onprogress: (p) => progress.push(p) },
    )) as CallToolResult;
    const trace = ok<{
      status: string;
      plans: Plan[];
      results: StepResult[];
      replans: number;
      episode_key?: string;
      intent: { model: string };
    }>(res);
    expect(trace.status).toBe("succeeded");
    expect(trace.intent.model).toBe("none");
    expect(trace.results.map((r) => [r.capability, r.status])).toEqual([["memory.remember", "executed"]]);
    expect(trace.replans).toBe(0);
    expect(trace.episode_key).toMatch(/^episode:/);

    const stages = progress.map((p) => p.message?.split(":")[0]);
    expect(stages).toEqual(expect.arrayContaining(["context", "reason", "plan", "execute", "remember"]));
    expect(progress.map((p) => p.progress)).toEqual(progress.map((_, i) => i + 1));
    expect(progress.every((p) => p.total === undefined)).toBe(true);
    const key = trace.plans[0]!.steps[0]!.input.key as string;
    expect(await stored(tenant, key)).toBeDefined();
  });

  it("reports a denial as the run's status, with nothing written", async () => {
    const tenant = uniqueTenant("achieve-denied");
    await services.putPolicy(tenant, { deniedCapabilities: ["memory.remember"] });
    const c = await connect(tenant);
    const trace = ok<{ status: string; plans: Plan[]; results: StepResult[]; episode_key?: string; notes: string[]; bookkeeping: unknown[] }>(
      await c.call("chaoscore_achieve", { objective: "remember that the deploy window is friday" }),
    );
    expect(trace.status).toBe("denied");
    expect(trace.results[0]).toMatchObject({ capability: "memory.remember", status: "denied", ran: false });
    expect(await stored(tenant, trace.plans[0]!.steps[0]!.input.key as string)).toBeUndefined();
    // Nor the run's own record: the episode is a memory.remember write too.
    const episodes = await services.memory.search({ query: "episode:", tags: [], limit: 10, cursor: "" }, { ctx: { tenant, principal: "test" } });
    expect(episodes.items).toEqual([]);
    expect(trace.episode_key).toBeUndefined();
    expect(trace.bookkeeping).toEqual([
      { kind: "episode", stored: false, decision: "DENY", matched_rule: "memory.remember: deniedCapabilities", reason: expect.stringContaining("memory.remember") as string },
    ]);
    expect(trace.notes).toContain("The episode was not stored: policy denied memory.remember (deniedCapabilities)");
  });
});

describe("chaoscore_inspect on cognition", () => {
  it("lists the registered capabilities and the provider, live", async () => {
    const c = await connect();
    const caps = ok<{ available: boolean; capabilities: Array<{ name: string; risk: string }> }>(
      await c.call("chaoscore_inspect", { what: "capabilities" }),
    );
    expect(caps.available).toBe(true);
    expect(caps.capabilities.map((x) => x.name).sort()).toEqual([
      "cognition.generate_text",
      "http.request",
      "memory.episode",
      "memory.forget",
      "memory.recall",
      "memory.remember",
    ]);
    expect(caps.capabilities.find((x) => x.name === "http.request")?.risk).toBe("medium");
    // The brain's bookkeeping is listed, flagged: plans cannot use it.
    expect(caps.capabilities.find((x) => x.name === "memory.episode")).toMatchObject({ risk: "low", internal: true, implies: ["memory.remember"] });
    expect(caps.capabilities.find((x) => x.name === "memory.remember")).not.toHaveProperty("internal");
    const prov = ok<{ provider: Record<string, unknown> }>(await c.call("chaoscore_inspect", { what: "providers" }));
    expect(prov.provider).toEqual({ id: "heuristic", display_name: expect.any(String), model: "none", configured: true });
  });
});

describe("bad arguments to the cognition tools", () => {
  it("name the field that fails the schema", async () => {
    const c = await connect();
    const step = (i: number) => ({ id: `s${i}`, capability: "memory.recall", input: {} });
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ["chaoscore_reason", {}, /objective/],
      ["chaoscore_reason", { objective: "x".repeat(4001) }, /objective/],
      ["chaoscore_reason", { objective: "   " }, /objective must not be empty/],
      ["chaoscore_plan", { objective: "ok", intent: { goal: "g", risk: "extreme" } }, /intent.*risk|risk/],
      ["chaoscore_execute", {}, /exactly one of plan_id, steps or approval_id/],
      ["chaoscore_execute", { plan_id: "p", steps: [step(1)] }, /exactly one of plan_id, steps or approval_id/],
      ["chaoscore_execute", { plan_id: "p", approval_id: "a" }, /exactly one of plan_id, steps or approval_id/],
      ["chaoscore_execute", { steps: Array.from({ length: 51 }, (_, i) => step(i)) }, /steps/],
      ["chaoscore_execute", { steps: [step(1), step(1)] }, /step id "s1" is used twice/],
      ["chaoscore_execute", { steps: [{ id: "s1", input: {} }] }, /capability/],
      ["chaoscore_execute", { steps: [{ id: "s1", capability: "memory.episode", input: {} }] }, /"memory\.episode" is an internal capability/],
      ["chaoscore_achieve", { objective: "ok", max_replans: 6 }, /max_replans/],
      ["chaoscore_achieve", { objective: "ok", max_replans: 1.5 }, /max_replans/],
    ];
    for (const [name, args, field] of cases) {
      const res = await c.call(name, args);
      expect(res.isError, `${name} ${JSON.stringify(args).slice(0, 80)}`).toBe(true);
      expect(text(res)).toMatch(/^invalid_argument: /);
      expect(text(res)).toMatch(field);
    }
  });
});
