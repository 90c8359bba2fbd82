import { createHash, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { audienceServers, startOidcProvider, type AudienceServers, type OidcServer } from "../support/oidc.js";
import { httpClient, removeDir, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";

/**
 * Per-person identity to upstreams (docs/federation-platform.md §3), from outside: `chaos-core
 * serve` as an OAuth resource server of `oidc-provider` (from npm, on loopback; its RFC 8693 grant
 * registered by test/support/oidc.ts through `registerGrantType`, since it has none), with two
 * upstreams declared `token_exchange` — one refusing a caller without a token to exchange, one
 * falling back to client credentials. People signed in at the provider call through a real MCP
 * client; the edge hands cognition their verified token, cognition exchanges it, and the upstream
 * (an SDK server checking the provider's JWTs for its own URL) answers whom it sees. An API key's
 * principal has no token to exchange.
 */

const RESOURCE = "https://chaos.test/mcp";
const SECRET = "a-client-secret-for-tests-only-0123456789";

interface Step {
  capability: string;
  status: string;
  output?: { content: Array<{ type: string; text?: string }> };
  error?: { code: string; message: string };
}
const whoami = async (client: Client, upstream: string) => {
  const res = (await client.callTool({ name: "chaoscore_execute", arguments: { steps: [{ id: "w", capability: `${upstream}.whoami`, input: {} }] } })) as CallToolResult;
  const [step] = (res.structuredContent as { results: Step[] }).results;
  return step!;
};
const seen = (step: Step) => JSON.parse(step.output!.content[0]!.text!) as { sub: string; client_id: string; act?: { sub: string }; aud: string };

describe("an upstream that acts as the calling person", () => {
  const dir = tempDir("chaos-core-identity-");
  const apiKey = randomBytes(24).toString("base64url");
  let oidc: OidcServer;
  let servers: AudienceServers;
  let serve: ServeProcess;
  const urls: Record<string, string> = {};
  const clients: Client[] = [];
  const tokens: string[] = [];

  const signedIn = async (account: string) => {
    const { token } = await oidc.signIn(account, { resource: RESOURCE, tenant: "default" });
    tokens.push(token);
    const c = await httpClient(serve.url, { Authorization: `Bearer ${token}` });
    clients.push(c);
    return c;
  };

  beforeAll(async () => {
    oidc = await startOidcProvider(SECRET);
    servers = audienceServers(oidc.issuer);
    urls["people"] = await servers.start();
    urls["team"] = await servers.start();
    await seedDataDir(dir);
    const auth = { type: "token_exchange", issuer: oidc.issuer, clientId: "chaos-core", clientSecret: { env: "CHAOS_CORE_UPSTREAM_SECRET_CLIENT" } };
    writeFileSync(
      join(dir, "upstreams.json"),
      JSON.stringify({ upstreams: [{ name: "people", url: urls["people"], auth }, { name: "team", url: urls["team"], auth: { ...auth, fallback: "client_credentials" } }] }),
    );
    writeFileSync(join(dir, "keys.json"), JSON.stringify([{ tenant: "default", principal: "ci-bot", sha256: createHash("sha256").update(apiKey).digest("hex") }]));
    const env = { CHAOS_CORE_DATA_DIR: dir, CHAOS_CORE_UPSTREAM_SECRET_CLIENT: SECRET };
    // Pinned as Chaos Core's own client at the issuer: no person is calling.
    const locked = await runToExit(["upstreams", "lock"], env, 90_000);
    expect(locked.code, locked.stderr).toBe(0);
    serve = await startServe({
      ...env,
      CHAOS_CORE_API_KEYS_FILE: join(dir, "keys.json"),
      CHAOS_CORE_OAUTH_ISSUER: oidc.issuer,
      CHAOS_CORE_OAUTH_RESOURCE: RESOURCE,
      CHAOS_CORE_OAUTH_TENANT_CLAIM: "org_id",
      LOG_LEVEL: "debug",
    });
  }, 180_000);

  afterAll(async () => {
    await Promise.allSettled(clients.map((c) => c.close()));
    await serve?.stop();
    await servers?.close();
    await oidc?.close();
    removeDir(dir);
  });

  it("reaches the upstream as each person who signed in: A as A, B as B, Chaos Core as the actor", async () => {
    const [alice, bob] = [await signedIn("alice"), await signedIn("bob")];
    const [a, b] = await Promise.all([whoami(alice, "people"), whoami(bob, "people")]);
    expect(a).toMatchObject({ capability: "people.whoami", status: "executed" });
    expect(seen(a)).toEqual({ sub: "alice", client_id: "chaos-core", act: { sub: "chaos-core" }, aud: urls["people"] });
    expect(seen(b)).toEqual({ sub: "bob", client_id: "chaos-core", act: { sub: "chaos-core" }, aud: urls["people"] });
    // The other upstream gets a token of its own audience.
    expect(seen(await whoami(alice, "team"))).toMatchObject({ sub: "alice", aud: urls["team"] });
  });

  it("refuses an API key's principal where the upstream takes people only, naming it, in the ledger; falls back to client credentials where declared", async () => {
    const bot = await httpClient(serve.url, { Authorization: `Bearer ${apiKey}` });
    clients.push(bot);
    const refused = await whoami(bot, "people");
    expect(refused.status).toBe("failed");
    expect(refused.error).toEqual({
      code: "permission_denied",
      message: `upstream "people" acts as the calling person (token_exchange) and ci-bot's credential carries no access token to exchange (an API key, or the local user); its fallback is "refuse"`,
    });
    const ledger = (await bot.callTool({ name: "inspect_audit_ledger", arguments: { limit: 20 } })).structuredContent as {
      entries: Array<{ principal: string; event: Record<string, unknown> }>;
    };
    const outcome = ledger.entries.find((e) => e.principal === "ci-bot" && e.event["type"] === "step.outcome" && e.event["capability"] === "people.whoami");
    expect(outcome?.event).toMatchObject({ status: "failed", ran: true, errorCode: "permission_denied" });

    // The machine identity where the declaration allows it: no `act`, the client itself.
    const machine = seen(await whoami(bot, "team"));
    expect(machine).toMatchObject({ sub: "chaos-core", aud: urls["team"] });
    expect(machine.act).toBeUndefined();
  });

  it("never writes a person's token into its log lines", () => {
    expect(tokens.length).toBeGreaterThan(0);
    for (const token of tokens) expect(serve.stderr()).not.toContain(token);
  });
});
