/**
 * The cognitive core loop against the real policy and memory services on a fresh Postgres
 * database, through in-process clients (the pattern of executor.test.ts; the harness is repeated
 * here rather than shared, as that file keeps its own).
 */
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { startRealServices, type RealServices } from "../../../../test/support/real-services.js";
import { defineCapability } from "../capabilities/capability.js";
import { BUILT_IN_CAPABILITIES } from "../capabilities/index.js";
import { createCapabilityRegistry } from "../capabilities/registry.js";
import { createMemoryApprovalStore } from "../executor/approvals.js";
import { createInMemoryAuditSink, type InMemoryAuditSink } from "../executor/audit.js";
import type { AIProvider } from "../providers/ai-provider.js";
import { HeuristicProvider } from "../providers/heuristic.js";
import { OpenAICompatibleProvider } from "../providers/openai-compatible.js";
import { expectChaosError } from "../test-support/expect-error.js";
import { chatReply, startOpenAIStandIn } from "../test-support/openai-stand-in.js";
import { runCognitiveCore, type BrainDeps, type BrainStage } from "./brain.js";
import { memoryEpisodeCapability } from "../capabilities/memory-episode.js";
import { EPISODE_TAG, episodeValue, PROCEDURE_TAG, procedureKey, signatureTag } from "./memory-records.js";
import { objectiveSignature } from "./signature.js";

let services: RealServices;
let policy: BrainDeps["policy"];
let memory: BrainDeps["memory"];

beforeAll(async () => {
  services = await startRealServices("chaoscore_cognition_brain");
  policy = services.policy;
  memory = services.memory;
});

afterAll(async () => {
  await services?.close();
});

let tenantCounter = 0;
function uniqueTenant(): string {
  tenantCounter += 1;
  return `brain-${process.pid}-${tenantCounter}`;
}

const putPolicy = (tenant: string, document: Record<string, unknown>) => services.putPolicy(tenant, document);

let calls: string[];
beforeEach(() => {
  calls = [];
});

const ANNOTATIONS = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;

const frobnicate = defineCapability({
  name: "test.frobnicate",
  description: "Frobnicate widgets.",
  risk: "low",
  inputSchema: z.object({ text: z.string().min(1) }),
  outputSchema: z.object({ done: z.boolean() }),
  annotations: ANNOTATIONS,
  fromObjective: (objective) => ({ text: objective }),
  handler() {
    calls.push("test.frobnicate");
    return Promise.resolve({ done: true });
  },
});

const calibrate = defineCapability({
  name: "test.calibrate",
  description: "Calibrate gizmos.",
  risk: "low",
  inputSchema: z.object({}),
  outputSchema: z.object({ offset: z.number() }),
  annotations: ANNOTATIONS,
  fromObjective: () => ({}),
  handler() {
    calls.push("test.calibrate");
    // Says it went well; only the output schema decides, and it disagrees.
    return Promise.resolve({ status: "success", message: "calibrated perfectly" } as unknown as { offset: number });
  },
});

const registry = createCapabilityRegistry([...BUILT_IN_CAPABILITIES, frobnicate, calibrate]);

function harness(tenant: string, provider: AIProvider = new HeuristicProvider()): { deps: BrainDeps; audit: InMemoryAuditSink } {
  const audit = createInMemoryAuditSink();
  return {
    audit,
    deps: {
      registry,
      policy,
      memory,
      provider,
      audit,
      approvals: createMemoryApprovalStore(),
      call: { tenant, principal: "agent", sessionId: "session-1" },
      stepTimeoutMs: 5_000,
    },
  };
}

function recorder(): { stages: BrainStage[]; onStage: (stage: BrainStage) => void } {
  const stages: BrainStage[] = [];
  return { stages, onStage: (stage) => void stages.push(stage) };
}

async function recallValue(tenant: string, key: string): Promise<{ tags: string[]; value: unknown } | undefined> {
  const res = await memory.recall({ key }, { ctx: { tenant, principal: "agent" } });
  return res.item ? { tags: [...res.item.tags], value: res.item.value ? toJson(ValueSchema, res.item.value) : null } : undefined;
}

describe("runCognitiveCore", () => {
  it("records an episode and a procedure on success, and offers the procedure first the next time", async () => {
    const tenant = uniqueTenant();
    const { deps } = harness(tenant);
    const objective = "Remember that the build server is ci-7";
    const signature = objectiveSignature(objective);
    const { stages, onStage } = recorder();

    const first = await runCognitiveCore({ objective, onStage }, deps);
    expect(first.status).toBe("succeeded");
    expect(first.replans).toBe(0);
    expect(first.plans[0]?.source).toBe("heuristic");
    expect(first.intent.model).toBe("none");
    expect(stages).toEqual(["context", "reason", "plan", "execute", "evaluate", "remember"]);
    const sequence = first.results.map((r) => r.capability);
    expect(sequence).toContain("memory.remember");
    expect(first.results.every((r) => r.status === "executed")).toBe(true);

    const episode = await recallValue(tenant, first.episodeKey!);
    expect(episode?.tags).toEqual([EPISODE_TAG, signatureTag(signature)]);
    expect(episode?.value).toMatchObject({ status: "succeeded", replans: 0, steps: sequence.map((capability) => ({ capability, status: "executed" })) });
    // Step inputs and output values are not kept, only shapes.
    expect(JSON.stringify((episode?.value as { steps: unknown }).steps)).not.toContain("ci-7");
    const procedure = await recallValue(tenant, procedureKey(signature));
    expect(procedure).toMatchObject({ tags: [PROCEDURE_TAG, signatureTag(signature)], value: { capabilities: sequence } });
    expect(first.bookkeeping).toEqual([
      expect.objectContaining({ kind: "episode", stored: true, key: first.episodeKey, decision: "ALLOW" }),
      expect.objectContaining({ kind: "procedure", stored: true, key: procedureKey(signature), decision: "ALLOW" }),
    ]);

    const second = await runCognitiveCore({ objective: "the build server is ci-7: remember that!" }, deps);
    expect(second.context.procedure).toEqual(sequence);
    expect(second.context.episodes).toHaveLength(1);
    expect(second.context.memories.map((m) => m.key)).toContain("build-server");
    expect(second.context.memories.every((m) => !m.key.startsWith("episode:") && !m.key.startsWith("procedure:"))).toBe(true);
    expect(second.plans[0]?.source).toBe("procedure");
    expect(second.plans[0]?.steps.map((s) => s.capability)).toEqual(sequence);
    expect(second.status).toBe("succeeded");
  });

  it("a question memory cannot answer offline says it needs a language model", async () => {
    const { deps } = harness(uniqueTenant());
    const asked = await runCognitiveCore({ objective: "what is the capital of France?" }, deps);
    // The recall ran and found nothing: the run did what it planned, but the question has no answer.
    expect(asked.results.map((r) => [r.capability, r.status])).toEqual([["memory.recall", "executed"]]);
    expect(asked.status).toBe("succeeded");
    const unanswered =
      'Memory holds nothing about "capital-of-france". A question beyond what memory holds needs a language model; none is configured ' +
      "(set CHAOS_CORE_PROVIDER=openai (with OPENAI_API_KEY and OPENAI_MODEL) or CHAOS_CORE_PROVIDER=openai-compatible " +
      "(with OPENAI_BASE_URL and OPENAI_MODEL); see docs/cognition.md).";
    expect(asked.summary).toBe(unanswered);
    expect(asked.notes).toContain(unanswered);

    // What memory holds is the answer, offline as before.
    expect((await runCognitiveCore({ objective: "remember that the capital of France is Paris" }, deps)).status).toBe("succeeded");
    const answered = await runCognitiveCore({ objective: "what is the capital of France?" }, deps);
    expect(answered.summary).toBe("capital-of-france: Paris.");
    expect(answered.notes.join(" ")).not.toContain("language model");
    // A search is of memory only: finding nothing is its whole answer.
    expect((await runCognitiveCore({ objective: "find notes mentioning lyon" }, deps)).summary).toBe('Nothing stored matches "lyon".');
  });

  it("never reaches the handler of a denied capability, and does not re-plan around the denial", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { deniedCapabilities: ["test.frobnicate"] });
    const { stages, onStage } = recorder();
    const trace = await runCognitiveCore({ objective: "frobnicate the widgets", onStage }, harness(tenant).deps);
    expect(calls).toEqual([]);
    expect(trace).toMatchObject({ status: "denied", replans: 0 });
    expect(trace.results[0]).toMatchObject({ capability: "test.frobnicate", status: "denied", ran: false });
    expect(stages).not.toContain("replan");
    expect(trace.episodeKey).toBeDefined();
    expect(await recallValue(tenant, procedureKey(objectiveSignature("frobnicate the widgets")))).toBeUndefined();
  });

  it("stops at once on an approval-required step: nothing runs after it and nothing is re-planned", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { requireConfirmationFor: ["test.calibrate"] });
    const { stages, onStage } = recorder();
    // Both rank equally; ties go by name, so the plan is [test.calibrate, test.frobnicate].
    const trace = await runCognitiveCore({ objective: "frobnicate the widgets and calibrate the gizmos", onStage }, harness(tenant).deps);
    expect(calls).toEqual([]);
    expect(trace).toMatchObject({ status: "pending_approval", replans: 0 });
    expect(trace.plans).toHaveLength(1);
    expect(trace.results.map((r) => r.status)).toEqual(["pending_approval", "skipped"]);
    expect(trace.results.map((r) => r.capability)).toEqual(["test.calibrate", "test.frobnicate"]);
    expect(trace.results[0]?.approval?.capability).toBe("test.calibrate");
    expect(stages).toEqual(["context", "reason", "plan", "execute", "evaluate", "remember"]);
  });

  it("bounds re-planning: a step that always fails its output schema is re-planned maxReplans times, then the run fails", async () => {
    const { stages, onStage } = recorder();
    const trace = await runCognitiveCore({ objective: "calibrate the gizmos", maxReplans: 2, onStage }, harness(uniqueTenant()).deps);
    expect(trace).toMatchObject({ status: "failed", replans: 2 });
    expect(trace.plans).toHaveLength(3);
    expect(calls).toEqual(["test.calibrate", "test.calibrate", "test.calibrate"]);
    // The handler said "success"; the schema says otherwise, and the schema decides.
    for (const result of trace.results) {
      expect(result).toMatchObject({ status: "failed", ran: true, evaluation: { succeeded: false } });
      expect(result.evaluation.problems.join(" ")).toContain("output.offset");
    }
    expect(new Set(trace.results.map((r) => r.stepId)).size).toBe(3);
    expect(stages).toEqual([
      "context", "reason", "plan",
      "execute", "evaluate", "replan",
      "execute", "evaluate", "replan",
      "execute", "evaluate", "remember",
    ]);

    calls = [];
    const none = await runCognitiveCore({ objective: "calibrate the gizmos", maxReplans: 0 }, harness(uniqueTenant()).deps);
    expect(none).toMatchObject({ status: "failed", replans: 0 });
    expect(calls).toEqual(["test.calibrate"]);
    await expectChaosError(runCognitiveCore({ objective: "calibrate the gizmos", maxReplans: 99 }, harness(uniqueTenant()).deps), "invalid_argument");
  });
});

/** Every bookkeeping item the tenant's memory holds: episodes and procedures. */
async function bookkeepingItems(tenant: string): Promise<string[]> {
  const res = await memory.search({ query: "", tags: [], limit: 100, cursor: "" }, { ctx: { tenant, principal: "agent" } });
  return res.items.map((i) => i.key).filter((k) => k.startsWith("episode:") || k.startsWith("procedure:"));
}

describe("the brain's own writes, under policy", () => {
  const OBJECTIVE = "frobnicate the widgets";

  it("stores no episode or procedure while memory.remember is denied, and the trace and the audit say which rule held", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { deniedCapabilities: ["memory.remember"] });
    const { deps, audit } = harness(tenant);
    const trace = await runCognitiveCore({ objective: OBJECTIVE }, deps);

    // The run itself is not memory.remember: it succeeds; only its record is refused.
    expect(trace.status).toBe("succeeded");
    expect(calls).toEqual(["test.frobnicate"]);
    expect(await bookkeepingItems(tenant)).toEqual([]);
    expect(trace.episodeKey).toBeUndefined();
    const held = { stored: false, decision: "DENY", matchedRule: "memory.remember: deniedCapabilities" };
    expect(trace.bookkeeping).toEqual([expect.objectContaining({ kind: "episode", ...held }), expect.objectContaining({ kind: "procedure", ...held })]);
    expect(trace.bookkeeping.every((w) => w.key === undefined)).toBe(true);
    expect(trace.notes).toContain("The episode was not stored: policy denied memory.remember (deniedCapabilities)");
    expect(trace.notes).toContain("The procedure was not stored: policy denied memory.remember (deniedCapabilities)");

    const decisions = audit.events().filter((e) => e.type === "step.decision" && e.capability === "memory.episode");
    expect(decisions).toHaveLength(2);
    expect(decisions[0]).toMatchObject({
      verdict: {
        decision: "DENY",
        matchedRule: "memory.remember: deniedCapabilities",
        decidedBy: "memory.remember",
        implied: [{ capability: "memory.remember", risk: "low", verdict: { decision: "DENY", matchedRule: "deniedCapabilities" } }],
      },
    });
    const outcomes = audit.events().filter((e) => e.type === "step.outcome" && e.capability === "memory.episode");
    expect(outcomes.map((e) => e.type === "step.outcome" && [e.status, e.ran])).toEqual([["denied", false], ["denied", false]]);
    // The ledger gets hashes, never the episode's text.
    expect(JSON.stringify(audit.events())).not.toContain("widgets");
  });

  it("stores nothing while memory.episode itself is denied, naming that rule", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { deniedCapabilities: ["memory.episode"] });
    const trace = await runCognitiveCore({ objective: OBJECTIVE }, harness(tenant).deps);
    expect(trace.status).toBe("succeeded");
    expect(await bookkeepingItems(tenant)).toEqual([]);
    expect(trace.bookkeeping[0]).toMatchObject({ kind: "episode", stored: false, decision: "DENY", matchedRule: "deniedCapabilities" });
    expect(trace.notes).toContain("The episode was not stored: policy denied memory.episode (deniedCapabilities)");
  });

  it("never asks a person for its bookkeeping: a REQUIRE_APPROVAL skips the write and creates no approval", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const { deps, audit } = harness(tenant);
    const trace = await runCognitiveCore({ objective: OBJECTIVE }, deps);
    expect(trace.status).toBe("succeeded");
    expect(await bookkeepingItems(tenant)).toEqual([]);
    expect(await deps.approvals.listPending(tenant, 100)).toEqual([]);
    expect(trace.bookkeeping[0]).toMatchObject({
      kind: "episode",
      stored: false,
      decision: "REQUIRE_APPROVAL",
      matchedRule: "memory.remember: requireConfirmationFor",
    });
    expect(trace.notes).toContain(
      "The episode was not stored: policy requires a person's approval for memory.remember (requireConfirmationFor), and bookkeeping never waits for one",
    );
    const outcome = audit.events().find((e) => e.type === "step.outcome" && e.capability === "memory.episode");
    expect(outcome).toMatchObject({ status: "denied", ran: false, errorCode: "approval_required" });
    expect(outcome).not.toHaveProperty("approvalId");
  });
});

describe("an episode's value", () => {
  it("keeps a long run's record within memory.episode's bound, step by step, dropping problems and shapes", () => {
    const problem = "p".repeat(200);
    const results = Array.from({ length: 300 }, (_, i) => ({
      stepId: `p${Math.floor(i / 50) + 1}-s${(i % 50) + 1}`,
      capability: "test.calibrate",
      status: "failed" as const,
      ran: true,
      evaluation: { succeeded: false, problems: [problem, problem, problem, problem, problem] },
    }));
    const episode = { objective: "calibrate", signature: "s", status: "failed", replans: 5, provider: "heuristic", model: "none", results };
    const value = episodeValue(episode, new Date(0));
    expect(value).toMatchObject({ compact: true, status: "failed" });
    expect((value.steps as unknown[])[299]).toEqual({ id: "p6-s50", capability: "test.calibrate", status: "failed", ran: true });
    const input = { key: "episode:s:x", value, tags: [EPISODE_TAG], ttl_seconds: 60 };
    expect(memoryEpisodeCapability.inputSchema.safeParse(input).success).toBe(true);
    // A short run is kept whole.
    expect(episodeValue({ ...episode, results: results.slice(0, 2) }, new Date(0))).not.toHaveProperty("compact");
  });
});

describe("runCognitiveCore with a model provider (stand-in server)", () => {
  const intentReply = chatReply(
    JSON.stringify({ goal: "calibrate", constraints: [], successCriteria: [], ambiguities: [], risk: "low", candidateCapabilities: ["test.calibrate"] }),
  );

  it("counts a step whose output fails its schema as failed, whatever the model said about it", async () => {
    const server = await startOpenAIStandIn();
    try {
      server.script(
        intentReply,
        chatReply(JSON.stringify({ steps: [{ capability: "test.calibrate", input: {}, rationale: "This will certainly succeed." }] })),
      );
      const provider = new OpenAICompatibleProvider({ baseURL: server.baseURL, model: "m", maxRetries: 0 });
      const trace = await runCognitiveCore({ objective: "calibrate the gizmos", maxReplans: 0 }, harness(uniqueTenant(), provider).deps);
      expect(trace.status).toBe("failed");
      expect(trace.results[0]).toMatchObject({ status: "failed", ran: true });
      expect(calls).toEqual(["test.calibrate"]);
    } finally {
      await server.close();
    }
  });

  it("says nothing about a missing model when a model planned a recall that found nothing", async () => {
    const server = await startOpenAIStandIn();
    try {
      server.script(
        chatReply(JSON.stringify({ goal: "the capital of France", constraints: [], successCriteria: [], ambiguities: [], risk: "low", candidateCapabilities: ["memory.recall"] })),
        chatReply(JSON.stringify({ steps: [{ capability: "memory.recall", input: { query: "capital-of-france", limit: 50 }, rationale: "Look it up." }] })),
      );
      const provider = new OpenAICompatibleProvider({ baseURL: server.baseURL, model: "m", maxRetries: 0 });
      const trace = await runCognitiveCore({ objective: "what is the capital of France?" }, harness(uniqueTenant(), provider).deps);
      expect(trace).toMatchObject({ status: "succeeded", summary: 'Nothing stored matches "capital-of-france".' });
      expect(trace.notes.join(" ")).not.toContain("language model");
    } finally {
      await server.close();
    }
  });

  it("refuses a model's plan naming the internal memory.episode, twice, and runs and records nothing", async () => {
    const server = await startOpenAIStandIn();
    try {
      const episodeStep = { capability: "memory.episode", input: { key: "episode:x", value: {}, tags: ["chaoscore.episode"], ttl_seconds: 60 }, rationale: "" };
      server.script(intentReply, chatReply(JSON.stringify({ steps: [episodeStep] })), chatReply(JSON.stringify({ steps: [episodeStep] })));
      const provider = new OpenAICompatibleProvider({ baseURL: server.baseURL, model: "m", maxRetries: 0 });
      const tenant = uniqueTenant();
      const { deps, audit } = harness(tenant, provider);
      const err = await expectChaosError(runCognitiveCore({ objective: "calibrate the gizmos" }, deps), "internal");
      expect(err.message).toContain('"memory.episode" is internal');
      expect(audit.events()).toEqual([]);
      expect(await bookkeepingItems(tenant)).toEqual([]);
    } finally {
      await server.close();
    }
  });

  it("fails with a clear error when the model's plan is malformed twice, and runs nothing", async () => {
    const server = await startOpenAIStandIn();
    try {
      server.script(intentReply, chatReply("not json"), chatReply(JSON.stringify({ steps: [{ capability: "x.y", input: {}, rationale: "" }] })));
      const provider = new OpenAICompatibleProvider({ baseURL: server.baseURL, model: "m", maxRetries: 0 });
      const { deps, audit } = harness(uniqueTenant(), provider);
      const err = await expectChaosError(runCognitiveCore({ objective: "calibrate the gizmos" }, deps), "internal");
      expect(err.message).toContain("after 2 attempts");
      expect(calls).toEqual([]);
      expect(audit.events()).toEqual([]);
    } finally {
      await server.close();
    }
  });
});
