/**
 * deploy/local: the chart's topology on one machine (issue 12 item 5). Two topologies side by
 * side (ports shifted, a database each; the second with the chart's mutual gRPC TLS from a
 * cert-manager-style folder), every component its own process with the chart's environment, driven through a real MCP client with the API key from the secret files; then one
 * non-edge service of a running topology is stopped and started again: calls needing it fail
 * `unavailable` naming it meanwhile, and succeed again, with nothing else restarted. Both run the
 * chart's Prometheus metrics: twelve processes, each on a scrape port of its own.
 */
import { randomInt } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { checkGrpcHealth } from "@chaos-core/kit";
import { startTopology, type Topology } from "../../deploy/local/topology.mjs";
import { createCertAuthority, removeCerts, type CertAuthority } from "../support/certs.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { httpClient, removeDir, tempDir } from "../support/processes.js";

const REDIS = process.env.TEST_REDIS_URL ?? "redis://127.0.0.1:6379";

describe("deploy/local: two chart topologies side by side", () => {
  const dbs: TestDatabase[] = [];
  const dirs: string[] = [];
  const topologies: Topology[] = [];
  const clients: Client[] = [];
  // Ports from 3000+offset and 50051+offset; the second topology 10 above the first. The gRPC
  // health ports are 10 000 above (up to 50055 + 10 + offset + 10 000): offset stays ≤ 5 470.
  const offset = 2_000 + 20 * randomInt(0, 170);
  let ca: CertAuthority;

  beforeAll(async () => {
    ca = createCertAuthority("local-ca");
    // One certificate for every component, as one cert-manager Certificate's Secret in the chart.
    const tls = { dir: ca.issue("chaos-core").dir, mutual: true };
    // Side by side: both start at once, and each keeps the index of its row below.
    const rows = [[0, `${REDIS}/9`, undefined], [10, undefined, tls]] as const;
    const started = await Promise.allSettled(
      rows.map(async ([i, redis, grpcTls], row) => {
        const db = await createTestDatabase("chaoscore_local");
        dbs[row] = db;
        const dir = tempDir("chaos-local-");
        dirs[row] = dir;
        const t = await startTopology({ dir, databaseUrl: db.url, redisUrl: redis, portOffset: offset + i, logLevel: "info", grpcTls, metrics: {} });
        topologies[row] = t;
        clients[row] = await httpClient(t.edgeUrl, { Authorization: `Bearer ${t.apiKey}` });
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
    for (const t of [a, b]) expect((await fetch(t.edgeUrl.replace(/\/mcp$/, "/readyz"))).status).toBe(200);
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

  it("fails calls clearly while memory is stopped, and serves them once it is started again, without restarting the edge", async () => {
    const t = topologies[0]!;
    const client = clients[0]!;
    const edgePid = t.processes.get("edge")!.pid;
    await t.stop("memory");
    const during = await client.callTool({ name: "chaoscore_recall", arguments: { key: "topology" } });
    expect(during.isError).toBe(true);
    expect(JSON.stringify(during.structuredContent ?? during.content)).toMatch(/unavailable/);
    expect(JSON.stringify(during.content)).toMatch(/memory service is unreachable/);
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
  });
});
