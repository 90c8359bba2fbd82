import { ChaosError, chpFloat, ChpFloat, contentHash, pythonFloatRepr } from "@chaos-core/kit";
import { z } from "zod";

/**
 * CHP Profile B, the spend gate (DESIGN.md "CHP Profile B (spend gate) — normative rules").
 * Pure: the caller supplies the operator's policy and the ledger's committed-today total, and
 * records the result. Every gate number is a float in the CHP sense, so details and the hashed
 * provenance render it as Python's `repr(float)` (`100.0`) even when it arrived as `100`; that
 * is what makes `content_hash` comparable with the reference implementation.
 */

/** Gate states of Profile B that `evaluateGate` and `approveHuman` produce. */
export type GateState = "LOCKED" | "HITL_REQUIRED" | "BLOCKED";

/** Claim rules, in the normative order `evaluateGate` collects them. */
export type GateRule =
  | "sane-notional"
  | "allowed-action"
  | "per-asset-cap"
  | "max-notional"
  | "daily-cap"
  | "min-confidence"
  | "human-approval";

/** A number the gate reads: a plain number, a {@link ChpFloat} or (from `parseChpJson`) an exact bigint. */
export type GateNumber = number | ChpFloat | bigint;

/** The action an agent proposes. `confidence` null (or absent) skips the min-confidence rule. */
export interface SpendAction {
  readonly action: string;
  readonly asset: string;
  readonly notional: GateNumber;
  readonly confidence?: GateNumber | null;
  /** Free text for people; not evaluated and not hashed (as in the reference). */
  readonly rationale?: string;
}

/** A spend policy as the gate reads it (operator configuration; see spend-policies.ts). */
export interface SpendPolicy {
  /** Concrete version the decision was made under; not part of the hash. */
  readonly version: string;
  readonly max_notional: GateNumber;
  readonly daily_cap: GateNumber;
  /** Inclusive: a clean action with notional ≥ this needs a human. */
  readonly hitl_threshold: GateNumber;
  readonly min_confidence: GateNumber;
  /** Empty (or absent) means any action. */
  readonly allowed_actions?: readonly string[];
  /** Per-asset notional caps; an asset without one is capped by `max_notional`. */
  readonly per_asset_limits?: Readonly<Record<string, GateNumber>>;
}

/** One rule's outcome, in the reference's wire shape. */
export interface GateClaim {
  readonly rule: GateRule;
  readonly passed: boolean;
  readonly detail: string;
}

/** The normative hashed field set: no time, no decision id, so two implementations agree. */
export interface GateProvenance {
  readonly chp_version: "1.0";
  readonly profile: "B";
  readonly action: string;
  readonly asset: string;
  readonly notional: ChpFloat;
  readonly confidence: ChpFloat | null;
  readonly state: GateState;
  readonly allowed: boolean;
  readonly requires_human: boolean;
  /** Failed rule names sorted by code point. */
  readonly failed_rules: readonly GateRule[];
}

/** What the gate decided. `content_hash` = `contentHash(provenance)`. */
export interface GateResult {
  readonly state: GateState;
  readonly allowed: boolean;
  readonly requires_human: boolean;
  readonly reason: string;
  readonly claims: readonly GateClaim[];
  /** Failed rule names sorted by code point (claim order is in `reason`). */
  readonly failed_rules: readonly GateRule[];
  /** What the caller adds to the day's committed total: the notional when LOCKED, else 0. */
  readonly committed_delta: number;
  readonly provenance: GateProvenance;
  readonly content_hash: string;
}

const gateNumber = z
  .union([z.number(), z.instanceof(ChpFloat), z.bigint()])
  .transform((v) => Number(v))
  // A bigint beyond the double range, or NaN/Infinity smuggled in through a ChpFloat subclass.
  .refine((v) => Number.isFinite(v), "must be a finite number");

const actionSchema = z
  .object({
    action: z.string(),
    asset: z.string(),
    notional: gateNumber,
    confidence: gateNumber.nullish().transform((v) => v ?? null),
    rationale: z.string().optional(),
  })
  .strict();

const policySchema = z
  .object({
    version: z.string().min(1, "must name a concrete version"),
    max_notional: gateNumber,
    daily_cap: gateNumber,
    hitl_threshold: gateNumber,
    min_confidence: gateNumber,
    allowed_actions: z.array(z.string()).default([]),
    per_asset_limits: z.record(z.string(), gateNumber).default({}),
  })
  // Strict: a misspelt key (say `per_asset_limit`) would otherwise drop a cap silently.
  .strict();

// The ledger supplies this; a negative total would widen the daily cap.
const committedSchema = gateNumber.refine((v) => v >= 0, "must not be negative");
// Kept verbatim (it is part of the reason text); only a blank name is refused.
const approverSchema = z.string().refine((s) => s.trim().length > 0, "must name the person who approved");

function parse<S extends z.ZodType>(schema: S, value: unknown, field: string): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const path = [field, ...issue.path.map(String)].join(".");
  throw new ChaosError("invalid_argument", `${path}: ${issue.message}`);
}

type Action = z.output<typeof actionSchema>;

const f = pythonFloatRepr;

function result(
  action: Action,
  state: GateState,
  claims: GateClaim[],
  reason: string,
  committedDelta: number,
): GateResult {
  const allowed = state === "LOCKED";
  const requiresHuman = state === "HITL_REQUIRED";
  const failed = claims.filter((c) => !c.passed).map((c) => c.rule).sort();
  const provenance: GateProvenance = {
    chp_version: "1.0",
    profile: "B",
    action: action.action,
    asset: action.asset,
    notional: chpFloat(action.notional),
    confidence: action.confidence === null ? null : chpFloat(action.confidence),
    state,
    allowed,
    requires_human: requiresHuman,
    failed_rules: failed,
  };
  return {
    state,
    allowed,
    requires_human: requiresHuman,
    reason,
    claims,
    failed_rules: failed,
    committed_delta: committedDelta,
    provenance,
    content_hash: contentHash(provenance),
  };
}

function evaluateParsed(action: Action, policy: z.output<typeof policySchema>, committedToday: number): GateResult {
  const claims: GateClaim[] = [];
  const add = (rule: GateRule, passed: boolean, detail: string) => claims.push({ rule, passed, detail });
  const n = action.notional;

  // Every rule is collected (no short-circuit) so the record shows all that failed; sanity
  // comes first because a non-positive notional makes every limit comparison meaningless.
  const sane = n > 0;
  add("sane-notional", sane, `notional=${f(n)}`);
  if (policy.allowed_actions.length > 0) {
    add("allowed-action", policy.allowed_actions.includes(action.action), `action ${action.action}`);
  }
  // Own-property lookup: an asset named "constructor" must not find Object.prototype's.
  const cap = Object.hasOwn(policy.per_asset_limits, action.asset) ? policy.per_asset_limits[action.asset]! : policy.max_notional;
  add("per-asset-cap", n <= cap, `${action.asset} notional ${f(n)} vs cap ${f(cap)}`);
  add("max-notional", n <= policy.max_notional, `${f(n)} vs max ${f(policy.max_notional)}`);
  // A non-sane notional counts as 0 so a negative amount cannot buy daily headroom.
  const projected = committedToday + (sane ? n : 0);
  add("daily-cap", projected <= policy.daily_cap, `projected ${f(projected)} vs daily cap ${f(policy.daily_cap)}`);
  if (action.confidence !== null) {
    add("min-confidence", action.confidence >= policy.min_confidence, `confidence ${f(action.confidence)} vs min ${f(policy.min_confidence)}`);
  }

  const failedInOrder = claims.filter((c) => !c.passed).map((c) => c.rule);
  if (failedInOrder.length > 0) return result(action, "BLOCKED", claims, `blocked: ${failedInOrder.join(", ")}`, 0);
  // Only a clean action reaches the threshold, so a human is never asked to approve what the
  // policy forbids. Inclusive: notional == threshold needs a human.
  if (n >= policy.hitl_threshold) {
    return result(action, "HITL_REQUIRED", claims, `human approval required: ${f(n)} >= HITL threshold ${f(policy.hitl_threshold)}`, 0);
  }
  return result(action, "LOCKED", claims, "auto-approved under CHP thresholds", n);
}

/**
 * Evaluates a proposed spend against an operator policy and the day's committed total
 * (CHP Profile B): claims `sane-notional`, `allowed-action` (only when the policy lists
 * actions), `per-asset-cap`, `max-notional`, `daily-cap`, `min-confidence` (only when a
 * confidence is given), all collected in that order. Any failure → BLOCKED; else notional ≥
 * `hitl_threshold` → HITL_REQUIRED; else LOCKED. Malformed inputs throw `invalid_argument`
 * naming the field (e.g. `policy.daily_cap: must be a finite number`).
 */
export function evaluateGate(action: SpendAction, policy: SpendPolicy, committedToday: GateNumber): GateResult {
  return evaluateParsed(
    parse(actionSchema, action, "action"),
    parse(policySchema, policy, "policy"),
    parse(committedSchema, committedToday, "committed_today"),
  );
}

/**
 * A person's approval of a spend. It re-runs the whole evaluation: an approval lets an action
 * cross the HITL threshold, never break a hard rule, so a BLOCKED action stays BLOCKED (reason
 * `approval by X rejected: blocked: …`). Otherwise the result is LOCKED with the single claim
 * `human-approval` and `committed_delta` = notional. Who may approve (an approver principal
 * distinct from the requester) is the caller's check, not the gate's.
 */
export function approveHuman(action: SpendAction, policy: SpendPolicy, committedToday: GateNumber, approver: string): GateResult {
  const who = parse(approverSchema, approver, "approver");
  const parsedAction = parse(actionSchema, action, "action");
  const recheck = evaluateParsed(parsedAction, parse(policySchema, policy, "policy"), parse(committedSchema, committedToday, "committed_today"));
  if (recheck.state === "BLOCKED") return { ...recheck, reason: `approval by ${who} rejected: ${recheck.reason}` };
  return result(
    parsedAction,
    "LOCKED",
    [{ rule: "human-approval", passed: true, detail: `approved by ${who}` }],
    `human-approved by ${who}`,
    parsedAction.notional,
  );
}
