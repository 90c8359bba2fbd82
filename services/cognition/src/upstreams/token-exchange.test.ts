/**
 * RFC 8693 token exchange to upstreams (docs/federation-platform.md §3), through the pool
 * cognition calls upstreams with, against `oidc-provider` from npm on loopback. oidc-provider has
 * no token-exchange grant: test/support/oidc.ts registers one through its `registerGrantType`
 * (it looks the subject token up in the provider, refuses a revoked grant, and issues a JWT of the
 * same account for the one resource named). The subject tokens are the provider's own access
 * tokens of people signed in through another client; the upstreams are SDK Streamable HTTP
 * servers that verify every token against the provider's JWKS with their own URL as audience and
 * answer its subject.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ChaosError, createLogger, parseUpstreamsFile, withSubjectToken, type HttpUpstreamDeclaration } from "@chaos-core/kit";
import { ACCESS_TOKEN_TYPE, audienceServers, startOidcProvider, TOKEN_EXCHANGE, type AudienceServers, type OidcServer } from "../../../../test/support/oidc.js";
import { createUpstreamPool, MAX_PERSON_CONNECTIONS, type UpstreamPool } from "./pool.js";

const ROOT = new URL("../../../../", import.meta.url).pathname;
const SECRET = "a-client-secret-for-tests-only-0123456789";

let oidc: OidcServer;
let servers: AudienceServers;
const pools: UpstreamPool[] = [];

beforeAll(async () => {
  oidc = await startOidcProvider(SECRET);
  servers = audienceServers(oidc.issuer);
}, 30_000);

afterAll(async () => {
  for (const p of pools) await p.close();
  await servers.close();
  await oidc.close();
});

function declare(name: string, url: string, auth: Record<string, unknown> = {}): HttpUpstreamDeclaration {
  const [decl] = parseUpstreamsFile(
    JSON.stringify({
      upstreams: [{ name, url, auth: { type: "token_exchange", issuer: oidc.issuer, clientId: "chaos-core", clientSecret: { env: "CHAOS_CORE_UPSTREAM_SECRET_CLIENT" }, ...auth } }],
    }),
    "test",
  );
  return decl as HttpUpstreamDeclaration;
}

function poolWith(tokenMaxSeconds?: number): UpstreamPool {
  const p = createUpstreamPool({
    connect: { secrets: { env: { CHAOS_CORE_UPSTREAM_SECRET_CLIENT: SECRET } }, workDir: join(ROOT, ".cache", "token-exchange-test"), version: "test" },
    logger: createLogger("token-exchange-test", "silent"),
    ...(tokenMaxSeconds !== undefined ? { tokenMaxSeconds } : {}),
  });
  pools.push(p);
  return p;
}

/** A call context as the edge hands it on: the person's verified access token beside it, when they signed in with one. */
const caller = (tenant: string, principal: string, token?: string) => (token ? withSubjectToken({ tenant, principal }, token) : { tenant, principal });

type Who = { sub?: string; client_id?: string; act?: { sub?: string }; aud?: unknown };
const whoami = async (p: UpstreamPool, decl: HttpUpstreamDeclaration, who: ReturnType<typeof caller>) =>
  JSON.parse(((await p.call(decl, who, "whoami", {})).content[0] as { text: string }).text) as Who;
const refusal = (p: UpstreamPool, decl: HttpUpstreamDeclaration, who: ReturnType<typeof caller>) =>
  p.call(decl, who, "whoami", {}).then(
    () => undefined,
    (e: unknown) => e as ChaosError,
  );

describe("an upstream declared with RFC 8693 token exchange", () => {
  it("reaches the upstream as each person: A as A, B as B, cognition as the actor, the audience the upstream alone; one upstream's token refused by another", async () => {
    const [a, b] = [await servers.start(), await servers.start()];
    const alpha = declare("alpha", a);
    const beta = declare("beta", b);
    const alice = await oidc.signIn("alice");
    const bob = await oidc.signIn("bob");
    const p = poolWith();

    const [asAlice, asBob] = await Promise.all([whoami(p, alpha, caller("acme", "alice", alice.token)), whoami(p, alpha, caller("acme", "bob", bob.token))]);
    expect(asAlice).toEqual({ sub: "alice", client_id: "chaos-core", act: { sub: "chaos-core" }, aud: a });
    expect(asBob).toEqual({ sub: "bob", client_id: "chaos-core", act: { sub: "chaos-core" }, aud: a });
    expect(await whoami(p, beta, caller("acme", "alice", alice.token))).toMatchObject({ sub: "alice", aud: b });

    // The caller's own token is never what reaches the upstream: the upstream refuses it (not a JWT of its audience).
    const post = (url: string, token: string) => fetch(url, { method: "POST", headers: { authorization: `Bearer ${token}`, "content-type": "application/json" }, body: "{}" });
    expect((await post(a, alice.token)).status).toBe(401);
    // A token exchanged for one upstream is refused by the other (401 naming aud).
    const exchanged = await fetch(`${oidc.issuer}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", authorization: `Basic ${Buffer.from(`chaos-core:${SECRET}`).toString("base64")}` },
      body: new URLSearchParams({ grant_type: TOKEN_EXCHANGE, subject_token: alice.token, subject_token_type: ACCESS_TOKEN_TYPE, resource: a }),
    });
    const { access_token } = (await exchanged.json()) as { access_token: string };
    const refused = await post(b, access_token);
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toMatch(/aud/);
  });

  it("caches per tenant, principal, upstream and subject token: never one person's token for another, nor across tenants", async () => {
    const url = await servers.start();
    const decl = declare("gamma", url);
    const alice = await oidc.signIn("alice");
    const bob = await oidc.signIn("bob");
    const p = poolWith();
    const before = oidc.tokenRequests();
    await whoami(p, decl, caller("acme", "alice", alice.token));
    await whoami(p, decl, caller("acme", "alice", alice.token));
    expect(oidc.tokenRequests() - before).toBe(1);
    // Another person, and the same name in another tenant, each exchange their own.
    expect((await whoami(p, decl, caller("acme", "bob", bob.token))).sub).toBe("bob");
    expect(oidc.tokenRequests() - before).toBe(2);
    await whoami(p, decl, caller("globex", "alice", alice.token));
    expect(oidc.tokenRequests() - before).toBe(3);
    // Alice signed in again: her new token is exchanged, not the old one's answer reused.
    const again = await oidc.signIn("alice");
    await whoami(p, decl, caller("acme", "alice", again.token));
    expect(oidc.tokenRequests() - before).toBe(4);
    // One breaker for the upstream, whoever called.
    expect(p.breakers()).toEqual([expect.objectContaining({ upstream: "gamma", scope: "shared", state: "closed" })]);
  });

  it("exchanges again when the token expires, and stops a person whose grant was revoked within the bound", async () => {
    const url = await servers.start();
    const decl = declare("delta", url);
    const carol = await oidc.signIn("carol");
    oidc.setTokenTtl(2);
    const p = poolWith();
    try {
      const before = oidc.tokenRequests();
      await whoami(p, decl, caller("acme", "carol", carol.token));
      await new Promise((r) => setTimeout(r, 2_100));
      expect((await whoami(p, decl, caller("acme", "carol", carol.token))).sub).toBe("carol");
      expect(oidc.tokenRequests() - before).toBe(2);
    } finally {
      oidc.setTokenTtl(300);
    }

    // A 300 s exchanged token, used at most the bound (1 s here). The grant is revoked at the
    // provider: the token already held serves until the bound, then the next exchange is refused.
    const dave = await oidc.signIn("dave");
    const bounded = poolWith(1);
    expect((await whoami(bounded, decl, caller("acme", "dave", dave.token))).sub).toBe("dave");
    await oidc.revokeGrant(dave.grantId);
    await new Promise((r) => setTimeout(r, 1_100));
    for (let i = 0; i < 6; i++) {
      const err = await refusal(bounded, decl, caller("acme", "dave", dave.token));
      expect(err).toBeInstanceOf(ChaosError);
      expect(err?.code).toBe("permission_denied");
      expect(err?.message).toMatch(/^upstream "delta": its authorization server http:\/\/127\.0\.0\.1:\d+ gave no token: invalid_grant \(the subject's grant was revoked\)/);
    }
    // The upstream did nothing wrong: its breaker stays closed, and others are still served.
    expect(bounded.breakers()).toEqual([expect.objectContaining({ upstream: "delta", state: "closed", consecutiveFailures: 0 })]);
    expect((await whoami(bounded, decl, caller("acme", "carol", carol.token))).sub).toBe("carol");
  });

  it("refuses a caller without a subject token by default, naming the upstream; with fallback client_credentials calls as the machine identity", async () => {
    const url = await servers.start();
    const p = poolWith();
    const before = oidc.tokenRequests();
    const err = await refusal(p, declare("epsilon", url), caller("acme", "ci-bot"));
    expect(err?.code).toBe("permission_denied");
    expect(err?.message).toBe(
      `upstream "epsilon" acts as the calling person (token_exchange) and ci-bot's credential carries no access token to exchange (an API key, or the local user); its fallback is "refuse"`,
    );
    expect(oidc.tokenRequests()).toBe(before);

    const machine = await whoami(p, declare("zeta", url, { fallback: "client_credentials" }), caller("acme", "ci-bot"));
    expect(machine).toMatchObject({ sub: "chaos-core", client_id: "chaos-core", aud: url });
    expect(machine.act).toBeUndefined();
  });

  it("refuses a subject token the provider does not hold, and a declaration's fallback on client credentials", async () => {
    const url = await servers.start();
    const p = poolWith();
    const err = await refusal(p, declare("eta", url), caller("acme", "mallory", "not-a-token-the-provider-issued"));
    expect(err?.code).toBe("permission_denied");
    expect(err?.message).toMatch(/gave no token: invalid_grant \(the subject token is not active\)/);
    expect(() => parseUpstreamsFile(JSON.stringify({ upstreams: [{ name: "theta", url, auth: { type: "client_credentials", issuer: oidc.issuer, clientId: "c", clientSecret: { env: "CHAOS_CORE_UPSTREAM_SECRET_C" }, fallback: "refuse" } }] }), "upstreams.json")).toThrow(
      /upstreams\[0\]\.auth\.fallback: applies to type "token_exchange" only/,
    );
  });

  it(`keeps one connection per person, at most ${MAX_PERSON_CONNECTIONS} per upstream: the least recently used idle one is closed`, async () => {
    const url = await servers.start();
    const decl = declare("iota", url);
    const p = poolWith();
    const people = await Promise.all(Array.from({ length: MAX_PERSON_CONNECTIONS + 1 }, (_, i) => oidc.signIn(`person-${i}`)));
    const opened = servers.connections();
    for (const [i, person] of people.slice(0, MAX_PERSON_CONNECTIONS).entries()) expect((await whoami(p, decl, caller("acme", `person-${i}`, person.token))).sub).toBe(`person-${i}`);
    // Each person's own connection; a second call of one of them opens none.
    expect((await whoami(p, decl, caller("acme", "person-1", people[1]!.token))).sub).toBe("person-1");
    expect(servers.connections() - opened).toBe(MAX_PERSON_CONNECTIONS);
    // One more person: the least recently used (person-0's) is closed for theirs, so person-0 connects again; person-1 does not.
    expect((await whoami(p, decl, caller("acme", `person-${MAX_PERSON_CONNECTIONS}`, people[MAX_PERSON_CONNECTIONS]!.token))).sub).toBe(`person-${MAX_PERSON_CONNECTIONS}`);
    expect((await whoami(p, decl, caller("acme", "person-1", people[1]!.token))).sub).toBe("person-1");
    expect(servers.connections() - opened).toBe(MAX_PERSON_CONNECTIONS + 1);
    expect((await whoami(p, decl, caller("acme", "person-0", people[0]!.token))).sub).toBe("person-0");
    expect(servers.connections() - opened).toBe(MAX_PERSON_CONNECTIONS + 2);
  }, 60_000);
});
