import { createHash, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client as V2Client, StreamableHTTPClientTransport as V2Http } from "@modelcontextprotocol/client";
import { StdioClientTransport as V2Stdio } from "@modelcontextprotocol/client/stdio";
import { Client as V1Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport as V1Stdio } from "@modelcontextprotocol/sdk/client/stdio.js";
import { autoAcceptingClient } from "../support/elicitation.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { childEnv, CLI, httpClient, removeDir, ROOT, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { enableEveryToolset } from "../support/toolsets.js";

/**
 * Both protocol revisions on one `/mcp` endpoint of `chaos-core serve` (docs/protocol.md §3,
 * issue 11 step 5): the v1 `Client` (`@modelcontextprotocol/sdk`, 2025-11-25, a session) and the
 * v2 `Client` (`@modelcontextprotocol/client`), negotiating (`mode: 'auto'`) and pinned to
 * 2026-07-28, against the real binary with API keys: the same surface, the same data, the same
 * governance; a plan belongs to the principal that made it.
 */

const MODERN = "2026-07-28";
const hashApiKey = (key: string) => createHash("sha256").update(key, "utf8").digest("hex");

type Structured = Record<string, unknown>;
type CallResult = { isError?: boolean; structuredContent?: Structured; content: Array<{ type: string; text?: string }> };
/** What both clients share for calling a tool. */
type AnyClient = { callTool(params: { name: string; arguments: Structured }): Promise<unknown> };

const call = async (client: AnyClient, name: string, args: Structured) => (await client.callTool({ name, arguments: args })) as CallResult;
const ok = (res: CallResult): Structured => {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  return res.structuredContent!;
};
const errorText = (res: CallResult) => {
  expect(res.isError).toBe(true);
  return res.content.map((c) => c.text ?? "").join("\n");
};

describe("2025-11-25 and 2026-07-28 on one endpoint of chaos-core serve", () => {
  const dir = tempDir("chaos-core-protocol-eras-");
  const agentKey = randomBytes(24).toString("base64url");
  const otherKey = randomBytes(24).toString("base64url");
  const asked: string[] = [];
  const modernAsked: string[] = [];
  let serve: ServeProcess;
  let v1: V1Client;
  let auto: V2Client;
  let pinned: V2Client;
  let other: V2Client;
  let autoTransport: V2Http;

  const v2 = async (key: string, mode: "auto" | { pin: string }, name: string) => {
    const client = new V2Client(
      { name, version: "1.0.0" },
      // Declares form elicitation and accepts anything: asked through input_required results, auto-fulfilled.
      { capabilities: { elicitation: { form: {} } }, versionNegotiation: { mode } },
    );
    client.setRequestHandler("elicitation/create", async (req) => {
      modernAsked.push(String((req.params as { message?: string }).message));
      return { action: "accept", content: { confirm: true, approve: true } };
    });
    const transport = new V2Http(new URL(serve.url), { requestInit: { headers: { authorization: `Bearer ${key}` } } });
    await client.connect(transport);
    return { client, transport };
  };

  beforeAll(async () => {
    await seedDataDir(dir);
    const keysFile = join(dir, "keys.json");
    writeFileSync(
      keysFile,
      JSON.stringify([
        { tenant: "default", principal: "agent", sha256: hashApiKey(agentKey) },
        { tenant: "default", principal: "other-agent", sha256: hashApiKey(otherKey) },
      ]),
    );
    // The operator lets a client's own answer approve a wire: a 2025-11-25 session is asked for it.
    writeFileSync(
      join(dir, "policy.json"),
      JSON.stringify({ approvalChannels: { spend: { policies: { wire: ["client_elicitation", "approver", "operator", "console"] } } } }),
    );
    serve = await startServe({ CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_API_KEYS_FILE: keysFile });
    v1 = await httpClient(serve.url, { authorization: `Bearer ${agentKey}` }, autoAcceptingClient(asked));
    ({ client: auto, transport: autoTransport } = await v2(agentKey, "auto", "v2-auto"));
    ({ client: pinned } = await v2(agentKey, { pin: MODERN }, "v2-pinned"));
    ({ client: other } = await v2(otherKey, { pin: MODERN }, "v2-other"));
  }, 90_000);

  afterAll(async () => {
    await Promise.allSettled([v1, auto, pinned, other].map((c) => c?.close()));
    await serve?.stop();
    removeDir(dir);
  });

  it("negotiates: the v1 Client gets a session, the v2 Client lands on 2026-07-28 (auto and pinned) with none", async () => {
    expect(auto.getProtocolEra()).toBe("modern");
    expect(pinned.getProtocolEra()).toBe("modern");
    expect(autoTransport.sessionId).toBeUndefined();
    const legacy = ok(await call(v1, "chaoscore_inspect", { what: "sessions" }));
    expect(legacy.session).toMatchObject({ principal: "agent", protocol_version: "2025-11-25" });
    const modern = ok(await call(auto, "chaoscore_inspect", { what: "sessions" }));
    expect(modern.session).toBeUndefined();
    expect(modern.request).toMatchObject({ protocol_version: MODERN, client_info: { name: "v2-auto" } });
  });

  it("lists identical tools, prompts, resources and resource templates to both revisions", async () => {
    const [v1Tools, autoTools, pinnedTools] = await Promise.all([v1.listTools(), auto.listTools(), pinned.listTools()]);
    const shape = (tools: { tools: Array<{ name: string; description?: string; inputSchema: unknown; outputSchema?: unknown; annotations?: unknown }> }) =>
      tools.tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema, outputSchema: t.outputSchema, annotations: t.annotations }));
    expect(shape(autoTools)).toEqual(shape(v1Tools));
    expect(shape(pinnedTools)).toEqual(shape(v1Tools));
    expect(v1Tools.tools.length).toBeGreaterThan(10);
    const [v1Prompts, autoPrompts, pinnedPrompts] = await Promise.all([v1.listPrompts(), auto.listPrompts(), pinned.listPrompts()]);
    const prompts = (p: { prompts: Array<{ name: string; description?: string; arguments?: unknown }> }) =>
      p.prompts.map((x) => ({ name: x.name, description: x.description, arguments: x.arguments }));
    expect(prompts(autoPrompts)).toEqual(prompts(v1Prompts));
    expect(prompts(pinnedPrompts)).toEqual(prompts(v1Prompts));
    expect(v1Prompts.prompts.map((p) => p.name)).toContain("council_phase_brief");
    const [v1Resources, autoResources, pinnedResources] = await Promise.all([v1.listResources(), auto.listResources(), pinned.listResources()]);
    const resources = (r: { resources: Array<{ uri: string; name: string; mimeType?: string }> }) =>
      r.resources.map((x) => ({ uri: x.uri, name: x.name, mimeType: x.mimeType }));
    expect(resources(autoResources)).toEqual(resources(v1Resources));
    expect(resources(pinnedResources)).toEqual(resources(v1Resources));
    expect(v1Resources.resources.map((r) => r.uri)).toEqual(expect.arrayContaining(["chaoscore://policy", "chaoscore://capabilities"]));
    const [v1Templates, autoTemplates, pinnedTemplates] = await Promise.all([
      v1.listResourceTemplates(),
      auto.listResourceTemplates(),
      pinned.listResourceTemplates(),
    ]);
    const templates = (t: { resourceTemplates: Array<{ uriTemplate: string; name: string }> }) =>
      t.resourceTemplates.map((x) => ({ uriTemplate: x.uriTemplate, name: x.name }));
    expect(templates(autoTemplates)).toEqual(templates(v1Templates));
    expect(templates(pinnedTemplates)).toEqual(templates(v1Templates));
    expect(v1Templates.resourceTemplates.map((t) => t.uriTemplate)).toContain("council://sessions/{id}");
  });

  it("shares memory across revisions: remembered on 2026-07-28, recalled on 2025-11-25, and back", async () => {
    ok(await call(pinned, "chaoscore_remember", { key: "eras:modern", value: { from: MODERN } }));
    expect(ok(await call(v1, "chaoscore_recall", { key: "eras:modern" })).items).toEqual([expect.objectContaining({ value: { from: MODERN } })]);
    ok(await call(v1, "chaoscore_remember", { key: "eras:legacy", value: "from 2025-11-25" }));
    expect(ok(await call(auto, "chaoscore_recall", { key: "eras:legacy" })).items).toEqual([expect.objectContaining({ value: "from 2025-11-25" })]);
  });

  it("runs a council session started on 2026-07-28 and recalled from a 2025-11-25 session of the tenant", async () => {
    const init = ok(await call(pinned, "council_init", { task: "Decide how to migrate the billing database from MySQL to Postgres with no downtime" }));
    const sessionId = init.sessionId as string;
    expect(init.phase).toBe("decompile");
    const recalled = ok(await call(v1, "council_recall", { sessionId }));
    expect(recalled).toMatchObject({ sessionId });
    const brief = await pinned.getPrompt({ name: "council_phase_brief", arguments: { sessionId } });
    expect((brief.messages[0]?.content as { text: string }).text).toContain("decompile");
  });

  it("governs a spend the same on both revisions: the 2025 session is asked by elicitation, the 2026-07-28 client through multi-round-trip results", async () => {
    const wire = { beneficiary: "ACME Supplies GmbH", amount: 2500, currency: "EUR", memo: "eras" };
    const legacyHeld = ok(await call(v1, "request_authorization", { tool: "wire_treasury_transfer", args: wire }));
    const approved = ok(await call(v1, "approve_spend", { request_seq: legacyHeld.request_seq }));
    expect(approved).toMatchObject({ state: "LOCKED", channel: "client_elicitation" });
    expect(asked).toHaveLength(1);

    const modernHeld = ok(await call(pinned, "request_authorization", { tool: "wire_treasury_transfer", args: { ...wire, memo: "eras 2" } }));
    expect((modernHeld.approval_channels as Array<{ channel: string }>).map((c) => c.channel)).toEqual(
      expect.arrayContaining(["approver", "operator"]),
    );
    const modernApproved = ok(await call(pinned, "approve_spend", { request_seq: modernHeld.request_seq }));
    expect(modernApproved).toMatchObject({ state: "LOCKED", channel: "client_elicitation", human: { answer: "confirmed", via: "elicitation" } });
    expect(modernAsked).toHaveLength(1);
    expect(modernAsked[0]).toContain(`Spend request at ledger entry ${modernHeld.request_seq}`);
    expect(modernAsked[0]).toContain('memo = "eras 2"');

    // The ledger labels each entry with where it came from: the 2025 session, or the 2026 request's ref.
    type Entry = { principal: string; session: string; event: Structured };
    const entries = ok(await call(v1, "inspect_audit_ledger", { limit: 100 })).entries as Entry[];
    const legacySession = (ok(await call(v1, "chaoscore_inspect", { what: "sessions" })).session as { id: string }).id;
    const of = (seq: unknown) => entries.filter((e) => e.event.request_seq === seq);
    expect(of(legacyHeld.request_seq).length).toBeGreaterThan(0);
    for (const e of of(legacyHeld.request_seq)) expect(e).toMatchObject({ principal: "agent", session: legacySession });
    const modernLabels = of(modernHeld.request_seq).map((e) => e.session);
    expect(modernLabels.length).toBeGreaterThan(0);
    for (const label of modernLabels) expect(label).toMatch(/^request:[A-Za-z0-9_-]{22}$/);
  });

  it("keeps a 2026-07-28 plan to its principal: another principal of the tenant finds nothing", async () => {
    const plan = ok(await call(pinned, "chaoscore_plan", { objective: "remember that the eras test ran" }));
    const planId = plan.plan_id as string;
    expect(planId).toBeTruthy();
    const foreign = errorText(await call(other, "chaoscore_execute", { plan_id: planId }));
    expect(foreign).toContain(`no plan ${planId}`);
    // The same principal on another 2026-07-28 request still has it.
    const own = await call(auto, "chaoscore_execute", { plan_id: planId });
    expect(JSON.stringify(own.content)).not.toContain(`no plan ${planId}`);
  });
});

/** What two clients' listings are compared on. */
type Listed = { tools: unknown; prompts: unknown; resources: unknown; templates: unknown };

/** The listings of one client, in the shape both revisions must agree on. */
async function listings(client: {
  listTools(): Promise<{ tools: Array<{ name: string; description?: string; inputSchema: unknown; outputSchema?: unknown; annotations?: unknown }> }>;
  listPrompts(): Promise<{ prompts: Array<{ name: string; description?: string; arguments?: unknown }> }>;
  listResources(): Promise<{ resources: Array<{ uri: string; name: string; mimeType?: string }> }>;
  listResourceTemplates(): Promise<{ resourceTemplates: Array<{ uriTemplate: string; name: string }> }>;
}): Promise<Listed> {
  return {
    tools: (await client.listTools()).tools.map((t) => ({ name: t.name, description: t.description, inputSchema: t.inputSchema, outputSchema: t.outputSchema, annotations: t.annotations })),
    prompts: (await client.listPrompts()).prompts.map((x) => ({ name: x.name, description: x.description, arguments: x.arguments })),
    // The tenant's council sessions are listed too, and the tests below start one in between.
    resources: (await client.listResources()).resources
      .filter((x) => !x.uri.startsWith("council://sessions/"))
      .map((x) => ({ uri: x.uri, name: x.name, mimeType: x.mimeType })),
    templates: (await client.listResourceTemplates()).resourceTemplates.map((x) => ({ uriTemplate: x.uriTemplate, name: x.name })),
  };
}

/** Resolves once the process `pid` is gone (the client's transport spawned it, so it is not ours to wait on). */
async function gone(pid: number | null): Promise<void> {
  if (pid === null) return;
  for (;;) {
    try {
      process.kill(pid, 0);
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Both revisions over `chaos-core stdio` (docs/protocol.md §3 stdio, issue 11 step 6), as hosts
 * start it: each client spawns its own process on one data directory, one after the other (a
 * directory belongs to one process). The v1 `Client` opens with `initialize` (2025-11-25, a
 * session); the v2 `Client` first probes a short-lived sibling with `server/discover`, in
 * `mode: 'auto'` and pinned, and lands on 2026-07-28. The same surface, the same data, the same
 * governance.
 */
describe("2025-11-25 and 2026-07-28 over chaos-core stdio", () => {
  const dir = tempDir("chaos-core-protocol-eras-stdio-");
  const env = () => childEnv({ CHAOS_CORE_DATA_DIR: dir }) as Record<string, string>;
  const asked: string[] = [];
  let legacyListing: Listed;
  let councilSession: string;

  beforeAll(async () => {
    await seedDataDir(dir);
    // As over HTTP: a client's own answer may approve a wire, so a 2025-11-25 session is asked.
    writeFileSync(
      join(dir, "policy.json"),
      JSON.stringify({ approvalChannels: { spend: { policies: { wire: ["client_elicitation", "approver", "operator", "console"] } } } }),
    );
    // The wire is called below: the local user's operator enabled the finance reference tools.
    await enableEveryToolset({ CHAOS_CORE_DATA_DIR: dir });
  });
  afterAll(() => removeDir(dir));

  /** Runs `fn` with a v1 Client on its own chaos-core stdio, then closes it and waits until the process is gone. */
  async function withV1<T>(fn: (client: V1Client) => Promise<T>): Promise<T> {
    const transport = new V1Stdio({ command: process.execPath, args: [CLI, "stdio"], cwd: ROOT, env: env(), stderr: "pipe" });
    const options = autoAcceptingClient(asked);
    const client = new V1Client({ name: "v1-stdio", version: "1.0.0" }, { capabilities: options.capabilities });
    options.setup(client);
    await client.connect(transport);
    const pid = transport.pid;
    try {
      return await fn(client);
    } finally {
      await client.close();
      await gone(pid);
    }
  }

  /**
   * The same with a v2 Client. It declares no elicitation: what it is told about an approval
   * does not depend on whether 2026-07-28 asks clients (issue 11 step 8).
   */
  async function withV2<T>(mode: "auto" | { pin: string }, name: string, fn: (client: V2Client) => Promise<T>): Promise<T> {
    const transport = new V2Stdio({ command: process.execPath, args: [CLI, "stdio"], cwd: ROOT, env: env(), stderr: "pipe" });
    const client = new V2Client({ name, version: "1.0.0" }, { versionNegotiation: { mode } });
    await client.connect(transport);
    const pid = transport.pid;
    try {
      return await fn(client);
    } finally {
      await client.close();
      await gone(pid);
    }
  }

  it("v1 Client: 2025-11-25 with a session; remembers, and a wire it approves when asked", async () => {
    await withV1(async (v1) => {
      const inspected = ok(await call(v1, "chaoscore_inspect", { what: "sessions" }));
      expect(inspected.session).toMatchObject({ transport: "stdio", principal: "local", protocol_version: "2025-11-25", client_info: { name: "v1-stdio" } });
      ok(await call(v1, "chaoscore_remember", { key: "stdio-eras:legacy", value: "from 2025-11-25" }));
      legacyListing = await listings(v1);
      const wire = { beneficiary: "ACME Supplies GmbH", amount: 2500, currency: "EUR", memo: "stdio eras" };
      const held = ok(await call(v1, "request_authorization", { tool: "wire_treasury_transfer", args: wire }));
      expect(ok(await call(v1, "approve_spend", { request_seq: held.request_seq }))).toMatchObject({ state: "LOCKED", channel: "client_elicitation" });
      expect(asked).toHaveLength(1);
    });
    expect((legacyListing.tools as unknown[]).length).toBeGreaterThan(10);
    expect(legacyListing.resources).toEqual(expect.arrayContaining([expect.objectContaining({ uri: "chaoscore://policy" })]));
    expect(legacyListing.templates).toEqual(expect.arrayContaining([expect.objectContaining({ uriTemplate: "council://sessions/{id}" })]));
  }, 180_000);

  it("v2 Client in auto mode: lands on 2026-07-28 with no session, lists the same, recalls 2025's memory, runs a council session, a wire is held and not run", async () => {
    await withV2("auto", "v2-stdio-auto", async (auto) => {
      expect(auto.getProtocolEra()).toBe("modern");
      expect(auto.getNegotiatedProtocolVersion()).toBe(MODERN);
      const inspected = ok(await call(auto, "chaoscore_inspect", { what: "sessions" }));
      expect(inspected.session).toBeUndefined();
      expect(inspected.request).toMatchObject({ protocol_version: MODERN, client_info: { name: "v2-stdio-auto" } });
      expect(await listings(auto)).toEqual(legacyListing);
      expect(ok(await call(auto, "chaoscore_recall", { key: "stdio-eras:legacy" })).items).toEqual([expect.objectContaining({ value: "from 2025-11-25" })]);
      ok(await call(auto, "chaoscore_remember", { key: "stdio-eras:modern", value: { from: MODERN } }));

      const init = ok(await call(auto, "council_init", { task: "Decide how to migrate the billing database from MySQL to Postgres with no downtime" }));
      councilSession = init.sessionId as string;
      expect(init.phase).toBe("decompile");
      const brief = await auto.getPrompt({ name: "council_phase_brief", arguments: { sessionId: councilSession } });
      expect((brief.messages[0]?.content as { text: string }).text).toContain("decompile");
      const read = await auto.readResource({ uri: `council://sessions/${councilSession}` });
      expect(read.contents[0]?.uri).toBe(`council://sessions/${councilSession}`);

      const wire = { beneficiary: "ACME Supplies GmbH", amount: 2500, currency: "EUR", memo: "stdio eras 2" };
      const held = ok(await call(auto, "request_authorization", { tool: "wire_treasury_transfer", args: wire }));
      expect((held.approval_channels as Array<{ channel: string }>).map((c) => c.channel)).toEqual(expect.arrayContaining(["approver", "operator"]));
      const refused = errorText(await call(auto, "approve_spend", { request_seq: held.request_seq }));
      expect(refused).toContain(`spend request ${held.request_seq}`);
      expect(refused).toMatch(/approver/);
      expect(ok(await call(auto, "wire_treasury_transfer", wire))).toMatchObject({ executed: false });
      // The ledger labels this revision's entries with each request's ref, not a session.
      type Entry = { session: string; event: Structured };
      const entries = ok(await call(auto, "inspect_audit_ledger", { limit: 100 })).entries as Entry[];
      const labels = entries.filter((e) => e.event.request_seq === held.request_seq).map((e) => e.session);
      expect(labels.length).toBeGreaterThan(0);
      for (const label of labels) expect(label).toMatch(/^request:[A-Za-z0-9_-]{22}$/);
    });
    // Only the v1 session was ever asked.
    expect(asked).toHaveLength(1);
  }, 180_000);

  it("v2 Client pinned to 2026-07-28: lands modern, lists the same, reads what both revisions wrote", async () => {
    await withV2({ pin: MODERN }, "v2-stdio-pinned", async (pinned) => {
      expect(pinned.getProtocolEra()).toBe("modern");
      expect(await listings(pinned)).toEqual(legacyListing);
      expect(ok(await call(pinned, "chaoscore_recall", { key: "stdio-eras:modern" })).items).toEqual([expect.objectContaining({ value: { from: MODERN } })]);
      expect(ok(await call(pinned, "council_recall", { sessionId: councilSession }))).toMatchObject({ sessionId: councilSession });
      expect((await pinned.listResources()).resources.map((r) => r.uri)).toContain(`council://sessions/${councilSession}`);
    });
  }, 180_000);

  it("v1 Client again: recalls what 2026-07-28 wrote and the council session started there", async () => {
    await withV1(async (v1) => {
      expect(ok(await call(v1, "chaoscore_recall", { key: "stdio-eras:modern" })).items).toEqual([expect.objectContaining({ value: { from: MODERN } })]);
      expect(ok(await call(v1, "council_recall", { sessionId: councilSession }))).toMatchObject({ sessionId: councilSession });
      expect((await v1.listResources()).resources.map((r) => r.uri)).toContain(`council://sessions/${councilSession}`);
    });
  }, 180_000);
});
