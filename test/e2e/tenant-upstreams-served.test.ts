import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ToolListChangedNotificationSchema, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/data-dir-template.js";
import { httpClient, removeDir, ROOT, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { freePort, waitForPort } from "../support/ports.js";
import { rawToolNames } from "../support/mrtr.js";

/**
 * Issue 32 items 1(b), 4 and 6, served: a tenant's own upstream in the registry (server-everything
 * in its Streamable HTTP mode, from npm, run here) is run by that tenant's `chaoscore_execute`
 * through the executor — policy, a decision and an outcome in its ledger — and seen in its
 * `chaoscore_inspect`; another tenant neither sees it nor runs it (unknown, as any name); disabling
 * it in the registry takes it away on the next call (the tenant's generation moved) and enabling
 * it brings it back; the header's secret value appears nowhere.
 */

type Step = { status: string; capability: string; ran?: boolean; output?: { content?: Array<{ type: string; text?: string }> }; error?: { code: string; message: string } };

describe("a tenant's own upstream, served to that tenant only", () => {
  const dir = tempDir("chaos-core-tenant-upstreams-served-");
  const secret = `served-upstream-secret-${randomBytes(8).toString("hex")}`;
  const env = { CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "127.0.0.1", CHAOS_CORE_UPSTREAM_SECRET_ACME: secret };
  const outputs: string[] = [];
  let remote: ChildProcess | undefined;
  let serve: ServeProcess;
  let acme: Client;
  let bravo: Client;
  const heard = { acme: 0, bravo: 0 };
  const keys = { acme: "", bravo: "" };

  const cli = async (args: string[]) => {
    const r = await runToExit(args, env, 90_000);
    outputs.push(r.stdout, r.stderr);
    expect(r.code, `chaos-core ${args.join(" ")}\n${r.stderr}`).toBe(0);
    return r.stdout.trim();
  };
  const call = async (c: Client, name: string, args: Record<string, unknown>) => {
    const r = (await c.callTool({ name, arguments: args })) as CallToolResult;
    outputs.push(JSON.stringify(r));
    return r;
  };
  const execute = async (c: Client, capability: string, input: Record<string, unknown>) =>
    ((await call(c, "chaoscore_execute", { steps: [{ id: "s1", capability, input }] })).structuredContent as { results: Step[] }).results[0]!;
  const capabilities = async (c: Client) => JSON.stringify((await call(c, "chaoscore_inspect", { what: "capabilities" })).structuredContent);

  beforeAll(async () => {
    const port = await freePort();
    const everything = join(ROOT, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    remote = spawn(process.execPath, [everything, "streamableHttp"], { env: { ...process.env, PORT: String(port) }, stdio: "ignore" });
    await waitForPort(port);
    await seedDataDir(dir);
    serve = await startServe({ ...env, LOG_LEVEL: "debug" });
    await cli(["tenants", "create", "acme"]);
    await cli(["tenants", "create", "bravo"]);
    const acmeKey = await cli(["keys", "create", "--tenant", "acme", "--principal", "alice"]);
    const bravoKey = await cli(["keys", "create", "--tenant", "bravo", "--principal", "bob"]);
    // Read-only, so the tenant's default policy runs it without a person (the pin's annotations are what the risk is read from).
    await cli(["upstreams", "add", "everything", "--tenant", "acme", "--url", `http://127.0.0.1:${port}/mcp`, "--header", "Authorization=env:CHAOS_CORE_UPSTREAM_SECRET_ACME", "--risk", "low"]);
    // The same server again, its annotations not trusted: every tool high, held for a person.
    await cli(["upstreams", "add", "guarded", "--tenant", "acme", "--url", `http://127.0.0.1:${port}/mcp`, "--trust-annotations", "false"]);
    Object.assign(keys, { acme: acmeKey, bravo: bravoKey });
    acme = await httpClient(serve.url, { Authorization: `Bearer ${acmeKey}` });
    bravo = await httpClient(serve.url, { Authorization: `Bearer ${bravoKey}` });
    acme.setNotificationHandler(ToolListChangedNotificationSchema, () => void (heard.acme += 1));
    bravo.setNotificationHandler(ToolListChangedNotificationSchema, () => void (heard.bravo += 1));
  }, 180_000);

  afterAll(async () => {
    await acme?.close().catch(() => {});
    await bravo?.close().catch(() => {});
    await serve?.stop();
    remote?.kill();
    removeDir(dir);
  });

  it("maps the upstream's echo to the capability everything.echo", async () => {
    const shown = JSON.parse(await cli(["upstreams", "show", "everything", "--tenant", "acme", "--json"])) as { tools: Array<{ tool: string; capability: string }> };
    expect(shown.tools).toContainEqual(expect.objectContaining({ tool: "echo", capability: "everything.echo" }));
  });

  it("runs acme's everything.echo through the executor: the upstream's answer, a decision and an outcome in acme's ledger", async () => {
    const step = await execute(acme, "everything.echo", { message: "hello from acme" });
    expect(step, JSON.stringify(step)).toMatchObject({ capability: "everything.echo", status: "executed", ran: true });
    expect(JSON.stringify(step.output)).toContain("hello from acme");

    const ledger = (await call(acme, "inspect_audit_ledger", { limit: 20 })).structuredContent as { entries: Array<{ event: Record<string, unknown> }> };
    const events = ledger.entries.map((e) => e.event).filter((e) => e["capability"] === "everything.echo");
    expect(events.map((e) => e["type"]).sort()).toEqual(["step.decision", "step.outcome"]);
    const outcome = events.find((e) => e["type"] === "step.outcome")!;
    expect(outcome["argsHash"]).toMatch(/^[0-9a-f]{64}$/);
    expect(outcome["resultHash"]).toMatch(/^[0-9a-f]{64}$/);
    expect(await capabilities(acme)).toContain("everything.echo");
  });

  it("lists it to acme's session as the MCP tool everything__echo, which runs it", async () => {
    expect((await acme.listTools()).tools.map((t) => t.name)).toContain("everything__echo");
    const echoed = await call(acme, "everything__echo", { message: "as an MCP tool" });
    expect(echoed.isError, JSON.stringify(echoed)).toBeFalsy();
    expect(JSON.stringify(echoed.content)).toContain("as an MCP tool");
  });

  it("holds acme's high-risk upstream step for a person, and runs it once the operator approved it", async () => {
    const pending = (await call(acme, "chaoscore_execute", { steps: [{ id: "s1", capability: "guarded.echo", input: { message: "approved echo" } }] })).structuredContent as {
      results: Array<Step & { approval?: { approval_id: string; risk: string } }>;
    };
    expect(pending.results[0]).toMatchObject({ status: "pending_approval", ran: false, approval: { risk: "high" } });
    const id = pending.results[0]!.approval!.approval_id;
    await cli(["approvals", "approve", id, "--tenant", "acme"]);
    const ran = ((await call(acme, "chaoscore_execute", { approval_id: id })).structuredContent as { results: Step[] }).results[0]!;
    expect(ran).toMatchObject({ capability: "guarded.echo", status: "executed", ran: true });
    expect(JSON.stringify(ran.output)).toContain("approved echo");
  });

  it("lists it on a 2026-07-28 request of acme's, and on none of bravo's", async () => {
    const list = (key: string) => rawToolNames(serve.url, { authorization: `Bearer ${key}` });
    expect(await list(keys.acme)).toContain("everything__echo");
    const bravos = await list(keys.bravo);
    expect(bravos).toContain("chaoscore_execute");
    expect(bravos.filter((n) => n.startsWith("everything__"))).toEqual([]);
  });

  it("shows bravo nothing of it and refuses bravo's step as an unknown capability", async () => {
    expect((await bravo.listTools()).tools.map((t) => t.name).filter((n) => n.startsWith("everything__"))).toEqual([]);
    let refusal: string;
    try {
      const r = await call(bravo, "everything__echo", { message: "from bravo" });
      refusal = r.isError ? JSON.stringify(r.content) : "";
    } catch (err) {
      refusal = err instanceof Error ? err.message : String(err);
    }
    expect(refusal).toMatch(/Unknown tool: "?everything__echo/);
    expect(await capabilities(bravo)).not.toContain("everything.");
    const step = await execute(bravo, "everything.echo", { message: "from bravo" });
    expect(step).toMatchObject({ status: "failed", error: { code: "not_found" } });
    expect(step.error!.message).toMatch(/no capability is registered as "everything\.echo"/);
    // What bravo is told of the registered ones names none of acme's.
    expect(step.error!.message.split("registered:")[1]).not.toContain("everything");
  });

  it("takes it away from acme's next call once disabled, and serves it again once enabled", async () => {
    const before = { ...heard };
    await cli(["upstreams", "disable", "everything", "--tenant", "acme"]);
    // Gone from acme's session's list too (its session is told tools/list_changed).
    const deadline = Date.now() + 10_000;
    while ((await acme.listTools()).tools.some((t) => t.name === "everything__echo") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    expect((await acme.listTools()).tools.map((t) => t.name)).not.toContain("everything__echo");
    await expect.poll(() => heard.acme, { timeout: 10_000 }).toBeGreaterThan(before.acme);
    // Another tenant's upstreams are no concern of bravo's sessions.
    expect(heard.bravo).toBe(before.bravo);
    const refused = await execute(acme, "everything.echo", { message: "after disable" });
    expect(refused).toMatchObject({ status: "failed", ran: false, error: { code: "not_found" } });
    expect(await capabilities(acme)).not.toContain("everything.echo");

    await cli(["upstreams", "enable", "everything", "--tenant", "acme"]);
    const again = await execute(acme, "everything.echo", { message: "after enable" });
    expect(again).toMatchObject({ status: "executed" });
    await expect.poll(async () => (await acme.listTools()).tools.map((t) => t.name), { timeout: 10_000 }).toContain("everything__echo");
    expect(JSON.stringify(again.output)).toContain("after enable");
  });

  it("the secret's value is in no output, log line or file of the data directory", () => {
    outputs.push(serve.stderr());
    for (const text of outputs) expect(text).not.toContain(secret);
    const grep = spawnSync("grep", ["-r", "-a", "-l", secret, dir], { encoding: "utf8" });
    expect(grep.stdout).toBe("");
  });
});
