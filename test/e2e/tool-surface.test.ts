import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { httpClient, removeDir, startServe, stdioClient, tempDir, type ServeProcess } from "../support/processes.js";

describe("the tool surface", () => {
  const dirs = [tempDir(), tempDir()];
  let serve: ServeProcess;
  let overHttp: Client;
  let overStdio: Client;

  beforeAll(async () => {
    serve = await startServe({ CHAOS_CORE_DATA_DIR: dirs[0] });
    overHttp = await httpClient(serve.url);
    overStdio = (await stdioClient({ CHAOS_CORE_DATA_DIR: dirs[1] })).client;
  });

  afterAll(async () => {
    await overHttp?.close();
    await overStdio?.close();
    await serve?.stop();
    dirs.forEach(removeDir);
  });

  it("is identical over stdio and Streamable HTTP", async () => {
    const [a, b] = await Promise.all([overStdio.listTools(), overHttp.listTools()]);
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
    const [a, b] = await Promise.all([overStdio.listPrompts(), overHttp.listPrompts()]);
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
    // Getting one renders the same text on both.
    const [x, y] = await Promise.all([
      overStdio.getPrompt({ name: "council_brief_synthesis" }),
      overHttp.getPrompt({ name: "council_brief_synthesis" }),
    ]);
    expect(y).toEqual(x);
  });

  it("declares the logging capability on both transports", () => {
    expect(overHttp.getServerCapabilities()?.logging).toBeDefined();
    expect(overStdio.getServerCapabilities()?.logging).toBeDefined();
    expect(overHttp.getServerCapabilities()?.prompts).toBeDefined();
    expect(overStdio.getServerCapabilities()?.prompts).toBeDefined();
  });
});
