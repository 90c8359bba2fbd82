/**
 * The built-in memory and text capabilities end to end: through the executor, against the real
 * policy and memory services on a fresh Postgres database.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRealServices, type RealServices } from "../../../../test/support/real-services.js";
import { createMemoryApprovalStore } from "../executor/approvals.js";
import { createInMemoryAuditSink } from "../executor/audit.js";
import type { ExecutorDeps } from "../executor/executor-deps.js";
import { executeSteps } from "../executor/plan-run.js";
import { executeStep } from "../executor/step-run.js";
import { HeuristicProvider, NO_MODEL } from "../providers/heuristic.js";
import { BUILT_IN_CAPABILITIES } from "./index.js";
import { jsonToValue } from "./memory-item.js";
import { createCapabilityRegistry } from "./registry.js";

let services: RealServices;
let policy: ExecutorDeps["policy"];
let memory: ExecutorDeps["memory"];
const registry = createCapabilityRegistry(BUILT_IN_CAPABILITIES);

beforeAll(async () => {
  services = await startRealServices("chaoscore_cognition_capabilities");
  policy = services.policy;
  memory = services.memory;
});

afterAll(async () => {
  await services?.close();
});

function depsFor(tenant: string): ExecutorDeps {
  return {
    registry,
    policy,
    memory,
    provider: new HeuristicProvider(),
    audit: createInMemoryAuditSink(),
    approvals: createMemoryApprovalStore(),
    call: { tenant, principal: "agent" },
  };
}

describe("memory.remember and memory.recall", () => {
  it("store and recall by key and by search, and tenant b never sees tenant a's items", async () => {
    const a = depsFor("cap-tenant-a");
    const b = depsFor("cap-tenant-b");

    const [stored, byKey, bySearch] = await executeSteps(
      [
        {
          id: "remember",
          capability: "memory.remember",
          input: { key: "db.primary", value: { host: "db-1", port: 5432 }, tags: ["database"], ttl_seconds: 3600 },
        },
        { id: "by-key", capability: "memory.recall", input: { key: "db.primary" } },
        { id: "by-search", capability: "memory.recall", input: { query: "db-1", tags: ["database"] } },
      ],
      a,
    );
    expect(stored).toMatchObject({
      status: "executed",
      output: { item: { key: "db.primary", value: { host: "db-1", port: 5432 }, tags: ["database"] } },
    });
    expect((stored?.output as { item: { expires_at?: string } }).item.expires_at).toBeDefined();
    expect(byKey).toMatchObject({ status: "executed", output: { items: [{ key: "db.primary", value: { host: "db-1", port: 5432 } }] } });
    expect(bySearch).toMatchObject({ status: "executed", output: { items: [{ key: "db.primary" }] } });

    const [otherKey, otherSearch] = await executeSteps(
      [
        { id: "by-key", capability: "memory.recall", input: { key: "db.primary" } },
        { id: "by-search", capability: "memory.recall", input: { query: "db" } },
      ],
      b,
    );
    expect(otherKey).toMatchObject({ status: "executed", output: { items: [] } });
    expect(otherSearch).toMatchObject({ status: "executed", output: { items: [] } });
  });

  it("refuses a recall that mixes key and search fields, naming the field", async () => {
    const result = await executeStep(
      { id: "s1", capability: "memory.recall", input: { key: "k", query: "q" } },
      depsFor("cap-tenant-mixed"),
    );
    expect(result.status).toBe("failed");
    expect(result.evaluation.problems).toEqual([
      "input.query: query cannot be combined with key: pass key alone to recall one item, or search without it",
    ]);
  });

  it("refuses to remember a value that is not JSON", async () => {
    const result = await executeStep(
      { id: "s1", capability: "memory.remember", input: { key: "k", value: undefined } },
      depsFor("cap-tenant-json"),
    );
    expect(result.status).toBe("failed");
    expect(result.evaluation.problems[0]).toMatch(/^input\.value: /);
  });
});

describe("memory.forget", () => {
  it("forgets a key in the caller's tenant only: another tenant's item of the same key is not found and stays", async () => {
    const a = depsFor("cap-forget-a");
    const b = depsFor("cap-forget-b");
    await executeSteps([{ id: "r", capability: "memory.remember", input: { key: "deploy-window", value: "friday" } }], a);
    await executeSteps([{ id: "r", capability: "memory.remember", input: { key: "deploy-window", value: "monday" } }], b);

    const [fromB] = await executeSteps([{ id: "f", capability: "memory.forget", input: { key: "deploy-window" } }], b);
    expect(fromB).toMatchObject({ status: "executed", verdict: { decision: "ALLOW" }, output: { key: "deploy-window", deleted: true } });
    const [bAgain, aStill] = [
      await executeStep({ id: "f2", capability: "memory.forget", input: { key: "deploy-window" } }, b),
      await executeStep({ id: "k", capability: "memory.recall", input: { key: "deploy-window" } }, a),
    ];
    expect(bAgain).toMatchObject({ status: "executed", output: { deleted: false } });
    expect(aStill).toMatchObject({ output: { items: [{ key: "deploy-window", value: "friday" }] } });

    // A key only tenant a holds is not found from tenant b, and a's item is untouched.
    await executeSteps([{ id: "r", capability: "memory.remember", input: { key: "only-a", value: 1 } }], a);
    const [notThere] = await executeSteps([{ id: "f", capability: "memory.forget", input: { key: "only-a" } }], b);
    expect(notThere).toMatchObject({ status: "executed", output: { key: "only-a", deleted: false } });
    const [kept] = await executeSteps([{ id: "k", capability: "memory.recall", input: { key: "only-a" } }], a);
    expect(kept).toMatchObject({ output: { items: [{ key: "only-a", value: 1 }] } });
  });

  it("is medium risk and destructive: the default policy runs it, and an operator can require approval", async () => {
    const capability = registry.get("memory.forget");
    expect(capability).toMatchObject({ risk: "medium", annotations: { destructiveHint: true, readOnlyHint: false } });
    const tenant = "cap-forget-approval";
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.forget"] });
    const d = depsFor(tenant);
    await executeSteps([{ id: "r", capability: "memory.remember", input: { key: "k", value: "v" } }], d);
    const [pending] = await executeSteps([{ id: "f", capability: "memory.forget", input: { key: "k" } }], d);
    expect(pending).toMatchObject({ status: "pending_approval", ran: false, approval: { step: { input: { key: "k" } } } });
    const [still] = await executeSteps([{ id: "k", capability: "memory.recall", input: { key: "k" } }], d);
    expect(still).toMatchObject({ output: { items: [{ key: "k" }] } });
  });
});

describe("memory.recall searching", () => {
  it("puts the item stored under exactly the query first, finds several words, and hides bookkeeping", async () => {
    const d = depsFor("cap-recall-exact");
    await executeSteps(
      [
        { id: "r1", capability: "memory.remember", input: { key: "deploy-window-old", value: "thursday" } },
        { id: "r2", capability: "memory.remember", input: { key: "deploy-window", value: "friday" } },
        { id: "r3", capability: "memory.remember", input: { key: "on-call-engineer-week", value: "Dana" } },
        { id: "r4", capability: "memory.remember", input: { key: "note-about-deploy-window", value: "ask ops" } },
      ],
      d,
    );
    const [exact] = await executeSteps([{ id: "q", capability: "memory.recall", input: { query: "deploy-window" } }], d);
    expect((exact?.output as { items: Array<{ key: string }> }).items.map((i) => i.key)).toEqual([
      "deploy-window",
      "deploy-window-old",
      "note-about-deploy-window",
    ]);
    const [words] = await executeSteps([{ id: "q", capability: "memory.recall", input: { query: "on-call-week" } }], d);
    expect(words).toMatchObject({ output: { items: [{ key: "on-call-engineer-week", value: "Dana" }] } });
    const [none] = await executeSteps([{ id: "q", capability: "memory.recall", input: { query: "nothing-like-this" } }], d);
    expect(none).toMatchObject({ output: { items: [] } });

    await d.memory.remember({ key: "procedure:abc", value: jsonToValue({ capabilities: ["memory.recall"] }), tags: ["chaoscore.procedure"], ttlSeconds: 0 }, { ctx: d.call });
    const [listed] = await executeSteps([{ id: "q", capability: "memory.recall", input: {} }], d);
    expect((listed?.output as { items: Array<{ key: string }> }).items.map((i) => i.key)).not.toContain("procedure:abc");
    const [byTag] = await executeSteps([{ id: "q", capability: "memory.recall", input: { tags: ["chaoscore.procedure"] } }], d);
    expect(byTag).toMatchObject({ output: { items: [{ key: "procedure:abc" }] } });
  });
});

describe("cognition.generate_text", () => {
  it("runs through the active provider, which says when no model was used", async () => {
    const result = await executeStep(
      { id: "s1", capability: "cognition.generate_text", input: { prompt: "Summarise the incident." } },
      depsFor("cap-tenant-text"),
    );
    expect(result).toMatchObject({
      status: "executed",
      verdict: { decision: "ALLOW" },
      output: { model: NO_MODEL, provider: "heuristic" },
    });
  });
});
