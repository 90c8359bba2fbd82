/**
 * Multi-round-trip approvals (2026-07-28) across two edge processes with no affinity
 * (docs/protocol.md §7, issue 11 step 8): both edges mount one MRTR keyring and reach one set of
 * services (policy, memory, council, ledger and cognition as their own mains on a fresh Postgres
 * database, cognition and the ledger on one Redis). The question is asked on edge A; the client's
 * retry, with the answer and the sealed requestState, goes to edge B, which opens it, binds it to
 * the call, consumes it once through the ledger and runs the step. Tampered, expired, replayed,
 * another principal's and another call's states are refused, the ledger records each refusal,
 * and nothing runs. Needs `npm run build` (it starts each service's dist/main.js).
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ContextSigner, createGrpcClient, type GrpcClient } from "@chaos-core/kit";
import { argumentsDigest, hashApiKey, loadMrtrKeyring, sealRequestState } from "@chaos-core/edge";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { PolicyDocumentSchema, PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { createLedgerKeys, type LedgerKeys } from "../support/ledger.js";
import { createMrtrKeys, type MrtrKeys } from "../support/mrtr-keys.js";
import { rawToolCall, resultOf, textOf, type RawAnswer, type WireResult } from "../support/mrtr.js";
import { createTestDatabase, type TestDatabase } from "../support/postgres.js";
import { startServiceMain, startServiceMains, stopProcess } from "../support/processes.js";
import { TEST_REDIS_URL, uniquePrefix } from "../support/redis.js";

const APPROVE = { approve: { action: "accept", content: { approve: true } } };
const FROZEN = "Invalid or expired requestState";

describe("MRTR approvals across two edge replicas, no affinity", () => {
  let db: TestDatabase;
  let ledgerKeys: LedgerKeys;
  let mrtrKeys: MrtrKeys;
  let keysDir: string;
  const procs: ChildProcess[] = [];
  const edges: Array<{ url: string; log: () => string }> = [];
  let ledger: GrpcClient<typeof LedgerService>;
  let policy: GrpcClient<typeof PolicyService>;
  const tenant = `mrtr-${randomBytes(3).toString("hex")}`;
  const agentKey = randomBytes(24).toString("base64url");
  const otherKey = randomBytes(24).toString("base64url");
  const agent = { authorization: `Bearer ${agentKey}` };
  const other = { authorization: `Bearer ${otherKey}` };
  const operator = { ctx: { tenant, principal: "operator" } };

  beforeAll(async () => {
    db = await createTestDatabase("chaoscore_mrtr_replicas");
    const contextKey = randomBytes(32).toString("hex");
    const common = { DATABASE_URL: db.url, CHAOS_CORE_CONTEXT_KEY: contextKey };
    const [p, m, k] = await startServiceMains(procs, [
      ["policy", common],
      ["memory", common],
      ["council", common],
    ]);
    ledgerKeys = await createLedgerKeys();
    const l = await startServiceMain("ledger", {
      ...common,
      ...ledgerKeys.env,
      POLICY_ADDR: p.address,
      REDIS_URL: TEST_REDIS_URL,
      CHAOS_CORE_REDIS_PREFIX: uniquePrefix("mrtr-ledger"),
    });
    procs.push(l.proc);
    const c = await startServiceMain("cognition", {
      CHAOS_CORE_CONTEXT_KEY: contextKey,
      POLICY_ADDR: p.address,
      MEMORY_ADDR: m.address,
      LEDGER_ADDR: l.address,
      REDIS_URL: TEST_REDIS_URL,
      CHAOS_CORE_REDIS_PREFIX: uniquePrefix("mrtr-cognition"),
      CHAOS_CORE_PROVIDER: "heuristic",
    });
    procs.push(c.proc);
    mrtrKeys = await createMrtrKeys();
    keysDir = await mkdtemp(join(tmpdir(), "chaoscore-mrtr-api-keys-"));
    const apiKeys = join(keysDir, "api-keys.json");
    await writeFile(
      apiKeys,
      JSON.stringify([
        { tenant, principal: "agent", sha256: hashApiKey(agentKey) },
        { tenant, principal: "other-agent", sha256: hashApiKey(otherKey) },
      ]),
    );
    const edgeEnv = {
      ...mrtrKeys.env,
      CHAOS_CORE_API_KEYS_FILE: apiKeys,
      CHAOS_CORE_CONTEXT_KEY: contextKey,
      POLICY_ADDR: p.address,
      MEMORY_ADDR: m.address,
      COGNITION_ADDR: c.address,
      COUNCIL_ADDR: k.address,
      LEDGER_ADDR: l.address,
      REDIS_URL: TEST_REDIS_URL,
    };
    for (const e of await startServiceMains(procs, [["edge", edgeEnv], ["edge", edgeEnv]])) edges.push({ url: e.address, log: e.log });
    const signer = new ContextSigner(contextKey);
    ledger = createGrpcClient(LedgerService, l.address, signer);
    policy = createGrpcClient(PolicyService, p.address, signer);
    // A person approves every memory.remember; policy accepts the client's own answer for it (low risk).
    await policy.client.putPolicy({ document: fromJson(PolicyDocumentSchema, { requireConfirmationFor: ["memory.remember"] } as JsonValue) }, operator);
  }, 180_000);

  afterAll(async () => {
    ledger?.close();
    policy?.close();
    for (const p of procs.reverse()) await stopProcess(p);
    await db?.drop();
    await ledgerKeys?.remove();
    await mrtrKeys?.remove();
    if (keysDir) await rm(keysDir, { recursive: true, force: true });
  });

  const [A, B] = [0, 1] as const;
  const url = (edge: number) => edges[edge]!.url;

  /** The tenant's ledger events, in order. */
  async function events(): Promise<Array<Record<string, unknown>>> {
    const res = await ledger.client.listEntries({ afterSeq: 0n, limit: 1000 }, operator);
    return res.entries.map((e) => ({ ...(e.event as Record<string, unknown>), _session: e.session, _principal: e.principal }));
  }
  const refusals = async () => (await events()).filter((e) => e["type"] === "mrtr.state_refused");
  /** How often the executor ran the step of approval `id` (its audited outcomes, status executed). */
  const runsOf = async (id: string) =>
    (await events()).filter((e) => e["type"] === "step.outcome" && e["status"] === "executed" && JSON.stringify(e).includes(id)).length;

  /** A pending approval for remembering `value`, requested through `edge`. */
  async function pending(edge: number, value: string): Promise<string> {
    const res = resultOf(await rawToolCall(url(edge), "chaoscore_execute", { steps: [{ id: "s1", capability: "memory.remember", input: { key: "window", value }, rationale: "e2e" }] }, { headers: agent }));
    const results = res.structuredContent?.["results"] as Array<{ status: string; approval?: { approval_id: string } }>;
    expect(results[0]?.status, textOf(res)).toBe("pending_approval");
    return results[0]!.approval!.approval_id;
  }

  /** Round 1 on `edge`: the question, with its sealed state. */
  async function ask(edge: number, approvalId: string): Promise<WireResult> {
    const res = resultOf(await rawToolCall(url(edge), "chaoscore_execute", { approval_id: approvalId }, { headers: agent }));
    expect(res.resultType, textOf(res)).toBe("input_required");
    expect(res.requestState).toMatch(/^cc1\./);
    expect(String(res.inputRequests?.["approve"]?.params["message"])).toContain(approvalId);
    return res;
  }

  const frozenError = (answer: RawAnswer) => {
    expect("error" in answer, JSON.stringify(answer)).toBe(true);
    const { error } = answer as { error: { code: number; message: string; data?: unknown } };
    expect(error.code).toBe(-32602);
    expect(error.message).toBe(FROZEN);
    return error;
  };

  it("asks on edge A, runs the step on edge B from the retry, exactly once; a replay on A runs nothing", async () => {
    const id = await pending(A, "monday");
    const round1 = await ask(A, id);
    expect(await runsOf(id)).toBe(0);

    const retry = { headers: agent, requestState: round1.requestState!, inputResponses: APPROVE };
    const ran = resultOf(await rawToolCall(url(B), "chaoscore_execute", { approval_id: id }, retry));
    expect(ran.isError, textOf(ran)).toBeFalsy();
    expect(ran.structuredContent).toMatchObject({ approval: { approval_id: id, status: "approved" }, results: [{ status: "executed", ran: true }] });
    expect(await runsOf(id)).toBe(1);

    const replay = resultOf(await rawToolCall(url(A), "chaoscore_execute", { approval_id: id }, retry));
    expect(replay.isError).toBe(true);
    expect(textOf(replay)).toMatch(/this requestState was already used .*: nothing ran/);
    expect(await runsOf(id)).toBe(1);

    const log = await events();
    const consumed = log.filter((e) => e["type"] === "mrtr.state_consumed");
    expect(consumed).toHaveLength(1);
    // Round 1, the answer and the run share the flow's label; the replay is recorded against it.
    const flow = consumed[0]!["flow"] as string;
    expect(consumed[0]).toMatchObject({ tool: "chaoscore_execute", _principal: "agent", _session: `request:${flow}` });
    expect(log.filter((e) => e["type"] === "mrtr.state_refused" && e["flow"] === flow).map((e) => e["reason"])).toEqual(["already_consumed"]);
    expect(edges[A]!.log()).toMatch(/"reason":"already_consumed"/);
  });

  it("refuses a tampered state with the frozen -32602 on either edge, records why, and runs nothing", async () => {
    const id = await pending(A, "tuesday");
    const { requestState } = await ask(A, id);
    const sealed = requestState!.split(".")[2]!;
    const i = Math.floor(sealed.length / 2);
    const tampered = `${requestState!.slice(0, requestState!.length - sealed.length)}${sealed.slice(0, i)}${sealed[i] === "A" ? "B" : "A"}${sealed.slice(i + 1)}`;
    const before = (await refusals()).length;
    frozenError(await rawToolCall(url(B), "chaoscore_execute", { approval_id: id }, { headers: agent, requestState: tampered, inputResponses: APPROVE }));
    frozenError(await rawToolCall(url(A), "chaoscore_execute", { approval_id: id }, { headers: agent, requestState: `${requestState}x`, inputResponses: APPROVE }));
    const recorded = (await refusals()).slice(before).map((e) => e["reason"]);
    expect(recorded).toEqual(["tag", "malformed"]);
    expect(edges[B]!.log()).toMatch(/requestState refused/);
    expect(await runsOf(id)).toBe(0);
  });

  it("refuses an expired state (sealed with the operator's key, past its TTL) and runs nothing", async () => {
    const id = await pending(A, "wednesday");
    const keyring = await loadMrtrKeyring(mrtrKeys.env.CHAOS_CORE_MRTR_KEYS_FILE);
    const { state } = sealRequestState(
      keyring,
      {
        tenant,
        principal: "agent",
        method: "tools/call",
        name: "chaoscore_execute",
        digest: argumentsDigest({ approval_id: id }),
        flow: randomBytes(16).toString("base64url"),
        phase: "approve",
      },
      { ttlSeconds: 60, now: () => Date.now() - 120_000 },
    );
    const before = (await refusals()).length;
    frozenError(await rawToolCall(url(B), "chaoscore_execute", { approval_id: id }, { headers: agent, requestState: state, inputResponses: APPROVE }));
    expect((await refusals()).slice(before).map((e) => e["reason"])).toEqual(["expired"]);
    expect(await runsOf(id)).toBe(0);
  });

  it("refuses another principal's state: the frozen -32602, recorded as principal, with none of the state's handles", async () => {
    const id = await pending(A, "thursday");
    const { requestState } = await ask(A, id);
    const before = (await refusals()).length;
    frozenError(await rawToolCall(url(B), "chaoscore_execute", { approval_id: id }, { headers: other, requestState: requestState!, inputResponses: APPROVE }));
    const [refusal] = (await refusals()).slice(before);
    expect(refusal).toMatchObject({ reason: "principal", _principal: "other-agent" });
    expect(refusal!["jti"] ?? "").toBe("");
    expect(await runsOf(id)).toBe(0);
    // The state is still the agent's to use: it was never consumed.
    const ran = resultOf(await rawToolCall(url(B), "chaoscore_execute", { approval_id: id }, { headers: agent, requestState: requestState!, inputResponses: APPROVE }));
    expect(ran.structuredContent).toMatchObject({ results: [{ status: "executed" }] });
    expect(await runsOf(id)).toBe(1);
  });

  it("refuses a state presented with other arguments (another approval): nothing runs for either, the refusal is recorded", async () => {
    const asked = await pending(A, "friday");
    const otherApproval = await pending(A, "saturday");
    const { requestState } = await ask(A, asked);
    const before = (await refusals()).length;
    const res = resultOf(await rawToolCall(url(B), "chaoscore_execute", { approval_id: otherApproval }, { headers: agent, requestState: requestState!, inputResponses: APPROVE }));
    expect(res.isError).toBe(true);
    expect(textOf(res)).toMatch(/this requestState belongs to another call \(other arguments\): nothing ran; call again without it/);
    expect((await refusals()).slice(before)).toEqual([expect.objectContaining({ reason: "digest", tool: "chaoscore_execute" })]);
    expect(await runsOf(asked)).toBe(0);
    expect(await runsOf(otherApproval)).toBe(0);
  });
});
