import { createHash, createPublicKey, randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { ContextSigner, createGrpcClient } from "@chaos-core/kit";
import { TenantAdminService } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConsoleBrowser } from "../support/console-client.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { rpc } from "../support/mcp-http.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import {
  allStarted,
  httpClient,
  removeDir,
  runToExit,
  startServe,
  startServiceMain,
  stopProcess,
  tempDir,
  type ServeProcess,
  type ServiceMain,
} from "../support/processes.js";
import { TEST_REDIS_URL } from "../support/redis.js";
import { eventually, listenStream } from "../support/streams.js";

// Issue 13, "What must be shown": tenants administered (chaos-core tenants / keys), operator-issued
// keys hashed and shown once, several tenants on the embedded stores of one standalone, and a
// revoked key or a disabled tenant refused on the very next request, mid-session — on one process
// and across two processes sharing Postgres and Redis; the cluster's admin gRPC API.

const tag = randomBytes(3).toString("hex");
const call = (c: Client, name: string, args: Record<string, unknown>) => c.callTool({ name, arguments: args });

/** Runs the CLI and returns its stdout, failing with its stderr when it does not exit 0. */
async function cli(args: string[], env: Record<string, string | undefined>): Promise<string> {
  const r = await runToExit(args, env);
  expect(r.code, `chaos-core ${args.join(" ")}\n${r.stderr}`).toBe(0);
  return r.stdout;
}

/** The key `chaos-core keys create` printed (alone on stdout). */
async function newKey(tenant: string, principal: string, env: Record<string, string | undefined>, extra: string[] = []): Promise<string> {
  const out = (await cli(["keys", "create", "--tenant", tenant, "--principal", principal, ...extra], env)).trim();
  expect(out).toMatch(/^cc_[a-z2-7]{8}_[A-Za-z0-9_-]{43}$/);
  return out;
}

const keyId = (key: string) => key.split("_")[1]!;

/**
 * An SDK client over HTTP (a 2025-11-25 session) whose standalone GET stream — the one the client
 * opens after initialize to hear the server — is open; `streamEnded()` says when the server ended it.
 */
async function clientHoldingStream(url: string, key: string): Promise<{ client: Client; sessionId: string; streamEnded: () => boolean }> {
  let ended = false;
  let opened!: () => void;
  const open = new Promise<void>((resolve) => (opened = resolve));
  const watching = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const res = await fetch(input, init);
    if (init?.method !== "GET" || !res.ok || !res.body) return res;
    // The first GET's body, passed through unchanged, noting when the server ends it.
    const source = res.body.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { value, done } = await source.read();
          if (!done) return controller.enqueue(value);
          ended = true;
          controller.close();
        } catch (err) {
          ended = true;
          controller.error(err);
        }
      },
      cancel: (reason) => source.cancel(reason),
    });
    opened();
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${key}` } }, fetch: watching });
  const client = new Client({ name: "chaos-core-e2e-stream", version: "0.0.0" });
  // The transport reports the ended stream and its refused reconnects; the test looks at the stream itself.
  client.onerror = () => undefined;
  await client.connect(transport);
  await open;
  return { client, sessionId: transport.sessionId!, streamEnded: () => ended };
}

const listTools = { jsonrpc: "2.0", id: 2, method: "tools/list" };

describe("the tenant registry on one standalone's embedded stores", () => {
  const acme = `acme-${tag}`;
  const bravo = `bravo-${tag}`;
  let dir: string;
  let serve: ServeProcess;
  let env: Record<string, string>;
  let annKey: string;
  let bobKey: string;
  const clients: Client[] = [];
  const connect = async (key: string) => {
    const c = await httpClient(serve.url, { Authorization: `Bearer ${key}` });
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    dir = tempDir("chaos-core-registry-");
    await seedDataDir(dir);
    env = { CHAOS_CORE_DATA_DIR: dir };
    // Before the first start: the command opens the embedded database itself.
    await cli(["tenants", "create", acme, "--name", "Acme"], env);
    serve = await startServe(env);
    // While it runs: through its admin endpoint.
    await cli(["tenants", "create", bravo, "--memory-retention-days", "30"], env);
    annKey = await newKey(acme, "ann", env, ["--role", "approver"]);
    bobKey = await newKey(bravo, "bob", env);
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await serve?.stop();
    if (dir) removeDir(dir);
  });

  it("lists and shows tenants; a key is shown once and only its digest is kept", async () => {
    const listed = JSON.parse(await cli(["tenants", "list", "--json"], env)) as { tenants: Array<Record<string, unknown>> };
    expect(listed.tenants).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: acme, display_name: "Acme", status: "enabled" }),
        expect.objectContaining({ id: bravo, status: "enabled", settings: { memory_retention_days: 30, council_retention_days: 0, toolsets: [], rate_limits: null, ledger_policy: null } }),
      ]),
    );
    const keys = JSON.parse(await cli(["keys", "list", "--tenant", acme, "--json"], env)) as { keys: Array<Record<string, unknown>> };
    expect(keys.keys).toEqual([expect.objectContaining({ key_id: keyId(annKey), prefix: `cc_${keyId(annKey)}_`, principal: "ann", roles: ["approver"], status: "active" })]);
    expect(JSON.stringify(keys)).not.toContain(annKey.slice(12));
    const shown = JSON.parse(await cli(["tenants", "show", acme, "--json"], env)) as { active_keys: number };
    expect(shown.active_keys).toBe(1);
  });

  it("serves each key's tenant on the embedded stores, apart from the other", async () => {
    const ann = await connect(annKey);
    const bob = await connect(bobKey);
    expect((await call(ann, "chaoscore_remember", { key: "plan", value: "acme's plan" })).isError).toBeFalsy();
    const bobsView = await call(bob, "chaoscore_recall", { key: "plan" });
    expect(JSON.stringify(bobsView)).not.toContain("acme's plan");
    expect(JSON.stringify(await call(ann, "chaoscore_recall", { key: "plan" }))).toContain("acme's plan");
    // The key was used: its last-used time is set.
    const keys = JSON.parse(await cli(["keys", "list", "--tenant", acme, "--json"], env)) as { keys: Array<{ last_used_at: string | null }> };
    expect(keys.keys[0]!.last_used_at).not.toBeNull();
  });

  it("refuses a revoked key on its very next request, in the session it opened", async () => {
    const key = await newKey(acme, "carl", env);
    const carl = await connect(key);
    expect((await call(carl, "chaoscore_recall", { key: "plan" })).isError).toBeFalsy();
    await cli(["keys", "revoke", `cc_${keyId(key)}`, "--tenant", acme], env);
    await expect(call(carl, "chaoscore_recall", { key: "plan" })).rejects.toThrow(/401|revoked/);
    // Other keys of the tenant are untouched.
    const ann = await connect(annKey);
    expect((await call(ann, "chaoscore_recall", { key: "plan" })).isError).toBeFalsy();
  });

  it("refuses a disabled tenant's every key on the next request, and serves it again once enabled", async () => {
    const bob = await connect(bobKey);
    expect((await call(bob, "chaoscore_recall", { key: "x" })).isError).toBeFalsy();
    await cli(["tenants", "disable", bravo], env);
    await expect(call(bob, "chaoscore_recall", { key: "x" })).rejects.toThrow(/403|disabled/);
    await expect(connect(bobKey)).rejects.toThrow(/403|disabled/);
    // Another tenant is not affected.
    expect((await call(await connect(annKey), "chaoscore_recall", { key: "plan" })).isError).toBeFalsy();
    await cli(["tenants", "enable", bravo], env);
    expect((await call(bob, "chaoscore_recall", { key: "x" })).isError).toBeFalsy();
  });

  it("ends the streams a revoked key holds open and the sessions it opened within the re-check, whichever key carries on", async () => {
    const oldKey = await newKey(acme, "gil", env);
    const newerKey = await newKey(acme, "gil", env);
    const held = await clientHoldingStream(serve.url, oldKey);
    clients.push(held.client);
    const listening = await listenStream(serve.url, oldKey);
    const othersListening = await listenStream(serve.url, newerKey);
    try {
      // Any key of the session's principal may use it while the key that opened it is in force.
      expect((await rpc(serve.url, held.sessionId, listTools, { Authorization: `Bearer ${newerKey}` })).status).toBe(200);
      await cli(["keys", "revoke", keyId(oldKey), "--tenant", acme], env);
      await eventually(held.streamEnded, "the session's GET stream (SDK client) to end");
      await eventually(listening.ended, "the 2026-07-28 listen stream to end");
      // The session the revoked key opened has ended, as a keys file's revocation ends it.
      const onSession = await rpc(serve.url, held.sessionId, listTools, { Authorization: `Bearer ${newerKey}` });
      expect(onSession.status).toBe(404);
      await expect(call(held.client, "chaoscore_recall", { key: "plan" })).rejects.toThrow(/401|revoked/);
      // Another key's stream stays open.
      expect(othersListening.ended()).toBe(false);
    } finally {
      await Promise.all([listening.cancel(), othersListening.cancel()]);
    }
  });

  it("ends every open stream of a disabled tenant within the re-check, and serves its session again once enabled", async () => {
    const held = await clientHoldingStream(serve.url, bobKey);
    clients.push(held.client);
    const listening = await listenStream(serve.url, bobKey);
    const acmeListening = await listenStream(serve.url, annKey);
    await cli(["tenants", "disable", bravo], env);
    try {
      await eventually(held.streamEnded, "the disabled tenant's GET stream to end");
      await eventually(listening.ended, "the disabled tenant's listen stream to end");
      expect(acmeListening.ended()).toBe(false);
    } finally {
      await cli(["tenants", "enable", bravo], env);
      await Promise.all([listening.cancel(), acmeListening.cancel()]);
    }
    // Disabling ends what was open, not the session: it serves again once the tenant is enabled.
    expect((await call(held.client, "chaoscore_recall", { key: "x" })).isError).toBeFalsy();
  });

  it("holds a tenant's resource reads and prompts to the principal limit its registry entry sets, with a JSON-RPC error saying when to retry", async () => {
    const limitsFile = join(dir, "acme-principal-limits.json");
    writeFileSync(limitsFile, JSON.stringify({ principal: { requests: 3, per: "minute" } }));
    await cli(["tenants", "settings", acme, "--rate-limits", limitsFile], env);
    try {
      const ann = await connect(annKey);
      expect((await ann.readResource({ uri: "chaoscore://policy" })).contents).toHaveLength(1);
      expect((await ann.readResource({ uri: "chaoscore://capabilities" })).contents).toHaveLength(1);
      expect((await call(ann, "chaoscore_recall", { key: "plan" })).isError).toBeFalsy();
      const failure = (p: Promise<unknown>) => p.then(() => undefined, (e: unknown) => e as McpError);
      const read = await failure(ann.readResource({ uri: "chaoscore://policy" }));
      expect(read).toBeInstanceOf(McpError);
      expect(read).toMatchObject({ code: -32000, data: { code: "resource_exhausted" } });
      expect(read!.message).toMatch(/rate limit reached: the principal's limit \(3 per minute\); retry in \d+ s/);
      expect((read!.data as { retryAfterMs: number }).retryAfterMs).toBeGreaterThan(0);
      const prompt = await failure(ann.getPrompt({ name: "council_phase_brief", arguments: { sessionId: "any" } }));
      expect(prompt).toMatchObject({ code: -32000, data: { code: "resource_exhausted", retryAfterMs: expect.any(Number) as number } });
      // Listing is answered from memory, and is not limited.
      expect((await ann.listTools()).tools.length).toBeGreaterThan(0);
      // Another tenant is not held to acme's limits.
      const bob = await connect(bobKey);
      for (let i = 0; i < 4; i++) expect((await bob.readResource({ uri: "chaoscore://policy" })).contents).toHaveLength(1);
    } finally {
      await cli(["tenants", "settings", acme, "--rate-limits", "none"], env);
    }
  });

  it("lists the tenant that serves stdio and loopback like any other: an approver key for it needs no tenants create", async () => {
    const listed = JSON.parse(await cli(["tenants", "list", "--json"], env)) as { tenants: Array<Record<string, unknown>> };
    expect(listed.tenants).toEqual(expect.arrayContaining([expect.objectContaining({ id: "default", status: "enabled", display_name: "local user (stdio and loopback)" })]));
    const approverKey = await newKey("default", `ada-${tag}`, env, ["--role", "approver"]);
    // The local user (unauthenticated loopback) asks; the approver of its tenant answers.
    const policyFile = join(dir, "local-policy.json");
    writeFileSync(policyFile, JSON.stringify({ requireConfirmationFor: ["http.request", "memory.forget"] }));
    await cli(["policy", "set", policyFile], env);
    const local = await httpClient(serve.url);
    clients.push(local);
    const asked = (await call(local, "chaoscore_execute", { steps: [{ id: "f1", capability: "memory.forget", input: { key: "nothing" } }] }))
      .structuredContent as { results: Array<{ status: string; approval?: { approval_id: string } }> };
    expect(asked.results[0]!.status).toBe("pending_approval");
    const ada = await connect(approverKey);
    const answered = await call(ada, "chaoscore_approve", { approval_id: asked.results[0]!.approval!.approval_id, approve: true });
    expect(answered.isError, JSON.stringify(answered.structuredContent)).toBeFalsy();
    expect(answered.structuredContent).toMatchObject({ status: "approved" });
  });

  it("refuses an expired key and a key nobody issued, and never takes a cc_ key for the local user", async () => {
    // The CLI sets the expiry from its own clock while it runs, so it is at most 6 s after the key
    // is returned: the first call has those seconds (a busy machine needed more than the 3 it once
    // had), and the second waits until they have surely passed.
    const key = await newKey(acme, "dora", env, ["--expires-in", "6s"]);
    const expiredBy = Date.now() + 6_000 + 300;
    const dora = await connect(key);
    expect((await call(dora, "chaoscore_recall", { key: "plan" })).isError).toBeFalsy();
    await new Promise((r) => setTimeout(r, Math.max(0, expiredBy - Date.now())));
    await expect(call(dora, "chaoscore_recall", { key: "plan" })).rejects.toThrow(/401|expired/);
    // Unauthenticated loopback is the local user of tenant "default"; a made-up or mistyped
    // operator key is refused, not served as that user.
    await expect(connect(`cc_aaaaaaaa_${"x".repeat(43)}`)).rejects.toThrow(/Unauthorized: the API key is not valid/);
    await expect(connect(`${annKey}x`)).rejects.toThrow(/Unauthorized: the API key is not valid/);
  });

  it("signs an approver in to the approval console with a registry key, ends the session when the tenant is disabled, and refuses an agent's key", async () => {
    const browser = new ConsoleBrowser(new URL(serve.url).origin);
    const signedIn = await browser.signIn(annKey);
    expect(signedIn.status, signedIn.body).toBe(303);
    expect((await browser.get("/approvals")).status).toBe(200);
    const agent = new ConsoleBrowser(new URL(serve.url).origin);
    const refused = await agent.signIn(bobKey);
    expect(refused.status).toBe(403);
    expect(refused.body).toContain("does not hold the approver role");
    await cli(["tenants", "disable", acme], env);
    try {
      const after = await browser.get("/approvals");
      expect(after.status).toBe(401);
      expect(after.body).toContain("Your session ended");
      const again = await new ConsoleBrowser(new URL(serve.url).origin).signIn(annKey);
      expect(again.status).toBe(401);
      expect(again.body).toContain("is disabled by its operator");
    } finally {
      await cli(["tenants", "enable", acme], env);
    }
  });

  it("exports a tenant's data, applies retention, and deletes a tenant whose ledger records it", async () => {
    const ann = await connect(annKey);
    expect((await call(ann, "chaoscore_remember", { key: "exported", value: "acme's notes" })).isError).toBeFalsy();
    const out = join(dir, "acme-export");
    await cli(["tenants", "export", acme, "--out", out], env);
    const memory = readFileSync(join(out, "memory.jsonl"), "utf8");
    expect(memory).toContain("acme's notes");
    expect(memory).not.toContain("bravo");
    expect(JSON.parse(readFileSync(join(out, "tenant.json"), "utf8"))).toMatchObject({ tenant: acme, registered: true });
    expect(readFileSync(join(out, "tenant.json"), "utf8")).not.toContain(annKey.slice(12));
    expect(JSON.parse(readFileSync(join(out, "policy.json"), "utf8"))).toHaveProperty("document");
    // Against the server's own verifier key, as an auditor who recorded it would.
    const keyring = JSON.parse(readFileSync(join(dir, "ledger-keyring.json"), "utf8")) as { active: string; keys: Record<string, { private: string }> };
    const publicPem = createPublicKey(keyring.keys[keyring.active]!.private).export({ type: "spki", format: "pem" }).toString();
    const pemFile = join(dir, "ledger-public.pem");
    writeFileSync(pemFile, publicPem);
    const verified = await runToExit(["ledger", "verify", "--file", join(out, "ledger.jsonl"), "--public-key", pemFile], env);
    expect(verified.code, verified.stderr + verified.stdout).toBe(0);

    // bravo keeps memory 30 days: nothing written today goes.
    const retention = JSON.parse(await cli(["tenants", "retention", "--json"], env)) as { tenants: Array<{ tenant: string; memory_deleted: number }> };
    expect(retention.tenants).toContainEqual({ tenant: bravo, memory_deleted: 0, council_deleted: 0 });

    const doomed = `doomed-${tag}`;
    await cli(["tenants", "create", doomed], env);
    const key = await newKey(doomed, "hal", env);
    const hal = await connect(key);
    expect((await call(hal, "chaoscore_remember", { key: "secret", value: "to be forgotten" })).isError).toBeFalsy();
    const unconfirmed = await runToExit(["tenants", "delete", doomed], env);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.stderr).toContain(`--confirm ${doomed}`);
    const deleted = JSON.parse(await cli(["tenants", "delete", doomed, "--confirm", doomed, "--json"], env)) as Record<string, number>;
    expect(deleted).toMatchObject({ memory_items: 1, revoked_keys: 1 });
    await expect(call(hal, "chaoscore_recall", { key: "secret" })).rejects.toThrow(/was deleted/);
    const after = join(dir, "doomed-export");
    await cli(["tenants", "export", doomed, "--out", after], env);
    expect(readFileSync(join(after, "memory.jsonl"), "utf8")).not.toContain("to be forgotten");
    const ledger = readFileSync(join(after, "ledger.jsonl"), "utf8");
    expect(ledger).toContain('"tenant.deleted"');
    // The entries from before the deletion are kept.
    expect(ledger).toContain("memory.remember");
  });

  it("serves a tenant only the toolsets its operator enabled, from its next request", async () => {
    const ann = await connect(annKey);
    const names = async () => (await ann.listTools()).tools.map((t) => t.name);
    expect(await names()).toContain("council_init");
    await cli(["tenants", "settings", acme, "--toolsets", "core"], env);
    try {
      const listed = await names();
      expect(listed).toContain("chaoscore_recall");
      expect(listed).not.toContain("council_init");
      expect(listed).not.toContain("evaluate_spend_gate");
      const refused = (await call(ann, "council_init", { task: "anything" })) as { isError?: boolean; structuredContent?: { error?: { code?: string; message?: string } } };
      expect(refused.isError).toBe(true);
      expect(refused.structuredContent?.error).toMatchObject({ code: "permission_denied" });
      expect(refused.structuredContent?.error?.message).toContain("council toolset, which the operator has not enabled");
      // Another tenant keeps the default toolsets.
      expect((await (await connect(bobKey)).listTools()).tools.map((t) => t.name)).toContain("council_init");
    } finally {
      await cli(["tenants", "settings", acme, "--toolsets", "default"], env);
    }
    expect(await names()).toContain("council_init");
  });

  it("holds a tenant to the rate limits its registry entry sets, from its next request, and no other tenant", async () => {
    const limitsFile = join(dir, "acme-limits.json");
    writeFileSync(limitsFile, JSON.stringify({ tool: { requests: 2, per: "minute" } }));
    await cli(["tenants", "settings", acme, "--rate-limits", limitsFile], env);
    try {
      const ann = await connect(annKey);
      const results = [];
      for (let i = 0; i < 3; i++) results.push((await call(ann, "chaoscore_inspect", { what: "sessions" })) as { isError?: boolean; structuredContent?: { error?: { code?: string; message?: string } } });
      expect(results.slice(0, 2).every((r) => !r.isError)).toBe(true);
      expect(results[2]!.isError).toBe(true);
      expect(results[2]!.structuredContent?.error).toMatchObject({ code: "resource_exhausted" });
      expect(results[2]!.structuredContent?.error?.message).toMatch(/\(2 per minute\); retry in \d+ s/);
      const bob = await connect(bobKey);
      for (let i = 0; i < 3; i++) expect((await call(bob, "chaoscore_inspect", { what: "sessions" })).isError).toBeFalsy();
      // A document the registry cannot take is refused naming the field.
      writeFileSync(limitsFile, JSON.stringify({ tool: { requests: 2, per: "fortnight" } }));
      const bad = await runToExit(["tenants", "settings", acme, "--rate-limits", limitsFile], env);
      expect(bad.code).toBe(1);
      expect(bad.stderr).toMatch(/rateLimits.*tool\.per/);
    } finally {
      await cli(["tenants", "settings", acme, "--rate-limits", "none"], env);
    }
  });

  it("names the problem in bad input and exits 1 or 2", async () => {
    const dup = await runToExit(["tenants", "create", acme], env);
    expect(dup.code).toBe(1);
    expect(dup.stderr).toContain(`tenant "${acme}" already exists`);
    const reserved = await runToExit(["keys", "create", "--tenant", acme, "--principal", "operator"], env);
    expect(reserved.code).toBe(1);
    expect(reserved.stderr).toMatch(/principal: "operator" is reserved/);
    const toolset = await runToExit(["tenants", "settings", acme, "--toolsets", "core,bogus"], env);
    expect(toolset.code).toBe(1);
    expect(toolset.stderr).toMatch(/toolsets\[1\]: "bogus" is not a toolset/);
    const usage = await runToExit(["keys", "create", "--tenant", acme], env);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain("--principal is required");
  });
});

describe("revocation across two processes sharing Postgres and Redis, beside an API keys file", () => {
  const tenant = `shared-${tag}`;
  const filed = { tenant: `filed-${tag}`, principal: "fin", key: `file-key-${randomBytes(16).toString("hex")}` };
  const streaming = { tenant: `streaming-${tag}`, principal: "sam", key: `file-key-${randomBytes(16).toString("hex")}` };
  const listening = { tenant: `listening-${tag}`, principal: "lou", key: `file-key-${randomBytes(16).toString("hex")}` };
  const staying = { tenant: `listening-${tag}`, principal: "sue", key: `file-key-${randomBytes(16).toString("hex")}` };
  const fileEntry = (k: typeof filed) => ({ tenant: k.tenant, principal: k.principal, sha256: createHash("sha256").update(k.key).digest("hex") });
  let keysFile: string;
  let db: TestDatabase;
  let dirs: string[];
  let one: ServeProcess;
  let two: ServeProcess;
  let env: Record<string, string>;
  const clients: Client[] = [];

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_registry");
    dirs = [tempDir("chaos-core-registry-1-"), tempDir("chaos-core-registry-2-")];
    // The bootstrap file beside the registry: its keys work, and the registry's status binds them too.
    keysFile = join(dirs[0]!, "api-keys.json");
    writeFileSync(keysFile, JSON.stringify([filed, streaming, listening, staying].map(fileEntry)));
    env = { DATABASE_URL: db.url, REDIS_URL: TEST_REDIS_URL, CHAOS_CORE_API_KEYS_FILE: keysFile };
    [one, two] = await allStarted([startServe({ ...env, CHAOS_CORE_DATA_DIR: dirs[0]! }), startServe({ ...env, CHAOS_CORE_DATA_DIR: dirs[1]! })] as const);
    await cli(["tenants", "create", tenant], env);
  }, 120_000);

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await one?.stop();
    await two?.stop();
    await db?.drop();
    for (const d of dirs ?? []) removeDir(d);
  });

  it("a key revoked and a tenant disabled are refused on both processes' very next request", async () => {
    const key = await newKey(tenant, "erin", env);
    const onOne = await httpClient(one.url, { Authorization: `Bearer ${key}` });
    const onTwo = await httpClient(two.url, { Authorization: `Bearer ${key}` });
    clients.push(onOne, onTwo);
    // Both processes have resolved and cached the key.
    for (const c of [onOne, onTwo]) for (let i = 0; i < 3; i++) expect((await call(c, "chaoscore_recall", { key: "k" })).isError).toBeFalsy();
    await cli(["tenants", "disable", tenant], env);
    await expect(call(onOne, "chaoscore_recall", { key: "k" })).rejects.toThrow(/403|disabled/);
    await expect(call(onTwo, "chaoscore_recall", { key: "k" })).rejects.toThrow(/403|disabled/);
    await cli(["tenants", "enable", tenant], env);
    for (const c of [onOne, onTwo]) expect((await call(c, "chaoscore_recall", { key: "k" })).isError).toBeFalsy();
    await cli(["keys", "revoke", keyId(key), "--tenant", tenant], env);
    await expect(call(onOne, "chaoscore_recall", { key: "k" })).rejects.toThrow(/401|revoked/);
    await expect(call(onTwo, "chaoscore_recall", { key: "k" })).rejects.toThrow(/401|revoked/);
  });

  it("keeps a session a registry key opened (the keys file does not hold it), and holds the file's keys to the registry's status", async () => {
    const key = await newKey(tenant, "ivy", env);
    const ivy = await httpClient(one.url, { Authorization: `Bearer ${key}` });
    const fin = await httpClient(two.url, { Authorization: `Bearer ${filed.key}` });
    clients.push(ivy, fin);
    // Several requests of one 2025-11-25 session: an edit check of the keys file must not end it.
    for (let i = 0; i < 3; i++) expect((await call(ivy, "chaoscore_recall", { key: "k" })).isError).toBeFalsy();
    expect((await call(fin, "chaoscore_recall", { key: "k" })).isError).toBeFalsy();
    await cli(["tenants", "create", filed.tenant], env);
    await cli(["tenants", "disable", filed.tenant], env);
    await expect(call(fin, "chaoscore_recall", { key: "k" })).rejects.toThrow(/disabled/);
    expect((await call(ivy, "chaoscore_recall", { key: "k" })).isError).toBeFalsy();
  });

  it("ends a revoked key's streams on both processes, and a file key's stream once its tenant is disabled", async () => {
    const key = await newKey(tenant, "kim", env);
    const onOne = await clientHoldingStream(one.url, key);
    clients.push(onOne.client);
    const onTwo = await listenStream(two.url, key);
    const filedOnTwo = await clientHoldingStream(two.url, streaming.key);
    clients.push(filedOnTwo.client);
    try {
      await cli(["keys", "revoke", keyId(key), "--tenant", tenant], env);
      await eventually(onOne.streamEnded, "the GET stream on the first process to end");
      await eventually(onTwo.ended, "the listen stream on the second process to end");
      expect(filedOnTwo.streamEnded()).toBe(false);
      // The registry's status binds the file's keys too.
      await cli(["tenants", "create", streaming.tenant], env);
      await cli(["tenants", "disable", streaming.tenant], env);
      await eventually(filedOnTwo.streamEnded, "the file key's GET stream to end once its tenant is disabled");
    } finally {
      await onTwo.cancel();
    }
  });

  it("ends a 2026-07-28 listen stream on both processes once its key is removed from the keys file", async () => {
    const [onOne, onTwo] = [await listenStream(one.url, listening.key), await listenStream(two.url, listening.key)];
    const other = await listenStream(one.url, staying.key);
    try {
      writeFileSync(keysFile, JSON.stringify([filed, streaming, staying].map(fileEntry)));
      await eventually(onOne.ended, "the listen stream on the first process to end");
      await eventually(onTwo.ended, "the listen stream on the second process to end");
      expect(other.ended()).toBe(false);
    } finally {
      for (const s of [onOne, onTwo, other]) await s.cancel();
    }
  });
});

describe("the cluster's tenant admin API (the policy service's admin port)", () => {
  let db: TestDatabase;
  let policy: ServiceMain;
  const contextKey = randomBytes(32).toString("hex");
  let adminAddr: string;

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_registry_admin");
    policy = await startServiceMain("policy", { DATABASE_URL: db.url, REDIS_URL: TEST_REDIS_URL, CHAOS_CORE_CONTEXT_KEY: contextKey });
    // The admin listener reports after the main one (whose address startServiceMain waited for).
    for (let i = 0; i < 100 && !/"adminPort":\d+/.test(policy.log()); i++) await new Promise((r) => setTimeout(r, 50));
    const port = /"adminPort":(\d+)/.exec(policy.log())?.[1];
    expect(port, policy.log()).toBeDefined();
    adminAddr = `127.0.0.1:${port}`;
  }, 120_000);

  afterAll(async () => {
    if (policy) await stopProcess(policy.proc);
    await db?.drop();
  });

  it("administers tenants and keys over gRPC for a caller holding the context key", async () => {
    const env = { CHAOS_CORE_ADMIN_ADDR: adminAddr, CHAOS_CORE_CONTEXT_KEY: contextKey };
    await cli(["tenants", "create", `grpc-${tag}`], env);
    const key = await newKey(`grpc-${tag}`, "fay", env);
    const listed = JSON.parse(await cli(["keys", "list", "--tenant", `grpc-${tag}`, "--json"], env)) as { keys: Array<{ key_id: string }> };
    expect(listed.keys.map((k) => k.key_id)).toEqual([keyId(key)]);
  });

  it("refuses a caller without the key, and any principal but the operator", async () => {
    const wrongKey = await runToExit(["tenants", "list"], { CHAOS_CORE_ADMIN_ADDR: adminAddr, CHAOS_CORE_CONTEXT_KEY: "k".repeat(32) });
    expect(wrongKey.code).toBe(1);
    expect(wrongKey.stderr).toMatch(/signature is not valid/);
    const noKey = await runToExit(["tenants", "list"], { CHAOS_CORE_ADMIN_ADDR: adminAddr });
    expect(noKey.code).toBe(1);
    expect(noKey.stderr).toContain("CHAOS_CORE_CONTEXT_KEY is required");
    const agent = createGrpcClient(TenantAdminService, adminAddr, new ContextSigner(contextKey));
    try {
      await expect(agent.client.listTenants({}, { ctx: { tenant: "default", principal: "some-agent" } })).rejects.toThrow(/answers only the operator/);
    } finally {
      agent.close();
    }
  });
});

describe("a standalone bound beyond loopback with no keys file and no issuer", () => {
  let dir: string;
  let serve: ServeProcess;

  beforeAll(async () => {
    dir = tempDir("chaos-core-registry-open-");
    await seedDataDir(dir);
    await cli(["tenants", "create", `wide-${tag}`], { CHAOS_CORE_DATA_DIR: dir });
    serve = await startServe({ CHAOS_CORE_DATA_DIR: dir, HOST: "0.0.0.0" });
  }, 120_000);

  afterAll(async () => {
    await serve?.stop();
    if (dir) removeDir(dir);
  });

  it("serves nobody unauthenticated, and the registry's keys", async () => {
    const url = serve.url.replace("0.0.0.0", "127.0.0.1");
    await expect(httpClient(url)).rejects.toThrow(/Unauthorized: send Authorization: Bearer/);
    const key = await newKey(`wide-${tag}`, "gus", { CHAOS_CORE_DATA_DIR: dir });
    const client = await httpClient(url, { Authorization: `Bearer ${key}` });
    try {
      expect((await call(client, "chaoscore_recall", { key: "k" })).isError).toBeFalsy();
    } finally {
      await client.close();
    }
  });
});
