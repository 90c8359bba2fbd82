import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { createInterface } from "node:readline";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createInProcessClient, createLogger, createMemoryTenantGenerations, createPgliteDb, TOOLSET_NAMES, type Db } from "@chaos-core/kit";
import { createSqlTenantRegistry, createTenantDirectoryHandlers, migratePolicy, type TenantRegistry } from "@chaos-core/policy";
import { TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { createCredentialDirectory, type CredentialDirectory } from "../auth/directory.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { runStdioTransport } from "./stdio.js";

let services: TestServices;

beforeAll(async () => {
  services = await startTestServices("stdio");
});

afterAll(async () => {
  await services?.close();
});

/** A stdio session over in-memory pipes: lines in, every stdout line collected. */
async function start(deps: EdgeDeps, onDemand?: () => void, directory?: Promise<CredentialDirectory>, directoryWaitMs?: number) {
  const stdin = new PassThrough();
  const stdout = new PassThrough();
  const lines: string[] = [];
  const waiters = new Map<number, (msg: Record<string, unknown>) => void>();
  createInterface({ input: stdout }).on("line", (line) => {
    lines.push(line);
    const msg = JSON.parse(line) as Record<string, unknown>;
    if (typeof msg.id === "number") waiters.get(msg.id)?.(msg);
  });
  let closed = 0;
  const running = await runStdioTransport(deps, { stdin, stdout, onClose: () => closed++, ...(onDemand ? { onDemand } : {}), ...(directory ? { directory } : {}), ...(directoryWaitMs ? { directoryWaitMs } : {}) });
  const send = (msg: Record<string, unknown>) => stdin.write(`${JSON.stringify({ jsonrpc: "2.0", ...msg })}\n`);
  const request = (id: number, method: string, params: Record<string, unknown> = {}) =>
    new Promise<Record<string, unknown>>((resolve) => {
      waiters.set(id, resolve);
      send({ id, method, params });
    });
  /** Sends a raw line and waits for the answer with `id`. */
  const raw = (id: number, line: string) =>
    new Promise<Record<string, unknown>>((resolve) => {
      waiters.set(id, resolve);
      stdin.write(`${line}\n`);
    });
  return { stdin, lines, send, request, raw, running, closed: () => closed };
}

const MODERN = "2026-07-28";
/** The per-request envelope of a 2026-07-28 request (docs/protocol.md §1). */
const envelope = (extra: Record<string, unknown> = {}) => ({
  "io.modelcontextprotocol/protocolVersion": MODERN,
  "io.modelcontextprotocol/clientCapabilities": {},
  "io.modelcontextprotocol/clientInfo": { name: "stdio-modern", version: "1" },
  ...extra,
});

describe("runStdioTransport", () => {
  it("writes only JSON-RPC to stdout, serves the local tenant, and ends when stdin closes", async () => {
    const deps = services.deps(createMemorySessionStore());
    const io = await start(deps);
    const init = await io.request(1, "initialize", {
      protocolVersion: "2025-11-25",
      capabilities: {},
      clientInfo: { name: "stdio-test", version: "1" },
    });
    expect(init.result).toMatchObject({ serverInfo: { name: "chaos-core" }, capabilities: { logging: {} } });
    io.send({ method: "notifications/initialized" });

    const [record] = await deps.sessions.listByTenant("default");
    expect(record).toMatchObject({ tenant: "default", principal: "local", transport: "stdio", clientInfo: { name: "stdio-test" } });

    await io.request(2, "logging/setLevel", { level: "debug" });
    const stored = await io.request(3, "tools/call", { name: "chaoscore_remember", arguments: { key: "via-stdio", value: true } });
    expect((stored.result as { isError?: boolean }).isError).toBeFalsy();
    const bad = await io.request(4, "tools/call", { name: "chaoscore_recall", arguments: { limit: "ten" } });
    expect(JSON.stringify(bad.result)).toMatch(/limit/);

    // Every line on stdout is a JSON-RPC message: results and the log notifications asked for.
    expect(io.lines.length).toBeGreaterThanOrEqual(5);
    for (const line of io.lines) expect(JSON.parse(line)).toMatchObject({ jsonrpc: "2.0" });
    expect(io.lines.some((l) => l.includes("notifications/message"))).toBe(true);

    io.stdin.end();
    await new Promise((r) => setTimeout(r, 50));
    expect(io.closed()).toBe(1);
    expect(await deps.sessions.listByTenant("default")).toEqual([]);
    await io.running.close();
    expect(io.closed()).toBe(1);
  });

  it("writes the session record again if it expired while the client sat idle", async () => {
    const deps = services.deps(createMemorySessionStore({ ttlSeconds: 1 }));
    const io = await start(deps);
    await io.request(1, "initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "idle", version: "1" } });
    await new Promise((r) => setTimeout(r, 1100));
    expect(await deps.sessions.listByTenant("default")).toEqual([]);
    const res = await io.request(2, "tools/call", { name: "chaoscore_inspect", arguments: { what: "sessions" } });
    expect(res.result).toMatchObject({ structuredContent: { available: true, session: { client_info: { name: "idle" } } } });
    await io.running.close();
  });

  it("serves 2026-07-28 on the same process: server/discover, enveloped calls, no session record", async () => {
    const deps = services.deps(createMemorySessionStore());
    let demanded = 0;
    const io = await start(deps, () => demanded++);
    const discovered = await io.request(1, "server/discover", { _meta: envelope() });
    expect(discovered.result).toMatchObject({ supportedVersions: [MODERN], capabilities: { tools: {}, resources: {} } });
    expect(discovered.result).toMatchObject({ resultType: "complete", ttlMs: expect.any(Number), cacheScope: expect.any(String) });
    // A version probe needs no service: the caller's stores stay closed.
    expect(demanded).toBe(0);

    const tools = await io.request(2, "tools/list", { _meta: envelope() });
    expect((tools.result as { tools: unknown[] }).tools.length).toBeGreaterThan(10);
    expect(demanded).toBe(1);
    const inspect = await io.request(3, "tools/call", { name: "chaoscore_inspect", arguments: { what: "sessions" }, _meta: envelope() });
    const content = (inspect.result as { structuredContent: Record<string, unknown> }).structuredContent;
    expect(content.session).toBeUndefined();
    expect(content.request).toMatchObject({ protocol_version: MODERN, client_info: { name: "stdio-modern" }, request_ref: expect.stringMatching(/^[A-Za-z0-9_-]{22}$/) });
    const stored = await io.request(4, "tools/call", { name: "chaoscore_remember", arguments: { key: "stdio-modern", value: 1 }, _meta: envelope() });
    expect(stored.result).toMatchObject({ resultType: "complete" });
    expect((stored.result as { isError?: boolean }).isError).toBeFalsy();
    // 2026-07-28 has no session: none is recorded, and initialize is refused on this connection.
    expect(await deps.sessions.listByTenant("default")).toEqual([]);
    const init = await io.request(5, "initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "late", version: "1" } });
    expect(init.error).toMatchObject({ code: -32022, data: { supported: [MODERN] } });
    expect(await deps.sessions.listByTenant("default")).toEqual([]);
    expect(demanded).toBe(1);
    await io.running.close();
  });

  it("screens raw lines before the SDK on 2026-07-28 too: NaN with its id, the nesting screen, an unknown tool", async () => {
    const io = await start(services.deps(createMemorySessionStore()));
    // An opening that claims a revision this server does not serve is answered with the ones it does
    // (and pins nothing: the connection stays open for a modern opening).
    const future = await io.request(9, "tools/list", { _meta: envelope({ "io.modelcontextprotocol/protocolVersion": "2099-01-01" }) });
    expect(future.error).toMatchObject({ code: -32022, data: { supported: [MODERN], requested: "2099-01-01" } });
    const meta = JSON.stringify(envelope());
    const nan = await io.raw(1, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"chaoscore_remember","arguments":{"key":NaN},"_meta":${meta}}}`);
    expect(nan.error).toMatchObject({ code: -32700 });
    const deep = await io.raw(
      2,
      `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"chaoscore_remember","arguments":{"key":"k","tags":${"[".repeat(200)}${"]".repeat(200)}},"_meta":${meta}}}`,
    );
    const refused = deep.result as { isError: boolean; resultType: string; structuredContent: { error: { code: string; message: string } } };
    expect(refused).toMatchObject({ isError: true, resultType: "complete", structuredContent: { error: { code: "invalid_argument" } } });
    expect(refused.structuredContent.error.message).toContain("nests deeper than 64 levels");
    const unknown = await io.request(3, "tools/call", { name: "no_such_tool", arguments: {}, _meta: envelope() });
    expect(unknown.error).toMatchObject({ code: -32602, message: "Unknown tool: no_such_tool" });
    await io.running.close();
  });

  it("falls back to 2025-11-25 after a server/discover probe: initialize opens a session with its record", async () => {
    const deps = services.deps(createMemorySessionStore());
    const io = await start(deps);
    await io.request(1, "server/discover", { _meta: envelope() });
    const init = await io.request(2, "initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "after-probe", version: "1" } });
    expect(init.result).toMatchObject({ protocolVersion: "2025-11-25", serverInfo: { name: "chaos-core" } });
    io.send({ method: "notifications/initialized" });
    const [record] = await deps.sessions.listByTenant("default");
    expect(record).toMatchObject({ transport: "stdio", clientInfo: { name: "after-probe" } });
    const inspect = await io.request(3, "tools/call", { name: "chaoscore_inspect", arguments: { what: "sessions" } });
    expect(inspect.result).toMatchObject({ structuredContent: { session: { client_info: { name: "after-probe" }, protocol_version: "2025-11-25" } } });
    await io.running.close();
    expect(await deps.sessions.listByTenant("default")).toEqual([]);
  });

  it("counts a request as open until it is answered, whichever revision: idle() waits for it", async () => {
    const io = await start(services.deps(createMemorySessionStore()));
    await io.request(1, "server/discover", { _meta: envelope() });
    await io.running.idle();
    const answered = io.request(2, "tools/call", { name: "chaoscore_recall", arguments: { key: "nothing-here" }, _meta: envelope() });
    let idle = false;
    const waiting = io.running.idle().then(() => (idle = true));
    expect(idle).toBe(false);
    await answered;
    await waiting;
    expect(idle).toBe(true);
    await io.running.close();
  });
});

describe("the local tenant's toolsets, from the tenant registry", () => {
  let dir: string;
  let db: Db;
  let registry: TenantRegistry;
  let directory: CredentialDirectory;
  const FINANCE = ["place_equity_order", "wire_treasury_transfer", "rebalance_portfolio"];

  beforeAll(async () => {
    // The registry as the standalone holds it: the policy service's, in process, on its database.
    dir = await mkdtemp(join(tmpdir(), "chaoscore-stdio-toolsets-"));
    db = await createPgliteDb({ dataDir: dir });
    await migratePolicy(db);
    const generations = createMemoryTenantGenerations();
    registry = createSqlTenantRegistry(db, { generations });
    const client = createInProcessClient(TenantDirectoryService, createTenantDirectoryHandlers(registry));
    directory = createCredentialDirectory({ client, generations, logger: createLogger("test", "silent") });
  }, 60_000);

  afterAll(async () => {
    await db?.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** The registry as the stores open: readable once `open()` is called. */
  function opening() {
    let open!: () => void;
    const opened = new Promise<CredentialDirectory>((resolve) => (open = () => resolve(directory)));
    return { opened, open };
  }

  const names = (res: Record<string, unknown>) => ((res.result as { tools: Array<{ name: string }> }).tools ?? []).map((t) => t.name);

  it("lists the default toolsets at once while the registry opens, then tells a 2025-11-25 client to list again when its operator enabled finance-reference", async () => {
    await registry.createTenant({ id: "default", settings: { toolsets: [...TOOLSET_NAMES] } });
    const registryOpening = opening();
    const io = await start(services.deps(createMemorySessionStore()), undefined, registryOpening.opened);
    await io.request(1, "initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "toolsets", version: "1" } });
    io.send({ method: "notifications/initialized" });
    const before = names(await io.request(2, "tools/list"));
    expect(before).toContain("council_init");
    expect(before.filter((n) => FINANCE.includes(n))).toEqual([]);

    registryOpening.open();
    await expect.poll(() => io.lines.some((l) => l.includes('"notifications/tools/list_changed"'))).toBe(true);
    expect(names(await io.request(3, "tools/list"))).toEqual(expect.arrayContaining([...FINANCE, "council_init"]));
    // Served now: the tool answers (no ledger here, so it fails closed), not the toolset check.
    const call = await io.request(4, "tools/call", { name: "wire_treasury_transfer", arguments: { beneficiary: "Globex", amount: 10, currency: "USD" } });
    expect(call.result).toMatchObject({ isError: true, structuredContent: { error: { code: "unavailable" } } });
    await io.running.close();
  });

  it("holds a tool call until the registry answers, so a toolset its operator withheld never runs, and sends no list change when nothing changed", async () => {
    await registry.updateSettings("default", { councilRetentionDays: 0, memoryRetentionDays: 0, toolsets: ["core"] });
    const registryOpening = opening();
    const io = await start(services.deps(createMemorySessionStore()), undefined, registryOpening.opened);
    await io.request(1, "initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "toolsets", version: "1" } });
    io.send({ method: "notifications/initialized" });
    let answered = false;
    const council = io.request(2, "tools/call", { name: "council_init", arguments: { task: "Choose a cache" } }).then((res) => ((answered = true), res));
    await new Promise((r) => setTimeout(r, 100));
    expect(answered).toBe(false);

    registryOpening.open();
    const refused = await council;
    expect(refused.result).toMatchObject({ isError: true, structuredContent: { error: { code: "permission_denied" } } });
    expect(JSON.stringify(refused.result)).toContain('council_init belongs to the council toolset, which the operator has not enabled for tenant \\"default\\" (enabled: core)');
    expect(names(await io.request(3, "tools/list")).every((n) => n.startsWith("chaoscore_"))).toBe(true);

    // Back to the defaults: listed before the registry answered, and the same after, so no list change is sent.
    await registry.updateSettings("default", { councilRetentionDays: 0, memoryRetentionDays: 0, toolsets: [] });
    const again = opening();
    const quiet = await start(services.deps(createMemorySessionStore()), undefined, again.opened);
    await quiet.request(1, "initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "toolsets", version: "1" } });
    quiet.send({ method: "notifications/initialized" });
    const listed = names(await quiet.request(2, "tools/list"));
    again.open();
    expect(names(await quiet.request(3, "tools/call", { name: "chaoscore_inspect", arguments: { what: "sessions" } }).then(() => quiet.request(4, "tools/list")))).toEqual(listed);
    expect(quiet.lines.some((l) => l.includes("list_changed"))).toBe(false);
    await io.running.close();
    await quiet.running.close();
  });

  it("holds a 2026-07-28 client's tools/list until the registry answers, since no list change can reach it later", async () => {
    await registry.updateSettings("default", { councilRetentionDays: 0, memoryRetentionDays: 0, toolsets: [...TOOLSET_NAMES] });
    const registryOpening = opening();
    const io = await start(services.deps(createMemorySessionStore()), undefined, registryOpening.opened);
    let listed: string[] | undefined;
    const listing = io.request(1, "tools/list", { _meta: envelope() }).then((res) => (listed = names(res)));
    await new Promise((r) => setTimeout(r, 100));
    expect(listed).toBeUndefined();
    registryOpening.open();
    await listing;
    expect(listed).toEqual(expect.arrayContaining([...FINANCE, "council_init"]));
    await io.running.close();
  });

  it("waits for a registry that does not open only as long as a call waits for the stores, then serves the defaults", async () => {
    const never = new Promise<CredentialDirectory>(() => {});
    const io = await start(services.deps(createMemorySessionStore()), undefined, never, 200);
    await io.request(1, "initialize", { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "toolsets", version: "1" } });
    io.send({ method: "notifications/initialized" });
    const started = performance.now();
    const withheld = await io.request(2, "tools/call", { name: "place_equity_order", arguments: { symbol: "AAPL", side: "BUY", quantity: 1, notional: 10 } });
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect(withheld.result).toMatchObject({ isError: true, structuredContent: { error: { code: "permission_denied" } } });
    const served = await io.request(3, "tools/call", { name: "chaoscore_inspect", arguments: { what: "sessions" } });
    expect(served.result).toMatchObject({ structuredContent: { available: true } });
    await io.running.close();
  });
});
