/**
 * The built-in memory and text capabilities end to end: through the executor, against the real
 * policy and memory services on a fresh Postgres database.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startRealServices, type RealServices } from "../../../../test/support/real-services.js";
import { createMemoryApprovalStore } from "../executor/approvals.js";
import { createInMemoryAuditSink } from "../executor/audit.js";
import { executeStep, executeSteps, type ExecutorDeps } from "../executor/executor.js";
import { HeuristicProvider, NO_MODEL } from "../providers/heuristic.js";
import { BUILT_IN_CAPABILITIES } from "./index.js";
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
