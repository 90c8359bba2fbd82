/**
 * Readiness follows the database (issue 12 item 7, and the chart's readiness probes): a service
 * run alone whose Postgres stops answering turns its gRPC health NOT_SERVING (liveness stays
 * SERVING, so Kubernetes takes the pod out of its Services without restarting it), its calls
 * fail `unavailable` naming the database, and once Postgres answers again it turns SERVING and
 * serves, with nothing restarted. The outage is a TCP proxy the test cuts in front of the
 * machine's Postgres.
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { checkGrpcHealth, ContextSigner, createGrpcClient, LIVENESS_HEALTH_SERVICE } from "@chaos-core/kit";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { startServiceMain, stopProcess, type ServiceMain } from "../support/processes.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";

/** Polls `check` until it returns true (the service's own timer decides when; this only waits for it). */
async function eventually(what: string, check: () => Promise<boolean>, limitMs = 40_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe("readiness follows the database", () => {
  let db: TestDatabase;
  let proxy: TcpProxy;
  let memory: ServiceMain;
  const key = randomBytes(32).toString("hex");
  const procs: ChildProcess[] = [];

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_db_outage");
    const url = new URL(db.url);
    proxy = await startTcpProxy(url.hostname, Number(url.port || 5432));
    url.port = String(proxy.port);
    memory = await startServiceMain("memory", { DATABASE_URL: url.toString(), CHAOS_CORE_CONTEXT_KEY: key });
    procs.push(memory.proc);
  }, 120_000);

  afterAll(async () => {
    for (const p of procs) await stopProcess(p);
    await proxy?.close();
    await db?.drop();
  });

  it("turns NOT_SERVING while Postgres is out of reach, refuses calls naming the database, and serves again once it is back", async () => {
    const client = createGrpcClient(MemoryService, memory.address, new ContextSigner(key), { timeoutMs: 5_000 });
    const ctx = { ctx: { tenant: "acme", principal: "outage@acme" } };
    try {
      await expect(checkGrpcHealth(memory.address)).resolves.toBe("SERVING");
      await client.client.stats({}, ctx);

      await proxy.cut();
      await eventually("NOT_SERVING during the outage", async () => (await checkGrpcHealth(memory.address)) === "NOT_SERVING");
      // Not ready is not dead: no liveness restart for a database outage.
      await expect(checkGrpcHealth(memory.address, LIVENESS_HEALTH_SERVICE)).resolves.toBe("SERVING");
      const refused = await client.client.stats({}, ctx).then(
        () => undefined,
        (err: unknown) => err as { code: string; message: string },
      );
      expect(refused?.code).toBe("unavailable");
      expect(refused?.message).toContain("database is unavailable");
      expect(memory.log()).toContain("the database cannot be reached");

      await proxy.restore();
      await eventually("SERVING once Postgres is back", async () => (await checkGrpcHealth(memory.address)) === "SERVING");
      await expect(client.client.stats({}, ctx)).resolves.toBeDefined();
      expect(memory.log()).toContain("the database answers again: serving");
      expect(memory.proc.exitCode).toBeNull();
    } finally {
      client.close();
    }
  });
});
