/**
 * Two cognition replicas as separate processes sharing plans through Redis: plan on one, execute
 * on the other; another session finds nothing. Policy and memory run as their own mains on a
 * fresh Postgres database. Needs `npm run build` (it starts each service's dist/main.js).
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChaosError, checkGrpcHealth, ContextSigner, createGrpcClient, type CallContext, type GrpcClient } from "@chaos-core/kit";
import { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { createLedgerKeys, type LedgerKeys } from "../support/ledger.js";
import { startServiceMain, startServiceMains, stopProcess } from "../support/processes.js";
import { TEST_REDIS_URL, uniquePrefix } from "../support/redis.js";

describe("two cognition replicas sharing plans through Redis", () => {
  let db: TestDatabase;
  let keys: LedgerKeys;
  const procs: ChildProcess[] = [];
  const cognition: Array<{ address: string; log: () => string }> = [];
  let a: GrpcClient<typeof CognitionService>;
  let b: GrpcClient<typeof CognitionService>;
  const tenant = `replicas-${randomBytes(3).toString("hex")}`;
  const as = (sessionId: string): { ctx: CallContext } => ({ ctx: { tenant, principal: "agent", sessionId } });

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_cognition_replicas");
    const key = randomBytes(32).toString("hex");
    const common = { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key };
    const [policy, memory] = await startServiceMains(procs, [
      ["policy", common],
      ["memory", common],
    ]);
    keys = await createLedgerKeys();
    const ledger = await startServiceMain("ledger", { ...common, ...keys.env, POLICY_ADDR: policy.address, REDIS_URL: TEST_REDIS_URL, CHAOS_CORE_REDIS_PREFIX: uniquePrefix("ledger-replicas") });
    procs.push(ledger.proc);
    const replicaEnv = {
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: policy.address,
      MEMORY_ADDR: memory.address,
      LEDGER_ADDR: ledger.address,
      REDIS_URL: TEST_REDIS_URL,
      CHAOS_CORE_REDIS_PREFIX: uniquePrefix("cognition-replicas"),
      CHAOS_CORE_PROVIDER: "heuristic",
    };
    cognition.push(...(await startServiceMains(procs, [["cognition", replicaEnv], ["cognition", replicaEnv]])));
    const signer = new ContextSigner(key);
    a = createGrpcClient(CognitionService, cognition[0]!.address, signer);
    b = createGrpcClient(CognitionService, cognition[1]!.address, signer);
  }, 120_000);

  afterAll(async () => {
    a?.close();
    b?.close();
    for (const p of procs.reverse()) await stopProcess(p);
    await db?.drop();
    await keys?.remove();
  });

  it("serves gRPC health SERVING from each replica and logs the chosen provider", async () => {
    for (const { address, log } of cognition) {
      await expect(checkGrpcHealth(address)).resolves.toBe("SERVING");
      await expect(checkGrpcHealth(address, "chaoscore.cognition.v1.CognitionService")).resolves.toBe("SERVING");
      expect(log()).toMatch(/"provider":"heuristic","selection":"explicit"/);
    }
  });

  it("executes on replica B a plan made on replica A, in the same session only", async () => {
    const planned = await a.client.plan({ objective: "Remember that the build server is ci-7" }, as("session-1"));
    expect(planned.steps.map((s) => s.capability)).toEqual(["memory.remember"]);

    const executed = await b.client.execute({ target: { case: "planId", value: planned.planId } }, as("session-1"));
    expect(executed.results.map((r) => [r.capability, r.status, r.verdict?.decision])).toEqual([["memory.remember", "executed", "ALLOW"]]);

    const elsewhere = await b.client.execute({ target: { case: "planId", value: planned.planId } }, as("session-2")).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(elsewhere).toBeInstanceOf(ChaosError);
    expect(elsewhere).toMatchObject({ code: "not_found" });
    expect((elsewhere as ChaosError).message).toContain(`no plan ${planned.planId} in this session`);
  });
});
