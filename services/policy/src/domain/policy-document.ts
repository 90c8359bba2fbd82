import { CAPABILITY_NAME_RE, likelyMeant, zodProblems } from "@chaos-core/kit";
import { z } from "zod";
import {
  APPROVAL_CHANNELS,
  defaultApprovalChannels,
  isApprovalChannel,
  orderChannels,
  type ApprovalChannel,
  type ApprovalChannelsJson,
} from "./approval-channels.js";
import { isCapabilityPattern } from "./capability-match.js";
import { conditionProblem } from "./conditions.js";
import { RISK_THRESHOLDS } from "./risk.js";

const HOST_LABEL = "[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?";
const HOST_RE = new RegExp(`^${HOST_LABEL}(?:\\.${HOST_LABEL})*$`);
const MAX_HOST_LENGTH = 253;

/** Why a capability name is not acceptable, or undefined when it is. */
export function capabilityNameProblem(name: string): string | undefined {
  if (name === "") return "must not be empty";
  if (CAPABILITY_NAME_RE.test(name)) return undefined;
  if (name.includes("*")) {
    return `"${name}" is a wildcard; wildcards are not supported, list each capability by its exact name`;
  }
  return `"${name}" is not a capability name; use lowercase dotted segments such as "http.request"`;
}

/**
 * Why an entry of a policy's capability lists is not acceptable, or undefined when it is: an exact
 * capability name, or a pattern naming every capability under a prefix (`files.*`,
 * capability-match.ts). No other wildcard form.
 */
export function capabilityEntryProblem(entry: string): string | undefined {
  if (isCapabilityPattern(entry)) return undefined;
  if (entry.includes("*") && entry !== "") {
    return `"${entry}" is a wildcard; the one pattern taken is a prefix followed by .* ("files.*"), otherwise list each capability by its exact name`;
  }
  return capabilityNameProblem(entry);
}

/** Why an allowed HTTP host is not acceptable, or undefined when it is. */
function hostProblem(host: string): string | undefined {
  if (host === "") return "must not be empty";
  if (host.includes("://") || host.includes("/")) {
    let suggestion = "";
    try {
      suggestion = `, e.g. "${new URL(host.includes("://") ? host : `https://${host}`).hostname}"`;
    } catch {
      // No usable suggestion; the message below still says what to write.
    }
    return `"${host}" is a URL; write the bare host without scheme or path${suggestion}`;
  }
  if (host.includes("*")) {
    return `"${host}" is a wildcard; wildcards are not supported, list each host exactly (subdomains are separate hosts)`;
  }
  if (host.includes(":")) return `"${host}" has a port; write the bare host without a port`;
  if (host !== host.toLowerCase()) return `"${host}" must be lower-case ("${host.toLowerCase()}")`;
  if (host.length > MAX_HOST_LENGTH || !HOST_RE.test(host)) {
    return `"${host}" is not a host name; write an exact host such as "api.example.com"`;
  }
  return undefined;
}

/** A string checked by `problemOf`, whose answer is the error message. */
function named(problemOf: (name: string) => string | undefined) {
  return z.string().superRefine((value, ctx) => {
    const problem = problemOf(value);
    if (problem) ctx.addIssue({ code: "custom", message: problem });
  });
}

const capabilityEntry = named(capabilityEntryProblem);

const httpHost = named(hostProblem);

const riskThreshold = z.enum(RISK_THRESHOLDS);

/** A finance tool name, as the edge registers it (`wire_treasury_transfer`). */
const FINANCE_TOOL_RE = /^[a-z][a-z0-9_]*$/;

/** A spend policy name, as the ledger's operator policies accept it (`wire`, `equity`). */
export const SPEND_POLICY_NAME_RE = /^[a-z][a-z0-9_-]{0,62}$/;

/** Why a finance tool name is not acceptable, or undefined when it is. */
export function financeToolNameProblem(name: string): string | undefined {
  if (name === "") return "must not be empty";
  if (FINANCE_TOOL_RE.test(name)) return undefined;
  return `"${name}" is not a tool name; use the tool's exact name such as "wire_treasury_transfer"`;
}

/** Why a spend policy name is not acceptable, or undefined when it is. */
export function spendPolicyNameProblem(name: string): string | undefined {
  if (name === "") return "must not be empty";
  if (SPEND_POLICY_NAME_RE.test(name)) return undefined;
  return `"${name}" is not a spend policy name; use the ledger's name such as "wire" (lower-case letters, digits, "-" and "_", at most 63)`;
}

function channelProblem(value: unknown): string {
  if (typeof value !== "string") return `expected one of the channels ${APPROVAL_CHANNELS.join(", ")}`;
  const closest = likelyMeant(value, APPROVAL_CHANNELS);
  const hint = closest ? ` (did you mean "${closest}"?)` : "";
  return `"${value}" is not an approval channel${hint}; the channels are ${APPROVAL_CHANNELS.join(", ")}`;
}

const approvalChannel = z.custom<ApprovalChannel>(isApprovalChannel, { error: (issue) => channelProblem(issue.input) });

/**
 * A list of channels: at least one (an empty list would leave an approval nobody can give),
 * each named once. Stored in the canonical order (see canonicalPolicyDocument).
 */
function channelList(instead: string) {
  return z.array(approvalChannel).superRefine((list, ctx) => {
    if (list.length === 0) {
      ctx.addIssue({ code: "custom", message: `an empty list leaves no way to approve; ${instead}` });
    }
    list.forEach((channel, i) => {
      if (list.indexOf(channel) !== i) {
        ctx.addIssue({ code: "custom", path: [i], message: `"${channel}" is listed twice; name each channel once` });
      }
    });
  });
}

const stepChannels = channelList("deny the capability instead");
const spendChannels = channelList("to forbid these spends, tighten the ledger's spend policy instead");

const DEFAULT_CHANNELS = defaultApprovalChannels();

const byRiskSchema = z
  .object({
    low: stepChannels.default(DEFAULT_CHANNELS.byRisk.low),
    medium: stepChannels.default(DEFAULT_CHANNELS.byRisk.medium),
    high: stepChannels.default(DEFAULT_CHANNELS.byRisk.high),
    critical: stepChannels.default(DEFAULT_CHANNELS.byRisk.critical),
  })
  .strict();

const spendChannelsSchema = z
  .object({
    /** Every spend and finance approval no entry below names. */
    default: spendChannels.default(DEFAULT_CHANNELS.spend.default),
    /** By the ledger's spend policy (`wire`, `equity`, an operator's name). */
    policies: z.record(named(spendPolicyNameProblem), spendChannels).default({}),
    /** By finance tool (`wire_treasury_transfer`); wins over the tool's spend policy. */
    tools: z.record(named(financeToolNameProblem), spendChannels).default({}),
  })
  .strict();

/**
 * Which approval channels satisfy which decisions (docs/approvals.md §1.1). Every key is
 * optional and takes the default of {@link defaultApprovalChannels}.
 */
const approvalChannelsSchema = z
  .object({
    /** Capability steps and tool receipts by risk; unspecified risk counts as critical. */
    byRisk: byRiskSchema.default(DEFAULT_CHANNELS.byRisk),
    /** By capability name; wins over byRisk for that capability. */
    capabilities: z.record(capabilityEntry, stepChannels).default({}),
    spend: spendChannelsSchema.default(DEFAULT_CHANNELS.spend),
  })
  .strict();

const riskRulesSchema = z
  .object({
    /** Capabilities at or above this risk need a human approval. */
    requireApprovalAtOrAbove: riskThreshold.default("high"),
    /** Capabilities at or above this risk are denied outright. */
    denyAtOrAbove: riskThreshold.default("never"),
  })
  .strict();

/** What a rule does when it applies (docs/policy-conditions.md §1). */
export const RULE_EFFECTS = ["allow", "deny", "require_approval"] as const;
export type RuleEffect = (typeof RULE_EFFECTS)[number];

/** Rules a document may hold. */
export const MAX_RULES = 256;
/** Characters of a rule's description. */
export const MAX_RULE_DESCRIPTION = 200;

/**
 * The loose forms of an effect a person or a model writes (`requireApproval`, `REQUIRE-APPROVAL`,
 * `Deny`), as the canonical one; anything else is left for the enum to refuse by name.
 */
export function effectForm(value: unknown): unknown {
  if (typeof value !== "string") return value;
  const snake = value
    .trim()
    .replace(/([a-z])([A-Z])/g, "$1_$2")
    .replace(/[\s-]+/g, "_")
    .toLowerCase();
  return (RULE_EFFECTS as readonly string[]).includes(snake) ? snake : value;
}

const ruleSchema = z
  .object({
    /** An exact capability name or `upstream.*`, through the one matcher every list uses. */
    capability: capabilityEntry,
    effect: z.preprocess(effectForm, z.enum(RULE_EFFECTS)),
    /** With `require_approval` only: the channels that may give this decision's approval. */
    channels: stepChannels.optional(),
    /** A CEL condition over docs/policy-conditions.md §3's environment; omitted: always. */
    when: z.string().optional(),
    /** Free text quoted in the decision's reason. */
    description: z.string().max(MAX_RULE_DESCRIPTION).optional(),
  })
  .strict()
  .superRefine((rule, ctx) => {
    if (rule.channels !== undefined && rule.effect !== "require_approval") {
      ctx.addIssue({ code: "custom", path: ["channels"], message: `only a require_approval rule names channels; this rule's effect is ${rule.effect}` });
    }
    // Compiled here, so every path that loads a document refuses a bad condition alike (docs/policy-conditions.md §5).
    const problem = rule.when === undefined ? undefined : conditionProblem(rule.when);
    if (problem) ctx.addIssue({ code: "custom", path: ["when"], message: problem });
  });

/** One rule of a policy document, validated. */
export type PolicyRuleJson = z.output<typeof ruleSchema>;

/**
 * The operator's policy document, as JSON (the `policy.json` file, the Postgres `jsonb` column).
 * Strict: an unknown key is an error, because a misspelt `deniedCapabilites` silently ignored
 * would weaken the policy without anyone noticing. Omitted lists are empty and omitted risk
 * rules take their defaults.
 */
export const policyDocumentSchema = z
  .object({
    /** Capabilities that may run; empty means every registered capability. */
    allowedCapabilities: z.array(capabilityEntry).default([]),
    /** Capabilities that never run; this list always wins. */
    deniedCapabilities: z.array(capabilityEntry).default([]),
    /** Capabilities that always need a human approval. */
    requireConfirmationFor: z.array(capabilityEntry).default([]),
    /** Exact hosts that a request with an HTTP host may reach; subdomains are not included. */
    httpAllowedDomains: z.array(httpHost).default([]),
    riskRules: riskRulesSchema.default({ requireApprovalAtOrAbove: "high", denyAtOrAbove: "never" }),
    /** Which approval channels satisfy which decisions; omitted keys take the defaults. */
    approvalChannels: approvalChannelsSchema.default(DEFAULT_CHANNELS),
    /** Ordered rules with conditions over the call (docs/policy-conditions.md); the strictest effect wins. */
    rules: z.array(ruleSchema).max(MAX_RULES).default([]),
  })
  .strict();

/** A validated policy document with every default applied. */
export type PolicyDocumentJson = z.output<typeof policyDocumentSchema>;

/** The risk rules of a policy document. */
export type RiskRulesJson = PolicyDocumentJson["riskRules"];

/** One problem of a document: where (`deniedCapabilities[2]`) and what. */
export interface PolicyIssue {
  readonly path: string;
  readonly message: string;
}

/**
 * A policy document that is not valid. The message names the source (a file, "request") and
 * each bad field, e.g. `policy.json: deniedCapabilities[2]: expected string, got number`.
 */
export class PolicyDocumentError extends Error {
  override readonly name = "PolicyDocumentError";

  constructor(
    readonly source: string,
    readonly issues: readonly PolicyIssue[],
  ) {
    super(`${source}: ${issues.map((i) => (i.path ? `${i.path}: ${i.message}` : i.message)).join("; ")}`);
  }
}

/**
 * Validates an already-parsed value as a policy document and applies the defaults.
 * @throws PolicyDocumentError naming `source` and each bad field.
 */
export function validatePolicyDocument(value: unknown, source: string): PolicyDocumentJson {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new PolicyDocumentError(source, [{ path: "", message: "expected a JSON object with the policy fields" }]);
  }
  const result = policyDocumentSchema.safeParse(value, { reportInput: true });
  // Unknown fields get a did-you-mean: a misspelt field would otherwise weaken the policy unseen.
  if (!result.success) throw new PolicyDocumentError(source, zodProblems(result.error, policyDocumentSchema, "", { suggest: true }));
  return canonicalPolicyDocument(result.data);
}

/**
 * Turns JSON.parse's "at position N", when the runtime reports one, into a line and column an
 * editor can jump to; otherwise V8's message, which quotes the text around the error, stands.
 */
function jsonSyntaxMessage(text: string, err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  const position = /position (\d+)/.exec(message)?.[1];
  if (position === undefined) return `not valid JSON (${message})`;
  const before = text.slice(0, Number(position)).split("\n");
  return `not valid JSON at line ${before.length}, column ${before.at(-1)!.length + 1} (${message})`;
}

/**
 * Parses the text of a policy document (a `policy.json` file, a request body).
 * @param source names the origin in error messages, e.g. the file path.
 * @throws PolicyDocumentError naming `source` and each bad field or the JSON syntax error.
 */
export function parsePolicyDocument(text: string, source: string): PolicyDocumentJson {
  if (text.trim() === "") throw new PolicyDocumentError(source, [{ path: "", message: "the document is empty" }]);
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new PolicyDocumentError(source, [{ path: "", message: jsonSyntaxMessage(text, err) }]);
  }
  return validatePolicyDocument(value, source);
}

/** A map of channel lists with its keys sorted and each list in the canonical channel order. */
function canonicalChannelMap(map: Readonly<Record<string, readonly ApprovalChannel[]>>): Record<string, ApprovalChannel[]> {
  return Object.fromEntries(
    Object.keys(map)
      .sort()
      .map((key) => [key, orderChannels(map[key]!)]),
  );
}

function canonicalApprovalChannels(section: ApprovalChannelsJson): ApprovalChannelsJson {
  return {
    byRisk: {
      low: orderChannels(section.byRisk.low),
      medium: orderChannels(section.byRisk.medium),
      high: orderChannels(section.byRisk.high),
      critical: orderChannels(section.byRisk.critical),
    },
    capabilities: canonicalChannelMap(section.capabilities),
    spend: {
      default: orderChannels(section.spend.default),
      policies: canonicalChannelMap(section.spend.policies),
      tools: canonicalChannelMap(section.spend.tools),
    },
  };
}

/**
 * The same document with its keys in the documented order, and channel lists and maps in a
 * fixed order (a channel list means the same set in any order), so stored JSON reads alike and
 * a reordering is the same document.
 */
function canonicalPolicyDocument(doc: PolicyDocumentJson): PolicyDocumentJson {
  return {
    allowedCapabilities: [...doc.allowedCapabilities],
    deniedCapabilities: [...doc.deniedCapabilities],
    requireConfirmationFor: [...doc.requireConfirmationFor],
    httpAllowedDomains: [...doc.httpAllowedDomains],
    riskRules: {
      requireApprovalAtOrAbove: doc.riskRules.requireApprovalAtOrAbove,
      denyAtOrAbove: doc.riskRules.denyAtOrAbove,
    },
    approvalChannels: canonicalApprovalChannels(doc.approvalChannels),
    rules: doc.rules.map(canonicalRule),
  };
}

/** A rule with its keys in the documented order, absent optional keys left out, channels in order. */
function canonicalRule(rule: PolicyRuleJson): PolicyRuleJson {
  return {
    capability: rule.capability,
    effect: rule.effect,
    ...(rule.channels ? { channels: orderChannels(rule.channels) } : {}),
    ...(rule.when !== undefined ? { when: rule.when } : {}),
    ...(rule.description !== undefined ? { description: rule.description } : {}),
  };
}

/**
 * The safe default policy, used for a tenant that has never stored one and written to
 * `policy.json` on the first standalone run: every registered capability may run, an HTTP
 * request always needs a human approval and may reach no host until the operator lists it,
 * every high or critical capability needs a human approval, and the client's own form answer
 * approves nothing at or above high risk and no spend. The `approvalChannels` section is written
 * in full, so a first-run `policy.json` shows what can be changed.
 */
export function defaultPolicyDocument(): PolicyDocumentJson {
  return {
    allowedCapabilities: [],
    deniedCapabilities: [],
    requireConfirmationFor: ["http.request"],
    httpAllowedDomains: [],
    riskRules: { requireApprovalAtOrAbove: "high", denyAtOrAbove: "never" },
    approvalChannels: defaultApprovalChannels(),
    rules: [],
  };
}

/** The text of a policy file: pretty-printed JSON with a trailing newline, keys in order. */
export function formatPolicyDocument(doc: PolicyDocumentJson): string {
  return `${JSON.stringify(canonicalPolicyDocument(doc), null, 2)}\n`;
}
