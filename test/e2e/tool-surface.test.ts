import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { bothTransports } from "../support/both-transports.js";
import { runToExit } from "../support/processes.js";

/** The synthetic bank tools (DESIGN: "The MCP surface"), served only where an operator enables their toolset. */
const FINANCE = ["place_equity_order", "rebalance_portfolio", "wire_treasury_transfer"];

/** A well-formed order: refused or answered by the tool, never by argument checks. */
const EQUITY_ORDER = { symbol: "AAPL", side: "BUY", quantity: 10, notional: 100 };

/** The most the default `tools/list` result may weigh, as JSON (issue 30). */
const DEFAULT_LIST_BUDGET_BYTES = 48 * 1024;

/** A tools/list result as it arrived, every member kept (the typed `listTools()` parses it). */
const RawListResult = z.looseObject({ tools: z.array(z.looseObject({ name: z.string() })), nextCursor: z.string().optional() });

/** Runs `chaos-core` on a data directory (through the server running there) and fails with its stderr unless it exits 0. */
async function cli(dir: string, args: string[]): Promise<void> {
  const r = await runToExit(args, { CHAOS_CORE_DATA_DIR: dir });
  expect(r.code, `chaos-core ${args.join(" ")}\n${r.stderr}`).toBe(0);
}

const names = async (client: Client) => (await client.listTools()).tools.map((t) => t.name).sort();

describe("the tool surface", () => {
  const both = bothTransports();
  beforeAll(() => both.start());
  afterAll(() => both.close());

  it("is identical over stdio and Streamable HTTP", async () => {
    const [a, b] = await Promise.all([both.overStdio.listTools(), both.overHttp.listTools()]);
    expect(b.tools).toEqual(a.tools);
    expect(a.tools.map((t) => t.name).sort()).toEqual([
      "approve_spend",
      "authorize_tool_call",
      "chaoscore_achieve",
      "chaoscore_approve",
      "chaoscore_execute",
      "chaoscore_inspect",
      "chaoscore_plan",
      "chaoscore_reason",
      "chaoscore_recall",
      "chaoscore_remember",
      "chp_content_hash",
      "chp_version",
      "council_continue",
      "council_init",
      "council_recall",
      "council_save",
      "council_score",
      "council_verify",
      "evaluate_spend_gate",
      "evaluate_tool_approval",
      "inspect_audit_ledger",
      "issue_approval_receipt",
      "request_authorization",
    ]);
    for (const tool of a.tools) {
      expect(tool.outputSchema, `${tool.name} has an output schema`).toBeDefined();
      expect(tool.annotations, `${tool.name} has annotations`).toBeDefined();
    }
  });

  it("offers no finance reference tool by default: none is listed over stdio or Streamable HTTP, and a call to one is refused naming its toolset", async () => {
    for (const client of [both.overStdio, both.overHttp]) {
      expect((await names(client)).filter((name) => FINANCE.includes(name))).toEqual([]);
      const refused = await client.callTool({ name: "place_equity_order", arguments: EQUITY_ORDER });
      expect(refused.isError).toBe(true);
      const error = (refused.structuredContent as { error: { code: string; message: string } }).error;
      expect(error.code).toBe("permission_denied");
      expect(error.message).toContain('place_equity_order belongs to the finance-reference toolset, which the operator has not enabled for tenant "default"');
    }
  });

  it("keeps the default tool list within 48 KB, measured as the JSON a client receives over stdio and Streamable HTTP", async () => {
    for (const client of [both.overStdio, both.overHttp]) {
      const result = await client.request({ method: "tools/list", params: {} }, RawListResult);
      // One page holds the whole list: the budget is the list's, not a page's.
      expect(result.nextCursor).toBeUndefined();
      expect(result.tools.map((t) => t.name).sort()).toEqual(await names(client));
      expect(Buffer.byteLength(JSON.stringify(result))).toBeLessThanOrEqual(DEFAULT_LIST_BUDGET_BYTES);
    }
  });

  it("serves a local tenant the toolsets its operator enabled, finance reference included, over stdio and Streamable HTTP from its next request", async () => {
    const [coreOnly] = await Promise.all([names(both.overStdio), names(both.overHttp)]);
    try {
      // The local user of each transport is tenant "default"; the command reaches it through the running server.
      await Promise.all(both.dirs.map((dir) => cli(dir, ["tenants", "settings", "default", "--toolsets", "core,finance-reference"])));
      const [a, b] = await Promise.all([both.overStdio.listTools(), both.overHttp.listTools()]);
      expect(b.tools).toEqual(a.tools);
      const listed = a.tools.map((t) => t.name).sort();
      expect(listed).toEqual([...coreOnly.filter((name) => name.startsWith("chaoscore_")), ...FINANCE].sort());
      for (const client of [both.overStdio, both.overHttp]) {
        // Served now: the tool itself answers (no receipt, so nothing runs), not the toolset check.
        const bare = await client.callTool({ name: "place_equity_order", arguments: EQUITY_ORDER });
        expect(bare.structuredContent).toMatchObject({ executed: false, code: "missing_receipt" });
        const withheld = await client.callTool({ name: "council_init", arguments: { task: "anything" } });
        expect((withheld.structuredContent as { error: { code: string } }).error.code).toBe("permission_denied");
      }
    } finally {
      await Promise.all(both.dirs.map((dir) => cli(dir, ["tenants", "settings", "default", "--toolsets", "default"])));
    }
    expect(await names(both.overStdio)).toEqual(coreOnly);
    expect(await names(both.overHttp)).toEqual(coreOnly);
  });

  it("serves the same prompts over stdio and Streamable HTTP", async () => {
    const [a, b] = await Promise.all([both.overStdio.listPrompts(), both.overHttp.listPrompts()]);
    expect(b.prompts).toEqual(a.prompts);
    expect(a.prompts.map((p) => p.name).sort()).toEqual([
      "council_brief_critique",
      "council_brief_decompile",
      "council_brief_design",
      "council_brief_synthesis",
      "council_brief_verify",
      "council_phase_brief",
    ]);
    for (const prompt of a.prompts) expect(prompt.description, `${prompt.name} has a description`).toBeTruthy();
    expect(a.prompts.find((p) => p.name === "council_phase_brief")?.arguments).toEqual([
      { name: "sessionId", description: "The sessionId council_init returned", required: true },
    ]);
    // Getting one renders the same text on both.
    const [x, y] = await Promise.all([
      both.overStdio.getPrompt({ name: "council_brief_synthesis" }),
      both.overHttp.getPrompt({ name: "council_brief_synthesis" }),
    ]);
    expect(y).toEqual(x);
  });

  it("serves the same resources and templates over stdio and Streamable HTTP, each read as the connection's tenant", async () => {
    const [a, b] = await Promise.all([both.overStdio.listResources(), both.overHttp.listResources()]);
    // Fresh data directories: no council session yet, so just the four static resources.
    expect(b.resources).toEqual(a.resources);
    expect(a.resources.map((r) => r.uri)).toEqual(["chaoscore://policy", "chaoscore://capabilities", "chaoscore://ledger/checkpoint", "chaoscore://contracts/attestation"]);
    const [ta, tb] = await Promise.all([both.overStdio.listResourceTemplates(), both.overHttp.listResourceTemplates()]);
    expect(tb.resourceTemplates).toEqual(ta.resourceTemplates);
    expect(ta.resourceTemplates.map((t) => t.uriTemplate)).toEqual(["council://sessions/{id}", "council://sessions/{id}/brief"]);
    const [pa, pb] = await Promise.all([
      both.overStdio.readResource({ uri: "chaoscore://capabilities" }),
      both.overHttp.readResource({ uri: "chaoscore://capabilities" }),
    ]);
    expect(pb).toEqual(pa);

    // A council session started over each transport is listed, read and completed there.
    for (const client of [both.overStdio, both.overHttp]) {
      const init = await client.callTool({ name: "council_init", arguments: { task: "Choose a cache for the pricing service", title: "Pricing cache" } });
      const id = (init.structuredContent as { sessionId: string }).sessionId;
      const listed = await client.listResources();
      expect(listed.resources.slice(4).map((r) => [r.uri, r.title])).toEqual([[`council://sessions/${id}`, "Pricing cache"]]);
      const read = await client.readResource({ uri: `council://sessions/${id}/brief` });
      expect(JSON.parse((read.contents[0] as { text: string }).text)).toMatchObject({ sessionId: id, phase: "decompile" });
      const done = await client.complete({ ref: { type: "ref/resource", uri: "council://sessions/{id}" }, argument: { name: "id", value: id.slice(0, 8) } });
      expect(done.completion.values).toEqual([id]);
      // An id nobody issued is not found, with the URI in the error's data.
      const missing = "00000000-0000-4000-8000-0000000000ff";
      await expect(client.readResource({ uri: `council://sessions/${missing}` })).rejects.toMatchObject({
        code: -32602,
        data: { uri: `council://sessions/${missing}` },
      });
    }
  });

  it("declares the logging capability on both transports", () => {
    expect(both.overHttp.getServerCapabilities()?.logging).toBeDefined();
    expect(both.overStdio.getServerCapabilities()?.logging).toBeDefined();
    expect(both.overHttp.getServerCapabilities()?.prompts).toBeDefined();
    expect(both.overStdio.getServerCapabilities()?.prompts).toBeDefined();
    // HTTP announces resource changes (docs/protocol.md §10); stdio does not yet, and says so.
    expect(both.overHttp.getServerCapabilities()).toMatchObject({ resources: { subscribe: true, listChanged: true }, completions: {} });
    expect(both.overStdio.getServerCapabilities()).toMatchObject({ resources: { subscribe: true, listChanged: false }, completions: {} });
  });
});
