/**
 * deploy/local: the chart's topology on one machine (issue 12 item 5). Two topologies side by
 * side (ports shifted, a database each; the second with the chart's mutual gRPC TLS from a
 * cert-manager-style folder), every component its own process with the chart's environment, driven through a real MCP client with the API key from the secret files; then one
 * non-edge service of a running topology is stopped and started again: calls needing it fail
 * `unavailable` naming it meanwhile, and succeed again, with nothing else restarted. Both run the
 * chart's Prometheus metrics: twelve processes, each on a scrape port of its own. Tenants and keys
 * are administered through policy's admin port as the chart's toolbox pod does it, and a revoked
 * key is refused on the edge's next request: through Redis (policy publishing the generation the
 * edge reads) on the first, under mutual TLS on the second. With the toolbox pod's (and the
 * retention CronJob's) addresses of the data services, a tenant is exported, its retention
 * applied and it is deleted.
 */
import { randomBytes, randomInt } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { Redis } from "ioredis";
import { Client as V2Client, StreamableHTTPClientTransport as V2Http } from "@modelcontextprotocol/client";
import { checkGrpcHealth, createRedisTenantGenerations, tenantKeyPrefix } from "@chaos-core/kit";
import { CHART_EDGE_READINESS, LISTEN_VARS, localEnvironments, startTopology, type LocalUpstreams, type Topology } from "../../deploy/local/topology.mjs";
import { createCertAuthority, removeCerts, type CertAuthority } from "../support/certs.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { httpClient, removeDir, ROOT, runToExit, tempDir } from "../support/processes.js";

const REDIS = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

/** Whether 127.0.0.1:`port` can be listened on now. */
function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** Whether every port the two topologies below listen on (`offset` and `offset` + 10) is free now. */
async function offsetFree(offset: number): Promise<boolean> {
  for (const i of [0, 10]) {
    // Paths only: nothing is read. The second topology's gRPC TLS adds its health ports.
    const grpcTls = i === 10 ? { dir: "/nonexistent" } : undefined;
    const envs = localEnvironments({ dir: "/nonexistent", databaseUrl: "postgres://unused", contextKey: "unused", portOffset: offset + i, grpcTls, metrics: {} });
    for (const env of Object.values(envs)) {
      for (const name of LISTEN_VARS) if (env[name] !== undefined && !(await portFree(Number(env[name])))) return false;
    }
  }
  return true;
}

/** The components of `t` whose process has exited, each with its exit and the end of its log. */
function exitedSince(t: Topology): string {
  const exited = [...t.processes].filter(([, p]) => p.exitCode !== null || p.signalCode !== null);
  if (exited.length === 0) return "every component is still running";
  return exited.map(([c, p]) => `${c} exited (${p.exitCode ?? p.signalCode}); its log ends:\n${t.log(c).split("\n").slice(-15).join("\n")}`).join("\n");
}

describe("deploy/local: two chart topologies side by side", () => {
  const dbs: TestDatabase[] = [];
  const dirs: string[] = [];
  const topologies: Topology[] = [];
  const clients: Client[] = [];
  // Ports from 3000+offset and 50051+offset; the second topology 10 above the first. The gRPC
  // health ports are 10 000 above (up to 50055 + 10 + offset + 10 000): offset stays ≤ 5 470.
  // Policy's admin API is at 50056 + offset, which no service or health port of either reaches.
  const pickOffset = () => 2_000 + 20 * randomInt(0, 170);
  let offset = pickOffset();
  let ca: CertAuthority;
  let shared = "";
  let upstreams: LocalUpstreams | undefined;

  beforeAll(async () => {
    // These ports lie in Linux's ephemeral range (32768–60999): one may be the local end of
    // another test's connection right now (a process then exits with EADDRINUSE, seen in CI).
    // Take an offset whose every listening port of both topologies is free at this moment.
    for (let attempt = 0; attempt < 50 && !(await offsetFree(offset)); attempt++) offset = pickOffset();
    ca = createCertAuthority("local-ca");
    // The first topology fronts server-filesystem as the chart's federation scenario does: a stdio
    // upstream declared with `bridge`, run as its own `chaos-core bridge` process, pinned first by
    // `chaos-core upstreams lock` as an operator would (docs/federation-platform.md §1, §2).
    shared = tempDir("chaos-local-share-");
    writeFileSync(join(shared, "notes.txt"), "bridged\n");
    const files = { name: "files", command: process.execPath, args: [join(ROOT, "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), shared] };
    const pinning = tempDir("chaos-local-pin-");
    dirs.push(pinning);
    writeFileSync(join(pinning, "upstreams.json"), JSON.stringify({ upstreams: [files] }));
    const locked = await runToExit(["upstreams", "lock"], { CHAOS_CORE_DATA_DIR: pinning }, 90_000);
    expect(locked.code, locked.stderr).toBe(0);
    upstreams = {
      declarations: [{ ...files, bridge: { tokenKey: "files-bridge-token" } }],
      lock: readFileSync(join(pinning, "upstreams.lock"), "utf8"),
      secrets: { "files-bridge-token": randomBytes(24).toString("hex") },
    };
    // One certificate for every component, as one cert-manager Certificate's Secret in the chart.
    const tls = { dir: ca.issue("chaos-core").dir, mutual: true };
    // Side by side: both start at once, and each keeps the index of its row below.
    const rows = [[0, `${REDIS}/9`, undefined, upstreams], [10, undefined, tls, undefined]] as const;
    const started = await Promise.allSettled(
      rows.map(async ([i, redis, grpcTls, federated], row) => {
        const db = await createTestDatabase("chaoscore_local");
        dbs[row] = db;
        const dir = tempDir("chaos-local-");
        dirs[row] = dir;
        const t = await startTopology({ dir, databaseUrl: db.url, redisUrl: redis, portOffset: offset + i, logLevel: "info", grpcTls, metrics: {}, upstreams: federated });
        topologies[row] = t;
        try {
          clients[row] = await httpClient(t.edgeUrl, { Authorization: `Bearer ${t.apiKey}` });
        } catch (err) {
          // Every component had logged its address; one that has exited since is the likely cause.
          throw new Error(`topology ${row}: ${(err as Error).message}\n${exitedSince(t)}`, { cause: err });
        }
      }),
    );
    for (const s of started) if (s.status === "rejected") throw s.reason;
  }, 180_000);

  afterAll(async () => {
    // A start that failed leaves holes in these.
    for (const c of clients) await c?.close().catch(() => undefined);
    for (const t of topologies) await t?.close();
    for (const db of dbs) await db?.drop();
    for (const d of dirs) if (d) removeDir(d);
    if (ca) removeCerts(ca);
    if (shared) removeDir(shared);
  });

  it("serves each topology through its own edge, on its own ports and database", async () => {
    const [a, b] = topologies as [Topology, Topology];
    expect(a.edgeUrl).toBe(`http://127.0.0.1:${3000 + offset}/mcp`);
    expect(b.edgeUrl).toBe(`http://127.0.0.1:${3010 + offset}/mcp`);
    for (const [i, client] of clients.entries()) {
      const wrote = await client.callTool({ name: "chaoscore_remember", arguments: { key: "topology", value: { i } } });
      expect(wrote.isError, JSON.stringify(wrote.content)).toBeFalsy();
    }
    for (const [i, client] of clients.entries()) {
      const read = await client.callTool({ name: "chaoscore_recall", arguments: { key: "topology" } });
      expect((read.structuredContent as { items: { value: unknown }[] }).items.map((x) => x.value)).toEqual([{ i }]);
    }
    const achieved = await clients[0]!.callTool({ name: "chaoscore_achieve", arguments: { objective: "remember that the local topology mirrors the chart" } });
    expect(achieved.structuredContent, JSON.stringify(achieved.content)).toMatchObject({ status: "succeeded" });
    // The edge binds with API keys, as in the chart: no key, no access.
    expect((await fetch(a.edgeUrl, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{}" })).status).toBe(401);
    for (const t of [a, b]) expect(await (await fetch(t.edgeUrl.replace(/\/mcp$/, "/readyz"))).json()).toMatchObject({ status: "ready" });
    // The second runs gRPC under mutual TLS: plaintext health only on the health port, none on the gRPC port.
    expect(b.envs.policy.CHAOS_CORE_GRPC_TLS_MUTUAL).toBe("true");
    await expect(checkGrpcHealth(`127.0.0.1:${b.envs.policy.CHAOS_CORE_GRPC_HEALTH_PORT}`)).resolves.toBe("SERVING");
    await expect(checkGrpcHealth(`127.0.0.1:${b.envs.policy.PORT}`)).rejects.toThrow();
    expect(b.log("policy")).toContain('"tls":"mutual"');
    // Every process of both serves its own scrape endpoint (a port taken twice would have stopped a start).
    const scrapePorts = new Set<string>();
    for (const t of [a, b]) {
      for (const [c, env] of Object.entries(t.envs)) {
        scrapePorts.add(env.CHAOS_CORE_METRICS_PROMETHEUS_PORT!);
        const res = await fetch(`http://127.0.0.1:${env.CHAOS_CORE_METRICS_PROMETHEUS_PORT}/metrics`);
        expect(res.status, c).toBe(200);
        const text = await res.text();
        // The memory service served the calls above: its RPC metrics are in its own scrape.
        if (c === "memory") expect(text, c).toContain("chaoscore_rpc_duration");
        // Each names itself, as in the chart (OTEL_SERVICE_NAME with metrics on).
        expect(text, c).toContain(`service_name="chaos-core-${c}"`);
      }
    }
    expect(scrapePorts.size).toBe(12);
  });

  it("administers tenants through policy's admin port with the toolbox pod's environment; a key issued there serves through the edge until revoked; export, retention and delete reach the data services", async () => {
    for (const [i, t] of topologies.entries()) {
      const policy = t.envs.policy;
      // What the chart gives the toolbox pod and the retention CronJob: the call-context key, the
      // admin address, the data services' addresses as the edge has them, and with gRPC TLS the
      // Secret's certificate files.
      const env = {
        CHAOS_CORE_CONTEXT_KEY: policy.CHAOS_CORE_CONTEXT_KEY,
        CHAOS_CORE_ADMIN_ADDR: `127.0.0.1:${policy.CHAOS_CORE_ADMIN_PORT}`,
        ...Object.fromEntries(["POLICY_ADDR", "MEMORY_ADDR", "COUNCIL_ADDR", "LEDGER_ADDR"].map((k) => [k, t.envs.edge[k]])),
        ...Object.fromEntries(Object.entries(policy).filter(([k]) => k.startsWith("CHAOS_CORE_GRPC_TLS_"))),
      };
      const cli = async (args: string[]) => {
        const r = await runToExit(args, env);
        expect(r.code, `topology ${i}: chaos-core ${args.join(" ")}\n${r.stderr}`).toBe(0);
        return r.stdout.trim();
      };
      const tenant = `local-${i}-${offset}`;
      await cli(["tenants", "create", tenant]);
      const key = await cli(["keys", "create", "--tenant", tenant, "--principal", "gil"]);
      // 2026-07-28, without a session: each request is authenticated on its own.
      const client = new V2Client({ name: `registry-${i}`, version: "1.0.0" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
      await client.connect(new V2Http(new URL(t.edgeUrl), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
      try {
        for (let n = 0; n < 3; n++) expect((await client.callTool({ name: "chaoscore_recall", arguments: { key: "k" } })).isError, `topology ${i}`).toBeFalsy();
        expect((await client.callTool({ name: "chaoscore_remember", arguments: { key: "exported", value: `notes of ${tenant}` } })).isError, `topology ${i}`).toBeFalsy();
        await cli(["keys", "revoke", key.split("_")[1]!, "--tenant", tenant]);
        await expect(client.callTool({ name: "chaoscore_recall", arguments: { key: "k" } }), `topology ${i}`).rejects.toThrow(/401|revoked/);
      } finally {
        await client.close();
      }
      // Export (memory, council, the ledger and policy over their main ports), retention (what the
      // CronJob runs), delete (disable, remove, record in the ledger); an export after it shows both.
      const out = join(dirs[i]!, `export-${tenant}`);
      await cli(["tenants", "export", tenant, "--out", out]);
      expect(readFileSync(join(out, "memory.jsonl"), "utf8"), `topology ${i}`).toContain(`notes of ${tenant}`);
      expect(JSON.parse(readFileSync(join(out, "policy.json"), "utf8"))).toHaveProperty("document");
      await cli(["tenants", "settings", tenant, "--memory-retention-days", "30"]);
      const retention = JSON.parse(await cli(["tenants", "retention", "--json"])) as { tenants: { tenant: string }[] };
      expect(retention.tenants, `topology ${i}`).toContainEqual({ tenant, memory_deleted: 0, council_deleted: 0 });
      expect(JSON.parse(await cli(["tenants", "delete", tenant, "--confirm", tenant, "--json"])), `topology ${i}`).toMatchObject({ memory_items: 1 });
      const after = join(dirs[i]!, `deleted-${tenant}`);
      await cli(["tenants", "export", tenant, "--out", after]);
      expect(readFileSync(join(after, "memory.jsonl"), "utf8")).not.toContain(`notes of ${tenant}`);
      expect(readFileSync(join(after, "ledger.jsonl"), "utf8"), `topology ${i}`).toContain('"tenant.deleted"');
      // With Redis, policy publishes the tenant's generation where the edge reads it, so edges may
      // cache what they resolved until it moves (without policy's REDIS_URL there is none to read).
      const edgeRedis = t.envs.edge.REDIS_URL;
      if (edgeRedis) {
        expect(policy.REDIS_URL).toBe(edgeRedis);
        const redis = new Redis(edgeRedis, { maxRetriesPerRequest: 1 });
        try {
          expect(await createRedisTenantGenerations(redis, { prefix: "chaoscore:" }).get(tenant), `topology ${i}: ${tenant}'s generation`).toBeGreaterThan(0);
          await redis.del(`${tenantKeyPrefix("chaoscore:", tenant)}gen`);
        } finally {
          redis.disconnect();
        }
      }
    }
    expect(topologies[0]!.envs.edge.REDIS_URL).toBeDefined();
    expect(topologies[1]!.envs.policy.CHAOS_CORE_GRPC_TLS_MUTUAL).toBe("true");
    // The admin API is not on the main port, where the edge, cognition and the ledger call policy.
    const policy = topologies[0]!.envs.policy;
    const misplaced = await runToExit(["tenants", "list"], { CHAOS_CORE_CONTEXT_KEY: policy.CHAOS_CORE_CONTEXT_KEY, CHAOS_CORE_ADMIN_ADDR: `127.0.0.1:${policy.PORT}` });
    expect(misplaced.code, misplaced.stderr).toBe(1);
  });

  it("reaches a stdio upstream bridged in its own process through the governed path, as the chart's federation scenario runs it", async () => {
    const t = topologies[0]!;
    const client = clients[0]!;
    // Listed as an MCP tool of the upstream, and run as one executor step through the bridge.
    expect((await client.listTools()).tools.map((x) => x.name)).toContain("files__read_text_file");
    const read = await client.callTool({ name: "chaoscore_execute", arguments: { steps: [{ id: "r1", capability: "files.read_text_file", input: { path: join(shared, "notes.txt") } }] } });
    const [step] = (read.structuredContent as { results: Array<{ status: string; ran: boolean; output?: { content: Array<{ text?: string }> } }> }).results;
    expect(step, JSON.stringify(read.content)).toMatchObject({ status: "executed", ran: true });
    expect(step!.output!.content[0]!.text).toBe("bridged\n");
    // Cognition reads it as an HTTP upstream at the bridge, a process of its own, which holds the session cognition opened.
    const declared = JSON.parse(readFileSync(t.envs.cognition.CHAOS_CORE_UPSTREAMS_FILE!, "utf8")) as { upstreams: Array<{ url: string; headers: unknown }> };
    expect(declared.upstreams[0]).toEqual({ name: "files", url: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/), headers: { Authorization: { file: "files-bridge-token", prefix: "Bearer " } } });
    const health = (await (await fetch(declared.upstreams[0]!.url.replace(/\/mcp$/, "/healthz"))).json()) as { sessions: number };
    expect(health.sessions).toBeGreaterThanOrEqual(1);
    // Without its token the bridge answers nobody.
    expect((await fetch(declared.upstreams[0]!.url, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).toBe(401);
    // The governed path recorded it: the ledger's decision for the step names the capability.
    const ledger = (await client.callTool({ name: "inspect_audit_ledger", arguments: { limit: 10 } })).structuredContent as { entries: Array<{ event: Record<string, unknown> }> };
    expect(ledger.entries.map((e) => e.event).filter((e) => e["type"] === "step.decision" && e["capability"] === "files.read_text_file")).not.toEqual([]);
  });

  it("fails calls clearly while memory is stopped, the edge staying in its Service, and serves them once it is started again, without restarting the edge", async () => {
    const t = topologies[0]!;
    const client = clients[0]!;
    const edgePid = t.processes.get("edge")!.pid;
    await t.stop("memory");
    // Probed as the chart's readiness probe does, for longer than it takes to leave the Service
    // (periodSeconds × failureThreshold): every probe ready, degraded, naming memory, and every
    // call answered `unavailable` naming it — never an empty Service (docs/operations.md "Readiness").
    const { periodSeconds, failureThreshold } = CHART_EDGE_READINESS;
    for (let probe = 0; probe <= failureThreshold; probe++) {
      if (probe > 0) await new Promise((r) => setTimeout(r, periodSeconds * 1000));
      const ready = await fetch(t.edgeUrl.replace(/\/mcp$/, "/readyz"));
      expect(ready.status).toBe(200);
      expect(await ready.json()).toMatchObject({ status: "degraded", checks: { memory: { ok: false, error: "unavailable" }, policy: { ok: true } } });
      const during = await client.callTool({ name: "chaoscore_recall", arguments: { key: "topology" } });
      expect(during.isError).toBe(true);
      expect(JSON.stringify(during.structuredContent ?? during.content)).toMatch(/unavailable/);
      expect(JSON.stringify(during.content)).toMatch(/memory service is unreachable/);
    }
    await t.start("memory");
    // The channel reconnects by itself (backoff at most 10 s): the next calls succeed.
    let after = await client.callTool({ name: "chaoscore_recall", arguments: { key: "topology" } });
    for (let i = 0; i < 40 && after.isError; i++) {
      await new Promise((r) => setTimeout(r, 500));
      after = await client.callTool({ name: "chaoscore_recall", arguments: { key: "topology" } });
    }
    expect(after.isError, JSON.stringify(after.content)).toBeFalsy();
    expect((after.structuredContent as { items: { value: unknown }[] }).items.map((x) => x.value)).toEqual([{ i: 0 }]);
    expect(t.processes.get("edge")!.pid).toBe(edgePid);
  }, 90_000);
});
