import { z } from "zod";
import { ChaosError } from "@chaos-core/kit";
import type { JsonObject } from "@bufbuild/protobuf";
import type { ToolContext } from "../../definitions/tool.js";
import { decidedBy } from "../../approvals/view.js";
import { jsonObjectOutput } from "./shapes.js";
import { spendApprovalNextStep } from "./spend-approval-channels.js";

/** The spend gate's states (CHP Profile B). */
export const GATE_STATES = ["LOCKED", "HITL_REQUIRED", "BLOCKED"] as const;

const claim = z.object({
  rule: z.string().describe("sane-notional, allowed-action, per-asset-cap, max-notional, daily-cap, min-confidence or human-approval"),
  passed: z.boolean(),
  detail: z.string(),
});

/** The gate's decision as tools show it; `result` is the whole record the ledger hashed and kept. */
export const gateOutput = z.object({
  state: z.enum(GATE_STATES),
  reason: z.string(),
  claims: z.array(claim).describe("Every rule checked, in CHP order, with its detail"),
  committed_today: z.number().optional().describe("This policy's committed total today (UTC), as the decision used it"),
  content_hash: z.string().describe("CHP content_hash of the decision's provenance"),
  ledger_seq: z.number().int().describe("The ledger entry recording the decision"),
  result: jsonObjectOutput.describe("The full gate result as recorded (claims, policy applied, provenance)"),
});

export type GateOutput = z.output<typeof gateOutput>;

// What the contract promises inside the gate result Struct; anything else is kept in `result`.
const recorded = z.object({ reason: z.string(), claims: z.array(claim), committed_today: z.number().optional() });

/**
 * Reads the ledger's gate answer. A result without the promised fields is a broken contract,
 * not something to guess around: the call fails rather than show a decision it cannot explain.
 */
export function toGateOutput(res: { result?: JsonObject; state: string; contentHash: string }, ledgerSeq: number): GateOutput {
  const state = z.enum(GATE_STATES).safeParse(res.state);
  const body = recorded.safeParse(res.result ?? {});
  if (!state.success || !body.success) {
    throw new ChaosError("internal", `the ledger answered with a gate result this edge cannot read (state "${res.state}"): nothing is shown as decided`);
  }
  return {
    state: state.data,
    reason: body.data.reason,
    claims: body.data.claims,
    ...(body.data.committed_today !== undefined ? { committed_today: body.data.committed_today } : {}),
    content_hash: res.contentHash,
    ledger_seq: ledgerSeq,
    result: res.result ?? {},
  };
}

/** `Held for a person: <the threshold it reached>.` and a new line, or nothing without the ledger's words. */
export function heldBecause(result: Readonly<Record<string, unknown>> | undefined): string {
  const why = decidedBy(result);
  return why ? `Held for a person: ${why}.\n` : "";
}

/**
 * The next step after a gate decision, in plain words; a held spend names every way to approve
 * it here among `channels`, the ones policy allows for it, and a blocked one the caps it broke.
 */
export function gateNextStep(gate: GateOutput, ctx: ToolContext, channels: readonly string[]): string {
  const why = decidedBy(gate.result);
  switch (gate.state) {
    case "HITL_REQUIRED":
      return `${heldBecause(gate.result)}${spendApprovalNextStep(ctx, gate.ledger_seq, channels)}\nThe approval reads the action from ledger entry ${gate.ledger_seq}, so it is exactly this one.`;
    case "BLOCKED":
      return (
        `Blocked by the policy's hard rules (${why ? `CHP: ${gate.reason}): ${why}` : `${gate.reason})`}; recorded as policy_deny in ledger entry ${gate.ledger_seq}. ` +
        "No approval can override a blocked spend: change the action or ask the operator."
      );
    case "LOCKED":
      return `Within the policy's thresholds: locked and recorded in ledger entry ${gate.ledger_seq}. Evaluating the gate runs nothing.`;
  }
}
