/**
 * Lifecycle of the services run as their own processes (issue 12 item 7): SIGTERM during a
 * burst of calls drains them — every accepted call completes or fails with a clear error, nothing
 * acknowledged is lost, and the process exits 0 within its grace. With CHAOS_CORE_MIGRATE=verify a
 * service applies no migration and reports NOT_SERVING until `chaos-core migrate` has run.
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { ChaosError, checkGrpcHealth, ContextSigner, createGrpcClient } from "@chaos-core/kit";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLedgerKeys, type LedgerKeys } from "../support/ledger.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { createMrtrKeys, type MrtrKeys } from "../support/mrtr-keys.js";
import { httpClient, runToExit, startServiceMain, startServiceMains, stopProcess, type ServiceMain } from "../support/processes.js";

const TENANT = "acme";
const CTX = { ctx: { tenant: TENANT, principal: "burst@acme" } };

type Outcome = { n: number; seq: bigint } | { n: number; error: ChaosError };

function exitOf(proc: ChildProcess): Promise<number | null> {
  if (proc.exitCode !== null) return Promise.resolve(proc.exitCode);
  return new Promise((resolve) => proc.once("exit", (code) => resolve(code)));
}

describe("SIGTERM during a burst of ledger appends", () => {
  let db: TestDatabase;
  let keys: LedgerKeys;
  let key: string;
  let policy: ServiceMain;
  const procs: ChildProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_lifecycle");
    key = randomBytes(32).toString("hex");
    keys = await createLedgerKeys();
    policy = await startServiceMain("policy", { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key });
    procs.push(policy.proc);
  }, 120_000);

  afterAll(async () => {
    for (const p of procs) await stopProcess(p);
    await keys?.remove();
    await db?.drop();
  });

  const ledgerEnv = () => ({
    DATABASE_URL: db.url,
    CHAOS_CORE_CONTEXT_KEY: key,
    POLICY_ADDR: policy.address,
    CHAOS_CORE_SHUTDOWN_GRACE_SECONDS: "20",
    ...keys.env,
  });

  it("completes or clearly refuses every call, keeps every acknowledged entry, verifies, and exits 0", async () => {
    const ledger = await startServiceMain("ledger", ledgerEnv());
    procs.push(ledger.proc);
    const exited = exitOf(ledger.proc);
    const { client, close } = createGrpcClient(LedgerService, ledger.address, new ContextSigner(key));
    const outcomes: Outcome[] = [];
    let next = 0;
    let onAcked: () => void = () => undefined;
    const enoughAcked = new Promise<void>((resolve) => (onAcked = resolve));
    // Sixteen callers append back to back; each stops at its first error, which must come after SIGTERM.
    const worker = async () => {
      for (let i = 0; i < 500; i++) {
        const n = next++;
        try {
          const res = await client.append({ event: { type: "test.burst", n } }, CTX);
          outcomes.push({ n, seq: res.entry!.seq });
          if (outcomes.length >= 60) onAcked();
        } catch (err) {
          outcomes.push({ n, error: err instanceof ChaosError ? err : ChaosError.from(err) });
          return;
        }
      }
    };
    let code: number | null;
    try {
      const workers = Array.from({ length: 16 }, worker);
      await enoughAcked;
      ledger.proc.kill("SIGTERM");
      await Promise.all(workers);
      code = await exited;
    } finally {
      close();
    }
    expect(code).toBe(0);
    expect(ledger.log()).toMatch(/"msg":"draining"/);
    expect(ledger.log()).toMatch(/"msg":"stopped"/);

    const acked = outcomes.filter((o): o is { n: number; seq: bigint } => "seq" in o);
    const failed = outcomes.filter((o): o is { n: number; error: ChaosError } => "error" in o);
    expect(acked.length).toBeGreaterThanOrEqual(60);
    // Every caller ran into the shutdown, and each was told so plainly: the ledger was no longer
    // there to take the call. A call the ledger had accepted and then cut (no drain: grace 0)
    // fails "Call cancelled" instead, and fails this.
    expect(failed).toHaveLength(16);
    for (const { error } of failed) {
      expect(error.code, error.message).toBe("unavailable");
      expect(error.message).toMatch(/^the ledger service is unreachable: /);
    }

    // A new ledger process on the same database has every acknowledged entry, and the chain verifies.
    const again = await startServiceMain("ledger", ledgerEnv());
    procs.push(again.proc);
    const reader = createGrpcClient(LedgerService, again.address, new ContextSigner(key));
    try {
      const stored = new Map<bigint, number>();
      let after = 0n;
      for (;;) {
        const page = await reader.client.listEntries({ afterSeq: after, limit: 1000 }, CTX);
        if (page.entries.length === 0) break;
        for (const e of page.entries) {
          const event = e.event as { type?: string; n?: number } | undefined;
          if (event?.type === "test.burst") stored.set(e.seq, event.n!);
          after = e.seq;
        }
      }
      for (const { n, seq } of acked) expect(stored.get(seq), `acknowledged append #${n} at seq ${seq}`).toBe(n);
      const verified = await reader.client.verifyChain({}, CTX);
      expect(verified).toMatchObject({ ok: true, problem: "" });
      expect(Number(verified.entries)).toBeGreaterThanOrEqual(acked.length);
    } finally {
      reader.close();
      await stopProcess(again.proc);
    }
  }, 180_000);
});

/** Polls until `attempt` answers `want` (no timing asserted: the test's own timeout bounds it). */
async function until(attempt: () => Promise<string>, want: string): Promise<void> {
  for (;;) {
    const got = await attempt().catch((err: unknown) => `error: ${(err as Error).message}`);
    if (got === want) return;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("CHAOS_CORE_MIGRATE=verify: services wait for chaos-core migrate", () => {
  let db: TestDatabase;
  let keys: LedgerKeys;
  let mrtrKeys: MrtrKeys;
  const procs: ChildProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_lifecycle_verify");
    keys = await createLedgerKeys();
    mrtrKeys = await createMrtrKeys();
  });

  afterAll(async () => {
    for (const p of procs.reverse()) await stopProcess(p);
    await keys?.remove();
    await mrtrKeys?.remove();
    await db?.drop();
  });

  it("reports NOT_SERVING (the edge staying ready, degraded) on a database whose migrations are behind, applies none, and serves once chaos-core migrate ran", async () => {
    const key = randomBytes(32).toString("hex");
    const common = { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key, CHAOS_CORE_MIGRATE: "verify" };
    const [policy, memoryMain, councilMain] = await startServiceMains(procs, [
      ["policy", common],
      ["memory", common],
      ["council", common],
    ]);
    const ledgerMain = await startServiceMain("ledger", { ...common, ...keys.env, POLICY_ADDR: policy.address });
    procs.push(ledgerMain.proc);
    const services = [
      { name: "chaoscore.policy.v1.PolicyService", main: policy },
      { name: "chaoscore.memory.v1.MemoryService", main: memoryMain },
      { name: "chaoscore.council.v1.CouncilService", main: councilMain },
      { name: "chaoscore.ledger.v1.LedgerService", main: ledgerMain },
    ];
    // The edge (no schema of its own) is not ready while the services cannot answer.
    const cognition = await startServiceMain("cognition", {
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: policy.address,
      MEMORY_ADDR: services[1]!.main.address,
      LEDGER_ADDR: services[3]!.main.address,
      CHAOS_CORE_PROVIDER: "heuristic",
    });
    procs.push(cognition.proc);
    const edge = await startServiceMain("edge", {
      ...mrtrKeys.env,
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: policy.address,
      MEMORY_ADDR: services[1]!.main.address,
      COGNITION_ADDR: cognition.address,
      COUNCIL_ADDR: services[2]!.main.address,
      LEDGER_ADDR: services[3]!.main.address,
    });
    procs.push(edge.proc);
    const readyz = new URL("/readyz", edge.address).toString();

    for (const { name, main } of services) {
      await until(async () => (main.log().includes("not serving until the migrations are current") ? "logged" : "not yet"), "logged");
      expect(await checkGrpcHealth(main.address, "")).toBe("NOT_SERVING");
      expect(await checkGrpcHealth(main.address, name)).toBe("NOT_SERVING");
      expect(await checkGrpcHealth(main.address, "liveness")).toBe("SERVING");
      expect(main.log()).toMatch(/migrations pending: \S+.*run chaos-core migrate/);
      expect(main.log()).not.toMatch(/"msg":"applied migrations"/);
    }
    // The edge stays in its Service (docs/operations.md "Readiness"): the services are named as degraded.
    const degraded = await fetch(readyz);
    expect(degraded.status).toBe(200);
    expect(await degraded.json()).toMatchObject({ status: "degraded", checks: { policy: { ok: false }, memory: { ok: false }, ledger: { ok: false } } });
    // Nothing was applied: no service created its schema.
    const migrated = await runToExit(["migrate", "--database-url", db.url], {});
    expect(migrated.stderr).toBe("");
    expect(migrated.code).toBe(0);
    for (const schema of ["memory", "council", "ledger", "policy"]) expect(migrated.stdout).toMatch(new RegExp(`^${schema}: applied `, "m"));

    for (const { name, main } of services) {
      await until(() => checkGrpcHealth(main.address, name), "SERVING");
      expect(await checkGrpcHealth(main.address, "")).toBe("SERVING");
      expect(main.log()).toMatch(/"msg":"migrations are current: serving"/);
    }
    await until(async () => ((await (await fetch(readyz)).json()) as { status: string }).status, "ready");
    const memory = createGrpcClient(MemoryService, services[1]!.main.address, new ContextSigner(key));
    try {
      const stats = await memory.client.stats({}, { ctx: { tenant: "acme", principal: "ops@acme" } });
      expect(stats).toBeDefined();
    } finally {
      memory.close();
    }
  }, 180_000);
});

describe("SIGTERM to the edge during a burst of chaoscore_remember calls", () => {
  let db: TestDatabase;
  let keys: LedgerKeys;
  let mrtrKeys: MrtrKeys;
  let edgeEnv: Record<string, string>;
  const procs: ChildProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_lifecycle_edge");
    keys = await createLedgerKeys();
    mrtrKeys = await createMrtrKeys();
    const key = randomBytes(32).toString("hex");
    const common = { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key };
    const [policy, memory, council] = await startServiceMains(procs, [
      ["policy", common],
      ["memory", common],
      ["council", common],
    ]);
    const ledger = await startServiceMain("ledger", { ...common, ...keys.env, POLICY_ADDR: policy.address });
    procs.push(ledger.proc);
    const cognition = await startServiceMain("cognition", {
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: policy.address,
      MEMORY_ADDR: memory.address,
      LEDGER_ADDR: ledger.address,
      CHAOS_CORE_PROVIDER: "heuristic",
    });
    procs.push(cognition.proc);
    edgeEnv = {
      ...mrtrKeys.env,
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: policy.address,
      MEMORY_ADDR: memory.address,
      COGNITION_ADDR: cognition.address,
      COUNCIL_ADDR: council.address,
      LEDGER_ADDR: ledger.address,
      CHAOS_CORE_SHUTDOWN_GRACE_SECONDS: "20",
    };
  }, 180_000);

  afterAll(async () => {
    for (const p of procs.reverse()) await stopProcess(p);
    await keys?.remove();
    await mrtrKeys?.remove();
    await db?.drop();
  });

  it("answers or clearly refuses every call, keeps every acknowledged write, and exits 0", async () => {
    const edge = await startServiceMain("edge", edgeEnv);
    procs.push(edge.proc);
    const exited = exitOf(edge.proc);
    const clients: Client[] = await Promise.all(Array.from({ length: 8 }, () => httpClient(edge.address)));
    const acked: string[] = [];
    const failed: string[] = [];
    let next = 0;
    let onAcked: () => void = () => undefined;
    const enoughAcked = new Promise<void>((resolve) => (onAcked = resolve));
    const caller = async (client: Client) => {
      for (let i = 0; i < 500; i++) {
        const k = `burst-${next++}`;
        try {
          const res = await client.callTool({ name: "chaoscore_remember", arguments: { key: k, value: { k } } });
          if (res.isError) {
            failed.push(`tool error: ${JSON.stringify(res.content)}`);
            return;
          }
          acked.push(k);
          if (acked.length >= 40) onAcked();
        } catch (err) {
          // fetch's own message is "fetch failed"; what happened is in its cause.
          const cause = (err as { cause?: { code?: string } }).cause?.code;
          failed.push(`${(err as Error).message}${cause ? ` (${cause})` : ""}`);
          return;
        }
      }
    };
    const callers = clients.map(caller);
    await enoughAcked;
    edge.proc.kill("SIGTERM");
    await Promise.all(callers);
    expect(await exited).toBe(0);
    expect(edge.log()).toMatch(/"msg":"stopped"/);
    for (const c of clients) await c.close().catch(() => undefined);

    expect(acked.length).toBeGreaterThanOrEqual(40);
    expect(failed).toHaveLength(8);
    // Refused by the draining edge (503, saying so); or never taken: the connection refused once it
    // stopped listening, or a keep-alive connection it closed at the end of the drain while the
    // next request was on the wire (every request it had read by then was answered). A request it
    // accepted and then cut (no drain: grace 0) times out instead, and fails this.
    for (const message of failed) expect(message).toMatch(/the edge is shutting down: retry on another replica|\((ECONNREFUSED|ECONNRESET|UND_ERR_SOCKET)\)$/);

    const again = await startServiceMain("edge", edgeEnv);
    procs.push(again.proc);
    const reader = await httpClient(again.address);
    try {
      for (const k of acked) {
        const read = await reader.callTool({ name: "chaoscore_recall", arguments: { key: k } });
        expect(read.isError, JSON.stringify(read.content)).toBeFalsy();
        expect((read.structuredContent as { items: Array<{ value: unknown }> }).items[0]?.value, k).toEqual({ k });
      }
    } finally {
      await reader.close();
      await stopProcess(again.proc);
    }
  }, 180_000);
});
