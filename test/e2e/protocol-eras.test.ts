import { createHash, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client as V2Client, StreamableHTTPClientTransport as V2Http } from "@modelcontextprotocol/client";
import type { Client as V1Client } from "@modelcontextprotocol/sdk/client/index.js";
import { autoAcceptingClient } from "../support/elicitation.js";
import { httpClient, removeDir, startServe, tempDir, type ServeProcess } from "../support/processes.js";

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
