import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { httpClient, removeDir, ROOT, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { rawToolNames } from "../support/mrtr.js";

/**
 * Issue 32 items 4 and 6: one exposure setting decides which tenants and principals are offered an
 * upstream's tools, and how. The operator's `echoer` goes to tenant acme as MCP tools, `quiet` to
 * acme's planners only, and nothing to tenant bravo: bravo's lists hold neither, and bravo is
 * refused both by name — as an MCP tool and as a step of chaoscore_execute — as if they did not exist.
 *
 * Roles in the signed call context: `helpdesk` goes to acme's callers holding the operator's role
 * `support` (`keys create --role support`) and to no one else of acme. Roles travel per request:
 * one session used with two keys of one principal lists and calls what each key's roles are offered.
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
  const keys = { samSupport: "", samPlain: "", alice: "" };

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
          { name: "helpdesk", command: process.execPath, args: [UPSTREAM, definitions], exposure: [{ tenants: ["acme"], roles: ["support"] }] },
        ],
      }),
    );
    await cli(["upstreams", "lock"], env);
    await cli(["tenants", "create", "acme"], env);
    await cli(["tenants", "create", "bravo"], env);
    const acmeKey = await cli(["keys", "create", "--tenant", "acme", "--principal", "alice"], env);
    const bravoKey = await cli(["keys", "create", "--tenant", "bravo", "--principal", "bob"], env);
    keys.samSupport = await cli(["keys", "create", "--tenant", "acme", "--principal", "sam", "--role", "support"], env);
    keys.samPlain = await cli(["keys", "create", "--tenant", "acme", "--principal", "sam"], env);
    keys.alice = acmeKey;
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

  /** An SDK client over one session whose every request presents the key `key()` names at that moment. */
  async function sessionWithKeys(key: () => string): Promise<Client> {
    const client = new Client({ name: "chaos-core-e2e", version: "0.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(serve.url), {
      fetch: (url, init) => {
        const headers = new Headers(init?.headers);
        headers.set("authorization", `Bearer ${key()}`);
        return fetch(url, { ...init, headers });
      },
    });
    await client.connect(transport);
    return client;
  }

  const refusedByName = async (c: Client, name: string): Promise<string> => {
    try {
      const r = (await c.callTool({ name, arguments: { message: "unoffered" } })) as CallToolResult;
      return r.isError ? JSON.stringify(r.content) : "ran";
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  };

  it("offers helpdesk to an acme key holding the role support, and not to an acme key without it: listed, called, planned", async () => {
    const sam = await httpClient(serve.url, { Authorization: `Bearer ${keys.samSupport}` });
    try {
      expect(await names(sam)).toEqual(expect.arrayContaining(["helpdesk__echo", "helpdesk__ping", "echoer__echo"]));
      const echoed = (await sam.callTool({ name: "helpdesk__echo", arguments: { message: "for support" } })) as CallToolResult;
      expect(echoed.isError).toBeFalsy();
      expect(JSON.stringify(echoed.content)).toContain("for support");
      expect((await execute(sam, "helpdesk.ping", {})).results[0]).toMatchObject({ status: "executed", capability: "helpdesk.ping" });
      expect(await capabilities(sam)).toContain("helpdesk.echo");
    } finally {
      await sam.close();
    }

    // alice: the same tenant, no role. Echoer is hers, helpdesk is not there at all.
    const listed = await names(acme);
    expect(listed).toContain("echoer__echo");
    expect(listed.filter((n) => n.startsWith("helpdesk__"))).toEqual([]);
    const refusal = await refusedByName(acme, "helpdesk__echo");
    expect(refusal).toMatch(/Unknown tool: "?helpdesk__echo/);
    expect(refusal).not.toContain("unoffered");
    const step = (await execute(acme, "helpdesk.echo", { message: "unoffered" })).results[0]!;
    expect(step.status).toBe("failed");
    expect(step.error?.message).toMatch(/helpdesk\.echo/);
    expect(await capabilities(acme)).not.toContain("helpdesk.");
  });

  it("goes by each request's key, not the session's: one session of sam's lists and calls helpdesk only while the key presented holds support", async () => {
    let key = keys.samSupport;
    const session = await sessionWithKeys(() => key);
    try {
      expect(await names(session)).toContain("helpdesk__echo");
      key = keys.samPlain;
      expect((await names(session)).filter((n) => n.startsWith("helpdesk__"))).toEqual([]);
      expect(await refusedByName(session, "helpdesk__echo")).toMatch(/Unknown tool: "?helpdesk__echo/);
      expect((await execute(session, "helpdesk.ping", {})).results[0]!.status).toBe("failed");
      key = keys.samSupport;
      expect(await names(session)).toContain("helpdesk__echo");
      const echoed = (await session.callTool({ name: "helpdesk__echo", arguments: { message: "support again" } })) as CallToolResult;
      expect(JSON.stringify(echoed.content)).toContain("support again");
    } finally {
      await session.close();
    }
  });

  it("lists helpdesk on a 2026-07-28 request whose key holds support, and on none whose key does not", async () => {
    const list = (key: string) => rawToolNames(serve.url, { authorization: `Bearer ${key}` });
    expect(await list(keys.samSupport)).toContain("helpdesk__echo");
    const plain = await list(keys.samPlain);
    expect(plain).toContain("echoer__echo");
    expect(plain.filter((n) => n.startsWith("helpdesk__"))).toEqual([]);
  });
});

describe("roles in exposure rules", () => {
  const dir = tempDir("chaos-core-exposure-roles-");
  const env = { CHAOS_CORE_DATA_DIR: dir };

  beforeAll(() => seedDataDir(dir), 60_000);
  afterAll(() => removeDir(dir));

  it("refuses an ill-formed role naming --role, before anything is issued", async () => {
    await cli(["tenants", "create", "acme"], env);
    for (const role of ["Support", "support,support", "9lives"]) {
      const r = await runToExit(["keys", "create", "--tenant", "acme", "--principal", "sam", "--role", role], env, 60_000);
      expect(r.code, r.stderr).not.toBe(0);
      expect(r.stderr).toMatch(/--role: .*(is not a role name: a role name is a lowercase letter|is listed twice)/);
    }
    expect(await cli(["keys", "list", "--tenant", "acme"], env)).not.toContain("sam");
  });
});
