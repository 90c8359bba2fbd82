import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { httpClient, removeDir, ROOT, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";

/**
 * Issue 32 items 4 and 6: one exposure setting decides which tenants and principals are offered an
 * upstream's tools, and how. The operator's `echoer` goes to tenant acme as MCP tools, `quiet` to
 * acme's planners only, and nothing to tenant bravo: bravo's lists hold neither, and bravo is
 * refused both by name — as an MCP tool and as a step of chaoscore_execute — as if they did not exist.
 */

const UPSTREAM = join(ROOT, "test/support/upstreams/changing-server.mjs");
const TOOLS = {
  tools: [
    { name: "echo", description: "Echoes its message back", inputSchema: { type: "object", properties: { message: { type: "string" } }, required: ["message"] }, annotations: { readOnlyHint: true, openWorldHint: false } },
    { name: "ping", description: "Answers pong.", inputSchema: { type: "object", properties: {} }, annotations: { readOnlyHint: true, openWorldHint: false } },
  ],
};

type Results = { results: Array<{ status: string; capability: string; output?: unknown; error?: { code: string; message: string } }> };

async function cli(args: string[], env: Record<string, string>): Promise<string> {
  const r = await runToExit(args, env, 60_000);
  expect(r.code, `chaos-core ${args.join(" ")}\n${r.stderr}`).toBe(0);
  return r.stdout.trim();
}

describe("which tenant is offered which upstream tools", () => {
  const dir = tempDir("chaos-core-exposure-");
  const env = { CHAOS_CORE_DATA_DIR: dir };
  let serve: ServeProcess;
  let acme: Client;
  let bravo: Client;

  beforeAll(async () => {
    await seedDataDir(dir);
    const definitions = join(dir, "tools.json");
    writeFileSync(definitions, JSON.stringify(TOOLS));
    writeFileSync(
      join(dir, "upstreams.json"),
      JSON.stringify({
        upstreams: [
          { name: "echoer", command: process.execPath, args: [UPSTREAM, definitions], exposure: [{ tenants: ["acme"] }] },
          { name: "quiet", command: process.execPath, args: [UPSTREAM, definitions], exposure: [{ tenants: ["acme"], as: "planner" }] },
        ],
      }),
    );
    await cli(["upstreams", "lock"], env);
    await cli(["tenants", "create", "acme"], env);
    await cli(["tenants", "create", "bravo"], env);
    const acmeKey = await cli(["keys", "create", "--tenant", "acme", "--principal", "alice"], env);
    const bravoKey = await cli(["keys", "create", "--tenant", "bravo", "--principal", "bob"], env);
    serve = await startServe(env);
    acme = await httpClient(serve.url, { Authorization: `Bearer ${acmeKey}` });
    bravo = await httpClient(serve.url, { Authorization: `Bearer ${bravoKey}` });
  }, 180_000);

  afterAll(async () => {
    await acme?.close().catch(() => {});
    await bravo?.close().catch(() => {});
    await serve?.stop();
    removeDir(dir);
  });

  const names = async (c: Client) => (await c.listTools()).tools.map((t) => t.name);
  const execute = async (c: Client, capability: string, input: Record<string, unknown>) =>
    ((await c.callTool({ name: "chaoscore_execute", arguments: { steps: [{ id: "s1", capability, input }] } })) as CallToolResult).structuredContent as Results;
  const capabilities = async (c: Client) =>
    JSON.stringify(((await c.callTool({ name: "chaoscore_inspect", arguments: { what: "capabilities" } })) as CallToolResult).structuredContent);

  it("offers acme echoer as MCP tools, and quiet to its planners only", async () => {
    const listed = await names(acme);
    expect(listed).toEqual(expect.arrayContaining(["echoer__echo", "echoer__ping"]));
    expect(listed.filter((n) => n.startsWith("quiet__"))).toEqual([]);
    const echoed = (await acme.callTool({ name: "echoer__echo", arguments: { message: "for acme" } })) as CallToolResult;
    expect(echoed.isError).toBeFalsy();
    expect(JSON.stringify(echoed.content)).toContain("for acme");
    const planned = await execute(acme, "quiet.ping", {});
    expect(planned.results[0]).toMatchObject({ status: "executed", capability: "quiet.ping" });
    expect(await capabilities(acme)).toContain("quiet.ping");
  });

  it("shows bravo none of them, and refuses each by name as unknown", async () => {
    const listed = await names(bravo);
    expect(listed.filter((n) => n.startsWith("echoer__") || n.startsWith("quiet__"))).toEqual([]);
    expect(listed).toContain("chaoscore_execute");

    let refusal: string;
    try {
      const r = (await bravo.callTool({ name: "echoer__echo", arguments: { message: "from bravo" } })) as CallToolResult;
      refusal = r.isError ? JSON.stringify(r.content) : "";
    } catch (err) {
      refusal = err instanceof Error ? err.message : String(err);
    }
    expect(refusal).toMatch(/Unknown tool: "?echoer__echo/);
    expect(refusal).not.toContain("from bravo");

    for (const capability of ["echoer.echo", "quiet.ping"]) {
      const step = (await execute(bravo, capability, capability === "echoer.echo" ? { message: "from bravo" } : {})).results[0]!;
      expect(step.status).toBe("failed");
      expect(step.error?.message).toMatch(new RegExp(`${capability.replace(".", "\\.")}`));
      expect(step.error?.message).not.toMatch(/Echoes|pong/);
    }
    const inspected = await capabilities(bravo);
    expect(inspected).not.toContain("echoer.");
    expect(inspected).not.toContain("quiet.");
  });
});
