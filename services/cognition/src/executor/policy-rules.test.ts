/**
 * Policy rules with conditions (docs/policy-conditions.md) through the real executor: the policy
 * service's handlers on Postgres decide from the step's validated arguments, the signed caller's
 * roles and the service's clock; a step is allowed, denied or held for a person, and the decision
 * recorded before anything runs names the rule, its condition and, when it errored, why.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { toJson } from "@bufbuild/protobuf";
import type { CallContext } from "@chaos-core/kit";
import { policyDocumentToProto, validatePolicyDocument } from "@chaos-core/policy";
import { PolicyDocumentSchema } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { EVENING, POLICY_EXAMPLES, WORKING_HOURS } from "../../../../test/support/policy-examples.js";
import { startRealServices, type RealServices } from "../../../../test/support/real-services.js";
import { defineCapability, type CapabilityRisk } from "../capabilities/capability.js";
import { createCapabilityRegistry } from "../capabilities/registry.js";
import { HeuristicProvider } from "../providers/heuristic.js";
import { createMemoryApprovalStore } from "./approvals.js";
import { createInMemoryAuditSink, type StepDecisionEvent } from "./audit.js";
import { executeStep } from "./step-run.js";

// The policy service reads this clock.
let clock = WORKING_HOURS;

let services: RealServices;
beforeAll(async () => {
  services = await startRealServices("chaoscore_cognition_policy_rules", { policyNow: () => clock });
});
afterAll(async () => {
  await services?.close();
});

let calls: string[];
beforeEach(() => {
  calls = [];
  clock = WORKING_HOURS;
});

const EFFECT = { ANNOTATIONS: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true } } as const;

function tool(name: string, risk: CapabilityRisk, input: z.ZodObject) {
  return defineCapability({
    name,
    description: `Stands for ${name} (${risk} risk).`,
    risk,
    inputSchema: input,
    outputSchema: z.object({ done: z.boolean() }),
    annotations: EFFECT.ANNOTATIONS,
    handler() {
      calls.push(name);
      return Promise.resolve({ done: true });
    },
  });
}

const registry = createCapabilityRegistry([
  tool("filesystem.write_file", "medium", z.object({ path: z.string(), content: z.string() })),
  tool("github.merge_pull_request", "high", z.object({ repository: z.string(), number: z.number().int() })),
  tool("jira.create_issue", "low", z.object({ summary: z.string() })),
  tool("jira.delete_issue", "medium", z.object({ key: z.string() })),
]);

/** A policy.json document in the policy service's protobuf JSON, as an operator's PutPolicy carries it. */
const protoJson = (document: Record<string, unknown>) =>
  toJson(PolicyDocumentSchema, policyDocumentToProto(validatePolicyDocument(document, "test policy"))) as Record<string, unknown>;

const EXAMPLES = protoJson(POLICY_EXAMPLES);

let tenants = 0;
async function harness(document: Record<string, unknown>, roles: readonly string[] = []) {
  const tenant = `rules-${process.pid}-${++tenants}`;
  const version = await services.putPolicy(tenant, document);
  const audit = createInMemoryAuditSink();
  const approvals = createMemoryApprovalStore();
  const call: CallContext = { tenant, principal: "agent", sessionId: "s-1", roles };
  const deps = { registry, policy: services.policy, memory: services.memory, provider: new HeuristicProvider(), audit, approvals, call, stepTimeoutMs: 5_000 };
  const run = (capability: string, input: Record<string, unknown>) => executeStep({ id: "s1", capability, input }, deps);
  const decision = () => audit.events().find((e): e is StepDecisionEvent => e.type === "step.decision");
  return { run, decision, version, approvals };
}

describe("the issue's four examples, through the executor", () => {
  it("filesystem.write_file only under /srv/reports/: written there, denied elsewhere, before the handler", async () => {
    const h = await harness(EXAMPLES);
    expect(await h.run("filesystem.write_file", { path: "/srv/reports/q4.txt", content: "ok" })).toMatchObject({ status: "executed", verdict: { decision: "ALLOW" } });
    expect(calls).toEqual(["filesystem.write_file"]);

    const h2 = await harness(EXAMPLES);
    const denied = await h2.run("filesystem.write_file", { path: "/srv/reports/../../etc/cron.d/x", content: "evil" });
    expect(denied).toMatchObject({
      status: "denied",
      ran: false,
      verdict: { decision: "DENY", matchedRule: "rules[0]", condition: POLICY_EXAMPLES.rules[0]!.when, policyVersion: h2.version, evaluatedAt: WORKING_HOURS.toISOString() },
    });
    expect(calls).toEqual(["filesystem.write_file"]);
    // The ledger's decision entry carries the rule, its condition, the version and the time it saw.
    expect(h2.decision()?.verdict).toMatchObject({ matchedRule: "rules[0]", condition: POLICY_EXAMPLES.rules[0]!.when, evaluatedAt: WORKING_HOURS.toISOString() });
  });

  it("github.merge_pull_request needs a person unless the repository is sandbox/*", async () => {
    const h = await harness(EXAMPLES);
    const sandbox = await h.run("github.merge_pull_request", { repository: "sandbox/demo", number: 7 });
    expect(sandbox).toMatchObject({ status: "executed", verdict: { decision: "ALLOW", matchedRule: "rules[1]" } });
    const production = await h.run("github.merge_pull_request", { repository: "acme/api", number: 7 });
    expect(production).toMatchObject({ status: "pending_approval", verdict: { decision: "REQUIRE_APPROVAL", matchedRule: "riskRules.requireApprovalAtOrAbove" } });
    expect(calls).toEqual(["github.merge_pull_request"]);
  });

  it("jira.* for the support role only, the role read from the signed call context", async () => {
    const support = await harness(EXAMPLES, ["support"]);
    expect(await support.run("jira.create_issue", { summary: "printer" })).toMatchObject({ status: "executed" });
    const developer = await harness(EXAMPLES, ["developer"]);
    expect(await developer.run("jira.create_issue", { summary: "printer", roles: ["support"] })).toMatchObject({
      status: "denied",
      verdict: { matchedRule: "rules[2]" },
    });
    expect(calls).toEqual(["jira.create_issue"]);
  });

  it("jira.delete_issue outside business hours is held for a person, on the rule's channels", async () => {
    const h = await harness(EXAMPLES, ["support"]);
    expect(await h.run("jira.delete_issue", { key: "OPS-1" })).toMatchObject({ status: "executed" });
    clock = EVENING;
    const held = await h.run("jira.delete_issue", { key: "OPS-2" });
    expect(held).toMatchObject({
      status: "pending_approval",
      verdict: { decision: "REQUIRE_APPROVAL", matchedRule: "rules[3]", evaluatedAt: EVENING.toISOString() },
      approval: { matchedRule: "rules[3]", channels: ["operator", "console"] },
    });
    expect(calls).toEqual(["jira.delete_issue"]);
  });
});

describe("a condition that errors at call time", () => {
  it("fails closed and is recorded as such", async () => {
    // Written against a field the tool does not take: every call errors.
    const h = await harness(protoJson({ rules: [{ capability: "jira.delete_issue", effect: "deny", when: 'args.project == "OPS"' }] }), ["support"]);
    const result = await h.run("jira.delete_issue", { key: "OPS-3" });
    expect(result).toMatchObject({ status: "denied", ran: false, verdict: { decision: "DENY", matchedRule: "rules[0]" } });
    expect(result.verdict?.reason).toContain("could not be evaluated");
    expect(h.decision()?.verdict.conditionError).toMatch(/^rules\[0\]\.when: the value has no field "project" at 1:/);
    expect(calls).toEqual([]);
  });
});
