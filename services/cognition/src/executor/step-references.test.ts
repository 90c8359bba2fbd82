/**
 * Step references ({"$step": id, "path": pointer}) through the executor, against the real policy
 * and memory services: resolved before the schema, the argument hash, policy and any approval,
 * so what is hashed, recorded and approved is the value that really runs.
 */
import { createHash } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { startRealServices, type RealServices } from "../../../../test/support/real-services.js";
import { defineCapability } from "../capabilities/capability.js";
import { createCapabilityRegistry } from "../capabilities/registry.js";
import { resolveReferences } from "../plans/step-reference.js";
import { HeuristicProvider } from "../providers/heuristic.js";
import { createMemoryApprovalStore } from "./approvals.js";
import { createInMemoryAuditSink } from "./audit.js";
import { resolveApproval } from "./approval-resolution.js";
import { executeApproved } from "./approved-run.js";
import type { ExecutorDeps } from "./executor-deps.js";
import { executeSteps } from "./plan-run.js";
import { executeStep } from "./step-run.js";

let services: RealServices;
beforeAll(async () => {
  services = await startRealServices("chaoscore_cognition_step_refs");
});
afterAll(async () => {
  await services?.close();
});

let calls: Array<{ capability: string; input: unknown }>;
beforeEach(() => {
  calls = [];
});

const ANNOTATIONS = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;

const produce = defineCapability({
  name: "test.produce",
  description: "Returns a fixed record.",
  risk: "low",
  inputSchema: z.object({}),
  outputSchema: z.object({ status: z.number(), body: z.string(), items: z.array(z.object({ key: z.string() })) }),
  annotations: ANNOTATIONS,
  handler() {
    calls.push({ capability: "test.produce", input: {} });
    return Promise.resolve({ status: 200, body: "all good", items: [{ key: "a/b" }] });
  },
});

const consume = defineCapability({
  name: "test.consume",
  description: "Takes a text.",
  risk: "low",
  inputSchema: z.object({ text: z.string().min(1) }),
  outputSchema: z.object({ got: z.string() }),
  annotations: ANNOTATIONS,
  handler(input) {
    calls.push({ capability: "test.consume", input });
    return Promise.resolve({ got: input.text });
  },
});

const registry = createCapabilityRegistry([produce, consume]);
let n = 0;
function deps(): { deps: ExecutorDeps; tenant: string; audit: ReturnType<typeof createInMemoryAuditSink> } {
  n += 1;
  const tenant = `refs-${process.pid}-${n}`;
  const audit = createInMemoryAuditSink();
  return {
    tenant,
    audit,
    deps: {
      registry,
      policy: services.policy,
      memory: services.memory,
      provider: new HeuristicProvider(),
      audit,
      approvals: createMemoryApprovalStore(),
      call: { tenant, principal: "agent", sessionId: "session-1" },
    },
  };
}

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest("hex");

describe("step references", () => {
  it("resolve against an earlier step's output before the schema, and the handler gets the value", async () => {
    const { deps: d, audit } = deps();
    const results = await executeSteps(
      [
        { id: "s1", capability: "test.produce", input: {} },
        { id: "s2", capability: "test.consume", input: { text: { $step: "s1", path: "/body" } } },
        { id: "s3", capability: "test.consume", input: { text: { $step: "s1", path: "/items/0/key" } } },
      ],
      d,
    );
    expect(results.map((r) => r.status)).toEqual(["executed", "executed", "executed"]);
    expect(calls.slice(1)).toEqual([
      { capability: "test.consume", input: { text: "all good" } },
      { capability: "test.consume", input: { text: "a/b" } },
    ]);
    // The recorded decision hashes the resolved input, not the reference (these steps are
    // read-only, so decision and outcome are one step.read entry).
    const decision = audit.events().find((e) => "stepId" in e && e.stepId === "s2");
    expect(decision).toMatchObject({ type: "step.read", verdict: { decision: "ALLOW" }, argsHash: sha256('{"text":"all good"}') });
  });

  it("a person approving sees, and the approval binds, the resolved value", async () => {
    const { deps: d, tenant } = deps();
    await services.putPolicy(tenant, { requireConfirmationFor: ["test.consume"] });
    const results = await executeSteps(
      [
        { id: "s1", capability: "test.produce", input: {} },
        { id: "s2", capability: "test.consume", input: { text: { $step: "s1", path: "/body" } } },
      ],
      d,
    );
    expect(results.map((r) => r.status)).toEqual(["executed", "pending_approval"]);
    const approval = results[1]!.approval!;
    expect(approval.step.input).toEqual({ text: "all good" });
    expect(approval.argsHash).toBe(sha256('{"text":"all good"}'));
    await resolveApproval(approval.approvalId, { approve: true, channel: "client_elicitation", by: d.call }, d);
    const ran = await executeApproved(approval.approvalId, d);
    expect(ran).toMatchObject({ status: "executed", output: { got: "all good" } });
  });

  it("fail the step, naming the field, when the step has not run, the path is missing or the reference is malformed", async () => {
    const { deps: d } = deps();
    const alone = await executeStep({ id: "s2", capability: "test.consume", input: { text: { $step: "s1" } } }, d);
    expect(alone).toMatchObject({ status: "failed", ran: false, error: { code: "invalid_argument" } });
    expect(alone.error?.message).toBe('input.text: refers to step "s1", which has not executed earlier in this run');

    const [, missing] = await executeSteps(
      [
        { id: "s1", capability: "test.produce", input: {} },
        { id: "s2", capability: "test.consume", input: { text: { $step: "s1", path: "/nope" } } },
      ],
      d,
    );
    expect(missing?.error?.message).toBe('input.text.path: step "s1"\'s output has nothing at "/nope" (no "nope")');

    const bad = await executeStep({ id: "s2", capability: "test.consume", input: { text: { $step: "s1", extra: 1 } } }, d);
    expect(bad.error?.message).toMatch(/^input\.text: a step reference has only "\$step" and "path"/);
    // Nothing but the producer ran.
    expect(calls.map((c) => c.capability)).toEqual(["test.produce"]);
  });

  it("resolve to the right type, and a wrong type fails the schema at its real depth", async () => {
    const { deps: d } = deps();
    const [, wrong] = await executeSteps(
      [
        { id: "s1", capability: "test.produce", input: {} },
        { id: "s2", capability: "test.consume", input: { text: { $step: "s1", path: "/status" } } },
      ],
      d,
    );
    expect(wrong).toMatchObject({ status: "failed", ran: false });
    expect(wrong?.evaluation.problems[0]).toMatch(/^input\.text: /);
    expect(resolveReferences({ a: [{ $step: "x", path: "/k~1l" }] }, new Map([["x", { "k/l": 3 }]]))).toEqual({ a: [3] });
  });
});
