import { existsSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConsoleBrowser } from "../support/console-client.js";
import { autoAcceptingClient } from "../support/elicitation.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { removeDir, runToExit, stdioClient, tempDir } from "../support/processes.js";
import { enableEveryToolset } from "../support/toolsets.js";

type Structured = Record<string, unknown>;

function structured(res: Awaited<ReturnType<Client["callTool"]>>): Structured {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  return res.structuredContent as Structured;
}

function errorText(res: Awaited<ReturnType<Client["callTool"]>>): string {
  expect(res.isError).toBe(true);
  return (res.content as Array<{ type: string; text?: string }>).map((c) => c.text ?? "").join("\n");
}

/**
 * The operator's approval path in standalone: `chaos-core stdio` under a client that cannot
 * elicit, answered by `chaos-core approvals` over the loopback admin endpoint.
 */
describe("chaos-core approvals against a running chaos-core stdio", () => {
  const dir = tempDir("chaos-core-operator-");
  const env = { CHAOS_CORE_DATA_DIR: dir };
  let client: Client;
  let stderr: () => string;
  const approvals = (...args: string[]) => runToExit(["approvals", ...args], env, 30_000);

  beforeAll(async () => {
    await seedDataDir(dir);
    writeFileSync(join(dir, "policy.json"), JSON.stringify({ requireConfirmationFor: ["memory.remember", "http.request"] }));
    // The wire runs here: the local user's operator enabled the finance reference tools.
    await enableEveryToolset(env);
    // The SDK client declares no capabilities: no elicitation.
    ({ client, stderr } = await stdioClient(env));
    expect(client.getServerCapabilities()).toBeDefined();
  });

  afterAll(async () => {
    await client?.close();
    removeDir(dir);
  });

  it("writes admin.json (0600, loopback URL, this server's pid)", () => {
    const file = join(dir, "admin.json");
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const admin = JSON.parse(readFileSync(file, "utf8")) as { url: string; token: string; pid: number };
    expect(admin.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(admin.token.length).toBeGreaterThanOrEqual(43);
    expect(admin.pid).toBeGreaterThan(0);
    expect(stderr()).not.toContain(admin.token);
  });

  it("a step that needs approval: listed, approved by the operator, run once by the agent", async () => {
    const pending = structured(
      await client.callTool({
        name: "chaoscore_execute",
        arguments: { steps: [{ id: "s1", capability: "memory.remember", input: { key: "deploy-window", value: "friday 18:00" } }] },
      }),
    );
    const step = (pending.results as Structured[])[0]!;
    expect(step.status).toBe("pending_approval");
    const id = (step.approval as { approval_id: string }).approval_id;

    // Without elicitation and without an answer, the agent cannot run it.
    expect(errorText(await client.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } }))).toMatch(/has not been answered/);

    const listed = await approvals("list");
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain(id);
    expect(listed.stdout).toMatch(/memory\.remember/);
    expect(listed.stdout).toContain('"deploy-window"');
    const listedJson = await approvals("list", "--json", "--tenant", "default");
    expect(listedJson.code).toBe(0);
    const rows = (JSON.parse(listedJson.stdout) as { approvals: Structured[] }).approvals;
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ approval_id: id, capability: "memory.remember", requested_by: "local" });
    // Another tenant has none.
    const other = await approvals("list", "--tenant", "acme");
    expect(other.stdout).toMatch(/No pending approvals in tenant acme/);

    const approved = await approvals("approve", id);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(new RegExp(`Approved ${id} \\(recorded as operator \\(operator\\)\\)`));
    expect((await approvals("list")).stdout).toMatch(/No pending approvals/);
    // Answered once.
    const again = await approvals("reject", id);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(/already resolved/);

    const ran = structured(await client.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } }));
    expect((ran.results as Structured[])[0]).toMatchObject({ status: "executed", ran: true });
    expect(ran.approval).toMatchObject({ approval_id: id, status: "approved", resolved_by: "operator (operator)" });

    // Used once: a second run is refused and runs nothing.
    const second = await client.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } });
    const secondText = second.isError ? errorText(second) : JSON.stringify(second.structuredContent);
    expect(secondText).toMatch(/already used|consumed/);
    if (!second.isError) expect(((second.structuredContent as Structured).results as Structured[]).some((r) => r.status === "executed")).toBe(false);

    const recalled = structured(await client.callTool({ name: "chaoscore_recall", arguments: { key: "deploy-window" } }));
    expect(JSON.stringify(recalled)).toContain("friday 18:00");
  });

  it("a rejected step never runs", async () => {
    const pending = structured(
      await client.callTool({
        name: "chaoscore_execute",
        arguments: { steps: [{ id: "s1", capability: "memory.remember", input: { key: "rejected", value: "no" } }] },
      }),
    );
    const id = ((pending.results as Structured[])[0]!.approval as { approval_id: string }).approval_id;
    const rejected = await approvals("reject", id, "--json");
    expect(rejected.code).toBe(0);
    expect(JSON.parse(rejected.stdout)).toMatchObject({ approval_id: id, status: "rejected", resolved_by: "operator (operator)" });
    const run = await client.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } });
    const text = run.isError ? errorText(run) : JSON.stringify(run.structuredContent);
    expect(text).toMatch(/rejected/);
    expect(text).not.toMatch(/"status":"executed"/);
  });

  it("a spend held for a human: approve-spend by request_seq locks it, once, and the ledger records the operator", async () => {
    const gate = structured(
      await client.callTool({
        name: "evaluate_spend_gate",
        arguments: { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: 300, confidence: 0.9 } },
      }),
    );
    expect(gate.state).toBe("HITL_REQUIRED");
    const seq = gate.ledger_seq as number;

    const approved = await approvals("approve-spend", String(seq));
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(new RegExp(`Approved spend request ${seq}: LOCKED in ledger entry \\d+`));
    const twice = await approvals("approve-spend", String(seq), "--json");
    expect(twice.code).toBe(1);
    expect(JSON.parse(twice.stdout)).toHaveProperty("error");

    const lockedSeq = Number(/LOCKED in ledger entry (\d+)/.exec(approved.stdout)![1]);
    const audit = structured(await client.callTool({ name: "inspect_audit_ledger", arguments: { limit: 20 } }));
    const entries = audit.entries as Array<{ seq: number; principal: string }>;
    expect(entries.find((e) => e.seq === lockedSeq)).toMatchObject({ principal: "operator" });
    expect(entries.find((e) => e.seq === seq)).toMatchObject({ principal: "local" });
    // The cognition approval answered earlier is in the ledger under the operator too.
    expect(entries.filter((e) => e.principal === "operator").length).toBeGreaterThanOrEqual(2);
  });

  const wire = { beneficiary: "Globex Treasury Ltd", amount: 4200, currency: "USD", memo: "Q3 settlement, ref GX-5521", confidence: 0.9 };

  it("a wire held for a person: listed with its beneficiary and memo, approved by the operator, received by the agent's approve_spend, run once", async () => {
    const held = structured(await client.callTool({ name: "request_authorization", arguments: { tool: "wire_treasury_transfer", args: wire } }));
    expect(held.status).toBe("HITL_REQUIRED");
    const seq = held.request_seq as number;
    // The agent is told the operator's exact command (this data directory is not the default one).
    const command = `chaos-core approvals approve-spend ${seq} --data-dir ${dir}`;
    expect(held.next_step).toContain(command);
    expect(held.approval_channels).toContainEqual(expect.objectContaining({ channel: "operator", command }));
    expect(errorText(await client.callTool({ name: "approve_spend", arguments: { request_seq: seq } }))).toContain(command);

    const listed = await approvals("list");
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toContain(`spend request ${seq}  wire_treasury_transfer  policy wire  requested by local`);
    expect(listed.stdout).toContain('beneficiary = "Globex Treasury Ltd"');
    expect(listed.stdout).toContain('memo = "Q3 settlement, ref GX-5521"');
    expect(listed.stdout).toContain('amount = 4200');
    expect(listed.stdout).toContain(`approve: chaos-core approvals approve-spend ${seq}`);
    const rows = (JSON.parse((await approvals("list", "--json")).stdout) as { spend_requests: Structured[] }).spend_requests;
    expect(rows).toEqual([expect.objectContaining({ request_seq: seq, tool: "wire_treasury_transfer", arguments: wire, state: "PENDING", arguments_verified: true })]);

    const approved = await approvals("approve-spend", String(seq));
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toMatch(new RegExp(`Approved spend request ${seq}: LOCKED in ledger entry \\d+\\. The requester, local, receives it with their next approve_spend`));
    expect(approved.stdout).not.toMatch(/signature/);
    expect((await approvals("list")).stdout).toMatch(/No pending approvals/);

    const collected = structured(await client.callTool({ name: "approve_spend", arguments: { request_seq: seq } }));
    expect(collected).toMatchObject({ approved_by: "operator", channel: "operator" });
    const receipt = collected.receipt as Structured;
    expect(receipt).toMatchObject({ kind: "authorization", actor: "operator", tool: "wire_treasury_transfer" });
    expect(errorText(await client.callTool({ name: "approve_spend", arguments: { request_seq: seq } }))).toMatch(/already_collected/);
    const ran = structured(await client.callTool({ name: "wire_treasury_transfer", arguments: { ...wire, receipt } }));
    expect(ran).toMatchObject({ executed: true, code: "EXECUTED", result: { beneficiary: "Globex Treasury Ltd", amount: 4200 } });
    expect(structured(await client.callTool({ name: "wire_treasury_transfer", arguments: { ...wire, receipt } }))).toMatchObject({ executed: false, code: "replay" });
  });

  it("a wire the operator rejects never runs", async () => {
    const other = { ...wire, beneficiary: "Initech Holdings", memo: "urgent, do not delay" };
    const held = structured(await client.callTool({ name: "request_authorization", arguments: { tool: "wire_treasury_transfer", args: other } }));
    const seq = held.request_seq as number;
    const rejected = await approvals("reject-spend", String(seq), "--reason", "beneficiary unknown to finance");
    expect(rejected.code, rejected.stderr).toBe(0);
    expect(rejected.stdout).toMatch(new RegExp(`Declined spend request ${seq} \\(recorded in ledger entry \\d+ as operator\\)\\. It will never run\\.`));

    const run = structured(await client.callTool({ name: "wire_treasury_transfer", arguments: other }));
    expect(run).toMatchObject({ executed: false, code: "policy_deny", detail_code: "approval_declined", approval_request_seq: seq });
    expect(run.message).toMatch(/declined by operator \(operator\): beneficiary unknown to finance/);
    expect(errorText(await client.callTool({ name: "approve_spend", arguments: { request_seq: seq } }))).toMatch(/declined: request \d+ was declined by operator/);
    expect((await approvals("approve-spend", String(seq))).code).toBe(1);
  });

  it("a spend the day's total now blocks: approve-spend records the approval, fails, and names the daily cap with what is committed", async () => {
    const buy = (notional: number) => ({ policy: "equity", action: { action: "BUY", asset: "AAPL", notional, confidence: 0.9 } });
    const held = structured(await client.callTool({ name: "evaluate_spend_gate", arguments: buy(300) }));
    expect(held.state).toBe("HITL_REQUIRED");
    // Fill the day (earlier tests committed some of it) until the held 300 no longer fits.
    let committed = held.committed_today as number;
    while (committed + 300 <= 2500) {
      const locked = structured(await client.callTool({ name: "evaluate_spend_gate", arguments: buy(249) }));
      expect(locked.state).toBe("LOCKED");
      committed += 249;
    }
    const approved = await approvals("approve-spend", String(held.ledger_seq));
    expect(approved.code).toBe(1);
    const f = (n: number) => `${n}.0`;
    expect(approved.stderr).toContain(
      `but the spend is BLOCKED (approval by operator rejected: blocked: daily-cap): ` +
        `${f(committed)} committed today + 300.0 = ${f(committed + 300)} exceeds daily_cap 2500.0 (spend policy equity, version equity-1); ` +
        "an approval cannot override a hard rule.",
    );
  });

  it("serves the approval console on loopback: admin.json names it, and approvals console prints a one-time operator link", async () => {
    const file = join(dir, "admin.json");
    const consoleUrl = () => (JSON.parse(readFileSync(file, "utf8")) as { console_url?: string }).console_url;
    // The listener starts beside the stores; wait for admin.json to name it.
    for (let i = 0; i < 100 && !consoleUrl(); i++) await new Promise((r) => setTimeout(r, 100));
    expect(consoleUrl()).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/approvals$/);

    const pending = structured(
      await client.callTool({
        name: "chaoscore_execute",
        arguments: { steps: [{ id: "s1", capability: "memory.remember", input: { key: "console-review", value: "shown whole" } }] },
      }),
    );
    const id = ((pending.results as Structured[])[0]!.approval as { approval_id: string }).approval_id;
    expect(pending.next_step).toContain(`${consoleUrl()}/step/${id}`);

    const printed = await approvals("console");
    expect(printed.code, printed.stderr).toBe(0);
    const link = /(http:\/\/127\.0\.0\.1:\d+\/approvals\/sign-in\/link\?t=[A-Za-z0-9_-]{43})/.exec(printed.stdout)?.[1];
    expect(link, printed.stdout).toBeDefined();
    expect(printed.stdout).toMatch(/within 120 seconds .* as the operator of tenant default; it works once/);
    expect(stderr()).not.toContain(new URL(link!).searchParams.get("t")!);

    const browser = new ConsoleBrowser(new URL(link!).origin);
    const page = await browser.get(link!);
    expect(page.status).toBe(200);
    const signedIn = await browser.post("/approvals/sign-in/link", {
      form: { t: ConsoleBrowser.field(page.body, "t"), csrf: ConsoleBrowser.field(page.body, "csrf") },
    });
    expect(signedIn.status).toBe(303);
    const list = await browser.get("/approvals");
    expect(list.body).toContain("Signed in as <strong>operator</strong> in tenant <strong>default</strong>");
    expect(list.body).toContain(`/approvals/step/${id}`);
    const detail = await browser.get(`/approvals/step/${id}`);
    expect(detail.body).toContain("<pre>&quot;shown whole&quot;</pre>");
    // The operator's own command, exact, among the ways to answer it.
    expect(detail.body).toContain(`chaos-core approvals approve ${id}`);
    expect((await approvals("reject", id)).code).toBe(0);
    // The link was single use.
    expect((await new ConsoleBrowser(new URL(link!).origin).get(link!)).status).toBe(404);
  });

  it("refuses a bad command line with exit 2", async () => {
    expect((await approvals()).code).toBe(2);
    expect((await approvals("approve")).code).toBe(2);
    expect((await approvals("approve-spend", "-3")).code).toBe(2);
    expect((await approvals("reject-spend")).code).toBe(2);
    expect((await approvals("approve-spend", "3", "--reason", "x")).code).toBe(2);
    expect((await approvals("frobnicate")).code).toBe(2);
    expect((await approvals("console", "extra")).code).toBe(2);
    expect((await approvals("list", "--tenant", "Bad Tenant")).code).toBe(2);
  });

  it("says so when no server is running, after the server removed admin.json", async () => {
    await client.close();
    for (let i = 0; i < 100 && existsSync(join(dir, "admin.json")); i++) await new Promise((r) => setTimeout(r, 100));
    expect(existsSync(join(dir, "admin.json"))).toBe(false);
    const none = await approvals("list");
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/no chaos-core server is running on/);
  });
});

/**
 * The operator channel closes the loop for a client that answers every form itself. No
 * built-in capability is high risk, so policy.json gives memory.remember the channels the default
 * gives high risk (services/edge/src/tools/approvals.test.ts shows the default itself, with a
 * high-risk test capability): the real binary must not ask the client, must list the operator's
 * exact command, and must record in the ledger both the refused attempt and the operator's answer.
 */
describe("the operator channel against chaos-core stdio with a client that auto-accepts every form", () => {
  const dir = tempDir("chaos-core-operator-channel-");
  const env = { CHAOS_CORE_DATA_DIR: dir };
  const asked: string[] = [];
  let client: Client;

  beforeAll(async () => {
    await seedDataDir(dir);
    writeFileSync(
      join(dir, "policy.json"),
      JSON.stringify({
        requireConfirmationFor: ["memory.remember"],
        approvalChannels: { capabilities: { "memory.remember": ["approver", "operator", "console"] } },
      }),
    );
    ({ client } = await stdioClient(env, undefined, autoAcceptingClient(asked)));
  });

  afterAll(async () => {
    await client?.close();
    removeDir(dir);
  });

  it("is not asked, gets the exact operator command, and the ledger records the attempt and the operator's answer", async () => {
    const pending = structured(
      await client.callTool({
        name: "chaoscore_execute",
        arguments: { steps: [{ id: "s1", capability: "memory.remember", input: { key: "payout", value: "ACME Ltd 25000" } }] },
      }),
    );
    const approval = (pending.results as Structured[])[0]!.approval as { approval_id: string; channels: Array<{ channel: string; command?: string }> };
    const id = approval.approval_id;
    const command = `chaos-core approvals approve ${id} --data-dir ${dir}`;
    // stdio serves the approval console on a loopback listener of its own: it is a channel here too.
    expect(approval.channels.map((c) => c.channel)).toEqual(["approver", "operator", "console"]);
    expect(approval.channels[1]!.command).toBe(command);
    expect((approval.channels[2] as { url?: string }).url).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:\\d+/approvals/step/${id}$`));

    const refused = errorText(await client.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } }));
    expect(refused).toMatch(/has not been answered, and policy does not accept an answer from this client/);
    expect(refused).toContain(`- operator: The operator of this Chaos Core runs ${command} on its machine`);
    expect(asked).toEqual([]);

    // The exact command the answer named, as the operator would paste it.
    const approved = await runToExit(command.split(" ").slice(1), {}, 30_000);
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stdout).toContain(`Approved ${id} (recorded as operator (operator))`);

    const ran = structured(await client.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } }));
    expect((ran.results as Structured[])[0]).toMatchObject({ status: "executed", ran: true });
    expect(ran.approval).toMatchObject({ status: "approved", resolved_by: "operator (operator)" });
    expect(asked).toEqual([]);

    const audit = structured(await client.callTool({ name: "inspect_audit_ledger", arguments: { limit: 50 } }));
    const events = (audit.entries as Array<{ principal: string; event: Structured }>).filter((e) => e.event.approvalId === id || e.event.type === "receipt.issued");
    expect(events.find((e) => e.event.type === "step.outcome" && e.event.errorCode === "approval_required")).toMatchObject({ principal: "local" });
    expect(events.find((e) => e.event.type === "approval.resolution")).toMatchObject({
      principal: "operator",
      event: { channel: "operator", principal: "operator", approved: true },
    });
    expect(events.find((e) => e.event.type === "receipt.issued")).toMatchObject({ event: { channel: "operator", actor: "operator", requester: "local" } });
  });
});
