import type { ApprovalChannel } from "./approval-channels.js";
import { approvalChannelsFor, type ChannelsRule } from "./channel-choice.js";
import { entryMatches } from "./capability-match.js";
import { capabilityNameProblem, type PolicyDocumentJson } from "./policy-document.js";
import { isAtOrAbove, type Risk } from "./risk.js";
import { conditionInput, findRule, type AppliedRule, type CallFacts } from "./rules.js";

/** The outcome of an evaluation. */
export type Decision = "ALLOW" | "DENY" | "REQUIRE_APPROVAL";

/**
 * The rule that decided, named after the document field it comes from, so an operator can
 * find it in the policy. `capabilityName` is the input check before any rule; `default` is
 * the fall-through ALLOW.
 */
export type MatchedRule =
  | "capabilityName"
  | "deniedCapabilities"
  | "allowedCapabilities"
  | "riskRules.denyAtOrAbove"
  | "httpAllowedDomains"
  | "requireConfirmationFor"
  | "riskRules.requireApprovalAtOrAbove"
  | "default"
  | `rules[${number}]`;

/** The facts of one call that rules may look at. */
export interface RequestFacts {
  /** Host an outbound HTTP call would reach; absent or empty when the call reaches none. */
  readonly httpHost?: string | undefined;
  /** Further facts by name; no rule reads them yet, so they never change a decision. */
  readonly attributes?: Readonly<Record<string, string>>;
}

/** What is being decided: one capability call. */
export interface EvaluationInput {
  readonly capability: string;
  readonly risk: Risk;
  readonly facts: RequestFacts;
  /**
   * What the document's rules' conditions read about the call (docs/policy-conditions.md §3).
   * Absent: a rule with a condition cannot be evaluated and fails closed.
   */
  readonly call?: CallFacts | undefined;
}

/** A decision, the rule that made it, a sentence a person or a model can act on, and the policy version. */
export interface PolicyDecision {
  readonly decision: Decision;
  readonly matchedRule: MatchedRule;
  readonly reason: string;
  readonly policyVersion: number;
  /** With REQUIRE_APPROVAL only: the channels that may give the approval (`approvalChannelsFor`). */
  readonly approvalChannels?: readonly ApprovalChannel[];
  /** With REQUIRE_APPROVAL only: the `approvalChannels` entry (or `rules[i].channels`) that chose them. */
  readonly channelsRule?: ChannelsRule | `rules[${number}].channels`;
  /** When a rule decided: its condition (`when`), absent for a rule without one. */
  readonly condition?: string;
  /** Why a condition errored: the deciding rule's (it applied, failing closed), or allow rules' that were not applied. */
  readonly conditionError?: string;
  /** When a condition was evaluated: the time it saw (`now`), recorded with the decision. */
  readonly evaluatedAt?: Date;
}

/** How many allowed hosts a reason lists before it stops, to keep the sentence readable. */
const MAX_LISTED_HOSTS = 10;

/** Capabilities that reach the network over HTTP and so must name the host they reach. */
function isHttpCapability(capability: string): boolean {
  return capability === "http" || capability.startsWith("http.");
}

function describeRisk(risk: Risk): string {
  return risk === "unspecified" ? "unspecified risk (counted as critical)" : `${risk} risk`;
}

function listHosts(hosts: readonly string[]): string {
  // Sorted so the reason does not depend on the order the operator wrote the list in.
  const sorted = [...hosts].sort();
  const shown = sorted.slice(0, MAX_LISTED_HOSTS).join(", ");
  return sorted.length > MAX_LISTED_HOSTS ? `${shown} and ${sorted.length - MAX_LISTED_HOSTS} more` : shown;
}

/** `rules[2] ("reports only")`: how a reason names a rule. */
function ruleName(applied: AppliedRule): string {
  return `rules[${applied.index}]${applied.rule.description ? ` ("${applied.rule.description}")` : ""}`;
}

/** Which calls a rule applied to, and why, as the end of a sentence. */
function applies(capability: string, applied: AppliedRule): string {
  const { when } = applied.rule;
  if (when === undefined) return `every "${capability}" call.`;
  if (applied.error !== undefined) {
    return `this "${capability}" call: its condition could not be evaluated (${applied.error}), and a condition that errors applies the rule (it fails closed).`;
  }
  return `this "${capability}" call: its condition ${when} holds.`;
}

/**
 * Decides whether a capability call may run: a pure, deterministic function of its inputs (no
 * clock — the time conditions see is the caller's `call.now` —, no randomness, no I/O, and no
 * model is ever consulted). Rules apply in a fixed order and the first that matches decides
 * (docs/policy-conditions.md §4):
 *
 * 1. the capability name must be well formed (else DENY; a malformed name cannot be matched
 *    exactly against the lists, so it is never given the benefit of the doubt);
 * 2. `deniedCapabilities` → DENY (always wins);
 * 3. `allowedCapabilities`, when non-empty, must list the capability → else DENY;
 * 4. `riskRules.denyAtOrAbove` → DENY;
 * 5. `httpAllowedDomains`: a request that names an HTTP host must name a listed host (exact,
 *    case-insensitive match; subdomains are other hosts), and an `http` / `http.*` capability
 *    must name one → else DENY;
 * 6. `deny` rules: the first whose pattern matches and whose condition holds or errors → DENY;
 * 7. `require_approval` rules, likewise → REQUIRE_APPROVAL (with the rule's channels, if it names any);
 * 8. `requireConfirmationFor` → REQUIRE_APPROVAL;
 * 9. `allow` rules: the first whose condition holds → ALLOW, waiving step 10 (an erroring one does not apply);
 * 10. `riskRules.requireApprovalAtOrAbove` → REQUIRE_APPROVAL;
 * 11. otherwise ALLOW (`default`).
 *
 * Every DENY comes before every REQUIRE_APPROVAL, so an approval can never unlock a call the
 * policy forbids, and the strictest effect wins whatever the order of `rules`. A REQUIRE_APPROVAL
 * also says which channels may give the approval. Unspecified risk counts as critical in the
 * threshold rules (see `effectiveRisk` in risk.ts).
 */
export function evaluatePolicy(
  input: EvaluationInput,
  document: PolicyDocumentJson,
  version: number,
): PolicyDecision {
  const { capability, risk, facts } = input;
  let env: ReturnType<typeof conditionInput> | undefined;
  const conditionEnv = () => (input.call ? (env ??= conditionInput(capability, risk, facts.httpHost, input.call)) : undefined);
  let evaluated = false;
  /** Errors of allow rules' conditions, which did not apply (their waiver is not given). */
  const skipped: string[] = [];
  const consult = (effect: "allow" | "deny" | "require_approval"): AppliedRule | undefined => {
    const found = findRule(document, effect, capability, conditionEnv);
    evaluated ||= found.evaluated;
    skipped.push(...found.errors);
    return found.applied;
  };
  const decide = (decision: Decision, matchedRule: MatchedRule, reason: string, applied?: AppliedRule): PolicyDecision => {
    const conditionError = applied?.error ?? (skipped.length > 0 ? skipped.join("; ") : undefined);
    const notes =
      skipped.length > 0 && applied?.rule.effect !== "allow"
        ? ` (Not applied: ${skipped.join("; ")}; an allow rule whose condition errors waives nothing.)`
        : "";
    const base: PolicyDecision = {
      decision,
      matchedRule,
      reason: reason + notes,
      policyVersion: version,
      ...(applied?.rule.when !== undefined ? { condition: applied.rule.when } : {}),
      ...(conditionError !== undefined ? { conditionError } : {}),
      ...(evaluated && input.call ? { evaluatedAt: input.call.now } : {}),
    };
    if (decision !== "REQUIRE_APPROVAL") return base;
    if (applied?.rule.channels) {
      return { ...base, approvalChannels: applied.rule.channels, channelsRule: `rules[${applied.index}].channels` };
    }
    const channels = approvalChannelsFor({ kind: "capability", name: capability, risk }, document);
    return { ...base, approvalChannels: channels.channels, channelsRule: channels.matchedRule };
  };
  const v = `policy version ${version}`;
  const V = `Policy version ${version}`;

  const nameProblem = capabilityNameProblem(capability);
  if (nameProblem) {
    return decide(
      "DENY",
      "capabilityName",
      `The capability name is not valid (${nameProblem}), so no rule can match it and it is denied. ` +
        `Call the capability by its exact registered name.`,
    );
  }

  // A denial matches by name or by pattern, and always wins (capability-match.ts).
  const denied = document.deniedCapabilities.find((entry) => entryMatches(entry, capability));
  if (denied !== undefined) {
    return decide(
      "DENY",
      "deniedCapabilities",
      `The operator's ${v} denies "${capability}" outright${denied === capability ? "" : ` (deniedCapabilities lists "${denied}")`}. Do not retry it; use a different ` +
        `capability or ask the operator to change the policy.`,
    );
  }

  if (document.allowedCapabilities.length > 0 && !document.allowedCapabilities.some((entry) => entryMatches(entry, capability))) {
    return decide(
      "DENY",
      "allowedCapabilities",
      `"${capability}" is not among the capabilities the operator's ${v} allows. Use an allowed ` +
        `capability or ask the operator to add it to allowedCapabilities.`,
    );
  }

  const { denyAtOrAbove, requireApprovalAtOrAbove } = document.riskRules;
  if (isAtOrAbove(risk, denyAtOrAbove)) {
    return decide(
      "DENY",
      "riskRules.denyAtOrAbove",
      `"${capability}" has ${describeRisk(risk)}, and ${v} denies every capability at or above ` +
        `${denyAtOrAbove} risk. Use a lower-risk capability or ask the operator to raise the limit.`,
    );
  }

  const host = facts.httpHost ? facts.httpHost.toLowerCase() : undefined;
  if (host !== undefined) {
    if (!document.httpAllowedDomains.includes(host)) {
      const allowed = document.httpAllowedDomains;
      return decide(
        "DENY",
        "httpAllowedDomains",
        allowed.length === 0
          ? `${V} allows no HTTP hosts, so "${capability}" may not reach "${host}". Ask the operator ` +
              `to add "${host}" to httpAllowedDomains.`
          : `"${host}" is not an allowed HTTP host in ${v} (hosts match exactly; subdomains are ` +
              `separate hosts). Allowed hosts: ${listHosts(allowed)}. Use one of them or ask the ` +
              `operator to add "${host}".`,
      );
    }
  } else if (isHttpCapability(capability)) {
    return decide(
      "DENY",
      "httpAllowedDomains",
      `"${capability}" reaches the network, but the request names no target host, so the HTTP host ` +
        `allowlist cannot be checked. Retry with the host the call will reach.`,
    );
  }

  const denial = consult("deny");
  if (denial) {
    return decide(
      "DENY",
      `rules[${denial.index}]`,
      `${V}'s ${ruleName(denial)} denies ${applies(capability, denial)} Do not retry it as it is; change the arguments the rule ` +
        `names or ask the operator to change the policy.`,
      denial,
    );
  }

  const held = consult("require_approval");
  if (held) {
    return decide(
      "REQUIRE_APPROVAL",
      `rules[${held.index}]`,
      `${V}'s ${ruleName(held)} requires a human approval for ${applies(capability, held)} Request approval for this exact ` +
        `call; it runs only after a person approves it.`,
      held,
    );
  }

  if (document.requireConfirmationFor.some((entry) => entryMatches(entry, capability))) {
    return decide(
      "REQUIRE_APPROVAL",
      "requireConfirmationFor",
      `${V} requires a human approval for every "${capability}" call. Request approval for this ` +
        `exact call; it runs only after a person approves it.`,
    );
  }

  // An explicit allow waives the risk threshold's approval, and nothing else (docs/policy-conditions.md §4).
  const allowed = consult("allow");
  if (allowed) {
    const waived = isAtOrAbove(risk, requireApprovalAtOrAbove) ? `, so the approval ${v} requires at or above ${requireApprovalAtOrAbove} risk is waived` : "";
    return decide("ALLOW", `rules[${allowed.index}]`, `${V}'s ${ruleName(allowed)} allows ${applies(capability, allowed).slice(0, -1)}${waived}.`, allowed);
  }

  if (isAtOrAbove(risk, requireApprovalAtOrAbove)) {
    return decide(
      "REQUIRE_APPROVAL",
      "riskRules.requireApprovalAtOrAbove",
      `"${capability}" has ${describeRisk(risk)}, and ${v} requires a human approval at or above ` +
        `${requireApprovalAtOrAbove} risk. Request approval for this exact call; it runs ` +
        `only after a person approves it.`,
    );
  }

  return decide("ALLOW", "default", `"${capability}" is allowed by ${v}.`);
}
