import { randomBytes } from "node:crypto";
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  ElicitationCompleteNotificationSchema,
  ElicitRequestSchema,
  LoggingMessageNotificationSchema,
  type CallToolResult,
  type ClientCapabilities,
  type ElicitRequestURLParams,
  type ElicitResult,
  type Progress,
} from "@modelcontextprotocol/sdk/types.js";
import { ApprovalChannel } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { CallContext } from "@chaos-core/kit";
import { recordingLogger } from "../../../../test/support/logger.js";
import { hashApiKey } from "../auth/api-keys.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { elicitModes } from "../server/register-tools.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { httpClient } from "../test-support/http.js";
import { connectInMemory, uniqueTenant, withEveryToolset, type Connected } from "../test-support/in-memory.js";
import { startTestLedger, type TestLedger } from "../test-support/ledger.js";
import { startTestServices, TEST_PAYOUT, type TestServices } from "../test-support/services.js";
import { startHttpTransport, type RunningHttpTransport } from "../transport/http.js";
import { ok as okOf, refused, type ExecuteOutput } from "../test-support/results.js";
import type { Client as V2Client } from "@modelcontextprotocol/client";
import { newMrtrKeyringFile, parseMrtrKeyring } from "../mrtr/keyring.js";
import { modernClient, retryParams, type WireResult } from "../../../../test/support/mrtr.js";

const ok = <T = ExecuteOutput>(res: CallToolResult): T => okOf<T>(res);

// URL-mode elicitation to the approval console (docs/approvals.md §3), end to end against the
// real cognition, policy, memory and ledger services through real SDK clients: the client's user
// is sent to the console page, the answer comes from a person through another channel (the
// console's own ResolveApproval / ApproveSpend, or an approver's tool call), and the waiting call
// carries on with it. The console's answer forms (increment 7b) are not needed here: cognition
// and the ledger take the console's answer exactly as the page will send it.

const PUBLIC_URL = "https://chaos.example.test/team-a";


let services: TestServices;
let ledger: TestLedger;
let deps: EdgeDeps;
const open: Connected[] = [];



/** What the client's side saw: URL elicitations, forms, completions and the "waiting" lines. */
interface UserSide {
  readonly urls: ElicitRequestURLParams[];
  readonly forms: string[];
  readonly completed: string[];
  readonly waiting: Array<{ message: string; url: unknown }>;
  /** What the test did on the person's side while the call waited (awaited by `settled`). */
  readonly actions: Promise<unknown>[];
  settled(): Promise<void>;
}

interface UserOptions {
  /** The answer to a URL elicitation. */
  readonly url?: ElicitResult["action"];
  /** The answer to a form elicitation; without it the client declares URL mode only. */
  readonly form?: ElicitResult;
  /** Declare no URL mode (a form-only client). */
  readonly formOnly?: boolean;
  /** Run when the server says it waits for a person: what a person does meanwhile. */
  readonly whileWaiting?: (url: string) => Promise<unknown>;
}

/** A client declaring URL-mode elicitation (and form mode with `form`) and recording what it is sent. */
function userClient(options: UserOptions = {}): { side: UserSide; capabilities: ClientCapabilities; setup: (client: Client) => void } {
  const side: UserSide = {
    urls: [],
    forms: [],
    completed: [],
    waiting: [],
    actions: [],
    settled: async () => {
      await Promise.all(side.actions);
    },
  };
  const capabilities: ClientCapabilities = {
    elicitation: { ...(options.form || options.formOnly ? { form: {} } : {}), ...(options.formOnly ? {} : { url: {} }) },
  };
  return {
    side,
    capabilities,
    setup: (client) => {
      client.setRequestHandler(ElicitRequestSchema, (req) => {
        if (req.params.mode === "url") {
          side.urls.push(req.params);
          return { action: options.url ?? "accept" };
        }
        side.forms.push(req.params.message);
        return options.form ?? { action: "cancel" };
      });
      client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => {
        side.completed.push(n.params.elicitationId);
      });
      client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
        const data = n.params.data as { message?: string; url?: unknown };
        if (!data.message?.startsWith("waiting for a person")) return;
        side.waiting.push({ message: data.message, url: data.url });
        if (options.whileWaiting) side.actions.push(options.whileWaiting(String(data.url)));
      });
    },
  };
}

async function connect(tenant: string, options: UserOptions = {}, edgeDeps: EdgeDeps = deps): Promise<Connected & { side: UserSide }> {
  const user = userClient(options);
  const c = await connectInMemory(edgeDeps, { tenant, principal: "agent" }, { capabilities: user.capabilities, setup: user.setup });
  open.push(c);
  return { ...c, side: user.side };
}

/** A person holding the approver role, signed in on the console (the page's session id shape). */
const consolePerson = (tenant: string, principal = "alice"): { ctx: CallContext } => ({
  ctx: { tenant, principal, sessionId: `console-${randomBytes(6).toString("hex")}` },
});

/** The console's answer to a step approval, as the page sends it: ResolveApproval, channel console. */
function answerOnConsole(tenant: string, approvalId: string, approve: boolean) {
  return services.cognition.resolveApproval({ approvalId, approve, channel: ApprovalChannel.CONSOLE }, consolePerson(tenant));
}

const payoutStep = (beneficiary: string) => ({ id: "p1", capability: TEST_PAYOUT, input: { beneficiary, amount: 25_000 }, rationale: "hand-written" });
const paidTo = (beneficiary: string) => services.payouts.filter((p) => (p as { beneficiary: string }).beneficiary === beneficiary).length;

/** A high-risk step waiting for approval under the default policy (approver, operator, console). */
async function pendingPayout(c: Connected, beneficiary: string): Promise<string> {
  const out = ok(await c.call("chaoscore_execute", { steps: [payoutStep(beneficiary)] }));
  expect(out.results[0]).toMatchObject({ status: "pending_approval", ran: false });
  return out.results[0]!.approval!.approval_id;
}

async function status(tenant: string, approvalId: string): Promise<string> {
  return (await services.cognition.getApproval({ approvalId }, { ctx: { tenant, principal: "agent" } })).status;
}

async function stored(tenant: string, key: string): Promise<unknown> {
  const res = await services.memory.recall({ key }, { ctx: { tenant, principal: "test" } });
  return res.item?.value ? toJson(ValueSchema, res.item.value) : undefined;
}

/** The step outcomes cognition recorded for an approval, in order. */
const outcomes = (approvalId: string) =>
  services.audit.events().filter((e) => e.type === "step.outcome" && "approvalId" in e && e.approvalId === approvalId);

beforeAll(async () => {
  services = await startTestServices("url_elicitation", { highRisk: true });
  ledger = await startTestLedger("url_elicitation", undefined, services.policy);
  // The console is on and reached at a public URL; a person has a minute (the tests answer at once).
  deps = { ...services.deps(createMemorySessionStore()), ledger: ledger.client, console: { publicUrl: PUBLIC_URL }, approvalWaitSeconds: 60 };
});

afterAll(async () => {
  for (const c of open) await c.close();
  await ledger?.close();
  await services?.close();
});

describe("elicitModes", () => {
  it("reads the modes a client declared; an empty elicitation capability is form mode", () => {
    expect(elicitModes(undefined)).toEqual({ form: false, url: false });
    expect(elicitModes({})).toEqual({ form: false, url: false });
    expect(elicitModes({ elicitation: {} })).toEqual({ form: true, url: false });
    expect(elicitModes({ elicitation: { form: {} } })).toEqual({ form: true, url: false });
    expect(elicitModes({ elicitation: { url: {} } })).toEqual({ form: false, url: true });
    expect(elicitModes({ elicitation: { form: {}, url: {} } })).toEqual({ form: true, url: true });
  });
});

describe("chaoscore_execute {approval_id} through URL-mode elicitation", () => {
  it("sends the user to the console page (no token in it), runs the step once a person approves there, and completes the same elicitation", async () => {
    const tenant = uniqueTenant("url-step");
    await services.putPolicy(tenant, {});
    let approvalId = "";
    const c = await connect(tenant, { whileWaiting: () => answerOnConsole(tenant, approvalId, true) });
    approvalId = await pendingPayout(c, "url-approved");

    const out = ok(await c.call("chaoscore_execute", { approval_id: approvalId }));
    await c.side.settled();
    expect(out.results).toHaveLength(1);
    expect(out.results[0]).toMatchObject({ capability: TEST_PAYOUT, status: "executed", ran: true });
    expect(out.approval).toEqual({ approval_id: approvalId, status: "approved", resolved_by: "alice (console)" });
    expect(paidTo("url-approved")).toBe(1);

    // One URL elicitation, for exactly this approval's page: the URL carries no credential.
    expect(c.side.urls).toHaveLength(1);
    const asked = c.side.urls[0]!;
    expect(asked.mode).toBe("url");
    expect(asked.url).toBe(`${PUBLIC_URL}/approvals/step/${approvalId}`);
    expect(new URL(asked.url).search).toBe("");
    expect(new URL(asked.url).hash).toBe("");
    expect(asked.elicitationId).toMatch(/^[0-9a-f-]{36}$/);
    expect(asked.message).toContain(`Approval ${approvalId} waits for a person`);
    expect(asked.message).toContain(`${TEST_PAYOUT} (risk high)`);
    expect(asked.message).toContain("A person holding the approver role, not the agent that asked, must answer it");
    // The completion names the same elicitation, once; the client was never asked a form.
    expect(c.side.completed).toEqual([asked.elicitationId]);
    expect(c.side.forms).toEqual([]);
    expect(c.side.waiting).toEqual([{ message: expect.stringContaining(`waiting for a person at ${asked.url}`) as unknown as string, url: asked.url }]);

    // Used once: the next call does not ask anyone and runs nothing.
    const again = ok(await c.call("chaoscore_execute", { approval_id: approvalId }));
    expect(again.results[0]).toMatchObject({ ran: false, error: { code: "failed_precondition" } });
    expect(c.side.urls).toHaveLength(1);
    expect(paidTo("url-approved")).toBe(1);
  });

  it("prefers the console to the client's own form, even where policy accepts the form", async () => {
    const tenant = uniqueTenant("url-over-form");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    let approvalId = "";
    const c = await connect(tenant, { form: { action: "accept", content: { approve: true } }, whileWaiting: () => answerOnConsole(tenant, approvalId, true) });
    const pending = ok(await c.call("chaoscore_execute", { steps: [{ id: "s1", capability: "memory.remember", input: { key: "window", value: "friday" }, rationale: "hand-written" }] }));
    approvalId = pending.results[0]!.approval!.approval_id;

    const out = ok(await c.call("chaoscore_execute", { approval_id: approvalId }));
    await c.side.settled();
    expect(out.results[0]).toMatchObject({ status: "executed", ran: true });
    expect(out.approval).toMatchObject({ status: "approved", resolved_by: "alice (console)" });
    expect(c.side.forms).toEqual([]);
    expect(c.side.urls.map((u) => u.url)).toEqual([`${PUBLIC_URL}/approvals/step/${approvalId}`]);
    expect(await stored(tenant, "window")).toBe("friday");
  });

  it("answers with the rejection a person gave on the console, and runs nothing", async () => {
    const tenant = uniqueTenant("url-reject");
    await services.putPolicy(tenant, {});
    let approvalId = "";
    const c = await connect(tenant, { whileWaiting: () => answerOnConsole(tenant, approvalId, false) });
    approvalId = await pendingPayout(c, "url-rejected");

    const out = ok(await c.call("chaoscore_execute", { approval_id: approvalId }));
    await c.side.settled();
    expect(out.results).toEqual([]);
    expect(out.approval).toEqual({ approval_id: approvalId, status: "rejected", resolved_by: "alice (console)" });
    expect(out.next_step).toContain(`alice (console) rejected approval ${approvalId}: the step did not run and will not`);
    expect(c.side.completed).toEqual([c.side.urls[0]!.elicitationId]);
    expect(paidTo("url-rejected")).toBe(0);
  });

  for (const action of ["decline", "cancel"] as const) {
    it(`resolves nothing when the user answers ${action}: approval_required listing every channel, the approval stays pending`, async () => {
      const tenant = uniqueTenant(`url-${action}`);
      await services.putPolicy(tenant, {});
      const c = await connect(tenant, { url: action });
      const beneficiary = `url-${action}`;
      const approvalId = await pendingPayout(c, beneficiary);

      const error = refused(await c.call("chaoscore_execute", { approval_id: approvalId }));
      expect(error.code).toBe("approval_required");
      const page = `${PUBLIC_URL}/approvals/step/${approvalId}`;
      expect(error.message).toContain(`approval ${approvalId} has not been answered, and your user ${action === "decline" ? "declined to open" : "dismissed the request to open"} the approval page (${page})`);
      expect(error.message).toContain(`\n- approver: A person holding the approver role in this tenant calls chaoscore_approve {"approval_id": "${approvalId}", "approve": true}`);
      expect(error.message).toContain(`\n- console: A person holding the approver role opens ${page} and signs in with their own API key`);
      // This client is told its next call sends its user to the page again.
      expect(error.message).toContain(
        `Your client supports URL-mode elicitation: your next chaoscore_execute {"approval_id": "${approvalId}"} sends your user to this page and waits for the answer given there.`,
      );
      expect(error.message).not.toContain("client_elicitation");
      expect(c.side.waiting).toEqual([]);
      expect(c.side.completed).toEqual([]);
      expect(await status(tenant, approvalId)).toBe("pending");
      // The attempt reached cognition, which recorded it; nothing ran.
      expect(outcomes(approvalId)).toHaveLength(2);
      expect(outcomes(approvalId)[1]).toMatchObject({ status: "failed", ran: false, errorCode: "approval_required" });
      expect(paidTo(beneficiary)).toBe(0);

      // Still pending, so a person can still approve it, and the agent's next call runs it.
      await answerOnConsole(tenant, approvalId, true);
      const later = await connect(tenant, { formOnly: true });
      expect(ok(await later.call("chaoscore_execute", { approval_id: approvalId })).results[0]).toMatchObject({ status: "executed", ran: true });
      expect(paidTo(beneficiary)).toBe(1);
    });
  }

  it("gives up after CHAOS_CORE_APPROVAL_WAIT_SECONDS with approval_required, telling a client that asked for progress what it waits for", async () => {
    const tenant = uniqueTenant("url-timeout");
    await services.putPolicy(tenant, {});
    const c = await connect(tenant, {}, { ...deps, approvalWaitSeconds: 1 });
    const approvalId = await pendingPayout(c, "url-timeout");
    const progress: Progress[] = [];

    const res = (await c.client.callTool({ name: "chaoscore_execute", arguments: { approval_id: approvalId } }, undefined, {
      onprogress: (p) => progress.push(p),
    })) as CallToolResult;
    const error = refused(res);
    const page = `${PUBLIC_URL}/approvals/step/${approvalId}`;
    expect(error.code).toBe("approval_required");
    expect(error.message).toContain(`approval ${approvalId} has not been answered, and no person answered it at ${page} within 1 s; it stays pending.`);
    expect(error.message).toContain(`- console: A person holding the approver role opens ${page}`);
    expect(progress[0]).toEqual({ progress: 0, total: 1, message: `waiting for a person at ${page}` });
    expect(c.side.waiting).toHaveLength(1);
    expect(c.side.completed).toEqual([]);
    expect(await status(tenant, approvalId)).toBe("pending");
    expect(paidTo("url-timeout")).toBe(0);
  });

  it("stops waiting when the client cancels the call: nothing more is sent, the approval stays pending, and the next call picks up the answer", async () => {
    const tenant = uniqueTenant("url-abort");
    await services.putPolicy(tenant, {});
    const log = recordingLogger();
    const abort = new AbortController();
    const c = await connect(tenant, { whileWaiting: () => Promise.resolve(abort.abort()) }, { ...deps, logger: log.logger });
    const approvalId = await pendingPayout(c, "url-abort");

    await expect(
      c.client.callTool({ name: "chaoscore_execute", arguments: { approval_id: approvalId } }, undefined, { signal: abort.signal }),
    ).rejects.toThrow();
    // The server's call ended as approval_required (the client no longer reads its answer).
    await vi.waitFor(
      () => {
        const last = log.lines.filter((l) => l["tool"] === "chaoscore_execute").at(-1);
        expect(last).toMatchObject({ msg: "tool call refused", outcome: "approval_required" });
      },
      { timeout: 10_000, interval: 20 },
    );
    expect(await status(tenant, approvalId)).toBe("pending");
    expect(c.side.completed).toEqual([]);
    // A cancelled call asks nothing more of cognition: only the pending outcome is recorded.
    expect(outcomes(approvalId)).toHaveLength(1);

    await answerOnConsole(tenant, approvalId, true);
    const again = await connect(tenant, { formOnly: true });
    expect(ok(await again.call("chaoscore_execute", { approval_id: approvalId })).results[0]).toMatchObject({ status: "executed", ran: true });
    expect(paidTo("url-abort")).toBe(1);
  });

  it("keeps today's behaviour for a form-only client, and for a URL client where the console is off", async () => {
    const tenant = uniqueTenant("url-form-only");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const remember = (value: string) => ({ steps: [{ id: "s1", capability: "memory.remember", input: { key: "k", value }, rationale: "hand-written" }] });

    const formOnly = await connect(tenant, { formOnly: true, form: { action: "accept", content: { approve: true } } });
    const first = ok(await formOnly.call("chaoscore_execute", remember("one"))).results[0]!.approval!.approval_id;
    expect(ok(await formOnly.call("chaoscore_execute", { approval_id: first })).results[0]).toMatchObject({ status: "executed" });
    expect(formOnly.side.forms).toHaveLength(1);
    expect(formOnly.side.urls).toEqual([]);

    const { console: _off, ...consoleOff } = deps;
    const noConsole = await connect(tenant, { form: { action: "accept", content: { approve: true } } }, consoleOff);
    const second = ok(await noConsole.call("chaoscore_execute", remember("two"))).results[0]!.approval!.approval_id;
    expect(ok(await noConsole.call("chaoscore_execute", { approval_id: second })).results[0]).toMatchObject({ status: "executed" });
    expect(noConsole.side.forms).toHaveLength(1);
    expect(noConsole.side.urls).toEqual([]);

    // Where policy does not accept the console, a URL client is not sent there either.
    const operatorOnly = uniqueTenant("url-no-console-channel");
    await services.putPolicy(operatorOnly, { approvalChannels: { high: { channels: ["APPROVAL_CHANNEL_APPROVER"] } } });
    const urlClient = await connect(operatorOnly);
    const id = await pendingPayout(urlClient, "url-not-console");
    const error = refused(await urlClient.call("chaoscore_execute", { approval_id: id }));
    expect(error.code).toBe("approval_required");
    expect(error.message).not.toContain("/approvals/");
    expect(urlClient.side.urls).toEqual([]);
  });
});

describe("chaoscore_remember through URL-mode elicitation", () => {
  it("waits on the approval it just created and returns the stored item once a person approved it", async () => {
    const tenant = uniqueTenant("url-remember");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const c = await connect(tenant, {
      whileWaiting: (url) => answerOnConsole(tenant, decodeURIComponent(url.slice(url.lastIndexOf("/") + 1)), true),
    });
    const out = ok<{ item: { key: string } }>(await c.call("chaoscore_remember", { key: "deploy-window", value: "friday" }));
    await c.side.settled();
    expect(out.item.key).toBe("deploy-window");
    expect(await stored(tenant, "deploy-window")).toBe("friday");
    expect(c.side.urls).toHaveLength(1);
    expect(c.side.urls[0]!.url).toMatch(new RegExp(`^${PUBLIC_URL}/approvals/step/[0-9a-f-]{36}$`));
    expect(c.side.completed).toEqual([c.side.urls[0]!.elicitationId]);
  });

  it("answers approval_required, the approval pending, when the user declines to open the page", async () => {
    const tenant = uniqueTenant("url-remember-decline");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const c = await connect(tenant, { url: "decline" });
    const error = refused(await c.call("chaoscore_remember", { key: "deploy-window", value: "friday" }));
    expect(error.code).toBe("approval_required");
    const id = /approval ([0-9a-f-]{36}) waits for a person: it has not been answered, and your user declined/.exec(error.message)?.[1];
    expect(id).toBeDefined();
    expect(error.message).toContain(`- console: A person holding the approver role opens ${PUBLIC_URL}/approvals/step/${id}`);
    expect(await status(tenant, id!)).toBe("pending");
    expect(await stored(tenant, "deploy-window")).toBeUndefined();
  });
});

describe("approve_spend through URL-mode elicitation", () => {
  const gate = (notional: number) => ({ policy: "equity", action: { action: "BUY", asset: "AAPL", notional, confidence: 0.9 } });
  const wire = { beneficiary: "Northwind Traders", amount: 900, currency: "USD", memo: "PO 7781", confidence: 0.9 };

  /** The console's answer to a spend request, as the page sends it: ApproveSpend / DeclineSpend, via console. */
  const approveOnConsole = (tenant: string, seq: number) =>
    ledger.client.approveSpend({ requestSeq: BigInt(seq), approvedVia: "console", ttlSeconds: 0 }, consolePerson(tenant));
  const declineOnConsole = (tenant: string, seq: number) =>
    ledger.client.declineSpend({ requestSeq: BigInt(seq), approvedVia: "console", reason: "not this week" }, consolePerson(tenant));

  it("sends the user to the request's console page, and collects the receipt a person approved there, once", async () => {
    const tenant = uniqueTenant("url-wire");
    let seq = 0;
    // The wire runs at the end: its tenant's operator enabled the finance-reference toolset.
    const c = await connect(tenant, { whileWaiting: () => approveOnConsole(tenant, seq) }, withEveryToolset(deps));
    const held = ok<{ status: string; request_seq: number }>(await c.call("request_authorization", { tool: "wire_treasury_transfer", args: wire }));
    expect(held.status).toBe("HITL_REQUIRED");
    seq = held.request_seq;

    const out = ok<{ state: string; human: unknown; approved_by: string; channel: string; receipt: Record<string, unknown>; collect_seq: number }>(
      await c.call("approve_spend", { request_seq: seq }),
    );
    await c.side.settled();
    expect(out).toMatchObject({ state: "LOCKED", human: { answer: "confirmed", via: "console" }, approved_by: "console:alice", channel: "console" });
    expect(out.receipt).toMatchObject({ kind: "authorization", tool: "wire_treasury_transfer" });
    expect(c.side.urls).toHaveLength(1);
    expect(c.side.urls[0]!.url).toBe(`${PUBLIC_URL}/approvals/spend/${seq}`);
    expect(c.side.urls[0]!.message).toContain(`Spend request ${seq} waits for a person`);
    expect(c.side.urls[0]!.message).toContain("wire_treasury_transfer under spend policy wire");
    expect(c.side.completed).toEqual([c.side.urls[0]!.elicitationId]);
    expect(c.side.forms).toEqual([]);

    // The receipt runs the wire once; the approval was collected once.
    expect(ok(await c.call("wire_treasury_transfer", { ...wire, receipt: out.receipt }))).toMatchObject({ executed: true });
    expect(refused(await c.call("approve_spend", { request_seq: seq })).message).toMatch(/^already_collected: /);
  });

  it("answers with a decline a person gave on the console", async () => {
    const tenant = uniqueTenant("url-spend-decline");
    let seq = 0;
    const c = await connect(tenant, { whileWaiting: () => declineOnConsole(tenant, seq) });
    seq = ok<{ state: string; ledger_seq: number }>(await c.call("evaluate_spend_gate", gate(300))).ledger_seq;
    const out = ok<{ human: unknown; channel: string; decline_seq: number; next_step: string }>(await c.call("approve_spend", { request_seq: seq }));
    await c.side.settled();
    expect(out).toMatchObject({ human: { answer: "declined", via: "console" }, channel: "console" });
    expect(out.decline_seq).toBeGreaterThan(seq);
    expect(out.next_step).toContain(`console:alice declined spend request ${seq} (via console): nothing was approved or issued`);
  });

  it("resolves nothing on a decline, or when nobody answers in time: approval_required, the attempt recorded, the request pending", async () => {
    const tenant = uniqueTenant("url-spend-timeout");
    for (const [options, why] of [
      [{ url: "decline" }, /and your user declined to open the approval page/],
      [{}, /and no person answered it at \S+ within 1 s; it stays pending\./],
    ] as const) {
      const c = await connect(tenant, options, { ...deps, approvalWaitSeconds: 1 });
      const seq = ok<{ ledger_seq: number }>(await c.call("evaluate_spend_gate", gate(300))).ledger_seq;
      const error = refused(await c.call("approve_spend", { request_seq: seq }));
      expect(error.code).toBe("approval_required");
      expect(error.message).toMatch(new RegExp(`^Nothing was approved: no person has answered spend request ${seq} yet, `));
      expect(error.message).toMatch(why);
      expect(error.message).toMatch(/This attempt is recorded in ledger entry \d+\./);
      expect(error.message).toContain(`- console: A person holding the approver role opens ${PUBLIC_URL}/approvals/spend/${seq}`);
      const { request } = await ledger.client.getSpendRequest({ requestSeq: BigInt(seq) }, { ctx: { tenant, principal: "agent" } });
      expect(request?.state).toBe("PENDING");
      expect(c.side.completed).toEqual([]);
    }
  });
});

describe("over HTTP with API keys", () => {
  const keys = { agent: randomBytes(24).toString("base64url"), alice: randomBytes(24).toString("base64url") };
  const tenant = `url-http-${randomBytes(3).toString("hex")}`;
  const log = recordingLogger();
  let edge: RunningHttpTransport;
  const clients: Client[] = [];

  beforeAll(async () => {
    await services.putPolicy(tenant, {});
    // Links from the request's own validated Host, as the HTTP transport that serves the console sets it.
    edge = await startHttpTransport(
      {
        ...services.deps(createMemorySessionStore()),
        ledger: ledger.client,
        console: { fromRequestHost: true },
        approvalWaitSeconds: 60,
        logger: log.logger,
      },
      {
        port: 0,
        apiKeys: [
          { tenant, principal: "agent", sha256: hashApiKey(keys.agent) },
          { tenant, principal: "alice", sha256: hashApiKey(keys.alice), roles: ["approver"] },
        ],
      },
    );
  });

  afterAll(async () => {
    for (const c of clients) await c.close();
    await edge?.close();
  });

  async function as(key: string, options: UserOptions = {}): Promise<{ client: Client; side: UserSide }> {
    const user = userClient(options);
    const { client } = await httpClient(edge.url, { headers: { authorization: `Bearer ${key}` }, capabilities: user.capabilities, setup: user.setup });
    clients.push(client);
    return { client, side: user.side };
  }
  const callTool = async (c: Client, name: string, args: Record<string, unknown>) => (await c.callTool({ name, arguments: args })) as CallToolResult;

  it("the pending call returns the executed step once an approver approves it from their own session", async () => {
    const alice = await as(keys.alice);
    let approvalId = "";
    const agent = await as(keys.agent, {
      whileWaiting: async () => ok<{ status: string }>(await callTool(alice.client, "chaoscore_approve", { approval_id: approvalId, approve: true })),
    });
    const pending = ok(await callTool(agent.client, "chaoscore_execute", { steps: [payoutStep("http-approved")] }));
    approvalId = pending.results[0]!.approval!.approval_id;

    const out = ok(await callTool(agent.client, "chaoscore_execute", { approval_id: approvalId }));
    await agent.side.settled();
    expect(out.results[0]).toMatchObject({ status: "executed", ran: true });
    expect(out.approval).toMatchObject({ approval_id: approvalId, status: "approved", resolved_by: "alice (approver)" });
    expect(agent.side.urls.map((u) => u.url)).toEqual([`${new URL(edge.url).origin}/approvals/step/${approvalId}`]);
    expect(agent.side.completed).toEqual([agent.side.urls[0]!.elicitationId]);
    expect(paidTo("http-approved")).toBe(1);
    expect(ok(await callTool(agent.client, "chaoscore_execute", { approval_id: approvalId })).results[0]).toMatchObject({ ran: false });
    expect(paidTo("http-approved")).toBe(1);
  });

  it("approve_spend waits while an approver approves the wire, then hands the agent the receipt", async () => {
    const alice = await as(keys.alice);
    let seq = 0;
    const agent = await as(keys.agent, { whileWaiting: async () => ok(await callTool(alice.client, "approve_spend", { request_seq: seq })) });
    const held = ok<{ request_seq: number }>(await callTool(agent.client, "request_authorization", { tool: "wire_treasury_transfer", args: { ...wire, amount: 950 } }));
    seq = held.request_seq;

    const out = ok<{ approved_by: string; channel: string; receipt: Record<string, unknown> }>(await callTool(agent.client, "approve_spend", { request_seq: seq }));
    await agent.side.settled();
    expect(out).toMatchObject({ approved_by: "alice", channel: "approver" });
    expect(out.receipt).toMatchObject({ kind: "authorization", actor: "alice", tool: "wire_treasury_transfer" });
    expect(agent.side.urls.map((u) => u.url)).toEqual([`${new URL(edge.url).origin}/approvals/spend/${seq}`]);
    expect(agent.side.completed).toEqual([agent.side.urls[0]!.elicitationId]);
  });

  it("stops waiting when the client cancels the call over HTTP, leaving the approval pending", async () => {
    const abort = new AbortController();
    const agent = await as(keys.agent, { whileWaiting: () => Promise.resolve(abort.abort()) });
    const pending = ok(await callTool(agent.client, "chaoscore_execute", { steps: [payoutStep("http-abort")] }));
    const approvalId = pending.results[0]!.approval!.approval_id;
    const before = log.lines.length;

    await expect(
      agent.client.callTool({ name: "chaoscore_execute", arguments: { approval_id: approvalId } }, undefined, { signal: abort.signal }),
    ).rejects.toThrow();
    await vi.waitFor(
      () => expect(log.lines.slice(before).find((l) => l["msg"] === "tool call refused")).toMatchObject({ tool: "chaoscore_execute", outcome: "approval_required" }),
      { timeout: 10_000, interval: 20 },
    );
    expect(await status(tenant, approvalId)).toBe("pending");
    expect(agent.side.urls).toHaveLength(1);
    expect(agent.side.completed).toEqual([]);
    expect(paidTo("http-abort")).toBe(0);
  });

  const wire = { beneficiary: "Northwind Traders", amount: 900, currency: "USD", memo: "PO 7781", confidence: 0.9 };
});

describe("an approval that expires before the wait would end", () => {
  let short: TestServices;
  beforeAll(async () => {
    // Approvals that can be answered for 4 s, under a wait of 300 s.
    short = await startTestServices("url_elicitation_expiry", { highRisk: true, approvalTtlSeconds: 4 });
  });
  afterAll(async () => {
    await short?.close();
  });

  it("stops waiting at the approval's expiry, not at CHAOS_CORE_APPROVAL_WAIT_SECONDS", async () => {
    const tenant = uniqueTenant("url-expiry");
    await short.putPolicy(tenant, {});
    const c = await connect(tenant, {}, { ...short.deps(), console: { publicUrl: PUBLIC_URL }, approvalWaitSeconds: 300 });
    const out = ok(await c.call("chaoscore_execute", { steps: [payoutStep("url-expiry")] }));
    const approvalId = out.results[0]!.approval!.approval_id;
    const error = refused(await c.call("chaoscore_execute", { approval_id: approvalId }));
    expect(error.code).toBe("approval_required");
    expect(error.message).toMatch(
      new RegExp(`no person answered it at ${PUBLIC_URL}/approvals/step/${approvalId} before it expires \\(at \\d{4}-\\d\\d-\\d\\dT[^)]+\\); it stays pending until then\\.`),
    );
  });
});

describe("on 2026-07-28: the console link through multi-round-trip results", () => {
  const key = randomBytes(24).toString("base64url");
  const tenant = `url-mrtr-${randomBytes(3).toString("hex")}`;
  let edge: RunningHttpTransport;
  const clients: V2Client[] = [];

  beforeAll(async () => {
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    edge = await startHttpTransport(
      { ...deps, mrtrKeyring: parseMrtrKeyring(newMrtrKeyringFile(), "test") },
      { host: "127.0.0.1", port: 0, apiKeys: [{ tenant, principal: "agent", sha256: hashApiKey(key) }] },
    );
  });

  afterAll(async () => {
    for (const c of clients) await c.close();
    await edge?.close();
  });

  async function client(): Promise<V2Client> {
    // Declares URL mode; in manual mode its handler is never called.
    const c = await modernClient(edge.url, { headers: { authorization: `Bearer ${key}` }, answer: { action: "accept", content: {} }, url_mode: true, autoFulfill: false });
    clients.push(c);
    return c;
  }
  const pendingOn = async (c: V2Client, beneficiary: string) => {
    const out = ok((await c.callTool({ name: "chaoscore_execute", arguments: { steps: [payoutStep(beneficiary)] } })) as CallToolResult);
    expect(out.results[0]).toMatchObject({ status: "pending_approval", ran: false });
    return out.results[0]!.approval!.approval_id;
  };
  const round1 = async (c: V2Client, approvalId: string) => {
    const first = (await c.callTool({ name: "chaoscore_execute", arguments: { approval_id: approvalId } }, { allowInputRequired: true })) as unknown as WireResult;
    expect(first.resultType).toBe("input_required");
    return first;
  };

  it("asks the client to send its user to the console page (no token, no elicitationId); a decline in the retry resolves nothing", async () => {
    const c = await client();
    const id = await pendingOn(c, "mrtr-decline");
    const first = await round1(c, id);
    const request = first.inputRequests!["console"]!;
    expect(request.method).toBe("elicitation/create");
    expect(request.params).toMatchObject({ mode: "url", url: `${PUBLIC_URL}/approvals/step/${id}` });
    expect(request.params["elicitationId"]).toBeUndefined();
    expect(String(request.params["message"])).toContain(`Approval ${id} waits for a person`);

    const declined = refused(
      (await c.callTool(retryParams("chaoscore_execute", { approval_id: id }, { inputResponses: { console: { action: "decline" } }, requestState: first.requestState }), {
        allowInputRequired: true,
      })) as CallToolResult,
    );
    expect(declined.code).toBe("approval_required");
    expect(declined.message).toMatch(/your user declined to open the approval page/);
    expect(await status(tenant, id)).toBe("pending");
    expect(paidTo("mrtr-decline")).toBe(0);
  });

  it("on the retry (the user's consent) waits for a person's answer on the console, then runs the step once", async () => {
    const c = await client();
    const id = await pendingOn(c, "mrtr-console");
    const first = await round1(c, id);
    const retry = c.callTool(retryParams("chaoscore_execute", { approval_id: id }, { inputResponses: { console: { action: "accept" } }, requestState: first.requestState }), {
      allowInputRequired: true,
    });
    // A person answers on the page while (or before) the retry waits: either way it runs once.
    await answerOnConsole(tenant, id, true);
    const ran = ok((await retry) as CallToolResult);
    expect(ran.results[0]).toMatchObject({ status: "executed", ran: true });
    expect(paidTo("mrtr-console")).toBe(1);
    expect(outcomes(id).filter((e) => e.type === "step.outcome" && e.status === "executed")).toHaveLength(1);
  });

  it("approve_spend: the console page of the spend request, and the retry collects the receipt a person approved there, once", async () => {
    const c = await client();
    const wire = { beneficiary: "Northwind Traders", amount: 900, currency: "USD", memo: "PO 7782", confidence: 0.9 };
    const held = ok<{ status: string; request_seq: number }>((await c.callTool({ name: "request_authorization", arguments: { tool: "wire_treasury_transfer", args: wire } })) as CallToolResult);
    expect(held.status).toBe("HITL_REQUIRED");
    const seq = held.request_seq;
    const first = (await c.callTool({ name: "approve_spend", arguments: { request_seq: seq } }, { allowInputRequired: true })) as unknown as WireResult;
    expect(first.resultType).toBe("input_required");
    expect(first.inputRequests!["console"]!.params).toMatchObject({ mode: "url", url: `${PUBLIC_URL}/approvals/spend/${seq}` });
    await ledger.client.approveSpend({ requestSeq: BigInt(seq), approvedVia: "console", ttlSeconds: 0 }, consolePerson(tenant));
    const retry = retryParams("approve_spend", { request_seq: seq }, { inputResponses: { console: { action: "accept" } }, requestState: first.requestState });
    const out = ok<{ state: string; human: unknown; channel: string; receipt: Record<string, unknown> }>((await c.callTool(retry, { allowInputRequired: true })) as CallToolResult);
    expect(out).toMatchObject({ state: "LOCKED", human: { answer: "confirmed", via: "console" }, channel: "console" });
    expect(out.receipt).toMatchObject({ kind: "authorization", tool: "wire_treasury_transfer" });
    // The state works once: a replay collects nothing.
    expect(refused((await c.callTool(retry, { allowInputRequired: true })) as CallToolResult).message).toMatch(/already used/);
  });

  it("chaoscore_remember: the retry resumes the approval the first round created (never a new one) and returns the stored item", async () => {
    const c = await client();
    const first = (await c.callTool({ name: "chaoscore_remember", arguments: { key: "mrtr-window", value: "friday" } }, { allowInputRequired: true })) as unknown as WireResult;
    expect(first.resultType).toBe("input_required");
    const url = String(first.inputRequests!["console"]!.params["url"]);
    const id = url.slice(url.lastIndexOf("/") + 1);
    expect(await status(tenant, id)).toBe("pending");
    await answerOnConsole(tenant, id, true);
    const out = ok<{ item: { key: string } }>(
      (await c.callTool(retryParams("chaoscore_remember", { key: "mrtr-window", value: "friday" }, { inputResponses: { console: { action: "accept" } }, requestState: first.requestState }), {
        allowInputRequired: true,
      })) as CallToolResult,
    );
    expect(out.item.key).toBe("mrtr-window");
    expect(await stored(tenant, "mrtr-window")).toBe("friday");
    const created = services.audit.events().filter((e) => e.type === "step.outcome" && e.call.tenant === tenant && e.capability === "memory.remember" && e.status === "pending_approval");
    expect(created).toHaveLength(1);
    expect(outcomes(id).filter((e) => e.type === "step.outcome" && e.status === "executed")).toHaveLength(1);
  });
});
