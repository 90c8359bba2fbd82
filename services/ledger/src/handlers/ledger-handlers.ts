import type { JsonObject } from "@bufbuild/protobuf";
import { ChaosError, type ServiceImpl } from "@chaos-core/kit";
import type { LedgerService, SpendAction as ProtoSpendAction, StepBinding as ProtoStepBinding, ToolCall as ProtoToolCall } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import type { SpendAction } from "../domain/spend-gate.js";
import type { LedgerEntry } from "../log/entry.js";
import { verifyStoredLedger } from "../log/verify.js";
import type { LedgerCore, StepBinding } from "../service/ledger-core.js";
import { toPlainJson } from "../service/plain-json.js";
import { RequestStates } from "../service/request-states.js";
import { FinanceDesk } from "../service/finance-desk.js";
import { SpendCollection } from "../service/spend-collection.js";
import { SpendDesk } from "../service/spend-desk.js";
import { spendAnswerVia, type SpendRequestView } from "../service/spend-requests.js";
import { ToolReceipts } from "../service/tool-receipts.js";

// Handlers map proto <-> the ledger core and nothing else. The tenant, principal and session
// are always the verified ones from the call context, never request fields.

/** Plain JSON for a Struct field: CHP floats as numbers, undefined fields dropped. */
function struct(value: unknown): JsonObject {
  return JSON.parse(JSON.stringify(toPlainJson(value))) as JsonObject;
}

function entryToProto(e: LedgerEntry) {
  return {
    seq: BigInt(e.seq),
    ts: e.ts,
    tenant: e.tenant,
    session: e.session,
    principal: e.principal,
    event: struct(e.event),
    contentHash: e.content_hash,
    prevSig: e.prev_sig,
    sig: e.sig,
  };
}

function toolCallOf(call: ProtoToolCall | undefined): unknown {
  // Absent arguments stay absent: the check chain refuses them as ambiguous, never guesses {}.
  if (!call) return undefined;
  return { tool: call.tool, resource: call.resource, ...(call.arguments !== undefined ? { arguments: call.arguments } : {}) };
}

function stepOf(step: ProtoStepBinding | undefined): StepBinding | undefined {
  if (!step) return undefined;
  return { policyVersion: step.policyVersion, risk: step.risk, ...(step.requester ? { requester: step.requester } : {}) };
}

function actionOf(a: ProtoSpendAction | undefined): SpendAction {
  if (!a) throw new ChaosError("invalid_argument", "action: required");
  return { action: a.action, asset: a.asset, notional: a.notional, confidence: a.confidence ?? null };
}

function safeNumber(v: bigint, field: string): number {
  if (v > BigInt(Number.MAX_SAFE_INTEGER)) throw new ChaosError("invalid_argument", `${field}: too large`);
  return Number(v);
}

function checkpointToProto(cp: { size: number; root: string; note: string }, verifierKey: string) {
  return { note: cp.note, size: BigInt(cp.size), rootHash: Buffer.from(cp.root, "hex").toString("base64"), verifierKey };
}

const b64 = (hex: string) => Buffer.from(hex, "hex").toString("base64");

/** The gate fields of a request entry, as SpendRequest.gate shows them. */
const GATE_FIELDS = ["state", "reason", "claims", "failed_rules", "committed_today", "committed_delta", "content_hash", "day"] as const;

function spendRequestToProto(v: SpendRequestView) {
  const r = v.request;
  const ev = r.entry.event;
  return {
    requestSeq: BigInt(r.requestSeq),
    kind: r.kind,
    policy: r.policy,
    policyVersion: String(ev.policy_version ?? ""),
    tool: r.tool ?? "",
    action: struct(ev.action ?? {}),
    arguments: struct(r.arguments),
    argsHash: r.argsHash,
    requestedBy: r.principal,
    requestedInSession: r.session,
    createdAt: r.createdAt.toISOString(),
    expiresAt: v.expiresAt.toISOString(),
    state: v.state,
    channels: [...v.channels.channels],
    channelsRule: v.channels.rule,
    answeredBy: v.answer?.answeredBy ?? "",
    answerChannel: v.answer?.channel ?? "",
    answerSeq: BigInt(r.answer?.seq ?? 0),
    gate: struct(Object.fromEntries(GATE_FIELDS.filter((k) => ev[k] !== undefined).map((k) => [k, ev[k]]))),
    contentHash: r.entry.contentHash,
    collectSeq: BigInt(r.collectSeq ?? 0),
    argumentsVerified: v.argumentsVerified,
    answerReason: v.answer?.reason ?? "",
  };
}

/** The gRPC surface of the ledger service over a {@link LedgerCore}. */
export function createLedgerHandlers(core: LedgerCore): ServiceImpl<typeof LedgerService> {
  const desk = new SpendDesk(core);
  const requests = new SpendCollection(core);
  const finance = new FinanceDesk(core, requests);
  const states = new RequestStates(core);
  const receipts = new ToolReceipts(core);
  const store = core.store;
  return {
    async append(req, ctx) {
      if (!req.event) throw new ChaosError("invalid_argument", "event: required");
      const entry = await core.append(ctx.call, req.event as Record<string, unknown>);
      return { entry: entryToProto(entry) };
    },

    async listEntries(req, ctx) {
      const limit = req.limit === 0 ? 50 : req.limit;
      if (limit > 1000) throw new ChaosError("invalid_argument", "limit: at most 1000");
      // Every entry in the log, integrated into a checkpoint or not yet.
      const size = await store.size(ctx.call.tenant);
      const afterSeq = req.newestFirst ? Math.max(0, size - limit) : safeNumber(req.afterSeq, "after_seq");
      const entries = await store.list(ctx.call.tenant, { afterSeq, limit });
      if (req.newestFirst) entries.reverse();
      return { entries: entries.map(entryToProto), size: BigInt(size) };
    },

    async *exportEntries(_req, ctx) {
      // The store's export: what the admin endpoint and `chaos-core ledger export` write, line
      // for line, after integrating everything appended before the call.
      for await (const line of store.exportLedger(ctx.call.tenant)) yield { line };
    },

    async getCheckpoint(_req, ctx) {
      const cp = await store.latestCheckpoint(ctx.call.tenant);
      return cp ? { checkpoint: checkpointToProto(cp, store.verifierKey(ctx.call.tenant)) } : {};
    },

    async getInclusionProof(req, ctx) {
      const treeSize = req.treeSize === 0n ? undefined : safeNumber(req.treeSize, "tree_size");
      const p = await store.inclusionProof(ctx.call.tenant, { seq: safeNumber(req.seq, "seq") }, treeSize);
      return {
        leafIndex: BigInt(p.index),
        treeSize: BigInt(p.treeSize),
        hashes: p.proof.map(b64),
        leafHash: b64(p.leafHash),
        rootHash: b64(p.checkpoint.root),
      };
    },

    async getConsistencyProof(req, ctx) {
      const to = req.toSize === 0n ? undefined : safeNumber(req.toSize, "to_size");
      const p = await store.consistencyProof(ctx.call.tenant, safeNumber(req.fromSize, "from_size"), to);
      return {
        fromSize: BigInt(p.from),
        toSize: BigInt(p.to),
        hashes: p.proof.map(b64),
        fromRoot: p.from === 0 ? "" : b64(p.fromRoot),
        toRoot: b64(p.toCheckpoint.root),
      };
    },

    async verifyChain(_req, ctx) {
      // The whole log, as an outside verifier would check it: every content hash and chain
      // link, and every checkpoint's signature (with the ledger's public key only) and root.
      const report = await verifyStoredLedger(store, ctx.call.tenant, core.keyring.active.publicKey, { tenant: ctx.call.tenant });
      return {
        ok: report.ok,
        entries: BigInt(report.entries),
        checkpoints: BigInt(report.checkpoints),
        firstBadSeq: BigInt(report.failure?.seq ?? 0),
        problem: report.failure ? `${report.failure.check}: ${report.failure.message}` : "",
      };
    },

    async evaluateSpendGate(req, ctx) {
      const r = await desk.evaluateSpendGate(ctx.call, {
        policyName: req.policyName,
        action: actionOf(req.action),
        ...(req.agentPolicy !== undefined ? { agentPolicy: req.agentPolicy } : {}),
      });
      return {
        result: struct(r.result),
        state: r.state,
        contentHash: r.contentHash,
        ledgerSeq: BigInt(r.entry.seq),
        approvalChannels: [...(r.channels ?? [])],
      };
    },

    async approveSpend(req, ctx) {
      const r = await desk.approveSpend(ctx.call, {
        requestSeq: safeNumber(req.requestSeq, "request_seq"),
        approvedVia: spendAnswerVia(req.approvedVia),
        ttlSeconds: req.ttlSeconds,
      });
      return {
        result: struct(r.result),
        state: r.state,
        contentHash: r.contentHash,
        ledgerSeq: BigInt(r.entry.seq),
        ...(r.receipt ? { receipt: struct(r.receipt) } : {}),
        receiptPending: r.receiptPending,
        channel: r.channel,
        requester: r.requester,
      };
    },

    async getSpendRequest(req, ctx) {
      return { request: spendRequestToProto(await requests.getSpendRequest(ctx.call, safeNumber(req.requestSeq, "request_seq"))) };
    },

    async listSpendRequests(req, ctx) {
      const views = await requests.listSpendRequests(ctx.call, { limit: req.limit });
      return { requests: views.map(spendRequestToProto) };
    },

    async collectSpendApproval(req, ctx) {
      const r = await requests.collectSpendApproval(ctx.call, { requestSeq: safeNumber(req.requestSeq, "request_seq"), ttlSeconds: req.ttlSeconds });
      return {
        state: r.state,
        result: struct(r.result),
        ...(r.receipt ? { receipt: struct(r.receipt) } : {}),
        ledgerSeq: BigInt(r.entry.seq),
        contentHash: r.contentHash,
        approvedBy: r.approvedBy,
        channel: r.channel,
        approvalSeq: BigInt(r.approvalSeq),
      };
    },

    async declineSpend(req, ctx) {
      const r = await desk.declineSpend(ctx.call, {
        requestSeq: safeNumber(req.requestSeq, "request_seq"),
        approvedVia: spendAnswerVia(req.approvedVia),
        reason: req.reason,
      });
      return { ledgerSeq: BigInt(r.entry.seq), declinedBy: r.declinedBy, channel: r.channel };
    },

    async evaluateToolApproval(req, ctx) {
      const { result, entry } = await receipts.evaluateToolApproval(ctx.call, toolCallOf(req.call));
      return {
        status: result.status,
        code: result.deny_code,
        argsHash: result.status === "RECEIPT_REQUIRED" ? result.args_hash : "",
        policyVersion: result.policy_version ?? "",
        risk: result.status === "RECEIPT_REQUIRED" ? result.risk : "",
        ledgerSeq: BigInt(entry.seq),
        problem: result.status === "DENIED" ? result.problem : "",
      };
    },

    async issueReceipt(req, ctx) {
      const step = stepOf(req.step);
      const r = await receipts.issueReceipt(ctx.call, {
        toolCall: toolCallOf(req.call),
        decision: req.decision,
        ttlSeconds: req.ttlSeconds,
        approvedVia: req.approvedVia,
        ...(req.requestSeq !== 0n ? { requestSeq: safeNumber(req.requestSeq, "request_seq") } : {}),
        reason: req.reason,
        ...(step ? { step } : {}),
      });
      if (!r.issued) throw new ChaosError("permission_denied", `${r.code}: ${r.problem} (recorded as ledger entry ${r.entry.seq})`);
      return { receipt: struct(r.receipt), decisionLog: struct(r.decisionLog), ledgerSeq: BigInt(r.entry.seq) };
    },

    async authorize(req, ctx) {
      const step = stepOf(req.step);
      const r = await core.authorize(ctx.call, {
        toolCall: toolCallOf(req.call),
        ...(req.receipt !== undefined ? { receipt: req.receipt } : {}),
        ...(step ? { step } : {}),
      });
      return { authorized: r.authorized, code: r.code, step: r.step, argsHash: r.argsHash, ledgerSeq: BigInt(r.entry.seq), problem: r.problem ?? "" };
    },

    async requestAuthorization(req, ctx) {
      const r = await finance.requestAuthorization(ctx.call, { tool: req.tool, args: req.arguments ?? {}, ttlSeconds: req.ttlSeconds });
      return {
        status: r.status,
        code: r.code,
        ...(r.receipt ? { receipt: struct(r.receipt) } : {}),
        gate: struct(r.gate),
        ledgerSeq: BigInt(r.entry.seq),
        approvalRequestSeq: BigInt(r.approvalRequestSeq ?? 0),
        approvalChannels: [...(r.channels ?? [])],
      };
    },

    async executeReferenceTool(req, ctx) {
      const r = await finance.executeReferenceTool(ctx.call, {
        tool: req.tool,
        args: req.arguments ?? {},
        ...(req.receipt !== undefined ? { receipt: req.receipt } : {}),
      });
      return {
        executed: r.executed,
        code: r.code,
        detailCode: r.detailCode,
        ...(r.executed ? { result: struct(r.result) } : {}),
        ledgerSeq: BigInt(r.entry.seq),
        problem: r.executed ? "" : (r.problem ?? ""),
        approvalRequestSeq: BigInt(r.approvalRequestSeq ?? 0),
        approvalChannels: [...(r.approvalChannels ?? [])],
        gateBlocks: r.gateBlocks === true,
      };
    },

    async consumeRequestState(req, ctx) {
      if (req.expiresAtMs > BigInt(Number.MAX_SAFE_INTEGER) || req.expiresAtMs < 0n) throw new ChaosError("invalid_argument", "expires_at_ms: out of range");
      const r = await states.consume(ctx.call, { jti: req.jti, flow: req.flow, tool: req.tool, expiresAtMs: Number(req.expiresAtMs) });
      return { consumed: r.consumed, entrySeq: BigInt(r.entry.seq), code: r.code };
    },

    async recordRequestStateRefusal(req, ctx) {
      const entry = await states.refuse(ctx.call, { reason: req.reason, kid: req.kid, jti: req.jti, flow: req.flow, tool: req.tool });
      return { entrySeq: BigInt(entry.seq) };
    },

    async getInfo(_req, ctx) {
      return { info: struct(await core.info(ctx.call)) };
    },
  };
}
