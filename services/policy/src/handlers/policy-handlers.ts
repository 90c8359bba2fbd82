import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ATTR, ChaosError, withSpan, type CallContext, type ServiceImpl } from "@chaos-core/kit";
import type {
  EvaluateApprovalChannelsRequest,
  EvaluateRequest,
  EvaluateResponseSchema,
  PolicyService,
} from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { allowRuleWarnings, approvalChannelsFor, approvalChannelWarnings, type ApprovalSubject } from "../domain/channel-choice.js";
import { evaluatePolicy } from "../domain/engine.js";
import {
  capabilityNameProblem,
  financeToolNameProblem,
  PolicyDocumentError,
  spendPolicyNameProblem,
} from "../domain/policy-document.js";
import type { PolicyDocumentJson } from "../domain/policy-document.js";
import type { PolicySnapshot, PolicyStore } from "../domain/policy-store.js";
import {
  approvalChannelsToProto,
  decisionFromProto,
  decisionToProto,
  policyDocumentFromProto,
  policyDocumentToProto,
  riskFromProto,
} from "./policy-proto.js";

/** A bad document is the caller's mistake: `invalid_argument`, with the field in the message. */
function asInvalidArgument(err: unknown): unknown {
  return err instanceof PolicyDocumentError ? new ChaosError("invalid_argument", err.message, { cause: err }) : err;
}

/** Throws `invalid_argument` naming `field` when `problem` is set. */
function check(field: string, problem: string | undefined): void {
  if (problem) throw new ChaosError("invalid_argument", `${field}: ${problem}`);
}

/** The domain subject of an EvaluateApprovalChannels request; bad names are the caller's mistake. */
function subjectFromProto(req: EvaluateApprovalChannelsRequest): ApprovalSubject {
  const { subject } = req;
  switch (subject.case) {
    case "capability":
      check("capability.name", capabilityNameProblem(subject.value.name));
      return { kind: "capability", name: subject.value.name, risk: riskFromProto(subject.value.risk) };
    case "spend":
      check("spend.spend_policy", spendPolicyNameProblem(subject.value.spendPolicy));
      if (subject.value.tool !== "") check("spend.tool", financeToolNameProblem(subject.value.tool));
      return { kind: "spend", spendPolicy: subject.value.spendPolicy, tool: subject.value.tool || undefined };
    case "tool":
      // Any tool the ledger's tool-approval policy names; the risk chooses the channels.
      check("tool.tool", subject.value.tool === "" ? "required; pass the tool the receipt is for" : undefined);
      return { kind: "tool", tool: subject.value.tool, risk: riskFromProto(subject.value.risk) };
    default:
      throw new ChaosError("invalid_argument", "subject: required; pass capability, spend or tool");
  }
}

function snapshotToProto(snapshot: PolicySnapshot) {
  return {
    document: policyDocumentToProto(snapshot.document),
    version: BigInt(snapshot.version),
    updatedAt: timestampFromDate(snapshot.updatedAt),
  };
}

/** The step's arguments for rules' conditions: a JSON object, or none. */
function argumentsFromJson(text: string): Record<string, unknown> | undefined {
  if (text === "") return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new ChaosError("invalid_argument", `arguments_json: not valid JSON (${(err as Error).message})`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ChaosError("invalid_argument", "arguments_json: must be a JSON object (the step's arguments by name)");
  }
  return value as Record<string, unknown>;
}

/** Who asks, from the signed call context, and when: what rules' conditions read beyond the request. */
export interface DecisionCaller {
  readonly call: CallContext;
  /** The deciding service's clock (injected in tests), recorded with the decision. */
  readonly now: Date;
}

/**
 * One Evaluate answer from a document and its version: a pure function, the same whether the
 * policy service answers it or a snapshot beside the executor does (cognition's
 * `policy-snapshots.ts`), so both decide alike. The principal, roles and tenant conditions read
 * come from `caller.call` (the signed context), never from the request.
 */
export function decide(
  req: Pick<EvaluateRequest, "capability" | "risk" | "facts" | "argumentsJson" | "upstream" | "annotations">,
  document: PolicyDocumentJson,
  version: number,
  caller: DecisionCaller,
): MessageInitShape<typeof EvaluateResponseSchema> {
  if (req.capability === "") throw new ChaosError("invalid_argument", "capability: required; pass the exact capability name");
  const a = req.annotations;
  const result = evaluatePolicy(
    {
      capability: req.capability,
      risk: riskFromProto(req.risk),
      facts: { httpHost: req.facts?.httpHost || undefined, attributes: req.facts?.attributes ?? {} },
      call: {
        args: argumentsFromJson(req.argumentsJson),
        upstream: req.upstream,
        annotations: a
          ? { title: a.title, readOnlyHint: a.readOnlyHint, destructiveHint: a.destructiveHint, idempotentHint: a.idempotentHint, openWorldHint: a.openWorldHint }
          : undefined,
        principal: caller.call.principal,
        roles: caller.call.roles ?? [],
        tenant: caller.call.tenant,
        now: caller.now,
      },
    },
    document,
    version,
  );
  return {
    decision: decisionToProto(result.decision),
    matchedRule: result.matchedRule,
    reason: result.reason,
    policyVersion: BigInt(result.policyVersion),
    approvalChannels: approvalChannelsToProto(result.approvalChannels ?? []),
    channelsRule: result.channelsRule ?? "",
    condition: result.condition ?? "",
    conditionError: result.conditionError ?? "",
    ...(result.evaluatedAt ? { evaluatedAt: timestampFromDate(result.evaluatedAt) } : {}),
  };
}

/**
 * The PolicyService handlers over a store: proto ↔ domain mapping only. The tenant always comes
 * from the verified call context, never from the request.
 */
export function createPolicyHandlers(store: PolicyStore, options: { now?: () => Date } = {}): ServiceImpl<typeof PolicyService> {
  const now = options.now ?? (() => new Date());
  return {
    async evaluate(req, ctx) {
      if (req.capability === "") {
        throw new ChaosError("invalid_argument", "capability: required; pass the exact capability name");
      }
      return withSpan("chaoscore.policy.decide", { [ATTR.capability]: req.capability }, async (span) => {
        const snapshot = await store.get(ctx.call.tenant);
        const answer = decide(req, snapshot.document, snapshot.version, { call: ctx.call, now: now() });
        span.setAttributes({ [ATTR.decision]: decisionFromProto(answer.decision ?? 0), [ATTR.policyVersion]: snapshot.version, [ATTR.policySource]: "store" });
        return answer;
      });
    },

    async evaluateApprovalChannels(req, ctx) {
      const subject = subjectFromProto(req);
      const snapshot = await store.get(ctx.call.tenant);
      const result = approvalChannelsFor(subject, snapshot.document);
      return {
        channels: approvalChannelsToProto(result.channels),
        matchedRule: result.matchedRule,
        policyVersion: BigInt(snapshot.version),
      };
    },

    async getPolicy(_req, ctx) {
      const snapshot = await store.get(ctx.call.tenant);
      return {
        ...snapshotToProto(snapshot),
        source: snapshot.source,
        lastError: snapshot.lastError ?? "",
        warnings: [...approvalChannelWarnings(snapshot.document), ...allowRuleWarnings(snapshot.document)],
      };
    },

    async putPolicy(req, ctx) {
      if (!req.document) throw new ChaosError("invalid_argument", "document: required");
      let document;
      try {
        document = policyDocumentFromProto(req.document, "document");
      } catch (err) {
        throw asInvalidArgument(err);
      }
      // The proto has no way to say "expect nothing stored yet": 0 skips the check there.
      const expected = req.expectedVersion === 0n ? undefined : Number(req.expectedVersion);
      const version = await store.put(ctx.call.tenant, document, expected);
      return { version: BigInt(version) };
    },

    async *watchPolicy(_req, ctx) {
      for await (const snapshot of store.watch(ctx.call.tenant, ctx.signal)) {
        yield snapshotToProto(snapshot);
      }
    },
  };
}
