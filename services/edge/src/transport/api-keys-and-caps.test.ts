import { randomBytes } from "node:crypto";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordingLogger } from "../../../../test/support/logger.js";
import { readToEnd } from "../../../../test/support/streams.js";
import { API_KEYS_RECHECK_MS, hashApiKey } from "../auth/api-keys.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import {
  httpClient,
  initializeBody,
  listTools,
  MCP_HEADERS,
  openSession,
  PROTOCOL_VERSION,
  readJsonRpc,
  rpc,
} from "../test-support/http.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { startHttpTransport, type RunningHttpTransport } from "./http.js";

const newKey = () => randomBytes(24).toString("base64url");
const auth = (key: string) => ({ authorization: `Bearer ${key}` });
const entry = (key: string, principal: string, tenant = "acme") => ({ tenant, principal, sha256: hashApiKey(key) });

const dir = mkdtempSync(join(tmpdir(), "edge-api-keys-"));
let services: TestServices;

beforeAll(async () => {
  services = await startTestServices("api_keys");
});

afterAll(async () => {
  await services?.close();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * How an operator's tooling writes a file: a temporary file renamed over it. Resolves once the
 * edit is as old as the edge promises to take in for every request (API_KEYS_RECHECK_MS).
 */
async function replaceFile(path: string, content: unknown): Promise<void> {
  writeFileSync(`${path}.tmp`, typeof content === "string" ? content : JSON.stringify(content));
  renameSync(`${path}.tmp`, path);
  await settled();
}

const settled = () => new Promise((r) => setTimeout(r, API_KEYS_RECHECK_MS + 10));

/** The JSON-RPC error message of a response. */
async function errorOf(res: Response): Promise<string> {
  return ((await readJsonRpc(res))?.error as { message: string } | undefined)?.message ?? "";
}

/** Opens the session's GET (SSE) stream; `ended()` says whether the server has closed it. */
async function openStream(url: string, sessionId: string, key: string): Promise<{ ended: () => boolean }> {
  const res = await fetch(url, {
    headers: { accept: "text/event-stream", "mcp-session-id": sessionId, "mcp-protocol-version": PROTOCOL_VERSION, ...auth(key) },
  });
  expect(res.status).toBe(200);
  return readToEnd(res);
}

async function initialize(url: string, key: string): Promise<Response> {
  return fetch(url, { method: "POST", headers: { ...MCP_HEADERS, ...auth(key) }, body: JSON.stringify(initializeBody()) });
}

async function eventually(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("an API keys file edited while the edge runs", () => {
  const keyA = newKey();
  const keyB = newKey();
  const file = join(dir, "api-keys.json");
  const { logger, lines } = recordingLogger();
  let edge: RunningHttpTransport;

  beforeAll(async () => {
    await replaceFile(file, [entry(keyA, "alice"), entry(keyB, "bob")]);
    edge = await startHttpTransport({ ...services.deps(createMemorySessionStore()), logger }, { port: 0, apiKeysFile: file });
  });

  afterAll(async () => {
    await edge?.close();
  });

  it("refuses a removed key on its next request once the edit is 100 ms old, on its open session and for a new one", async () => {
    const { client, transport } = await httpClient(edge.url, { headers: auth(keyA) });
    await client.listTools();
    const bobs = await openSession(edge.url, auth(keyB));

    await replaceFile(file, [entry(keyB, "bob")]);
    const onSession = await rpc(edge.url, transport.sessionId, listTools, auth(keyA));
    expect(onSession.status).toBe(401);
    expect((onSession.message?.error as { message: string }).message).toMatch(/API key is not valid/);
    await expect(client.listTools()).rejects.toThrow(/Unauthorized: the API key is not valid/);
    expect((await initialize(edge.url, keyA)).status).toBe(401);

    // The key that stayed keeps its session and can open new ones.
    expect((await rpc(edge.url, bobs, listTools, auth(keyB))).status).toBe(200);
    expect((await initialize(edge.url, keyB)).status).toBe(200);
    // The revoked identity's sessions are closed here too, streams included.
    await eventually(() => lines.some((l) => l["msg"] === "session closed: its API key was revoked"), "the session to close");
    await client.close();
  });

  it("refuses every key while the file is malformed, says so without naming the file, logs it once, and takes the fixed file", async () => {
    const keyC = newKey();
    const bobs = await openSession(edge.url, auth(keyB));
    // An operator removes a key and mistypes another entry in the same edit.
    await replaceFile(file, [entry(keyB, "bob"), { tenant: "acme", principal: "carol", sha256: "not-a-hash" }]);
    for (let i = 0; i < 3; i++) {
      const refused = await initialize(edge.url, keyB);
      expect(refused.status).toBe(401);
      const message = await errorOf(refused);
      expect(message).toMatch(/server's API key list cannot be read/);
      expect(message).not.toContain(dir);
    }
    expect((await rpc(edge.url, bobs, listTools, auth(keyB))).status).toBe(401);
    expect((await initialize(edge.url, keyC)).status).toBe(401);
    const rejected = lines.filter((l) => l["level"] === 50 && String(l["msg"]).includes("[1].sha256"));
    expect(rejected).toHaveLength(1);
    expect(String(rejected[0]?.["msg"])).toContain(`CHAOS_CORE_API_KEYS_FILE ${file}`);
    expect(String(rejected[0]?.["msg"])).toContain("every API key is refused");

    // A syntax error is refused the same way.
    await replaceFile(file, `[${JSON.stringify(entry(keyB, "bob"))},`);
    const broken = await initialize(edge.url, keyB);
    expect(broken.status).toBe(401);
    expect(await errorOf(broken)).toMatch(/server's API key list cannot be read/);
    expect(lines.filter((l) => l["level"] === 50 && String(l["msg"]).includes("cannot be read as JSON"))).toHaveLength(1);

    // The good file restores service without a restart, on the session opened before too.
    await replaceFile(file, [entry(keyB, "bob"), entry(keyC, "carol")]);
    expect((await rpc(edge.url, bobs, listTools, auth(keyB))).status).toBe(200);
    expect((await initialize(edge.url, keyC)).status).toBe(200);
  });

  it("refuses every key once the file lists none or is deleted, and serves again when a good file is back", async () => {
    const bobs = await openSession(edge.url, auth(keyB));
    await replaceFile(file, []);
    const emptied = await initialize(edge.url, keyB);
    expect(emptied.status).toBe(401);
    expect(await errorOf(emptied)).toMatch(/API key is not valid/);
    expect((await rpc(edge.url, bobs, listTools, auth(keyB))).status).toBe(401);

    await replaceFile(file, [entry(keyB, "bob")]);
    expect((await initialize(edge.url, keyB)).status).toBe(200);
    // Emptying the list revoked every key: the session opened before it has ended.
    expect((await rpc(edge.url, bobs, listTools, auth(keyB))).status).toBe(404);

    rmSync(file);
    await settled();
    expect((await initialize(edge.url, keyB)).status).toBe(401);
    expect(lines.filter((l) => String(l["msg"]).includes(`${file} is missing: every API key is refused`))).toHaveLength(1);

    await replaceFile(file, [entry(keyB, "bob")]);
    expect((await initialize(edge.url, keyB)).status).toBe(200);
  });

  it("ends the sessions and streams a key opened when it is replaced by a new key for the same principal", async () => {
    const oldKey = newKey();
    const newerKey = newKey();
    await replaceFile(file, [entry(oldKey, "dave"), entry(newerKey, "dave")]);
    const opened = await openSession(edge.url, auth(oldKey));
    const stream = await openStream(edge.url, opened, oldKey);
    // Any key of the session's principal may use it while the key that opened it is in force.
    expect((await rpc(edge.url, opened, listTools, auth(newerKey))).status).toBe(200);
    const openedWithNewer = await openSession(edge.url, auth(newerKey));

    await replaceFile(file, [entry(newerKey, "dave")]);
    await eventually(stream.ended, "the stream the old key opened to close");
    expect((await rpc(edge.url, opened, listTools, auth(oldKey))).status).toBe(401);
    const onOld = await rpc(edge.url, opened, listTools, auth(newerKey));
    expect(onOld.status).toBe(404);
    expect((onOld.message?.error as { message: string }).message).toBe("Session not found");
    expect(lines.some((l) => l["msg"] === "session closed: its API key was revoked" && l["session"] === opened)).toBe(true);
    // The session the new key opened, and new ones, carry on.
    expect((await rpc(edge.url, openedWithNewer, listTools, auth(newerKey))).status).toBe(200);
    expect((await initialize(edge.url, newerKey)).status).toBe(200);
  });
});

describe("sessions per API key", () => {
  const keyA = newKey();
  const keyB = newKey();
  let edge: RunningHttpTransport;

  beforeAll(async () => {
    edge = await startHttpTransport(services.deps(createMemorySessionStore()), {
      port: 0,
      apiKeys: [entry(keyA, "ci-bot"), entry(keyB, "ops")],
      maxSessionsPerKey: 3,
    });
  });

  afterAll(async () => {
    await edge?.close();
  });

  it("refuses a key's session beyond the cap with 429 naming it, while another key opens its own", async () => {
    const open = [];
    for (let i = 0; i < 3; i++) open.push(await openSession(edge.url, auth(keyA)));
    const refused = await initialize(edge.url, keyA);
    expect(refused.status).toBe(429);
    expect(refused.headers.get("mcp-session-id")).toBeNull();
    const message = ((await readJsonRpc(refused))?.error as { message: string }).message;
    expect(message).toContain("already holds 3 open MCP sessions");
    expect(message).toContain("CHAOS_CORE_MAX_SESSIONS_PER_KEY");
    expect((await initialize(edge.url, keyB)).status).toBe(200);

    // The sessions it holds keep working, and ending one frees a place.
    expect((await rpc(edge.url, open[0], listTools, auth(keyA))).status).toBe(200);
    const ended = await fetch(edge.url, { method: "DELETE", headers: { ...MCP_HEADERS, ...auth(keyA), "mcp-session-id": open[0]! } });
    expect(ended.status).toBe(200);
    expect((await initialize(edge.url, keyA)).status).toBe(200);
  });
});
