import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { Webhook } from "standardwebhooks";
import { seedDataDir } from "../support/data-dir-template.js";
import { httpClient, removeDir, ROOT, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { startWebhookReceiver, type WebhookReceiver } from "../support/webhook-receiver.js";
import { eventually } from "../support/eventually.js";

/**
 * Issue 32, "rug pull": an upstream that changes a tool after it was pinned (a small SDK server
 * whose tools are a file this test rewrites; it says so with notifications/tools/list_changed).
 * A cosmetic change is served; any other quarantines that tool — left out of the list, its calls
 * refused contract_drift naming the sections — until `chaos-core upstreams approve` re-pins it;
 * the upstream's other tool serves throughout. Each quarantine, cosmetic change and release, and
 * each `upstreams lock` and `approve`, is an entry in the audit ledger (read back with
 * `chaos-core ledger export`) and an `upstream.drift` webhook event a local receiver verifies with
 * the Standard Webhooks library — once per change, and with no secret of the declaration in either.
 */

const CHANGING = join(ROOT, "test/support/upstreams/changing-server.mjs");
const object = (properties: Record<string, unknown>, required: string[]) => ({ type: "object", properties, required });
const tools = (echoDescription: string, echoRequired = ["message"]) => ({
  tools: [
    { name: "echo", description: echoDescription, inputSchema: object({ message: { type: "string" }, to: { type: "string" } }, echoRequired), annotations: { readOnlyHint: true, openWorldHint: false } },
    { name: "ping", description: "Answers pong.", inputSchema: object({}, []), annotations: { readOnlyHint: true, openWorldHint: false } },
  ],
});

type Entry = { type: string; seq: number; principal: string; event: Record<string, unknown> };
type Event = { type: string; timestamp: string; data: Record<string, unknown> };

describe("an upstream tool that changes after it was pinned", () => {
  const dir = tempDir("chaos-core-drift-");
  const definitions = join(dir, "changing-tools.json");
  let serve: ServeProcess;
  let client: Client;
  let receiver: WebhookReceiver;
  const webhookSecret = `whsec_${randomBytes(32).toString("base64")}`;
  // Handed to the upstream through a reference: its value must reach no entry and no event.
  const secret = `drift-secret-${randomBytes(12).toString("hex")}`;
  const env: Record<string, string> = { CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_UPSTREAM_SECRET_DRIFT: secret };
  const me = userInfo().username;

  /** The tenant default's ledger entries, through the running server's admin endpoint. */
  const ledger = async (): Promise<Entry[]> => {
    const exported = await runToExit(["ledger", "export"], { CHAOS_CORE_DATA_DIR: dir }, 30_000);
    expect(exported.code, exported.stderr).toBe(0);
    return exported.stdout
      .split("\n")
      .filter((l) => l.trim() !== "")
      .map((l) => JSON.parse(l) as Entry)
      .filter((l) => l.type === "entry" && String(l.event.type).startsWith("upstream."));
  };
  const drifts = async (state: string) => (await ledger()).filter((e) => e.event.type === "upstream.drift" && e.event.state === state && e.event.tool === "echo");
  /** The verified upstream.drift events, first delivery of each, in ledger order. */
  const events = () =>
    [...new Map(receiver.received.map((r) => [r.id, r])).values()]
      .map((r) => new Webhook(webhookSecret).verify(r.body, r.headers) as Event)
      .filter((e) => e.type === "upstream.drift")
      .sort((a, b) => Number(a.data.ledger_seq) - Number(b.data.ledger_seq));
  /** The digest upstreams.lock states for a tool now. */
  const lockedDigest = (tool: string) =>
    (JSON.parse(readFileSync(join(dir, "upstreams.lock"), "utf8")) as { upstreams: Record<string, { tools: Record<string, { digest: string }> }> }).upstreams.changing!.tools[tool]!.digest;

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    Object.assign(env, { CHAOS_CORE_WEBHOOK_URL: receiver.url, CHAOS_CORE_WEBHOOK_SECRET: webhookSecret, CHAOS_CORE_WEBHOOK_RETRY_SECONDS: "0.2,0.2" });
    await seedDataDir(dir);
    writeFileSync(definitions, JSON.stringify(tools("Echoes its message back")));
    writeFileSync(
      join(dir, "upstreams.json"),
      JSON.stringify({ upstreams: [{ name: "changing", command: process.execPath, args: [CHANGING, definitions], env: { DRIFT_TOKEN: { env: "CHAOS_CORE_UPSTREAM_SECRET_DRIFT" } } }] }),
    );
    // No server runs yet: the command records the pin on the data directory's own stores.
    const locked = await runToExit(["upstreams", "lock"], env, 60_000);
    expect(locked.code, locked.stderr).toBe(0);
    expect(locked.stdout).toMatch(/recorded in the audit ledger \(tenant default\): changing as entry \d+/);
    serve = await startServe(env);
    client = await httpClient(serve.url);
  }, 120_000);

  afterAll(async () => {
    await client?.close().catch(() => {});
    await serve?.stop();
    await receiver?.close();
    removeDir(dir);
  });

  it("records the operator's lock: who ran it, the upstream, each tool's digest; the next server sends its event", async () => {
    const pinned = (await ledger()).filter((e) => e.event.type === "upstream.pinned");
    expect(pinned).toHaveLength(1);
    expect(pinned[0]).toMatchObject({
      principal: "operator",
      event: {
        upstream: "changing",
        by: me,
        tools: [
          { tool: "echo", change: "added", digest: lockedDigest("echo") },
          { tool: "ping", change: "added", digest: lockedDigest("ping") },
        ],
      },
    });
    await receiver.waitFor("the lock's upstream.drift event", () => events().some((e) => e.data.state === "pinned"), 20_000);
    expect(events().find((e) => e.data.state === "pinned")!.data).toMatchObject({ tenant: "default", ledger_seq: pinned[0]!.seq, upstream: "changing", by: me });
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
    // Recorded once, served: the verdict and what changed.
    const cosmetic = await eventually("the cosmetic change's entry", async () => ((await drifts("served")).length > 0 ? drifts("served") : undefined));
    expect(cosmetic).toHaveLength(1);
    expect(cosmetic[0]!.event).toMatchObject({ verdict: "COSMETIC", sections: ["surface"], pinned_digest: lockedDigest("echo") });
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

  it("records the quarantine once in the ledger, with its verdict, sections and digests, and sends it signed to the webhook", async () => {
    const entries = await eventually("the quarantine's entry", async () => ((await drifts("quarantined")).length > 0 ? drifts("quarantined") : undefined));
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({
      principal: "chaos-core",
      event: { type: "upstream.drift", upstream: "changing", tool: "echo", state: "quarantined", verdict: "BREAKING", sections: ["surface"], pinned_digest: lockedDigest("echo") },
    });
    expect(entries[0]!.event.live_digest).toMatch(/^sha256:[0-9a-f]{64}$/);
    await receiver.waitFor("the quarantine's webhook event", () => events().some((e) => e.data.state === "quarantined"));
    expect(events().find((e) => e.data.state === "quarantined")).toMatchObject({
      type: "upstream.drift",
      data: { tenant: "default", ledger_seq: entries[0]!.seq, upstream: "changing", tool: "echo", verdict: "BREAKING", sections: ["surface"], pinned_digest: lockedDigest("echo") },
    });
    // The upstream announces the same list again: the same quarantine is not recorded again.
    writeFileSync(definitions, JSON.stringify(tools("Echoes the message it is given", ["message", "to"])));
    await new Promise((r) => setTimeout(r, 1_500));
    expect(await listed()).not.toContain("changing__echo");
    expect(await drifts("quarantined")).toHaveLength(1);
  });

  it("serves it again once an operator approves the new contract", async () => {
    const approved = await runToExit(["upstreams", "approve", "changing", "echo"], env, 60_000);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(/^approved changing\/echo \(BREAKING\), pinned in .*; recorded in the audit ledger as entry \d+\n/);
    await eventually("changing__echo to be listed again", async () => ((await listed()).includes("changing__echo") ? true : undefined));
    const answered = await call("changing__echo", { message: "four", to: "you" });
    expect(answered.isError).toBeFalsy();
    expect(JSON.stringify(answered.content)).toContain("four");
    // Served as approved, not as read at start: the session that listed the old tool lists the new
    // schema, and a call the old pin accepted is refused by the new one, naming the field.
    const echo = (await client.listTools()).tools.find((t) => t.name === "changing__echo");
    expect(echo?.inputSchema.required).toEqual(["message", "to"]);
    const step = (await client.callTool({ name: "chaoscore_execute", arguments: { steps: [{ id: "s1", capability: "changing.echo", input: { message: "five" } }] } })) as CallToolResult;
    const result = (step.structuredContent as { results: Array<{ status: string; error?: { code: string; message: string } }> }).results[0];
    expect(result).toMatchObject({ status: "failed", error: { code: "invalid_argument" } });
    expect(result!.error!.message).toMatch(/\bto\b.*required|required.*\bto\b/);
  });

  it("records the approval (who, the tool, its new digest) through the running server, then the release; both reach the webhook", async () => {
    const approvals = (await ledger()).filter((e) => e.event.type === "upstream.approved");
    expect(approvals).toHaveLength(1);
    expect(approvals[0]).toMatchObject({
      principal: "operator",
      event: { upstream: "changing", tool: "echo", verdict: "BREAKING", by: me, tools: [{ tool: "echo", change: "changed", digest: lockedDigest("echo") }] },
    });
    const released = await eventually("the release's entry", async () => ((await drifts("released")).length > 0 ? drifts("released") : undefined));
    expect(released).toHaveLength(1);
    expect(released[0]!.event).toMatchObject({ reason: "re-pinned", pinned_digest: lockedDigest("echo"), live_digest: lockedDigest("echo") });
    expect(released[0]!.seq).toBeGreaterThan(approvals[0]!.seq);
    await receiver.waitFor("the approval's and the release's webhook events", () => ["approved", "released"].every((s) => events().some((e) => e.data.state === s)));
    expect(events().map((e) => e.data.state)).toEqual(["pinned", "served", "quarantined", "approved", "released"]);
    expect(events().find((e) => e.data.state === "approved")!.data).toMatchObject({ ledger_seq: approvals[0]!.seq, by: me, tool: "echo" });
  });

  it("keeps one verifiable chain (the command's entry and the server's), with no secret of the declaration in any entry or event", async () => {
    const verified = await runToExit(["ledger", "verify"], { CHAOS_CORE_DATA_DIR: dir }, 30_000);
    expect(verified.code, verified.stdout + verified.stderr).toBe(0);
    const exported = await runToExit(["ledger", "export"], { CHAOS_CORE_DATA_DIR: dir }, 30_000);
    expect(exported.stdout).toContain("upstream.drift");
    for (const text of [exported.stdout, ...receiver.received.map((r) => r.body)]) {
      expect(text).not.toContain(secret);
      expect(text).not.toContain("DRIFT_TOKEN");
    }
  });
});
