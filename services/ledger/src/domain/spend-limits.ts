import { pythonFloatRepr } from "@chaos-core/kit";
import type { GateNumber, GateResult, GateRule, SpendAction, SpendPolicy } from "./spend-gate.js";

/**
 * The spend gate's decision in words a person or a model acts on: which of the operator's caps
 * and thresholds decided it, by their field names in the policy (as `chp_version` lists them),
 * with their values. CHP's `reason` stays exactly as Profile B defines it (it is normative, and
 * the hashed provenance sits beside it); these words go next to it, into messages and next steps.
 */

/** What a gate decision was made on: the named policy, the action and the day's committed total. */
export interface GateFacts {
  /** The operator's name for the policy (`equity`, `wire`, …). */
  readonly policyName: string;
  readonly policy: SpendPolicy;
  readonly action: SpendAction;
  readonly committedToday: GateNumber;
}

/** Gate numbers as the gate's own details write them (`500.0`). */
const f = (v: GateNumber): string => pythonFloatRepr(Number(v));

/** One failed rule's cap, with the values that broke it; the gate's own comparisons, in words. */
function capWords(rule: GateRule, facts: GateFacts): string | undefined {
  const { policy, action } = facts;
  const n = Number(action.notional);
  switch (rule) {
    case "sane-notional":
      return `notional ${f(n)} is not a positive amount`;
    case "allowed-action":
      return `action ${action.action} is not in allowed_actions [${(policy.allowed_actions ?? []).join(", ")}]`;
    case "per-asset-cap": {
      const limits = policy.per_asset_limits ?? {};
      // Without a limit of its own an asset is capped by max_notional: the same words as that rule's.
      if (!Object.hasOwn(limits, action.asset)) return capWords("max-notional", facts);
      return `${f(n)} exceeds per_asset_limits.${action.asset} ${f(limits[action.asset]!)}`;
    }
    case "max-notional":
      return `${f(n)} exceeds max_notional ${f(policy.max_notional)}`;
    case "daily-cap": {
      const committed = Number(facts.committedToday);
      // A non-sane notional counts as 0 toward the day (CHP), so only the total already there is over.
      return n > 0
        ? `${f(committed)} committed today + ${f(n)} = ${f(committed + n)} exceeds daily_cap ${f(policy.daily_cap)}`
        : `${f(committed)} committed today exceeds daily_cap ${f(policy.daily_cap)}`;
    }
    case "min-confidence":
      return action.confidence == null ? undefined : `confidence ${f(action.confidence)} is below min_confidence ${f(policy.min_confidence)}`;
    case "human-approval":
      return undefined;
  }
}

/** `a`, `a and b`, `a, b and c`. */
function listed(parts: readonly string[]): string {
  return parts.length <= 1 ? parts.join("") : `${parts.slice(0, -1).join(", ")} and ${parts.at(-1)}`;
}

/**
 * The caps behind `rules` (failed gate rules, in claim order) with their values, and the policy
 * that sets them: `1500.0 exceeds max_notional 500.0 (spend policy equity, version equity-1)`.
 * A per-asset cap that falls back to `max_notional` is named once, as `max_notional`.
 */
export function capsInWords(rules: readonly GateRule[], facts: GateFacts): string {
  const parts = [...new Set(rules.map((r) => capWords(r, facts)).filter((w): w is string => w !== undefined))];
  return `${listed(parts)} (spend policy ${facts.policyName}, version ${facts.policy.version})`;
}

/**
 * What decided `gate`, in words: BLOCKED names every cap a failed claim broke (see
 * {@link capsInWords}); HITL_REQUIRED the approval threshold the notional reached; LOCKED is
 * decided by no cap, so undefined.
 */
export function decisionInWords(gate: GateResult, facts: GateFacts): string | undefined {
  switch (gate.state) {
    case "BLOCKED":
      return capsInWords(
        gate.claims.filter((c) => !c.passed).map((c) => c.rule),
        facts,
      );
    case "HITL_REQUIRED":
      return `${f(facts.action.notional)} is at or above hitl_threshold ${f(facts.policy.hitl_threshold)} (spend policy ${facts.policyName}, version ${facts.policy.version})`;
    case "LOCKED":
      return undefined;
  }
}

/**
 * Whether only the day's total blocks `gate` (BLOCKED on `daily-cap` alone): tomorrow, or once
 * the total is lower, the same call may pass; any other failed claim blocks it whatever the day.
 */
export function blockedOnlyToday(gate: GateResult): boolean {
  const failed = gate.claims.filter((c) => !c.passed);
  return gate.state === "BLOCKED" && failed.length > 0 && failed.every((c) => c.rule === "daily-cap");
}
