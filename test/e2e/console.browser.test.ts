import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ElicitationCompleteNotificationSchema, ElicitRequestSchema, type ElicitRequestURLParams } from "@modelcontextprotocol/sdk/types.js";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, SKIP_BROWSER_TESTS } from "../support/browser.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { httpClient, removeDir, ROOT, runToExit, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { enableEveryToolset } from "../support/toolsets.js";

type Structured = Record<string, unknown>;
type Result = { isError?: boolean; structuredContent?: Structured; content: Array<{ type: string; text?: string }> };
type Entry = { seq: number; principal: string; session: string; event: Structured };

const hashApiKey = (key: string) => createHash("sha256").update(key, "utf8").digest("hex");

/** Where the screenshots a person can look at are kept (a CI artifact, ignored by git). */
const SCREENSHOTS = join(ROOT, "test-results", "console");

const SCRIPT = "<script>alert(1)</script>";
const ATTRIBUTE = `"><img src=x onerror=alert(1)>`;

/** The tenant every agent and approver below works in, and the one whose approvals must not show. */
const OTHER_TENANT = "globex";

/**
 * The approval console in a real headless browser (Debian's chromium, driven by playwright-core)
 * against `chaos-core serve` with API keys and Postgres (two tenants), the whole loop: an agent's
 * step or spend waits for a person; an approver signs in through the form, reviews every
 * argument and approves or rejects on the page; the agent's next call picks the answer up and
 * runs it once (or never). Also the operator's one-time link, another tenant's approvals kept
 * out of sight, the agent's own key refused, arguments holding HTML rendered as text, and
 * URL-mode elicitation: the agent's client hands the console link to the browser and the pending
 * tool call returns what the person decided there.
 *
 * One server and one browser for the file; the flows are independent (each its own approval,
 * each page its own browser context, so its own cookies) and run concurrently.
 */
describe.skipIf(SKIP_BROWSER_TESTS)("the approval console in a browser", () => {
  const dir = tempDir("chaos-core-console-browser-");
  const dataDir = join(dir, "data");
  const agentKey = randomBytes(24).toString("base64url");
  const approverKey = randomBytes(24).toString("base64url");
  const otherAgentKey = randomBytes(24).toString("base64url");
  const otherApproverKey = randomBytes(24).toString("base64url");
  let db: TestDatabase;
  let serve: ServeProcess;
  let agent: Client;
  let otherAgent: Client;
  let browser: Browser;
  let base: string;
  const dialogs: string[] = [];
  const clients: Client[] = [];

  beforeAll(async () => {
    mkdirSync(dataDir);
    db = await createTestDatabase("chaoscore_console_browser");
    const keysFile = join(dir, "keys.json");
    writeFileSync(
      keysFile,
      JSON.stringify([
        { tenant: "default", principal: "agent", sha256: hashApiKey(agentKey) },
        { tenant: "default", principal: "alice", sha256: hashApiKey(approverKey), roles: ["approver"] },
        { tenant: OTHER_TENANT, principal: "agent", sha256: hashApiKey(otherAgentKey) },
        { tenant: OTHER_TENANT, principal: "bob", sha256: hashApiKey(otherApproverKey), roles: ["approver"] },
      ]),
    );
    // Postgres holds one capability policy per tenant: both hold memory.remember for a person.
    const policyFile = join(dir, "policy.json");
    writeFileSync(policyFile, JSON.stringify({ requireConfirmationFor: ["memory.remember"] }));
    const env = { CHAOS_CORE_DATA_DIR: dataDir, DATABASE_URL: db.url };
    const set = await Promise.all(
      ["default", OTHER_TENANT].map((tenant) => runToExit(["policy", "set", policyFile, "--tenant", tenant, "--database-url", db.url], env)),
    );
    for (const r of set) expect(r.code, r.stderr).toBe(0);
    // The agent's wires run: its tenant's operator enabled the finance reference tools.
    await enableEveryToolset(env);
    [serve, browser] = await Promise.all([startServe({ ...env, CHAOS_CORE_API_KEYS_FILE: keysFile }), launchChromium()]);
    base = serve.url.replace(/\/mcp$/, "");
    [agent, otherAgent] = await Promise.all([
      httpClient(serve.url, { authorization: `Bearer ${agentKey}` }),
      httpClient(serve.url, { authorization: `Bearer ${otherAgentKey}` }),
    ]);
    mkdirSync(SCREENSHOTS, { recursive: true });
  });

  afterAll(async () => {
    for (const c of clients) await c.close().catch(() => undefined);
    await browser?.close();
    await agent?.close();
    await otherAgent?.close();
    await serve?.stop();
    await db?.drop();
    removeDir(dir);
  });

  async function newPage(): Promise<Page> {
    // Each page in a context of its own: its own cookies, so concurrent flows never share a session.
    const page = await browser.newPage();
    page.on("dialog", (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    return page;
  }

  async function signIn(page: Page, key: string): Promise<void> {
    await page.goto(`${base}/approvals`);
    expect(new URL(page.url()).pathname).toBe("/approvals/sign-in");
    await page.fill("#api_key", key);
    await page.click("button[type=submit]");
  }

  const call = async (client: Client, name: string, args: Structured, timeout?: number) =>
    (await client.callTool({ name, arguments: args }, undefined, timeout ? { timeout } : undefined)) as Result;
  const structured = (res: Result): Structured => {
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
    return res.structuredContent!;
  };
  const errorText = (res: Result): string => {
    expect(res.isError, JSON.stringify(res.structuredContent)).toBe(true);
    return res.content.map((c) => c.text ?? "").join("\n");
  };

  /** A step of `client`'s that waits for a person: memory.remember of `input`. */
  async function pendingStep(client: Client, input: Structured): Promise<string> {
    const out = structured(await call(client, "chaoscore_execute", { steps: [{ id: "s1", capability: "memory.remember", input }] }));
    const step = (out.results as Structured[])[0]!;
    expect(step.status).toBe("pending_approval");
    return (step.approval as { approval_id: string }).approval_id;
  }

  /** A wire held for a person (request_authorization), by `client`. */
  async function heldWire(client: Client, wire: Structured): Promise<number> {
    const held = structured(await call(client, "request_authorization", { tool: "wire_treasury_transfer", args: wire }));
    expect(held.status).toBe("HITL_REQUIRED");
    return held.request_seq as number;
  }

  /** The ledger entry at `seq` of the agent's tenant, as inspect_audit_ledger shows it. */
  async function ledgerEntry(seq: number): Promise<Entry> {
    const out = structured(await call(agent, "inspect_audit_ledger", { after_seq: seq - 1, limit: 1 }));
    const entry = (out.entries as Entry[])[0]!;
    expect(entry.seq).toBe(seq);
    return entry;
  }

  /** What the result page shows of the ledger entry: each row of its table by name. */
  async function shownEntry(page: Page): Promise<{ seq: number; type: string; principal: string; contentHash: string; event: Structured }> {
    const row = (name: string) => page.locator("table.entry tr", { has: page.locator("th", { hasText: new RegExp(`^${name}$`) }) }).locator("td");
    return {
      seq: Number(await row("seq").textContent()),
      type: (await row("type").textContent()) ?? "",
      principal: (await row("principal").textContent()) ?? "",
      contentHash: (await row("content_hash").textContent()) ?? "",
      event: JSON.parse((await row("event").textContent()) ?? "null") as Structured,
    };
  }

  /** The value shown for an argument path on an approval's page, exactly as text. */
  const valueOf = (page: Page, path: string) =>
    page.locator("table.rows tr", { has: page.locator("th code", { hasText: new RegExp(`^${path.replace(/[.[\]]/g, "\\$&")}$`) }) }).locator("td pre");

  /** Answers the approval open in `page` with its Approve or Reject button; resolves on the result page's headline. */
  async function answerOnPage(page: Page, decision: "approve" | "reject", reason?: string): Promise<string> {
    if (reason !== undefined) await page.fill("#reason", reason);
    await page.click(`button[name=decision][value=${decision}]`);
    return (await page.locator("h1.result").textContent()) ?? "";
  }

  it.concurrent("refuses the agent's own key at sign-in", async () => {
    const page = await newPage();
    // This server has no OAuth issuer: its sign-in page offers API keys only, no "Sign in with …".
    await page.goto(`${base}/approvals/sign-in`);
    await expect(page.locator("#api_key").count()).resolves.toBe(1);
    await expect(page.locator("a.sign-in-oauth").count()).resolves.toBe(0);
    await expect(page.locator("main").textContent()).resolves.not.toContain("Sign in with");
    await signIn(page, agentKey);
    await expect(page.locator("p.error").textContent()).resolves.toBe("this key does not hold the approver role: an agent's key cannot sign in here");
    expect(new URL(page.url()).pathname).toBe("/approvals/sign-in");
    expect((await page.context().cookies()).map((c) => c.name)).not.toContain("chaoscore-console");
    await page.close();
  });

  it.concurrent("renders arguments holding HTML and script as text: no dialog, no element, the exact text", async () => {
    const id = await pendingStep(agent, { key: "hostile", value: { script: SCRIPT, attribute: ATTRIBUTE } });

    const page = await newPage();
    await signIn(page, approverKey);
    await page.waitForURL(`${base}/approvals`);
    await expect(page.locator("header .who").textContent()).resolves.toContain("Signed in as alice in tenant default");
    await page.click(`a[href="/approvals/step/${id}"]`);
    expect(new URL(page.url()).pathname).toBe(`/approvals/step/${id}`);

    // Each value is the JSON text of what would run, character for character.
    await expect(valueOf(page, "value.script").textContent()).resolves.toBe(JSON.stringify(SCRIPT));
    await expect(valueOf(page, "value.attribute").textContent()).resolves.toBe(JSON.stringify(ATTRIBUTE));
    await expect(valueOf(page, "key").textContent()).resolves.toBe(JSON.stringify("hostile"));
    // Nothing in them became markup: no script ran, no image element exists, none has a handler.
    const dom = {
      scripts: await page.locator("script").count(),
      images: await page.locator("img").count(),
      handlers: await page.locator("[onerror], [onload], [onclick], [onmouseover], [onfocus]").count(),
    };
    expect(dom).toEqual({ scripts: 0, images: 0, handlers: 0 });
    expect(dialogs).toEqual([]);
    // The facts a person decides on are on the page too.
    const facts = await page.locator("table.facts").textContent();
    expect(facts).toMatch(/Why approval is needed\s*policy rule requireConfirmationFor/);
    expect(facts).toMatch(/SHA-256 of the canonical input\s*[0-9a-f]{64}/);
    expect(facts).toContain("Requested by");
    expect(facts).toContain("agent in session");
    expect(facts).toMatch(/Who may approve it \(policy's channels\)\s*client_elicitation, approver, operator, console/);
    await page.screenshot({ path: join(SCREENSHOTS, "step-with-html-arguments.png"), fullPage: true });

    // The list shows it as text as well.
    await page.goto(`${base}/approvals`);
    await expect(page.locator("table").textContent()).resolves.toContain("memory.remember");
    await page.screenshot({ path: join(SCREENSHOTS, "pending-approvals.png"), fullPage: true });
    expect(dialogs).toEqual([]);
    // Rejected, so it never runs (and the list the other flows read stays short).
    expect(await answerOnPage(await openStep(page, id), "reject")).toBe("Rejected as alice (console)");
    await page.close();
  });

  async function openStep(page: Page, id: string): Promise<Page> {
    await page.goto(`${base}/approvals/step/${id}`);
    return page;
  }

  it.concurrent("a step: listed with every argument, approved on the page, run by the agent's chaoscore_execute exactly once", async () => {
    const input = { key: "release-window", value: { service: "payments", window: "friday 18:00 UTC", hosts: ["pay-1.internal", "pay-2.internal"] } };
    const id = await pendingStep(agent, input);
    // Nobody has answered: the agent cannot run it, and is told where a person answers.
    const unanswered = errorText(await call(agent, "chaoscore_execute", { approval_id: id }));
    expect(unanswered).toContain(`- console: A person holding the approver role opens ${base}/approvals/step/${id} and signs in with their own API key`);
    expect(unanswered).toContain("they approve or reject it there");
    // This client declared no URL-mode elicitation: it is not told its call would send anyone to the page.
    expect(unanswered).not.toContain("URL-mode");

    const page = await newPage();
    await signIn(page, approverKey);
    const row = page.locator("tbody tr", { has: page.locator(`a[href="/approvals/step/${id}"]`) });
    await expect(row.textContent()).resolves.toMatch(/step\s*memory\.remember\s*low\s*agent/);
    await row.locator("a").click();
    // Every argument of the call as it will run, by path, as JSON text.
    await expect(valueOf(page, "key").textContent()).resolves.toBe('"release-window"');
    await expect(valueOf(page, "value.service").textContent()).resolves.toBe('"payments"');
    await expect(valueOf(page, "value.window").textContent()).resolves.toBe('"friday 18:00 UTC"');
    await expect(valueOf(page, "value.hosts[0]").textContent()).resolves.toBe('"pay-1.internal"');
    await expect(valueOf(page, "value.hosts[1]").textContent()).resolves.toBe('"pay-2.internal"');
    await expect(page.locator("table.rows tr").count()).resolves.toBe(5);
    await page.screenshot({ path: join(SCREENSHOTS, "step-to-approve.png"), fullPage: true });

    expect(await answerOnPage(page, "approve")).toBe("Approved as alice (console)");
    await expect(page.locator("main").textContent()).resolves.toContain(`It runs when its requester, agent, calls chaoscore_execute {"approval_id": "${id}"}, once`);
    const shown = await shownEntry(page);
    expect(shown).toMatchObject({ type: "approval.resolution", principal: "alice" });
    expect(shown.contentHash).toMatch(/^[0-9a-f]{64}$/);
    expect(shown.event).toMatchObject({ type: "approval.resolution", approvalId: id, approved: true, channel: "console", principal: "alice", resolvedBy: "alice (console)" });
    await page.screenshot({ path: join(SCREENSHOTS, "step-approved.png"), fullPage: true });
    // The ledger holds what the page showed: principal alice, channel console, from a console session.
    const recorded = await ledgerEntry(shown.seq);
    expect(recorded).toMatchObject({ principal: "alice", event: { type: "approval.resolution", approvalId: id, channel: "console", principal: "alice" } });
    expect(recorded.session).toMatch(/^console-[0-9a-f]{12}$/);

    const ran = structured(await call(agent, "chaoscore_execute", { approval_id: id }));
    expect(ran).toMatchObject({ results: [{ status: "executed" }], approval: { status: "approved", resolved_by: "alice (console)" } });
    const again = structured(await call(agent, "chaoscore_execute", { approval_id: id }));
    expect((again.results as Structured[])[0]).toMatchObject({ status: "failed", ran: false });
    expect(JSON.stringify(again)).toContain("was already used; an approval runs its step once");
    const stored = structured(await call(agent, "chaoscore_recall", { key: "release-window" }));
    expect((stored.items as Structured[]).map((i) => i.value)).toEqual([input.value]);

    // Answered: the page says by whom and offers nothing more.
    await page.goto(`${base}/approvals/step/${id}`);
    await expect(page.locator("main").textContent()).resolves.toContain("This approval is consumed, answered by alice (console) through console");
    await expect(page.locator("button[name=decision]").count()).resolves.toBe(0);
    await page.close();
  });

  it.concurrent("a step rejected on the page never runs", async () => {
    const id = await pendingStep(agent, { key: "drop-table", value: "DROP TABLE customers" });
    const page = await newPage();
    await signIn(page, approverKey);
    expect(await answerOnPage(await openStep(page, id), "reject")).toBe("Rejected as alice (console)");
    expect((await shownEntry(page)).event).toMatchObject({ type: "approval.resolution", approvalId: id, approved: false, channel: "console" });
    const out = structured(await call(agent, "chaoscore_execute", { approval_id: id }));
    expect(out).toMatchObject({
      results: [{ status: "denied", ran: false, error: { code: "permission_denied", message: `approval ${id} was rejected by alice (console); the step never runs` } }],
      approval: { status: "rejected", resolved_by: "alice (console)" },
    });
    expect(structured(await call(agent, "chaoscore_recall", { key: "drop-table" })).items).toEqual([]);
    // Answered: no form is offered any more.
    await openStep(page, id);
    await expect(page.locator("button[name=decision]").count()).resolves.toBe(0);
    await page.close();
  });

  const wire = { beneficiary: "Globex Treasury Ltd", amount: 4200, currency: "USD", memo: "Q3 settlement, ref GX-5521", confidence: 0.9 };

  it.concurrent("a HITL wire approved on the page: the agent's next approve_spend receives the receipt, and the wire runs once", async () => {
    const args = { ...wire, memo: "Q3 settlement, ref GX-5521 (approve_spend)" };
    const seq = await heldWire(agent, args);
    const page = await newPage();
    await signIn(page, approverKey);
    await page.click(`a[href="/approvals/spend/${seq}"]`);
    // Every argument the wire runs with: the beneficiary and the memo as much as the amount.
    await expect(valueOf(page, "beneficiary").textContent()).resolves.toBe('"Globex Treasury Ltd"');
    await expect(valueOf(page, "memo").textContent()).resolves.toBe(JSON.stringify(args.memo));
    await expect(valueOf(page, "amount").textContent()).resolves.toBe("4200");
    await expect(valueOf(page, "currency").textContent()).resolves.toBe('"USD"');
    await page.screenshot({ path: join(SCREENSHOTS, "wire-to-approve.png"), fullPage: true });

    expect(await answerOnPage(page, "approve")).toBe("Approved as alice (console)");
    await expect(page.locator("main").textContent()).resolves.toContain(`The requester, agent, receives the receipt with their next approve_spend {"request_seq": ${seq}}`);
    const shown = await shownEntry(page);
    expect(shown.event).toMatchObject({ type: "spend.approved", request_seq: seq, state: "LOCKED", approver: "console:alice", channel: "console", requester: "agent", receipt_pending: true });
    expect(await ledgerEntry(shown.seq)).toMatchObject({ principal: "alice", event: { type: "spend.approved", channel: "console", approved_via: "console" } });
    await page.screenshot({ path: join(SCREENSHOTS, "wire-approved.png"), fullPage: true });

    const collected = structured(await call(agent, "approve_spend", { request_seq: seq }));
    expect(collected).toMatchObject({ approved_by: "console:alice", channel: "console", human: { answer: "confirmed", via: "console" } });
    const receipt = collected.receipt as Structured;
    expect(receipt).toMatchObject({ kind: "authorization", actor: "console:alice", tool: "wire_treasury_transfer" });
    expect(errorText(await call(agent, "approve_spend", { request_seq: seq }))).toMatch(/already_collected/);
    expect(structured(await call(agent, "wire_treasury_transfer", { ...args, receipt }))).toMatchObject({ executed: true, code: "EXECUTED" });
    expect(structured(await call(agent, "wire_treasury_transfer", { ...args, receipt }))).toMatchObject({ executed: false, code: "replay" });
    await page.close();
  });

  it.concurrent("a direct wire call held for a person picks up the approval given on the page, and runs once", async () => {
    const args = { ...wire, amount: 4300, memo: "Q3 settlement, ref GX-5522 (direct)" };
    const held = structured(await call(agent, "wire_treasury_transfer", args));
    expect(held).toMatchObject({ executed: false, detail_code: "approval_pending" });
    const seq = held.approval_request_seq as number;
    expect(String(held.next_step)).toContain(`${base}/approvals/spend/${seq}`);

    const page = await newPage();
    await signIn(page, approverKey);
    await page.goto(`${base}/approvals/spend/${seq}`);
    await expect(valueOf(page, "memo").textContent()).resolves.toBe(JSON.stringify(args.memo));
    expect(await answerOnPage(page, "approve")).toBe("Approved as alice (console)");
    await expect(page.locator("main").textContent()).resolves.toContain("or the wire_treasury_transfer call itself picks the approval up and runs once");

    const ran = structured(await call(agent, "wire_treasury_transfer", args));
    expect(ran).toMatchObject({ executed: true, detail_code: "AUTHORIZED", approval_request_seq: seq });
    // The approval is spent: the same call again runs nothing on it.
    const again = structured(await call(agent, "wire_treasury_transfer", args));
    expect(again.executed).toBe(false);
    expect(again.approval_request_seq).not.toBe(seq);
    await page.close();
  });

  it.concurrent("a HITL wire rejected on the page never runs: the agent is told, with the reason", async () => {
    const args = { ...wire, beneficiary: "Initech Holdings", memo: "urgent, do not delay" };
    const seq = await heldWire(agent, args);
    const page = await newPage();
    await signIn(page, approverKey);
    await page.goto(`${base}/approvals/spend/${seq}`);
    expect(await answerOnPage(page, "reject", "beneficiary unknown to finance")).toBe("Rejected as alice (console)");
    expect((await shownEntry(page)).event).toMatchObject({ type: "spend.declined", request_seq: seq, channel: "console", reason: "beneficiary unknown to finance" });
    const run = structured(await call(agent, "wire_treasury_transfer", args));
    expect(run).toMatchObject({ executed: false, code: "policy_deny", detail_code: "approval_declined", approval_request_seq: seq });
    expect(String(run.message)).toContain("beneficiary unknown to finance");
    expect(errorText(await call(agent, "approve_spend", { request_seq: seq }))).toMatch(/declined/);
    await page.close();
  });

  it.concurrent("another tenant's approvals are neither listed nor shown", async () => {
    const theirStep = await pendingStep(otherAgent, { key: "globex-secret", value: "theirs" });
    const theirWire = await heldWire(otherAgent, { ...wire, beneficiary: "Globex Internal", memo: "globex only" });
    const page = await newPage();
    await signIn(page, approverKey);
    const list = (await page.locator("main").textContent()) ?? "";
    expect(list).not.toContain(theirStep);
    await expect(page.locator(`a[href="/approvals/step/${theirStep}"]`).count()).resolves.toBe(0);
    const shown = await page.goto(`${base}/approvals/step/${theirStep}`);
    expect(shown?.status()).toBe(404);
    await expect(page.locator("main").textContent()).resolves.not.toContain("globex-secret");

    // Their approver sees them, in their own tenant.
    const theirs = await newPage();
    await signIn(theirs, otherApproverKey);
    await expect(theirs.locator("header .who").textContent()).resolves.toContain(`Signed in as bob in tenant ${OTHER_TENANT}`);
    await expect(theirs.locator(`a[href="/approvals/step/${theirStep}"]`).count()).resolves.toBe(1);
    await expect(theirs.locator(`a[href="/approvals/spend/${theirWire}"]`).count()).resolves.toBe(1);
    await page.close();
    await theirs.close();
  });

  it.concurrent("the operator's one-time sign-in link approves, recorded as principal operator through the console", async () => {
    const id = await pendingStep(agent, { key: "operator-approved", value: "by the operator at the machine" });
    const printed = await runToExit(["approvals", "console", "--data-dir", dataDir], { CHAOS_CORE_DATA_DIR: dataDir, DATABASE_URL: db.url });
    expect(printed.code, printed.stderr).toBe(0);
    const link = /(http:\/\/127\.0\.0\.1:\d+\/approvals\/sign-in\/link\?t=[A-Za-z0-9_-]{43})/.exec(printed.stdout)?.[1];
    expect(link, printed.stdout).toBeDefined();

    const page = await newPage();
    await page.goto(link!);
    await page.click("button[type=submit]");
    await expect(page.locator("header .who").textContent()).resolves.toContain("Signed in as operator in tenant default");
    expect(await answerOnPage(await openStep(page, id), "approve")).toBe("Approved as operator (console)");
    const shown = await shownEntry(page);
    expect(shown.event).toMatchObject({ type: "approval.resolution", approvalId: id, channel: "console", principal: "operator", resolvedBy: "operator (console)" });
    expect(await ledgerEntry(shown.seq)).toMatchObject({ principal: "operator", event: { channel: "console" } });
    expect(structured(await call(agent, "chaoscore_execute", { approval_id: id }))).toMatchObject({ results: [{ status: "executed" }] });
    await page.close();
  });

  /**
   * An agent's SDK client over HTTP that declares URL-mode elicitation. Its handler accepts at
   * once and hands the URL to `person` (not awaited: the server waits for the page's answer
   * while the handler has already returned); `person()`'s promise is kept to await afterwards.
   */
  async function urlModeAgent(person: (url: string) => Promise<void>) {
    const asked: ElicitRequestURLParams[] = [];
    const completed: string[] = [];
    const answered: Array<Promise<void>> = [];
    // Rejects as soon as the person's part fails, so the test does not wait out the tool call.
    let personFailed!: (err: unknown) => void;
    const failed = new Promise<never>((_, reject) => (personFailed = reject));
    failed.catch(() => undefined);
    const client = await httpClient(
      serve.url,
      { authorization: `Bearer ${agentKey}` },
      {
        capabilities: { elicitation: { url: {} } },
        setup: (c) => {
          c.setRequestHandler(ElicitRequestSchema, (req) => {
            if (req.params.mode !== "url") return { action: "cancel" };
            asked.push(req.params);
            const answering = person(req.params.url);
            answering.catch(personFailed);
            answered.push(answering);
            return { action: "accept" };
          });
          c.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => {
            completed.push(n.params.elicitationId);
          });
        },
      },
    );
    clients.push(client);
    return {
      client,
      asked,
      completed,
      /** The tool call, failing at once if the person's part fails (instead of waiting out the call). */
      async callWhileAPersonAnswers(name: string, args: Structured): Promise<Result> {
        const res = await Promise.race([call(client, name, args, 120_000), failed]);
        await Promise.all(answered);
        return res;
      },
    };
  }

  /** A person opening the console link they were sent: signs in with alice's key, sees it whole, answers. */
  function personAt(decision: "approve" | "reject", check?: (page: Page) => Promise<void>) {
    return async (url: string) => {
      const page = await newPage();
      try {
        await page.goto(url);
        // Not signed in: the link carries nothing, so the sign-in page comes first, then back to it.
        expect(new URL(page.url()).pathname).toBe("/approvals/sign-in");
        await page.fill("#api_key", approverKey);
        await page.click("button[type=submit]");
        await page.waitForURL(url);
        await check?.(page);
        const headline = await answerOnPage(page, decision);
        expect(headline).toBe(`${decision === "approve" ? "Approved" : "Rejected"} as alice (console)`);
      } finally {
        await page.close();
      }
    };
  }

  it.concurrent("URL-mode elicitation: the pending chaoscore_execute returns the step a person approved on the page, once", async () => {
    const id = await pendingStep(agent, { key: "url-mode-step", value: "approved through the link" });
    const user = await urlModeAgent(
      personAt("approve", async (page) => {
        await expect(valueOf(page, "value").textContent()).resolves.toBe('"approved through the link"');
      }),
    );
    const out = structured(await user.callWhileAPersonAnswers("chaoscore_execute", { approval_id: id }));
    expect(out).toMatchObject({ results: [{ status: "executed" }], approval: { status: "approved", resolved_by: "alice (console)" } });
    expect(user.asked).toHaveLength(1);
    expect(user.asked[0]).toMatchObject({ mode: "url", url: `${base}/approvals/step/${id}` });
    expect(user.completed).toEqual([user.asked[0]!.elicitationId]);
    // Once: a second run is refused.
    const again = structured(await call(agent, "chaoscore_execute", { approval_id: id }));
    expect(JSON.stringify(again)).toContain("was already used; an approval runs its step once");
    const entries = structured(await call(agent, "inspect_audit_ledger", { limit: 200 })).entries as Entry[];
    expect(entries.find((e) => e.event.type === "approval.resolution" && e.event.approvalId === id)).toMatchObject({
      principal: "alice",
      event: { channel: "console", principal: "alice", approved: true },
    });
  });

  it.concurrent("URL-mode elicitation: a rejection given on the page comes back to the pending call; nothing runs", async () => {
    const id = await pendingStep(agent, { key: "url-mode-rejected", value: "never stored" });
    const user = await urlModeAgent(personAt("reject"));
    const out = structured(await user.callWhileAPersonAnswers("chaoscore_execute", { approval_id: id }));
    expect(out).toMatchObject({ results: [], approval: { status: "rejected", resolved_by: "alice (console)" } });
    expect(user.completed).toEqual([user.asked[0]!.elicitationId]);
    expect(structured(await call(agent, "chaoscore_recall", { key: "url-mode-rejected" })).items).toEqual([]);
  });

  it.concurrent("URL-mode elicitation: approve_spend on a held wire returns the receipt a person approved on the page; the wire runs once", async () => {
    const args = { ...wire, amount: 4400, memo: "Q3 settlement, ref GX-5523 (URL mode)" };
    const user = await urlModeAgent(
      personAt("approve", async (page) => {
        await expect(valueOf(page, "beneficiary").textContent()).resolves.toBe('"Globex Treasury Ltd"');
        await expect(valueOf(page, "memo").textContent()).resolves.toBe(JSON.stringify(args.memo));
      }),
    );
    const seq = await heldWire(user.client, args);
    const out = structured(await user.callWhileAPersonAnswers("approve_spend", { request_seq: seq }));
    expect(out).toMatchObject({ approved_by: "console:alice", channel: "console", human: { answer: "confirmed", via: "console" } });
    expect(user.asked[0]).toMatchObject({ mode: "url", url: `${base}/approvals/spend/${seq}` });
    expect(user.completed).toEqual([user.asked[0]!.elicitationId]);
    const receipt = out.receipt as Structured;
    expect(receipt).toMatchObject({ kind: "authorization", actor: "console:alice", tool: "wire_treasury_transfer" });
    expect(structured(await call(user.client, "wire_treasury_transfer", { ...args, receipt }))).toMatchObject({ executed: true, code: "EXECUTED" });
    expect(structured(await call(user.client, "wire_treasury_transfer", { ...args, receipt }))).toMatchObject({ executed: false, code: "replay" });
    const entries = structured(await call(agent, "inspect_audit_ledger", { limit: 200 })).entries as Entry[];
    expect(entries.find((e) => e.event.type === "spend.approved" && e.event.request_seq === seq)).toMatchObject({
      principal: "alice",
      event: { channel: "console", approver: "console:alice", approved_via: "console" },
    });
  });
});
