import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConsoleBrowser, type ConsoleReply } from "../../../../test/support/console-client.js";
import { recordingLogger } from "../../../../test/support/logger.js";
import { ISSUER_USER_COOKIE, startTestIssuer, type IssuerUser, type TestIssuer } from "../../../../test/support/oauth-issuer.js";
import { hashApiKey } from "../auth/api-keys.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { connectInMemory, uniqueTenant, type Connected } from "../test-support/in-memory.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { startHttpTransport, type RunningHttpTransport } from "../transport/http.js";
import { CONSOLE_CSP } from "./headers.js";
import { createMemoryConsoleSessionStore } from "./sessions.js";

// Signing in to the approval console through the edge's OAuth issuer (docs/auth.md, "The
// approval console"), at the HTTP level: a real local issuer (test/support/oauth-issuer.ts) with
// the authorization code grant and PKCE, the real HTTP transport and console, the real cognition
// and policy services. Every step of the redirect dance is made by hand here, so each refusal can
// be provoked exactly; test/e2e/console-oauth.browser.test.ts walks the same flow in chromium.

const RESOURCE = "https://mcp.chaos.test/mcp";
const tenant = uniqueTenant("oauth-console");

/** The people at the issuer: an approver, an agent, and the misbehaving answers of refusal tests. */
const USERS: Record<string, IssuerUser> = {
  carol: { claims: { sub: "carol", tenant, scope: "chaoscore:approver" } },
  agent: { claims: { sub: "agent-bot", tenant, scope: "chaoscore:agent" } },
  elsewhere: { claims: { sub: "carol", tenant, scope: "chaoscore:approver" }, audience: "https://other.example/mcp" },
  declines: { claims: { sub: "carol", tenant, scope: "chaoscore:approver" }, deny: "access_denied" },
  mixup: { claims: { sub: "carol", tenant, scope: "chaoscore:approver" }, responseIss: "https://evil.example" },
  brief: { claims: { sub: "carol", tenant, scope: "chaoscore:approver" }, expiresIn: 120 },
  reserved: { claims: { sub: "operator", tenant, scope: "chaoscore:approver" } },
  wrongNonce: { claims: { sub: "carol", tenant, scope: "chaoscore:approver" }, idTokenNonce: "not-the-one-sent" },
  otherSubject: { claims: { sub: "carol", tenant, scope: "chaoscore:approver" }, idTokenSubject: "mallory" },
};

const dir = mkdtempSync(join(tmpdir(), "edge-console-oauth-"));
const { logger, lines } = recordingLogger();
let services: TestServices;
let deps: EdgeDeps;
let issuer: TestIssuer;
let oidc: TestIssuer;
/** OAuth 2.1 issuer, the console's client there: "Sign in with …". */
let edge: RunningHttpTransport;
/** The same with an OpenID Connect issuer (nonce, ID token). */
let oidcEdge: RunningHttpTransport;
/** OAuth on /mcp, but no console client: no button. */
let noClientEdge: RunningHttpTransport;
/** No OAuth at all (API keys): no button. */
let keysEdge: RunningHttpTransport;
/** How far the console's session store clock is ahead of the wall clock (the expiry test moves it). */
let skewMs = 0;
const open: Connected[] = [];

const origin = (e: RunningHttpTransport) => new URL(e.url).origin;

beforeAll(async () => {
  [services, issuer, oidc] = await Promise.all([startTestServices("console_oauth"), startTestIssuer(RESOURCE), startTestIssuer(RESOURCE, { openid: true })]);
  deps = { ...services.deps(createMemorySessionStore()), logger };
  await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
  const secrets = { plain: join(dir, "console-secret"), oidc: join(dir, "console-secret-oidc") };
  writeFileSync(secrets.plain, `${issuer.webClient.secret}\n`);
  writeFileSync(secrets.oidc, oidc.webClient.secret);
  const keysFile = join(dir, "keys.json");
  writeFileSync(keysFile, JSON.stringify([{ tenant, principal: "alice", sha256: hashApiKey(randomBytes(24).toString("base64url")), roles: ["approver"] }]));
  [edge, oidcEdge, noClientEdge, keysEdge] = await Promise.all([
    startHttpTransport(deps, {
      port: 0,
      oauth: { issuer: issuer.issuer, resource: RESOURCE },
      console: {
        sessions: createMemoryConsoleSessionStore({ now: () => Date.now() + skewMs }),
        oauthClient: { clientId: issuer.webClient.id, clientSecretFile: secrets.plain },
      },
    }),
    startHttpTransport(deps, {
      port: 0,
      oauth: { issuer: oidc.issuer, resource: RESOURCE },
      console: { oauthClient: { clientId: oidc.webClient.id, clientSecretFile: secrets.oidc } },
    }),
    startHttpTransport(deps, { port: 0, oauth: { issuer: issuer.issuer, resource: RESOURCE }, console: {} }),
    startHttpTransport(deps, { port: 0, apiKeysFile: keysFile, console: {} }),
  ]);
  for (const [name, user] of Object.entries(USERS)) {
    issuer.addUser(name, user);
    oidc.addUser(name, user);
  }
  issuer.registerRedirectUri(`${origin(edge)}/approvals/sign-in/oauth/callback`);
  oidc.registerRedirectUri(`${origin(oidcEdge)}/approvals/sign-in/oauth/callback`);
});

afterAll(async () => {
  for (const c of open) await c.close().catch(() => undefined);
  await Promise.all([edge, oidcEdge, noClientEdge, keysEdge].map((e) => e?.close()));
  await Promise.all([issuer?.close(), oidc?.close()]);
  await services?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The part of the console answer a person reads: the main element's text, tags dropped. */
const mainText = (r: ConsoleReply) =>
  (/<main>([\s\S]*)<\/main>/.exec(r.body)?.[1] ?? r.body)
    .replace(/<[^>]+>/g, " ")
    .replace(/&#39;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&amp;/g, "&")
    .replace(/\s+/g, " ")
    .trim();

const setCookie = (r: ConsoleReply, name: string) => r.setCookies.find((c) => c.startsWith(`${name}=`));

/** Starts a sign-in from the console: the answer, and the authorization request it sends the browser to. */
async function start(b: ConsoleBrowser, query = ""): Promise<{ reply: ConsoleReply; authorize: URL }> {
  const reply = await b.get(`/approvals/sign-in/oauth${query}`);
  expect(reply.status, reply.body).toBe(303);
  return { reply, authorize: new URL(reply.headers.location!) };
}

/** The issuer's answer to an authorization request for `user` (signed in there by its cookie): the callback URL. */
async function authorizeAs(authorize: URL, user: string): Promise<URL> {
  const res = await fetch(authorize, { headers: { cookie: `${ISSUER_USER_COOKIE}=${user}` }, redirect: "manual" });
  expect(res.status, await res.clone().text()).toBe(302);
  return new URL(res.headers.get("location")!);
}

/** The browser following the issuer back to the console. */
const back = (b: ConsoleBrowser, callback: URL) => b.get(`${callback.pathname}${callback.search}`);

/** The whole flow for `user`: start, the issuer, back. */
async function signInAs(b: ConsoleBrowser, user: string, query = ""): Promise<ConsoleReply> {
  const { authorize } = await start(b, query);
  return back(b, await authorizeAs(authorize, user));
}

function ok<T>(res: CallToolResult): T {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  return res.structuredContent as T;
}

/** An agent's step that waits for a person, in the tenant: its approval id. */
async function pendingStep(input: Record<string, unknown>): Promise<string> {
  const c = await connectInMemory(deps, { tenant, principal: "agent-bot" });
  open.push(c);
  const out = ok<{ results: Array<{ status: string; approval?: { approval_id: string } }> }>(
    await c.call("chaoscore_execute", { steps: [{ id: "s1", capability: "memory.remember", input }] }),
  );
  expect(out.results[0]!.status).toBe("pending_approval");
  return out.results[0]!.approval!.approval_id;
}

describe("the sign-in page", () => {
  it("offers Sign in with the issuer when the console has a client there, and nothing of the kind otherwise", async () => {
    const page = await new ConsoleBrowser(origin(edge)).get("/approvals/sign-in");
    expect(page.status).toBe(200);
    const host = new URL(issuer.issuer).host;
    expect(page.body).toContain(`<a class="button sign-in-oauth" href="/approvals/sign-in/oauth">Sign in with ${host}</a>`);
    expect(mainText(page)).toContain(`Through the authorization server ${issuer.issuer}`);
    // No API keys here: no key form, and no claim that nobody can sign in.
    expect(page.body).not.toContain('name="api_key"');
    expect(page.body).not.toContain("nobody signs in with one");

    for (const other of [noClientEdge, keysEdge]) {
      const without = await new ConsoleBrowser(origin(other)).get("/approvals/sign-in");
      expect(without.status).toBe(200);
      expect(without.body).not.toContain("Sign in with");
      expect(without.body).not.toContain("/sign-in/oauth");
      const route = await new ConsoleBrowser(origin(other)).get("/approvals/sign-in/oauth");
      expect(route.status).toBe(404);
    }
  });
});

describe("signing in through the issuer", () => {
  it("runs the code flow with PKCE S256, state and the resource, and signs the token's principal in to its tenant", async () => {
    const b = new ConsoleBrowser(origin(edge));
    const { reply, authorize } = await start(b);
    // The flow cookie, the one Lax cookie: HttpOnly, short-lived, sealed (a JWE), never the verifier in clear.
    const flowCookie = setCookie(reply, "chaoscore-console-oauth")!;
    expect(flowCookie).toMatch(/^chaoscore-console-oauth=[A-Za-z0-9_-]+\.\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+; HttpOnly; SameSite=Lax; Path=\/; Max-Age=600$/);
    expect(reply.headers["content-security-policy"]).toBe(CONSOLE_CSP);

    expect(`${authorize.origin}${authorize.pathname}`).toBe(`${issuer.issuer}/authorize`);
    const q = Object.fromEntries(authorize.searchParams);
    expect(q).toEqual({
      response_type: "code",
      client_id: issuer.webClient.id,
      redirect_uri: `${origin(edge)}/approvals/sign-in/oauth/callback`,
      scope: "chaoscore:approver",
      state: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      code_challenge: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      code_challenge_method: "S256",
      resource: RESOURCE,
    });
    // Neither the state nor the challenge's verifier is readable in the cookie.
    expect(flowCookie).not.toContain(q.state);

    const callback = await authorizeAs(authorize, "carol");
    expect(callback.searchParams.get("iss")).toBe(issuer.issuer);
    const landed = await back(b, callback);
    expect(landed.status, landed.body).toBe(200);
    expect(mainText(landed)).toContain(`Signed in as carol in tenant ${tenant}`);
    // The next page is reached by the page's own refresh (a same-site navigation that sends the Strict cookie).
    expect(landed.body).toContain('<meta http-equiv="refresh" content="0; url=/approvals">');
    const session = setCookie(landed, "chaoscore-console")!;
    expect(session).toMatch(new RegExp(`^chaoscore-console=${tenant}\\.[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=/; Max-Age=\\d+$`));
    expect(Number(/Max-Age=(\d+)/.exec(session)![1])).toBeLessThanOrEqual(300);
    expect(setCookie(landed, "chaoscore-console-oauth")).toMatch(/SameSite=Lax; Path=\/; Max-Age=0/);

    // The token was exchanged as a confidential client with the verifier and the resource.
    const exchange = issuer.codeRequests.at(-1)!;
    expect(exchange).toMatchObject({
      status: 200,
      form: { grant_type: "authorization_code", redirect_uri: `${origin(edge)}/approvals/sign-in/oauth/callback`, resource: RESOURCE, code_verifier: "(sent)" },
    });

    const list = await b.get("/approvals");
    expect(list.status).toBe(200);
    expect(mainText(list)).toContain(`wait for a person in tenant ${tenant}`);
    expect(list.body).toContain(`Signed in as <strong>carol</strong> in tenant <strong>${tenant}</strong>`);

    // The access token is nowhere: no answer, cookie or log line holds it.
    const token = issuer.codeAccessTokens.at(-1)!;
    for (const r of [reply, landed, list]) {
      expect(r.body).not.toContain(token);
      expect(r.setCookies.join("\n")).not.toContain(token);
    }
    expect(JSON.stringify(lines)).not.toContain(token);
    expect(lines.find((l) => l.msg === "console sign-in" && l.principal === "carol")).toMatchObject({ tenant, via: "OAuth" });
  });

  it("lets the person approve another principal's pending step as themselves", async () => {
    const id = await pendingStep({ key: "oauth-approved", value: "by carol" });
    const b = new ConsoleBrowser(origin(edge));
    // The link an answer gives, opened before signing in, leads back to the approval.
    const gated = await b.get(`/approvals/step/${id}`);
    expect(gated.status).toBe(303);
    expect(gated.headers.location).toBe(`/approvals/sign-in?next=${encodeURIComponent(`/step/${id}`)}`);
    const page = await b.get(gated.headers.location!);
    expect(page.body).toContain(`href="/approvals/sign-in/oauth?next=${encodeURIComponent(`/step/${id}`)}"`);
    const landed = await signInAs(b, "carol", `?next=${encodeURIComponent(`/step/${id}`)}`);
    expect(landed.body).toContain(`url=/approvals/step/${id}`);

    const csrf = ConsoleBrowser.field((await b.get(`/approvals/step/${id}`)).body, "csrf");
    const answered = await b.post(`/approvals/step/${id}`, { form: { csrf, decision: "approve" } });
    expect(answered.status, answered.body).toBe(200);
    expect(mainText(answered)).toContain("Approved as carol (console)");
    const approval = await deps.cognition.getApproval({ approvalId: id }, { ctx: { tenant, principal: "agent-bot" } });
    expect(approval).toMatchObject({ status: "approved", resolutionChannel: "console" });
    expect(approval.resolvedBy).toContain("carol");
  });

  it("ends the session when the access token expires, however recent the last request", async () => {
    const b = new ConsoleBrowser(origin(edge));
    expect((await signInAs(b, "brief")).status).toBe(200);
    expect((await b.get("/approvals")).status).toBe(200);
    skewMs = 121_000;
    try {
      const after = await b.get("/approvals");
      expect(after.status).toBe(303);
      expect(after.headers.location).toBe("/approvals/sign-in");
    } finally {
      skewMs = 0;
    }
  });
});

describe("refusals", () => {
  it("refuses an answer whose state is not this browser's, before any code is exchanged", async () => {
    const b = new ConsoleBrowser(origin(edge));
    const { authorize } = await start(b);
    const callback = await authorizeAs(authorize, "carol");
    const exchanges = issuer.codeRequests.length;
    callback.searchParams.set("state", "an-attackers-state");
    const refused = await back(b, callback);
    expect(refused.status).toBe(400);
    expect(mainText(refused)).toContain("does not belong to the sign-in this browser started (its state does not match)");
    expect(issuer.codeRequests.length).toBe(exchanges);
    expect(setCookie(refused, "chaoscore-console")).toBeUndefined();
    // The flow is over: even the right state cannot be used with it now.
    callback.searchParams.set("state", authorize.searchParams.get("state")!);
    expect((await back(b, callback)).status).toBe(400);
  });

  it("refuses a callback from a browser that started no sign-in, or with a cookie this server did not seal", async () => {
    const a = new ConsoleBrowser(origin(edge));
    const { authorize } = await start(a);
    const callback = await authorizeAs(authorize, "carol");
    // Another browser (no flow cookie: no state, no PKCE verifier) is given the callback.
    const other = new ConsoleBrowser(origin(edge));
    const refused = await back(other, callback);
    expect(refused.status).toBe(400);
    expect(mainText(refused)).toContain("This browser has no sign-in in progress here");
    // A cookie that is not a sealed flow of this server.
    // One character of the ciphertext changed (not the last of a segment, whose low bits are padding).
    const parts = a.jar.get("chaoscore-console-oauth")!.split(".");
    parts[3] = `${parts[3]![0] === "A" ? "B" : "A"}${parts[3]!.slice(1)}`;
    other.jar.set("chaoscore-console-oauth", parts.join("."));
    const forged = await back(other, callback);
    expect(forged.status).toBe(400);
    expect(mainText(forged)).toContain("This browser's sign-in cookie is not one this server made");
    expect(setCookie(forged, "chaoscore-console")).toBeUndefined();
  });

  it("refuses a code issued to another sign-in: the PKCE verifier does not match (an injected code)", async () => {
    // The attacker's own sign-in yields a code bound to their code challenge…
    const attacker = new ConsoleBrowser(origin(edge));
    const stolen = (await authorizeAs((await start(attacker)).authorize, "carol")).searchParams.get("code")!;
    // …injected into the victim's callback, with the victim's own state (which a state check alone would pass).
    const victim = new ConsoleBrowser(origin(edge));
    const callback = await authorizeAs((await start(victim)).authorize, "carol");
    callback.searchParams.set("code", stolen);
    const refused = await back(victim, callback);
    expect(refused.status).toBe(400);
    expect(mainText(refused)).toContain(`${issuer.issuer} refused to exchange the code for a token: invalid_grant (PKCE verification failed)`);
    expect(issuer.codeRequests.at(-1)).toMatchObject({ status: 400, error: "invalid_grant", form: { code_verifier: "(sent)" } });
    expect(setCookie(refused, "chaoscore-console")).toBeUndefined();
  });

  it("the issuer itself refuses a code without its PKCE verifier (what the console always sends)", async () => {
    const code = (await authorizeAs((await start(new ConsoleBrowser(origin(edge)))).authorize, "carol")).searchParams.get("code")!;
    const res = await fetch(`${issuer.issuer}/token`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${Buffer.from(`${issuer.webClient.id}:${issuer.webClient.secret}`).toString("base64")}`,
      },
      body: new URLSearchParams({ grant_type: "authorization_code", code, redirect_uri: `${origin(edge)}/approvals/sign-in/oauth/callback` }),
    });
    expect(res.status).toBe(400);
    expect(await res.json()).toEqual({ error: "invalid_grant", error_description: "code_verifier is required (PKCE)" });
  });

  it("refuses a token issued for another audience, with the verifier's reason", async () => {
    const refused = await signInAs(new ConsoleBrowser(origin(edge)), "elsewhere");
    expect(refused.status).toBe(403);
    expect(mainText(refused)).toContain(`The access token ${issuer.issuer} issued cannot be used here: the access token was not issued for this resource (aud)`);
    expect(setCookie(refused, "chaoscore-console")).toBeUndefined();
  });

  it("refuses a token of a reserved principal, as /mcp does", async () => {
    const refused = await signInAs(new ConsoleBrowser(origin(edge)), "reserved");
    expect(refused.status).toBe(403);
    expect(mainText(refused)).toContain('the access token\'s subject "operator" is reserved');
  });

  it("opens no session for an agent-only token, and says why", async () => {
    const b = new ConsoleBrowser(origin(edge));
    const refused = await signInAs(b, "agent");
    expect(refused.status).toBe(403);
    const text = mainText(refused);
    expect(text).toContain("This account cannot approve");
    expect(text).toContain(`signed you in as agent-bot (tenant ${tenant}), but the access token it issued does not hold the chaoscore:approver scope`);
    expect(text).toContain("An agent's token cannot approve anything, so no console session was opened.");
    expect(setCookie(refused, "chaoscore-console")).toBeUndefined();
    expect((await b.get("/approvals")).status).toBe(303);
  });

  it("says the issuer declined, and refuses an answer naming another issuer (a mix-up)", async () => {
    const declined = await signInAs(new ConsoleBrowser(origin(edge)), "declines");
    expect(declined.status).toBe(403);
    expect(mainText(declined)).toContain(`${issuer.issuer} did not sign you in: access_denied (the user declined)`);

    const exchanges = issuer.codeRequests.length;
    const mixup = await signInAs(new ConsoleBrowser(origin(edge)), "mixup");
    expect(mixup.status).toBe(400);
    expect(mainText(mixup)).toContain(`The answer that came back is not ${issuer.issuer}'s`);
    expect(mainText(mixup)).toContain('"iss"');
    expect(issuer.codeRequests.length).toBe(exchanges);
  });
});

describe("with an OpenID Connect issuer", () => {
  it("asks for openid with a nonce, checks the ID token, and signs the person in", async () => {
    const b = new ConsoleBrowser(origin(oidcEdge));
    const { authorize } = await start(b);
    expect(authorize.searchParams.get("scope")).toBe("openid chaoscore:approver");
    expect(authorize.searchParams.get("nonce")).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const landed = await back(b, await authorizeAs(authorize, "carol"));
    expect(landed.status, landed.body).toBe(200);
    expect(mainText(landed)).toContain(`Signed in as carol in tenant ${tenant}`);
  });

  it("refuses an ID token with another nonce, or naming another subject than the access token", async () => {
    const wrongNonce = await signInAs(new ConsoleBrowser(origin(oidcEdge)), "wrongNonce");
    expect(wrongNonce.status).toBe(502);
    expect(mainText(wrongNonce)).toContain("token response cannot be used");
    expect(mainText(wrongNonce)).toContain('"nonce"');
    expect(setCookie(wrongNonce, "chaoscore-console")).toBeUndefined();

    const otherSubject = await signInAs(new ConsoleBrowser(origin(oidcEdge)), "otherSubject");
    expect(otherSubject.status).toBe(403);
    expect(mainText(otherSubject)).toContain("ID token and access token name different subjects");
    expect(setCookie(otherSubject, "chaoscore-console")).toBeUndefined();
  });
});
