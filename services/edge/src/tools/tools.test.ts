import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ListToolsResultSchema, LoggingMessageNotificationSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { AjvJsonSchemaValidator as Draft07Validator } from "@modelcontextprotocol/sdk/validation/ajv";
import { AjvJsonSchemaValidator as Draft2020Validator } from "@modelcontextprotocol/client/validators/ajv";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { connectInMemory, uniqueTenant, withEveryToolset, type Connected } from "../test-support/in-memory.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import type { EdgeDeps } from "../deps/edge-deps.js";

interface Item {
  key: string;
  value: unknown;
  tags: string[];
  created_at: string;
  updated_at: string;
  expires_at?: string;
}

let services: TestServices;
let deps: EdgeDeps;
const open: Connected[] = [];

async function connect(tenant = uniqueTenant("tools"), principal = "agent"): Promise<Connected> {
  const c = await connectInMemory(deps, { tenant, principal });
  open.push(c);
  return c;
}

function ok(res: CallToolResult): Record<string, unknown> {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  // The same JSON travels as text for clients that ignore structuredContent.
  expect(JSON.parse((res.content[0] as { text: string }).text)).toEqual(res.structuredContent);
  return res.structuredContent as Record<string, unknown>;
}

function errorOf(res: CallToolResult): { code: string; message: string } {
  expect(res.isError).toBe(true);
  return (res.structuredContent as { error: { code: string; message: string } }).error;
}

function text(res: CallToolResult): string {
  return res.content.map((c) => (c.type === "text" ? c.text : "")).join("\n");
}

beforeAll(async () => {
  services = await startTestServices("tools");
  deps = services.deps(createMemorySessionStore());
});

afterAll(async () => {
  for (const c of open) await c.close();
  await services?.close();
});

describe("the tool list", () => {
  it("serves the core tools with schemas and honest annotations", async () => {
    const c = await connect();
    const { tools } = await c.client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    // The council toolset has its own tests (council-tools.test.ts).
    expect(Object.keys(byName).filter((name) => name.startsWith("chaoscore_")).sort()).toEqual([
      "chaoscore_achieve",
      "chaoscore_approve",
      "chaoscore_execute",
      "chaoscore_inspect",
      "chaoscore_plan",
      "chaoscore_reason",
      "chaoscore_recall",
      "chaoscore_remember",
    ]);
    expect(byName.chaoscore_remember!.annotations).toMatchObject({
      readOnlyHint: false,
      destructiveHint: true,
      idempotentHint: true,
      openWorldHint: false,
    });
    expect(byName.chaoscore_approve!.annotations).toMatchObject({
      readOnlyHint: false,
      destructiveHint: false,
      idempotentHint: false,
      openWorldHint: false,
    });
    for (const name of ["chaoscore_recall", "chaoscore_inspect"]) {
      expect(byName[name]!.annotations).toMatchObject({ readOnlyHint: true, idempotentHint: true, openWorldHint: false });
    }
    expect(byName.chaoscore_remember!.inputSchema.required).toEqual(["key", "value"]);
    // Every output schema admits the result or kit's error shape, and nothing else.
    for (const tool of tools) {
      expect(tool.outputSchema?.properties).toHaveProperty("error");
      expect((tool.outputSchema as { anyOf?: unknown[] }).anyOf).toContainEqual({ required: ["error"] });
    }
  });

  it("lists every tool without what MCP defaults say (no $schema, no task support, the title once), its unknown arguments refused", async () => {
    const c = await connectInMemory(withEveryToolset(deps), { tenant: uniqueTenant("tools"), principal: "agent" });
    open.push(c);
    const { tools } = await c.client.request({ method: "tools/list" }, ListToolsResultSchema);
    expect(tools.map((t) => t.name)).toContain("wire_treasury_transfer");
    for (const tool of tools) {
      expect(tool.inputSchema, tool.name).toMatchObject({ type: "object", additionalProperties: false });
      // No $schema: MCP's default dialect, JSON Schema 2020-12.
      expect(tool.inputSchema, tool.name).not.toHaveProperty("$schema");
      expect(tool.outputSchema, tool.name).not.toHaveProperty("$schema");
      // Absent: taskSupport "forbidden", MCP's default (the in-memory pair hands over an undefined member).
      expect(tool.execution, tool.name).toBeUndefined();
      expect(tool.title, tool.name).toBeTruthy();
      expect(tool.annotations?.title, tool.name).toBeUndefined();
    }
    expect(c.client.getServerCapabilities()?.tools).toEqual({ listChanged: true });
  });

  it("publishes schemas that SDK v1's draft-07 validator and SDK v2's 2020-12 one read alike", async () => {
    const c = await connectInMemory(withEveryToolset(deps), { tenant: uniqueTenant("tools"), principal: "agent" });
    open.push(c);
    const { tools } = await c.client.listTools();
    const draft07 = new Draft07Validator();
    const draft2020 = new Draft2020Validator();
    const verdicts = (schema: Record<string, unknown>, values: unknown[]): [boolean[], boolean[]] => {
      const [a, b] = [draft07.getValidator(schema), draft2020.getValidator(schema)];
      return [values.map((v) => a(v).valid), values.map((v) => b(v).valid)];
    };
    for (const tool of tools) {
      const [inputs07, inputs2020] = verdicts(tool.inputSchema, [{}, { not_a_field: 1 }, []]);
      expect(inputs2020, tool.name).toEqual(inputs07);
      expect(inputs07.slice(1), tool.name).toEqual([false, false]);
      const failure = { error: { code: "not_found", message: "no such thing" } };
      const [outputs07, outputs2020] = verdicts(tool.outputSchema!, [failure, { error: { code: 1 } }, {}]);
      expect(outputs2020, tool.name).toEqual(outputs07);
      expect(outputs07, tool.name).toEqual([true, false, false]);
    }
  });

  it("declares the logging capability", async () => {
    const c = await connect();
    expect(c.client.getServerCapabilities()?.logging).toEqual({});
  });
});

describe("chaoscore_remember and chaoscore_recall", () => {
  it("stores a value and recalls it by key", async () => {
    const c = await connect();
    const value = { decision: "use Postgres", n: 42, nested: [1, { ok: true }, null] };
    const stored = ok(await c.call("chaoscore_remember", { key: "project:db", value, tags: ["architecture"], ttl_seconds: 3600 }));
    const item = stored.item as Item;
    expect(item).toMatchObject({ key: "project:db", value, tags: ["architecture"] });
    expect(Date.parse(item.expires_at!) - Date.parse(item.updated_at)).toBeGreaterThan(3590_000);

    const recalled = ok(await c.call("chaoscore_recall", { key: "project:db" }));
    expect(recalled.items).toEqual([item]);
    expect(recalled).not.toHaveProperty("next_cursor");
  });

  it("replaces the value stored under an existing key", async () => {
    const c = await connect();
    ok(await c.call("chaoscore_remember", { key: "k", value: "first" }));
    ok(await c.call("chaoscore_remember", { key: "k", value: "second" }));
    expect((ok(await c.call("chaoscore_recall", { key: "k" })).items as Item[]).map((i) => i.value)).toEqual(["second"]);
  });

  it("answers an unknown key with no items", async () => {
    const c = await connect();
    expect(ok(await c.call("chaoscore_recall", { key: "never-stored" }))).toEqual({ items: [] });
  });

  it("searches by query and tags, page by page, with the cursor round-tripping", async () => {
    const c = await connect();
    for (let i = 0; i < 5; i++) ok(await c.call("chaoscore_remember", { key: `page-${i}`, value: { i }, tags: ["paged"] }));
    ok(await c.call("chaoscore_remember", { key: "page-untagged", value: 0 }));
    ok(await c.call("chaoscore_remember", { key: "other", value: 1, tags: ["paged"] }));

    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = ok(
        await c.call("chaoscore_recall", { query: "PAGE-", tags: ["paged"], limit: 2, ...(cursor ? { cursor } : {}) }),
      );
      seen.push(...(page.items as Item[]).map((i) => i.key));
      cursor = page.next_cursor as string | undefined;
      pages++;
    } while (cursor && pages < 10);
    expect(pages).toBe(3);
    expect(seen.sort()).toEqual(["page-0", "page-1", "page-2", "page-3", "page-4"]);
  });

  it("keeps tenants apart", async () => {
    const a = await connect(uniqueTenant("a"));
    const b = await connect(uniqueTenant("b"));
    ok(await a.call("chaoscore_remember", { key: "secret", value: "a's" }));
    expect(ok(await b.call("chaoscore_recall", { key: "secret" })).items).toEqual([]);
    expect(ok(await b.call("chaoscore_recall", { query: "" })).items).toEqual([]);
  });
});

describe("bad arguments", () => {
  it("name the field that fails the schema", async () => {
    const c = await connect();
    const cases: Array<[string, Record<string, unknown>, RegExp]> = [
      ["chaoscore_remember", { key: 42, value: "v" }, /key/],
      ["chaoscore_remember", { key: "k" }, /value/],
      ["chaoscore_remember", { key: "k", value: 1, ttl_seconds: -5 }, /ttl_seconds/],
      ["chaoscore_recall", { key: "k", query: "q" }, /query cannot be combined with key/],
      ["chaoscore_recall", { limit: 1000 }, /limit/],
      ["chaoscore_inspect", { what: "everything" }, /what/],
      ["chaoscore_inspect", { what: "memory", capability: "x" }, /capability/],
    ];
    for (const [name, args, field] of cases) {
      const res = await c.call(name, args);
      expect(res.isError, `${name} ${JSON.stringify(args)}`).toBe(true);
      expect(text(res)).toMatch(/^invalid_argument: /);
      expect(text(res)).toMatch(field);
    }
  });
});

describe("policy before memory", () => {
  it("refuses a denied capability with policy_denied, naming the rule and policy version", async () => {
    const tenant = uniqueTenant("deny");
    const version = await services.putPolicy(tenant, { deniedCapabilities: ["memory.remember"] });
    const c = await connect(tenant);
    const res = await c.call("chaoscore_remember", { key: "k", value: 1 });
    const error = errorOf(res);
    expect(error.code).toBe("policy_denied");
    expect(error.message).toMatch(/deniedCapabilities/);
    expect(error.message).toContain(`policy version ${version}`);
    expect(text(res)).toMatch(/^policy_denied: /);
    // Nothing was written.
    expect((await services.memory.recall({ key: "k" }, { ctx: { tenant, principal: "t" } })).item).toBeUndefined();
  });

  it("refuses a capability that needs approval with approval_required, naming the approval and how to run it", async () => {
    const tenant = uniqueTenant("approve");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.recall"] });
    const c = await connect(tenant);
    const error = errorOf(await c.call("chaoscore_recall", { key: "k" }));
    expect(error.code).toBe("approval_required");
    expect(error.message).toMatch(/requireConfirmationFor/);
    const id = /approval ([0-9a-f-]{36}) waits for a person/.exec(error.message)?.[1];
    expect(id, error.message).toBeDefined();
    expect(error.message).toContain(`chaoscore_execute {"approval_id": "${id}"}`);
    // The approval holds exactly the call the tool was given.
    const approval = await services.cognition.getApproval({ approvalId: id! }, { ctx: { tenant, principal: "agent" } });
    expect(approval).toMatchObject({ capability: "memory.recall", input: { key: "k" }, status: "pending" });
  });
});

describe("chaoscore_inspect", () => {
  it("shows the policy document, version, source and the decision for a capability", async () => {
    const tenant = uniqueTenant("inspect");
    const version = await services.putPolicy(tenant, { deniedCapabilities: ["memory.remember"] });
    const c = await connect(tenant);
    const { policy } = ok(await c.call("chaoscore_inspect", { what: "policy", capability: "memory.remember" })) as {
      policy: Record<string, unknown> & { decision: Record<string, unknown>; document: Record<string, unknown> };
    };
    expect(policy.version).toBe(version);
    expect(policy.source).toBe("postgres");
    expect(policy.document.deniedCapabilities).toEqual(["memory.remember"]);
    expect(policy.decision).toMatchObject({
      capability: "memory.remember",
      risk: "LOW",
      decision: "DENY",
      matched_rule: "deniedCapabilities",
      policy_version: version,
    });
  });

  it("shows the approval channels: the document's section with defaults applied, a decision's channels, an opt-in as a warning", async () => {
    const fresh = ok(await (await connect()).call("chaoscore_inspect", { what: "policy" })) as {
      policy: { document: { approvalChannels: unknown }; warnings?: string[] };
    };
    expect(fresh.policy.document.approvalChannels).toEqual({
      byRisk: {
        low: ["client_elicitation", "approver", "operator", "console"],
        medium: ["client_elicitation", "approver", "operator", "console"],
        high: ["approver", "operator", "console"],
        critical: ["approver", "operator", "console"],
      },
      capabilities: {},
      spend: { default: ["approver", "operator", "console"], policies: {}, tools: {} },
    });
    expect(fresh.policy).not.toHaveProperty("warnings");

    const tenant = uniqueTenant("channels");
    await services.putPolicy(tenant, {
      requireConfirmationFor: ["memory.remember"],
      approvalChannels: { capabilities: { "memory.remember": { channels: ["APPROVAL_CHANNEL_CLIENT_ELICITATION"] } } },
    });
    const c = await connect(tenant);
    const { policy } = ok(await c.call("chaoscore_inspect", { what: "policy", capability: "memory.remember" })) as {
      policy: { decision: Record<string, unknown>; document: { approvalChannels: { capabilities: unknown } }; warnings?: string[] };
    };
    expect(policy.document.approvalChannels.capabilities).toEqual({ "memory.remember": ["client_elicitation"] });
    expect(policy.decision).toMatchObject({
      decision: "REQUIRE_APPROVAL",
      approval_channels: ["client_elicitation"],
      channels_rule: "approvalChannels.capabilities.memory.remember",
    });
    expect(policy.warnings).toHaveLength(1);
    expect(policy.warnings?.[0]).toMatch(/^approvalChannels\.capabilities\.memory\.remember lists client_elicitation/);
    const allowed = ok(await c.call("chaoscore_inspect", { what: "policy", capability: "memory.recall" })) as {
      policy: { decision: Record<string, unknown> };
    };
    expect(allowed.policy.decision).not.toHaveProperty("approval_channels");
  });

  it("shows who may approve a spend: spend_policy (and tool) give the spend decision's channels and rule", async () => {
    const tenant = uniqueTenant("spend-channels");
    const every = { channels: ["CLIENT_ELICITATION", "APPROVER", "OPERATOR", "CONSOLE"].map((c) => `APPROVAL_CHANNEL_${c}`) };
    await services.putPolicy(tenant, { approvalChannels: { spendPolicies: { wire: every } } });
    const c = await connect(tenant);
    type SpendDecision = { policy: { spend_decision: Record<string, unknown>; version: number } };
    const wire = ok(await c.call("chaoscore_inspect", { what: "policy", spend_policy: "wire" })) as SpendDecision;
    expect(wire.policy.spend_decision).toEqual({
      spend_policy: "wire",
      approval_channels: ["client_elicitation", "approver", "operator", "console"],
      matched_rule: "approvalChannels.spend.policies.wire",
      policy_version: wire.policy.version,
    });
    const equity = ok(await c.call("chaoscore_inspect", { what: "policy", spend_policy: "equity", tool: "place_equity_order" })) as SpendDecision;
    expect(equity.policy.spend_decision).toMatchObject({
      spend_policy: "equity",
      tool: "place_equity_order",
      approval_channels: ["approver", "operator", "console"],
      matched_rule: "approvalChannels.spend.default",
    });
    const misplaced = await c.call("chaoscore_inspect", { what: "memory", spend_policy: "wire" });
    expect(misplaced.isError).toBe(true);
    expect(JSON.stringify(misplaced.content)).toMatch(/spend_policy is only used with what=policy/);
    const toolAlone = await c.call("chaoscore_inspect", { what: "policy", tool: "wire_treasury_transfer" });
    expect(JSON.stringify(toolAlone.content)).toMatch(/tool is only used with spend_policy/);
  });

  it("evaluates a capability at the risk the capability registry gives it", async () => {
    const c = await connect();
    const { policy } = ok(await c.call("chaoscore_inspect", { what: "policy", capability: "http.request" })) as {
      policy: { decision: { risk: string; note?: string } };
    };
    expect(policy.decision.risk).toBe("MEDIUM");
    expect(policy.decision).not.toHaveProperty("note");
  });

  it("says when a capability is not registered", async () => {
    const c = await connect();
    const { policy } = ok(await c.call("chaoscore_inspect", { what: "policy", capability: "shell.exec" })) as {
      policy: { decision: { risk: string; note?: string } };
    };
    expect(policy.decision.risk).toBe("UNSPECIFIED");
    expect(policy.decision.note).toMatch(/not a registered capability/);
  });

  it("shows live memory statistics", async () => {
    const c = await connect();
    ok(await c.call("chaoscore_remember", { key: "a", value: "x", tags: ["t1"] }));
    ok(await c.call("chaoscore_remember", { key: "b", value: "y", tags: ["t1", "t2"] }));
    const { memory } = ok(await c.call("chaoscore_inspect", { what: "memory" })) as {
      memory: { items: number; top_tags: Array<{ tag: string; count: number }> };
    };
    expect(memory.items).toBe(2);
    expect(memory.top_tags[0]).toEqual({ tag: "t1", count: 2 });
  });

  it("shows the caller's own session and nobody else's", async () => {
    const tenant = uniqueTenant("sessions");
    const mine = await connect(tenant, "me");
    const theirs = await connect(tenant, "someone-else");
    const out = ok(await mine.call("chaoscore_inspect", { what: "sessions" })) as { session: Record<string, unknown> };
    expect(out.session).toMatchObject({ id: mine.session.id, tenant, principal: "me", client_info: { name: "edge-test" } });
    expect(JSON.stringify(out)).not.toContain(theirs.session.id);
  });

  it("says plainly that the audit ledger is not there when this edge has none", async () => {
    const c = await connect();
    const out = ok(await c.call("chaoscore_inspect", { what: "audit" }));
    expect(out).toMatchObject({ what: "audit", available: false });
    expect(out.reason).toContain("LEDGER_ADDR");
  });

  it("reports progress when the client asks for it", async () => {
    const c = await connect();
    const progress: number[] = [];
    const res = await c.client.callTool(
      { name: "chaoscore_inspect", arguments: { what: "policy", capability: "memory.recall" } },
      undefined,
      { onprogress: (p) => progress.push(p.progress) },
    );
    expect(res.isError).toBeFalsy();
    expect(progress).toEqual([1, 2]);
  });
});

describe("logging", () => {
  it("sends log lines at or above the level the client set, and keeps the level in the session store", async () => {
    const tenant = uniqueTenant("logging");
    await services.putPolicy(tenant, { deniedCapabilities: ["memory.remember"] });
    const c = await connect(tenant);
    const lines: Array<{ level: string; data: unknown }> = [];
    c.client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      lines.push(n.params);
    });

    await c.client.setLoggingLevel("error");
    expect((await deps.sessions.get(tenant, c.session.id))?.logLevel).toBe("error");
    errorOf(await c.call("chaoscore_remember", { key: "k", value: 1 }));
    expect(lines).toEqual([]);

    await c.client.setLoggingLevel("debug");
    errorOf(await c.call("chaoscore_remember", { key: "k", value: 1 }));
    expect(lines).toEqual([
      expect.objectContaining({ level: "warning", data: expect.objectContaining({ message: "policy denies memory.remember" }) }),
    ]);
  });
});
