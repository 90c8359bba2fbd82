import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { launchChromium, SKIP_BROWSER_TESTS } from "../support/browser.js";
import { httpClient, removeDir, ROOT, startServe, tempDir, type ServeProcess } from "../support/processes.js";

type Structured = Record<string, unknown>;

const hashApiKey = (key: string) => createHash("sha256").update(key, "utf8").digest("hex");

/** Where the screenshots a person can look at are kept (a CI artifact, ignored by git). */
const SCREENSHOTS = join(ROOT, "test-results", "console");

const SCRIPT = "<script>alert(1)</script>";
const ATTRIBUTE = `"><img src=x onerror=alert(1)>`;

/**
 * The approval console in a real headless browser (Debian's chromium, driven by playwright-core)
 * against `chaos-core serve` with API keys: an agent's step whose arguments hold HTML and script
 * waits for approval; an approver signs in through the form and reviews it. Every argument must
 * render as text: no dialog opens, no element is made from it, and each value's text is exactly
 * the JSON text of what would run. The agent's own key is refused at the sign-in.
 */
describe.skipIf(SKIP_BROWSER_TESTS)("the approval console in a browser", () => {
  const dir = tempDir("chaos-core-console-browser-");
  const agentKey = randomBytes(24).toString("base64url");
  const approverKey = randomBytes(24).toString("base64url");
  let serve: ServeProcess;
  let agent: Client;
  let browser: Browser;
  let base: string;
  const dialogs: string[] = [];

  beforeAll(async () => {
    mkdirSync(join(dir, "data"));
    writeFileSync(join(dir, "data", "policy.json"), JSON.stringify({ requireConfirmationFor: ["memory.remember"] }));
    const keysFile = join(dir, "keys.json");
    writeFileSync(
      keysFile,
      JSON.stringify([
        { tenant: "default", principal: "agent", sha256: hashApiKey(agentKey) },
        { tenant: "default", principal: "alice", sha256: hashApiKey(approverKey), roles: ["approver"] },
      ]),
    );
    serve = await startServe({ CHAOS_CORE_DATA_DIR: join(dir, "data"), CHAOS_CORE_API_KEYS_FILE: keysFile });
    base = serve.url.replace(/\/mcp$/, "");
    agent = await httpClient(serve.url, { authorization: `Bearer ${agentKey}` });
    browser = await launchChromium();
    mkdirSync(SCREENSHOTS, { recursive: true });
  });

  afterAll(async () => {
    await browser?.close();
    await agent?.close();
    await serve?.stop();
    removeDir(dir);
  });

  async function newPage(): Promise<Page> {
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

  it("refuses the agent's own key at sign-in", async () => {
    const page = await newPage();
    await signIn(page, agentKey);
    await expect(page.locator("p.error").textContent()).resolves.toBe("this key does not hold the approver role: an agent's key cannot sign in here");
    expect(new URL(page.url()).pathname).toBe("/approvals/sign-in");
    expect((await page.context().cookies()).map((c) => c.name)).not.toContain("chaoscore-console");
    await page.close();
  });

  it("renders arguments holding HTML and script as text: no dialog, no element, the exact text", async () => {
    const pending = (await agent.callTool({
      name: "chaoscore_execute",
      arguments: { steps: [{ id: "s1", capability: "memory.remember", input: { key: "hostile", value: { script: SCRIPT, attribute: ATTRIBUTE } } }] },
    })) as { structuredContent: Structured; isError?: boolean };
    expect(pending.isError).toBeFalsy();
    const step = (pending.structuredContent.results as Structured[])[0]!;
    expect(step.status).toBe("pending_approval");
    const id = (step.approval as { approval_id: string }).approval_id;

    const page = await newPage();
    await signIn(page, approverKey);
    expect(new URL(page.url()).pathname).toBe("/approvals");
    await expect(page.locator("header .who").textContent()).resolves.toContain("Signed in as alice in tenant default");
    await page.click(`a[href="/approvals/step/${id}"]`);
    expect(new URL(page.url()).pathname).toBe(`/approvals/step/${id}`);

    const valueOf = (path: string) => page.locator("table.rows tr", { has: page.locator("th code", { hasText: path }) }).locator("td pre");
    // Each value is the JSON text of what would run, character for character.
    await expect(valueOf("value.script").textContent()).resolves.toBe(JSON.stringify(SCRIPT));
    await expect(valueOf("value.attribute").textContent()).resolves.toBe(JSON.stringify(ATTRIBUTE));
    await expect(valueOf("key").textContent()).resolves.toBe(JSON.stringify("hostile"));
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
    await page.close();
  });
});
