import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { ContextSigner, createGrpcClient } from "@chaos-core/kit";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createLedgerKeys, type LedgerKeys } from "../support/ledger.js";
import { createMrtrKeys, type MrtrKeys } from "../support/mrtr-keys.js";
import { sseStream } from "../support/mcp-http.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { TEST_REDIS_URL } from "../support/redis.js";
import { httpClient, ROOT, runToExit, startServiceMain, startServiceMains, stopProcess, type ServiceMain } from "../support/processes.js";
import { freePort, waitForPort } from "../support/ports.js";
import { eventually, postListen } from "../support/streams.js";
import { rawToolNames } from "../support/mrtr.js";

/**
 * Issue 32 item 1(b), in the Kubernetes shape: the cognition service run alone reads a tenant's
 * own upstreams from the policy service's TenantDirectoryService over gRPC, with the tenant
 * generations both share in Redis, and serves them to that tenant only; a disable reaches its
 * next call. The upstream is server-everything's Streamable HTTP mode, added with `chaos-core
 * upstreams add` through the cluster's tenant admin API. Two edge replicas share that Redis too:
 * a change the policy service commits is announced there, so the tenant's sessions hear
 * tools/list_changed without a request of theirs, and a replica holding nothing of the tenant
 * open lists the change on the tenant's very next request (docs/federation.md §12).
 */

describe("a tenant's own upstream, served by the cognition service run alone", () => {
  const key = randomBytes(32).toString("hex");
  const secret = `distributed-upstream-secret-${randomBytes(8).toString("hex")}`;
  const prefix = `chaoscore-t${randomBytes(4).toString("hex")}:`;
  const procs: ChildProcess[] = [];
  let db: TestDatabase;
  let keys: LedgerKeys;
  let remote: ChildProcess | undefined;
  let cognition: ReturnType<typeof createGrpcClient<typeof CognitionService>>;
  let cli: (args: string[]) => Promise<string>;
  let cognitionMain: ServiceMain;
  let policyMain: ServiceMain;
  let mrtrKeys: MrtrKeys;
  let acme: Client;
  let bravo: Client;
  let carolKey = "";
  let acmeKey = "";
  const heard = { acme: 0, bravo: 0 };
  let edgeUrl = "";
  let edge2Url = "";

  beforeAll(async () => {
    const port = await freePort();
    const everything = join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    remote = spawn(process.execPath, [everything, "streamableHttp"], { env: { ...process.env, PORT: String(port) }, stdio: "ignore" });
    await waitForPort(port);
    db = await createTestDatabase("chaoscore_tenant_upstreams_served");
    keys = await createLedgerKeys();
    const allowed = { CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "127.0.0.1" };
    const common = { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key, REDIS_URL: TEST_REDIS_URL, CHAOS_CORE_REDIS_PREFIX: prefix };
    const [p, m, k] = await startServiceMains(procs, [
      ["policy", { ...common, ...allowed }],
      ["memory", { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key }],
      ["council", { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key }],
    ]);
    policyMain = p;
    const l = await startServiceMain("ledger", { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: key, ...keys.env, POLICY_ADDR: p.address });
    procs.push(l.proc);
    cognitionMain = await startServiceMain("cognition", {
      ...common,
      ...allowed,
      POLICY_ADDR: p.address,
      MEMORY_ADDR: m.address,
      LEDGER_ADDR: l.address,
      CHAOS_CORE_PROVIDER: "heuristic",
      CHAOS_CORE_UPSTREAM_SECRET_ACME: secret,
    });
    procs.push(cognitionMain.proc);
    for (let i = 0; i < 100 && !/"adminPort":\d+/.test(p.log()); i++) await new Promise((r) => setTimeout(r, 50));
    const adminPort = /"adminPort":(\d+)/.exec(p.log())?.[1];
    expect(adminPort, p.log()).toBeDefined();
    const env = {
      ...allowed,
      CHAOS_CORE_ADMIN_ADDR: `127.0.0.1:${adminPort}`,
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: p.address,
      MEMORY_ADDR: m.address,
      COUNCIL_ADDR: k.address,
      LEDGER_ADDR: l.address,
      CHAOS_CORE_UPSTREAM_SECRET_ACME: secret,
    };
    cli = async (args) => {
      const r = await runToExit(args, env, 90_000);
      expect(r.code, `chaos-core ${args.join(" ")}\n${r.stderr}`).toBe(0);
      expect(r.stdout + r.stderr).not.toContain(secret);
      return r.stdout;
    };
    await cli(["tenants", "create", "acme"]);
    await cli(["tenants", "create", "bravo"]);
    await cli(["upstreams", "add", "everything", "--tenant", "acme", "--url", `http://127.0.0.1:${port}/mcp`, "--header", "Authorization=env:CHAOS_CORE_UPSTREAM_SECRET_ACME", "--risk", "low"]);
    cognition = createGrpcClient(CognitionService, cognitionMain.address, new ContextSigner(key));
    acmeKey = (await cli(["keys", "create", "--tenant", "acme", "--principal", "alice"])).trim();
    const bravoKey = (await cli(["keys", "create", "--tenant", "bravo", "--principal", "bob"])).trim();
    // carol registers a server of the same name, its own, and is only ever a 2026-07-28 client here.
    await cli(["tenants", "create", "carol"]);
    carolKey = (await cli(["keys", "create", "--tenant", "carol", "--principal", "cy"])).trim();
    await cli(["upstreams", "add", "everything", "--tenant", "carol", "--url", `http://127.0.0.1:${port}/mcp`]);
    mrtrKeys = await createMrtrKeys();
    const edgeEnv = {
      ...mrtrKeys.env,
      CHAOS_CORE_CONTEXT_KEY: key,
      POLICY_ADDR: p.address,
      MEMORY_ADDR: m.address,
      COGNITION_ADDR: cognitionMain.address,
      COUNCIL_ADDR: k.address,
      LEDGER_ADDR: l.address,
      REDIS_URL: TEST_REDIS_URL,
      CHAOS_CORE_REDIS_PREFIX: prefix,
    };
    const [edge, edge2] = await startServiceMains(procs, [
      ["edge", edgeEnv],
      ["edge", edgeEnv],
    ]);
    edgeUrl = edge.address;
    edge2Url = edge2.address;
    acme = await httpClient(edge.address, { Authorization: `Bearer ${acmeKey}` });
    bravo = await httpClient(edge.address, { Authorization: `Bearer ${bravoKey}` });
    acme.setNotificationHandler(ToolListChangedNotificationSchema, () => void (heard.acme += 1));
    bravo.setNotificationHandler(ToolListChangedNotificationSchema, () => void (heard.bravo += 1));
  }, 180_000);

  afterAll(async () => {
    await acme?.close().catch(() => {});
    await bravo?.close().catch(() => {});
    await mrtrKeys?.remove();
    cognition?.close();
    for (const proc of procs.reverse()) await stopProcess(proc);
    remote?.kill();
    await db?.drop();
    await keys?.remove();
  });

  const show = (v: unknown) => JSON.stringify(v, (_k, x: unknown) => (typeof x === "bigint" ? String(x) : x));
  const echo = async (tenant: string, message: string) =>
    (await cognition.client.execute({ target: { case: "steps", value: { steps: [{ id: "s1", capability: "everything.echo", input: { message } }] } } }, { ctx: { tenant, principal: "agent" } })).results[0]!;

  it("runs acme's everything.echo, read from the policy service over gRPC, and refuses bravo's as unknown", async () => {
    const ran = await echo("acme", "across the services");
    expect(ran, show(ran)).toMatchObject({ capability: "everything.echo", status: "executed", ran: true });
    expect(show(ran.output)).toContain("across the services");
    const listed = await cognition.client.listCapabilities({}, { ctx: { tenant: "acme", principal: "agent" } });
    expect(listed.capabilities.map((c) => c.name)).toContain("everything.echo");

    const refused = await echo("bravo", "from bravo");
    expect(refused).toMatchObject({ status: "failed", ran: false, errorCode: "not_found" });
    const bravos = await cognition.client.listCapabilities({}, { ctx: { tenant: "bravo", principal: "agent" } });
    expect(bravos.capabilities.map((c) => c.name).filter((n) => n.startsWith("everything."))).toEqual([]);
  });

  it("lists it to acme's session on the edge as everything__echo, which runs, and to bravo's not", async () => {
    expect((await acme.listTools()).tools.map((t) => t.name)).toContain("everything__echo");
    const echoed = (await acme.callTool({ name: "everything__echo", arguments: { message: "through the edge" } })) as { isError?: boolean; content: unknown };
    expect(echoed.isError, JSON.stringify(echoed)).toBeFalsy();
    expect(JSON.stringify(echoed.content)).toContain("through the edge");
    expect((await bravo.listTools()).tools.map((t) => t.name).filter((n) => n.startsWith("everything__"))).toEqual([]);
  });

  /** A 2026-07-28 tools/list on `url` with `key`: the upstream tools it names (`<upstream>__<tool>`). */
  const modernList = async (url: string, key: string) => {
    const names = await rawToolNames(url, { authorization: `Bearer ${key}` });
    expect(names).toContain("chaoscore_inspect");
    return names.filter((n) => /^[A-Za-z0-9-]+__[A-Za-z0-9_-]+$/.test(n));
  };

  it("lists carol's own on carol's very first request to the edge, a 2026-07-28 one", async () => {
    expect(await modernList(edgeUrl, carolKey)).toContain("everything__echo");
  });

  it("tells acme's session and listen stream tools/list_changed when the admin API disables and enables its upstream, with no request of acme's; bravo hears nothing; the other replica lists the change on acme's next request", async () => {
    // The second replica read acme's tools on acme's first request there; it holds nothing of acme open.
    expect(await modernList(edge2Url, acmeKey)).toContain("everything__echo");
    const listen = await postListen(edgeUrl, { Authorization: `Bearer ${acmeKey}` }, "listen-tools", { toolsListChanged: true });
    expect(listen.status).toBe(200);
    const stream = sseStream(listen);
    await stream.next((e) => e.message?.["method"] === "notifications/subscriptions/acknowledged", "the acknowledgement");
    const isToolsChanged = (e: { message?: Record<string, unknown> }) => e.message?.["method"] === "notifications/tools/list_changed";
    expect(heard).toEqual({ acme: 0, bravo: 0 });

    // Two changes, each heard within 10 s of the command: the edge's minute re-read could explain one, not both.
    await cli(["upstreams", "disable", "everything", "--tenant", "acme"]);
    await eventually(() => heard.acme === 1, "acme's session to hear tools/list_changed after the disable", 10_000);
    await stream.next(isToolsChanged, "tools/list_changed on acme's listen stream after the disable", 10_000);
    // Told too, the second replica read acme's tools again meanwhile: its very next answer to acme
    // lists the change (a replica that learnt of it from this request would answer from before it).
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await modernList(edge2Url, acmeKey)).not.toContain("everything__echo");
    await cli(["upstreams", "enable", "everything", "--tenant", "acme"]);
    await eventually(() => heard.acme === 2, "acme's session to hear tools/list_changed after the enable", 10_000);
    await stream.next(isToolsChanged, "tools/list_changed on acme's listen stream after the enable", 10_000);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(await modernList(edge2Url, acmeKey)).toContain("everything__echo");
    await stream.cancel();
    // Time for a change wrongly told to bravo to arrive too.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(heard).toEqual({ acme: 2, bravo: 0 });
    expect((await acme.listTools()).tools.map((t) => t.name)).toContain("everything__echo");
  }, 60_000);

  it("refuses acme's next call once the upstream is disabled, and the edge drops it from acme's list when acme's generation moved", async () => {
    await cli(["upstreams", "disable", "everything", "--tenant", "acme"]);
    expect(await echo("acme", "after disable")).toMatchObject({ status: "failed", ran: false, errorCode: "not_found" });
    // acme's next request reads the tenant again, its generation moved: its own tools are read again.
    await expect.poll(async () => (await acme.listTools()).tools.map((t) => t.name), { timeout: 10_000 }).not.toContain("everything__echo");
  });

  it("logs no secret value", () => {
    expect(cognitionMain.log()).not.toContain(secret);
    expect(policyMain.log()).not.toContain(secret);
  });
});
