import { randomBytes } from "node:crypto";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { ApprovalChannel } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { API_KEYS_RECHECK_MS, hashApiKey } from "../auth/api-keys.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { ConsoleBrowser } from "../../../../test/support/console-client.js";
import { connectInMemory, uniqueTenant, type Connected } from "../test-support/in-memory.js";
import { startTestLedger, type TestLedger } from "../test-support/ledger.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { startHttpTransport, type RunningHttpTransport } from "../transport/http.js";
import { CONSOLE_CSP } from "./headers.js";
import { NOT_AN_APPROVER } from "./sign-in-routes.js";
import { createSignInLinks, SIGN_IN_LINK_TTL_SECONDS, type SignInLinks } from "./sign-in-links.js";

// The approval console at the HTTP level, against the real cognition, policy and ledger services
// behind the real HTTP transport: every refusal of docs/approvals.md §2, cookies, headers, and
// that a person sees their own tenant's approvals only. No browser here (console.browser.test.ts).

const newKey = () => randomBytes(24).toString("base64url");
const acme = uniqueTenant("acme");
const globex = uniqueTenant("globex");
/** A tenant whose policy accepts no console answer for memory.remember. */
const initech = uniqueTenant("initech");
const keys = { alice: newKey(), agent: newKey(), bob: newKey(), carol: newKey(), dave: newKey() };
const entries = {
  alice: { tenant: acme, principal: "alice", sha256: hashApiKey(keys.alice), roles: ["approver"] },
  agent: { tenant: acme, principal: "agent", sha256: hashApiKey(keys.agent) },
  bob: { tenant: globex, principal: "bob", sha256: hashApiKey(keys.bob), roles: ["approver"] },
  carol: { tenant: acme, principal: "carol", sha256: hashApiKey(keys.carol), roles: ["approver"] },
  dave: { tenant: initech, principal: "dave", sha256: hashApiKey(keys.dave), roles: ["approver"] },
};

const dir = mkdtempSync(join(tmpdir(), "edge-console-"));
const keysFile = join(dir, "keys.json");
let services: TestServices;
let ledger: TestLedger;
let deps: EdgeDeps;
let edge: RunningHttpTransport;
let links: SignInLinks;
let linkClock = Date.now();
let base: string;
const open: Connected[] = [];

/** How an operator's tooling writes the keys file; resolves once the edge takes it in for every request. */
async function writeKeys(list: readonly object[]): Promise<void> {
  writeFileSync(`${keysFile}.tmp`, JSON.stringify(list));
  renameSync(`${keysFile}.tmp`, keysFile);
  await new Promise((r) => setTimeout(r, API_KEYS_RECHECK_MS + 10));
}

function ok<T>(res: CallToolResult): T {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  return res.structuredContent as T;
}

/** An agent of `tenant` whose step waits for approval; resolves with the approval id. */
async function pendingStep(tenant: string, input: Record<string, unknown>): Promise<string> {
  const c = await connectInMemory(deps, { tenant, principal: "agent" });
  open.push(c);
  const out = ok<{ results: Array<{ status: string; approval?: { approval_id: string } }> }>(
    await c.call("chaoscore_execute", { steps: [{ id: "s1", capability: "memory.remember", input }] }),
  );
  expect(out.results[0]!.status).toBe("pending_approval");
  return out.results[0]!.approval!.approval_id;
}

/** An agent of `tenant` (principal `principal`) whose step waits for approval, and its connection. */
async function agentWithStep(tenant: string, input: Record<string, unknown>, principal = "agent"): Promise<{ agent: Connected; id: string }> {
  const agent = await connectInMemory(deps, { tenant, principal });
  open.push(agent);
  const out = ok<{ results: Array<{ status: string; approval?: { approval_id: string } }> }>(
    await agent.call("chaoscore_execute", { steps: [{ id: "s1", capability: "memory.remember", input }] }),
  );
  expect(out.results[0]!.status).toBe("pending_approval");
  return { agent, id: out.results[0]!.approval!.approval_id };
}

/** An agent of `tenant` whose spend (evaluate_spend_gate, equity) waits for a person, and its connection. */
async function agentWithSpend(tenant: string): Promise<{ agent: Connected; seq: number }> {
  const agent = await connectInMemory(deps, { tenant, principal: "agent" });
  open.push(agent);
  const gate = ok<{ state: string; ledger_seq: number }>(
    await agent.call("evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: 300, confidence: 0.9 } }),
  );
  expect(gate.state).toBe("HITL_REQUIRED");
  return { agent, seq: gate.ledger_seq };
}

/** A POST of the approval's answer form, as the page sends it. */
async function answer(b: ConsoleBrowser, path: string, decision: string, extra: Record<string, string> = {}) {
  const csrf = ConsoleBrowser.field((await b.get(path)).body, "csrf");
  return b.post(path, { form: { csrf, decision, ...extra } });
}

/** Whether a step approval still waits, as cognition says. */
async function stepStatus(tenant: string, id: string): Promise<string> {
  return (await deps.cognition.getApproval({ approvalId: id, channel: ApprovalChannel.CONSOLE }, { ctx: { tenant, principal: "alice" } })).status;
}

async function pendingSpend(tenant: string): Promise<number> {
  const c = await connectInMemory(deps, { tenant, principal: "agent" });
  open.push(c);
  const gate = ok<{ state: string; ledger_seq: number }>(
    await c.call("evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: 300, confidence: 0.9 } }),
  );
  expect(gate.state).toBe("HITL_REQUIRED");
  return gate.ledger_seq;
}

beforeAll(async () => {
  // Cognition's audit goes to the ledger too, as in chaos-core serve: an answer's entry is shown.
  services = await startTestServices("console_router", { auditLedger: () => ledger?.client });
  ledger = await startTestLedger("console_router", undefined, services.policy);
  deps = { ...services.deps(createMemorySessionStore()), ledger: ledger.client };
  for (const t of [acme, globex]) await services.putPolicy(t, { requireConfirmationFor: ["memory.remember"] });
  await services.putPolicy(initech, {
    requireConfirmationFor: ["memory.remember"],
    approvalChannels: { capabilities: { "memory.remember": { channels: ["APPROVAL_CHANNEL_APPROVER", "APPROVAL_CHANNEL_OPERATOR"] } } },
  });
  writeFileSync(keysFile, JSON.stringify(Object.values(entries)));
  links = createSignInLinks({ now: () => linkClock });
  edge = await startHttpTransport(deps, { host: "127.0.0.1", port: 0, apiKeysFile: keysFile, console: { signInLinks: links } });
  base = `http://127.0.0.1:${edge.port}`;
});

afterAll(async () => {
  for (const c of open) await c.close();
  await edge?.close();
  await ledger?.close();
  await services?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the approval console: sign-in", () => {
  it("sends a person who is not signed in to the sign-in page, with a pre-session cookie for its form", async () => {
    const b = new ConsoleBrowser(base);
    const list = await b.get("/approvals");
    expect(list.status).toBe(303);
    expect(list.headers.location).toBe("/approvals/sign-in");
    const page = await b.get("/approvals/sign-in");
    expect(page.status).toBe(200);
    expect(page.body).toContain('<input id="api_key" name="api_key" type="password"');
    expect(page.setCookies).toEqual([expect.stringMatching(/^chaoscore-console-sign-in=[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=\/; Max-Age=600$/)]);
    expect(edge.consoleUrl).toBe(`${base}/approvals`);
  });

  it("signs an approver in with a session cookie: HttpOnly, SameSite=Strict, Path=/, Max-Age 8 h, no Secure on http", async () => {
    const b = new ConsoleBrowser(base);
    const signedIn = await b.signIn(keys.alice);
    expect(signedIn.status).toBe(303);
    expect(signedIn.headers.location).toBe("/approvals");
    const session = signedIn.setCookies.find((c) => c.startsWith("chaoscore-console="));
    expect(session).toMatch(new RegExp(`^chaoscore-console=${acme}\\.[A-Za-z0-9_-]{43}; HttpOnly; SameSite=Strict; Path=/; Max-Age=28800$`));
    // The pre-session cookie is cleared.
    expect(signedIn.setCookies).toContain("chaoscore-console-sign-in=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");
    const list = await b.get("/approvals");
    expect(list.status).toBe(200);
    expect(list.body).toContain(`Signed in as <strong>alice</strong> in tenant <strong>${acme}</strong>`);
  });

  it("goes on to the approval a link opened once signed in, and nowhere else", async () => {
    const id = await pendingStep(acme, { key: "next-page", value: "v" });
    const b = new ConsoleBrowser(base);
    const opened = await b.get(`/approvals/step/${id}`);
    expect(opened.status).toBe(303);
    expect(opened.headers.location).toBe(`/approvals/sign-in?next=${encodeURIComponent(`/step/${id}`)}`);
    const signedIn = await b.signIn(keys.alice, opened.headers.location);
    expect(signedIn.headers.location).toBe(`/approvals/step/${id}`);
    expect((await b.get(`/approvals/step/${id}`)).body).toContain("<pre>&quot;next-page&quot;</pre>");
    // Anything but an approval's page is dropped: no open redirect.
    for (const next of ["https://evil.example/", "//evil.example", "/sign-out", `/step/${id}/../../x`]) {
      const other = new ConsoleBrowser(base);
      const page = await other.get(`/approvals/sign-in?next=${encodeURIComponent(next)}`);
      expect(page.body, next).not.toContain('name="next"');
      const form = { ...ConsoleBrowser.hiddenFields(page.body), next, api_key: keys.alice };
      expect((await other.post("/approvals/sign-in", { form })).headers.location, next).toBe("/approvals");
    }
  });

  it("refuses the agent's own key: it holds no approver role", async () => {
    const b = new ConsoleBrowser(base);
    const refused = await b.signIn(keys.agent);
    expect(refused.status).toBe(403);
    expect(refused.body).toContain(NOT_AN_APPROVER.replace("'", "&#39;"));
    expect(NOT_AN_APPROVER).toBe("this key does not hold the approver role: an agent's key cannot sign in here");
    expect(refused.setCookies.some((c) => c.startsWith("chaoscore-console="))).toBe(false);
    expect((await b.get("/approvals")).status).toBe(303);
  });

  it("refuses a key that is not valid", async () => {
    const b = new ConsoleBrowser(base);
    const refused = await b.signIn("not-a-key");
    expect(refused.status).toBe(401);
    expect(refused.body).toContain("The API key is not valid.");
  });

  it("refuses a sign-in without the form's CSRF token, or with one made for another cookie", async () => {
    const b = new ConsoleBrowser(base);
    await b.get("/approvals/sign-in");
    const without = await b.post("/approvals/sign-in", { form: { api_key: keys.alice } });
    expect(without.status).toBe(403);
    expect(without.body).toContain("did not come from this page");
    const other = new ConsoleBrowser(base);
    const token = ConsoleBrowser.field((await other.get("/approvals/sign-in")).body, "csrf");
    const swapped = await b.post("/approvals/sign-in", { form: { csrf: token, api_key: keys.alice } });
    expect(swapped.status).toBe(403);
    expect(swapped.setCookies.some((c) => c.startsWith("chaoscore-console="))).toBe(false);
  });

  it("ends the session at once when its key is removed, or loses the approver role, and it stays ended", async () => {
    const b = new ConsoleBrowser(base);
    expect((await b.signIn(keys.carol)).status).toBe(303);
    expect((await b.get("/approvals")).status).toBe(200);
    try {
      await writeKeys(Object.values(entries).filter((e) => e.principal !== "carol"));
      const ended = await b.get("/approvals");
      expect(ended.status).toBe(401);
      expect(ended.body).toContain("Your session ended: the API key you signed in with was removed, or no longer holds the approver role.");
      expect(ended.setCookies).toContain("chaoscore-console=; HttpOnly; SameSite=Strict; Path=/; Max-Age=0");

      // The key back, without the role: it cannot sign in again, and the old cookie is dead.
      await writeKeys([...Object.values(entries).filter((e) => e.principal !== "carol"), { ...entries.carol, roles: [] }]);
      expect((await b.signIn(keys.carol)).status).toBe(403);
      await writeKeys(Object.values(entries));
      const stale = new ConsoleBrowser(base);
      expect((await stale.signIn(keys.carol)).status).toBe(303);
      const cookie = [...stale.jar].find(([k]) => k === "chaoscore-console")!;
      await writeKeys([...Object.values(entries).filter((e) => e.principal !== "carol"), { ...entries.carol, roles: [] }]);
      expect((await stale.get("/approvals")).status).toBe(401);
      await writeKeys(Object.values(entries));
      const replay = new ConsoleBrowser(base);
      replay.jar.set(cookie[0], cookie[1]);
      expect((await replay.get("/approvals")).status).toBe(303);
    } finally {
      await writeKeys(Object.values(entries));
    }
  });

  it("signs out with the session's CSRF token only", async () => {
    const b = new ConsoleBrowser(base);
    await b.signIn(keys.alice);
    const csrf = await b.sessionCsrf();
    const forged = await b.post("/approvals/sign-out", { form: {} });
    expect(forged.status).toBe(403);
    expect(forged.body).toContain("CSRF token is missing");
    expect((await b.post("/approvals/sign-out", { form: { csrf: "x".repeat(43) } })).status).toBe(403);
    expect((await b.get("/approvals")).status).toBe(200);
    const out = await b.post("/approvals/sign-out", { form: { csrf } });
    expect(out.status).toBe(303);
    expect(out.headers.location).toBe("/approvals/sign-in");
    expect((await b.get("/approvals")).status).toBe(303);
  });
});

describe("the approval console: Origin, Host, body", () => {
  it("refuses a POST with a foreign Origin or none", async () => {
    const b = new ConsoleBrowser(base);
    const csrf = ConsoleBrowser.field((await b.get("/approvals/sign-in")).body, "csrf");
    const foreign = await b.post("/approvals/sign-in", { origin: "https://evil.example", form: { csrf, api_key: keys.alice } });
    expect(foreign.status).toBe(403);
    expect(foreign.setCookies.some((c) => c.startsWith("chaoscore-console="))).toBe(false);
    const none = await b.post("/approvals/sign-in", { origin: null, form: { csrf, api_key: keys.alice } });
    expect(none.status).toBe(403);
    expect(none.body).toContain("it carries no Origin header");
    // Another loopback origin is not this console's either.
    const sibling = await b.post("/approvals/sign-in", { origin: "http://127.0.0.1:1", form: { csrf, api_key: keys.alice } });
    expect(sibling.status).toBe(403);
    // A signed-in session's form is refused the same way.
    await b.signIn(keys.alice);
    const sessionCsrf = await b.sessionCsrf();
    expect((await b.post("/approvals/sign-out", { origin: "https://evil.example", form: { csrf: sessionCsrf } })).status).toBe(403);
    expect((await b.get("/approvals")).status).toBe(200);
  });

  it("refuses a foreign Host (DNS rebinding) and a GET from a foreign Origin, as /mcp does", async () => {
    const b = new ConsoleBrowser(base);
    await b.signIn(keys.alice);
    for (const path of ["/approvals", "/approvals/sign-in", "/approvals/console.css"]) {
      expect((await b.get(path, { host: "evil.example" })).status, path).toBe(403);
      expect((await b.get(path, { host: `evil.example:${edge.port}` })).status, path).toBe(403);
    }
    const page = await b.get("/approvals/sign-in");
    const csrf = ConsoleBrowser.field(page.body, "csrf");
    expect((await b.post("/approvals/sign-in", { host: "evil.example", origin: "http://evil.example", form: { csrf, api_key: keys.alice } })).status).toBe(403);
    expect((await b.get("/approvals", { origin: "https://evil.example" })).status).toBe(403);
    // localhost is the same machine, and its own origin.
    const local = new ConsoleBrowser(`http://localhost:${edge.port}`);
    expect((await local.signIn(keys.alice)).status).toBe(303);
  });

  it("takes only url-encoded forms of at most 8 KiB", async () => {
    const b = new ConsoleBrowser(base);
    const csrf = ConsoleBrowser.field((await b.get("/approvals/sign-in")).body, "csrf");
    const json = await b.post("/approvals/sign-in", { body: { type: "application/json", text: JSON.stringify({ csrf, api_key: keys.alice }) } });
    expect(json.status).toBe(415);
    const big = await b.post("/approvals/sign-in", { form: { csrf, api_key: keys.alice, pad: "x".repeat(9 * 1024) } });
    expect(big.status).toBe(413);
  });
});

describe("the approval console: headers", () => {
  it("sends the exact CSP, nosniff, same-origin referrers, DENY and no-store on every page", async () => {
    const b = new ConsoleBrowser(base);
    await b.signIn(keys.alice);
    const id = await pendingStep(acme, { key: "headers", value: "v" });
    const pages = ["/approvals", "/approvals/sign-in", "/approvals/console.css", `/approvals/step/${id}`, "/approvals/nothing-here", "/approvals/sign-in/link?t=x"];
    for (const path of pages) {
      const r = await b.get(path);
      expect(r.headers["content-security-policy"], path).toBe(
        "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
      );
      expect(r.headers["x-content-type-options"], path).toBe("nosniff");
      expect(r.headers["referrer-policy"], path).toBe("same-origin");
      expect(r.headers["x-frame-options"], path).toBe("DENY");
      expect(r.headers["cache-control"], path).toBe("no-store");
      if (path !== "/approvals/console.css") {
        expect(r.headers["content-type"], path).toBe("text/html; charset=utf-8");
        expect(r.body, path).not.toMatch(/<script|\sstyle=|\son[a-z]+=/i);
      }
    }
    expect(CONSOLE_CSP).toBe("default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
    expect((await b.get("/approvals/console.css")).headers["content-type"]).toBe("text/css; charset=utf-8");
  });
});

describe("the approval console: what a person sees", () => {
  it("lists the signed-in tenant's pending steps and spend requests, never another tenant's", async () => {
    const mine = await pendingStep(acme, { key: "acme-deploy", value: "friday" });
    const theirs = await pendingStep(globex, { key: "globex-secret", value: "theirs" });
    const mySpend = await pendingSpend(acme);
    const theirSpend = await pendingSpend(globex);

    const alice = new ConsoleBrowser(base);
    await alice.signIn(keys.alice);
    const list = await alice.get("/approvals");
    expect(list.status).toBe(200);
    expect(list.body).toContain(`href="/approvals/step/${mine}"`);
    expect(list.body).toContain(`href="/approvals/spend/${mySpend}"`);
    expect(list.body).not.toContain(theirs);
    expect(list.body).toContain("<code>memory.remember</code>");
    expect(list.body).toContain("<code>evaluate_spend_gate</code> <span class=\"muted\">policy equity</span>");
    // Their spend's seq may equal one of ours (each tenant's ledger counts its own): it is absent by tenant.
    const bob = new ConsoleBrowser(base);
    await bob.signIn(keys.bob);
    const theirList = await bob.get("/approvals");
    expect(theirList.body).toContain(`href="/approvals/step/${theirs}"`);
    expect(theirList.body).toContain(`href="/approvals/spend/${theirSpend}"`);
    expect(theirList.body).not.toContain(mine);

    // Another tenant's approval is not found, not shown.
    const other = await alice.get(`/approvals/step/${theirs}`);
    expect(other.status).toBe(404);
    expect(other.body).not.toContain("globex-secret");
  });

  it("shows a step whole: every argument escaped, the policy decision, the hash, the requester and the channels", async () => {
    const hostile = `<script>alert(1)</script>"><img src=x onerror=alert(1)>`;
    const id = await pendingStep(acme, { key: "hostile", value: hostile });
    const b = new ConsoleBrowser(base);
    await b.signIn(keys.alice);
    const page = await b.get(`/approvals/step/${id}`);
    expect(page.status).toBe(200);
    expect(page.body).not.toContain("<script>");
    expect(page.body).not.toContain("<img");
    // The value as JSON text (its inner quote escaped as \"), then as HTML text.
    expect(page.body).toContain("<pre>&quot;&lt;script&gt;alert(1)&lt;/script&gt;\\&quot;&gt;&lt;img src=x onerror=alert(1)&gt;&quot;</pre>");
    expect(page.body).toContain("<pre>&quot;hostile&quot;</pre>");
    expect(page.body).toMatch(/Why approval is needed<\/th><td class="value">policy rule requireConfirmationFor: /);
    expect(page.body).toMatch(/SHA-256 of the canonical input<\/th><td class="value"><code>[0-9a-f]{64}<\/code>/);
    expect(page.body).toContain("Requested by</th><td class=\"value\">agent in session ");
    expect(page.body).toMatch(/Who may approve it \(policy&#39;s channels\)<\/th><td class="value">client_elicitation, approver, operator, console \(rule approvalChannels\.byRisk\.low\)/);
    expect(page.body).toMatch(/created \d{4}-\d\d-\d\dT[\d:.]+Z, expires \d{4}-\d\d-\d\dT[\d:.]+Z/);
    // Approve and Reject post to the page itself with the session's token; the other ways are named too.
    expect(page.body).toContain(`<form class="answer" method="post" action="/approvals/step/${id}">`);
    expect(page.body).toContain('<button type="submit" name="decision" value="approve" class="approve">Approve</button>');
    expect(page.body).toContain('<button type="submit" name="decision" value="reject" class="reject">Reject</button>');
    expect(page.body).toContain(`chaoscore_approve {&quot;approval_id&quot;: &quot;${id}&quot;, &quot;approve&quot;: true}`);
  });

  it("shows a spend request whole, with its ledger entry and arguments check", async () => {
    const seq = await pendingSpend(acme);
    const b = new ConsoleBrowser(base);
    await b.signIn(keys.alice);
    const page = await b.get(`/approvals/spend/${seq}`);
    expect(page.status).toBe(200);
    expect(page.body).toContain(`Spend request at ledger entry ${seq} (a spend under spend policy equity`);
    expect(page.body).toContain("<code>asset</code></th><td class=\"value\"><pre>&quot;AAPL&quot;</pre>");
    expect(page.body).toContain("<code>notional</code></th><td class=\"value\"><pre>300</pre>");
    expect(page.body).toContain("the arguments above hash to the args_hash the ledger entry recorded");
    expect(page.body).toMatch(/args_hash<\/th><td class="value"><code>[0-9a-f]{64}<\/code>/);
    expect(page.body).toContain(`approve_spend {&quot;request_seq&quot;: ${seq}}`);
    expect((await b.get("/approvals/spend/999999")).status).toBeGreaterThanOrEqual(404);
    expect((await b.get("/approvals/spend/0")).status).toBe(404);
    expect((await b.get("/approvals/step/not-a-uuid")).status).toBe(404);
  });
});

/** The JSON text of the ledger event the result page shows, parsed back. */
function shownEvent(body: string): Record<string, unknown> {
  const m = /<th scope="row">event<\/th><td class="value"><pre>([\s\S]*?)<\/pre>/.exec(body);
  if (!m) throw new Error(`no ledger event on the page:\n${body}`);
  const text = m[1]!.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
  return JSON.parse(text) as Record<string, unknown>;
}

describe("the approval console: answering", () => {
  it("approves a step as the signed-in approver: the result page and its ledger entry; the agent's execute runs it once", async () => {
    const { agent, id } = await agentWithStep(acme, { key: "console-approved", value: "ship" });
    const b = new ConsoleBrowser(base);
    await b.signIn(keys.alice);
    const done = await answer(b, `/approvals/step/${id}`, "approve");
    expect(done.status).toBe(200);
    expect(done.body).toContain("<h1 class=\"result\">Approved as alice (console)</h1>");
    expect(done.body).toContain(`It runs when its requester, agent, calls chaoscore_execute {&quot;approval_id&quot;: &quot;${id}&quot;}, once`);
    expect(done.body).toMatch(/<th scope="row">seq<\/th><td class="value"><code>\d+<\/code>/);
    expect(done.body).toMatch(/<th scope="row">ts<\/th><td class="value"><code>\d{4}-\d\d-\d\dT[\d:.]+Z<\/code>/);
    expect(done.body).toContain('<th scope="row">type</th><td class="value"><code>approval.resolution</code>');
    expect(done.body).toContain('<th scope="row">principal</th><td class="value"><code>alice</code>');
    expect(done.body).toMatch(/<th scope="row">session<\/th><td class="value"><code>console-[0-9a-f]{12}<\/code>/);
    expect(done.body).toMatch(/<th scope="row">content_hash<\/th><td class="value"><code>[0-9a-f]{64}<\/code>/);
    expect(shownEvent(done.body)).toMatchObject({ type: "approval.resolution", approvalId: id, approved: true, channel: "console", principal: "alice", resolvedBy: "alice (console)" });
    // The page now says who answered, and offers no form.
    const after = await b.get(`/approvals/step/${id}`);
    expect(after.body).toContain("This approval is <strong>approved</strong>, answered by <strong>alice (console)</strong> through <strong>console</strong>");
    expect(after.body).not.toContain('name="decision"');

    const ran = ok<{ results: Array<{ status: string }> }>(await agent.call("chaoscore_execute", { approval_id: id }));
    expect(ran.results[0]!.status).toBe("executed");
    const again = ok<{ results: Array<{ status: string; error?: { message: string } }> }>(await agent.call("chaoscore_execute", { approval_id: id }));
    expect(again.results[0]).toMatchObject({ status: "failed", error: { message: expect.stringContaining("was already used; an approval runs its step once") } });
  });

  it("rejects a step: it never runs", async () => {
    const { agent, id } = await agentWithStep(acme, { key: "console-rejected", value: "no" });
    const b = new ConsoleBrowser(base);
    await b.signIn(keys.alice);
    const done = await answer(b, `/approvals/step/${id}`, "reject");
    expect(done.status).toBe(200);
    expect(done.body).toContain("<h1 class=\"result\">Rejected as alice (console)</h1>");
    expect(shownEvent(done.body)).toMatchObject({ type: "approval.resolution", approvalId: id, approved: false, channel: "console" });
    const run = await agent.call("chaoscore_execute", { approval_id: id });
    expect(JSON.stringify(run)).toContain("rejected");
    expect(await stepStatus(acme, id)).toBe("rejected");
  });

  it("refuses an answer without the session's CSRF token, with another token, from a foreign Origin or with no decision", async () => {
    const id = await pendingStep(acme, { key: "console-forged", value: "v" });
    const b = new ConsoleBrowser(base);
    await b.signIn(keys.alice);
    const path = `/approvals/step/${id}`;
    const missing = await b.post(path, { form: { decision: "approve" } });
    expect(missing.status).toBe(403);
    expect(missing.body).toContain("its CSRF token is missing or not this session&#39;s");
    expect((await b.post(path, { form: { decision: "approve", csrf: "x".repeat(43) } })).status).toBe(403);
    // Another signed-in session's token is not this one's.
    const other = new ConsoleBrowser(base);
    await other.signIn(keys.carol);
    expect((await b.post(path, { form: { decision: "approve", csrf: await other.sessionCsrf() } })).status).toBe(403);
    const csrf = await b.sessionCsrf();
    const foreign = await b.post(path, { origin: "https://evil.example", form: { decision: "approve", csrf } });
    expect(foreign.status).toBe(403);
    expect((await b.post(path, { origin: null, form: { decision: "approve", csrf } })).status).toBe(403);
    // Not signed in: refused, not sent to the sign-in page.
    expect((await new ConsoleBrowser(base).post(path, { form: { decision: "approve", csrf } })).status).toBe(403);
    const none = await b.post(path, { form: { csrf } });
    expect(none.status).toBe(400);
    expect(none.body).toContain("decision must be approve or reject");
    expect((await b.post(path, { form: { csrf, decision: "APPROVE" } })).status).toBe(400);
    expect(await stepStatus(acme, id)).toBe("pending");
  });

  it("does not let the requester approve their own step: no buttons, and a forged answer is refused and recorded", async () => {
    const { id } = await agentWithStep(acme, { key: "console-self", value: "v" }, "alice");
    const b = new ConsoleBrowser(base);
    await b.signIn(keys.alice);
    const page = await b.get(`/approvals/step/${id}`);
    expect(page.body).toContain("You asked for this; another approver must answer.");
    expect(page.body).not.toContain('name="decision"');
    const forged = await b.post(`/approvals/step/${id}`, { form: { csrf: await b.sessionCsrf(), decision: "approve" } });
    expect(forged.status).toBe(403);
    expect(forged.body).toContain("You asked for this; another approver must answer.");
    expect(forged.body).toContain("self_approval: no self-approval: alice requested this step and cannot approve it");
    // Who else can: an approver's call and the page for another person.
    expect(forged.body).toContain(`chaoscore_approve {&quot;approval_id&quot;: &quot;${id}&quot;, &quot;approve&quot;: true}`);
    expect(services.audit.events().filter((e) => e.type === "approval.refused" && e.approvalId === id)).toEqual([
      expect.objectContaining({ channel: "console", principal: "alice", code: "self_approval" }),
    ]);
    expect(await stepStatus(acme, id)).toBe("pending");
  });

  it("answers another tenant's approval with 404, and leaves it pending", async () => {
    const id = await pendingStep(acme, { key: "console-cross-tenant", value: "v" });
    const b = new ConsoleBrowser(base);
    await b.signIn(keys.bob);
    const refused = await answer(b, `/approvals/step/${id}`, "approve");
    expect(refused.status).toBe(404);
    expect(refused.body).not.toContain("console-cross-tenant");
    expect(await stepStatus(acme, id)).toBe("pending");
  });

  it("refuses a second answer, whichever it is", async () => {
    const id = await pendingStep(acme, { key: "console-twice", value: "v" });
    const alice = new ConsoleBrowser(base);
    await alice.signIn(keys.alice);
    const carol = new ConsoleBrowser(base);
    await carol.signIn(keys.carol);
    const csrf = await carol.sessionCsrf();
    expect((await answer(alice, `/approvals/step/${id}`, "approve")).status).toBe(200);
    const second = await carol.post(`/approvals/step/${id}`, { form: { csrf, decision: "reject" } });
    expect(second.status).toBe(409);
    expect(second.body).toContain("This approval was already answered: an answer is given once.");
    expect(await stepStatus(acme, id)).toBe("approved");
  });

  it("names the channels policy accepts when the console is not one of them, with the operator's way; a forged answer is refused", async () => {
    const id = await pendingStep(initech, { key: "console-not-allowed", value: "v" });
    const b = new ConsoleBrowser(base);
    await b.signIn(keys.dave);
    const page = await b.get(`/approvals/step/${id}`);
    expect(page.body).toContain("Policy does not accept an answer on this page for it: it accepts approver, operator (rule approvalChannels.capabilities.memory.remember).");
    expect(page.body).not.toContain('name="decision"');
    expect(page.body).toContain(`chaoscore_approve {&quot;approval_id&quot;: &quot;${id}&quot;, &quot;approve&quot;: true}`);
    const forged = await b.post(`/approvals/step/${id}`, { form: { csrf: await b.sessionCsrf(), decision: "approve" } });
    expect(forged.status).toBe(403);
    expect(forged.body).toContain("Policy does not accept an answer on the console for this approval: it accepts approver, operator (the ways below).");
    expect(forged.body).toContain("channel_not_allowed: policy accepts approver, operator for approval");
    expect(await stepStatus(initech, id)).toBe("pending");
  });

  it("answers as the operator through a one-time link: recorded as principal operator, channel console", async () => {
    const id = await pendingStep(acme, { key: "console-operator", value: "v" });
    const link = links.issue(acme);
    const b = new ConsoleBrowser(base);
    const path = `/approvals/sign-in/link?t=${link.token}`;
    const csrf = ConsoleBrowser.field((await b.get(path)).body, "csrf");
    expect((await b.post("/approvals/sign-in/link", { form: { t: link.token, csrf } })).status).toBe(303);
    const done = await answer(b, `/approvals/step/${id}`, "approve");
    expect(done.body).toContain("<h1 class=\"result\">Approved as operator (console)</h1>");
    expect(shownEvent(done.body)).toMatchObject({ type: "approval.resolution", channel: "console", principal: "operator" });
  });

  it("approves a spend on the page: the agent's approve_spend then receives it, once", async () => {
    const { agent, seq } = await agentWithSpend(acme);
    const b = new ConsoleBrowser(base);
    await b.signIn(keys.alice);
    const page = await b.get(`/approvals/spend/${seq}`);
    expect(page.body).toContain(`<form class="answer" method="post" action="/approvals/spend/${seq}">`);
    expect(page.body).toContain('<input id="reason" name="reason" type="text" maxlength="500" autocomplete="off">');
    const done = await answer(b, `/approvals/spend/${seq}`, "approve");
    expect(done.status).toBe(200);
    expect(done.body).toContain("<h1 class=\"result\">Approved as alice (console)</h1>");
    expect(done.body).toContain(`The requester, agent, receives the approval with their next approve_spend {&quot;request_seq&quot;: ${seq}}, once.`);
    expect(shownEvent(done.body)).toMatchObject({ type: "spend.approved", request_seq: seq, approver: "console:alice", approved_via: "console", channel: "console", requester: "agent" });
    const answered = await b.get(`/approvals/spend/${seq}`);
    expect(answered.body).toMatch(/This approval is <strong>APPROVED<\/strong>, answered by <strong>[^<]*alice<\/strong> through <strong>console<\/strong> in ledger entry \d+/);

    const collected = ok<{ human: { answer: string; via: string }; approved_by: string; channel: string }>(await agent.call("approve_spend", { request_seq: seq }));
    expect(collected).toMatchObject({ human: { answer: "confirmed", via: "console" }, channel: "console" });
    expect(collected.approved_by).toContain("alice");
    expect(JSON.stringify(await agent.call("approve_spend", { request_seq: seq }))).toContain("already_collected");
    const second = await answer(b, `/approvals/spend/${seq}`, "reject");
    expect(second.status).toBe(409);
    expect(second.body).toContain("This spend request was already answered: an answer is given once.");
  });

  it("tells the person approving a spend the daily cap now blocks which cap it is, with its value", async () => {
    // A tenant of its own: its day's total is this test's alone.
    const tenant = uniqueTenant("capped");
    const { agent, seq } = await agentWithSpend(tenant);
    for (let i = 0; i < 9; i++) {
      const locked = ok<{ state: string }>(
        await agent.call("evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: 249, confidence: 0.9 } }),
      );
      expect(locked.state).toBe("LOCKED");
    }
    const link = links.issue(tenant);
    const b = new ConsoleBrowser(base);
    const csrf = ConsoleBrowser.field((await b.get(`/approvals/sign-in/link?t=${link.token}`)).body, "csrf");
    expect((await b.post("/approvals/sign-in/link", { form: { t: link.token, csrf } })).status).toBe(303);
    const done = await answer(b, `/approvals/spend/${seq}`, "approve");
    expect(done.status).toBe(200);
    expect(done.body).toContain(
      "left it BLOCKED (approval by console:operator rejected: blocked: daily-cap): " +
        "2241.0 committed today + 300.0 = 2541.0 exceeds daily_cap 2500.0 (spend policy equity, version equity-1). Nothing runs on it.",
    );
  });

  it("declines a spend with a reason: the agent is told, nothing is approved", async () => {
    const { agent, seq } = await agentWithSpend(acme);
    const b = new ConsoleBrowser(base);
    await b.signIn(keys.alice);
    const done = await answer(b, `/approvals/spend/${seq}`, "reject", { reason: "not this quarter" });
    expect(done.status).toBe(200);
    expect(done.body).toContain("<h1 class=\"result\">Rejected as alice (console)</h1>");
    expect(done.body).toContain("Your reason, shown to agent: not this quarter");
    expect(shownEvent(done.body)).toMatchObject({ type: "spend.declined", request_seq: seq, approved_via: "console", channel: "console", reason: "not this quarter" });
    expect(JSON.stringify(await agent.call("approve_spend", { request_seq: seq }))).toContain("declined");
    const tooLong = await b.post(`/approvals/spend/${seq}`, { form: { csrf: await b.sessionCsrf(), decision: "reject", reason: "x".repeat(501) } });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body).toContain("reason is 501 characters, at most 500");
  });
});

describe("the approval console: the operator's one-time sign-in link", () => {
  it("shows a button on GET (a link scanner burns nothing) and signs in as operator once", async () => {
    const link = links.issue(acme);
    const b = new ConsoleBrowser(base);
    const path = `/approvals/sign-in/link?t=${link.token}`;
    for (let i = 0; i < 2; i++) {
      const shown = await b.get(path);
      expect(shown.status).toBe(200);
      expect(shown.body).toContain('<button type="submit">Sign in as operator</button>');
    }
    const csrf = ConsoleBrowser.field((await b.get(path)).body, "csrf");
    expect((await b.post("/approvals/sign-in/link", { form: { t: link.token } })).status).toBe(403);
    const signedIn = await b.post("/approvals/sign-in/link", { form: { t: link.token, csrf } });
    expect(signedIn.status).toBe(303);
    const list = await b.get("/approvals");
    expect(list.status).toBe(200);
    expect(list.body).toContain(`Signed in as <strong>operator</strong> in tenant <strong>${acme}</strong>`);

    // Used once: neither shown again nor usable again.
    const again = new ConsoleBrowser(base);
    expect((await again.get(path)).status).toBe(404);
    const againCsrf = ConsoleBrowser.field((await again.get("/approvals/sign-in")).body, "csrf");
    const reused = await again.post("/approvals/sign-in/link", { form: { t: link.token, csrf: againCsrf } });
    expect(reused.status).toBe(404);
    expect(reused.body).toContain("it was used already, it expired (a link lasts 120 seconds)");
  });

  it("expires after 120 seconds and is bound to its tenant", async () => {
    const link = links.issue(globex);
    linkClock += SIGN_IN_LINK_TTL_SECONDS * 1000;
    try {
      expect((await new ConsoleBrowser(base).get(`/approvals/sign-in/link?t=${link.token}`)).status).toBe(404);
    } finally {
      linkClock -= SIGN_IN_LINK_TTL_SECONDS * 1000;
    }
    const fresh = links.issue(globex);
    const b = new ConsoleBrowser(base);
    const csrf = ConsoleBrowser.field((await b.get(`/approvals/sign-in/link?t=${fresh.token}`)).body, "csrf");
    expect((await b.post("/approvals/sign-in/link", { form: { t: fresh.token, csrf } })).status).toBe(303);
    expect((await b.get("/approvals")).body).toContain(`in tenant <strong>${globex}</strong>`);
  });
});

describe("the approval console: failed sign-ins", () => {
  it("answers 429 after 10 failed sign-ins from one address within 5 minutes", async () => {
    const own = await startHttpTransport(deps, { host: "127.0.0.1", port: 0, apiKeysFile: keysFile, console: {} });
    try {
      const b = new ConsoleBrowser(`http://127.0.0.1:${own.port}`);
      for (let i = 0; i < 10; i++) expect((await b.signIn(i % 2 ? "wrong" : keys.agent)).status).toBeLessThan(429);
      const limited = await b.signIn(keys.alice);
      expect(limited.status).toBe(429);
      expect(limited.headers["retry-after"]).toBe("300");
      expect(limited.setCookies.some((c) => c.startsWith("chaoscore-console="))).toBe(false);
    } finally {
      await own.close();
    }
  });
});

describe("the approval console behind CHAOS_CORE_PUBLIC_URL", () => {
  it("uses __Host- Secure cookies and the public path prefix under the public https origin", async () => {
    const own = await startHttpTransport(deps, {
      host: "127.0.0.1",
      port: 0,
      apiKeysFile: keysFile,
      allowedHosts: ["localhost", "127.0.0.1", "[::1]", "chaos.example.com"],
      allowedOrigins: ["https://chaos.example.com"],
      console: { publicUrl: "https://chaos.example.com/team" },
    });
    try {
      expect(own.consoleUrl).toBe("https://chaos.example.com/team/approvals");
      const b = new ConsoleBrowser(`http://127.0.0.1:${own.port}`);
      const page = await b.get("/approvals/sign-in", { host: "chaos.example.com" });
      expect(page.setCookies[0]).toMatch(/^__Host-chaoscore-console-sign-in=[^;]+; HttpOnly; SameSite=Strict; Path=\/; Max-Age=600; Secure$/);
      expect(page.body).toContain('action="/team/approvals/sign-in"');
      const csrf = ConsoleBrowser.field(page.body, "csrf");
      const form = { csrf, api_key: keys.alice };
      // The public page's own origin only: not plain http under the public name.
      expect((await b.post("/approvals/sign-in", { host: "chaos.example.com", origin: "http://chaos.example.com", form })).status).toBe(403);
      const signedIn = await b.post("/approvals/sign-in", { host: "chaos.example.com", origin: "https://chaos.example.com", form });
      expect(signedIn.status).toBe(303);
      expect(signedIn.headers.location).toBe("/team/approvals");
      expect(signedIn.setCookies.find((c) => c.startsWith("__Host-chaoscore-console="))).toMatch(
        /; HttpOnly; SameSite=Strict; Path=\/; Max-Age=28800; Secure$/,
      );
    } finally {
      await own.close();
    }
  });
});
