import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ClientCredentialsProvider, Client as V2Client, StreamableHTTPClientTransport as V2Http } from "@modelcontextprotocol/client";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { recordingLogger } from "../../../../test/support/logger.js";
import { hashApiKey } from "../auth/api-keys.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { httpClient, initializeBody, listTools, MCP_HEADERS, openSession, readJsonRpc, rpc, toolCall } from "../test-support/http.js";
import { startTestIssuer, type TestIssuer } from "../../../../test/support/oauth-issuer.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { startHttpTransport, type RunningHttpTransport } from "./http.js";

/** This edge's canonical resource URI: what a proxy in front of it would publish; tokens are for it. */
const RESOURCE = "https://mcp.chaos.test/mcp";
const METADATA_URL = "https://mcp.chaos.test/.well-known/oauth-protected-resource/mcp";

/** RFC 9728 §2, the members this server must publish (and the types of the optional ones it may). */
const ProtectedResourceMetadataSchema = z
  .object({
    resource: z.url().refine((u) => !u.includes("#"), "a resource URI has no fragment"),
    authorization_servers: z.array(z.url()).min(1),
    scopes_supported: z.array(z.string().min(1)).min(1),
    bearer_methods_supported: z.array(z.enum(["header", "body", "query"])),
    resource_name: z.string().optional(),
    resource_documentation: z.url().optional(),
    jwks_uri: z.url().optional(),
  })
  .loose();

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
const dir = mkdtempSync(join(tmpdir(), "edge-oauth-"));

let services: TestServices;
let issuer: TestIssuer;
let edge: RunningHttpTransport;
const { logger, lines } = recordingLogger();
const apiKey = randomBytes(24).toString("base64url");

beforeAll(async () => {
  services = await startTestServices("oauth");
  issuer = await startTestIssuer(RESOURCE);
  const keysFile = join(dir, "api-keys.json");
  // The API key's tenant and principal: another tenant, a principal of the same name as the token's.
  writeFileSync(keysFile, JSON.stringify([{ tenant: "acme", principal: "alice", sha256: hashApiKey(apiKey) }]));
  edge = await startHttpTransport(
    { ...services.deps(createMemorySessionStore()), logger },
    {
      port: 0,
      apiKeysFile: keysFile,
      // The JWKS location comes from the issuer's RFC 8414 metadata; no cooldown so the tests
      // need not wait between a rotation and the token that shows it was picked up.
      oauth: { issuer: issuer.issuer, resource: RESOURCE, jwksCooldownMs: 0 },
    },
  );
});

afterAll(async () => {
  await edge?.close();
  await issuer?.close();
  await services?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** An initialize with these headers, answered. */
async function initialize(headers: Record<string, string>): Promise<Response> {
  return fetch(edge.url, { method: "POST", headers: { ...MCP_HEADERS, ...headers }, body: JSON.stringify(initializeBody()) });
}

const good = (claims: Record<string, unknown> = {}) => ({ sub: "alice", tenant: "globex", scope: "chaoscore:agent", ...claims });

/** What a refused request must say: its status, and the challenge with the metadata URL. */
async function expectRefused(res: Response, status: number, error: string | undefined): Promise<string> {
  expect(res.status).toBe(status);
  const header = res.headers.get("www-authenticate") ?? "";
  expect(header).toMatch(/^Bearer /);
  expect(header).toContain(`resource_metadata="${METADATA_URL}"`);
  if (error) expect(header).toContain(`error="${error}"`);
  else expect(header).not.toContain("error=");
  const message = ((await readJsonRpc(res))?.error as { message: string } | undefined)?.message ?? "";
  return message;
}

describe("Protected Resource Metadata", () => {
  it("is served at the root and the path-inserted well-known URL, and validates against RFC 9728", async () => {
    const base = new URL(edge.url).origin;
    for (const path of ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"]) {
      const res = await fetch(`${base}${path}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^application\/json/);
      const doc = ProtectedResourceMetadataSchema.parse(await res.json());
      expect(doc).toMatchObject({
        resource: RESOURCE,
        authorization_servers: [issuer.issuer],
        scopes_supported: ["chaoscore:agent", "chaoscore:approver"],
        bearer_methods_supported: ["header"],
      });
    }
  });
});

describe("an access token from the issuer", () => {
  it("lets a real SDK client initialize, list tools and call one, as the token's tenant and principal", async () => {
    const token = await issuer.sign(good());
    const { client } = await httpClient(edge.url, { headers: bearer(token) });
    const { tools } = await client.listTools();
    expect(tools.length).toBeGreaterThan(0);
    const res = await client.callTool({ name: "chaoscore_inspect", arguments: { what: "sessions" } });
    expect(res.structuredContent).toMatchObject({ session: { tenant: "globex", principal: "alice" } });
    // The token reaches no answer, log line or audit record.
    expect(JSON.stringify(res)).not.toContain(token);
    expect(JSON.stringify(lines)).not.toContain(token);
    expect(JSON.stringify(services.audit)).not.toContain(token);
    await client.close();
  });

  it("asks for a token, naming the metadata and the scope, when none is sent", async () => {
    const res = await initialize({});
    await expectRefused(res, 401, undefined);
    expect(res.headers.get("www-authenticate")).toContain('scope="chaoscore:agent"');
  });

  it("refuses a token for another audience, from another issuer, expired, or not yet valid", async () => {
    const cases: Array<[string, Promise<string>, RegExp]> = [
      ["wrong audience", issuer.sign(good(), { audience: "https://other.example/mcp" }), /not issued for this resource/],
      ["wrong issuer", issuer.sign(good(), { issuer: "https://evil.example" }), /not issued by this server's authorization server/],
      ["expired", issuer.sign(good(), { expiresIn: -120 }), /expired/],
      ["not yet valid", issuer.sign(good(), { notBefore: 300 }), /nbf/],
    ];
    for (const [what, token, message] of cases) {
      const res = await initialize(bearer(await token));
      expect(await expectRefused(res, 401, "invalid_token"), what).toMatch(message);
    }
  });

  it("accepts a token whose times are off by less than the 30 s clock skew", async () => {
    const token = await issuer.sign(good(), { expiresIn: -10, notBefore: 10 });
    expect((await initialize(bearer(token))).status).toBe(200);
  });

  it("refuses alg none, an HMAC token, a bad signature and an unknown kid", async () => {
    const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
    const now = Math.floor(Date.now() / 1000);
    const claims = { ...good(), iss: issuer.issuer, aud: RESOURCE, iat: now, exp: now + 300 };
    const unsigned = `${b64({ alg: "none", typ: "at+jwt", kid: issuer.current().kid })}.${b64(claims)}.`;
    const hmac = await new SignJWT(claims).setProtectedHeader({ alg: "HS256", typ: "at+jwt", kid: issuer.current().kid }).sign(randomBytes(32));
    // Signed by a key the issuer never published, under the published key's kid.
    const forged = await issuer.sign(good(), { key: await issuer.newKey(), kid: issuer.current().kid });
    const unknownKid = await issuer.sign(good(), { key: await issuer.newKey() });
    const cases: Array<[string, string, RegExp]> = [
      ["alg none", unsigned, /algorithm is not accepted/],
      ["HS256", hmac, /algorithm is not accepted/],
      ["bad signature", forged, /signature does not verify/],
      ["unknown kid", unknownKid, /key the authorization server does not publish/],
    ];
    for (const [what, token, message] of cases) {
      const res = await initialize(bearer(token));
      expect(await expectRefused(res, 401, "invalid_token"), what).toMatch(message);
    }
  });

  it("refuses a token that is not an RFC 9068 access token (typ JWT), and a token without a tenant", async () => {
    const idToken = await issuer.sign(good(), { typ: "JWT" });
    expect(await expectRefused(await initialize(bearer(idToken)), 401, "invalid_token")).toMatch(/at\+jwt/);
    const noTenant = await issuer.sign({ sub: "alice", scope: "chaoscore:agent" });
    expect(await expectRefused(await initialize(bearer(noTenant)), 401, "invalid_token")).toMatch(/no tenant \(claim tenant\)/);
    const reserved = await issuer.sign(good({ sub: "operator" }));
    expect(await expectRefused(await initialize(bearer(reserved)), 401, "invalid_token")).toMatch(/reserved/);
  });

  it("answers 403 insufficient_scope, naming the scope, to a token without chaoscore:agent", async () => {
    for (const claims of [good({ scope: "openid profile" }), good({ scope: undefined })]) {
      const res = await initialize(bearer(await issuer.sign(claims)));
      await expectRefused(res, 403, "insufficient_scope");
      expect(res.headers.get("www-authenticate")).toContain('scope="chaoscore:agent"');
    }
    // `scp` as a list counts as well.
    expect((await initialize(bearer(await issuer.sign(good({ scope: undefined, scp: ["chaoscore:agent"] }))))).status).toBe(200);
  });

  it("refuses a token sent in the query string, even a good one", async () => {
    const token = await issuer.sign(good());
    const res = await fetch(`${edge.url}?access_token=${token}`, { method: "POST", headers: MCP_HEADERS, body: JSON.stringify(initializeBody()) });
    await expectRefused(res, 400, "invalid_request");
  });

  it("picks up a key rotation at the issuer without a restart", async () => {
    const before = await issuer.sign(good());
    expect((await initialize(bearer(before))).status).toBe(200);
    const fetched = issuer.requests.jwks;
    const next = await issuer.rotate();
    const after = await issuer.sign(good(), { key: next });
    expect((await initialize(bearer(after))).status).toBe(200);
    expect(issuer.requests.jwks).toBeGreaterThan(fetched);
    // The retired key is no longer published: its tokens are refused from then on.
    await expectRefused(await initialize(bearer(before)), 401, "invalid_token");
  });
});

describe("a client that discovers the issuer itself", () => {
  it("goes from 401 to the metadata, the issuer, a client_credentials token for this resource, and serves the call", async () => {
    // The resource must be the URL the client connects to (it checks the metadata against it):
    // a free port, known before the edge listens on it.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    const url = `http://127.0.0.1:${port}/mcp`;
    const self = await startHttpTransport(services.deps(createMemorySessionStore()), { port, oauth: { issuer: issuer.issuer, resource: url } });
    const client = new V2Client({ name: "m2m", version: "1.0.0" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
    try {
      const authProvider = new ClientCredentialsProvider({
        clientId: issuer.client.id,
        clientSecret: issuer.client.secret,
        scope: "chaoscore:agent",
        expectedIssuer: issuer.issuer,
      });
      await client.connect(new V2Http(new URL(url), { authProvider }));
      const res = (await client.callTool({ name: "chaoscore_inspect", arguments: { what: "sessions" } })) as { isError?: boolean };
      expect(res.isError).toBeFalsy();
      // It asked the token endpoint for this resource (RFC 8707), with the scope the challenge named.
      expect(issuer.tokenRequests.at(-1)).toMatchObject({ grant_type: "client_credentials", resource: url, scope: "chaoscore:agent" });
      // The calls ran as the token's tenant and principal: what it remembered, that tenant and
      // principal recall through a token of their own, and another tenant does not.
      await client.callTool({ name: "chaoscore_remember", arguments: { key: "m2m", value: "machines' note" } });
      const recall = async (tenant: string) => {
        const token = await issuer.sign({ sub: issuer.client.id, tenant, scope: "chaoscore:agent" }, { audience: url });
        const { client: reader } = await httpClient(url, { headers: bearer(token) });
        const res = JSON.stringify(await reader.callTool({ name: "chaoscore_recall", arguments: { key: "m2m" } }));
        await reader.close();
        return res;
      };
      expect(await recall("machines")).toContain("machines' note");
      expect(await recall("globex")).not.toContain("machines' note");
    } finally {
      await client.close();
      await self.close();
    }
  });
});

describe("an issuer that cannot be reached", () => {
  it("answers 503 with Retry-After, not invalid_token, and starts anyway", async () => {
    // A port nothing listens on any more: the issuer's metadata cannot be fetched.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const gone = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
    await new Promise((resolve) => closed.close(resolve));
    const down = await startHttpTransport({ ...services.deps(createMemorySessionStore()), logger }, { port: 0, oauth: { issuer: gone, resource: RESOURCE } });
    try {
      const token = await issuer.sign(good(), { issuer: gone });
      const res = await fetch(down.url, { method: "POST", headers: { ...MCP_HEADERS, ...bearer(token) }, body: JSON.stringify(initializeBody()) });
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("5");
      expect(((await readJsonRpc(res))?.error as { message: string }).message).toMatch(/keys cannot be fetched now/);
      // A second token meets the same outage: the operator's log says so once.
      const again = await fetch(down.url, { method: "POST", headers: { ...MCP_HEADERS, ...bearer(token) }, body: JSON.stringify(initializeBody()) });
      expect(again.status).toBe(503);
      expect(lines.filter((l) => String(l["msg"]).startsWith("OAuth: the issuer's metadata cannot be read"))).toHaveLength(1);
    } finally {
      await down.close();
    }
  });
});

describe("scopes as roles", () => {
  it("lets a token with chaoscore:approver approve another principal's step, never an agent-only token or the requester itself", async () => {
    const tenant = "umbrella";
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const as = async (sub: string, scope: string) => {
      const { client } = await httpClient(edge.url, { headers: bearer(await issuer.sign({ sub, tenant, scope })) });
      return client;
    };
    const call = async (c: Awaited<ReturnType<typeof as>>, name: string, args: Record<string, unknown>) =>
      (await c.callTool({ name, arguments: args })) as { isError?: boolean; structuredContent?: Record<string, unknown>; content: Array<{ text?: string }> };
    const step = { id: "s1", capability: "memory.remember", input: { key: "deploy-window", value: "thursday" }, rationale: "hand-written" };

    // The requester holds the approver scope too: it still cannot approve its own request.
    const agent = await as("agent", "chaoscore:agent chaoscore:approver");
    const out = (await call(agent, "chaoscore_execute", { steps: [step] })).structuredContent as { results: Array<{ approval?: { approval_id: string } }> };
    const id = out.results[0]!.approval!.approval_id;
    const ownAnswer = await call(agent, "chaoscore_approve", { approval_id: id, approve: true });
    expect(ownAnswer.isError).toBe(true);
    expect(JSON.stringify(ownAnswer.content)).toMatch(/self_approval/);

    const dave = await as("dave", "chaoscore:agent");
    const noRole = await call(dave, "chaoscore_approve", { approval_id: id, approve: true });
    expect(noRole.isError).toBe(true);
    expect(JSON.stringify(noRole.content)).toMatch(/permission_denied/);

    const carol = await as("carol", "chaoscore:agent chaoscore:approver");
    const approved = await call(carol, "chaoscore_approve", { approval_id: id, approve: true });
    expect(approved.structuredContent).toMatchObject({ status: "approved" });
    expect(String(approved.structuredContent?.["resolved_by"])).toContain("carol");

    const ran = (await call(agent, "chaoscore_execute", { approval_id: id })).structuredContent as { results: unknown[] };
    expect(ran.results[0]).toMatchObject({ status: "executed", ran: true });
    for (const c of [agent, dave, carol]) await c.close();
  });
});

describe("OAuth and API keys on one edge", () => {
  it("keeps a tenant signed in with OAuth and one with an API key to their own memory and sessions", async () => {
    const token = await issuer.sign(good());
    const viaToken = await openSession(edge.url, bearer(token));
    const viaKey = await openSession(edge.url, bearer(apiKey));

    const wrote = await rpc(edge.url, viaToken, toolCall(3, "chaoscore_remember", { key: "plan", value: "globex's secret" }), bearer(token));
    expect((wrote.message?.result as { isError?: boolean }).isError).toBeFalsy();
    const keyWrote = await rpc(edge.url, viaKey, toolCall(4, "chaoscore_remember", { key: "plan", value: "acme's secret" }), bearer(apiKey));
    expect((keyWrote.message?.result as { isError?: boolean }).isError).toBeFalsy();

    for (const args of [{ key: "plan" }, { query: "secret" }]) {
      const theirs = await rpc(edge.url, viaKey, toolCall(5, "chaoscore_recall", args), bearer(apiKey));
      expect(JSON.stringify(theirs.message)).not.toContain("globex's secret");
      expect(JSON.stringify(theirs.message)).toContain("acme's secret");
      const mine = await rpc(edge.url, viaToken, toolCall(6, "chaoscore_recall", args), bearer(token));
      expect(JSON.stringify(mine.message)).toContain("globex's secret");
      expect(JSON.stringify(mine.message)).not.toContain("acme's secret");
    }

    // Neither credential can use the other's session (the same principal name, another tenant).
    expect((await rpc(edge.url, viaToken, listTools, bearer(apiKey))).status).toBe(404);
    expect((await rpc(edge.url, viaKey, listTools, bearer(token))).status).toBe(404);
    // The OAuth session lives on beside a watched API keys file that does not list it.
    expect((await rpc(edge.url, viaToken, listTools, bearer(token))).status).toBe(200);
    expect(lines.some((l) => l["msg"] === "session closed: its API key was revoked")).toBe(false);
  });

  it("still tells a bad API key apart from no credential, with the OAuth challenge", async () => {
    const message = await expectRefused(await initialize(bearer("not-a-key")), 401, "invalid_token");
    expect(message).toMatch(/not a valid API key/);
  });
});

describe("opaque tokens through RFC 7662 introspection", () => {
  let introspecting: RunningHttpTransport;
  const now = () => Math.floor(Date.now() / 1000);
  const active = (claims: Record<string, unknown> = {}) => ({ ...good({ tenant: "initech" }), aud: RESOURCE, iss: issuer.issuer, exp: now() + 300, ...claims });

  beforeAll(async () => {
    const secretFile = join(dir, "introspection-secret");
    writeFileSync(secretFile, `${issuer.client.secret}\n`);
    introspecting = await startHttpTransport(services.deps(createMemorySessionStore()), {
      port: 0,
      oauth: {
        issuer: issuer.issuer,
        resource: RESOURCE,
        jwksUrl: issuer.jwksUrl,
        introspection: { url: issuer.introspectionUrl, clientId: issuer.client.id, clientSecretFile: secretFile },
      },
    });
  });

  afterAll(async () => {
    await introspecting?.close();
  });

  const init = (token: string) =>
    fetch(introspecting.url, { method: "POST", headers: { ...MCP_HEADERS, ...bearer(token) }, body: JSON.stringify(initializeBody()) });

  it("serves an active token as its tenant and principal, asking the issuer once while the answer is cached", async () => {
    const token = issuer.issueOpaque(active());
    const asked = issuer.requests.introspection;
    const { client } = await httpClient(introspecting.url, { headers: bearer(token) });
    const res = await client.callTool({ name: "chaoscore_inspect", arguments: { what: "sessions" } });
    expect(res.structuredContent).toMatchObject({ session: { tenant: "initech", principal: "alice" } });
    await client.close();
    // initialize, notifications/initialized, tools/call, DELETE: one introspection.
    expect(issuer.requests.introspection - asked).toBe(1);
  });

  it("never caches an answer past the token's exp", async () => {
    // Expired 5 s ago: still inside the 30 s clock skew, so accepted, but each request asks again.
    const token = issuer.issueOpaque(active({ exp: now() - 5 }));
    const asked = issuer.requests.introspection;
    expect((await init(token)).status).toBe(200);
    expect((await init(token)).status).toBe(200);
    expect(issuer.requests.introspection - asked).toBe(2);
  });

  it("refuses an inactive token, one for another resource or issuer, and one without the agent scope", async () => {
    const check = async (token: string, status: number, error: string, message: RegExp) => {
      const res = await init(token);
      expect(res.status).toBe(status);
      expect(res.headers.get("www-authenticate")).toContain(`error="${error}"`);
      expect(((await readJsonRpc(res))?.error as { message: string }).message).toMatch(message);
    };
    await check("never-issued-token", 401, "invalid_token", /not active/);
    await check(issuer.issueOpaque(active({ aud: "https://other.example/mcp" })), 401, "invalid_token", /not issued for this resource/);
    await check(issuer.issueOpaque(active({ aud: undefined })), 401, "invalid_token", /not issued for this resource/);
    await check(issuer.issueOpaque(active({ iss: "https://evil.example" })), 401, "invalid_token", /not issued by/);
    await check(issuer.issueOpaque(active({ exp: now() - 120 })), 401, "invalid_token", /expired/);
    await check(issuer.issueOpaque(active({ scope: "openid" })), 403, "insufficient_scope", /chaoscore:agent/);
  });

  it("answers 503, not invalid_token, while the introspection endpoint cannot be reached", async () => {
    // A port nothing listens on any more.
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const unreachable = await startHttpTransport(services.deps(createMemorySessionStore()), {
      port: 0,
      oauth: {
        issuer: issuer.issuer,
        resource: RESOURCE,
        jwksUrl: issuer.jwksUrl,
        introspection: { url: `http://127.0.0.1:${port}/introspect`, clientId: "x", clientSecret: "y" },
      },
    });
    try {
      const res = await fetch(unreachable.url, { method: "POST", headers: { ...MCP_HEADERS, ...bearer("opaque") }, body: JSON.stringify(initializeBody()) });
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBe("5");
    } finally {
      await unreachable.close();
    }
  });
});
