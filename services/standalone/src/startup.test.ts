import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { afterAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { createLogger, DEFAULT_TOOLSETS } from "@chaos-core/kit";
import { MRTR_KEYRING_FILE, newMrtrKeyringFile, runStdioTransport, TOOL_DEFINITIONS } from "@chaos-core/edge";
import { loadStandaloneConfig } from "./config.js";
import { startRuntime, type StartingRuntime } from "./startup.js";

const dirs: string[] = [];

/** What a tenant whose operator chose no toolsets is listed (finance-reference is opt-in). */
const DEFAULT_TOOL_NAMES = TOOL_DEFINITIONS.filter((t) => (DEFAULT_TOOLSETS as readonly string[]).includes(t.toolset)).map((t) => t.name).sort();
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), "chaos-core-startup-"));
  dirs.push(dir);
  return dir;
}

/** A latch the start-up waits on just before its database opens. */
function latch() {
  let release!: () => void;
  const opened = new Promise<void>((resolve) => (release = resolve));
  return { wait: () => opened, release };
}

async function start(
  dir: string,
  beforeDatabase?: () => Promise<void>,
  mrtr?: { keysFile?: string; ttlSeconds: number },
  openOnDemand = false,
): Promise<StartingRuntime> {
  const config = loadStandaloneConfig({ CHAOS_CORE_DATA_DIR: dir, LOG_LEVEL: "silent" });
  return startRuntime(config, createLogger("startup-test", "silent"), {
    version: "0.0.0",
    sessionTtlSeconds: 600,
    ...(beforeDatabase ? { beforeDatabase } : {}),
    ...(mrtr ? { mrtr } : {}),
    ...(openOnDemand ? { openOnDemand } : {}),
  });
}

/**
 * A real SDK client on the stdio transport, over in-process pipes instead of a child's
 * stdin/stdout, with the runtime's tenant registry as `chaos-core stdio` gives it.
 */
async function stdioClient(starting: StartingRuntime): Promise<{ client: Client; close: () => Promise<void> }> {
  const toServer = new PassThrough();
  const fromServer = new PassThrough();
  const directory = starting.ready.then((runtime) => runtime.tenants.directory);
  directory.catch(() => {});
  const running = await runStdioTransport(starting.deps, { stdin: toServer, stdout: fromServer, directory });
  const client = new Client({ name: "startup-test", version: "1.0.0" });
  // Line-delimited JSON-RPC is the same in both directions: the SDK's stdio framing over the
  // other ends of the pipes is the client's transport.
  await client.connect(new StdioServerTransport(fromServer, toServer));
  return {
    client,
    close: async () => {
      await client.close();
      await running.close();
    },
  };
}

/** Whether a promise has settled by the time the event loop has turned a few times. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(
    () => (done = true),
    () => (done = true),
  );
  for (let i = 0; i < 20; i++) await new Promise((resolve) => setTimeout(resolve, 5));
  return done;
}

describe("a stdio server whose stores are still opening", () => {
  it("answers initialize, tools/list, prompts/list and ping at once, and a tool call once the stores are open", async () => {
    const hold = latch();
    const starting = await start(dataDir(), hold.wait);
    const { client, close } = await stdioClient(starting);
    try {
      // Connected means initialize was answered, with the database not yet opened.
      expect(client.getServerVersion()?.name).toBe("chaos-core");
      // The registry is not readable yet: the default toolsets, at once.
      const tools = await client.listTools();
      expect(tools.tools.map((t) => t.name).sort()).toEqual(DEFAULT_TOOL_NAMES);
      expect((await client.listPrompts()).prompts.length).toBeGreaterThan(0);
      await client.ping();
      expect(await settled(starting.ready)).toBe(false);

      const recall = client.callTool({ name: "chaoscore_recall", arguments: { key: "startup:k" } });
      expect(await settled(recall)).toBe(false);

      hold.release();
      await starting.ready;
      const result = await recall;
      expect(result.isError).toBeFalsy();
      expect(result.structuredContent).toMatchObject({ items: [] });
    } finally {
      await close();
      await starting.close();
    }
  });

  it("answers the calls waiting for a database that does not open with `unavailable` naming it", async () => {
    const dir = dataDir();
    // A database directory that is there but damaged: PGlite refuses to start on it.
    mkdirSync(join(dir, "pg"));
    writeFileSync(join(dir, "pg", "PG_VERSION"), "18\n");
    const hold = latch();
    const starting = await start(dir, hold.wait);
    const { client, close } = await stdioClient(starting);
    try {
      const recall = client.callTool({ name: "chaoscore_recall", arguments: { key: "startup:k" } });
      expect(await settled(recall)).toBe(false);
      hold.release();
      await expect(starting.ready).rejects.toThrow(/could not open its stores/);

      const result = await recall;
      expect(result.isError).toBe(true);
      const error = (result.structuredContent as { error: { code: string; message: string } }).error;
      expect(error.code).toBe("unavailable");
      expect(error.message).toContain(`the embedded database in ${join(dir, "pg")} did not open`);
      // What needs no store still answers while the process winds down.
      expect((await client.listTools()).tools.map((t) => t.name).sort()).toEqual(DEFAULT_TOOL_NAMES);
    } finally {
      await close();
      await starting.close();
    }
  });
});

describe("a runtime that opens its stores on demand (chaos-core stdio)", () => {
  it("opens nothing until asked, answers server/discover meanwhile, and closed unopened gives the directory back at once", async () => {
    const dir = dataDir();
    const starting = await start(dir, undefined, undefined, true);
    expect(starting.opened).toBe(false);
    // A version probe's only request: answered, and still nothing opened.
    const toServer = new PassThrough();
    const fromServer = new PassThrough();
    let demanded = 0;
    const running = await runStdioTransport(starting.deps, { stdin: toServer, stdout: fromServer, onDemand: () => demanded++ });
    const answer = new Promise<string>((resolve) => fromServer.once("data", (d: Buffer) => resolve(d.toString())));
    const meta = {
      "io.modelcontextprotocol/protocolVersion": "2026-07-28",
      "io.modelcontextprotocol/clientCapabilities": {},
    };
    toServer.write(`${JSON.stringify({ jsonrpc: "2.0", id: 1, method: "server/discover", params: { _meta: meta } })}\n`);
    expect(JSON.parse(await answer)).toMatchObject({ id: 1, result: { supportedVersions: ["2026-07-28"] } });
    expect(demanded).toBe(0);
    expect(await settled(starting.ready)).toBe(false);
    await running.close();
    await starting.close();
    await expect(starting.ready).rejects.toThrow(/stopped before it opened its stores/);
    // No database, no policy file: only the keyring, which is read before anything answers.
    expect(existsSync(join(dir, "pg"))).toBe(false);
    expect(existsSync(join(dir, "policy.json"))).toBe(false);
    expect(existsSync(join(dir, ".chaos-core.lock"))).toBe(false);
    // The directory is free: the next process takes it and opens a fresh database.
    const next = await start(dir);
    try {
      expect(next.opened).toBe(true);
      const runtime = await next.ready;
      expect(runtime.stores.database).toContain(join(dir, "pg"));
    } finally {
      await next.close();
    }
    expect(existsSync(join(dir, "pg", "PG_VERSION"))).toBe(true);
  });

  it("opens once asked; open() twice opens once, and close waits for the stores it opened", async () => {
    const dir = dataDir();
    const starting = await start(dir, undefined, undefined, true);
    try {
      starting.open();
      starting.open();
      expect(starting.opened).toBe(true);
      const runtime = await starting.ready;
      expect(runtime.stores.policy).toBe(`${join(dir, "policy.json")} (tenant default; other tenants in the database)`);
    } finally {
      await starting.close();
    }
    expect(existsSync(join(dir, ".chaos-core.lock"))).toBe(false);
  });
});

describe("the key that seals multi-round-trip requestState", () => {
  it("is generated into <data dir>/mrtr-keyring.json (0600) on first run, before the stores open, and reused on restart", async () => {
    const dir = dataDir();
    const path = join(dir, MRTR_KEYRING_FILE);
    const hold = latch();
    const first = await start(dir, hold.wait, { ttlSeconds: 900 });
    let kid: string;
    try {
      // There before anything answers, with the database still held shut.
      expect(statSync(path).mode & 0o777).toBe(0o600);
      kid = first.deps.mrtrKeyring!.activeKid;
      expect((JSON.parse(readFileSync(path, "utf8")) as { active: string }).active).toBe(kid);
      expect(first.deps.mrtrTtlSeconds).toBe(900);
      hold.release();
      const runtime = await first.ready;
      // serve hands the ready runtime's deps to the HTTP transport: the same keyring.
      expect(runtime.deps.mrtrKeyring).toBe(first.deps.mrtrKeyring);
      expect(runtime.stores.mrtrKey).toBe(`${kid} (generated in the data directory)`);
    } finally {
      await first.close();
    }
    const before = readFileSync(path, "utf8");
    const again = await start(dir);
    try {
      expect(again.deps.mrtrKeyring!.activeKid).toBe(kid);
      expect(readFileSync(path, "utf8")).toBe(before);
    } finally {
      await again.close();
    }
  });

  it("is the operator's file when CHAOS_CORE_MRTR_KEYS_FILE names one; a bad one stops the start, naming it, and frees the directory", async () => {
    const dir = dataDir();
    const keysFile = join(dataDir(), "operator-mrtr.json");
    writeFileSync(keysFile, JSON.stringify(newMrtrKeyringFile("ops-1")));
    const starting = await start(dir, undefined, { keysFile, ttlSeconds: 600 });
    try {
      expect(starting.deps.mrtrKeyring!.activeKid).toBe("ops-1");
      expect(existsSync(join(dir, MRTR_KEYRING_FILE))).toBe(false);
      expect((await starting.ready).stores.mrtrKey).toBe(`ops-1 (${keysFile})`);
    } finally {
      await starting.close();
    }
    writeFileSync(keysFile, JSON.stringify({ active: "ops-1", keys: { "ops-1": { secret: "dG9vIHNob3J0" } } }));
    await expect(start(dir, undefined, { keysFile, ttlSeconds: 600 })).rejects.toThrow(/mrtr keyring .*operator-mrtr\.json: keys\.ops-1\.secret: must decode to at least 32 bytes/);
    // The lock was given back: the next start takes the directory.
    const next = await start(dir);
    await next.close();
    expect(existsSync(join(dir, MRTR_KEYRING_FILE))).toBe(true);
  });
});
