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
import { startTestServices, type TestServices } from "../test-support/services.js";
import { startHttpTransport, type RunningHttpTransport } from "../transport/http.js";
import type { EdgeDeps } from "../deps.js";

// The approval path end to end against the real cognition, policy and memory services: a step
// policy holds for approval is run once a person approves it, through elicitation or an approver.

interface StepResult {
  step_id: string;
  capability: string;
  status: string;
  ran: boolean;
  error?: { code: string; message: string };
  approval?: { approval_id: string };
}
interface ExecuteOutput {
  results: StepResult[];
  approval?: { approval_id: string; status: string; resolved_by?: string };
  next_step?: string;
}

let services: TestServices;
let deps: EdgeDeps;
const open: Connected[] = [];

function ok<T = ExecuteOutput>(res: CallToolResult): T {
  expect(res.isError, JSON.stringify(res.content)).toBeFalsy();
  return res.structuredContent as T;
}

function refused(res: CallToolResult): { code: string; message: string } {
  expect(res.isError, JSON.stringify(res.content)).toBe(true);
  return (res.structuredContent as { error: { code: string; message: string } }).error;
}

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
async function connectWithUser(tenant: string, answer: ElicitResult | undefined, asked: string[] = []): Promise<Connected> {
  const c = await connectInMemory(
    deps,
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
  services = await startTestServices("approvals");
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
    const c = await connectWithUser(tenant, { action: "accept", content: { approve: true } }, asked);
    const { id } = await pendingApproval(c, "y".repeat(20 * 1024));

    const error = refused(await c.call("chaoscore_execute", { approval_id: id }));
    expect(error.code).toBe("approval_required");
    expect(error.message).toMatch(/too long to show in a form \(20\.\d KiB; a form carries at most 16 KiB\) and is never shown cut/);
    expect(error.message).toContain(`chaoscore_approve {"approval_id": "${id}", "approve": true}`);
    expect(error.message).toContain(`chaos-core approvals approve ${id}`);
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
  const keys = { agent: randomBytes(24).toString("base64url"), alice: randomBytes(24).toString("base64url"), other: randomBytes(24).toString("base64url") };
  const tenant = `appr-${randomBytes(3).toString("hex")}`;
  const otherTenant = `appr-o-${randomBytes(3).toString("hex")}`;
  const bearer = (key: string) => ({ headers: { authorization: `Bearer ${key}` } });
  let edge: RunningHttpTransport;
  const clients: Client[] = [];

  beforeAll(async () => {
    await services.putPolicy(tenant, fetchNeedsApproval);
    edge = await startHttpTransport(services.deps(createMemorySessionStore()), {
      port: 0,
      apiKeys: [
        { tenant, principal: "agent", sha256: hashApiKey(keys.agent) },
        { tenant, principal: "alice", sha256: hashApiKey(keys.alice), roles: ["approver"] },
        { tenant: otherTenant, principal: "mallory", sha256: hashApiKey(keys.other), roles: ["approver"] },
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

  it("refuses self-approval even with the role", async () => {
    const alice = await as(keys.alice);
    const out = ok(await call(alice, "chaoscore_execute", { steps: [rememberStep("sunday")] }));
    const id = out.results[0]!.approval!.approval_id;
    expect(refused(await call(alice, "chaoscore_approve", { approval_id: id, approve: true })).code).toBe("permission_denied");
  });
});
