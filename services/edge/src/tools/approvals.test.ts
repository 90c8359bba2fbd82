import { randomBytes } from "node:crypto";
import { toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ElicitRequestSchema, type CallToolResult, type ElicitResult } from "@modelcontextprotocol/sdk/types.js";
import { hashApiKey } from "../auth/api-keys.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { httpClient } from "../test-support/http.js";
import { connectInMemory, uniqueTenant, type Connected } from "../test-support/in-memory.js";
import { startTestServices, TEST_PAYOUT, type TestServices } from "../test-support/services.js";
import { connectStdio } from "../test-support/stdio.js";
import { autoAcceptingClient } from "../../../../test/support/elicitation.js";
import { startHttpTransport, type RunningHttpTransport } from "../transport/http.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { ok as okOf, refused, type ExecuteOutput, type StepResult } from "../test-support/results.js";
import type { Client as V2Client } from "@modelcontextprotocol/client";
import { newMrtrKeyringFile, parseMrtrKeyring } from "../mrtr/keyring.js";
import { startTestLedger, type TestLedger } from "../test-support/ledger.js";
import { modernClient, rawToolCall, retryParams, type WireResult } from "../../../../test/support/mrtr.js";

const ok = <T = ExecuteOutput>(res: CallToolResult): T => okOf<T>(res);

// The approval path end to end against the real cognition, policy and memory services: a step
// policy holds for approval is run once a person approves it, through elicitation or an approver.


let services: TestServices;
let deps: EdgeDeps;
const open: Connected[] = [];



async function stored(tenant: string, key: string): Promise<unknown> {
  const res = await services.memory.recall({ key }, { ctx: { tenant, principal: "test" } });
  return res.item?.value ? toJson(ValueSchema, res.item.value) : undefined;
}

/** Counts the executed outcomes of memory.remember the executor audited for a tenant. */
function executedRemembers(tenant: string): number {
  return services.audit
    .events()
    .filter((e) => e.type === "step.outcome" && e.call.tenant === tenant && e.capability === "memory.remember" && e.status === "executed").length;
}

// localhost is allowlisted by policy but resolves to a loopback address, which http.request
// refuses once its handler runs: a step that runs and fails, with no network involved.
const fetchLocalhostStep = { id: "f1", capability: "http.request", input: { url: "http://localhost/status" }, rationale: "hand-written" };
const fetchNeedsApproval = { requireConfirmationFor: ["memory.remember", "http.request"], httpAllowedDomains: ["localhost"] };

const rememberStep = (value: string) => ({
  id: "s1",
  capability: "memory.remember",
  input: { key: "deploy-window", value },
  rationale: "hand-written",
});

/** A client whose user answers every elicitation with `answer`, recording the questions. */
async function connectWithUser(tenant: string, answer: ElicitResult | undefined, asked: string[] = [], edgeDeps: EdgeDeps = deps): Promise<Connected> {
  const c = await connectInMemory(
    edgeDeps,
    { tenant, principal: "agent" },
    answer
      ? {
          capabilities: { elicitation: { form: {} } },
          setup: (client: Client) =>
            client.setRequestHandler(ElicitRequestSchema, (req) => {
              asked.push(req.params.message);
              return answer;
            }),
        }
      : {},
  );
  open.push(c);
  return c;
}

async function pendingApproval(c: Connected, value = "friday"): Promise<{ id: string; out: ExecuteOutput }> {
  const out = ok(await c.call("chaoscore_execute", { steps: [rememberStep(value)] }));
  expect(out.results[0]).toMatchObject({ status: "pending_approval", ran: false });
  return { id: out.results[0]!.approval!.approval_id, out };
}

beforeAll(async () => {
  services = await startTestServices("approvals", { highRisk: true });
  deps = services.deps(createMemorySessionStore());
});

afterAll(async () => {
  for (const c of open) await c.close();
  await services?.close();
});

describe("chaoscore_execute {approval_id} through elicitation", () => {
  it("asks the user, runs the step once when they approve, and refuses a second run", async () => {
    const tenant = uniqueTenant("approve-elicit");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const asked: string[] = [];
    const c = await connectWithUser(tenant, { action: "accept", content: { approve: true } }, asked);

    const { id, out } = await pendingApproval(c);
    expect(out.next_step).toContain(`chaoscore_execute {"approval_id": "${id}"}`);
    expect(out.next_step).toMatch(/your user will be shown the request/);
    expect(await stored(tenant, "deploy-window")).toBeUndefined();

    const ran = ok(await c.call("chaoscore_execute", { approval_id: id }));
    expect(ran.results).toHaveLength(1);
    expect(ran.results[0]).toMatchObject({ step_id: "s1", capability: "memory.remember", status: "executed", ran: true });
    expect(ran.approval).toMatchObject({ approval_id: id, status: "approved" });
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain(id);
    expect(asked[0]).toContain("memory.remember");
    // The person sees the exact input the step will run with, from cognition's stored approval.
    expect(asked[0]).toContain('\n  key = "deploy-window"\n');
    expect(asked[0]).toContain('\n  value = "friday"\n');
    expect(asked[0]).toMatch(/SHA-256 of the canonical input: [0-9a-f]{64}/);
    expect(await stored(tenant, "deploy-window")).toBe("friday");
    expect(executedRemembers(tenant)).toBe(1);

    // Used once: a second run is refused without asking anyone, and nothing runs again.
    const again = ok(await c.call("chaoscore_execute", { approval_id: id }));
    expect(again.results[0]).toMatchObject({ status: "failed", ran: false, error: { code: "failed_precondition" } });
    expect(again.results[0]!.error!.message).toMatch(/already used/);
    expect(asked).toHaveLength(1);
    expect(executedRemembers(tenant)).toBe(1);
  });

  it("shows the person every argument of the call, whole, with hidden characters escaped and named", async () => {
    const tenant = uniqueTenant("approve-shows-all");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const asked: string[] = [];
    const c = await connectWithUser(tenant, { action: "accept", content: { approve: false } }, asked);
    // Longer than the 4000 characters the question used to be cut at, and a right-to-left
    // override that would make the memo read differently from what is stored.
    const memo = `INV-104 \u202Egnp.exe\u202C ${"details ".repeat(700)}`;
    const value = {
      beneficiary: { name: "ACME Ltd", iban: "DE89370400440532013000" },
      memo,
      amounts: [100, 2500.5],
      hosts: ["pay.example", "api.example"],
      approved_by: null,
    };
    const out = ok(await c.call("chaoscore_execute", { steps: [{ ...rememberStep("x"), input: { key: "wire", value, tags: ["finance"] } }] }));
    const id = out.results[0]!.approval!.approval_id;
    ok(await c.call("chaoscore_execute", { approval_id: id }));

    expect(asked).toHaveLength(1);
    const lines = asked[0]!.split("\n");
    const escapedMemo = JSON.stringify(memo).replace("\u202E", "\\u202e").replace("\u202C", "\\u202c");
    for (const line of [
      '  key = "wire"',
      "  tags[0] = \"finance\"",
      '  value.amounts[0] = 100',
      "  value.amounts[1] = 2500.5",
      "  value.approved_by = null",
      '  value.beneficiary.iban = "DE89370400440532013000"',
      '  value.beneficiary.name = "ACME Ltd"',
      '  value.hosts[0] = "pay.example"',
      '  value.hosts[1] = "api.example"',
      `  value.memo = ${escapedMemo}`,
      "    ^ hidden characters, written above as escapes: U+202E right-to-left override, U+202C pop directional formatting",
    ]) {
      expect(lines).toContain(line);
    }
    expect(asked[0]).not.toMatch(/[\u202C\u202E]/);
    expect(asked[0]).toContain("WARNING: 1 value(s) below hold characters that would display differently from what runs");
  });

  it("does not ask through a form when the call is too long for one, and names who can answer it", async () => {
    const tenant = uniqueTenant("approve-too-long");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const asked: string[] = [];
    // As in standalone, whose operator answers through chaos-core approvals.
    const c = await connectWithUser(tenant, { action: "accept", content: { approve: true } }, asked, { ...deps, operator: { dataDir: "/srv/chaos core" } });
    const { id } = await pendingApproval(c, "y".repeat(20 * 1024));

    const error = refused(await c.call("chaoscore_execute", { approval_id: id }));
    expect(error.code).toBe("approval_required");
    expect(error.message).toMatch(/too long to show in a form \(20\.\d KiB; a form carries at most 16 KiB\) and is never shown cut/);
    expect(error.message).toContain(`chaoscore_approve {"approval_id": "${id}", "approve": true}`);
    expect(error.message).toContain(`chaos-core approvals approve ${id} --tenant ${tenant} --data-dir '/srv/chaos core'`);
    expect(asked).toEqual([]);
    expect(await stored(tenant, "deploy-window")).toBeUndefined();
  });

  it("writes nothing when the user rejects, and the rejection is final", async () => {
    const tenant = uniqueTenant("approve-reject");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const c = await connectWithUser(tenant, { action: "accept", content: { approve: false } });
    const { id } = await pendingApproval(c);

    const res = ok(await c.call("chaoscore_execute", { approval_id: id }));
    expect(res.results).toEqual([]);
    expect(res.approval).toMatchObject({ approval_id: id, status: "rejected" });
    expect(res.next_step).toMatch(/rejected/);
    expect(await stored(tenant, "deploy-window")).toBeUndefined();

    const again = ok(await c.call("chaoscore_execute", { approval_id: id }));
    expect(again.results[0]).toMatchObject({ ran: false, status: "denied", error: { code: "permission_denied" } });
    expect(await stored(tenant, "deploy-window")).toBeUndefined();
    expect(executedRemembers(tenant)).toBe(0);
  });

  it("says an approved step ran and failed, and why, when it did", async () => {
    const tenant = uniqueTenant("approve-fails");
    await services.putPolicy(tenant, fetchNeedsApproval);
    const c = await connectWithUser(tenant, { action: "accept", content: { approve: true } });
    const out = ok(await c.call("chaoscore_execute", { steps: [fetchLocalhostStep] }));
    const id = out.results[0]!.approval!.approval_id;

    const res = ok(await c.call("chaoscore_execute", { approval_id: id }));
    expect(res.results[0]).toMatchObject({ status: "failed", ran: true });
    expect(res.next_step).toContain(`Approval ${id} was used: step f1 (http.request) ran and failed: `);
    expect(res.next_step).toContain("loopback");
    expect(res.next_step).not.toMatch(/did not run/);
  });

  it("treats a decline as a rejection and a cancel as no answer", async () => {
    const tenant = uniqueTenant("approve-decline");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const declining = await connectWithUser(tenant, { action: "decline" });
    const { id: declined } = await pendingApproval(declining);
    expect(ok(await declining.call("chaoscore_execute", { approval_id: declined })).approval).toMatchObject({ status: "rejected" });

    const cancelling = await connectWithUser(tenant, { action: "cancel" });
    const { id: cancelled } = await pendingApproval(cancelling, "monday");
    const error = refused(await cancelling.call("chaoscore_execute", { approval_id: cancelled }));
    expect(error.code).toBe("approval_required");
    expect(error.message).toMatch(/was not resolved and nothing ran/);
    expect(await stored(tenant, "deploy-window")).toBeUndefined();
  });

  it("tells a client without elicitation that an approver must answer", async () => {
    const tenant = uniqueTenant("approve-noelicit");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const c = await connectWithUser(tenant, undefined);
    const { id, out } = await pendingApproval(c);
    expect(out.next_step).toContain(`chaoscore_approve {"approval_id": "${id}", "approve": true}`);

    const error = refused(await c.call("chaoscore_execute", { approval_id: id }));
    expect(error.code).toBe("approval_required");
    expect(error.message).toContain("chaoscore_approve");
    expect(await stored(tenant, "deploy-window")).toBeUndefined();
  });

  it("names in chaoscore_remember's approval_required every channel policy accepts here, with the exact command", async () => {
    const tenant = uniqueTenant("remember-channels");
    await services.putPolicy(tenant, {
      requireConfirmationFor: ["memory.remember"],
      approvalChannels: { capabilities: { "memory.remember": { channels: ["APPROVAL_CHANNEL_OPERATOR", "APPROVAL_CHANNEL_CONSOLE"] } } },
    });
    // The edge run alone has no operator endpoint and no console yet: nothing here can approve it.
    const alone = await connectWithUser(tenant, { action: "accept", content: { approve: true } });
    const none = refused(await alone.call("chaoscore_remember", { key: "deploy-window", value: "friday" }));
    expect(none.code).toBe("approval_required");
    expect(none.message).toContain("No way to approve it is available here: policy accepts only operator, console for it.");
    expect(none.message).not.toContain("chaoscore_approve");

    const standalone = await connectWithUser(tenant, { action: "accept", content: { approve: true } }, [], { ...deps, operator: { dataDir: "/srv/cc" } });
    const error = refused(await standalone.call("chaoscore_remember", { key: "deploy-window", value: "friday" }));
    const id = /approval ([0-9a-f-]{36}) waits/.exec(error.message)![1]!;
    expect(error.message).toContain(`\n- operator: The operator of this Chaos Core runs chaos-core approvals approve ${id} --tenant ${tenant} --data-dir /srv/cc on its machine`);
    expect(error.message).not.toMatch(/client_elicitation|chaoscore_approve/);
    expect(await stored(tenant, "deploy-window")).toBeUndefined();
  });

  it("refuses chaoscore_approve without the approver role (stdio and loopback have none)", async () => {
    const tenant = uniqueTenant("approve-norole");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const c = await connectWithUser(tenant, undefined);
    const { id } = await pendingApproval(c);
    expect(refused(await c.call("chaoscore_approve", { approval_id: id, approve: true })).code).toBe("permission_denied");
  });

  it("gives achieve's pending run a next step", async () => {
    const tenant = uniqueTenant("approve-achieve");
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    const c = await connectWithUser(tenant, undefined);
    const trace = ok<{ status: string; next_step?: string }>(
      await c.call("chaoscore_achieve", { objective: "remember that the deploy window is friday" }),
    );
    expect(trace.status).toBe("pending_approval");
    expect(trace.next_step).toMatch(/chaoscore_approve \{"approval_id": "[0-9a-f-]{36}", "approve": true\}/);
  });
});

describe("chaoscore_approve over HTTP with API keys", () => {
  const keys = {
    agent: randomBytes(24).toString("base64url"),
    alice: randomBytes(24).toString("base64url"),
    other: randomBytes(24).toString("base64url"),
    planner: randomBytes(24).toString("base64url"),
    planApprover: randomBytes(24).toString("base64url"),
  };
  const tenant = `appr-${randomBytes(3).toString("hex")}`;
  const otherTenant = `appr-o-${randomBytes(3).toString("hex")}`;
  // A tenant whose policy holds memory.forget alone for a person: a plan that forgets, then remembers.
  const planTenant = `plan-on-${randomBytes(3).toString("hex")}`;
  const bearer = (key: string) => ({ headers: { authorization: `Bearer ${key}` } });
  let edge: RunningHttpTransport;
  const clients: Client[] = [];

  beforeAll(async () => {
    await services.putPolicy(tenant, fetchNeedsApproval);
    await services.putPolicy(planTenant, { requireConfirmationFor: ["memory.forget"] });
    edge = await startHttpTransport(services.deps(createMemorySessionStore()), {
      port: 0,
      apiKeys: [
        { tenant, principal: "agent", sha256: hashApiKey(keys.agent) },
        { tenant, principal: "alice", sha256: hashApiKey(keys.alice), roles: ["approver"] },
        { tenant: otherTenant, principal: "mallory", sha256: hashApiKey(keys.other), roles: ["approver"] },
        { tenant: planTenant, principal: "agent", sha256: hashApiKey(keys.planner) },
        { tenant: planTenant, principal: "alice", sha256: hashApiKey(keys.planApprover), roles: ["approver"] },
      ],
    });
  });

  afterAll(async () => {
    for (const c of clients) await c.close();
    await edge?.close();
  });

  async function as(key: string): Promise<Client> {
    const { client } = await httpClient(edge.url, bearer(key));
    clients.push(client);
    return client;
  }
  const call = async (c: Client, name: string, args: Record<string, unknown>) =>
    (await c.callTool({ name, arguments: args })) as CallToolResult;

  it("lets an approver of the tenant approve, never the agent or another tenant's approver", async () => {
    const agent = await as(keys.agent);
    const out = ok(await call(agent, "chaoscore_execute", { steps: [rememberStep("thursday")] }));
    const id = out.results[0]!.approval!.approval_id;
    expect(out.next_step).toMatch(/approver role/);

    expect(refused(await call(agent, "chaoscore_approve", { approval_id: id, approve: true })).code).toBe("permission_denied");
    expect(refused(await call(agent, "chaoscore_execute", { approval_id: id })).code).toBe("approval_required");

    const mallory = await as(keys.other);
    expect(refused(await call(mallory, "chaoscore_approve", { approval_id: id, approve: true })).code).toBe("not_found");

    const alice = await as(keys.alice);
    const approved = ok<{ status: string; resolved_by: string; next_step: string }>(
      await call(alice, "chaoscore_approve", { approval_id: id, approve: true }),
    );
    expect(approved.status).toBe("approved");
    expect(approved.resolved_by).toContain("alice");
    expect(await stored(tenant, "deploy-window")).toBeUndefined();

    const ran = ok(await call(agent, "chaoscore_execute", { approval_id: id }));
    expect(ran.results[0]).toMatchObject({ status: "executed", ran: true });
    expect(await stored(tenant, "deploy-window")).toBe("thursday");
    expect(executedRemembers(tenant)).toBe(1);

    const again = ok(await call(agent, "chaoscore_execute", { approval_id: id }));
    expect(again.results[0]).toMatchObject({ ran: false, error: { code: "failed_precondition" } });
    expect(executedRemembers(tenant)).toBe(1);
    // An answer is given once.
    expect(refused(await call(alice, "chaoscore_approve", { approval_id: id, approve: false })).code).toBe("failed_precondition");
  });

  it("says a step an approver approved ran and failed, and why, instead of that it did not run", async () => {
    const agent = await as(keys.agent);
    const out = ok(await call(agent, "chaoscore_execute", { steps: [fetchLocalhostStep] }));
    const id = out.results[0]!.approval!.approval_id;
    const alice = await as(keys.alice);
    ok(await call(alice, "chaoscore_approve", { approval_id: id, approve: true }));

    const res = ok(await call(agent, "chaoscore_execute", { approval_id: id }));
    expect(res.results[0]).toMatchObject({ status: "failed", ran: true });
    expect(res.approval).toMatchObject({ approval_id: id, status: "approved" });
    expect(res.next_step).toContain(`Approval ${id} was used: step f1 (http.request) ran and failed: `);
    expect(res.next_step).toContain("loopback");
    expect(res.next_step).not.toMatch(/did not run/);

    // Used once: the next try did not run, and says so.
    const again = ok(await call(agent, "chaoscore_execute", { approval_id: id }));
    expect(again.results[0]).toMatchObject({ ran: false });
    expect(again.next_step).toMatch(/the step did not run now/);
  });

  it("an approved plan does not stop halfway: after the approved step the rest runs, the old value forgotten and the new one stored", async () => {
    const agent = await as(keys.planner);
    ok(await call(agent, "chaoscore_remember", { key: "deploy-window", value: "friday" }));
    const objective = "forget the deploy window and then remember that the deploy window is monday";
    const planned = ok<{ plan_id: string; steps: Array<{ id: string; capability: string }> }>(await call(agent, "chaoscore_plan", { objective }));
    expect(planned.steps.map((s) => s.capability)).toEqual(["memory.forget", "memory.remember"]);

    const first = ok(await call(agent, "chaoscore_execute", { plan_id: planned.plan_id }));
    expect(first.results.map((r) => r.status)).toEqual(["pending_approval", "skipped"]);
    const id = first.results[0]!.approval!.approval_id;
    expect(await stored(planTenant, "deploy-window")).toBe("friday");

    const alice = await as(keys.planApprover);
    ok(await call(alice, "chaoscore_approve", { approval_id: id, approve: true }));
    const ran = ok(await call(agent, "chaoscore_execute", { approval_id: id }));
    expect(ran.results.map((r) => `${r.step_id} ${r.capability} ${r.status}`)).toEqual([
      `${planned.steps[0]!.id} memory.forget executed`,
      `${planned.steps[1]!.id} memory.remember executed`,
    ]);
    expect(ran.approval).toMatchObject({ approval_id: id, status: "approved" });
    expect(ran.next_step).toBeUndefined();
    expect(await stored(planTenant, "deploy-window")).toBe("monday");
  });

  it("refuses self-approval even with the role", async () => {
    const alice = await as(keys.alice);
    const out = ok(await call(alice, "chaoscore_execute", { steps: [rememberStep("sunday")] }));
    const id = out.results[0]!.approval!.approval_id;
    expect(refused(await call(alice, "chaoscore_approve", { approval_id: id, approve: true })).code).toBe("permission_denied");
  });
});

describe("a client that auto-accepts every elicitation, holding no approver role", () => {
  // The client's host answers every form with "accept, approve" by itself: no person, no role.
  // Under the default policy that answer counts below high risk only, so a high-risk step
  // (TEST_PAYOUT: no built-in capability is high risk) must never run on it, on any transport.
  const channelSet = (...names: string[]) => ({ channels: names.map((n) => `APPROVAL_CHANNEL_${n.toUpperCase()}`) });
  const optIn = { approvalChannels: { high: channelSet("client_elicitation", "approver") } };
  const apiKey = randomBytes(24).toString("base64url");
  const httpTenant = `auto-${randomBytes(3).toString("hex")}`;
  let edge: RunningHttpTransport;
  const closers: Array<() => Promise<void>> = [];

  beforeAll(async () => {
    edge = await startHttpTransport(services.deps(createMemorySessionStore()), {
      port: 0,
      apiKeys: [{ tenant: httpTenant, principal: "agent", sha256: hashApiKey(apiKey) }],
    });
  });
  afterAll(async () => {
    for (const close of closers) await close();
    await edge?.close();
  });

  interface Agent {
    readonly tenant: string;
    call(name: string, args: Record<string, unknown>): Promise<CallToolResult>;
  }
  const transports: Array<[string, (asked: string[]) => Promise<Agent>]> = [
    [
      "in-memory",
      async (asked) => {
        const tenant = uniqueTenant("auto-accept");
        const c = await connectInMemory(deps, { tenant, principal: "agent" }, autoAcceptingClient(asked));
        open.push(c);
        return { tenant, call: c.call };
      },
    ],
    [
      "stdio",
      async (asked) => {
        const c = await connectStdio(deps, autoAcceptingClient(asked));
        closers.push(c.close);
        return { tenant: "default", call: c.call };
      },
    ],
    [
      "HTTP",
      async (asked) => {
        const { client } = await httpClient(edge.url, { headers: { authorization: `Bearer ${apiKey}` }, ...autoAcceptingClient(asked) });
        closers.push(() => client.close());
        return { tenant: httpTenant, call: async (name, args) => (await client.callTool({ name, arguments: args })) as CallToolResult };
      },
    ],
  ];

  const payoutStep = (beneficiary: string) => ({ id: "p1", capability: TEST_PAYOUT, input: { beneficiary, amount: 25_000 }, rationale: "hand-written" });
  const paidTo = (beneficiary: string) => services.payouts.filter((p) => (p as { beneficiary: string }).beneficiary === beneficiary).length;

  for (const [transport, connect] of transports) {
    it(`${transport}: never runs a high-risk step on the client's own answer, records the refused attempt, and lists who can approve`, async () => {
      const asked: string[] = [];
      const agent = await connect(asked);
      await services.putPolicy(agent.tenant, {});
      const beneficiary = `refused-${transport}`;
      const out = ok(await agent.call("chaoscore_execute", { steps: [payoutStep(beneficiary)] }));
      const pending = out.results[0]! as StepResult & { approval: { approval_id: string; policy_channels: string[]; channels: Array<{ channel: string; call?: string }> } };
      expect(pending).toMatchObject({ status: "pending_approval", ran: false });
      const id = pending.approval.approval_id;
      expect(pending.approval.policy_channels).toEqual(["approver", "operator", "console"]);
      expect(pending.approval.channels).toEqual([
        expect.objectContaining({ channel: "approver", call: `chaoscore_approve {"approval_id": "${id}", "approve": true}` }),
      ]);
      expect(out.next_step).not.toMatch(/your user will be shown/);

      const error = refused(await agent.call("chaoscore_execute", { approval_id: id }));
      expect(error.code).toBe("approval_required");
      expect(error.message).toContain(`approval ${id} has not been answered, and policy does not accept an answer from this client for it (${TEST_PAYOUT}, risk high, rule approvalChannels.byRisk.high)`);
      expect(error.message).toContain(`\n- approver: A person holding the approver role in this tenant calls chaoscore_approve {"approval_id": "${id}", "approve": true}`);
      expect(error.message).not.toContain("client_elicitation");
      // The form was never put to the client, and nothing ran.
      expect(asked).toEqual([]);
      expect(paidTo(beneficiary)).toBe(0);
      // The attempt reached cognition, which recorded it; no answer was recorded.
      const mine = services.audit.events().filter((e) => "approvalId" in e && e.approvalId === id);
      expect(mine.map((e) => e.type)).toEqual(["step.outcome", "step.outcome"]);
      expect(mine[1]).toMatchObject({ status: "failed", ran: false, errorCode: "approval_required", call: { tenant: agent.tenant } });
      // Without the role, chaoscore_approve is no way around it either.
      expect(refused(await agent.call("chaoscore_approve", { approval_id: id, approve: true })).code).toBe("permission_denied");
      expect(paidTo(beneficiary)).toBe(0);
    });

    it(`${transport}: runs it with the operator's opt-in, recorded as client_elicitation`, async () => {
      const asked: string[] = [];
      const agent = await connect(asked);
      await services.putPolicy(agent.tenant, optIn);
      const beneficiary = `opted-in-${transport}`;
      const out = ok(await agent.call("chaoscore_execute", { steps: [payoutStep(beneficiary)] }));
      const id = out.results[0]!.approval!.approval_id;
      expect(out.next_step).toMatch(/your user will be shown the request/);

      const ran = ok(await agent.call("chaoscore_execute", { approval_id: id }));
      expect(ran.results[0]).toMatchObject({ status: "executed", ran: true });
      expect(ran.approval).toMatchObject({ approval_id: id, status: "approved" });
      expect(asked).toHaveLength(1);
      expect(asked[0]).toContain(`beneficiary = "${beneficiary}"`);
      expect(paidTo(beneficiary)).toBe(1);
      expect(services.audit.events().find((e) => e.type === "approval.resolution" && e.approvalId === id)).toMatchObject({
        channel: "client_elicitation",
        resolvedBy: expect.stringMatching(/^human via elicitation in session /) as unknown as string,
      });
    });
  }
});

describe("chaoscore_execute {approval_id} on 2026-07-28: the user is asked through multi-round-trip results", () => {
  const key = randomBytes(24).toString("base64url");
  const tenant = `appr-mrtr-${randomBytes(3).toString("hex")}`;
  const headers = { authorization: `Bearer ${key}` };
  let ledger: TestLedger;
  let edge: RunningHttpTransport;
  const clients: V2Client[] = [];

  beforeAll(async () => {
    await services.putPolicy(tenant, { requireConfirmationFor: ["memory.remember"] });
    ledger = await startTestLedger("approvals_mrtr", undefined, services.policy);
    edge = await startHttpTransport(
      { ...services.deps(createMemorySessionStore()), ledger: ledger.client, mrtrKeyring: parseMrtrKeyring(newMrtrKeyringFile(), "test") },
      { host: "127.0.0.1", port: 0, apiKeys: [{ tenant, principal: "agent", sha256: hashApiKey(key) }] },
    );
  });

  afterAll(async () => {
    for (const c of clients) await c.close();
    await edge?.close();
    await ledger?.close();
  });

  async function client(options: Parameters<typeof modernClient>[1] = {}): Promise<V2Client> {
    const c = await modernClient(edge.url, { headers, ...options });
    clients.push(c);
    return c;
  }
  const call = async (c: V2Client, name: string, args: Record<string, unknown>) => (await c.callTool({ name, arguments: args })) as CallToolResult;
  const pendingOn = async (c: V2Client, value: string) => {
    const out = ok(await call(c, "chaoscore_execute", { steps: [rememberStep(value)] }));
    expect(out.results[0]).toMatchObject({ status: "pending_approval", ran: false });
    return out.results[0]!.approval!.approval_id;
  };
  const mrtrEntries = async () => {
    const res = await ledger.client.listEntries({ afterSeq: 0n, limit: 1000 }, { ctx: { tenant, principal: "test" } });
    return res.entries.map((e) => e.event as Record<string, unknown>).filter((e) => String(e["type"]).startsWith("mrtr."));
  };

  it("auto-fulfilled by the v2 Client: asks once, runs the step once when the user approves, and refuses a second run", async () => {
    const asked: string[] = [];
    const c = await client({ answer: { action: "accept", content: { approve: true } }, asked });
    const id = await pendingOn(c, "tuesday");
    const ran = ok(await call(c, "chaoscore_execute", { approval_id: id }));
    expect(ran.results[0]).toMatchObject({ capability: "memory.remember", status: "executed", ran: true });
    expect(ran.approval).toMatchObject({ approval_id: id, status: "approved" });
    expect(asked).toHaveLength(1);
    expect(asked[0]).toContain(id);
    expect(asked[0]).toContain('\n  value = "tuesday"\n');
    expect(await stored(tenant, "deploy-window")).toBe("tuesday");
    // The state was consumed once, in the ledger.
    expect((await mrtrEntries()).filter((e) => e["type"] === "mrtr.state_consumed" && e["tool"] === "chaoscore_execute")).toHaveLength(1);

    const again = ok(await call(c, "chaoscore_execute", { approval_id: id }));
    expect(again.results[0]).toMatchObject({ status: "failed", ran: false, error: { code: "failed_precondition" } });
    expect(asked).toHaveLength(1);
  });

  it("writes nothing when the user rejects through the form, and the rejection is final", async () => {
    const c = await client({ answer: { action: "accept", content: { approve: false } } });
    const id = await pendingOn(c, "never");
    const res = ok(await call(c, "chaoscore_execute", { approval_id: id }));
    expect(res.results).toEqual([]);
    expect(res.approval).toMatchObject({ approval_id: id, status: "rejected" });
    expect(await stored(tenant, "deploy-window")).not.toBe("never");
  });

  it("manual retries (allowInputRequired): input_required with a sealed state, the retry runs it once, a replay and another call's state run nothing", async () => {
    const c = await client({ answer: { action: "accept", content: { approve: true } }, autoFulfill: false });
    const id = await pendingOn(c, "wednesday");
    const other = await pendingOn(c, "thursday");
    const first = (await c.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } }, { allowInputRequired: true })) as unknown as WireResult;
    expect(first.resultType).toBe("input_required");
    expect(first.requestState).toMatch(/^cc1\./);
    expect(first.requestState).not.toContain(id);
    const question = first.inputRequests!["approve"]!;
    expect(question.method).toBe("elicitation/create");
    expect(String(question.params["message"])).toContain(id);
    expect(await stored(tenant, "deploy-window")).not.toBe("wednesday");

    const answer = { approve: { action: "accept", content: { approve: true } } };
    // The state is bound to its call: with another approval's id it runs nothing.
    const elsewhere = (await c.callTool(retryParams("chaoscore_execute", { approval_id: other }, { inputResponses: answer, requestState: first.requestState }), {
      allowInputRequired: true,
    })) as CallToolResult;
    expect(refused(elsewhere).message).toMatch(/belongs to another call \(other arguments\): nothing ran/);

    const retry = retryParams("chaoscore_execute", { approval_id: id }, { inputResponses: answer, requestState: first.requestState });
    const ran = ok((await c.callTool(retry, { allowInputRequired: true })) as CallToolResult);
    expect(ran.results[0]).toMatchObject({ status: "executed", ran: true });
    expect(await stored(tenant, "deploy-window")).toBe("wednesday");

    const replay = refused((await c.callTool(retry, { allowInputRequired: true })) as CallToolResult);
    expect(replay.code).toBe("failed_precondition");
    expect(replay.message).toMatch(/already used .*nothing ran/);
    expect(executedRemembers(tenant)).toBe(2);
    const refusals = (await mrtrEntries()).filter((e) => e["type"] === "mrtr.state_refused").map((e) => e["reason"]);
    expect(refusals).toEqual(expect.arrayContaining(["digest", "already_consumed"]));
    // The other approval is still pending: nothing ran for it.
    expect(await stored(tenant, "deploy-window")).toBe("wednesday");
  });

  it("answers a retry without a state by asking again, and never counts an answer without one", async () => {
    const c = await client({ answer: { action: "accept", content: { approve: true } }, autoFulfill: false });
    const id = await pendingOn(c, "saturday");
    const forged = (await c.callTool(retryParams("chaoscore_execute", { approval_id: id }, { inputResponses: { approve: { action: "accept", content: { approve: true } } } }), {
      allowInputRequired: true,
    })) as unknown as WireResult;
    expect(forged.resultType).toBe("input_required");
    expect(await stored(tenant, "deploy-window")).not.toBe("saturday");
  });

  it("refuses a tampered state before any handler with the frozen -32602, and records why in the ledger", async () => {
    const c = await client({ answer: { action: "accept", content: { approve: true } }, autoFulfill: false });
    const id = await pendingOn(c, "tampered");
    const first = (await c.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } }, { allowInputRequired: true })) as unknown as WireResult;
    const state = first.requestState!;
    const at = state.length - 10;
    const tampered = `${state.slice(0, at)}${state[at] === "A" ? "B" : "A"}${state.slice(at + 1)}`;
    const before = (await mrtrEntries()).length;
    const answer = await rawToolCall(edge.url, "chaoscore_execute", { approval_id: id }, { headers, requestState: tampered, inputResponses: { approve: { action: "accept", content: { approve: true } } } });
    expect(answer).toMatchObject({ error: { code: -32602, message: "Invalid or expired requestState" } });
    expect((await mrtrEntries()).slice(before)).toEqual([expect.objectContaining({ type: "mrtr.state_refused", reason: "tag" })]);
    expect(await stored(tenant, "deploy-window")).not.toBe("tampered");
  });

  it("fails closed without a ledger: the retry cannot be used once, so nothing runs", async () => {
    const noLedger = await startHttpTransport(
      { ...services.deps(createMemorySessionStore()), mrtrKeyring: parseMrtrKeyring(newMrtrKeyringFile(), "test") },
      { host: "127.0.0.1", port: 0, apiKeys: [{ tenant, principal: "agent", sha256: hashApiKey(key) }] },
    );
    try {
      const c = await modernClient(noLedger.url, { headers, answer: { action: "accept", content: { approve: true } }, autoFulfill: false });
      clients.push(c);
      const id = await pendingOn(c, "no-ledger");
      const first = (await c.callTool({ name: "chaoscore_execute", arguments: { approval_id: id } }, { allowInputRequired: true })) as unknown as WireResult;
      expect(first.resultType).toBe("input_required");
      const res = refused(
        (await c.callTool(retryParams("chaoscore_execute", { approval_id: id }, { inputResponses: { approve: { action: "accept", content: { approve: true } } }, requestState: first.requestState }), {
          allowInputRequired: true,
        })) as CallToolResult,
      );
      expect(res.code).toBe("unavailable");
      expect(res.message).toMatch(/could not be used once .*nothing ran/);
      expect(await stored(tenant, "deploy-window")).not.toBe("no-ledger");
    } finally {
      await noLedger.close();
    }
  });

  it("does not ask a 2026-07-28 client that declared no elicitation: approval_required names an approver", async () => {
    const c = await client();
    const id = await pendingOn(c, "sunday");
    const error = refused(await call(c, "chaoscore_execute", { approval_id: id }));
    expect(error.code).toBe("approval_required");
    expect(error.message).toContain("chaoscore_approve");
  });
});
