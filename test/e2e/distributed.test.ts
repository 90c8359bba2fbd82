import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { checkGrpcHealth } from "@chaos-core/kit";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { createLedgerKeys, type LedgerKeys } from "../support/ledger.js";
import { createMrtrKeys, type MrtrKeys } from "../support/mrtr-keys.js";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { httpClient, removeDir, ROOT, runToExit, startServiceMain, startServiceMains, stopProcess, tempDir } from "../support/processes.js";

describe("the services as separate processes (the Kubernetes shape)", () => {
  let db: TestDatabase;
  const procs: ChildProcess[] = [];
  let policy: string;
  let memory: string;
  let cognition: string;
  let council: string;
  let ledger: string;
  let keys: LedgerKeys;
  let mrtrKeys: MrtrKeys;
  let edgeUrl: string;
  let client: Client;
  // The operator's upstreams, declared and pinned for the cognition service (docs/federation.md §9).
  const upstreamsDir = tempDir("chaos-core-distributed-upstreams-");

  beforeAll(async () => {
    db = await createTestDatabase();
    const key = randomBytes(32).toString("hex");
    const common = { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key };
    keys = await createLedgerKeys();
    const [p, m, k] = await startServiceMains(procs, [
      ["policy", common],
      ["memory", common],
      ["council", common],
    ]);
    const l = await startServiceMain("ledger", { ...common, ...keys.env, POLICY_ADDR: p.address });
    procs.push(l.proc);
    ledger = l.address;
    policy = p.address;
    memory = m.address;
    council = k.address;
    const definitions = join(upstreamsDir, "tools.json");
    writeFileSync(definitions, JSON.stringify({ tools: [{ name: "echo", description: "Echoes its message back", inputSchema: { type: "object", properties: { message: { type: "string" } } }, annotations: { readOnlyHint: true, openWorldHint: false } }] }));
    const upstreamsFile = join(upstreamsDir, "upstreams.json");
    writeFileSync(upstreamsFile, JSON.stringify({ upstreams: [{ name: "echoer", command: process.execPath, args: [join(ROOT, "test/support/upstreams/changing-server.mjs"), definitions] }] }));
    const locked = await runToExit(["upstreams", "lock"], { CHAOS_CORE_UPSTREAMS_FILE: upstreamsFile, CHAOS_CORE_DATA_DIR: upstreamsDir, DATABASE_URL: db.url, ...keys.env }, 60_000);
    expect(locked.code, locked.stderr).toBe(0);
    const c = await startServiceMain("cognition", {
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: policy,
      MEMORY_ADDR: memory,
      LEDGER_ADDR: ledger,
      CHAOS_CORE_PROVIDER: "heuristic",
      CHAOS_CORE_UPSTREAMS_FILE: upstreamsFile,
      CHAOS_CORE_UPSTREAMS_WORK_DIR: join(upstreamsDir, "work"),
    });
    procs.push(c.proc);
    cognition = c.address;
    mrtrKeys = await createMrtrKeys();
    const e = await startServiceMain("edge", {
      ...mrtrKeys.env,
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: policy,
      MEMORY_ADDR: memory,
      COGNITION_ADDR: cognition,
      COUNCIL_ADDR: council,
      LEDGER_ADDR: ledger,
    });
    procs.push(e.proc);
    edgeUrl = e.address;
    client = await httpClient(edgeUrl);
  });

  afterAll(async () => {
    await client?.close();
    for (const p of procs.reverse()) await stopProcess(p);
    await db?.drop();
    await keys?.remove();
    await mrtrKeys?.remove();
    removeDir(upstreamsDir);
  });

  it("serves the operator's pinned upstream tools from the cognition service through the edge", async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name)).toContain("echoer__echo");
    const res = (await client.callTool({ name: "echoer__echo", arguments: { message: "across the services" } })) as CallToolResult;
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
    expect(JSON.stringify(res.content)).toContain("across the services");
  });

  it("answers gRPC health SERVING from each service run alone", async () => {
    await expect(checkGrpcHealth(policy)).resolves.toBe("SERVING");
    await expect(checkGrpcHealth(policy, "chaoscore.policy.v1.PolicyService")).resolves.toBe("SERVING");
    await expect(checkGrpcHealth(memory)).resolves.toBe("SERVING");
    await expect(checkGrpcHealth(memory, "chaoscore.memory.v1.MemoryService")).resolves.toBe("SERVING");
    await expect(checkGrpcHealth(cognition, "chaoscore.cognition.v1.CognitionService")).resolves.toBe("SERVING");
    await expect(checkGrpcHealth(council, "chaoscore.council.v1.CouncilService")).resolves.toBe("SERVING");
    await expect(checkGrpcHealth(ledger, "chaoscore.ledger.v1.LedgerService")).resolves.toBe("SERVING");
  });

  it("serves the edge's health and readiness", async () => {
    const base = edgeUrl.replace(/\/mcp$/, "");
    expect((await fetch(`${base}/healthz`)).status).toBe(200);
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: "ready", checks: { council: { ok: true }, ledger: { ok: true } } });
  });

  it("remembers and recalls through edge → gRPC → memory on Postgres", async () => {
    const wrote = await client.callTool({ name: "chaoscore_remember", arguments: { key: "k8s", value: { ok: true } } });
    expect(wrote.isError, JSON.stringify(wrote.content)).toBeFalsy();
    const read = await client.callTool({ name: "chaoscore_recall", arguments: { key: "k8s" } });
    expect(read.isError, JSON.stringify(read.content)).toBeFalsy();
    expect((read.structuredContent as { items: Array<{ value: unknown }> }).items[0]?.value).toEqual({ ok: true });
  });

  it("carries a value nested as deep as the edge admits (64 levels) through every gRPC hop and back", async () => {
    // Each JSON level is two protobuf levels (Value → Struct/ListValue) inside the request's own.
    let deep: unknown = { bottom: true };
    for (let i = 1; i < 63; i++) deep = i % 2 ? [deep] : { n: deep };
    const wrote = await client.callTool({ name: "chaoscore_remember", arguments: { key: "deep", value: deep } });
    expect(wrote.isError, JSON.stringify(wrote.content)).toBeFalsy();
    const read = await client.callTool({ name: "chaoscore_recall", arguments: { key: "deep" } });
    expect(read.isError, JSON.stringify(read.content)).toBeFalsy();
    expect((read.structuredContent as { items: Array<{ value: unknown }> }).items[0]?.value).toEqual(deep);
  });

  it("achieves an objective through edge → gRPC → cognition → gRPC → policy and memory", async () => {
    const res = await client.callTool({ name: "chaoscore_achieve", arguments: { objective: "remember that the deploy window is friday" } });
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
    expect(res.structuredContent).toMatchObject({ status: "succeeded" });
  });

  it("starts a council session through edge → gRPC → council on Postgres", async () => {
    const res = await client.callTool({ name: "council_init", arguments: { task: "Migrate a 2 GB MySQL database to PostgreSQL" } });
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
    expect(res.structuredContent).toMatchObject({ phase: "decompile", persona: "Systems Analyst" });
  });

  it("lists, reads and completes council sessions as resources through edge → gRPC (ListSessions, Recall), and the ledger's checkpoint", async () => {
    const init = await client.callTool({ name: "council_init", arguments: { task: "Move the billing cron jobs to a queue", title: "Billing queue" } });
    const id = (init.structuredContent as { sessionId: string }).sessionId;
    const { resources } = await client.listResources();
    expect(resources.find((r) => r.uri === `council://sessions/${id}`)).toMatchObject({ title: "Billing queue" });
    const read = await client.readResource({ uri: `council://sessions/${id}` });
    expect(JSON.parse((read.contents[0] as { text: string }).text)).toMatchObject({ sessionId: id, activePhase: "decompile" });
    const done = await client.complete({ ref: { type: "ref/prompt", name: "council_phase_brief" }, argument: { name: "sessionId", value: id.slice(0, 9) } });
    expect(done.completion.values).toEqual([id]);
    // A governed call is audited by the ledger: its checkpoint is there, with the key that verifies it.
    expect((await client.callTool({ name: "chaoscore_remember", arguments: { key: "audited", value: 1 } })).isError).toBeFalsy();
    const cp = await client.readResource({ uri: "chaoscore://ledger/checkpoint" });
    expect(JSON.parse((cp.contents[0] as { text: string }).text)).toMatchObject({ size: expect.any(Number), verifier_key: expect.any(String) });
  });

  it("reports the policy that the policy service holds", async () => {
    const res = await client.callTool({ name: "chaoscore_inspect", arguments: { what: "policy", capability: "http.request" } });
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
    expect(JSON.stringify(res.structuredContent)).toMatch(/DENY|REQUIRE_APPROVAL/);
  });
});
