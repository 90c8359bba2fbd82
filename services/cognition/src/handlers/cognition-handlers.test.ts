import { createHash } from "node:crypto";
/**
 * The cognition handlers over both transports — in-process and a real gRPC server — against the
 * real policy and memory services on a fresh Postgres database. Every scenario runs on each
 * transport and must give the same answers.
 */
import { toJson } from "@bufbuild/protobuf";
import { timestampDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  ContextSigner,
  createGrpcClient,
  createInProcessClient,
  createLogger,
  type CallContext,
  type GrpcClient,
  type RunningGrpcServer,
  type ServiceClient,
} from "@chaos-core/kit";
import {
  ApprovalChannel,
  CognitionService,
  ListCapabilitiesResponseSchema,
  PlanResponseSchema,
  type AchieveResponse,
} from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { Redis } from "ioredis";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { TEST_REDIS_URL, uniquePrefix } from "../../../../test/support/redis.js";
import { z } from "zod";
import { defineCapability } from "../capabilities/capability.js";
import { BUILT_IN_CAPABILITIES } from "../capabilities/index.js";
import { createCapabilityRegistry } from "../capabilities/registry.js";
import { createMemoryApprovalStore } from "../executor/approvals.js";
import { createRedisApprovalStore } from "../executor/redis-approval-store.js";
import { createInMemoryAuditSink } from "../executor/audit.js";
import { argsHash } from "../executor/canonical-json.js";
import { unansweredOffline } from "../brain/summary.js";
import { createMemoryPlanStore } from "../plans/memory-plan-store.js";
import { HeuristicProvider } from "../providers/heuristic.js";
import { OpenAIProvider } from "../providers/openai.js";
import { startCognitionServer } from "../server.js";
import { expectChaosError } from "../test-support/expect-error.js";
import { startRealServices, type RealServices } from "../../../../test/support/real-services.js";
import { createCognitionHandlers, type CognitionDeps } from "./cognition-handlers.js";

type Client = ServiceClient<typeof CognitionService>;

const KEY = "cognition-handlers-test-key-0123456789abcdef";
const BUILT_IN_NAMES = ["cognition.generate_text", "memory.remember", "memory.recall", "memory.forget", "http.request"];

let services: RealServices;
let server: RunningGrpcServer;
let grpc: GrpcClient<typeof CognitionService>;
let inProcess: Client;
let deps: CognitionDeps;

/** Every call of the test capability's handler. */
let calls: unknown[];
beforeEach(() => {
  calls = [];
});

const echo = defineCapability({
  name: "test.echo",
  description: "Echoes its text.",
  risk: "low",
  inputSchema: z.object({ text: z.string().min(1) }),
  outputSchema: z.object({ echo: z.string() }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  handler(input) {
    calls.push(input);
    return Promise.resolve({ echo: input.text });
  },
});

function makeDeps(overrides: Partial<CognitionDeps> = {}): CognitionDeps {
  return {
    registry: createCapabilityRegistry([...BUILT_IN_CAPABILITIES, echo]),
    provider: new HeuristicProvider(),
    policy: services.policy,
    memory: services.memory,
    plans: createMemoryPlanStore(),
    audit: createInMemoryAuditSink(),
    approvals: createMemoryApprovalStore(),
    logger: createLogger("cognition-test", "silent"),
    stepTimeoutMs: 5_000,
    ...overrides,
  };
}

beforeAll(async () => {
  services = await startRealServices("chaoscore_cognition_handlers");
  // One set of deps behind both transports: a plan made through one is visible through the other.
  deps = makeDeps();
  inProcess = createInProcessClient(CognitionService, createCognitionHandlers(deps));
  const signer = new ContextSigner(KEY);
  server = await startCognitionServer({ host: "127.0.0.1", port: 0, signer, deps });
  grpc = createGrpcClient(CognitionService, `127.0.0.1:${server.port}`, signer);
});

afterAll(async () => {
  grpc?.close();
  await server?.shutdown(1000);
  await services?.close();
});

let tenantCounter = 0;
function uniqueTenant(): string {
  tenantCounter += 1;
  return `cog-${process.pid}-${tenantCounter}`;
}

const as = (tenant: string, sessionId?: string): { ctx: CallContext } => ({
  ctx: { tenant, principal: "agent", ...(sessionId ? { sessionId } : {}) },
});

const OBJECTIVE = "Remember that the build server is ci-7";

const transports: Array<[string, () => Client]> = [
  ["in-process", () => inProcess],
  ["gRPC", () => grpc.client],
];

describe.each(transports)("cognition handlers (%s)", (_name, client) => {
  it("plans, then executes the plan by id in the same session", async () => {
    const tenant = uniqueTenant();
    const before = Date.now();
    const planned = await client().plan({ objective: OBJECTIVE }, as(tenant, "session-a"));
    expect(planned.planId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    expect(planned).toMatchObject({ source: "heuristic", provider: "heuristic", model: "none" });
    expect(planned.steps.map((s) => s.capability)).toEqual(["memory.remember"]);
    expect(planned.steps[0]?.input).toMatchObject({ key: expect.any(String) as string });
    const expires = timestampDate(planned.expiresAt!).getTime();
    expect(expires).toBeGreaterThanOrEqual(before + 3_600_000 - 1_000);

    const executed = await client().execute({ target: { case: "planId", value: planned.planId } }, as(tenant, "session-a"));
    expect(executed.results).toHaveLength(1);
    const [result] = executed.results;
    expect(result).toMatchObject({
      stepId: planned.steps[0]!.id,
      capability: "memory.remember",
      status: "executed",
      ran: true,
      verdict: { decision: "ALLOW" },
      evaluation: { succeeded: true, problems: [] },
      errorCode: "",
    });
    expect(result?.output?.kind.case).toBe("structValue");
    // The step really reached the memory service.
    const key = planned.steps[0]!.input!.key as string;
    const recalled = await services.memory.recall({ key }, as(tenant));
    expect(recalled.item?.key).toBe(key);
  });

  it("does not find a plan from another session or another tenant, with one answer for both", async () => {
    const tenant = uniqueTenant();
    const planned = await client().plan({ objective: OBJECTIVE }, as(tenant, "session-a"));
    const target = { target: { case: "planId" as const, value: planned.planId } };
    const otherSession = await expectChaosError(client().execute(target, as(tenant, "session-b")), "not_found");
    expect(otherSession.message).toContain(`no plan ${planned.planId} in this session`);
    const otherTenant = await expectChaosError(client().execute(target, as(uniqueTenant(), "session-a")), "not_found");
    expect(otherTenant.message).toBe(otherSession.message);
    await expectChaosError(client().execute({ target: { case: "planId", value: "bogus" } }, as(tenant, "session-a")), "not_found");
  });

  it("binds a plan made without a session to its principal: another principal of the tenant gets the unknown id's answer", async () => {
    const tenant = uniqueTenant();
    const alice = { ctx: { tenant, principal: "alice", requestRef: "AAECAwQFBgcICQoLDA0ODw" } };
    const planned = await client().plan({ objective: OBJECTIVE }, alice);
    expect(planned.planId).toMatch(/^[A-Za-z0-9_-]{22}$/);
    const target = { target: { case: "planId" as const, value: planned.planId } };
    // Another request of the same principal (no session, another request ref) runs it.
    const executed = await client().execute(target, { ctx: { tenant, principal: "alice", requestRef: "BBECAwQFBgcICQoLDA0ODw" } });
    expect(executed.results.map((r) => r.status)).toEqual(["executed"]);
    const bob = await expectChaosError(client().execute(target, { ctx: { tenant, principal: "bob" } }), "not_found");
    const unknownId = "AAAAAAAAAAAAAAAAAAAAAA";
    const unknown = await expectChaosError(client().execute({ target: { case: "planId", value: unknownId } }, { ctx: { tenant, principal: "alice" } }), "not_found");
    expect(bob.message).toBe(`no plan ${planned.planId} for bob (plans expire, and belong to the principal that made them)`);
    expect(bob.message.replace(planned.planId, "ID").replace("bob", "P")).toBe(unknown.message.replace(unknownId, "ID").replace("alice", "P"));
    // A session of the same principal does not see it, nor does the principal see a session's plan.
    await expectChaosError(client().execute(target, { ctx: { tenant, principal: "alice", sessionId: "session-a" } }), "not_found");
    const inSession = await client().plan({ objective: OBJECTIVE }, { ctx: { tenant, principal: "alice", sessionId: "session-a" } });
    await expectChaosError(client().execute({ target: { case: "planId", value: inSession.planId } }, { ctx: { tenant, principal: "alice" } }), "not_found");
    await expectChaosError(client().execute({}, as(tenant, "s")), "invalid_argument");
  });

  it("never runs a denied capability from an explicit step list", async () => {
    const tenant = uniqueTenant();
    const version = await services.putPolicy(tenant, { deniedCapabilities: ["test.echo"] });
    const res = await client().execute(
      {
        target: {
          case: "steps",
          value: {
            steps: [
              { id: "s1", capability: "test.echo", input: { text: "hi", confirmed: true } },
              { id: "s2", capability: "memory.recall", input: { key: "k" } },
            ],
          },
        },
      },
      as(tenant, "session-a"),
    );
    expect(calls).toEqual([]);
    expect(res.results.map((r) => [r.stepId, r.status, r.ran])).toEqual([
      ["s1", "denied", false],
      ["s2", "skipped", false],
    ]);
    expect(res.results[0]?.verdict).toMatchObject({ decision: "DENY", policyVersion: BigInt(version) });
    expect(res.results[0]?.output).toBeUndefined();
    expect(res.results[1]).toMatchObject({ errorCode: "failed_precondition" });
  });

  it("stops a REQUIRE_APPROVAL step as pending_approval with the approval's fields", async () => {
    const tenant = uniqueTenant();
    const version = await services.putPolicy(tenant, { requireConfirmationFor: ["test.echo"] });
    const res = await client().execute(
      { target: { case: "steps", value: { steps: [{ id: "s1", capability: "test.echo", input: { text: "ship it" } }] } } },
      as(tenant, "session-a"),
    );
    expect(calls).toEqual([]);
    const [result] = res.results;
    expect(result).toMatchObject({ status: "pending_approval", ran: false, verdict: { decision: "REQUIRE_APPROVAL" } });
    expect(result?.approval).toMatchObject({
      argsHash: argsHash({ text: "ship it" }),
      policyVersion: BigInt(version),
      risk: "low",
    });
    expect(result?.approval?.approvalId).toMatch(/^[0-9a-f-]{36}$/);
    expect(result?.approval?.matchedRule).not.toBe("");
    expect(result?.approval?.reason).not.toBe("");
  });

  describe("the approval path", () => {
    const ECHO = { id: "s1", capability: "test.echo", input: { text: "ship it", confirmed: true } };

    /** A pending approval for test.echo, requested by agent in session-a of a fresh tenant. */
    async function pendingEcho() {
      const tenant = uniqueTenant();
      const version = await services.putPolicy(tenant, { requireConfirmationFor: ["test.echo"] });
      const res = await client().execute({ target: { case: "steps", value: { steps: [ECHO] } } }, as(tenant, "session-a"));
      expect(res.results[0]?.status).toBe("pending_approval");
      return { tenant, version, approvalId: res.results[0]!.approval!.approvalId };
    }
    const resume = (approvalId: string) => ({ target: { case: "approvalId" as const, value: approvalId } });
    const elicited = (approvalId: string, approve = true) => ({ approvalId, approve, channel: ApprovalChannel.ELICITATION });
    const byApprover = (approvalId: string, approve = true) => ({ approvalId, approve, channel: ApprovalChannel.APPROVER });
    const approver = (tenant: string, principal: string, sessionId = "admin-1"): { ctx: CallContext } => ({ ctx: { tenant, principal, sessionId } });

    it("resumes after an elicitation answer from the same session, once, returning the output", async () => {
      const { tenant, approvalId } = await pendingEcho();
      expect(await client().resolveApproval(elicited(approvalId), as(tenant, "session-a"))).toMatchObject({
        status: "approved",
        resolvedBy: "human via elicitation in session session-a",
        // No ledger here: the answer is in the in-process audit only.
        ledgerSeq: 0n,
      });
      await expectChaosError(client().resolveApproval(elicited(approvalId), as(tenant, "session-a")), "failed_precondition");
      const res = await client().execute(resume(approvalId), as(tenant, "session-a"));
      expect(res.results).toHaveLength(1);
      expect(res.results[0]).toMatchObject({ stepId: "s1", capability: "test.echo", status: "executed", ran: true, errorCode: "" });
      expect(toJson(ValueSchema, res.results[0]!.output!)).toEqual({ echo: "ship it" });
      expect(calls).toEqual([{ text: "ship it" }]);
      const again = await client().execute(resume(approvalId), as(tenant, "session-a"));
      expect(again.results[0]).toMatchObject({ status: "failed", ran: false, errorCode: "failed_precondition" });
      expect(calls).toHaveLength(1);
    });

    it("shows the approval as it will run: the validated input, hash, policy and who asked", async () => {
      const { tenant, approvalId, version } = await pendingEcho();
      const view = await client().getApproval({ approvalId, channel: ApprovalChannel.APPROVER }, approver(tenant, "alice"));
      expect(view).toMatchObject({
        approvalId,
        capability: "test.echo",
        // The schema stripped the agent's `confirmed: true`: a person sees what would really run.
        input: { text: "ship it" },
        argsHash: createHash("sha256").update('{"text":"ship it"}').digest("hex"),
        policyVersion: BigInt(version),
        matchedRule: "requireConfirmationFor",
        status: "pending",
        requestedBy: "agent",
        requestedInSession: "session-a",
        resolvedBy: "",
      });
      await client().resolveApproval(byApprover(approvalId), approver(tenant, "alice"));
      expect(await client().getApproval({ approvalId, channel: ApprovalChannel.APPROVER }, approver(tenant, "alice"))).toMatchObject({
        status: "approved",
        resolvedBy: "alice (approver)",
      });
      await expectChaosError(client().getApproval({ approvalId, channel: ApprovalChannel.APPROVER }, approver(uniqueTenant(), "alice")), "not_found");
    });

    it("shows an approval to its requester, and to another principal only as a reviewer: otherwise an unknown id's answer", async () => {
      const { tenant, approvalId } = await pendingEcho();
      const unknown = "00000000-0000-4000-8000-000000000000";
      // The requester, from any session or none (chaoscore_execute {approval_id}, the console link's wait).
      for (const ctx of [as(tenant, "session-a"), as(tenant, "session-b"), as(tenant)]) {
        expect(await client().getApproval({ approvalId }, ctx)).toMatchObject({ approvalId, requestedBy: "agent", requestedInSession: "session-a" });
      }
      const bob = { ctx: { tenant, principal: "bob", requestRef: "AAECAwQFBgcICQoLDA0ODw" } };
      const notRequester = await expectChaosError(client().getApproval({ approvalId }, bob), "not_found");
      const never = await expectChaosError(client().getApproval({ approvalId: unknown }, bob), "not_found");
      expect(notRequester.message.replace(approvalId, "ID")).toBe(never.message.replace(unknown, "ID"));
      await expectChaosError(client().getApproval({ approvalId, channel: ApprovalChannel.ELICITATION }, bob), "not_found");
      // OPERATOR reads as the operator only; APPROVER and CONSOLE are vouched for by the edge.
      await expectChaosError(client().getApproval({ approvalId, channel: ApprovalChannel.OPERATOR }, bob), "not_found");
      expect(await client().getApproval({ approvalId, channel: ApprovalChannel.OPERATOR }, approver(tenant, "operator", ""))).toMatchObject({ approvalId });
      for (const channel of [ApprovalChannel.APPROVER, ApprovalChannel.CONSOLE]) {
        expect(await client().getApproval({ approvalId, channel }, bob)).toMatchObject({ approvalId, status: "pending" });
      }
      // A reviewer is still bound to its tenant.
      await expectChaosError(client().getApproval({ approvalId, channel: ApprovalChannel.CONSOLE }, approver(uniqueTenant(), "alice")), "not_found");
    });

    it("labels an approval requested without a session with its request ref, and takes the requester's elicitation answer from its own request", async () => {
      const tenant = uniqueTenant();
      await services.putPolicy(tenant, { requireConfirmationFor: ["test.echo"] });
      const request = (requestRef: string, principal = "agent") => ({ ctx: { tenant, principal, requestRef } });
      const res = await client().execute({ target: { case: "steps", value: { steps: [ECHO] } } }, request("AAECAwQFBgcICQoLDA0ODw"));
      const approvalId = res.results[0]!.approval!.approvalId;
      expect(await client().getApproval({ approvalId }, request("BBECAwQFBgcICQoLDA0ODw"))).toMatchObject({
        requestedBy: "agent",
        requestedInSession: "request:AAECAwQFBgcICQoLDA0ODw",
      });
      const listed = await client().listApprovals({ limit: 10 }, approver(tenant, "alice"));
      expect(listed.approvals[0]).toMatchObject({ approvalId, requestedInSession: "request:AAECAwQFBgcICQoLDA0ODw" });
      const bob = await expectChaosError(client().resolveApproval(elicited(approvalId), request("BBECAwQFBgcICQoLDA0ODw", "bob")), "permission_denied");
      expect(bob.message).toMatch(/^not_requester: /);
      await expectChaosError(client().resolveApproval(elicited(approvalId), as(tenant, "session-a")), "permission_denied");
      expect(await client().resolveApproval(elicited(approvalId), request("BBECAwQFBgcICQoLDA0ODw"))).toMatchObject({
        status: "approved",
        resolvedBy: "human via elicitation in request BBECAwQFBgcICQoLDA0ODw",
      });
      const ran = await client().execute(resume(approvalId), request("CCECAwQFBgcICQoLDA0ODw"));
      expect(ran.results[0]).toMatchObject({ status: "executed", ran: true });
    });

    it("names the channels policy accepts in the step result, GetApproval and ListApprovals, and the channel that answered", async () => {
      const { tenant, approvalId } = await pendingEcho();
      const view = await client().getApproval({ approvalId, channel: ApprovalChannel.APPROVER }, approver(tenant, "alice"));
      // test.echo is low risk: the default accepts every channel.
      expect(view).toMatchObject({ channels: ["client_elicitation", "approver", "operator", "console"], channelsRule: "approvalChannels.byRisk.low", resolutionChannel: "" });
      expect(view.createdAt).toBeDefined();
      const listed = await client().listApprovals({ limit: 10 }, approver(tenant, "alice"));
      expect(listed.approvals[0]?.channels).toEqual(["client_elicitation", "approver", "operator", "console"]);
      const operator = await client().resolveApproval({ approvalId, approve: true, channel: ApprovalChannel.OPERATOR }, approver(tenant, "operator", ""));
      expect(operator).toMatchObject({ status: "approved", resolvedBy: "operator (operator)", channel: "operator" });
      expect(await client().getApproval({ approvalId, channel: ApprovalChannel.APPROVER }, approver(tenant, "alice"))).toMatchObject({ resolutionChannel: "operator" });

      const narrow = uniqueTenant();
      await services.putPolicy(narrow, {
        requireConfirmationFor: ["test.echo"],
        approvalChannels: { capabilities: { "test.echo": { channels: ["APPROVAL_CHANNEL_APPROVER"] } } },
      });
      const res = await client().execute({ target: { case: "steps", value: { steps: [ECHO] } } }, as(narrow, "session-a"));
      expect(res.results[0]?.approval?.channels).toEqual(["approver"]);
    });

    it("refuses self-approval and accepts another principal's", async () => {
      const { tenant, approvalId } = await pendingEcho();
      const self = await expectChaosError(client().resolveApproval(byApprover(approvalId), approver(tenant, "agent")), "permission_denied");
      expect(self.message).toMatch(/self-approval/);
      expect(await client().resolveApproval(byApprover(approvalId), approver(tenant, "alice"))).toMatchObject({
        status: "approved",
        resolvedBy: "alice (approver)",
      });
      const res = await client().execute(resume(approvalId), as(tenant, "session-a"));
      expect(res.results[0]?.status).toBe("executed");
      expect(calls).toHaveLength(1);
    });

    it("refuses an elicitation answer from another session and an unspecified channel", async () => {
      const { tenant, approvalId } = await pendingEcho();
      await expectChaosError(client().resolveApproval(elicited(approvalId), as(tenant, "session-b")), "permission_denied");
      await expectChaosError(
        client().resolveApproval({ approvalId, approve: true, channel: ApprovalChannel.UNSPECIFIED }, as(tenant, "session-a")),
        "invalid_argument",
      );
      const res = await client().execute(resume(approvalId), as(tenant, "session-a"));
      expect(res.results[0]).toMatchObject({ status: "failed", ran: false, errorCode: "approval_required" });
      expect(calls).toEqual([]);
    });

    it("never runs a rejected step", async () => {
      const { tenant, approvalId } = await pendingEcho();
      expect(await client().resolveApproval(elicited(approvalId, false), as(tenant, "session-a"))).toMatchObject({ status: "rejected" });
      const res = await client().execute(resume(approvalId), as(tenant, "session-a"));
      expect(res.results[0]).toMatchObject({ status: "denied", ran: false });
      expect(res.results[0]?.errorMessage).toMatch(/rejected by human via elicitation in session session-a/);
      expect(calls).toEqual([]);
    });

    it("refuses to resume after the policy changed, naming both versions", async () => {
      const { tenant, approvalId, version } = await pendingEcho();
      await client().resolveApproval(byApprover(approvalId), approver(tenant, "alice"));
      const newer = await services.putPolicy(tenant, { requireConfirmationFor: ["test.echo", "memory.recall"] });
      const res = await client().execute(resume(approvalId), as(tenant, "session-a"));
      expect(res.results[0]).toMatchObject({ status: "failed", ran: false, errorCode: "failed_precondition" });
      expect(res.results[0]?.errorMessage).toContain(`approved under policy version ${version}, now version ${newer}`);
      expect(calls).toEqual([]);
    });

    it("runs the step once of 20 concurrent resumes", async () => {
      const { tenant, approvalId } = await pendingEcho();
      await client().resolveApproval(elicited(approvalId), as(tenant, "session-a"));
      const all = await Promise.all(Array.from({ length: 20 }, () => client().execute(resume(approvalId), as(tenant, "session-a"))));
      const statuses = all.map((r) => r.results[0]?.status);
      expect(statuses.filter((s) => s === "executed")).toHaveLength(1);
      expect(statuses.filter((s) => s === "failed")).toHaveLength(19);
      expect(calls).toHaveLength(1);
    });

    it("does not find another tenant's approval, with the answer an unknown id gets", async () => {
      const { tenant, approvalId } = await pendingEcho();
      await client().resolveApproval(elicited(approvalId), as(tenant, "session-a"));
      const other = uniqueTenant();
      const a = await expectChaosError(client().execute(resume(approvalId), as(other, "session-a")), "not_found");
      await expectChaosError(client().resolveApproval(byApprover(approvalId), approver(other, "alice")), "not_found");
      const unknown = "00000000-0000-4000-8000-000000000000";
      const b = await expectChaosError(client().execute(resume(unknown), as(tenant, "session-a")), "not_found");
      expect(a.message.replace(approvalId, "ID")).toBe(b.message.replace(unknown, "ID"));
      await expectChaosError(client().execute(resume("not-an-id"), as(tenant, "session-a")), "not_found");
      expect(calls).toEqual([]);
    });
  });

  it("plans a recurring objective from its procedure the second time (source: procedure), after the first plan ran", async () => {
    const tenant = uniqueTenant();
    const objective = "remember that the deploy window is friday";
    const first = await client().plan({ objective }, as(tenant, "session-a"));
    expect(first).toMatchObject({ source: "heuristic", notes: [] });
    const ran = await client().execute({ target: { case: "planId", value: first.planId } }, as(tenant, "session-a"));
    expect(ran.results.map((r) => r.status)).toEqual(["executed"]);
    const second = await client().plan({ objective: "Remember that the deploy window is friday." }, as(tenant, "session-a"));
    expect(second.source).toBe("procedure");
    expect(second.steps.map((s) => s.capability)).toEqual(["memory.remember"]);
    expect(second.steps[0]?.rationale).toMatch(/^procedural memory/);
    // Another tenant has no such procedure.
    expect((await client().plan({ objective }, as(uniqueTenant(), "session-a"))).source).toBe("heuristic");
  });

  it("says in the plan when an objective needs a language model", async () => {
    const planned = await client().plan({ objective: "write a haiku about gRPC" }, as(uniqueTenant(), "session-a"));
    expect(planned.steps).toEqual([]);
    expect(planned.notes.join(" ")).toContain("needs a language model; none is configured");
  });

  it("answers a question in the trace's summary, and says when memory holds nothing about it", async () => {
    const tenant = uniqueTenant();
    const run = async (objective: string) => {
      let trace: Extract<AchieveResponse["event"], { case: "trace" }>["value"] | undefined;
      for await (const msg of client().achieve({ objective }, as(tenant, "session-a"))) if (msg.event.case === "trace") trace = msg.event.value;
      return trace!;
    };
    expect((await run("what is the deploy window?")).summary).toBe(unansweredOffline("deploy-window"));
    expect((await run("remember that the deploy window is friday")).summary).toBe("Remembered deploy-window: friday.");
    const asked = await run("what is the deploy window?");
    expect(asked).toMatchObject({ status: "succeeded", summary: "deploy-window: friday." });
    expect((await run("forget the deploy window")).summary).toBe("Forgot deploy-window.");
    expect((await run("what is the deploy window?")).summary).toBe(unansweredOffline("deploy-window"));
    // A second identical objective is planned from its procedure.
    expect(asked.plans[0]?.source).toBe("procedure");
  });

  it("streams each stage of Achieve as it happens, then one trace", async () => {
    const tenant = uniqueTenant();
    const events: AchieveResponse["event"][] = [];
    for await (const msg of client().achieve({ objective: OBJECTIVE }, as(tenant, "session-a"))) events.push(msg.event);
    const stages = events.filter((e) => e.case === "stage").map((e) => e.value.stage);
    expect(stages).toEqual(["context", "reason", "plan", "execute", "evaluate", "remember"]);
    expect(events.slice(0, -1).every((e) => e.case === "stage")).toBe(true);
    const last = events.at(-1);
    expect(last?.case).toBe("trace");
    if (last?.case !== "trace") return;
    expect(last.value).toMatchObject({ objective: OBJECTIVE, status: "succeeded", replans: 0 });
    expect(last.value.intent).toMatchObject({ provider: "heuristic", model: "none" });
    expect(last.value.plans).toHaveLength(1);
    expect(last.value.plans[0]?.planId).toBe("");
    expect(last.value.results.map((r) => r.status)).toEqual(["executed"]);
    expect(last.value.episodeKey).toMatch(/^episode:/);
    expect(last.value.bookkeeping).toEqual([
      expect.objectContaining({ kind: "episode", stored: true, key: last.value.episodeKey, decision: "ALLOW", matchedRule: "default" }),
      expect.objectContaining({ kind: "procedure", stored: true, key: expect.stringMatching(/^procedure:/) as string, decision: "ALLOW" }),
    ]);
  });

  it("refuses an explicit step naming the internal memory.episode, writing nothing", async () => {
    const tenant = uniqueTenant();
    const step = { id: "s1", capability: "memory.episode", input: { key: "episode:forged", value: {}, tags: ["chaoscore.episode"], ttl_seconds: 60 } };
    const err = await expectChaosError(client().execute({ target: { case: "steps", value: { steps: [step] } } }, as(tenant, "session-a")), "invalid_argument");
    expect(err.message).toContain('"memory.episode" is an internal capability');
    expect((await services.memory.recall({ key: "episode:forged" }, as(tenant))).item).toBeUndefined();
  });

  it("ends Achieve with the domain error when the objective is refused", async () => {
    const run = async () => {
      for await (const _ of client().achieve({ objective: "   " }, as(uniqueTenant(), "s"))) void _;
    };
    await expectChaosError(run(), "invalid_argument");
  });

  it("plans the same steps for the same objective with the heuristic provider", async () => {
    const tenant = uniqueTenant();
    const a = await client().plan({ objective: OBJECTIVE }, as(tenant, "session-a"));
    const b = await client().plan({ objective: OBJECTIVE }, as(tenant, "session-b"));
    expect(b.planId).not.toBe(a.planId);
    expect(b.steps).toEqual(a.steps);
  });

  it("reasons with the heuristic provider and says no model was used", async () => {
    const res = await client().reason({ objective: OBJECTIVE }, as(uniqueTenant()));
    expect(res.intent).toMatchObject({ goal: OBJECTIVE, provider: "heuristic", model: "none" });
    expect(res.intent?.candidateCapabilities[0]).toBe("memory.remember");
    expect(res.intent?.ambiguities.join(" ")).toMatch(/No language model was used/);
  });

  it("lists the built-in capabilities with JSON Schemas of their input", async () => {
    const res = await client().listCapabilities({}, as(uniqueTenant()));
    expect(res.capabilities.map((c) => c.name).slice(0, BUILT_IN_NAMES.length)).toEqual(BUILT_IN_NAMES);
    const remember = res.capabilities.find((c) => c.name === "memory.remember");
    expect(remember?.risk).toBe("low");
    expect(remember?.inputSchema).toMatchObject({ type: "object", properties: { key: expect.any(Object) as object } });
    const http = res.capabilities.find((c) => c.name === "http.request");
    expect(http).toMatchObject({ risk: "medium", annotations: { openWorldHint: true } });
    expect(http?.inputSchema).toMatchObject({ type: "object", properties: { url: expect.any(Object) as object } });
    expect(remember).toMatchObject({ internal: false, implies: [] });
    expect(res.capabilities.find((c) => c.name === "memory.episode")).toMatchObject({ risk: "low", internal: true, implies: ["memory.remember"] });
  });

  it("describes the provider", async () => {
    const res = await client().describeProvider({}, as(uniqueTenant()));
    expect(res).toMatchObject({ id: "heuristic", model: "", configured: true });
    expect(res.displayName).not.toBe("");
  });
});

describe("cognition handlers on both transports", () => {
  it("give the same answers for the same calls", async () => {
    const t1 = uniqueTenant();
    const t2 = uniqueTenant();
    const strip = (json: unknown) => ({ ...(json as Record<string, unknown>), planId: undefined, expiresAt: undefined });
    const local = strip(toJson(PlanResponseSchema, await inProcess.plan({ objective: OBJECTIVE }, as(t1, "s"))));
    const remote = strip(toJson(PlanResponseSchema, await grpc.client.plan({ objective: OBJECTIVE }, as(t2, "s"))));
    expect(remote).toEqual(local);
    expect(toJson(ListCapabilitiesResponseSchema, await grpc.client.listCapabilities({}, as(t1)))).toEqual(
      toJson(ListCapabilitiesResponseSchema, await inProcess.listCapabilities({}, as(t1))),
    );
  });

  it("share one plan store: planned in process, executed over gRPC", async () => {
    const tenant = uniqueTenant();
    const planned = await inProcess.plan({ objective: OBJECTIVE }, as(tenant, "s"));
    const res = await grpc.client.execute({ target: { case: "planId", value: planned.planId } }, as(tenant, "s"));
    expect(res.results.map((r) => r.status)).toEqual(["executed"]);
  });

  it("never reveal a provider's key", async () => {
    const secret = "sk-test-do-not-leak-0123456789";
    const keyed = createInProcessClient(
      CognitionService,
      createCognitionHandlers(makeDeps({ provider: new OpenAIProvider({ apiKey: secret, model: "gpt-test" }) })),
    );
    const res = await keyed.describeProvider({}, as(uniqueTenant()));
    expect(res).toMatchObject({ id: "openai", model: "gpt-test", configured: true });
    expect(JSON.stringify(res)).not.toContain(secret);
  });
});

describe("approvals shared through Redis by two cognition replicas", () => {
  it("asks on one replica, answers and resumes on the other, and runs once of 20 resumes spread over both", async () => {
    const redis = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: 1 });
    const prefix = uniquePrefix("cognition-approvals");
    const signer = new ContextSigner(KEY);
    const replicas = await Promise.all(
      [0, 1].map(async () => {
        const s = await startCognitionServer({ host: "127.0.0.1", port: 0, signer, deps: makeDeps({ approvals: createRedisApprovalStore(redis, { prefix }) }) });
        return { server: s, grpc: createGrpcClient(CognitionService, `127.0.0.1:${s.port}`, signer) };
      }),
    );
    try {
      const [a, b] = replicas as [(typeof replicas)[0], (typeof replicas)[0]];
      const tenant = uniqueTenant();
      await services.putPolicy(tenant, { requireConfirmationFor: ["test.echo"] });
      const res = await a.grpc.client.execute(
        { target: { case: "steps", value: { steps: [{ id: "s1", capability: "test.echo", input: { text: "shared" } }] } } },
        as(tenant, "session-a"),
      );
      const approvalId = res.results[0]!.approval!.approvalId;
      await b.grpc.client.resolveApproval(
        { approvalId, approve: true, channel: ApprovalChannel.APPROVER },
        { ctx: { tenant, principal: "alice" } },
      );
      const all = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 === 0 ? a : b).grpc.client.execute({ target: { case: "approvalId", value: approvalId } }, as(tenant, "session-a")),
        ),
      );
      expect(all.filter((r) => r.results[0]?.status === "executed")).toHaveLength(1);
      expect(calls).toEqual([{ text: "shared" }]);
    } finally {
      for (const r of replicas) {
        r.grpc.close();
        await r.server.shutdown(1000);
      }
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length > 0) await redis.del(...keys);
      redis.disconnect();
    }
  });
});
