import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, SKIP_BROWSER_TESTS } from "../support/browser.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { ISSUER_USER_COOKIE, startTestIssuer, type TestIssuer } from "../support/oauth-issuer.js";
import { httpClient, removeDir, ROOT, startServe, tempDir, type ServeProcess } from "../support/processes.js";

type Structured = Record<string, unknown>;
type Result = { isError?: boolean; structuredContent?: Structured; content: Array<{ type: string; text?: string }> };

/** Where the screenshots a person can look at are kept (a CI artifact, ignored by git), beside the other console tests'. */
const SCREENSHOTS = join(ROOT, "test-results", "console");

const RESOURCE = "https://chaos.test/mcp";

/**
 * "Sign in with <issuer>" on the approval console, in a real headless browser (Debian's chromium
 * driven by playwright-core), against `chaos-core serve` configured only by environment as an
 * OAuth resource server whose console has its own client at a real local issuer
 * (test/support/oauth-issuer.ts: the authorization code grant with PKCE, auto-approving the
 * person its cookie names). The console is opened as `localhost` and the issuer is `127.0.0.1`:
 * two sites, so the issuer's redirect back is a cross-site navigation, as in production, and
 * the cookies' SameSite rules are really exercised. An agent (an agent-only token) asks for a
 * step; a person holding the approver scope signs in through the issuer from the link the answer
 * gave, lands on that approval as the token's principal and approves it; the agent's step then
 * runs. An agent-only token, a wrong state and a token for another audience each get a page that
 * says why, and no session.
 */
describe.skipIf(SKIP_BROWSER_TESTS)("the approval console signs people in through the OAuth issuer", () => {
  const dir = tempDir("chaos-core-console-oauth-");
  let issuer: TestIssuer;
  let serve: ServeProcess;
  let browser: Browser;
  let agent: Client;
  /** The console's origin as the person opens it: `localhost`, another site than the issuer's 127.0.0.1. */
  let base: string;
  const contexts: BrowserContext[] = [];
  const dialogs: string[] = [];

  beforeAll(async () => {
    issuer = await startTestIssuer(RESOURCE);
    const dataDir = join(dir, "data");
    await seedDataDir(dataDir);
    writeFileSync(join(dataDir, "policy.json"), JSON.stringify({ requireConfirmationFor: ["memory.remember"] }));
    const secretFile = join(dir, "console-client-secret");
    writeFileSync(secretFile, issuer.webClient.secret);
    [serve, browser] = await Promise.all([
      startServe({
        CHAOS_CORE_DATA_DIR: dataDir,
        CHAOS_CORE_OAUTH_ISSUER: issuer.issuer,
        CHAOS_CORE_OAUTH_RESOURCE: RESOURCE,
        CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID: issuer.webClient.id,
        CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE: secretFile,
      }),
      launchChromium(),
    ]);
    base = `http://localhost:${new URL(serve.url).port}`;
    issuer.registerRedirectUri(`${base}/approvals/sign-in/oauth/callback`);
    issuer.addUser("carol", { claims: { sub: "carol", tenant: "default", scope: "chaoscore:approver" } });
    issuer.addUser("agent", { claims: { sub: "agent", tenant: "default", scope: "chaoscore:agent" } });
    issuer.addUser("forged", { claims: { sub: "carol", tenant: "default", scope: "chaoscore:approver" }, responseState: "forged-state" });
    issuer.addUser("elsewhere", { claims: { sub: "carol", tenant: "default", scope: "chaoscore:approver" }, audience: "https://elsewhere.test/mcp" });
    agent = await httpClient(serve.url, { authorization: `Bearer ${await issuer.sign({ sub: "agent", tenant: "default", scope: "chaoscore:agent" })}` });
    mkdirSync(SCREENSHOTS, { recursive: true });
  }, 120_000);

  afterAll(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await agent?.close();
    await serve?.stop();
    await issuer?.close();
    removeDir(dir);
  });

  /** A page in a browser context of its own, signed in at the issuer as `user` (the issuer's own session cookie). */
  async function personAtIssuer(user: string): Promise<Page> {
    const context = await browser.newContext();
    contexts.push(context);
    await context.addCookies([{ name: ISSUER_USER_COOKIE, value: user, url: issuer.issuer }]);
    const page = await context.newPage();
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    return page;
  }

  const call = async (client: Client, name: string, args: Structured) => (await client.callTool({ name, arguments: args })) as Result;
  const structured = (res: Result): Structured => {
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
    return res.structuredContent!;
  };

  /** The console's cookies in `page`'s browser, by name. */
  const consoleCookies = async (page: Page) => Object.fromEntries((await page.context().cookies(base)).map((c) => [c.name, c]));

  /** Opens the sign-in page and follows "Sign in with …" through the issuer and back. */
  async function signInThroughIssuer(page: Page): Promise<void> {
    await page.goto(`${base}/approvals`);
    expect(new URL(page.url()).pathname).toBe("/approvals/sign-in");
    await page.click("a.sign-in-oauth");
  }

  it("signs a person holding the approver scope in from an answer's link, and they approve the agent's step as themselves", async () => {
    const input = { key: "oauth-release", value: { service: "payments", window: "friday 18:00 UTC" } };
    const out = structured(await call(agent, "chaoscore_execute", { steps: [{ id: "s1", capability: "memory.remember", input }] }));
    const step = (out.results as Structured[])[0]!;
    expect(step.status).toBe("pending_approval");
    const id = (step.approval as { approval_id: string }).approval_id;

    const page = await personAtIssuer("carol");
    // The link an answer gives: not signed in, so to the sign-in page, which keeps where to go on.
    await page.goto(`${base}/approvals/step/${id}`);
    expect(new URL(page.url()).pathname).toBe("/approvals/sign-in");
    const button = page.locator("a.sign-in-oauth");
    await expect(button.textContent()).resolves.toBe(`Sign in with ${new URL(issuer.issuer).host}`);
    await page.screenshot({ path: join(SCREENSHOTS, "oauth-sign-in.png"), fullPage: true });

    await button.click();
    // Through the issuer and back, then on (by the landing page's own refresh) to the approval.
    await page.waitForURL(`${base}/approvals/step/${id}`);
    await expect(page.locator("header .who").textContent()).resolves.toContain("Signed in as carol in tenant default");
    // The flow's cookie is gone; the session's is Strict and HttpOnly, and holds no token.
    const cookies = await consoleCookies(page);
    expect(cookies["chaoscore-console-oauth"]).toBeUndefined();
    expect(cookies["chaoscore-console"]).toMatchObject({ sameSite: "Strict", httpOnly: true });
    expect(cookies["chaoscore-console"]!.value).toMatch(/^default\.[A-Za-z0-9_-]{43}$/);
    expect(cookies["chaoscore-console"]!.expires * 1000).toBeLessThanOrEqual(Date.now() + 301_000);

    const authorization = issuer.authorizationRequests.at(-1)!;
    expect(authorization).toMatchObject({ code_challenge_method: "S256", scope: "chaoscore:approver", resource: RESOURCE, redirect_uri: `${base}/approvals/sign-in/oauth/callback` });
    expect(issuer.codeRequests.at(-1)).toMatchObject({ status: 200, form: { grant_type: "authorization_code", code_verifier: "(sent)", resource: RESOURCE } });

    await expect(page.locator("table.rows").textContent()).resolves.toContain('"payments"');
    await page.click("button[name=decision][value=approve]");
    await expect(page.locator("h1.result").textContent()).resolves.toBe("Approved as carol (console)");
    // The ledger records the answer under the token's principal, from a console session.
    const entryRow = (name: string) => page.locator("table.entry tr", { has: page.locator("th", { hasText: new RegExp(`^${name}$`) }) }).locator("td");
    await expect(entryRow("principal").textContent()).resolves.toBe("carol");
    await expect(entryRow("session").textContent()).resolves.toMatch(/^console-[0-9a-f]{12}$/);
    await page.screenshot({ path: join(SCREENSHOTS, "oauth-step-approved.png"), fullPage: true });

    const ran = structured(await call(agent, "chaoscore_execute", { approval_id: id }));
    expect(ran).toMatchObject({ results: [{ status: "executed" }], approval: { status: "approved", resolved_by: "carol (console)" } });
    // The token the person signed in with is in no page, cookie or log line.
    const token = issuer.codeAccessTokens.at(-1)!;
    expect(await page.content()).not.toContain(token);
    expect(JSON.stringify(await page.context().cookies())).not.toContain(token);
    expect(serve.stderr()).not.toContain(token);
    expect(dialogs).toEqual([]);
  });

  it("opens no session for an agent-only token, and the page says it cannot approve", async () => {
    const page = await personAtIssuer("agent");
    await signInThroughIssuer(page);
    await expect(page.locator("h1").textContent()).resolves.toBe("This account cannot approve");
    await expect(page.locator("p.error").textContent()).resolves.toContain(
      "signed you in as agent (tenant default), but the access token it issued does not hold the chaoscore:approver scope. An agent's token cannot approve anything",
    );
    await page.screenshot({ path: join(SCREENSHOTS, "oauth-agent-refused.png"), fullPage: true });
    expect((await consoleCookies(page))["chaoscore-console"]).toBeUndefined();
    await page.goto(`${base}/approvals`);
    expect(new URL(page.url()).pathname).toBe("/approvals/sign-in");
  });

  it("refuses an answer whose state is not this browser's, and a token for another audience", async () => {
    // The answer that comes back carries another state than this browser's sign-in (as a forged
    // callback, or another browser's answer, would): the test issuer's user "forged" answers so.
    const page = await personAtIssuer("forged");
    const exchanges = issuer.codeRequests.length;
    await signInThroughIssuer(page);
    await expect(page.locator("p.error").textContent()).resolves.toContain("does not belong to the sign-in this browser started (its state does not match)");
    expect(new URL(page.url()).searchParams.get("state")).toBe("forged-state");
    expect(issuer.codeRequests.length).toBe(exchanges);
    expect((await consoleCookies(page))["chaoscore-console"]).toBeUndefined();
    await page.screenshot({ path: join(SCREENSHOTS, "oauth-wrong-state.png"), fullPage: true });

    const other = await personAtIssuer("elsewhere");
    await signInThroughIssuer(other);
    await expect(other.locator("p.error").textContent()).resolves.toContain("cannot be used here: the access token was not issued for this resource (aud)");
    expect((await consoleCookies(other))["chaoscore-console"]).toBeUndefined();
  });
});
