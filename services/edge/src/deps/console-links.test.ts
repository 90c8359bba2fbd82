import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { EdgeDeps } from "./edge-deps.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { connectInMemory, uniqueTenant, type Connected } from "../test-support/in-memory.js";
import { startTestLedger, type TestLedger } from "../test-support/ledger.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { consoleLink, spendPath, stepPath } from "./console-links.js";

// Every approval_required / HITL answer lists the console when it is served (docs/approvals.md
// §4, "Every answer lists every channel"), with a link built as §2 "Links" says.

describe("consoleLink", () => {
  it("prefers CHAOS_CORE_PUBLIC_URL, then the request's validated Host, then the listener", () => {
    const listenerUrl = () => "http://127.0.0.1:4100";
    expect(consoleLink({ publicUrl: "https://chaos.example.com/cc", fromRequestHost: true, listenerUrl }, stepPath("a-1"), "127.0.0.1:3000")).toBe(
      "https://chaos.example.com/cc/approvals/step/a-1",
    );
    expect(consoleLink({ fromRequestHost: true, listenerUrl }, spendPath(42n), "localhost:3000")).toBe("http://localhost:3000/approvals/spend/42");
    expect(consoleLink({ fromRequestHost: true, listenerUrl }, "", undefined)).toBe("http://127.0.0.1:4100/approvals");
    // A Host nobody validated is never a link's origin.
    expect(consoleLink({ listenerUrl }, "", "evil.example")).toBe("http://127.0.0.1:4100/approvals");
    expect(consoleLink({ fromRequestHost: false }, "", "evil.example")).toBeUndefined();
    expect(consoleLink(undefined, "", "127.0.0.1:3000")).toBeUndefined();
  });

  it("keeps an approval id inside its path segment", () => {
    expect(stepPath("../sign-out?x=1")).toBe("/step/..%2Fsign-out%3Fx%3D1");
  });
});

describe("the console in the answers agents get", () => {
  let services: TestServices;
  let ledger: TestLedger;
  const open: Connected[] = [];
  const listener = "http://127.0.0.1:45678";

  function ok<T>(res: CallToolResult): T {
    expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
    return res.structuredContent as T;
  }

  async function connect(tenant: string, deps: EdgeDeps): Promise<Connected> {
    const c = await connectInMemory(deps, { tenant, principal: "agent" });
    open.push(c);
    return c;
  }

  beforeAll(async () => {
    services = await startTestServices("console_links");
    ledger = await startTestLedger("console_links", undefined, services.policy);
  });

  afterAll(async () => {
    for (const c of open) await c.close();
    await ledger?.close();
    await services?.close();
  });

  const withConsole = (): EdgeDeps => ({ ...services.deps(createMemorySessionStore()), ledger: ledger.client, console: { listenerUrl: () => listener } });
  const withoutConsole = (): EdgeDeps => ({ ...services.deps(createMemorySessionStore()), ledger: ledger.client });

  type Channel = { channel: string; how: string; url?: string };
  type Execute = { results: Array<{ status: string; approval?: { approval_id: string; channels: Channel[] } }>; next_step?: string };

  it("a pending step lists the console's page for it, and the approval_required answer names it", async () => {
    const tenant = uniqueTenant("console-step");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const c = await connect(tenant, withConsole());
    const out = ok<Execute>(await c.call("chaoscore_execute", { steps: [{ id: "s1", capability: "memory.remember", input: { key: "k", value: "v" } }] }));
    const approval = out.results[0]!.approval!;
    const url = `${listener}/approvals/step/${approval.approval_id}`;
    expect(approval.channels).toContainEqual({ channel: "console", how: expect.stringContaining(url) as string, url });
    expect(out.next_step).toContain(`- console: A person holding the approver role opens ${url}`);

    const again = await c.call("chaoscore_execute", { approval_id: approval.approval_id });
    expect(again.isError).toBe(true);
    expect(JSON.stringify(again.content)).toContain(url);
  });

  it("a spend held for a person lists the console's page for its request", async () => {
    const tenant = uniqueTenant("console-spend");
    const c = await connect(tenant, withConsole());
    const gate = ok<{ state: string; ledger_seq: number; approval_channels: Channel[]; next_step: string }>(
      await c.call("evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: 300, confidence: 0.9 } }),
    );
    expect(gate.state).toBe("HITL_REQUIRED");
    const url = `${listener}/approvals/spend/${gate.ledger_seq}`;
    expect(gate.approval_channels).toContainEqual({ channel: "console", how: expect.stringContaining(url) as string, url });
    expect(gate.next_step).toContain(url);
  });

  it("names no console when it is off", async () => {
    const tenant = uniqueTenant("console-off");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const c = await connect(tenant, withoutConsole());
    const out = ok<Execute>(await c.call("chaoscore_execute", { steps: [{ id: "s1", capability: "memory.remember", input: { key: "k", value: "v" } }] }));
    expect(out.results[0]!.approval!.channels.map((ch) => ch.channel)).toEqual(["approver"]);
    expect(out.next_step).not.toContain("/approvals");
  });
});
