/**
 * OAuth 2.1 client credentials to upstreams (docs/federation-platform.md §3) against a real
 * authorization server nobody here wrote — `oidc-provider` from npm, on loopback, with its built-in
 * client-credentials grant and resource indicators (RFC 8707) issuing JWT access tokens — and two
 * Streamable HTTP MCP servers (the official SDK) that verify every token against the provider's
 * JWKS, requiring their own URL as its audience. Through the pool cognition calls upstreams with.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChaosError, createLogger, parseUpstreamsFile, type HttpUpstreamDeclaration } from "@chaos-core/kit";
import { audienceServers, startOidcProvider, type AudienceServers, type OidcServer } from "../../../../test/support/oidc.js";
import { guardedUpstreamFetch } from "./guarded-fetch.js";
import { createUpstreamPool, type UpstreamPool } from "./pool.js";

/** Who the calls are made for. */
const ACME = { tenant: "acme", principal: "agent" };

const ROOT = new URL("../../../../", import.meta.url).pathname;
const SECRET = "a-client-secret-for-tests-only-0123456789";

let oidc: OidcServer;
let issuer = "";
let servers: AudienceServers;
let pool: UpstreamPool | undefined;
const audienceServer = () => servers.start();

beforeAll(async () => {
  oidc = await startOidcProvider(SECRET);
  issuer = oidc.issuer;
  servers = audienceServers(issuer);
}, 30_000);

afterAll(async () => {
  await pool?.close();
  await servers.close();
  await oidc.close();
});

function declare(name: string, url: string, auth: Record<string, unknown> = {}): HttpUpstreamDeclaration {
  const [decl] = parseUpstreamsFile(
    JSON.stringify({ upstreams: [{ name, url, auth: { type: "client_credentials", issuer, clientId: "chaos-core", clientSecret: { env: "CHAOS_CORE_UPSTREAM_SECRET_CLIENT" }, ...auth } }] }),
    "test",
  );
  return decl as HttpUpstreamDeclaration;
}

function poolWith(tokenMaxSeconds?: number, secret = SECRET): UpstreamPool {
  return createUpstreamPool({
    connect: { secrets: { env: { CHAOS_CORE_UPSTREAM_SECRET_CLIENT: secret } }, workDir: join(ROOT, ".cache", "upstream-auth-test"), version: "test" },
    logger: createLogger("upstream-auth-test", "silent"),
    ...(tokenMaxSeconds !== undefined ? { tokenMaxSeconds } : {}),
  });
}

const whoami = async (p: UpstreamPool, decl: HttpUpstreamDeclaration) =>
  JSON.parse(((await p.call(decl, ACME, "whoami", {})).content[0] as { text: string }).text) as { sub?: string; client_id?: string; aud?: unknown };

describe("an upstream declared with OAuth client credentials", () => {
  it("is called with a token the authorization server issued for it alone: its URL the audience, the client the caller", async () => {
    const [a, b] = [await audienceServer(), await audienceServer()];
    pool = poolWith();
    const upA = declare("alpha", a);
    const upB = declare("beta", b);
    expect(await whoami(pool, upA)).toMatchObject({ client_id: "chaos-core", aud: a });
    expect(await whoami(pool, upB)).toMatchObject({ client_id: "chaos-core", aud: b });

    // A token for one upstream is refused by the other: ask the provider for alpha's and show it to beta.
    const res = await fetch(`${issuer}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", authorization: `Basic ${Buffer.from(`chaos-core:${SECRET}`).toString("base64")}` },
      body: new URLSearchParams({ grant_type: "client_credentials", resource: a }),
    });
    const { access_token } = (await res.json()) as { access_token: string };
    const refused = await fetch(b, { method: "POST", headers: { authorization: `Bearer ${access_token}`, "content-type": "application/json", accept: "application/json, text/event-stream" }, body: "{}" });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toMatch(/aud/);
  });

  it("uses a token no longer than its expiry, nor the stated bound, then asks for a new one", async () => {
    const url = await audienceServer();
    const decl = declare("gamma", url);
    // Tokens live 2 s at the provider: within that one request serves every call.
    oidc.setTokenTtl(2);
    const p = poolWith();
    try {
      const before = oidc.tokenRequests();
      await whoami(p, decl);
      await whoami(p, decl);
      expect(oidc.tokenRequests() - before).toBe(1);
      await new Promise((r) => setTimeout(r, 2_100));
      await whoami(p, decl);
      expect(oidc.tokenRequests() - before).toBe(2);
    } finally {
      oidc.setTokenTtl(300);
      await p.close();
    }
    // A 300 s token is used at most the bound (1 s here): a client disabled at the provider stops calls within it.
    const bounded = poolWith(1);
    try {
      const before = oidc.tokenRequests();
      await whoami(bounded, decl);
      await new Promise((r) => setTimeout(r, 1_100));
      await whoami(bounded, decl);
      expect(oidc.tokenRequests() - before).toBe(2);
    } finally {
      await bounded.close();
    }
  });

  it("fails a call permission_denied naming the upstream and the issuer when the authorization server refuses, without opening its breaker", async () => {
    const url = await audienceServer();
    const decl = declare("delta", url);
    const p = poolWith(undefined, "not-the-secret");
    try {
      for (let i = 0; i < 6; i++) {
        const err = await p.call(decl, ACME, "whoami", {}).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(ChaosError);
        expect((err as ChaosError).code).toBe("permission_denied");
        expect((err as ChaosError).message).toMatch(new RegExp(`^upstream "delta": its authorization server ${issuer.replace(/[.]/g, "\\.")} gave no token: invalid_client`));
      }
      expect(p.breakers()).toEqual([expect.objectContaining({ upstream: "delta", state: "closed", consecutiveFailures: 0 })]);
    } finally {
      await p.close();
    }
  });

  it("reads the upstream's Protected Resource Metadata (RFC 9728): the resource it names is the token's audience; another authorization server, or a resource not covering its URL, gets no token", async () => {
    const p = poolWith();
    try {
      // The upstream's resource identifier is its origin, not its URL: the token is for that.
      const origin = await servers.start({ resource: (url) => new URL(url).origin });
      expect(await whoami(p, declare("theta", origin))).toMatchObject({ client_id: "chaos-core", aud: new URL(origin).origin });
      // One that publishes none: its URL, as before.
      const bare = await servers.start({ metadata: false });
      expect(await whoami(p, declare("iota", bare))).toMatchObject({ aud: bare });

      const before = oidc.tokenRequests();
      const elsewhere = await servers.start({ authorizationServers: ["https://auth.elsewhere.example"] });
      const refused = await p.call(declare("kappa", elsewhere), ACME, "whoami", {}).then(
        () => undefined,
        (e: unknown) => e as ChaosError,
      );
      expect(refused?.code).toBe("permission_denied");
      expect(refused?.message).toMatch(/^upstream "kappa": its authorization server http:\/\/127\.0\.0\.1:\d+ gave no token: its protected resource metadata \(RFC 9728\) names the authorization servers https:\/\/auth\.elsewhere\.example, not the declared issuer; no token is requested$/);
      const foreign = await servers.start({ resource: () => "https://other.example/mcp" });
      const notCovering = await p.call(declare("lambda", foreign), ACME, "whoami", {}).then(
        () => undefined,
        (e: unknown) => e as ChaosError,
      );
      expect(notCovering?.message).toMatch(/names the resource https:\/\/other\.example\/mcp, which does not cover its URL$/);
      expect(oidc.tokenRequests()).toBe(before);
      expect(p.breakers().every((b) => b.state === "closed")).toBe(true);
    } finally {
      await p.close();
    }
  });

  it("reaches a tenant's issuer only through the address-guarded fetch its calls use: an internal one is refused, nothing requested", async () => {
    const url = await audienceServer();
    const decl = declare("epsilon", url);
    const p = createUpstreamPool({
      connect: { secrets: { env: { CHAOS_CORE_UPSTREAM_SECRET_CLIENT: SECRET } }, workDir: join(ROOT, ".cache", "upstream-auth-test"), version: "test" },
      logger: createLogger("upstream-auth-test", "silent"),
      perTenant: true,
      tokenFetch: (d) => guardedUpstreamFetch({ who: `upstream "${d.name}" of tenant "acme"`, allowedAddresses: [] }),
    });
    try {
      const before = oidc.tokenRequests();
      const err = await p.call(decl, ACME, "whoami", {}).then(
        () => undefined,
        (e: unknown) => e as ChaosError,
      );
      expect(err?.code).toBe("permission_denied");
      expect(err?.message).toMatch(/^upstream "epsilon": its authorization server http:\/\/127\.0\.0\.1:\d+ gave no token: no authorization server metadata for http:\/\/127\.0\.0\.1:\d+ \(.*upstream "epsilon" of tenant "acme"/);
      expect(oidc.tokenRequests()).toBe(before);
    } finally {
      await p.close();
    }
  });
});
