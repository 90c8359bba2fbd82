import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bothTransports } from "../support/both-transports.js";

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
      "place_equity_order",
      "rebalance_portfolio",
      "request_authorization",
      "wire_treasury_transfer",
    ]);
    for (const tool of a.tools) {
      expect(tool.outputSchema, `${tool.name} has an output schema`).toBeDefined();
      expect(tool.annotations, `${tool.name} has annotations`).toBeDefined();
    }
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
