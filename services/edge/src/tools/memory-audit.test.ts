import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ElicitRequestSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { createInProcessClient, createLogger } from "@chaos-core/kit";
import { createCognitionHandlers, createDefaultCognitionDeps, createMemoryPlanStore } from "@chaos-core/cognition";
import { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { connectInMemory, uniqueTenant, type Connected } from "../test-support/in-memory.js";
import { startTestLedger, type TestLedger } from "../test-support/ledger.js";
import { startTestServices, type TestServices } from "../test-support/services.js";

// chaoscore_remember and chaoscore_recall run as steps of cognition's executor, built here as
// standalone builds it: with the real ledger as its audit sink and receipt authority. Every
// decision and outcome they cause is then an entry of the tenant's audit ledger.

let services: TestServices;
let ledger: TestLedger;
let deps: EdgeDeps;
const open: Connected[] = [];

type Event = Record<string, unknown> & { type: string };

/** A session of `tenant`; with `asked`, its user approves every elicitation and the questions are kept. */
async function connect(tenant: string, asked?: string[]): Promise<Connected> {
  const c = await connectInMemory(
    deps,
    { tenant, principal: "agent" },
    asked
      ? {
          capabilities: { elicitation: { form: {} } },
          setup: (client) =>
            client.setRequestHandler(ElicitRequestSchema, (req) => {
              asked.push(req.params.message);
              return { action: "accept", content: { approve: true } };
            }),
        }
      : {},
  );
  open.push(c);
  return c;
}

function ok(res: CallToolResult): Record<string, unknown> {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  return res.structuredContent as Record<string, unknown>;
}

function errorOf(res: CallToolResult): { code: string; message: string } {
  expect(res.isError, JSON.stringify(res.content)).toBe(true);
  return (res.structuredContent as { error: { code: string; message: string } }).error;
}

/** The tenant's ledger entries, oldest first, with who caused them. */
async function entries(tenant: string): Promise<Array<{ principal: string; event: Event }>> {
  const res = await ledger.client.listEntries({ limit: 1000 }, { ctx: { tenant, principal: "test" } });
  return res.entries.map((e) => ({ principal: e.principal, event: e.event as Event }));
}

beforeAll(async () => {
  services = await startTestServices("memory_audit");
  ledger = await startTestLedger("memory_audit");
  const cognition = createInProcessClient(
    CognitionService,
    createCognitionHandlers(
      createDefaultCognitionDeps({
        policy: services.policy,
        memory: services.memory,
        plans: createMemoryPlanStore(),
        ledger: ledger.client,
        logger: createLogger("cognition-test", "silent"),
        provider: { id: "heuristic", selection: "inferred" },
      }),
    ),
  );
  deps = { ...services.deps(), cognition, ledger: ledger.client };
});

afterAll(async () => {
  for (const c of open) await c.close();
  await ledger?.close();
  await services?.close();
});

describe("the memory tools through the executor", () => {
  it("a remember leaves its policy decision and outcome in the tenant's audit ledger", async () => {
    const tenant = uniqueTenant("remember-audit");
    const c = await connect(tenant);
    expect(await entries(tenant)).toEqual([]);

    const { item } = ok(await c.call("chaoscore_remember", { key: "deploy", value: { day: "friday" }, tags: ["ops"] })) as {
      item: Record<string, unknown>;
    };
    expect(item).toMatchObject({ key: "deploy", value: { day: "friday" }, tags: ["ops"] });

    const log = await entries(tenant);
    expect(log.map((e) => e.event.type)).toEqual(["step.decision", "step.outcome"]);
    const [decision, outcome] = log.map((e) => e.event);
    expect(log.every((e) => e.principal === "agent")).toBe(true);
    expect(decision).toMatchObject({ stepId: "s1", capability: "memory.remember", risk: "low", verdict: { decision: "ALLOW" } });
    expect(decision!["argsHash"]).toMatch(/^[0-9a-f]{64}$/);
    expect(outcome).toMatchObject({
      stepId: "s1",
      capability: "memory.remember",
      status: "executed",
      ran: true,
      succeeded: true,
      argsHash: decision!["argsHash"],
    });

    // A recall is read-only (no side effect): its decision and outcome are one entry, durable
    // before the answer came back.
    const recalled = ok(await c.call("chaoscore_recall", { key: "deploy" }));
    expect(recalled).toEqual({ items: [item] });
    const after = await entries(tenant);
    expect(after.slice(2)).toEqual([
      {
        principal: "agent",
        event: {
          type: "step.read",
          stepId: "s1",
          capability: "memory.recall",
          risk: "low",
          argsHash: expect.stringMatching(/^[0-9a-f]{64}$/) as string,
          verdict: expect.objectContaining({ decision: "ALLOW", matchedRule: "default" }) as unknown,
          status: "executed",
          ran: true,
          succeeded: true,
        },
      },
    ]);
  });

  it("a denied recall is recorded as its decision and its outcome, and reads nothing", async () => {
    const tenant = uniqueTenant("recall-denied");
    const version = await services.putPolicy(tenant, { deniedCapabilities: ["memory.recall"] });
    const c = await connect(tenant);
    expect(errorOf(await c.call("chaoscore_recall", { key: "deploy" })).code).toBe("policy_denied");
    expect((await entries(tenant)).map((e) => e.event)).toEqual([
      expect.objectContaining({ type: "step.decision", capability: "memory.recall", verdict: expect.objectContaining({ decision: "DENY", policyVersion: version }) }),
      expect.objectContaining({ type: "step.outcome", capability: "memory.recall", status: "denied", ran: false }),
    ]);
  });

  it("a denied remember is recorded as denied, and nothing is written", async () => {
    const tenant = uniqueTenant("remember-denied");
    const version = await services.putPolicy(tenant, { deniedCapabilities: ["memory.remember"] });
    const c = await connect(tenant);
    const error = errorOf(await c.call("chaoscore_remember", { key: "k", value: 1 }));
    expect(error.code).toBe("policy_denied");
    expect(error.message).toMatch(/^memory\.remember is denied by policy \(rule .*deniedCapabilities.*, policy version \d+\): /);
    expect(error.message).toContain(`policy version ${version}`);

    expect((await entries(tenant)).map((e) => e.event)).toEqual([
      expect.objectContaining({
        type: "step.decision",
        capability: "memory.remember",
        verdict: expect.objectContaining({ decision: "DENY", policyVersion: version }),
      }),
      expect.objectContaining({ type: "step.outcome", capability: "memory.remember", status: "denied", ran: false }),
    ]);
    expect((await services.memory.recall({ key: "k" }, { ctx: { tenant, principal: "t" } })).item).toBeUndefined();
  });

  it("a remember that needs approval names the approval, and runs once through the chaoscore_execute call it names", async () => {
    const tenant = uniqueTenant("remember-approval");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });

    // A client that cannot elicit is told an approver must answer first.
    const plain = await connect(tenant);
    const refused = errorOf(await plain.call("chaoscore_remember", { key: "window", value: "friday 18:00" }));
    expect(refused.code).toBe("approval_required");
    const other = /approval ([0-9a-f-]{36}) waits for a person/.exec(refused.message)?.[1];
    expect(refused.message).toContain(`chaoscore_approve {"approval_id": "${other}", "approve": true}`);

    // A client that can elicit is told to call chaoscore_execute, which asks its user.
    const asked: string[] = [];
    const agent = await connect(tenant, asked);
    const error = errorOf(await agent.call("chaoscore_remember", { key: "window", value: "friday 18:00" }));
    expect(error.code).toBe("approval_required");
    expect(error.message).toMatch(/^memory\.remember needs a human approval under policy \(rule .*requireConfirmationFor/);
    const id = /approval ([0-9a-f-]{36}) waits for a person/.exec(error.message)?.[1];
    expect(id, error.message).toBeDefined();
    expect(error.message).toContain(`Call chaoscore_execute {"approval_id": "${id}"}: your user will be shown the request`);
    expect((await services.memory.recall({ key: "window" }, { ctx: { tenant, principal: "t" } })).item).toBeUndefined();
    expect(asked).toEqual([]);

    const ran = ok(await agent.call("chaoscore_execute", { approval_id: id }));
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain("friday 18:00");
    expect((ran.results as Array<Record<string, unknown>>)[0]).toMatchObject({ capability: "memory.remember", status: "executed" });
    const recalled = ok(await agent.call("chaoscore_recall", { key: "window" }));
    expect((recalled.items as Array<{ value: unknown }>).map((i) => i.value)).toEqual(["friday 18:00"]);

    const events = (await entries(tenant)).map((e) => e.event);
    const outcomes = events.filter((e) => e.type === "step.outcome" && e["capability"] === "memory.remember").map((e) => e["status"]);
    expect(outcomes).toEqual(["pending_approval", "pending_approval", "executed"]);
  });
});
