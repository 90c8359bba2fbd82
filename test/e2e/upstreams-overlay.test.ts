import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { userInfo } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { httpClient, removeDir, ROOT, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { eventually } from "../support/eventually.js";

/**
 * Issue 32 item 2: where `upstreams.lock` is read-only (a Kubernetes ConfigMap mount; here a
 * directory made read-only), `chaos-core upstreams approve` records the approval as an overlay in
 * the tenant registry (tenant default), ledgered first with `overlay: true`; the running server
 * serves the approved contract over the lock's pin — the tool leaves quarantine (`re-pinned`) with
 * the new schema — and once the lock is updated to the same contract, it is still served and the
 * approval is moot.
 *
 * As root (CI containers) a directory's mode does not stop a write, so the command is told
 * `--overlay`; as any other user the read-only directory itself (EACCES) makes it an overlay.
 */

const CHANGING = join(ROOT, "test/support/upstreams/changing-server.mjs");
const ROOT_USER = process.getuid?.() === 0;
const object = (properties: Record<string, unknown>, required: string[]) => ({ type: "object", properties, required });
const tools = (echoRequired: string[]) => ({
  tools: [
    { name: "echo", description: "Echoes its message back", inputSchema: object({ message: { type: "string" }, to: { type: "string" } }, echoRequired), annotations: { readOnlyHint: true, openWorldHint: false } },
    { name: "ping", description: "Answers pong.", inputSchema: object({}, []), annotations: { readOnlyHint: true, openWorldHint: false } },
  ],
});

type Entry = { type: string; seq: number; principal: string; event: Record<string, unknown> };

describe("an approval where the upstreams lock is read-only", () => {
  const dir = tempDir("chaos-core-overlay-");
  const lockDir = join(dir, "mounted");
  const lockFile = join(lockDir, "upstreams.lock");
  const definitions = join(dir, "changing-tools.json");
  const env: Record<string, string> = { CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_UPSTREAMS_LOCK: lockFile };
  const overlayFlag = ROOT_USER ? ["--overlay"] : [];
  const me = userInfo().username;
  let serve: ServeProcess;
  let client: Client;

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
  const lockedDigest = (tool: string) => (JSON.parse(readFileSync(lockFile, "utf8")) as { upstreams: Record<string, { tools: Record<string, { digest: string }> }> }).upstreams.changing!.tools[tool]!.digest;
  const listed = async () => (await client.listTools()).tools;
  const call = async (name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallToolResult;

  beforeAll(async () => {
    await seedDataDir(dir);
    mkdirSync(lockDir);
    writeFileSync(definitions, JSON.stringify(tools(["message"])));
    writeFileSync(join(dir, "upstreams.json"), JSON.stringify({ upstreams: [{ name: "changing", command: process.execPath, args: [CHANGING, definitions] }] }));
    const locked = await runToExit(["upstreams", "lock"], env, 60_000);
    expect(locked.code, locked.stderr).toBe(0);
    // The lock is mounted read-only from now on.
    chmodSync(lockFile, 0o444);
    chmodSync(lockDir, 0o555);
    serve = await startServe({ ...env, LOG_LEVEL: "info" });
    client = await httpClient(serve.url);
  }, 120_000);

  afterAll(async () => {
    chmodSync(lockDir, 0o755);
    await client?.close().catch(() => {});
    await serve?.stop();
    removeDir(dir);
  });

  let pinnedDigest: string;
  let approvedSeq: number;

  it("quarantines a tool that drifts, as anywhere", async () => {
    pinnedDigest = lockedDigest("echo");
    expect((await listed()).map((t) => t.name)).toContain("changing__echo");
    // The first call starts the upstream: from then on its list_changed is heard.
    expect((await call("changing__echo", { message: "zero" })).isError).toBeFalsy();
    writeFileSync(definitions, JSON.stringify(tools(["message", "to"])));
    await eventually("changing__echo to leave the list", async () => ((await listed()).some((t) => t.name === "changing__echo") ? undefined : true));
    expect((await call("changing__echo", { message: "one", to: "you" })).isError).toBe(true);
  });

  it.skipIf(ROOT_USER)("reads the registry for diff by itself where the lock is read-only (EACCES), with no overlay yet", async () => {
    const diff = await runToExit(["upstreams", "diff", "changing"], env, 60_000);
    expect(diff.code, diff.stderr).toBe(0);
    expect(diff.stdout).toMatch(/^changing: BREAKING\n/m);
  });

  it("records the approval as an overlay, ledgered first (overlay: true), leaving the lock as it was", async () => {
    const approved = await runToExit(["upstreams", "approve", "changing", "echo", ...overlayFlag], env, 60_000);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(
      ROOT_USER
        ? /^approved changing\/echo \(BREAKING\) as an overlay in the tenant registry \(tenant default, the server running on .*\): --overlay; recorded in the audit ledger as entry \d+\n/
        : /^approved changing\/echo \(BREAKING\) as an overlay in the tenant registry \(tenant default, .*\): the lock is read-only here: .*\(EACCES\); recorded in the audit ledger as entry \d+\n/,
    );
    expect(approved.stdout).toMatch(/the overlay holds until the lock is updated: run chaos-core upstreams lock/);
    expect(lockedDigest("echo")).toBe(pinnedDigest);

    const entries = (await ledger()).filter((e) => e.event.type === "upstream.approved");
    expect(entries).toHaveLength(1);
    expect(entries[0]).toMatchObject({ principal: "operator", event: { upstream: "changing", tool: "echo", verdict: "BREAKING", by: me, overlay: true, tools: [{ tool: "echo", change: "changed" }] } });
    approvedSeq = entries[0]!.seq;
  });

  it("serves the approved contract at once: back in the list with the new schema, released re-pinned", async () => {
    const echo = await eventually("changing__echo to be listed again", async () => (await listed()).find((t) => t.name === "changing__echo"));
    expect(echo.inputSchema.required).toEqual(["message", "to"]);
    const answered = await call("changing__echo", { message: "two", to: "you" });
    expect(answered.isError).toBeFalsy();
    expect(JSON.stringify(answered.content)).toContain("two");
    const released = await eventually("the release's entry", async () => ((await drifts("released")).length > 0 ? drifts("released") : undefined));
    expect(released).toHaveLength(1);
    expect(released[0]!.event).toMatchObject({ reason: "re-pinned" });
    expect(released[0]!.seq).toBeGreaterThan(approvedSeq);
    const approvedDigest = ((await ledger()).find((e) => e.seq === approvedSeq)!.event.tools as Array<{ digest: string }>)[0]!.digest;
    expect(released[0]!.event.pinned_digest).toBe(approvedDigest);
    expect(serve.stderr()).toMatch(/an approval in the registry is served over the read-only lock until the lock is updated/);

    const diff = await runToExit(["upstreams", "diff", "changing", ...overlayFlag], env, 60_000);
    expect(diff.code, diff.stderr).toBe(0);
    expect(diff.stdout).toMatch(/^overlay changing\/echo sha256:\S+ \(replaces sha256:\S+, approved by .+\): in force until the lock is updated\n/m);
    expect(diff.stdout).toMatch(/^changing: no change since it was pinned and approved\n/m);
  });

  it("keeps serving it once the lock is updated to the same contract: the approval is moot", async () => {
    chmodSync(lockDir, 0o755);
    chmodSync(lockFile, 0o644);
    const locked = await runToExit(["upstreams", "lock"], env, 60_000);
    expect(locked.code, locked.stderr).toBe(0);
    const approvedDigest = ((await ledger()).find((e) => e.seq === approvedSeq)!.event.tools as Array<{ digest: string }>)[0]!.digest;
    expect(lockedDigest("echo")).toBe(approvedDigest);
    await eventually("the server to read the updated lock", async () => (/the lock pins what the approval in the registry approved: the approval is moot/.test(serve.stderr()) ? true : undefined));
    const echo = (await listed()).find((t) => t.name === "changing__echo");
    expect(echo?.inputSchema.required).toEqual(["message", "to"]);
    expect((await call("changing__echo", { message: "three", to: "you" })).isError).toBeFalsy();
    // Nothing was quarantined or released again by the lock catching up.
    expect(await drifts("quarantined")).toHaveLength(1);
    expect(await drifts("released")).toHaveLength(1);
    const diff = await runToExit(["upstreams", "diff", "changing", "--overlay"], env, 60_000);
    expect(diff.stdout).toMatch(/^overlay changing\/echo .*: moot: the lock pins it now\n/m);
    expect(diff.stdout).toMatch(/^changing: no change since it was pinned\n/m);
  });
});
