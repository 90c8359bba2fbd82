import { z } from "zod";
import { defineTool } from "../../definitions/tool.js";
import { gateNextStep, gateOutput, toGateOutput } from "./gate-result.js";
import { ledgerCall, ledgerOf, seqNumber } from "../../definitions/ledger-access.js";
import { approvalChannelsOutput, spendApprovalChannels } from "./spend-approval-channels.js";

/** A float in CHP terms: 100 and 100.0 are the same gate number (said once, on the policy). */
const gateNumber = z.number();

/** A policy the agent asks for on top of the operator's: every field optional, each may only tighten. */
const agentPolicy = z
  .strictObject({
    max_notional: gateNumber.optional(),
    daily_cap: gateNumber.optional(),
    hitl_threshold: gateNumber.optional(),
    min_confidence: z.number().min(0).max(1).optional(),
    allowed_actions: z.array(z.string().min(1).max(64)).max(50).optional(),
    per_asset_limits: z
      .record(z.string().min(1).max(64), gateNumber)
      .refine((limits) => Object.keys(limits).length <= 100, "has more than 100 assets")
      .optional(),
    require_confidence: z.boolean().optional().describe("false cannot drop the operator's requirement"),
  })
  .describe(
    "Stricter limits for this evaluation, on top of the operator's; a looser value is refused. Amounts are CHP " +
      "floats (100 and 100.0 are the same)",
  );

/** `evaluate_spend_gate`: CHP Profile B against the operator's named policy and the ledger's own daily total. */
export const evaluateSpendGateTool = defineTool({
  name: "evaluate_spend_gate",
  toolset: "governance",
  title: "Evaluate spend gate",
  description:
    "Check a proposed spend against an operator spend policy (CHP Profile B): LOCKED (within thresholds), " +
    "HITL_REQUIRED (a person must approve it; approval_channels lists how, and your next approve_spend receives the " +
    "approval) or BLOCKED (a hard rule failed; no approval overrides it). The limits and today's committed total come " +
    "from the operator's policy and the ledger, never from you; agent_policy can only tighten them. chp_version lists " +
    "each policy's limits. Every evaluation is recorded in the audit ledger (BLOCKED as policy_deny). Runs nothing.",
  input: z.object({
    policy: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/, "must be a spend policy name such as equity, wire or rebalance")
      .describe("The operator's spend policy, by name (reference set: equity, wire, rebalance)"),
    action: z
      .strictObject({
        action: z.string().min(1).max(64).describe("e.g. BUY, SELL, LONG, WIRE"),
        asset: z.string().min(1).max(64).describe("e.g. AAPL, ETH, USD"),
        notional: z.number().describe("The amount; zero or less is blocked by the gate (sane-notional) and recorded"),
        confidence: z
          .number()
          .min(0)
          .max(1)
          .optional()
          .describe(
            "Omitted skips the min-confidence rule, unless the policy has require_confidence (chp_version " +
              "lists it): then the call is refused (confidence_required)",
          ),
      })
      .describe("The proposed spend"),
    agent_policy: agentPolicy.optional(),
  }),
  output: gateOutput.extend({
    approval_channels: approvalChannelsOutput.optional().describe("HITL_REQUIRED: every way a person can approve it here; none of them is you"),
    next_step: z.string(),
  }),
  annotations: {
    readOnlyHint: false,
    // It appends a record (and a locked spend may count toward today's total); it replaces nothing.
    destructiveHint: false,
    // Each call is a new recorded evaluation, and totals move between calls.
    idempotentHint: false,
    openWorldHint: false,
  },
  async run(args, ctx) {
    const res = await ledgerOf(ctx).evaluateSpendGate(
      {
        policyName: args.policy,
        action: {
          action: args.action.action,
          asset: args.action.asset,
          notional: args.action.notional,
          ...(args.action.confidence !== undefined ? { confidence: args.action.confidence } : {}),
        },
        ...(args.agent_policy ? { agentPolicy: args.agent_policy } : {}),
      },
      ledgerCall(ctx),
    );
    const gate = toGateOutput(res, seqNumber(res.ledgerSeq));
    return {
      ...gate,
      ...(gate.state === "HITL_REQUIRED" ? { approval_channels: spendApprovalChannels(ctx, gate.ledger_seq, res.approvalChannels) } : {}),
      next_step: gateNextStep(gate, ctx, res.approvalChannels),
    };
  },
});
