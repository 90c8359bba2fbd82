import { randomBytes } from "node:crypto";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordingLogger } from "../../../../test/support/logger.js";
import { hashApiKey } from "../auth/api-keys.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { httpClient, initializeBody, listTools, MCP_HEADERS, openSession, readJsonRpc, rpc } from "../test-support/http.js";
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

/** How an operator's tooling writes a file: a temporary file renamed over it. */
function replaceFile(path: string, content: unknown): void {
  writeFileSync(`${path}.tmp`, typeof content === "string" ? content : JSON.stringify(content));
  renameSync(`${path}.tmp`, path);
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
    replaceFile(file, [entry(keyA, "alice"), entry(keyB, "bob")]);
    edge = await startHttpTransport({ ...services.deps(createMemorySessionStore()), logger }, { port: 0, apiKeysFile: file });
  });

  afterAll(async () => {
    await edge?.close();
  });

  it("refuses a removed key on its very next request, on its open session and for a new one", async () => {
    const { client, transport } = await httpClient(edge.url, { headers: auth(keyA) });
    await client.listTools();
    const bobs = await openSession(edge.url, auth(keyB));

    replaceFile(file, [entry(keyB, "bob")]);
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

  it("keeps the last good keys through a malformed edit, logs it once naming the file, and takes the fixed file", async () => {
    const keyC = newKey();
    replaceFile(file, [entry(keyB, "bob"), { tenant: "acme", principal: "carol", sha256: "not-a-hash" }]);
    for (let i = 0; i < 3; i++) expect((await initialize(edge.url, keyB)).status).toBe(200);
    expect((await initialize(edge.url, keyC)).status).toBe(401);
    const rejected = lines.filter((l) => l["level"] === 50 && String(l["msg"]).includes("[1].sha256"));
    expect(rejected).toHaveLength(1);
    expect(String(rejected[0]?.["msg"])).toContain(`CHAOS_CORE_API_KEYS_FILE ${file}`);
    expect(String(rejected[0]?.["msg"])).toContain("stay in force");

    replaceFile(file, [entry(keyC, "carol")]);
    expect((await initialize(edge.url, keyC)).status).toBe(200);
    expect((await initialize(edge.url, keyB)).status).toBe(401);
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
