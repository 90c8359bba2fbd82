import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { httpClient, removeDir, ROOT, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";

/**
 * Issue 32, "rug pull": an upstream that changes a tool after it was pinned (a small SDK server
 * whose tools are a file this test rewrites; it says so with notifications/tools/list_changed).
 * A cosmetic change is served; any other quarantines that tool — left out of the list, its calls
 * refused contract_drift naming the sections — until `chaos-core upstreams approve` re-pins it;
 * the upstream's other tool serves throughout.
 */

const CHANGING = join(ROOT, "test/support/upstreams/changing-server.mjs");
const object = (properties: Record<string, unknown>, required: string[]) => ({ type: "object", properties, required });
const tools = (echoDescription: string, echoRequired = ["message"]) => ({
  tools: [
    { name: "echo", description: echoDescription, inputSchema: object({ message: { type: "string" }, to: { type: "string" } }, echoRequired), annotations: { readOnlyHint: true, openWorldHint: false } },
    { name: "ping", description: "Answers pong.", inputSchema: object({}, []), annotations: { readOnlyHint: true, openWorldHint: false } },
  ],
});

async function eventually<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

describe("an upstream tool that changes after it was pinned", () => {
  const dir = tempDir("chaos-core-drift-");
  const definitions = join(dir, "changing-tools.json");
  let serve: ServeProcess;
  let client: Client;
  const env = { CHAOS_CORE_DATA_DIR: dir };

  beforeAll(async () => {
    await seedDataDir(dir);
    writeFileSync(definitions, JSON.stringify(tools("Echoes its message back")));
    writeFileSync(join(dir, "upstreams.json"), JSON.stringify({ upstreams: [{ name: "changing", command: process.execPath, args: [CHANGING, definitions] }] }));
    const locked = await runToExit(["upstreams", "lock"], env, 60_000);
    expect(locked.code, locked.stderr).toBe(0);
    serve = await startServe(env);
    client = await httpClient(serve.url);
  }, 120_000);

  afterAll(async () => {
    await client?.close().catch(() => {});
    await serve?.stop();
    removeDir(dir);
  });

  const listed = async () => (await client.listTools()).tools.map((t) => t.name);
  const call = async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult;
  const errorOf = (r: CallToolResult) => (r.structuredContent as { error?: { code: string; message: string } }).error;

  it("serves it as pinned, and through a cosmetic change", async () => {
    expect(await listed()).toEqual(expect.arrayContaining(["changing__echo", "changing__ping"]));
    expect(JSON.stringify((await call("changing__echo", { message: "one" })).content)).toContain("one");
    writeFileSync(definitions, JSON.stringify(tools("Echoes the message it is given")));
    // The upstream re-announced its list; a reworded description changes nothing served.
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await listed()).toContain("changing__echo");
    expect((await call("changing__echo", { message: "two" })).isError).toBeFalsy();
  });

  it("quarantines it on any other change: out of the list, its calls refused contract_drift naming the sections; the other tool keeps serving", async () => {
    writeFileSync(definitions, JSON.stringify(tools("Echoes the message it is given", ["message", "to"])));
    await eventually("changing__echo to leave the list", async () => ((await listed()).includes("changing__echo") ? undefined : true));
    const refused = await call("changing__echo", { message: "three", to: "you" });
    expect(refused.isError).toBe(true);
    expect(errorOf(refused)).toMatchObject({ code: "contract_drift" });
    expect(errorOf(refused)!.message).toMatch(/upstreams\/changing\/echo \(surface\): BREAKING/);
    const step = (await client.callTool({ name: "chaoscore_execute", arguments: { steps: [{ id: "s1", capability: "changing.echo", input: { message: "x", to: "y" } }] } })) as CallToolResult;
    expect((step.structuredContent as { results: Array<{ status: string; error?: { code: string } }> }).results[0]).toMatchObject({ status: "failed", error: { code: "contract_drift" } });
    expect(await listed()).toContain("changing__ping");
    expect((await call("changing__ping", {})).isError).toBeFalsy();

    const diff = await runToExit(["upstreams", "diff", "changing"], env, 60_000);
    expect(diff.stdout).toMatch(/^changing: BREAKING\n/);
  });

  it("serves it again once an operator approves the new contract", async () => {
    const approved = await runToExit(["upstreams", "approve", "changing", "echo"], env, 60_000);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(/^approved changing\/echo \(BREAKING\), pinned in /);
    await eventually("changing__echo to be listed again", async () => ((await listed()).includes("changing__echo") ? true : undefined));
    const answered = await call("changing__echo", { message: "four", to: "you" });
    expect(answered.isError).toBeFalsy();
    expect(JSON.stringify(answered.content)).toContain("four");
  });
});
