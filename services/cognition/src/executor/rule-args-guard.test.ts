/**
 * Rules' conditions checked against the pins cognition serves (docs/policy-conditions.md §5),
 * through the real executor and the policy service on Postgres: a policy stored without knowing
 * the pins (PutPolicy checks `args` as a dynamic map), or a pin that changes under a policy, leaves
 * a rule reading an argument the tools it names do not declare — and those tools are denied,
 * naming the rule and the problem, until the rule or the pins change.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { toJson } from "@bufbuild/protobuf";
import type { CallContext } from "@chaos-core/kit";
import { policyDocumentToProto, validatePolicyDocument } from "@chaos-core/policy";
import { PolicyDocumentSchema } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { recordingLogger } from "../../../../test/support/logger.js";
import { startRealServices, type RealServices } from "../../../../test/support/real-services.js";
import { defineCapability, type Capability } from "../capabilities/capability.js";
import { createCapabilityRegistry } from "../capabilities/registry.js";
import { HeuristicProvider } from "../providers/heuristic.js";
import { createMemoryApprovalStore } from "./approvals.js";
import { createInMemoryAuditSink, type StepDecisionEvent } from "./audit.js";
import { createRuleArgsGuard } from "./rule-args-guard.js";
import { executeStep } from "./step-run.js";

let services: RealServices;
beforeAll(async () => {
  services = await startRealServices("chaoscore_cognition_rule_args");
});
afterAll(async () => {
  await services?.close();
});

const calls: string[] = [];

/** An upstream tool as served: its pinned input schema (JSON Schema) beside the zod one the executor validates with. */
function upstreamTool(upstream: string, tool: string, fields: Record<string, "string" | "number">): Capability {
  const shape = Object.fromEntries(Object.entries(fields).map(([name, type]) => [name, type === "string" ? z.string() : z.number()]));
  const capability = defineCapability({
    name: `${upstream}.${tool}`,
    description: `${tool}, a tool of the upstream ${upstream}.`,
    risk: "low",
    inputSchema: z.object(shape),
    outputSchema: z.object({ done: z.boolean() }),
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    handler() {
      calls.push(`${upstream}.${tool}`);
      return Promise.resolve({ done: true });
    },
  }) as unknown as Capability;
  const inputSchema = { type: "object", properties: Object.fromEntries(Object.entries(fields).map(([name, type]) => [name, { type }])) };
  return { ...capability, upstream: { name: upstream, tool, mcpName: `${upstream}__${tool}`, title: "", inputSchema, grants: [{ tenants: ["*"] }] } };
}

const protoJson = (document: Record<string, unknown>) =>
  toJson(PolicyDocumentSchema, policyDocumentToProto(validatePolicyDocument(document, "test policy"))) as Record<string, unknown>;

let tenants = 0;
async function harness(document: Record<string, unknown>, tools: readonly Capability[]) {
  const tenant = `rule-args-${process.pid}-${++tenants}`;
  const version = await services.putPolicy(tenant, protoJson(document));
  const registry = createCapabilityRegistry(tools);
  const audit = createInMemoryAuditSink();
  const { logger, lines: logged } = recordingLogger();
  let reads = 0;
  // The real policy client, counting its GetPolicy calls (one per policy version and tenant).
  const policy = { ...services.policy, getPolicy: (...args: Parameters<typeof services.policy.getPolicy>) => (reads++, services.policy.getPolicy(...args)) };
  const call: CallContext = { tenant, principal: "agent", sessionId: "s-1" };
  const ruleArgs = createRuleArgsGuard({ logger });
  const deps = { registry, policy, memory: services.memory, provider: new HeuristicProvider(), audit, approvals: createMemoryApprovalStore(), call, ruleArgs, stepTimeoutMs: 5_000 };
  const run = (capability: string, input: Record<string, unknown>) => executeStep({ id: "s1", capability, input }, deps);
  const decisions = () => audit.events().filter((e): e is StepDecisionEvent => e.type === "step.decision");
  return { run, decisions, version, registry, logged, reads: () => reads, put: (d: Record<string, unknown>) => services.putPolicy(tenant, protoJson(d)) };
}

// The dangerous kind: at call time `has(args.pth)` is false, so the deny would never fire.
const misspelt = { rules: [{ capability: "files.write_file", effect: "deny", when: 'has(args.pth) && args.pth.startsWith("/etc/")', description: "never /etc" }] };

describe("a rule reading an argument the pinned tools it names do not declare", () => {
  it("denies those tools, naming the rule and the problem, once logged; other tools run", async () => {
    calls.length = 0;
    const h = await harness(misspelt, [upstreamTool("files", "write_file", { path: "string", content: "string" }), upstreamTool("files", "read_file", { path: "string" })]);
    const denied = await h.run("files.write_file", { path: "/srv/a.txt", content: "x" });
    expect(denied).toMatchObject({
      status: "denied",
      ran: false,
      verdict: { decision: "DENY", matchedRule: "rules[0]", policyVersion: h.version, condition: misspelt.rules[0]!.when },
    });
    expect(denied.verdict?.reason).toContain('rules[0] ("never /etc") reads an argument the pinned tools it names do not declare');
    expect(denied.verdict?.conditionError).toMatch(/^rules\[0\]\.when: unknown field "pth" at 1:\d+ .* against the pinned input schemas of files\.write_file$/);
    // Recorded before anything ran, as any decision is.
    expect(h.decisions().at(-1)?.verdict).toMatchObject({ decision: "DENY", matchedRule: "rules[0]", conditionError: denied.verdict?.conditionError });

    await h.run("files.write_file", { path: "/srv/b.txt", content: "y" });
    expect(await h.run("files.read_file", { path: "/srv/a.txt" })).toMatchObject({ status: "executed" });
    expect(calls).toEqual(["files.read_file"]);
    // One read of the policy for its version, one line for the problem however many calls meet it.
    expect(h.reads()).toBe(1);
    expect(h.logged).toHaveLength(1);
    expect(h.logged[0]).toMatchObject({ rule: "rules[0]", policy_version: h.version, tools: ["files.write_file"] });
    expect(h.logged[0]!.msg).toMatch(/unknown field "pth".*: the tools it names are denied until the rule or the pins change$/);
  });

  it("is checked again when the policy changes: a fixed rule governs again", async () => {
    calls.length = 0;
    const h = await harness(misspelt, [upstreamTool("files", "write_file", { path: "string", content: "string" })]);
    expect(await h.run("files.write_file", { path: "/etc/passwd", content: "x" })).toMatchObject({ status: "denied", verdict: { matchedRule: "rules[0]" } });
    const fixed = await h.put({ rules: [{ ...misspelt.rules[0], when: 'args.path.startsWith("/etc/")' }] });
    expect(await h.run("files.write_file", { path: "/srv/ok.txt", content: "x" })).toMatchObject({ status: "executed", verdict: { decision: "ALLOW", policyVersion: fixed } });
    // The fixed rule now decides from the argument the tool declares.
    const etc = await h.run("files.write_file", { path: "/etc/passwd", content: "x" });
    expect(etc).toMatchObject({ status: "denied", verdict: { matchedRule: "rules[0]", policyVersion: fixed } });
    expect(etc.verdict?.conditionError).toBeUndefined();
    expect(calls).toEqual(["files.write_file"]);
  });

  it("is checked again when new pins arrive: a pin that drops the argument denies, one that restores it frees", async () => {
    calls.length = 0;
    const rule = { rules: [{ capability: "files.*", effect: "require_approval", when: 'args.path.startsWith("/etc/")' }] };
    const h = await harness(rule, [upstreamTool("files", "write_file", { path: "string", content: "string" })]);
    expect(await h.run("files.write_file", { path: "/srv/a.txt", content: "x" })).toMatchObject({ status: "executed" });

    // The operator approves a new contract: the tool now takes `file`, not `path`.
    h.registry.replaceUpstreamTools([upstreamTool("files", "write_file", { file: "string", content: "string" })]);
    const denied = await h.run("files.write_file", { file: "/srv/a.txt", content: "x" });
    expect(denied).toMatchObject({ status: "denied", verdict: { decision: "DENY", matchedRule: "rules[0]" } });
    expect(denied.verdict?.conditionError).toMatch(/unknown field "path".*files\.write_file$/);

    // A second tool declaring `path` under the same pattern: the union of the named tools' fields types `args`.
    h.registry.replaceUpstreamTools([upstreamTool("files", "write_file", { file: "string", content: "string" }), upstreamTool("files", "read_file", { path: "string" })]);
    expect(await h.run("files.read_file", { path: "/srv/a.txt" })).toMatchObject({ status: "executed" });
    expect(calls).toEqual(["files.write_file", "files.read_file"]);
    expect(h.reads()).toBe(1);
  });

  it("leaves built-in capabilities and rules that read no argument alone", async () => {
    calls.length = 0;
    const h = await harness({ rules: [{ capability: "files.*", effect: "deny", when: '"blocked" in principal.roles' }] }, [upstreamTool("files", "read_file", { path: "string" })]);
    expect(await h.run("files.read_file", { path: "/srv/a.txt" })).toMatchObject({ status: "executed" });
    expect(h.logged).toEqual([]);
  });
});
