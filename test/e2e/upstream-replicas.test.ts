/**
 * Two cognition replicas as separate processes in front of the same upstream, for one tenant
 * (docs/federation-platform.md §7): both record in one ledger, and they hold one breaker view
 * through Redis — when one finds the upstream failing, the other refuses at once without sending it
 * a request, and when one's probe gets through, the other closes too. The upstream is an SDK
 * Streamable HTTP server the test can take down (503 to everything) and bring back. Policy, memory
 * and the ledger run as their own mains on a fresh Postgres database; needs `npm run build`.
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { ContextSigner, createGrpcClient, type CallContext, type GrpcClient } from "@chaos-core/kit";
import { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { eventually } from "../support/eventually.js";
import { createLedgerKeys, type LedgerKeys } from "../support/ledger.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { removeDir, runToExit, startServiceMain, startServiceMains, stopProcess, tempDir } from "../support/processes.js";
import { TEST_REDIS_URL, uniquePrefix } from "../support/redis.js";

/** The breaker's own settings (pool.ts DEFAULT_BREAKER): 5 failures in a row open it for 15 s. */
const FAILURES = 5;
const OPEN_MS = 15_000;

describe("two cognition replicas serving one tenant's upstream calls", () => {
  const dir = tempDir("chaos-core-upstream-replicas-");
  const tenant = `replicas-${randomBytes(3).toString("hex")}`;
  const ctx: CallContext = { tenant, principal: "agent" };
  const procs: ChildProcess[] = [];
  let db: TestDatabase;
  let keys: LedgerKeys;
  let upstream: Server;
  let down = false;
  let requests = 0;
  const replicas: Array<GrpcClient<typeof CognitionService>> = [];
  let ledger: GrpcClient<typeof LedgerService>;

  beforeAll(async () => {
    upstream = createServer(async (req, res) => {
      requests++;
      if (down) return void res.writeHead(503).end("down for the test");
      const mcp = new McpServer({ name: "flaky", version: "1.0.0" });
      mcp.registerTool("ping", { description: "Answers pong.", annotations: { readOnlyHint: true } }, () => ({ content: [{ type: "text", text: "pong" }] }));
      const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
      res.on("close", () => void transport.close().then(() => mcp.close()));
      await mcp.connect(transport);
      await transport.handleRequest(req, res);
    });
    await new Promise<void>((done) => upstream.listen(0, "127.0.0.1", done));
    const file = join(dir, "upstreams.json");
    writeFileSync(file, JSON.stringify({ upstreams: [{ name: "flaky", url: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/mcp`, timeoutMs: 2_000, exposure: [{ tenants: [tenant] }] }] }));
    const locked = await runToExit(["upstreams", "lock"], { CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_UPSTREAMS_FILE: file }, 60_000);
    expect(locked.code, locked.stderr).toBe(0);

    db = await createTestDatabase("chaoscore_upstream_replicas");
    keys = await createLedgerKeys();
    const key = randomBytes(32).toString("hex");
    const common = { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key };
    const [policy, memory] = await startServiceMains(procs, [
      ["policy", common],
      ["memory", common],
    ]);
    const l = await startServiceMain("ledger", { ...common, ...keys.env, POLICY_ADDR: policy.address });
    procs.push(l.proc);
    const replicaEnv = {
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: policy.address,
      MEMORY_ADDR: memory.address,
      LEDGER_ADDR: l.address,
      REDIS_URL: TEST_REDIS_URL,
      CHAOS_CORE_REDIS_PREFIX: uniquePrefix("upstream-replicas"),
      CHAOS_CORE_PROVIDER: "heuristic",
      CHAOS_CORE_UPSTREAMS_FILE: file,
    };
    const mains = await startServiceMains(procs, [
      ["cognition", replicaEnv],
      ["cognition", replicaEnv],
    ]);
    const signer = new ContextSigner(key);
    replicas.push(...mains.map((m) => createGrpcClient(CognitionService, m.address, signer)));
    ledger = createGrpcClient(LedgerService, l.address, signer);
  }, 180_000);

  afterAll(async () => {
    for (const r of replicas) r.close();
    ledger?.close();
    for (const p of procs.reverse()) await stopProcess(p);
    await new Promise((done) => upstream?.close(done));
    await db?.drop();
    await keys?.remove();
    removeDir(dir);
  });

  const ping = async (replica: GrpcClient<typeof CognitionService>) =>
    (await replica.client.execute({ target: { case: "steps", value: { steps: [{ id: "p", capability: "flaky.ping", input: {} }] } } }, { ctx })).results[0]!;
  const breakerOf = async (replica: GrpcClient<typeof CognitionService>) =>
    (await replica.client.listUpstreams({ everyUpstream: true }, { ctx })).upstreams.find((u) => u.name === "flaky")?.breakers.find((b) => b.scope === "shared");

  it("records both replicas' calls in one ledger, and shares one breaker: opened by one, refused by the other at once, closed by either's probe", async () => {
    const [a, b] = [replicas[0]!, replicas[1]!];
    const first = await ping(a);
    expect(first, first.errorMessage).toMatchObject({ capability: "flaky.ping", status: "executed" });
    expect(await ping(b)).toMatchObject({ capability: "flaky.ping", status: "executed" });

    // One ledger: both outcomes in the tenant's one chain, and it verifies.
    const entries = (await ledger.client.listEntries({ limit: 100 }, { ctx })).entries;
    const outcomes = entries.filter((e) => (e.event as { type?: string } | undefined)?.type === "step.outcome");
    expect(outcomes).toHaveLength(2);
    expect((await ledger.client.verifyChain({}, { ctx })).ok).toBe(true);

    // The upstream goes down: A's calls fail until its breaker opens.
    down = true;
    for (let i = 0; i < FAILURES; i++) {
      const failed = await ping(a);
      expect(failed.status).toBe("failed");
      expect(failed.errorCode).toBe("unavailable");
    }
    expect(await breakerOf(a)).toMatchObject({ state: "open", consecutiveFailures: FAILURES });

    // B never failed a call: it shows the breaker open, and refuses without a request to the upstream.
    await eventually("replica B to show the breaker open", async () => ((await breakerOf(b))?.state === "open" ? true : undefined), { timeoutMs: 5_000, intervalMs: 50 });
    const before = requests;
    const refused = await ping(b);
    expect(refused.errorCode).toBe("unavailable");
    expect(refused.errorMessage).toMatch(/^upstream "flaky" failed 5 times in a row; its breaker is open until /);
    expect(requests).toBe(before);

    // It comes back; once the breaker expires, B's probe gets through and A closes too, with no call of its own.
    down = false;
    await new Promise((r) => setTimeout(r, OPEN_MS + 200));
    expect(await ping(b)).toMatchObject({ status: "executed" });
    expect(await breakerOf(b)).toMatchObject({ state: "closed", consecutiveFailures: 0 });
    await eventually("replica A to show the breaker closed", async () => ((await breakerOf(a))?.state === "closed" ? true : undefined), { timeoutMs: 5_000, intervalMs: 50 });
  }, 60_000);
});
