import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Client as V2Client, StreamableHTTPClientTransport as V2Http } from "@modelcontextprotocol/client";
import { MCP_DURATION_BUCKETS } from "@chaos-core/kit";
import { createLedgerKeys, type LedgerKeys } from "../support/ledger.js";
import { createMrtrKeys, type MrtrKeys } from "../support/mrtr-keys.js";
import { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from "../support/otlp-receiver.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { removeDir, ROOT, runToExit, startServiceMain, stdioClient, stopProcess, tempDir } from "../support/processes.js";
import { TEST_REDIS_URL, uniquePrefix } from "../support/redis.js";

/**
 * One trace across the loop (issue 12 item 6, docs/operations.md "Tracing and metrics"): every
 * service its own process (the Kubernetes shape) on real Postgres and Redis, each exporting
 * OTLP/HTTP to a receiver in this test. A tool call whose request carries the client's W3C
 * `traceparent` in `_meta` yields one trace, rooted in the client's span, with spans from every
 * process it touched, the cognitive stages, each ledger append, Postgres and Redis; the edge's
 * request span follows the MCP semantic conventions per protocol revision.
 */

const SERVICES = ["edge", "cognition", "policy", "ledger", "memory", "council"] as const;
const service = (name: string) => `chaos-core-${name}`;

/** A client-side span context: what an instrumented MCP client would put in `_meta`. */
function clientSpan(traceId = randomBytes(16).toString("hex")) {
  const spanId = randomBytes(8).toString("hex");
  return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
}

describe("OpenTelemetry: one trace per tool call across the distributed topology", () => {
  let db: TestDatabase;
  let receiver: OtlpReceiver;
  let ledgerKeys: LedgerKeys;
  let mrtrKeys: MrtrKeys;
  const procs: ChildProcess[] = [];
  const logs: Array<() => string> = [];
  let edgeUrl: string;
  let legacy: Client;
  let legacyTransport: StreamableHTTPClientTransport;
  let modern: V2Client;
  // The traceparent an instrumented HTTP client would send in the request's header (its own span).
  let headerTraceparent: string | undefined;

  // An upstream MCP server behind cognition (trouble-server's `meta` answers the _meta it was sent), pinned first.
  const upstreamsDir = tempDir("chaos-core-telemetry-upstreams-");

  beforeAll(async () => {
    writeFileSync(join(upstreamsDir, "upstreams.json"), JSON.stringify({ upstreams: [{ name: "trouble", command: process.execPath, args: [join(ROOT, "test/support/upstreams/trouble-server.mjs")] }] }));
    const locked = await runToExit(["upstreams", "lock"], { CHAOS_CORE_DATA_DIR: upstreamsDir }, 60_000);
    expect(locked.code, locked.stderr).toBe(0);
    receiver = await startOtlpReceiver();
    db = await createTestDatabase();
    ledgerKeys = await createLedgerKeys();
    mrtrKeys = await createMrtrKeys();
    const otel = (name: string) => ({
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: service(name),
      OTEL_BSP_SCHEDULE_DELAY: "100",
      OTEL_METRIC_EXPORT_INTERVAL: "500",
      OTEL_LOGS_EXPORTER: "none",
    });
    const key = randomBytes(32).toString("hex");
    const common = { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key };
    const redis = (name: string) => ({ REDIS_URL: TEST_REDIS_URL, CHAOS_CORE_REDIS_PREFIX: uniquePrefix(`telemetry-${name}`) });
    const start = async (name: string, env: Record<string, string>) => {
      const s = await startServiceMain(name, { ...env, ...otel(name) });
      procs.push(s.proc);
      logs.push(s.log);
      return s.address;
    };
    const [policy, memory, council] = await Promise.all([start("policy", common), start("memory", common), start("council", common)]);
    const ledger = await start("ledger", { ...common, ...ledgerKeys.env, ...redis("ledger"), POLICY_ADDR: policy });
    const cognition = await start("cognition", {
      CHAOS_CORE_CONTEXT_KEY: key,
      ...redis("cognition"),
      POLICY_ADDR: policy,
      MEMORY_ADDR: memory,
      LEDGER_ADDR: ledger,
      CHAOS_CORE_PROVIDER: "heuristic",
      CHAOS_CORE_UPSTREAMS_FILE: join(upstreamsDir, "upstreams.json"),
      CHAOS_CORE_UPSTREAMS_WORK_DIR: join(upstreamsDir, "work"),
    });
    edgeUrl = await start("edge", {
      ...mrtrKeys.env,
      CHAOS_CORE_CONTEXT_KEY: key,
      REDIS_URL: TEST_REDIS_URL,
      POLICY_ADDR: policy,
      MEMORY_ADDR: memory,
      COGNITION_ADDR: cognition,
      COUNCIL_ADDR: council,
      LEDGER_ADDR: ledger,
    });

    legacy = new Client({ name: "telemetry-e2e", version: "0.0.0" });
    legacyTransport = new StreamableHTTPClientTransport(new URL(edgeUrl), {
      fetch: (url, init) => {
        const headers = new Headers(init?.headers);
        if (headerTraceparent) headers.set("traceparent", headerTraceparent);
        return fetch(url, { ...init, headers });
      },
    });
    await legacy.connect(legacyTransport);
    modern = new V2Client({ name: "telemetry-e2e-modern", version: "0.0.0" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
    await modern.connect(new V2Http(new URL(edgeUrl)));
  }, 120_000);

  afterAll(async () => {
    await legacy?.close();
    await modern?.close();
    for (const p of procs.reverse()) await stopProcess(p);
    await receiver?.close();
    await db?.drop();
    await ledgerKeys?.remove();
    await mrtrKeys?.remove();
    removeDir(upstreamsDir);
  });

  /** Waits until the trace holds everything `complete` wants (exports arrive in batches), then returns it. */
  async function traceOf(traceId: string, complete: (spans: ReceivedSpan[]) => boolean): Promise<ReceivedSpan[]> {
    for (let i = 0; i < 300; i++) {
      const spans = receiver.spans.filter((s) => s.traceId === traceId);
      if (complete(spans)) return spans;
      await new Promise((r) => setTimeout(r, 100));
    }
    return receiver.spans.filter((s) => s.traceId === traceId);
  }

  /** The spans whose parent is neither in the trace nor one of the client's own spans. */
  function detachedOf(spans: ReceivedSpan[], clientSpanIds: string[]): ReceivedSpan[] {
    const ids = new Set(spans.map((s) => s.spanId));
    return spans.filter((s) => !ids.has(s.parentSpanId) && !clientSpanIds.includes(s.parentSpanId));
  }

  /** Every span's parent is in the trace or is one of the client's own spans: one tree, nothing detached. */
  function expectOneTree(spans: ReceivedSpan[], clientSpanIds: string[]) {
    expect(detachedOf(spans, clientSpanIds).map((s) => `${s.service}: ${s.name} (parent ${s.parentSpanId || "none"})`)).toEqual([]);
  }

  const names = (spans: ReceivedSpan[]) => new Set(spans.map((s) => s.name));
  const services = (spans: ReceivedSpan[]) => new Set(spans.map((s) => s.service));
  const isPg = (s: ReceivedSpan) => s.attributes["db.system"] === "postgresql" || s.attributes["db.system.name"] === "postgresql";
  const isRedis = (s: ReceivedSpan) => s.attributes["db.system"] === "redis" || s.attributes["db.system.name"] === "redis";

  it("traces chaoscore_achieve (2025-11-25) as one trace under the client's span: every process, the stages, ledger appends, Postgres, Redis", async () => {
    const mcp = clientSpan();
    const http = clientSpan(mcp.traceId);
    headerTraceparent = http.traceparent;
    const res = await legacy.callTool({
      name: "chaoscore_achieve",
      arguments: { objective: "remember that the deploy window is friday" },
      _meta: { traceparent: mcp.traceparent },
    });
    headerTraceparent = undefined;
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();

    const stages = ["context", "reason", "plan", "policy", "execute", "evaluate", "remember"].map((s) => `chaoscore.cognition.${s}`);
    // The tenant's first decision: cognition's policy snapshot reads the policy from the policy service (GetPolicy).
    const wantedServices = ["edge", "cognition", "policy", "ledger", "memory"].map(service);
    const spans = await traceOf(
      mcp.traceId,
      (t) =>
        wantedServices.every((s) => services(t).has(s)) &&
        stages.every((s) => names(t).has(s)) &&
        names(t).has("chaoscore.ledger.append") &&
        t.some(isPg) &&
        t.some(isRedis) &&
        names(t).has("tools/call chaoscore_achieve") &&
        names(t).has("chaoscore.policy.decide") &&
        // The edge's HTTP server span ends after the response went out: often in a later batch.
        t.some((s) => s.service === service("edge") && s.kind === 2 && s.name.startsWith("POST")) &&
        t.filter((s) => s.name === "chaoscore.cognition.v1.CognitionService/Achieve").length === 2,
    );
    expect(receiver.rejected).toEqual([]);
    for (const s of wantedServices) expect([...services(spans)], `a span from ${s}`).toContain(s);
    for (const s of stages) expect([...names(spans)], `the stage span ${s}`).toContain(s);
    expect([...names(spans)]).toContain("chaoscore.ledger.append");
    expect([...names(spans)]).toContain("chaoscore.policy.decide");
    const achieveRpc = spans.filter((s) => s.name === "chaoscore.cognition.v1.CognitionService/Achieve");
    expect(achieveRpc.map((s) => `${s.service} ${s.kind}`).sort(), [...names(spans)].join(", ")).toEqual([`${service("cognition")} 2`, `${service("edge")} 3`]);
    expect(spans.some(isPg), "a Postgres span").toBe(true);
    expect(spans.some(isRedis), "a Redis span").toBe(true);
    // A Redis statement names the command and its key, never the values (records, plans) it carries.
    for (const r of receiver.spans.filter(isRedis)) {
      const statement = String(r.attributes["db.query.text"] ?? r.attributes["db.statement"] ?? "");
      expect(statement, `${r.service} ${r.name}`).toMatch(/^[A-Za-z_]+( \S+( \[\d+ other arguments\])?)?$/);
    }

    // The edge's request span, as the MCP semantic conventions name and attribute it.
    const request = spans.find((s) => s.name === "tools/call chaoscore_achieve");
    expect(request, [...names(spans)].join(", ")).toBeDefined();
    expect(request).toMatchObject({ service: service("edge"), kind: 2, parentSpanId: mcp.spanId, status: 0 });
    expect(request!.attributes).toMatchObject({
      "mcp.method.name": "tools/call",
      "gen_ai.tool.name": "chaoscore_achieve",
      "gen_ai.operation.name": "execute_tool",
      "mcp.protocol.version": "2025-11-25",
      "mcp.session.id": legacyTransport.sessionId,
      "jsonrpc.request.id": expect.any(String),
      "network.transport": "tcp",
      "chaoscore.mcp.era": "legacy",
      "chaoscore.tenant": "default",
    });
    expect(request!.attributes["error.type"]).toBeUndefined();
    // The cognition call is the request's child: the tool's work hangs under the MCP span.
    const achieveClient = spans.find((s) => s.name === "chaoscore.cognition.v1.CognitionService/Achieve" && s.service === service("edge"));
    expect(achieveClient?.parentSpanId).toBe(request!.spanId);
    // The HTTP request joined the client's HTTP span (its header), the MCP request its MCP span (_meta).
    expect(spans.find((s) => s.service === service("edge") && s.kind === 2 && s.name.startsWith("POST"))?.parentSpanId).toBe(http.spanId);
    expectOneTree(spans, [mcp.spanId, http.spanId]);
  });

  it("traces a governed chaoscore_recall in both revisions: mcp.session.id only for 2025-11-25", async () => {
    await legacy.callTool({ name: "chaoscore_remember", arguments: { key: "traced", value: { ok: true } } });
    // Policy snapshots are on (the default): the decision is made in cognition, from the snapshot,
    // and the policy service is asked only when the snapshot must be re-read.
    const wantedServices = ["edge", "cognition", "ledger", "memory"].map(service);
    const governed = (t: ReceivedSpan[]) =>
      wantedServices.every((s) => services(t).has(s)) && names(t).has("chaoscore.cognition.policy") && names(t).has("chaoscore.policy.decide") && names(t).has("chaoscore.ledger.append") && t.some(isPg) && names(t).has("tools/call chaoscore_recall");

    const old = clientSpan();
    const legacyRes = await legacy.callTool({ name: "chaoscore_recall", arguments: { key: "traced" }, _meta: { traceparent: old.traceparent } });
    expect(legacyRes.isError, JSON.stringify(legacyRes.content)).toBeFalsy();
    const now = clientSpan();
    const modernRes = (await modern.callTool({ name: "chaoscore_recall", arguments: { key: "traced" }, _meta: { traceparent: now.traceparent } })) as {
      isError?: boolean;
      content: unknown;
    };
    expect(modernRes.isError, JSON.stringify(modernRes.content)).toBeFalsy();

    for (const [client, era, version] of [
      [old, "legacy", "2025-11-25"],
      [now, "modern", "2026-07-28"],
    ] as const) {
      const spans = await traceOf(client.traceId, governed);
      for (const s of wantedServices) expect([...services(spans)], `${era}: a span from ${s}`).toContain(s);
      expect([...names(spans)]).toEqual(expect.arrayContaining(["chaoscore.cognition.policy", "chaoscore.policy.decide", "chaoscore.ledger.append"]));
      const decision = spans.find((s) => s.name === "chaoscore.policy.decide");
      expect(decision, `${era}: the decision`).toMatchObject({ service: service("cognition"), attributes: expect.objectContaining({ "chaoscore.policy.source": "snapshot" }) });
      expect(spans.some(isPg), `${era}: a Postgres span`).toBe(true);
      const request = spans.find((s) => s.name === "tools/call chaoscore_recall");
      expect(request, [...names(spans)].join(", ")).toMatchObject({ service: service("edge"), kind: 2, parentSpanId: client.spanId });
      expect(request!.attributes).toMatchObject({
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "chaoscore_recall",
        "gen_ai.operation.name": "execute_tool",
        "mcp.protocol.version": version,
        "chaoscore.mcp.era": era,
      });
      if (era === "legacy") expect(request!.attributes["mcp.session.id"]).toBe(legacyTransport.sessionId);
      else {
        expect(request!.attributes).not.toHaveProperty("mcp.session.id");
        expect(request!.attributes["chaoscore.request.ref"]).toEqual(expect.any(String));
      }
      expectOneTree(spans, [client.spanId]);
    }
  });

  it("marks a refused call with error.type: tool_error for an isError result, the JSON-RPC code for a protocol error", async () => {
    const bad = clientSpan();
    const refused = await legacy.callTool({ name: "chaoscore_recall", arguments: { key: "x", query: "y" }, _meta: { traceparent: bad.traceparent } });
    expect(refused.isError).toBe(true);
    const unknown = clientSpan();
    await expect(legacy.callTool({ name: "no_such_tool", arguments: {}, _meta: { traceparent: unknown.traceparent } })).rejects.toThrow();

    // The trace also holds the request's own work (the relay's in-flight key in Redis): pick the request span.
    const toolError = (await traceOf(bad.traceId, (t) => t.some((s) => s.name === "tools/call chaoscore_recall"))).find((s) => s.name === "tools/call chaoscore_recall");
    expect(toolError).toMatchObject({ name: "tools/call chaoscore_recall", status: 2, attributes: expect.objectContaining({ "error.type": "tool_error" }) });
    const protocolError = (await traceOf(unknown.traceId, (t) => t.some((s) => s.name === "tools/call no_such_tool"))).find((s) => s.name === "tools/call no_such_tool");
    expect(protocolError).toMatchObject({ name: "tools/call no_such_tool", status: 2 });
    expect(protocolError!.attributes["error.type"]).toMatch(/^-32\d{3}$/);
    expect(protocolError!.attributes["rpc.response.status_code"]).toBe(protocolError!.attributes["error.type"]);
  });

  it("traces an upstream tool call: a CLIENT span under the step's span whose context the upstream receives; its duration per upstream, and the breaker's state", async () => {
    const mcp = clientSpan();
    const res = (await legacy.callTool({ name: "trouble__meta", arguments: {}, _meta: { traceparent: mcp.traceparent } })) as { isError?: boolean; content: Array<{ text?: string }> };
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
    // Each process exports its own batches: wait for the edge's spans too, until no span's parent is missing.
    const spans = await traceOf(mcp.traceId, (t) => names(t).has("tools/call meta") && names(t).has("chaoscore.cognition.step") && detachedOf(t, [mcp.spanId]).length === 0);
    const call = spans.find((s) => s.name === "tools/call meta");
    expect(call, [...names(spans)].join(", ")).toMatchObject({ service: service("cognition"), kind: 3, status: 0 });
    expect(call!.attributes).toMatchObject({
      "mcp.method.name": "tools/call",
      "gen_ai.tool.name": "meta",
      "gen_ai.operation.name": "execute_tool",
      "network.transport": "pipe",
      "chaoscore.upstream": "trouble",
    });
    expect(spans.find((s) => s.spanId === call!.parentSpanId)?.name).toBe("chaoscore.cognition.step");
    // The upstream was sent the call's trace context: this trace, the CLIENT span as its parent.
    const sent = JSON.parse(res.content[0]!.text!) as { traceparent?: string };
    expect(sent.traceparent).toBe(`00-${mcp.traceId}-${call!.spanId}-01`);
    expectOneTree(spans, [mcp.spanId]);

    const duration = () => receiver.histograms.find((p) => p.metric === "mcp.client.operation.duration" && p.count > 0 && p.attributes["chaoscore.upstream"] === "trouble");
    const breaker = () => receiver.gauges.find((p) => p.metric === "chaoscore.upstream.breaker.state" && p.attributes["upstream"] === "trouble");
    for (let i = 0; i < 200 && !(duration() && breaker()); i++) await new Promise((r) => setTimeout(r, 100));
    expect(duration()).toMatchObject({ service: service("cognition"), unit: "s", explicitBounds: [...MCP_DURATION_BUCKETS], attributes: expect.objectContaining({ "gen_ai.tool.name": "meta", "network.transport": "pipe" }) });
    expect(duration()!.attributes["error.type"]).toBeUndefined();
    expect(breaker()).toMatchObject({ service: service("cognition"), value: 0, attributes: { upstream: "trouble", scope: "shared" } });

    // A failed call: the span says why (the pool's error code), and so does its duration point.
    const failing = clientSpan();
    const crashed = await legacy.callTool({ name: "trouble__crash", arguments: {}, _meta: { traceparent: failing.traceparent } });
    expect(crashed.isError).toBe(true);
    const failed = (await traceOf(failing.traceId, (t) => names(t).has("tools/call crash"))).find((s) => s.name === "tools/call crash");
    expect(failed).toMatchObject({ service: service("cognition"), kind: 3, status: 2, attributes: expect.objectContaining({ "error.type": "unavailable", "chaoscore.upstream": "trouble" }) });
    const failedPoint = () => receiver.histograms.find((p) => p.metric === "mcp.client.operation.duration" && p.attributes["gen_ai.tool.name"] === "crash" && p.attributes["error.type"] === "unavailable");
    for (let i = 0; i < 200 && !failedPoint(); i++) await new Promise((r) => setTimeout(r, 100));
    expect(failedPoint()).toBeDefined();
  });

  it("exports mcp.server.operation.duration (seconds, the conventions' buckets) and the RED histograms per tool and per RPC", async () => {
    const wanted = (metric: string, where: (a: Record<string, unknown>) => boolean) => () =>
      receiver.histograms.find((p) => p.metric === metric && p.count > 0 && where(p.attributes));
    const mcpPoint = wanted("mcp.server.operation.duration", (a) => a["gen_ai.tool.name"] === "chaoscore_achieve");
    const toolPoint = wanted("chaoscore.tool.duration", (a) => a["chaoscore.tool"] === "chaoscore_achieve");
    const rpcPoint = wanted("chaoscore.rpc.duration", (a) => a["rpc.method"] === "chaoscore.memory.v1.MemoryService/Recall");
    for (let i = 0; i < 200 && !(mcpPoint() && toolPoint() && rpcPoint()); i++) await new Promise((r) => setTimeout(r, 100));

    expect(mcpPoint()).toMatchObject({
      service: service("edge"),
      unit: "s",
      explicitBounds: [...MCP_DURATION_BUCKETS],
      attributes: expect.objectContaining({ "mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "mcp.protocol.version": "2025-11-25" }),
    });
    expect(toolPoint()).toMatchObject({ service: service("edge"), attributes: expect.objectContaining({ "chaoscore.outcome": "ok" }) });
    expect(rpcPoint()).toBeDefined();
    expect(SERVICES.filter((s) => receiver.histograms.some((p) => p.service === service(s) && p.metric === "chaoscore.rpc.duration"))).toEqual(
      expect.arrayContaining(["edge", "cognition", "policy", "ledger", "memory"]),
    );
  });
});

describe("OpenTelemetry over stdio, standalone (every service in one process, in-process calls)", () => {
  const dir = tempDir("chaos-core-telemetry-stdio-");
  let receiver: OtlpReceiver;
  let client: Client;

  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    await seedDataDir(dir);
    ({ client } = await stdioClient({
      CHAOS_CORE_DATA_DIR: dir,
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
      OTEL_SERVICE_NAME: "chaos-core-stdio",
      OTEL_BSP_SCHEDULE_DELAY: "100",
      OTEL_METRICS_EXPORTER: "none",
      OTEL_LOGS_EXPORTER: "none",
    }));
  });

  afterAll(async () => {
    await client?.close();
    await receiver?.close();
    removeDir(dir);
  });

  it("names the request span the same way, with network.transport pipe, the negotiated version and no mcp.session.id; in-process calls are its children", async () => {
    const mcp = clientSpan();
    const res = await client.callTool({ name: "chaoscore_recall", arguments: { key: "nothing-here" }, _meta: { traceparent: mcp.traceparent } });
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
    let spans: ReceivedSpan[] = [];
    for (let i = 0; i < 300; i++) {
      spans = receiver.spans.filter((s) => s.traceId === mcp.traceId);
      if (spans.some((s) => s.name === "tools/call chaoscore_recall") && spans.some((s) => s.name === "chaoscore.ledger.append")) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const request = spans.find((s) => s.name === "tools/call chaoscore_recall");
    expect(request, spans.map((s) => s.name).join(", ")).toMatchObject({ kind: 2, parentSpanId: mcp.spanId });
    expect(request!.attributes).toMatchObject({
      "mcp.method.name": "tools/call",
      "gen_ai.tool.name": "chaoscore_recall",
      "mcp.protocol.version": "2025-11-25",
      "network.transport": "pipe",
      "chaoscore.mcp.era": "legacy",
    });
    expect(request!.attributes).not.toHaveProperty("mcp.session.id");
    expect(spans.map((s) => s.name)).toEqual(
      expect.arrayContaining(["chaoscore.cognition.v1.CognitionService/Execute", "chaoscore.cognition.policy", "chaoscore.policy.decide", "chaoscore.ledger.append"]),
    );
    const ids = new Set(spans.map((s) => s.spanId));
    expect(spans.filter((s) => !ids.has(s.parentSpanId) && s.parentSpanId !== mcp.spanId).map((s) => s.name)).toEqual([]);
  });
});
