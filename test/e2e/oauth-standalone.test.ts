import { createHash, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client as V2Client, StreamableHTTPClientTransport as V2Http } from "@modelcontextprotocol/client";
import type { Client as V1Client } from "@modelcontextprotocol/sdk/client/index.js";
import { startTestIssuer, type TestIssuer } from "../support/oauth-issuer.js";
import { httpClient, removeDir, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { eventually, listenStream, STREAM_END_WAIT_MS } from "../support/streams.js";

/**
 * `chaos-core serve` as an OAuth 2.1 resource server (docs/auth.md), configured only through
 * CHAOS_CORE_OAUTH_*, beside an API keys file: a principal signed in through a real local issuer
 * and one with an API key, over both protocol revisions. Standalone's policy file serves tenant
 * `default` only (services/policy's file store), so both are of that tenant here; two tenants
 * kept apart, one by OAuth and one by API key, are shown on the edge over Postgres
 * (services/edge/src/transport/oauth.test.ts).
 */

const RESOURCE = "https://chaos.test/mcp";
const hashApiKey = (key: string) => createHash("sha256").update(key, "utf8").digest("hex");

type CallResult = { isError?: boolean; structuredContent?: Record<string, unknown>; content: Array<{ type: string; text?: string }> };
type AnyClient = { callTool(params: { name: string; arguments: Record<string, unknown> }): Promise<unknown> };
const call = async (client: AnyClient, name: string, args: Record<string, unknown>) => (await client.callTool({ name, arguments: args })) as CallResult;

describe("chaos-core serve with OAuth and API keys", () => {
  const dir = tempDir("chaos-core-oauth-");
  const apiKey = randomBytes(24).toString("base64url");
  let issuer: TestIssuer;
  let serve: ServeProcess;
  const clients: Array<{ close(): Promise<void> }> = [];

  beforeAll(async () => {
    issuer = await startTestIssuer(RESOURCE);
    const keysFile = join(dir, "keys.json");
    writeFileSync(keysFile, JSON.stringify([{ tenant: "default", principal: "bob", sha256: hashApiKey(apiKey) }]));
    serve = await startServe({
      CHAOS_CORE_DATA_DIR: dir,
      CHAOS_CORE_API_KEYS_FILE: keysFile,
      CHAOS_CORE_OAUTH_ISSUER: issuer.issuer,
      CHAOS_CORE_OAUTH_RESOURCE: RESOURCE,
      CHAOS_CORE_OAUTH_TENANT_CLAIM: "org_id",
      // Tokens are accepted a second past their exp (30 s by default): the expiry test waits that long.
      CHAOS_CORE_OAUTH_CLOCK_SKEW_SECONDS: "1",
    });
  }, 90_000);

  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await serve?.stop();
    await issuer?.close();
    removeDir(dir);
  });

  const token = () => issuer.sign({ sub: "alice", org_id: "default", scope: "chaoscore:agent" });

  it("publishes its Protected Resource Metadata and challenges a request without a credential", async () => {
    const origin = new URL(serve.url).origin;
    const doc = (await (await fetch(`${origin}/.well-known/oauth-protected-resource/mcp`)).json()) as Record<string, unknown>;
    expect(doc).toMatchObject({ resource: RESOURCE, authorization_servers: [issuer.issuer], bearer_methods_supported: ["header"] });
    const res = await fetch(serve.url, { method: "POST", headers: { "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{}" });
    expect(res.status).toBe(401);
    expect(res.headers.get("www-authenticate")).toContain('resource_metadata="https://chaos.test/.well-known/oauth-protected-resource/mcp"');
  });

  it("serves a principal signed in with OAuth beside one with an API key, in both revisions, as the token names it", async () => {
    const oauthV1: V1Client = await httpClient(serve.url, { authorization: `Bearer ${await token()}` });
    const keyV1: V1Client = await httpClient(serve.url, { authorization: `Bearer ${apiKey}` });
    const oauthV2 = new V2Client({ name: "oauth-v2", version: "1.0.0" }, { versionNegotiation: { mode: { pin: "2026-07-28" } } });
    await oauthV2.connect(new V2Http(new URL(serve.url), { requestInit: { headers: { authorization: `Bearer ${await token()}` } } }));
    clients.push(oauthV1, keyV1, oauthV2);

    expect((await call(oauthV1, "chaoscore_inspect", { what: "sessions" })).structuredContent).toMatchObject({ session: { tenant: "default", principal: "alice" } });
    expect((await call(keyV1, "chaoscore_inspect", { what: "sessions" })).structuredContent).toMatchObject({ session: { tenant: "default", principal: "bob" } });
    const wrote = await call(oauthV1, "chaoscore_remember", { key: "plan", value: "alice's note" });
    expect(wrote.isError, JSON.stringify(wrote.content)).toBeFalsy();
    // The 2026-07-28 client, with its own token of the same principal, reads it back.
    const recalled = await call(oauthV2, "chaoscore_recall", { key: "plan" });
    expect(JSON.stringify(recalled.structuredContent)).toContain("alice's note");
  });

  it("ends a stream its access token holds open once the token expires; a stream with a live token stays", async () => {
    const expiresIn = 3;
    const shortLived = await listenStream(serve.url, await issuer.sign({ sub: "alice", org_id: "default", scope: "chaoscore:agent" }, { expiresIn }));
    const longLived = await listenStream(serve.url, await token());
    try {
      await eventually(shortLived.ended, "the expired token's listen stream to end", (expiresIn + 1) * 1000 + STREAM_END_WAIT_MS);
      expect(longLived.ended()).toBe(false);
    } finally {
      await shortLived.cancel();
      await longLived.cancel();
    }
  });

  it("refuses a token of another audience", async () => {
    const wrong = await issuer.sign({ sub: "alice", org_id: "default", scope: "chaoscore:agent" }, { audience: "https://elsewhere.test/mcp" });
    await expect(httpClient(serve.url, { authorization: `Bearer ${wrong}` })).rejects.toThrow();
  });
});
