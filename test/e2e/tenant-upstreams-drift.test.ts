import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { Webhook } from "standardwebhooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { seedDataDir } from "../support/data-dir-template.js";
import { freePort, waitForPort } from "../support/ports.js";
import { httpClient, removeDir, ROOT, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";

/**
 * Issue 32 item 2 for a tenant's own registry upstreams: acme's upstream (a small SDK server over
 * Streamable HTTP whose tools are a file this test rewrites) changes a tool's input schema after it
 * was pinned. Acme's calls to it are refused contract_drift and the quarantine is an
 * `upstream.drift` entry in ACME's ledger (not default's); `upstreams diff --tenant acme` says
 * BREAKING; `upstreams approve NAME TOOL --tenant acme` records `upstream.approved` in acme's ledger,
 * re-pins it in the registry, and acme is served the new schema — its release recorded too. Bravo,
 * with its own upstream of the same name on a server that does not change, sees none of it.
 */

const CHANGING = join(ROOT, "test/support/upstreams/changing-http-server.mjs");
const object = (properties: Record<string, unknown>, required: string[]) => ({ type: "object", properties, required });
const tools = (echoRequired: string[]) => ({
  tools: [
    { name: "echo", description: "Echoes its message back", inputSchema: object({ message: { type: "string" }, to: { type: "string" } }, echoRequired), annotations: { readOnlyHint: true, openWorldHint: false } },
    { name: "ping", description: "Answers pong.", inputSchema: object({}, []), annotations: { readOnlyHint: true, openWorldHint: false } },
  ],
});
const PINNED = tools(["message"]);
const BREAKING = tools(["message", "to"]);

type Entry = { type: string; seq: number; principal: string; event: Record<string, unknown> };
type Event = { type: string; data: Record<string, unknown> };

describe("a tenant's own upstream tool that changes after it was pinned", () => {
  const dir = tempDir("chaos-core-tenant-drift-");
  const files = { acme: join(dir, "acme-tools.json"), bravo: join(dir, "bravo-tools.json") };
  const webhookSecret = `whsec_${randomBytes(32).toString("base64")}`;
  const env: Record<string, string> = { CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_HTTP_ALLOWED_ADDRESSES: "127.0.0.1/32" };
  const me = userInfo().username;
  const remotes: ChildProcess[] = [];
  let receiver: WebhookReceiver;
  let serve: ServeProcess;
  let acme: Client;
  let bravo: Client;
  const keys = { acme: "", bravo: "" };

  const cli = async (args: string[]) => {
    const r = await runToExit(args, env, 90_000);
    expect(r.code, `chaos-core ${args.join(" ")}\n${r.stderr}`).toBe(0);
    return r.stdout;
  };
  /** A tenant's upstream entries, read back with `chaos-core ledger export` through the running server. */
  const ledger = async (tenant: string): Promise<Entry[]> =>
    (await cli(["ledger", "export", "--tenant", tenant]))
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => JSON.parse(l) as Entry)
      .filter((l) => l.type === "entry" && String(l.event.type).startsWith("upstream."));
  const drifts = async (tenant: string, state: string) => (await ledger(tenant)).filter((e) => e.event.type === "upstream.drift" && e.event.state === state);
  const call = async (c: Client, args: Record<string, unknown>) => (await c.callTool({ name: "tools__echo", arguments: args })) as CallToolResult;
  const errorOf = (r: CallToolResult) => (r.structuredContent as { error?: { code: string; message: string } } | undefined)?.error;
  const echoListed = async (c: Client) => (await c.listTools()).tools.find((t) => t.name === "tools__echo");
  /** The verified upstream.drift webhook events, first delivery of each. */
  const events = () =>
    [...new Map(receiver.received.map((r) => [r.id, r])).values()].map((r) => new Webhook(webhookSecret).verify(r.body, r.headers) as Event).filter((e) => e.type === "upstream.drift");

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    Object.assign(env, { CHAOS_CORE_WEBHOOK_URL: receiver.url, CHAOS_CORE_WEBHOOK_SECRET: webhookSecret, CHAOS_CORE_WEBHOOK_RETRY_SECONDS: "0.2,0.2" });
    await seedDataDir(dir);
    const ports = { acme: await freePort(), bravo: 0 };
    ports.bravo = await freePort();
    for (const tenant of ["acme", "bravo"] as const) {
      writeFileSync(files[tenant], JSON.stringify(PINNED));
      remotes.push(spawn(process.execPath, [CHANGING, files[tenant], String(ports[tenant])], { stdio: "ignore" }));
      await waitForPort(ports[tenant]);
    }
    serve = await startServe(env);
    for (const tenant of ["acme", "bravo"] as const) {
      await cli(["tenants", "create", tenant]);
      keys[tenant] = (await cli(["keys", "create", "--tenant", tenant, "--principal", "alice"])).trim();
      // One name for both, each its own server: acme's changes, bravo's does not.
      await cli(["upstreams", "add", "tools", "--tenant", tenant, "--url", `http://127.0.0.1:${ports[tenant]}/mcp`, "--risk", "low"]);
    }
    acme = await httpClient(serve.url, { Authorization: `Bearer ${keys.acme}` });
    bravo = await httpClient(serve.url, { Authorization: `Bearer ${keys.bravo}` });
  }, 180_000);

  afterAll(async () => {
    await acme?.close().catch(() => {});
    await bravo?.close().catch(() => {});
    await serve?.stop();
    for (const remote of remotes) remote.kill();
    await receiver?.close();
    removeDir(dir);
  });

  it("serves each tenant its own as pinned", async () => {
    for (const c of [acme, bravo]) {
      const answered = await call(c, { message: "pinned" });
      expect(answered.isError, JSON.stringify(answered)).toBeFalsy();
      expect(JSON.stringify(answered.content)).toContain("pinned");
    }
    expect((await echoListed(acme))?.inputSchema).toMatchObject({ required: ["message"] });
  });

  it("quarantines acme's changed tool: its calls refused contract_drift, naming the sections", async () => {
    writeFileSync(files.acme, JSON.stringify(BREAKING));
    await expect
      .poll(async () => errorOf(await call(acme, { message: "after", to: "you" }))?.code, { timeout: 20_000, interval: 300 })
      .toBe("contract_drift");
    const refused = await call(acme, { message: "after", to: "you" });
    expect(refused.isError).toBe(true);
    expect(errorOf(refused)!.message).toMatch(/upstreams\/tools\/echo \(surface\): BREAKING/);
    const step = (await acme.callTool({ name: "chaoscore_execute", arguments: { steps: [{ id: "s1", capability: "tools.echo", input: { message: "x", to: "y" } }] } })) as CallToolResult;
    expect((step.structuredContent as { results: Array<{ status: string; error?: { code: string } }> }).results[0]).toMatchObject({ status: "failed", error: { code: "contract_drift" } });
    // Acme's other tool, and bravo's echo of the same name, serve throughout.
    expect(((await acme.callTool({ name: "tools__ping", arguments: {} })) as CallToolResult).isError).toBeFalsy();
    expect((await call(bravo, { message: "still" })).isError).toBeFalsy();
  });

  it("records the quarantine once in acme's own ledger, as the server (chaos-core), with the verdict and digests; none in default's or bravo's", async () => {
    await expect.poll(async () => (await drifts("acme", "quarantined")).length, { timeout: 20_000, interval: 300 }).toBe(1);
    const [entry] = await drifts("acme", "quarantined");
    expect(entry).toMatchObject({ principal: "chaos-core", event: { upstream: "tools", tool: "echo", verdict: "BREAKING", sections: ["surface"] } });
    expect(entry!.event.pinned_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(entry!.event.live_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect((await ledger("default")).filter((e) => e.event.type === "upstream.drift")).toEqual([]);
    expect((await ledger("bravo")).filter((e) => e.event.type === "upstream.drift")).toEqual([]);
    await receiver.waitFor("acme's quarantine webhook event", () => events().some((e) => e.data.state === "quarantined"), 20_000);
    expect(events().find((e) => e.data.state === "quarantined")!.data).toMatchObject({ tenant: "acme", ledger_seq: entry!.seq, upstream: "tools", tool: "echo" });
  });

  it("upstreams diff --tenant acme connects and says BREAKING, naming the tool", async () => {
    const diff = await cli(["upstreams", "diff", "tools", "--tenant", "acme"]);
    expect(diff).toMatch(/^tools: BREAKING\n/);
    expect(diff).toContain("echo");
    expect(await cli(["upstreams", "diff", "tools", "--tenant", "bravo"])).toBe("tools: no change since it was pinned\n");
  });

  it("upstreams approve tools echo --tenant acme re-pins it: acme is served the new schema", async () => {
    const before = await drifts("acme", "quarantined");
    const approved = await cli(["upstreams", "approve", "tools", "echo", "--tenant", "acme"]);
    expect(approved).toMatch(/^approved tools\/echo \(BREAKING\) for tenant "acme", pinned in the registry; recorded in the tenant's audit ledger as entry \d+\n/);
    // Acme's session lists it again — with the schema approved, not the one it listed before — and
    // runs it; a session acme opens now lists the same.
    await expect.poll(async () => (await echoListed(acme))?.inputSchema.required, { timeout: 20_000, interval: 300 }).toEqual(["message", "to"]);
    await expect.poll(async () => (await call(acme, { message: "approved", to: "you" })).isError ?? false, { timeout: 20_000, interval: 300 }).toBe(false);
    const answered = await call(acme, { message: "approved", to: "you" });
    expect(JSON.stringify(answered.content)).toContain("approved");
    const fresh = await httpClient(serve.url, { Authorization: `Bearer ${keys.acme}` });
    try {
      expect((await echoListed(fresh))?.inputSchema).toMatchObject({ required: ["message", "to"] });
      expect((await call(fresh, { message: "new session", to: "you" })).isError).toBeFalsy();
    } finally {
      await fresh.close();
    }
    expect(await drifts("acme", "quarantined")).toEqual(before);
    // Approved again: nothing has drifted, so nothing changes.
    expect(await cli(["upstreams", "approve", "tools", "echo", "--tenant", "acme"])).toBe("tools/echo: the pin already matches what the upstream lists; nothing changed\n");
    expect(await cli(["upstreams", "diff", "tools", "--tenant", "acme"])).toBe("tools: no change since it was pinned\n");
  });

  it("records the approval (who, the tool, its new digest) in acme's ledger before the release the server saw", async () => {
    const approvals = (await ledger("acme")).filter((e) => e.event.type === "upstream.approved");
    expect(approvals).toHaveLength(1);
    expect(approvals[0]).toMatchObject({ principal: "operator", event: { upstream: "tools", tool: "echo", verdict: "BREAKING", by: me, tools: [{ tool: "echo", change: "changed" }] } });
    const digest = (approvals[0]!.event.tools as Array<{ digest: string }>)[0]!.digest;
    const [quarantine] = await drifts("acme", "quarantined");
    expect(digest).toBe(quarantine!.event.live_digest);
    await expect.poll(async () => (await drifts("acme", "released")).length, { timeout: 20_000, interval: 300 }).toBe(1);
    const [released] = await drifts("acme", "released");
    expect(released).toMatchObject({ principal: "chaos-core", event: { upstream: "tools", tool: "echo", reason: "re-pinned", pinned_digest: digest, live_digest: digest } });
    expect(released!.seq).toBeGreaterThan(approvals[0]!.seq);
    await receiver.waitFor("acme's approval and release webhook events", () => ["approved", "released"].every((s) => events().some((e) => e.data.state === s)), 20_000);
    for (const e of events()) expect(e.data.tenant).toBe("acme");
    expect(events().find((e) => e.data.state === "approved")!.data).toMatchObject({ ledger_seq: approvals[0]!.seq, by: me, tool: "echo" });
  });

  it("leaves bravo as it was: its own pin, its schema, no entry", async () => {
    expect((await echoListed(bravo))?.inputSchema).toMatchObject({ required: ["message"] });
    expect((await call(bravo, { message: "unchanged" })).isError).toBeFalsy();
    expect((await ledger("bravo")).filter((e) => e.event.type !== "upstream.added")).toEqual([]);
    const verified = await runToExit(["ledger", "verify", "--tenant", "acme"], { CHAOS_CORE_DATA_DIR: dir }, 30_000);
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
  });
});
