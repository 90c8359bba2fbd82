import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { Client as V2Client } from "@modelcontextprotocol/client";
import { StreamableHTTPClientTransport as V2Http } from "@modelcontextprotocol/client";
import { seedDataDir } from "../support/data-dir-template.js";
import { autoAcceptingClient } from "../support/elicitation.js";
import { freePort, waitForPort } from "../support/ports.js";
import { httpClient, removeDir, ROOT, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";

/**
 * Issue 32, increment 4: an upstream tool is a capability, run only through the executor — schema
 * (Ajv, the pinned dialect), policy, approval channels by risk, the ledger with the arguments' and
 * the result's hashes — against server-filesystem from npm (reads annotated read-only, writes
 * destructive) and server-everything.
 */

const server = (pkg: string) => join(ROOT, "node_modules/@modelcontextprotocol", pkg, "dist/index.js");

interface Step {
  step_id: string;
  capability: string;
  status: string;
  ran: boolean;
  output?: { content: Array<{ type: string; text?: string }>; structuredContent?: Record<string, unknown> };
  error?: { code: string; message: string };
  approval?: { approval_id: string; risk: string; policy_channels: string[] };
}
const results = (res: unknown) => ((res as CallToolResult).structuredContent as { results: Step[] }).results;
const step = (capability: string, input: Record<string, unknown>) => ({ steps: [{ id: "u1", capability, input }] });

describe("an upstream tool, governed like every capability", () => {
  const dir = tempDir("chaos-core-governed-");
  const share = join(dir, "share");
  let serve: ServeProcess;
  const clients: Client[] = [];
  const connect = async (options: Parameters<typeof httpClient>[2] = {}) => {
    const c = await httpClient(serve.url, undefined, options);
    clients.push(c);
    return c;
  };

  // server-everything in its own Streamable HTTP mode: an upstream reached by URL, with a header
  // whose value comes from a secret reference (server-everything ignores it; no output may show it).
  const secret = `upstream-secret-${randomBytes(8).toString("hex")}`;
  let remote: ChildProcess | undefined;
  let remotePort = 0;
  /** Everything a person or a program could read from this run, for the secret search. */
  const outputs: string[] = [];

  beforeAll(async () => {
    remotePort = await freePort();
    remote = spawn(process.execPath, [server("server-everything"), "streamableHttp"], { env: { ...process.env, PORT: String(remotePort) }, stdio: "ignore" });
    await waitForPort(remotePort);
    await seedDataDir(dir);
    mkdirSync(share);
    writeFileSync(join(share, "notes.txt"), "the deploy window is friday\n");
    writeFileSync(
      join(dir, "upstreams.json"),
      JSON.stringify({
        upstreams: [
          { name: "files", command: process.execPath, args: [server("server-filesystem"), share] },
          { name: "everything", command: process.execPath, args: [server("server-everything"), "stdio"] },
          { name: "remote", url: `http://127.0.0.1:${remotePort}/mcp`, headers: { Authorization: { env: "CHAOS_CORE_UPSTREAM_SECRET_REMOTE", prefix: "Bearer " } } },
        ],
      }),
    );
    // The operator's policy: every filesystem tool allowed, one denied by its exact name.
    writeFileSync(join(dir, "policy.json"), JSON.stringify({ requireConfirmationFor: ["http.request"], deniedCapabilities: ["files.move_file"] }));
    const locked = await runToExit(["upstreams", "lock"], { CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_UPSTREAM_SECRET_REMOTE: secret }, 90_000);
    expect(locked.code, locked.stderr).toBe(0);
    outputs.push(locked.stdout, locked.stderr);
    // Every line it logs, debug included, is searched for the secret at the end.
    serve = await startServe({ CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_UPSTREAM_SECRET_REMOTE: secret, LOG_LEVEL: "debug" });
  }, 180_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await serve?.stop();
    remote?.kill();
    removeDir(dir);
  });


  it("runs a read tool, and records its decision before the call and the hashes of its arguments and result", async () => {
    const c = await connect();
    const [r] = results(await c.callTool({ name: "chaoscore_execute", arguments: step("files.read_text_file", { path: join(share, "notes.txt") }) }));
    expect(r).toMatchObject({ capability: "files.read_text_file", status: "executed", ran: true });
    expect(r!.output!.content[0]!.text).toBe("the deploy window is friday\n");

    const ledger = (await c.callTool({ name: "inspect_audit_ledger", arguments: { limit: 10 } })).structuredContent as {
      entries: Array<{ event: Record<string, unknown> }>;
    };
    const events = ledger.entries.map((e) => e.event).filter((e) => e["capability"] === "files.read_text_file");
    // Never the single read entry an upstream's own read-only hint would have earned: decision, then outcome.
    expect(events.map((e) => e["type"]).sort()).toEqual(["step.decision", "step.outcome"]);
    const outcome = events.find((e) => e["type"] === "step.outcome")!;
    expect(outcome["argsHash"]).toMatch(/^[0-9a-f]{64}$/);
    expect(outcome["resultHash"]).toMatch(/^[0-9a-f]{64}$/);
  });

  it("plans and achieves an objective with the upstream tool it names, offline: its input read from the objective by the pinned schema", async () => {
    const c = await connect();
    const target = join(share, "notes.txt");
    const planned = (await c.callTool({ name: "chaoscore_plan", arguments: { objective: `read the file ${target}` } })).structuredContent as {
      steps: Array<{ capability: string; input: unknown }>;
    };
    // server-filesystem offers read_text_file and its deprecated twin read_file: either reads it.
    expect(planned.steps).toHaveLength(1);
    expect(["files.read_text_file", "files.read_file"]).toContain(planned.steps[0]!.capability);
    expect(planned.steps[0]!.input).toEqual({ path: target });
    const achieved = await c.callTool({ name: "chaoscore_achieve", arguments: { objective: `list everything in the ${share} directory` } });
    expect(achieved.structuredContent, JSON.stringify(achieved.content)).toMatchObject({ status: "succeeded" });
    expect(JSON.stringify(achieved.structuredContent)).toContain("files.list_directory");
    expect(JSON.stringify(achieved.structuredContent)).toContain("notes.txt");
  });

  it("refuses input its pinned schema rejects, naming the field, before policy is asked", async () => {
    const c = await connect();
    const [r] = results(await c.callTool({ name: "chaoscore_execute", arguments: step("files.read_text_file", { path: 42 }) }));
    expect(r).toMatchObject({ status: "failed", ran: false, error: { code: "invalid_argument" } });
    expect(r!.error!.message).toContain("input.path: must be string");
  });

  it("holds a destructive write for a person, which an auto-accepting client cannot give, and runs it once after the operator approves", async () => {
    const asked: string[] = [];
    const c = await connect(autoAcceptingClient(asked));
    const target = join(share, "window.txt");
    const [pending] = results(await c.callTool({ name: "chaoscore_execute", arguments: step("files.write_file", { path: target, content: "monday" }) }));
    expect(pending).toMatchObject({ status: "pending_approval", ran: false, approval: { risk: "high" } });
    expect(pending!.approval!.policy_channels).not.toContain("client_elicitation");
    const id = pending!.approval!.approval_id;

    // The client's host would say yes to anything; at high risk its answer is not asked for.
    const early = (await c.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } })) as CallToolResult;
    expect(early.isError).toBe(true);
    expect(early.structuredContent).toMatchObject({ error: { code: "approval_required" } });
    expect(asked).toEqual([]);
    expect(existsSync(target)).toBe(false);

    const approved = await runToExit(["approvals", "approve", id], { CHAOS_CORE_DATA_DIR: dir });
    expect(approved.code, approved.stderr).toBe(0);
    const [ran] = results(await c.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } }));
    expect(ran).toMatchObject({ capability: "files.write_file", status: "executed", ran: true });
    expect(readFileSync(target, "utf8")).toBe("monday");
    const [again] = results(await c.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } }));
    expect(again).toMatchObject({ ran: false, error: { code: "failed_precondition" } });
  });

  it("never runs a tool policy denies: the file is not moved", async () => {
    const c = await connect();
    const [r] = results(
      await c.callTool({ name: "chaoscore_execute", arguments: step("files.move_file", { source: join(share, "notes.txt"), destination: join(share, "moved.txt") }) }),
    );
    expect(r).toMatchObject({ status: "denied", ran: false });
    expect(existsSync(join(share, "notes.txt"))).toBe(true);
    expect(existsSync(join(share, "moved.txt"))).toBe(false);
  });

  it("names an upstream tool that answered with an error, and passes content a planner can use from another upstream", async () => {
    const c = await connect();
    const [missing] = results(await c.callTool({ name: "chaoscore_execute", arguments: step("files.read_text_file", { path: join(share, "absent.txt") }) }));
    expect(missing).toMatchObject({ status: "failed", ran: true });
    expect(missing!.error!.message).toContain('upstream "files" answered read_text_file with an error');
    const [echo] = results(await c.callTool({ name: "chaoscore_execute", arguments: step("everything.echo", { message: "governed" }) }));
    expect(echo).toMatchObject({ status: "executed" });
    expect(echo!.output!.content[0]!.text).toContain("governed");
  });

  it("lists each pinned upstream tool as an MCP tool with its pinned schema and annotations, over both revisions", async () => {
    const c = await connect();
    const { tools } = await c.listTools();
    const read = tools.find((t) => t.name === "files__read_text_file");
    expect(read).toBeDefined();
    expect(read!.inputSchema).toMatchObject({ type: "object", properties: { path: { type: "string" } }, required: ["path"] });
    expect(read!.annotations).toMatchObject({ readOnlyHint: true });
    expect(read!.outputSchema).toBeUndefined();
    expect(tools.find((t) => t.name === "files__write_file")!.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    expect(tools.map((t) => t.name)).toEqual(expect.arrayContaining(["everything__echo", "everything__get_env", "chaoscore_execute"]));

    const modern = new V2Client({ name: "chaos-core-e2e", version: "0.0.0" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
    await modern.connect(new V2Http(new URL(serve.url)));
    try {
      expect((await modern.listTools()).tools.map((t) => t.name).sort()).toEqual(tools.map((t) => t.name).sort());
      const echoed = await modern.callTool({ name: "everything__echo", arguments: { message: "over 2026-07-28" } });
      expect(JSON.stringify(echoed.content)).toContain("over 2026-07-28");
    } finally {
      await modern.close();
    }
  });

  it("answers a direct call with the upstream's content as sent, and holds a destructive one for a person as chaoscore_execute does", async () => {
    const c = await connect();
    const read = (await c.callTool({ name: "files__read_text_file", arguments: { path: join(share, "notes.txt") } })) as CallToolResult;
    expect(read.isError).toBeFalsy();
    expect(read.content).toEqual([{ type: "text", text: "the deploy window is friday\n" }]);
    expect(read.structuredContent).toEqual({ content: "the deploy window is friday\n" });

    const target = join(share, "direct.txt");
    const held = (await c.callTool({ name: "files__write_file", arguments: { path: target, content: "tuesday" } })) as CallToolResult;
    expect(held.isError).toBe(true);
    const error = (held.structuredContent as { error: { code: string; message: string } }).error;
    expect(error.code).toBe("approval_required");
    expect(error.message).toMatch(/files\.write_file needs a human approval under policy/);
    expect(error.message).toMatch(/chaos-core approvals approve [0-9a-f-]{36}/);
    expect(existsSync(target)).toBe(false);

    const bad = (await c.callTool({ name: "files__read_text_file", arguments: { path: 7 } })) as CallToolResult;
    expect(bad.isError).toBe(true);
    expect((bad.structuredContent as { error: { code: string; message: string } }).error.message).toContain("input.path: must be string");
  });

  it("reaches an upstream over Streamable HTTP with its referenced header, and shows the secret nowhere: not in answers, logs, the ledger or the data directory", async () => {
    const c = await connect();
    const direct = (await c.callTool({ name: "remote__echo", arguments: { message: "over http" } })) as CallToolResult;
    expect(JSON.stringify(direct.content)).toContain("over http");
    const [stepped] = results(await c.callTool({ name: "chaoscore_execute", arguments: step("remote.echo", { message: "as a step" }) }));
    expect(stepped).toMatchObject({ status: "executed" });
    outputs.push(JSON.stringify(direct), JSON.stringify(stepped));

    const shown = await runToExit(["upstreams", "show", "remote"], { CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_UPSTREAM_SECRET_REMOTE: secret });
    expect(shown.stdout).toContain("$CHAOS_CORE_UPSTREAM_SECRET_REMOTE");
    const inspected = await c.callTool({ name: "chaoscore_inspect", arguments: { what: "capabilities" } });
    const ledger = await runToExit(["ledger", "export"], { CHAOS_CORE_DATA_DIR: dir });
    expect(ledger.code, ledger.stderr).toBe(0);
    outputs.push(shown.stdout, shown.stderr, JSON.stringify(inspected), ledger.stdout, ledger.stderr, serve.stderr());
    for (const [i, text] of outputs.entries()) expect(text.includes(secret), `output ${i} shows the secret`).toBe(false);
    // The data directory, database files included, holds no copy either.
    const grep = spawnSync("grep", ["-r", "-a", "-l", secret, dir], { encoding: "utf8" });
    expect(grep.stdout).toBe("");
  });
});

