/**
 * The executor against the real policy and memory services (the handlers their gRPC mains
 * serve) on a fresh Postgres database, reached through in-process clients. The capabilities
 * below are real capability objects whose handlers record every call.
 */
import { createHash } from "node:crypto";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { type CallContext } from "@chaos-core/kit";
import { startRealServices, type RealServices } from "../../../../test/support/real-services.js";
import { defineCapability, hasNoSideEffect, type CapabilityAnnotations, type CapabilityRisk } from "../capabilities/capability.js";
import { BUILT_IN_CAPABILITIES } from "../capabilities/index.js";
import { createCapabilityRegistry } from "../capabilities/registry.js";
import { HeuristicProvider } from "../providers/heuristic.js";
import { createMemoryApprovalStore, type InMemoryApprovalStore } from "./approvals.js";
import { createInMemoryAuditSink, type AuditEvent, type AuditSink, type InMemoryAuditSink } from "./audit.js";
import { resolveApproval } from "./approval-resolution.js";
import { executeApproved, executeApprovedPlan } from "./approved-run.js";
import type { ExecutorDeps } from "./executor-deps.js";
import { executeSteps } from "./plan-run.js";
import { executeStep } from "./step-run.js";
import type { ExecutableStep } from "./step-types.js";
import { expectChaosError } from "../test-support/expect-error.js";

let services: RealServices;
let policy: ExecutorDeps["policy"];
let memory: ExecutorDeps["memory"];

beforeAll(async () => {
  services = await startRealServices("chaoscore_cognition_executor");
  policy = services.policy;
  memory = services.memory;
});

afterAll(async () => {
  await services?.close();
});

let tenantCounter = 0;
function uniqueTenant(): string {
  tenantCounter += 1;
  return `exec-${process.pid}-${tenantCounter}`;
}

const putPolicy = (tenant: string, document: Record<string, unknown>) => services.putPolicy(tenant, document);

/** Every handler call, by capability name. */
let calls: Array<{ capability: string; input: unknown }>;
beforeEach(() => {
  calls = [];
});

// Most capabilities here stand for any capability with an effect (each handler call is recorded
// below): the strict order these tests check — the decision durable before the handler starts —
// is the one such a step keeps. A read-only step's single entry has its own tests ("a read-only
// step" below).
const ANNOTATIONS = { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;
const READ_ONLY = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;

function echo(name: string, risk: CapabilityRisk, annotations: CapabilityAnnotations = ANNOTATIONS) {
  return defineCapability({
    name,
    description: `Echoes its text (${risk} risk).`,
    risk,
    inputSchema: z.object({ text: z.string().min(1) }),
    outputSchema: z.object({ echo: z.string() }),
    annotations,
    handler(input) {
      calls.push({ capability: name, input });
      return Promise.resolve({ echo: input.text });
    },
  });
}

const badOutput = defineCapability({
  name: "test.bad_output",
  description: "Returns output its own schema rejects.",
  risk: "low",
  inputSchema: z.object({}),
  outputSchema: z.object({ echo: z.string() }),
  annotations: ANNOTATIONS,
  handler(input) {
    calls.push({ capability: "test.bad_output", input });
    // The handler "says it went well"; only the schema can tell.
    return Promise.resolve({ echo: 42, status: "success" } as unknown as { echo: string });
  },
});

const hang = defineCapability({
  name: "test.hang",
  description: "Never answers and ignores its abort signal.",
  risk: "low",
  inputSchema: z.object({}),
  outputSchema: z.object({}),
  annotations: ANNOTATIONS,
  handler(input) {
    calls.push({ capability: "test.hang", input });
    return new Promise(() => {});
  },
});

const leaky = defineCapability({
  name: "test.leaky",
  description: "Throws a plain error whose message holds a secret.",
  risk: "low",
  inputSchema: z.object({}),
  outputSchema: z.object({}),
  annotations: ANNOTATIONS,
  handler(input) {
    calls.push({ capability: "test.leaky", input });
    return Promise.reject(new Error("connect failed: password=hunter2"));
  },
});

const registry = createCapabilityRegistry([
  echo("test.echo", "low"),
  echo("test.other", "low"),
  echo("test.risky", "high"),
  badOutput,
  hang,
  leaky,
]);

interface Harness {
  deps: ExecutorDeps;
  audit: InMemoryAuditSink;
  approvals: InMemoryApprovalStore;
}

function harness(tenant: string, overrides: Partial<ExecutorDeps> = {}): Harness {
  const audit = createInMemoryAuditSink();
  const approvals = createMemoryApprovalStore();
  const call: CallContext = { tenant, principal: "agent", sessionId: "session-1" };
  return {
    audit,
    approvals,
    deps: { registry, policy, memory, provider: new HeuristicProvider(), audit, approvals, call, stepTimeoutMs: 5_000, ...overrides },
  };
}

function sha256(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

function summary(events: readonly AuditEvent[]): string[] {
  return events.map((e) =>
    e.type === "step.decision"
      ? `${e.stepId} decision ${e.verdict.decision}`
      : e.type === "step.outcome"
        ? `${e.stepId} outcome ${e.status}`
        : e.type === "step.read"
          ? `${e.stepId} read ${e.verdict.decision} ${e.status}`
        : e.type === "approval.refused"
          ? `${e.approvalId} refused ${e.channel} from ${e.principal}: ${e.code}`
          : `${e.approvalId} ${e.approved ? "approved" : "rejected"} by ${e.resolvedBy}`,
  );
}

describe("policy first", () => {
  it("never runs a denied capability, and records the denial before returning it", async () => {
    const tenant = uniqueTenant();
    const version = await putPolicy(tenant, { deniedCapabilities: ["test.echo"] });
    const { deps, audit } = harness(tenant);

    const result = await executeStep({ id: "s1", capability: "test.echo", input: { text: "hi" } }, deps);

    expect(calls).toEqual([]);
    expect(result).toMatchObject({
      status: "denied",
      ran: false,
      verdict: { decision: "DENY", matchedRule: "deniedCapabilities", policyVersion: version },
      evaluation: { succeeded: false },
    });
    expect(result.output).toBeUndefined();
    expect(summary(audit.events())).toEqual(["s1 decision DENY", "s1 outcome denied"]);
    expect(audit.events()[0]).toMatchObject({ call: { tenant, principal: "agent", sessionId: "session-1" }, risk: "low" });
  });

  it("runs an allowed capability and evaluates its output", async () => {
    const { deps, audit } = harness(uniqueTenant());
    const result = await executeStep({ id: "s1", capability: "test.echo", input: { text: "hi" } }, deps);
    expect(result).toMatchObject({ status: "executed", ran: true, output: { echo: "hi" }, evaluation: { succeeded: true, problems: [] } });
    expect(result.verdict).toMatchObject({ decision: "ALLOW", matchedRule: "default" });
    expect(calls).toEqual([{ capability: "test.echo", input: { text: "hi" } }]);
    expect(summary(audit.events())).toEqual(["s1 decision ALLOW", "s1 outcome executed"]);
  });

  it("stops at REQUIRE_APPROVAL with a pending approval bound to the call, even when the input says confirmed: true", async () => {
    const tenant = uniqueTenant();
    const version = await putPolicy(tenant, { requireConfirmationFor: ["test.echo"] });
    const { deps, audit, approvals } = harness(tenant);

    const results = await executeSteps(
      [
        { id: "s1", capability: "test.echo", input: { text: "ship it", confirmed: true } },
        { id: "s2", capability: "test.other", input: { text: "after" } },
      ],
      deps,
    );

    expect(calls).toEqual([]);
    expect(results.map((r) => r.status)).toEqual(["pending_approval", "skipped"]);
    const approval = results[0]?.approval;
    expect(approval).toMatchObject({
      step: { id: "s1", capability: "test.echo", input: { text: "ship it" } },
      capability: "test.echo",
      risk: "low",
      // The agent's flag is not part of the call: the hash covers the validated input only.
      argsHash: sha256('{"text":"ship it"}'),
      policyVersion: version,
      matchedRule: "requireConfirmationFor",
      call: { tenant, principal: "agent", sessionId: "session-1" },
    });
    expect(approval?.reason).toContain("human approval");
    expect(await approvals.get(tenant, approval!.approvalId)).toMatchObject({ ...approval, status: "pending" });
    expect(approvals.pending()).toHaveLength(1);
    expect(results[1]).toMatchObject({ status: "skipped", ran: false, error: { code: "approval_required" } });
    expect(summary(audit.events())).toEqual(["s1 decision REQUIRE_APPROVAL", "s1 outcome pending_approval"]);
    const stored = await approvals.get(tenant, approval!.approvalId);
    // What the ledger needs to notify a person (docs/approvals.md §6): risk, expiry, channels.
    expect(audit.events()[1]).toMatchObject({
      approvalId: approval!.approvalId,
      argsHash: approval!.argsHash,
      risk: "low",
      approvalExpiresAt: stored!.expiresAt,
      approvalChannels: [...approval!.channels!],
    });
  });

  it("stops a high-risk capability under the default policy's risk rule", async () => {
    const { deps, approvals } = harness(uniqueTenant());
    const result = await executeStep({ id: "s1", capability: "test.risky", input: { text: "x", confirmed: true } }, deps);
    expect(result).toMatchObject({
      status: "pending_approval",
      verdict: { decision: "REQUIRE_APPROVAL", matchedRule: "riskRules.requireApprovalAtOrAbove" },
    });
    expect(approvals.pending()[0]?.risk).toBe("high");
    expect(calls).toEqual([]);
  });
});

describe("before policy", () => {
  it("fails an unknown capability without guessing, naming what is registered", async () => {
    const { deps, audit } = harness(uniqueTenant());
    const result = await executeStep({ id: "s1", capability: "test.ech", input: { text: "hi" } }, deps);
    expect(result).toMatchObject({ status: "failed", ran: false, error: { code: "not_found" } });
    expect(result.error?.message).toContain("test.echo");
    expect(result.verdict).toBeUndefined();
    expect(calls).toEqual([]);
    expect(summary(audit.events())).toEqual(["s1 outcome failed"]);
  });

  it("fails input that does not match the schema, naming the field, and never asks policy or runs", async () => {
    const { deps, audit } = harness(uniqueTenant());
    const result = await executeStep({ id: "s1", capability: "test.echo", input: { text: 5 } }, deps);
    expect(result).toMatchObject({ status: "failed", ran: false, error: { code: "invalid_argument" } });
    expect(result.evaluation.problems).toHaveLength(1);
    expect(result.evaluation.problems[0]).toMatch(/^input\.text: /);
    expect(result.verdict).toBeUndefined();
    expect(calls).toEqual([]);
    expect(summary(audit.events())).toEqual(["s1 outcome failed"]);
  });

  it("fails a malformed declared check before anything runs", async () => {
    const { deps } = harness(uniqueTenant());
    const result = await executeStep(
      { id: "s1", capability: "test.echo", input: { text: "hi" }, checks: [{ expect: { path: "" } } as never] },
      deps,
    );
    expect(result.status).toBe("failed");
    expect(result.evaluation.problems.some((p) => p.startsWith("checks.0.expect.path"))).toBe(true);
    expect(calls).toEqual([]);
  });
});

describe("evaluation", () => {
  it("fails a handler whose output breaks its schema, even though it returned", async () => {
    const { deps, audit } = harness(uniqueTenant());
    const result = await executeStep({ id: "s1", capability: "test.bad_output", input: {} }, deps);
    expect(calls).toHaveLength(1);
    expect(result).toMatchObject({ status: "failed", ran: true, evaluation: { succeeded: false } });
    expect(result.evaluation.problems[0]).toMatch(/^output\.echo: /);
    expect(result.output).toBeUndefined();
    expect(summary(audit.events())).toEqual(["s1 decision ALLOW", "s1 outcome failed"]);
  });

  it("applies the step's declared checks", async () => {
    const { deps } = harness(uniqueTenant());
    const pass = await executeStep(
      { id: "s1", capability: "test.echo", input: { text: "hi" }, checks: [{ expect: { path: "echo", equals: "hi" } }] },
      deps,
    );
    expect(pass.status).toBe("executed");
    const fail = await executeStep(
      { id: "s2", capability: "test.echo", input: { text: "hi" }, checks: [{ expect: { path: "echo", equals: "bye" } }] },
      deps,
    );
    expect(fail).toMatchObject({ status: "failed", ran: true });
    expect(fail.evaluation.problems).toEqual(['check output.echo: expected "bye", got "hi"']);
    const missing = await executeStep(
      { id: "s3", capability: "test.echo", input: { text: "hi" }, checks: [{ expect: { path: "echo.deeper", equals: 1 } }] },
      deps,
    );
    expect(missing.evaluation.problems).toEqual(["check output.echo.deeper: no value at this path"]);
  });

  it("fails a handler that hangs past the step deadline with deadline_exceeded", async () => {
    const { deps, audit } = harness(uniqueTenant(), { stepTimeoutMs: 100 });
    const started = Date.now();
    const result = await executeStep({ id: "s1", capability: "test.hang", input: {} }, deps);
    expect(Date.now() - started).toBeLessThan(3_000);
    expect(result).toMatchObject({ status: "failed", ran: true, error: { code: "deadline_exceeded" } });
    expect(summary(audit.events())).toEqual(["s1 decision ALLOW", "s1 outcome failed"]);
    expect(audit.events()[1]).toMatchObject({ errorCode: "deadline_exceeded" });
  });

  it("reports a handler's unexpected error as internal without its message", async () => {
    const { deps, audit } = harness(uniqueTenant());
    const result = await executeStep({ id: "s1", capability: "test.leaky", input: {} }, deps);
    expect(result).toMatchObject({ status: "failed", ran: true, error: { code: "internal" } });
    expect(JSON.stringify(result)).not.toContain("hunter2");
    expect(JSON.stringify(audit.events())).not.toContain("hunter2");
  });
});

describe("a plan of steps", () => {
  it("skips the remaining steps after a failure, and audits every decision and outcome in order", async () => {
    const tenant = uniqueTenant();
    const { deps, audit } = harness(tenant);
    const steps: ExecutableStep[] = [
      { id: "s1", capability: "test.echo", input: { text: "one" } },
      { id: "s2", capability: "test.bad_output", input: {} },
      { id: "s3", capability: "test.other", input: { text: "three" } },
      { id: "s4", capability: "test.echo", input: { text: "four" } },
    ];
    const results = await executeSteps(steps, deps);
    expect(results.map((r) => `${r.stepId} ${r.status}`)).toEqual(["s1 executed", "s2 failed", "s3 skipped", "s4 skipped"]);
    expect(results[2]?.evaluation.problems).toEqual(["skipped: step s2 was failed"]);
    expect(calls.map((c) => c.capability)).toEqual(["test.echo", "test.bad_output"]);
    expect(summary(audit.events())).toEqual(["s1 decision ALLOW", "s1 outcome executed", "s2 decision ALLOW", "s2 outcome failed"]);
  });

  it("skips the remaining steps after a denial", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { deniedCapabilities: ["test.other"] });
    const { deps, audit } = harness(tenant);
    const results = await executeSteps(
      [
        { id: "a", capability: "test.echo", input: { text: "1" } },
        { id: "b", capability: "test.other", input: { text: "2" } },
        { id: "c", capability: "test.echo", input: { text: "3" } },
      ],
      deps,
    );
    expect(results.map((r) => r.status)).toEqual(["executed", "denied", "skipped"]);
    expect(calls.map((c) => c.input)).toEqual([{ text: "1" }]);
    expect(summary(audit.events())).toEqual(["a decision ALLOW", "a outcome executed", "b decision DENY", "b outcome denied"]);
  });

  it("refuses a plan with a repeated step id before running anything", async () => {
    const { deps, audit } = harness(uniqueTenant());
    const step = { id: "s1", capability: "test.echo", input: { text: "x" } };
    await expect(executeSteps([step, step], deps)).rejects.toMatchObject({ code: "invalid_argument" });
    expect(calls).toEqual([]);
    expect(audit.events()).toEqual([]);
  });
});

describe("the audit sink", () => {
  it("fails closed when the decision cannot be recorded: the handler is not called", async () => {
    const attempts: AuditEvent[] = [];
    const broken: AuditSink = {
      record(event) {
        attempts.push(event);
        return Promise.reject(new Error("ledger unreachable"));
      },
    };
    const { deps } = harness(uniqueTenant(), { audit: broken });
    const results = await executeSteps(
      [
        { id: "s1", capability: "test.echo", input: { text: "x" } },
        { id: "s2", capability: "test.echo", input: { text: "y" } },
      ],
      deps,
    );
    expect(calls).toEqual([]);
    expect(results[0]).toMatchObject({ status: "failed", ran: false, error: { code: "unavailable" }, verdict: { decision: "ALLOW" } });
    expect(results[1]?.status).toBe("skipped");
    expect(summary(attempts)).toEqual(["s1 decision ALLOW"]);
  });

  it("does not report success when the outcome cannot be recorded", async () => {
    const inner = createInMemoryAuditSink();
    const outcomeFails: AuditSink = {
      record(event) {
        return event.type === "step.outcome" ? Promise.reject(new Error("disk full")) : inner.record(event);
      },
    };
    const { deps } = harness(uniqueTenant(), { audit: outcomeFails });
    const result = await executeStep({ id: "s1", capability: "test.echo", input: { text: "x" } }, deps);
    expect(calls).toHaveLength(1);
    expect(result).toMatchObject({ status: "failed", ran: true, error: { code: "unavailable" } });
    expect(result.output).toBeUndefined();
  });

  it("fails the step when the pending approval cannot be created", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { requireConfirmationFor: ["test.echo"] });
    const { deps, audit } = harness(tenant, {
      approvals: { ...createMemoryApprovalStore(), create: () => Promise.reject(new Error("store down")) },
    });
    const result = await executeStep({ id: "s1", capability: "test.echo", input: { text: "x" } }, deps);
    expect(result).toMatchObject({ status: "failed", ran: false, error: { code: "internal" } });
    expect(result.approval).toBeUndefined();
    expect(calls).toEqual([]);
    expect(summary(audit.events())).toEqual(["s1 decision REQUIRE_APPROVAL", "s1 outcome failed"]);
  });
});

describe("a read-only step: decision and outcome in one entry", () => {
  const lookup = echo("test.lookup", "low", READ_ONLY);
  // Reads, but the call itself leaves for the outside world (a model provider, an HTTP host).
  const fetchOut = echo("test.fetch", "low", { ...READ_ONLY, openWorldHint: true });
  const throwing = defineCapability({
    name: "test.lookup_fails",
    description: "A read that fails.",
    risk: "low",
    inputSchema: z.object({}),
    outputSchema: z.object({}),
    annotations: READ_ONLY,
    handler(input) {
      calls.push({ capability: "test.lookup_fails", input });
      return Promise.reject(new Error("store down"));
    },
  });
  const reads = createCapabilityRegistry([lookup, fetchOut, throwing, echo("test.echo", "low")]);

  /** A sink that notes how many handler calls had happened when each event was recorded, and can hold records back. */
  function watchingSink() {
    const inner = createInMemoryAuditSink();
    const seen: Array<{ type: string; handlerCalls: number }> = [];
    let hold: Promise<void> | undefined;
    const sink: AuditSink = {
      async record(event) {
        seen.push({ type: event.type, handlerCalls: calls.length });
        if (hold) await hold;
        return inner.record(event);
      },
    };
    return { sink, inner, seen, holdWith: (p: Promise<void>) => (hold = p) };
  }

  it("only memory.recall of the built-ins qualifies: nothing that writes, reaches a model or the network", () => {
    expect(BUILT_IN_CAPABILITIES.filter((c) => hasNoSideEffect(c.annotations)).map((c) => c.name)).toEqual(["memory.recall"]);
  });

  it("records one step.read entry carrying both the decision and the outcome", async () => {
    const tenant = uniqueTenant();
    const version = await putPolicy(tenant, {});
    const { deps, audit } = harness(tenant, { registry: reads });
    const result = await executeStep({ id: "s1", capability: "test.lookup", input: { text: "hi" } }, deps);
    expect(result).toMatchObject({ status: "executed", ran: true, output: { echo: "hi" }, verdict: { decision: "ALLOW" } });
    expect(audit.events()).toEqual([
      {
        type: "step.read",
        call: { tenant, principal: "agent", sessionId: "session-1" },
        stepId: "s1",
        capability: "test.lookup",
        risk: "low",
        argsHash: sha256('{"text":"hi"}'),
        verdict: { decision: "ALLOW", matchedRule: "default", reason: expect.any(String) as string, policyVersion: version },
        status: "executed",
        ran: true,
        succeeded: true,
      },
    ]);
  });

  it("returns the result only once the entry is durable, and records it after the read", async () => {
    const { sink, inner, seen, holdWith } = watchingSink();
    let release!: () => void;
    holdWith(new Promise<void>((r) => (release = r)));
    const { deps } = harness(uniqueTenant(), { registry: reads, audit: sink });
    let settled = false;
    const pending = executeStep({ id: "s1", capability: "test.lookup", input: { text: "hi" } }, deps).finally(() => (settled = true));
    await expect.poll(() => seen.length).toBe(1);
    expect(seen).toEqual([{ type: "step.read", handlerCalls: 1 }]);
    await new Promise((r) => setTimeout(r, 50));
    expect(settled).toBe(false);
    expect(inner.events()).toEqual([]);
    release();
    expect(await pending).toMatchObject({ status: "executed", output: { echo: "hi" } });
    expect(summary(inner.events())).toEqual(["s1 read ALLOW executed"]);
  });

  it("records a failed read in its one entry, with the error code", async () => {
    const { deps, audit } = harness(uniqueTenant(), { registry: reads });
    const result = await executeStep({ id: "s1", capability: "test.lookup_fails", input: {} }, deps);
    expect(result).toMatchObject({ status: "failed", ran: true, error: { code: "internal" } });
    expect(audit.events()).toEqual([expect.objectContaining({ type: "step.read", status: "failed", ran: true, succeeded: false, errorCode: "internal" })]);
  });

  it("fails the call closed when the entry cannot be written: the result and what it read are withheld", async () => {
    const attempts: AuditEvent[] = [];
    const broken: AuditSink = {
      record(event) {
        attempts.push(event);
        return Promise.reject(new Error("ledger unreachable"));
      },
    };
    const { deps } = harness(uniqueTenant(), { registry: reads, audit: broken });
    const results = await executeSteps(
      [
        { id: "s1", capability: "test.lookup", input: { text: "secret" } },
        // Would carry what s1 read onward; it never gets it.
        { id: "s2", capability: "test.echo", input: { text: { $step: "s1", path: "/echo" } } },
      ],
      deps,
    );
    expect(results[0]).toMatchObject({ status: "failed", ran: true, error: { code: "unavailable" }, evaluation: { succeeded: false } });
    expect(results[0]?.error?.message).toMatch(/^the audit log could not record the read-only step/);
    expect(results[0]?.output).toBeUndefined();
    expect(JSON.stringify(results)).not.toContain("secret");
    expect(results[1]?.status).toBe("skipped");
    expect(calls.map((c) => c.capability)).toEqual(["test.lookup"]);
    expect(summary(attempts)).toEqual(["s1 read ALLOW executed"]);
  });

  it("still records a DENY before returning it, in two entries, and never runs", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { deniedCapabilities: ["test.lookup"] });
    const { deps, audit } = harness(tenant, { registry: reads });
    const result = await executeStep({ id: "s1", capability: "test.lookup", input: { text: "hi" } }, deps);
    expect(result).toMatchObject({ status: "denied", ran: false, verdict: { decision: "DENY" } });
    expect(calls).toEqual([]);
    expect(summary(audit.events())).toEqual(["s1 decision DENY", "s1 outcome denied"]);
  });

  it("still records a REQUIRE_APPROVAL as decision and outcome, and a resumed read as decision then outcome", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { requireConfirmationFor: ["test.lookup"] });
    const { deps, audit } = harness(tenant, { registry: reads });
    const pendingResult = await executeStep({ id: "s1", capability: "test.lookup", input: { text: "hi" } }, deps);
    expect(pendingResult.status).toBe("pending_approval");
    const approvalId = pendingResult.approval!.approvalId;
    await resolveApproval(approvalId, { approve: true, channel: "approver", by: { tenant, principal: "alice" } }, deps);
    expect(await executeApproved(approvalId, deps)).toMatchObject({ status: "executed", output: { echo: "hi" } });
    expect(summary(audit.events())).toEqual([
      "s1 decision REQUIRE_APPROVAL",
      "s1 outcome pending_approval",
      `${approvalId} approved by alice (approver)`,
      "s1 decision REQUIRE_APPROVAL",
      "s1 outcome executed",
    ]);
  });

  it("keeps two entries, the decision durable before the handler, for a read that reaches the outside world or a step with an effect", async () => {
    for (const capability of ["test.fetch", "test.echo"]) {
      calls = [];
      const { sink, inner, seen } = watchingSink();
      const { deps } = harness(uniqueTenant(), { registry: reads, audit: sink });
      expect(await executeStep({ id: "s1", capability, input: { text: "hi" } }, deps)).toMatchObject({ status: "executed" });
      expect(seen).toEqual([
        { type: "step.decision", handlerCalls: 0 },
        { type: "step.outcome", handlerCalls: 1 },
      ]);
      expect(summary(inner.events())).toEqual(["s1 decision ALLOW", "s1 outcome executed"]);
    }
  });
});

describe("cancellation", () => {
  it("fails with cancelled when the caller aborts, without waiting for the deadline", async () => {
    const controller = new AbortController();
    const { deps } = harness(uniqueTenant(), { signal: controller.signal, stepTimeoutMs: 60_000 });
    const pending = executeStep({ id: "s1", capability: "test.hang", input: {} }, deps);
    await expect.poll(() => calls.length).toBe(1);
    controller.abort();
    expect(await pending).toMatchObject({ status: "failed", error: { code: "cancelled" } });
  });
});

describe("resuming an approved step", () => {
  /** A pending approval for test.echo in `tenant`, requested by agent in session-1. */
  async function pendingEcho(tenant: string, text = "ship it") {
    const version = await putPolicy(tenant, { requireConfirmationFor: ["test.echo"] });
    const h = harness(tenant);
    const result = await executeStep({ id: "s1", capability: "test.echo", input: { text, confirmed: true } }, h.deps);
    expect(result.status).toBe("pending_approval");
    return { ...h, version, approvalId: result.approval!.approvalId };
  }
  const elicitation = (tenant: string, sessionId = "session-1") =>
    ({ approve: true, channel: "client_elicitation", by: { tenant, principal: "agent", sessionId } }) as const;

  it("runs the step once after an elicitation answer from the same session, auditing each decision", async () => {
    const tenant = uniqueTenant();
    const { deps, audit, approvalId, version } = await pendingEcho(tenant);
    const resolved = await resolveApproval(approvalId, elicitation(tenant), deps);
    expect(resolved.resolution?.resolvedBy).toBe("human via elicitation in session session-1");
    expect(calls).toEqual([]);

    const result = await executeApproved(approvalId, deps);
    expect(result).toMatchObject({ stepId: "s1", status: "executed", ran: true, output: { echo: "ship it" } });
    expect(result.verdict).toMatchObject({ decision: "REQUIRE_APPROVAL", policyVersion: version });
    expect(calls).toEqual([{ capability: "test.echo", input: { text: "ship it" } }]);

    const again = await executeApproved(approvalId, deps);
    expect(again).toMatchObject({ status: "failed", ran: false, error: { code: "failed_precondition" } });
    expect(again.error?.message).toMatch(/already used/);
    expect(calls).toHaveLength(1);
    expect(summary(audit.events())).toEqual([
      "s1 decision REQUIRE_APPROVAL",
      "s1 outcome pending_approval",
      `${approvalId} approved by human via elicitation in session session-1`,
      "s1 decision REQUIRE_APPROVAL",
      "s1 outcome executed",
      // The second resume is refused at the approval's state, before policy is asked.
      "s1 outcome failed",
    ]);
    expect(audit.events().slice(3).every((e) => e.type !== "approval.resolution" && "approvalId" in e && e.approvalId === approvalId)).toBe(true);
  });

  it("refuses self-approval, and runs after another principal approved", async () => {
    const tenant = uniqueTenant();
    const { deps, approvalId } = await pendingEcho(tenant);
    const self = { approve: true, channel: "approver", by: { tenant, principal: "agent", sessionId: "admin" } } as const;
    await expectChaosError(resolveApproval(approvalId, self, deps), "permission_denied");
    expect(await executeApproved(approvalId, deps)).toMatchObject({ status: "failed", error: { code: "approval_required" } });
    const resolved = await resolveApproval(approvalId, { ...self, by: { tenant, principal: "alice" } }, deps);
    expect(resolved.resolution?.resolvedBy).toBe("alice (approver)");
    // An approver's answer is not tied to a session: the agent may resume from another one.
    const result = await executeApproved(approvalId, { ...deps, call: { tenant, principal: "agent", sessionId: "session-9" } });
    expect(result.status).toBe("executed");
    expect(calls).toHaveLength(1);
  });

  it("refuses an elicitation answer from another session, and a resume of an elicited approval from another session", async () => {
    const tenant = uniqueTenant();
    const { deps, approvalId } = await pendingEcho(tenant);
    await expectChaosError(resolveApproval(approvalId, elicitation(tenant, "session-2"), deps), "permission_denied");
    await resolveApproval(approvalId, elicitation(tenant), deps);
    const elsewhere = await executeApproved(approvalId, { ...deps, call: { tenant, principal: "agent", sessionId: "session-2" } });
    expect(elsewhere).toMatchObject({ status: "failed", ran: false, error: { code: "permission_denied" } });
    expect(calls).toEqual([]);
    // The refusal did not use the approval up.
    expect((await executeApproved(approvalId, deps)).status).toBe("executed");
  });

  describe("an approval requested without a session (a 2026-07-28 request)", () => {
    const REF_1 = "AAECAwQFBgcICQoLDA0ODw";
    const REF_2 = "BBECAwQFBgcICQoLDA0ODw";
    const ref = (tenant: string, requestRef: string, principal = "agent"): CallContext => ({ tenant, principal, requestRef });
    async function sessionless(tenant: string) {
      const h = await pendingEcho(tenant);
      const { deps } = harness(tenant, { call: ref(tenant, REF_1), approvals: h.approvals });
      const result = await executeStep({ id: "s1", capability: "test.echo", input: { text: "ship it" } }, { ...deps, audit: h.audit });
      expect(result.status).toBe("pending_approval");
      const approvalId = result.approval!.approvalId;
      expect((await h.approvals.get(tenant, approvalId))?.call).toEqual({ tenant, principal: "agent", requestRef: REF_1 });
      return { ...h, deps: { ...deps, audit: h.audit }, approvalId };
    }
    const answer = (by: CallContext) => ({ approve: true, channel: "client_elicitation", by }) as const;

    it("takes the requester's elicitation answer from any of its own requests, and runs the step from one", async () => {
      const tenant = uniqueTenant();
      const { deps, audit, approvalId } = await sessionless(tenant);
      const resolved = await resolveApproval(approvalId, answer(ref(tenant, REF_2)), deps);
      expect(resolved.resolution).toMatchObject({ channel: "client_elicitation", resolvedBy: `human via elicitation in request ${REF_2}`, requestRef: REF_2 });
      expect(audit.events().at(-1)).toMatchObject({ type: "approval.resolution", call: { tenant, principal: "agent", requestRef: REF_2 } });
      const result = await executeApproved(approvalId, { ...deps, call: ref(tenant, "CCECAwQFBgcICQoLDA0ODw") });
      expect(result).toMatchObject({ status: "executed", ran: true, output: { echo: "ship it" } });
      expect(calls).toHaveLength(1);
    });

    it("refuses an elicitation answer from another principal, a session or a call without a request ref as not_requester, recorded", async () => {
      const tenant = uniqueTenant();
      const { deps, audit, approvalId } = await sessionless(tenant);
      for (const by of [ref(tenant, REF_2, "bob"), { tenant, principal: "agent", sessionId: "session-1" }, { tenant, principal: "agent" }]) {
        const err = await expectChaosError(resolveApproval(approvalId, answer(by), deps), "permission_denied");
        expect(err.message).toMatch(new RegExp(`^not_requester: approval ${approvalId} was requested without a session by agent;`));
        expect(audit.events().at(-1)).toMatchObject({ type: "approval.refused", code: "not_requester", principal: by.principal });
      }
      expect((await deps.approvals.get(tenant, approvalId))?.status).toBe("pending");
    });

    it("runs a step approved by elicitation only from the requester's own request, not from a session", async () => {
      const tenant = uniqueTenant();
      const { deps, approvalId } = await sessionless(tenant);
      await resolveApproval(approvalId, answer(ref(tenant, REF_1)), deps);
      const inSession = await executeApproved(approvalId, { ...deps, call: { tenant, principal: "agent", sessionId: "session-1" } });
      expect(inSession).toMatchObject({ status: "failed", ran: false, error: { code: "permission_denied" } });
      expect(inSession.error?.message).toMatch(/not_requester: .* only agent's own request may run it/);
      const other = await executeApproved(approvalId, { ...deps, call: ref(tenant, REF_1, "bob") });
      expect(other.error?.message).toMatch(/^not_requester: approval .* was requested by agent; only that principal may run its step/);
      expect(calls).toEqual([]);
      expect((await executeApproved(approvalId, deps)).status).toBe("executed");
    });

    it("keeps a session's approval with its session: the same principal's request without it is wrong_session", async () => {
      const tenant = uniqueTenant();
      const { deps, approvalId } = await pendingEcho(tenant);
      const err = await expectChaosError(resolveApproval(approvalId, answer(ref(tenant, REF_1)), deps), "permission_denied");
      expect(err.message).toMatch(/^wrong_session: /);
      await resolveApproval(approvalId, elicitation(tenant), deps);
      const elsewhere = await executeApproved(approvalId, { ...deps, call: ref(tenant, REF_1) });
      expect(elsewhere.error?.message).toMatch(/given by elicitation in another session/);
      expect(calls).toEqual([]);
    });
  });

  it("never runs a rejected step, and says who rejected it", async () => {
    const tenant = uniqueTenant();
    const { deps, approvalId } = await pendingEcho(tenant);
    await resolveApproval(approvalId, { approve: false, channel: "approver", by: { tenant, principal: "alice" } }, deps);
    await expectChaosError(resolveApproval(approvalId, elicitation(tenant), deps), "failed_precondition");
    const result = await executeApproved(approvalId, deps);
    expect(result).toMatchObject({ status: "denied", ran: false });
    expect(result.error?.message).toMatch(/rejected by alice \(approver\)/);
    expect(calls).toEqual([]);
  });

  it("refuses when the policy changed since the approval, naming both versions, and leaves the approval unused", async () => {
    const tenant = uniqueTenant();
    const { deps, approvalId, version } = await pendingEcho(tenant);
    await resolveApproval(approvalId, elicitation(tenant), deps);
    const newer = await putPolicy(tenant, { requireConfirmationFor: ["test.echo", "test.other"] });
    const result = await executeApproved(approvalId, deps);
    expect(result).toMatchObject({ status: "failed", ran: false, error: { code: "failed_precondition" } });
    expect(result.error?.message).toContain(`approved under policy version ${version}, now version ${newer}`);
    expect(calls).toEqual([]);
    expect((await deps.approvals.get(tenant, approvalId))?.status).toBe("approved");
  });

  it("never runs when policy now denies the capability", async () => {
    const tenant = uniqueTenant();
    const { deps, approvalId } = await pendingEcho(tenant);
    await resolveApproval(approvalId, elicitation(tenant), deps);
    await putPolicy(tenant, { deniedCapabilities: ["test.echo"] });
    expect(await executeApproved(approvalId, deps)).toMatchObject({ status: "denied", ran: false, verdict: { decision: "DENY" } });
    expect(calls).toEqual([]);
  });

  it("runs the handler once of 20 concurrent resumes", async () => {
    const tenant = uniqueTenant();
    const { deps, approvalId } = await pendingEcho(tenant);
    await resolveApproval(approvalId, elicitation(tenant), deps);
    const results = await Promise.all(Array.from({ length: 20 }, () => executeApproved(approvalId, deps)));
    expect(results.filter((r) => r.status === "executed")).toHaveLength(1);
    expect(results.filter((r) => r.status === "failed" && r.error?.code === "failed_precondition" && !r.ran)).toHaveLength(19);
    expect(calls).toHaveLength(1);
  });

  it("does not find another tenant's approval, nor an unknown one", async () => {
    const tenant = uniqueTenant();
    const { deps, approvalId } = await pendingEcho(tenant);
    await resolveApproval(approvalId, elicitation(tenant), deps);
    const other = uniqueTenant();
    const otherDeps = { ...deps, call: { tenant: other, principal: "agent", sessionId: "session-1" } };
    const a = await expectChaosError(executeApproved(approvalId, otherDeps), "not_found");
    await expectChaosError(resolveApproval(approvalId, elicitation(other), deps), "not_found");
    const unknown = "00000000-0000-4000-8000-000000000000";
    const b = await expectChaosError(executeApproved(unknown, deps), "not_found");
    expect(a.message.replace(approvalId, "ID")).toBe(b.message.replace(unknown, "ID"));
    expect(calls).toEqual([]);
  });

  it("refuses a stored input whose hash no longer matches the approval, without running it", async () => {
    const tenant = uniqueTenant();
    const { deps, approvalId } = await pendingEcho(tenant);
    const stored = (await deps.approvals.get(tenant, approvalId))!;
    // Another approval with the same hash but changed arguments, as a tampered store would hold.
    const forged = { ...stored, approvalId: "11111111-1111-4111-8111-111111111111", step: { ...stored.step, input: { text: "rm -rf" } } };
    await deps.approvals.create(forged);
    await resolveApproval(forged.approvalId, elicitation(tenant), deps);
    const result = await executeApproved(forged.approvalId, deps);
    expect(result).toMatchObject({ status: "failed", ran: false, error: { code: "failed_precondition" } });
    expect(result.error?.message).toMatch(/arguments hash/);
    expect(calls).toEqual([]);
  });

  it("fails closed when the resumed decision cannot be recorded: the approval stays unused", async () => {
    const tenant = uniqueTenant();
    const { deps, approvalId } = await pendingEcho(tenant);
    await resolveApproval(approvalId, elicitation(tenant), deps);
    const broken: AuditSink = { record: () => Promise.reject(new Error("disk full")) };
    const result = await executeApproved(approvalId, { ...deps, audit: broken });
    expect(result).toMatchObject({ status: "failed", ran: false, error: { code: "unavailable" } });
    expect(calls).toEqual([]);
    expect((await deps.approvals.get(tenant, approvalId))?.status).toBe("approved");
    // And an answer the audit log cannot hold is not applied.
    const next = await pendingEcho(tenant, "again");
    await expectChaosError(resolveApproval(next.approvalId, elicitation(tenant), { ...next.deps, audit: broken }), "unavailable");
    expect((await next.deps.approvals.get(tenant, next.approvalId))?.status).toBe("pending");
  });
});

describe("an approved step's plan goes on", () => {
  const approver = (tenant: string) => ({ approve: true, channel: "approver", by: { tenant, principal: "alice" } }) as const;
  const inAnHour = () => ({ planId: "plan-1", objective: "ship it and tell everyone", expiresAt: new Date(Date.now() + 3_600_000).toISOString() });

  it("runs the steps after the approved one, each through policy again, with references to earlier outputs", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { requireConfirmationFor: ["test.risky"] });
    const { deps, audit } = harness(tenant);
    const first = await executeSteps(
      [
        { id: "s1", capability: "test.echo", input: { text: "first" } },
        { id: "s2", capability: "test.risky", input: { text: "ship it" } },
        { id: "s3", capability: "test.other", input: { text: { $step: "s1", path: "/echo" } } },
        { id: "s4", capability: "test.other", input: { text: { $step: "s2", path: "/echo" } } },
      ],
      deps,
      new Map(),
      inAnHour(),
    );
    expect(first.map((r) => r.status)).toEqual(["executed", "pending_approval", "skipped", "skipped"]);
    const approvalId = first[1]!.approval!.approvalId;
    // The approval keeps the rest of the plan, and only the earlier output a later step refers to.
    expect(first[1]!.approval!.continuation).toMatchObject({ planId: "plan-1", rest: [{ id: "s3" }, { id: "s4" }], outputs: { s1: { echo: "first" } }, executed: ["test.echo"] });
    await resolveApproval(approvalId, approver(tenant), deps);

    const ran = await executeApprovedPlan(approvalId, deps);
    expect(ran.results.map((r) => `${r.stepId} ${r.status}`)).toEqual(["s2 executed", "s3 executed", "s4 executed"]);
    expect(calls.map((c) => c.input)).toEqual([{ text: "first" }, { text: "ship it" }, { text: "first" }, { text: "ship it" }]);
    expect(ran.completed).toEqual({ objective: "ship it and tell everyone", capabilities: ["test.echo", "test.risky", "test.other", "test.other"] });
    // Every remaining step was decided by policy and recorded, after the approved one.
    expect(summary(audit.events()).slice(-6)).toEqual([
      "s2 decision REQUIRE_APPROVAL",
      "s2 outcome executed",
      "s3 decision ALLOW",
      "s3 outcome executed",
      "s4 decision ALLOW",
      "s4 outcome executed",
    ]);
    // Used once, the approval runs nothing more, the rest of its plan included.
    const again = await executeApprovedPlan(approvalId, deps);
    expect(again.results).toHaveLength(1);
    expect(again.results[0]).toMatchObject({ status: "failed", ran: false });
    expect(calls).toHaveLength(4);
  });

  it("stops at the next step that needs approval, whose approval keeps what follows it", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { requireConfirmationFor: ["test.echo"] });
    const { deps } = harness(tenant);
    const steps = [
      { id: "s1", capability: "test.echo", input: { text: "one" } },
      { id: "s2", capability: "test.echo", input: { text: "two" } },
      { id: "s3", capability: "test.other", input: { text: "three" } },
    ];
    const first = await executeSteps(steps, deps, new Map(), inAnHour());
    await resolveApproval(first[0]!.approval!.approvalId, approver(tenant), deps);
    const second = await executeApprovedPlan(first[0]!.approval!.approvalId, deps);
    expect(second.results.map((r) => `${r.stepId} ${r.status}`)).toEqual(["s1 executed", "s2 pending_approval", "s3 skipped"]);
    expect(second.completed).toBeUndefined();
    const next = second.results[1]!.approval!;
    expect(next.continuation).toMatchObject({ rest: [{ id: "s3" }], executed: ["test.echo"] });
    await resolveApproval(next.approvalId, approver(tenant), deps);
    const third = await executeApprovedPlan(next.approvalId, deps);
    expect(third.results.map((r) => `${r.stepId} ${r.status}`)).toEqual(["s2 executed", "s3 executed"]);
    expect(third.completed?.capabilities).toEqual(["test.echo", "test.echo", "test.other"]);
    expect(calls.map((c) => c.input)).toEqual([{ text: "one" }, { text: "two" }, { text: "three" }]);
  });

  it("skips the rest when a later step is denied, naming it", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { requireConfirmationFor: ["test.echo"], deniedCapabilities: ["test.other"] });
    const { deps } = harness(tenant);
    const first = await executeSteps(
      [
        { id: "s1", capability: "test.echo", input: { text: "one" } },
        { id: "s2", capability: "test.other", input: { text: "two" } },
        { id: "s3", capability: "test.echo", input: { text: "three" } },
      ],
      deps,
      new Map(),
      inAnHour(),
    );
    await resolveApproval(first[0]!.approval!.approvalId, approver(tenant), deps);
    const ran = await executeApprovedPlan(first[0]!.approval!.approvalId, deps);
    expect(ran.results.map((r) => `${r.stepId} ${r.status}`)).toEqual(["s1 executed", "s2 denied", "s3 skipped"]);
    expect(ran.results[2]!.error?.message).toBe("not run: step s2 was denied");
    expect(calls).toHaveLength(1);
  });

  it("once the plan expired, runs the approved step and names the steps that did not run and the call that plans them again", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { requireConfirmationFor: ["test.echo"] });
    const { deps, audit } = harness(tenant);
    const expired = { ...inAnHour(), expiresAt: new Date(Date.now() - 1_000).toISOString() };
    const first = await executeSteps(
      [
        { id: "s1", capability: "test.echo", input: { text: "one" } },
        { id: "s2", capability: "test.other", input: { text: "two" } },
      ],
      deps,
      new Map(),
      expired,
    );
    await resolveApproval(first[0]!.approval!.approvalId, approver(tenant), deps);
    const eventsBefore = audit.events().length;
    const ran = await executeApprovedPlan(first[0]!.approval!.approvalId, deps);
    expect(ran.results.map((r) => `${r.stepId} ${r.status}`)).toEqual(["s1 executed", "s2 skipped"]);
    expect(ran.results[1]!.error?.code).toBe("failed_precondition");
    expect(ran.results[1]!.error?.message).toContain(`plan_expired: the plan plan-1 expired at ${expired.expiresAt}, so the steps after s1 did not run: s2 (test.other)`);
    expect(ran.results[1]!.error?.message).toContain('chaoscore_plan {"objective":"ship it and tell everyone"}');
    expect(ran.completed).toBeUndefined();
    expect(calls.map((c) => c.input)).toEqual([{ text: "one" }]);
    // Only the approved step was decided and ran; nothing was asked about the rest.
    expect(summary(audit.events().slice(eventsBefore))).toEqual(["s1 decision REQUIRE_APPROVAL", "s1 outcome executed"]);
  });

  it("keeps the plan where it was when the approved step did not run, and skips the rest after one that ran and failed", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { requireConfirmationFor: ["test.leaky"] });
    const { deps } = harness(tenant);
    const first = await executeSteps(
      [
        { id: "s1", capability: "test.leaky", input: {} },
        { id: "s2", capability: "test.other", input: { text: "two" } },
      ],
      deps,
      new Map(),
      inAnHour(),
    );
    const approvalId = first[0]!.approval!.approvalId;
    // Not answered yet: only the refusal, the plan waits.
    const early = await executeApprovedPlan(approvalId, deps);
    expect(early.results.map((r) => `${r.stepId} ${r.status}`)).toEqual(["s1 failed"]);
    expect(early.results[0]!.error?.code).toBe("approval_required");
    await resolveApproval(approvalId, approver(tenant), deps);
    const ran = await executeApprovedPlan(approvalId, deps);
    expect(ran.results.map((r) => `${r.stepId} ${r.status}`)).toEqual(["s1 failed", "s2 skipped"]);
    expect(ran.results[1]!.error?.message).toBe("not run: step s1 was failed");
    expect(calls.map((c) => c.capability)).toEqual(["test.leaky"]);
  });
});

describe("approval channels", () => {
  /** Policy's channels in a policy document, protobuf JSON. */
  const channelSet = (...names: string[]) => ({ channels: names.map((n) => `APPROVAL_CHANNEL_${n.toUpperCase()}`) });
  /** A pending approval for the high-risk test.risky, under `document`, requested by agent in session-1. */
  async function pendingRisky(tenant: string, document: Record<string, unknown> = {}) {
    await putPolicy(tenant, document);
    const h = harness(tenant);
    const result = await executeStep({ id: "s1", capability: "test.risky", input: { text: "wire it" } }, h.deps);
    expect(result.status).toBe("pending_approval");
    return { ...h, result, approvalId: result.approval!.approvalId };
  }
  const clientAnswer = (tenant: string) => ({ approve: true, channel: "client_elicitation", by: { tenant, principal: "agent", sessionId: "session-1" } }) as const;

  it("refuses the client's own answer for a high-risk step under the default policy, and records the refused attempt", async () => {
    const tenant = uniqueTenant();
    const { deps, audit, result, approvalId } = await pendingRisky(tenant);
    expect(result.verdict).toMatchObject({ approvalChannels: ["approver", "operator", "console"], channelsRule: "approvalChannels.byRisk.high" });
    expect(await deps.approvals.get(tenant, approvalId)).toMatchObject({ channels: ["approver", "operator", "console"], channelsRule: "approvalChannels.byRisk.high" });

    const refused = await expectChaosError(resolveApproval(approvalId, clientAnswer(tenant), deps), "permission_denied");
    expect(refused.message).toMatch(/^channel_not_allowed: policy accepts approver, operator, console for approval .* \(test\.risky, risk high, rule approvalChannels\.byRisk\.high\), not client_elicitation$/);
    expect(audit.events().at(-1)).toEqual({
      type: "approval.refused",
      call: { tenant, principal: "agent", sessionId: "session-1" },
      approvalId,
      capability: "test.risky",
      argsHash: result.approval!.argsHash,
      channel: "client_elicitation",
      principal: "agent",
      code: "channel_not_allowed",
      allowed: ["approver", "operator", "console"],
    });
    expect((await deps.approvals.get(tenant, approvalId))?.status).toBe("pending");
    expect(await executeApproved(approvalId, deps)).toMatchObject({ status: "failed", ran: false, error: { code: "approval_required" } });
    expect(calls).toEqual([]);
    expect(summary(audit.events())).toEqual([
      "s1 decision REQUIRE_APPROVAL",
      "s1 outcome pending_approval",
      `${approvalId} refused client_elicitation from agent: channel_not_allowed`,
      "s1 outcome failed",
    ]);
  });

  it("counts the client's answer when the operator opted high risk in, recorded as client_elicitation", async () => {
    const tenant = uniqueTenant();
    const { deps, audit, approvalId } = await pendingRisky(tenant, { approvalChannels: { high: channelSet("client_elicitation", "approver") } });
    expect(await deps.approvals.get(tenant, approvalId)).toMatchObject({ channels: ["client_elicitation", "approver"] });
    const resolved = await resolveApproval(approvalId, clientAnswer(tenant), deps);
    expect(resolved.resolution).toMatchObject({ channel: "client_elicitation", resolvedBy: "human via elicitation in session session-1" });
    expect(audit.events().find((e) => e.type === "approval.resolution")).toMatchObject({ channel: "client_elicitation", principal: "agent" });
    expect(await executeApproved(approvalId, deps)).toMatchObject({ status: "executed", ran: true });
    expect(calls).toEqual([{ capability: "test.risky", input: { text: "wire it" } }]);
  });

  it("takes an operator answer only as the principal operator, and records the channel", async () => {
    const tenant = uniqueTenant();
    const { deps, audit, approvalId } = await pendingRisky(tenant);
    const asAlice = { approve: true, channel: "operator", by: { tenant, principal: "alice" } } as const;
    expect((await expectChaosError(resolveApproval(approvalId, asAlice, deps), "permission_denied")).message).toMatch(/^not_operator: /);
    expect(audit.events().at(-1)).toMatchObject({ type: "approval.refused", channel: "operator", principal: "alice", code: "not_operator" });

    const resolved = await resolveApproval(approvalId, { ...asAlice, by: { tenant, principal: "operator" } }, deps);
    expect(resolved.resolution).toMatchObject({ channel: "operator", principal: "operator", resolvedBy: "operator (operator)" });
    expect(audit.events().at(-1)).toMatchObject({ type: "approval.resolution", channel: "operator", principal: "operator", resolvedBy: "operator (operator)" });
    expect(await executeApproved(approvalId, deps)).toMatchObject({ status: "executed" });
  });

  it("refuses an answer through a channel policy does not list, even from an approver", async () => {
    const tenant = uniqueTenant();
    const { deps, audit, approvalId } = await pendingRisky(tenant, { approvalChannels: { capabilities: { "test.risky": channelSet("operator") } } });
    const byAlice = { approve: true, channel: "approver", by: { tenant, principal: "alice" } } as const;
    expect((await expectChaosError(resolveApproval(approvalId, byAlice, deps), "permission_denied")).message).toMatch(/^channel_not_allowed: policy accepts operator /);
    expect(audit.events().at(-1)).toMatchObject({ type: "approval.refused", code: "channel_not_allowed", allowed: ["operator"] });
    expect((await deps.approvals.get(tenant, approvalId))?.status).toBe("pending");
  });

  it("lets only the requesting principal run an approved step", async () => {
    const tenant = uniqueTenant();
    const { deps, approvalId } = await pendingRisky(tenant);
    await resolveApproval(approvalId, { approve: true, channel: "approver", by: { tenant, principal: "alice" } }, deps);
    const bob = await executeApproved(approvalId, { ...deps, call: { tenant, principal: "bob", sessionId: "session-1" } });
    expect(bob).toMatchObject({ status: "failed", ran: false, error: { code: "permission_denied" } });
    expect(bob.error?.message).toMatch(/^not_requester: /);
    expect(calls).toEqual([]);
    expect(await executeApproved(approvalId, deps)).toMatchObject({ status: "executed" });
  });

  it("does not run an answer whose channel the fresh verdict no longer accepts", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { requireConfirmationFor: ["test.shifty"] });
    // The same capability, re-registered at a higher risk between the answer and the run.
    const before = harness(tenant, { registry: createCapabilityRegistry([echo("test.shifty", "medium")]) });
    const pendingResult = await executeStep({ id: "s1", capability: "test.shifty", input: { text: "x" } }, before.deps);
    const approvalId = pendingResult.approval!.approvalId;
    await resolveApproval(approvalId, clientAnswer(tenant), before.deps);
    const after = { ...before.deps, registry: createCapabilityRegistry([echo("test.shifty", "high")]) };
    const result = await executeApproved(approvalId, after);
    expect(result).toMatchObject({ status: "denied", ran: false, error: { code: "permission_denied" } });
    expect(result.error?.message).toMatch(/^channel_not_allowed: .* answered through client_elicitation, which policy no longer accepts/);
    expect(calls).toEqual([]);
  });
});

describe("a capability that implies others", () => {
  const outer = { ...echo("test.outer", "low"), implies: ["test.inner"] };
  const upward = { ...echo("test.upward", "low"), implies: ["test.inner_high"] };
  const books = { ...echo("test.books", "low"), implies: ["test.inner"], internal: true };
  const implying = createCapabilityRegistry([echo("test.inner", "low"), echo("test.inner_high", "high"), outer, upward, books]);
  const run = (h: Harness, capability: string, options?: { bookkeeping?: boolean }) =>
    executeStep({ id: "s1", capability, input: { text: "x" } }, h.deps, options);
  const channelSet = (...names: string[]) => ({ channels: names.map((n) => `APPROVAL_CHANNEL_${n.toUpperCase()}`) });

  it("is denied when what it implies is denied, naming that capability's rule, with every decision in the recorded step.decision", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { deniedCapabilities: ["test.inner"] });
    const h = harness(tenant, { registry: implying });
    const result = await run(h, "test.outer");
    expect(calls).toEqual([]);
    expect(result).toMatchObject({ status: "denied", ran: false, verdict: { decision: "DENY", matchedRule: "test.inner: deniedCapabilities", decidedBy: "test.inner" } });
    expect(h.audit.events()[0]).toMatchObject({
      type: "step.decision",
      capability: "test.outer",
      verdict: { decision: "DENY", implied: [{ capability: "test.inner", risk: "low", verdict: { decision: "DENY", matchedRule: "deniedCapabilities" } }] },
    });

    // Its own DENY holds as well, under its own rule name.
    const own = uniqueTenant();
    await putPolicy(own, { deniedCapabilities: ["test.outer"] });
    const denied = await run(harness(own, { registry: implying }), "test.outer");
    expect(denied.verdict).toMatchObject({ decision: "DENY", matchedRule: "deniedCapabilities" });
    expect(denied.verdict?.decidedBy).toBeUndefined();

    // Allowed on both counts, it runs.
    const allowed = await run(harness(uniqueTenant(), { registry: implying }), "test.outer");
    expect(allowed).toMatchObject({ status: "executed", verdict: { decision: "ALLOW", matchedRule: "default", implied: [{ verdict: { decision: "ALLOW" } }] } });
    expect(calls).toEqual([{ capability: "test.outer", input: { text: "x" } }]);
  });

  it("asks policy about the implied capability at that capability's registered risk", async () => {
    const h = harness(uniqueTenant(), { registry: implying });
    const result = await run(h, "test.upward");
    expect(result).toMatchObject({
      status: "pending_approval",
      verdict: { decision: "REQUIRE_APPROVAL", matchedRule: "test.inner_high: riskRules.requireApprovalAtOrAbove" },
    });
    // Low risk's channels would let the client answer; the implied high risk's do not.
    expect(result.approval?.channels).toEqual(["approver", "operator", "console"]);
  });

  it("counts only channels every decision accepts, and fails closed when they share none", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, {
      requireConfirmationFor: ["test.outer", "test.inner"],
      approvalChannels: { capabilities: { "test.outer": channelSet("approver", "console"), "test.inner": channelSet("operator", "console") } },
    });
    const result = await run(harness(tenant, { registry: implying }), "test.outer");
    expect(result.approval?.channels).toEqual(["console"]);

    const apart = uniqueTenant();
    await putPolicy(apart, {
      requireConfirmationFor: ["test.outer", "test.inner"],
      approvalChannels: { capabilities: { "test.outer": channelSet("approver"), "test.inner": channelSet("operator") } },
    });
    const h = harness(apart, { registry: implying });
    const none = await run(h, "test.outer");
    expect(none).toMatchObject({ status: "failed", ran: false, error: { code: "failed_precondition" } });
    expect(h.approvals.pending()).toEqual([]);
  });

  it("fails closed when policy changes between its decisions", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, {});
    let evaluations = 0;
    // The real policy service, with a new version stored right after the first decision.
    const racing: ExecutorDeps["policy"] = {
      ...policy,
      async evaluate(req, opts) {
        const res = await policy.evaluate(req, opts);
        if (++evaluations === 1) await putPolicy(tenant, { requireConfirmationFor: ["test.other"] });
        return res;
      },
    };
    const h = harness(tenant, { registry: implying, policy: racing });
    const result = await run(h, "test.outer");
    expect(result).toMatchObject({ status: "failed", ran: false, error: { code: "conflict" } });
    expect(result.error?.message).toMatch(/policy changed while test\.outer was being decided/);
    expect(calls).toEqual([]);
  });

  it("refuses an internal capability as a plan step or an explicit step, and leaves it out of the names offered", async () => {
    const h = harness(uniqueTenant(), { registry: implying });
    const err = await expectChaosError(
      executeSteps([{ id: "s1", capability: "test.echo_missing", input: {} }, { id: "s2", capability: "test.books", input: { text: "x" } }], h.deps),
      "invalid_argument",
    );
    expect(err.message).toContain('step s2: "test.books" is an internal capability');
    expect(h.audit.events()).toEqual([]);

    const single = await run(h, "test.books");
    expect(single).toMatchObject({ status: "failed", ran: false, error: { code: "invalid_argument" } });
    expect(summary(h.audit.events())).toEqual(["s1 outcome failed"]);
    const unknown = await executeStep({ id: "s3", capability: "test.nope", input: {} }, h.deps);
    expect(unknown.error?.message).not.toContain("test.books");
    expect(calls).toEqual([]);
  });

  it("as bookkeeping, records a REQUIRE_APPROVAL and skips the write: no approval is created", async () => {
    const tenant = uniqueTenant();
    await putPolicy(tenant, { requireConfirmationFor: ["test.inner"] });
    const h = harness(tenant, { registry: implying });
    const result = await run(h, "test.books", { bookkeeping: true });
    expect(result).toMatchObject({
      status: "denied",
      ran: false,
      verdict: { decision: "REQUIRE_APPROVAL", matchedRule: "test.inner: requireConfirmationFor" },
      error: { code: "approval_required" },
    });
    expect(result.approval).toBeUndefined();
    expect(h.approvals.pending()).toEqual([]);
    expect(summary(h.audit.events())).toEqual(["s1 decision REQUIRE_APPROVAL", "s1 outcome denied"]);
    expect(calls).toEqual([]);

    expect(await run(harness(uniqueTenant(), { registry: implying }), "test.books", { bookkeeping: true })).toMatchObject({ status: "executed" });
  });
});
