import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { RULESET } from "@chaos-core/council";
import { MIGRATION_OUTPUTS, MIGRATION_TASK } from "../../../council/src/domain/examples.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { connectInMemory, uniqueTenant, type Connected } from "../test-support/in-memory.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { COUNCIL_INPUT_LIMITS } from "./council-shapes.js";

const PHASES = ["decompile", "design", "critique", "synthesis", "verify"] as const;
const COUNCIL_TOOLS = ["council_continue", "council_init", "council_recall", "council_save", "council_score", "council_verify"];

let services: TestServices;
let deps: EdgeDeps;
const open: Connected[] = [];

async function connect(tenant = uniqueTenant("council")): Promise<Connected> {
  const c = await connectInMemory(deps, { tenant, principal: "agent" });
  open.push(c);
  return c;
}

function ok(res: CallToolResult): Record<string, unknown> {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  expect(JSON.parse((res.content[0] as { text: string }).text)).toEqual(res.structuredContent);
  return res.structuredContent as Record<string, unknown>;
}

function errorOf(res: CallToolResult): { code: string; message: string } {
  expect(res.isError, JSON.stringify(res.content)).toBe(true);
  return (res.structuredContent as { error: { code: string; message: string } }).error;
}

function text(res: CallToolResult): string {
  return res.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

beforeAll(async () => {
  services = await startTestServices("council");
  deps = services.deps(createMemorySessionStore());
});

afterAll(async () => {
  for (const c of open) await c.close();
  await services?.close();
});

describe("the council toolset", () => {
  it("is listed with input and output schemas and honest annotations", async () => {
    const c = await connect();
    const { tools } = await c.client.listTools();
    const council = tools.filter((t) => t.name.startsWith("council_"));
    expect(council.map((t) => t.name).sort()).toEqual(COUNCIL_TOOLS);
    const byName = Object.fromEntries(council.map((t) => [t.name, t]));
    for (const name of ["council_recall", "council_verify", "council_continue", "council_score"]) {
      expect(byName[name]!.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false });
    }
    for (const name of ["council_init", "council_save"]) {
      expect(byName[name]!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false });
    }
    expect(byName.council_save!.inputSchema.required).toEqual(["sessionId", "phase", "output"]);
    expect(byName.council_save!.outputSchema).toBeDefined();
  });

  it("mirrors the council ruleset's input limits exactly", () => {
    const { maxTaskChars, maxTitleChars, maxContextChars, maxOutputChars, maxClaimsToVerify, maxStringChars } = RULESET.limits;
    expect(COUNCIL_INPUT_LIMITS).toEqual({ maxTaskChars, maxTitleChars, maxContextChars, maxOutputChars, maxClaimsToVerify, maxStringChars });
  });

  it("runs a whole session: init, five saves with handoffs between personas, recall, verify, continue, score", async () => {
    const c = await connect();
    const init = ok(await c.call("council_init", { task: MIGRATION_TASK }));
    expect(init).toMatchObject({ type: "council_init", phase: "decompile", persona: "Systems Analyst", pipelineDepth: "standard" });
    const sessionId = init.sessionId as string;

    const handoffs: string[] = [];
    for (const phase of PHASES) {
      const saved = ok(await c.call("council_save", { sessionId, phase, output: MIGRATION_OUTPUTS[phase] }));
      expect(saved).toMatchObject({ sessionId, phase, verdict: "excellent", scoring: { verdict: "excellent" } });
      const handoff = saved.handoff as { personaTransition: { fromPersona: string; toPersona: string } } | undefined;
      if (handoff) handoffs.push(`${handoff.personaTransition.fromPersona} → ${handoff.personaTransition.toPersona}`);
      if (phase !== "verify") expect(saved).toMatchObject({ canProceed: true, sessionComplete: false });
      else expect(saved).toMatchObject({ canProceed: false, nextPhase: null, sessionComplete: true, outcome: "approved" });
    }
    expect(handoffs).toEqual([
      "Systems Analyst → Solution Architect",
      "Solution Architect → Security & Quality Auditor",
      "Security & Quality Auditor → Implementation Engineer",
      "Implementation Engineer → Quality Assurance",
    ]);

    const recall = ok(await c.call("council_recall", { sessionId, format: "decisions" }));
    expect(recall).toMatchObject({ sessionId, status: "complete", activePhase: null, recommended: "Bulk copy with binlog change data capture" });
    const verify = ok(
      await c.call("council_verify", {
        sessionId,
        claims: [{ text: "JSON columns are mapped to jsonb", source: "design" }],
        mode: "grounding",
      }),
    );
    expect(verify).toMatchObject({ sessionId, total: 1, passed: 1, failed: 0, mode: "grounding" });
    const cont = ok(await c.call("council_continue", { sessionId }));
    expect(cont).toMatchObject({ sessionId, status: "complete", activePhase: null, activePersona: null });
    const score = ok(await c.call("council_score", { sessionId }));
    expect(score).toMatchObject({ sessionId, verdict: "excellent", overall: { verdict: "excellent" } });
  });

  it("checks claims given as plain strings, the way a model may list them", async () => {
    const c = await connect();
    const { sessionId } = ok(await c.call("council_init", { task: MIGRATION_TASK })) as { sessionId: string };
    ok(await c.call("council_save", { sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile }));
    const verify = ok(await c.call("council_verify", { sessionId, claims: ["The dataset is about 2GB", { text: "Downtime of 3 hours is planned" }] }));
    expect(verify).toMatchObject({ sessionId, total: 2, passed: 1, failed: 1 });
    expect(verify.mode).toBe("all");
    expect((verify.results as { claims: Array<{ text: string; status: string }> }).claims).toMatchObject([
      { text: "The dataset is about 2GB", status: "verified" },
      { text: "Downtime of 3 hours is planned", status: "contradicted" },
    ]);
  });

  it("answers council_verify in mode all with mode all, the word it was asked in", async () => {
    const c = await connect();
    const { sessionId } = ok(await c.call("council_init", { task: MIGRATION_TASK })) as { sessionId: string };
    const claims = [{ text: "The dataset is about 2GB" }];
    expect(ok(await c.call("council_verify", { sessionId, claims, mode: "all" }))).toMatchObject({ mode: "all", total: 1 });
    expect(ok(await c.call("council_verify", { sessionId, claims, mode: "contradiction" }))).toMatchObject({ mode: "contradiction" });
  });

  it("refuses skipping, out-of-order and locked re-saves with a message naming the active phase", async () => {
    const c = await connect();
    const { sessionId } = ok(await c.call("council_init", { task: MIGRATION_TASK })) as { sessionId: string };
    const skipped = errorOf(await c.call("council_save", { sessionId, phase: "critique", output: MIGRATION_OUTPUTS.critique }));
    expect(skipped).toMatchObject({ code: "failed_precondition" });
    expect(skipped.message).toMatch(/cannot save critique: the active phase is decompile/);
    ok(await c.call("council_save", { sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile }));
    const again = errorOf(await c.call("council_save", { sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile }));
    expect(again.message).toMatch(/locked/);
    const cont = ok(await c.call("council_continue", { sessionId }));
    expect(cont).toMatchObject({ activePhase: "design", activePersona: "Solution Architect" });
  });

  it("names the field of a bad argument at the edge, before any call", async () => {
    const c = await connect();
    const { sessionId } = ok(await c.call("council_init", { task: MIGRATION_TASK })) as { sessionId: string };
    const L = COUNCIL_INPUT_LIMITS;
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ["council_init", {}, /task/],
      ["council_init", { task: "" }, /task must not be empty/],
      ["council_init", { task: "x".repeat(L.maxTaskChars + 1) }, /task must be at most 20000 characters/],
      ["council_init", { task: "t", title: "x".repeat(L.maxTitleChars + 1) }, /title must be at most 200 characters/],
      ["council_save", { sessionId: "not-a-session", phase: "decompile", output: {} }, /sessionId must be a session id returned by council_init/],
      ["council_save", { sessionId, phase: "deploy", output: {} }, /phase/],
      ["council_save", { sessionId, phase: "decompile", output: "text" }, /output/],
      ["council_save", { sessionId, phase: "decompile", output: { summary: "x".repeat(L.maxOutputChars) } }, /output is 200014 characters as JSON; the limit is 200000/],
      ["council_recall", { sessionId, format: "everything" }, /format/],
      ["council_verify", { sessionId, claims: [] }, /claims must list at least one claim/],
      ["council_verify", { sessionId, claims: Array.from({ length: L.maxClaimsToVerify + 1 }, () => ({ text: "a claim" })) }, /claims must list at most 100 claims/],
      ["council_verify", { sessionId, claims: [{ source: "s" }] }, /claims.*text/s],
      ["council_verify", { sessionId, claims: [{ text: "ok" }], mode: "both" }, /mode/],
    ];
    for (const [name, args, field] of cases) {
      const res = await c.call(name, args);
      expect(res.isError, `${name} ${JSON.stringify(args).slice(0, 80)}`).toBe(true);
      expect(text(res)).toMatch(/^invalid_argument: /);
      expect(text(res)).toMatch(field);
    }
  });

  it("passes the service's field-level validation of a phase output through, naming the field", async () => {
    const c = await connect();
    const { sessionId } = ok(await c.call("council_init", { task: MIGRATION_TASK })) as { sessionId: string };
    const { confidence: _dropped, ...noConfidence } = MIGRATION_OUTPUTS.decompile;
    const err = errorOf(await c.call("council_save", { sessionId, phase: "decompile", output: { ...noConfidence, claims: "none" } }));
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toMatch(/confidence/);
    expect(err.message).toMatch(/claims/);
  });

  it("names in council_save's description the fields of every list item it then enforces", async () => {
    const c = await connect();
    const save = (await c.client.listTools()).tools.find((t) => t.name === "council_save")!;
    const described = (save.inputSchema.properties as Record<string, { description?: string }>).output!.description ?? "";
    const items = {
      decisions: "{text, rationale?, alternatives?}",
      claims: "{text, certainty (confirmed|likely|uncertain|unknown|assumption), source?}",
      approaches: "{name, description, pros?, cons?}",
      vulnerabilities: "{description, severity (low|medium|high|critical), area?, mitigation?}",
      checks: "{name, passed, details?}",
      knowledgeBoundary: "{whatIKnow, whatIAssume, whatIDontKnow, whatNeedsVerification}",
    };
    for (const [field, shape] of Object.entries(items)) expect(described).toContain(`${field} ${shape}`);
    // And what the description leaves out is refused, naming it.
    const { sessionId } = ok(await c.call("council_init", { task: MIGRATION_TASK })) as { sessionId: string };
    const decisions = [{ text: "move the queue first", rationale: "it has no readers", owner: "ops" }];
    const err = errorOf(await c.call("council_save", { sessionId, phase: "decompile", output: { ...MIGRATION_OUTPUTS.decompile, decisions } }));
    expect(err.code).toBe("invalid_argument");
    expect(err.message).toContain("output.decisions[0].owner: unknown field; accepted fields: text, rationale, alternatives");
  });

  it("keeps sessions per tenant: another tenant's session id is not found", async () => {
    const a = await connect();
    const b = await connect();
    const { sessionId } = ok(await a.call("council_init", { task: MIGRATION_TASK })) as { sessionId: string };
    for (const [name, args] of [
      ["council_recall", { sessionId }],
      ["council_continue", { sessionId }],
      ["council_save", { sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile }],
    ] as const) {
      expect(errorOf(await b.call(name, args))).toEqual({ code: "not_found", message: `session ${sessionId} was not found` });
    }
    ok(await a.call("council_continue", { sessionId }));
  });
});

describe("the council prompts", () => {
  it("lists one brief per persona and the active-phase brief", async () => {
    const c = await connect();
    const { prompts } = await c.client.listPrompts();
    expect(prompts.map((p) => p.name)).toEqual([
      "council_brief_decompile",
      "council_brief_design",
      "council_brief_critique",
      "council_brief_synthesis",
      "council_brief_verify",
      "council_phase_brief",
    ]);
    expect(prompts.find((p) => p.name === "council_phase_brief")?.arguments).toEqual([
      expect.objectContaining({ name: "sessionId", required: true }),
    ]);
    expect(prompts.find((p) => p.name === "council_brief_design")?.arguments ?? []).toEqual([]);
  });

  it("renders a persona's brief, and a session's active brief as it moves on", async () => {
    const c = await connect();
    const critique = await c.client.getPrompt({ name: "council_brief_critique" });
    const body = (critique.messages[0]!.content as { text: string }).text;
    expect(body).toMatch(/^# Council phase "critique": you are the Security & Quality Auditor/);
    expect(body).toMatch(/## Not your authority/);
    expect(body).toMatch(/council_save/);

    const { sessionId } = ok(await c.call("council_init", { task: MIGRATION_TASK })) as { sessionId: string };
    const first = await c.client.getPrompt({ name: "council_phase_brief", arguments: { sessionId } });
    expect((first.messages[0]!.content as { text: string }).text).toMatch(/you are the Systems Analyst[\s\S]*Migrate MySQL to PostgreSQL/);
    ok(await c.call("council_save", { sessionId, phase: "decompile", output: MIGRATION_OUTPUTS.decompile }));
    const second = await c.client.getPrompt({ name: "council_phase_brief", arguments: { sessionId } });
    expect((second.messages[0]!.content as { text: string }).text).toMatch(
      new RegExp(`you are the Solution Architect[\\s\\S]*"sessionId": "${sessionId}", "phase": "design"`),
    );
  });

  it("answers a bad or foreign session id with an invalid-params error naming it", async () => {
    const a = await connect();
    const b = await connect();
    const { sessionId } = ok(await a.call("council_init", { task: MIGRATION_TASK })) as { sessionId: string };
    const foreign = await b.client.getPrompt({ name: "council_phase_brief", arguments: { sessionId } }).catch((e: unknown) => e);
    expect(foreign).toBeInstanceOf(McpError);
    expect((foreign as McpError).code).toBe(-32602);
    expect((foreign as McpError).message).toMatch(`not_found: session ${sessionId} was not found`);
    const bad = await b.client.getPrompt({ name: "council_phase_brief", arguments: { sessionId: "x" } }).catch((e: unknown) => e);
    expect((bad as McpError).code).toBe(-32602);
    expect((bad as McpError).message).toMatch(/sessionId/);
  });
});
