import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { parseUpstreamsLock, type ContractSet } from "@chaos-core/contracts";
import { BUILT_IN_CAPABILITIES, upstreamRisk, upstreamToolNames } from "@chaos-core/cognition";
import { parseUpstreamsFile, type Env, type UpstreamDeclaration } from "@chaos-core/kit";
import {
  explainDecision,
  parsePolicyDocument,
  parsePolicyTests,
  PolicyDocumentError,
  ruleArgsProblems,
  runPolicyTests,
  type CapabilityFacts,
  type PinnedTool,
  type Explanation,
  type PolicyDocumentJson,
} from "@chaos-core/policy";
import { UsageError } from "./command-line.js";
import { loadUpstreamsConfig } from "./config.js";

// `chaos-core policy explain` and `chaos-core policy test` (docs/policy-conditions.md §7): what a
// call would be decided, and a file of cases checked against a policy, without running anything.

/** The policy the command decides with: a document, its version and where it came from. */
export interface PolicyInForce {
  readonly document: PolicyDocumentJson;
  readonly version: number;
  readonly source: string;
}

/** The capabilities of this environment as policy decides them, and the pinned tools' input schemas. */
export interface Catalogue {
  readonly facts: ReadonlyMap<string, CapabilityFacts>;
  /** The pinned upstream tools with their input schemas, which rules' conditions are checked against. */
  readonly pinned: readonly PinnedTool[];
}

/**
 * What the capability registry of this environment says about each capability: the built-in ones,
 * and each pinned tool of the operator's upstreams (upstreams.json and its upstreams.lock, as a
 * server on this environment serves them: the risk from the pin and the declaration, the pinned
 * annotations). A tenant's own upstreams in the registry are not read: a case for one gives its
 * risk.
 */
export async function capabilityCatalogue(env: Env): Promise<Catalogue> {
  const facts = new Map<string, CapabilityFacts>();
  for (const c of BUILT_IN_CAPABILITIES) facts.set(c.name, { risk: c.risk, annotations: c.annotations });
  const config = loadUpstreamsConfig(env);
  if (!existsSync(config.file) || !existsSync(config.lock)) return { facts, pinned: [] };
  const declarations = parseUpstreamsFile(await readFile(config.file, "utf8"), config.file);
  const pinned = pinnedUpstreamTools(declarations, parseUpstreamsLock(await readFile(config.lock, "utf8"), config.lock));
  for (const tool of pinned) facts.set(tool.capability, tool.facts);
  return { facts, pinned };
}

/** Each pinned tool of the enabled declared upstreams: its capability name, what policy decides it at, its pinned input schema. */
export function pinnedUpstreamTools(declarations: readonly UpstreamDeclaration[], pins: ReadonlyMap<string, ContractSet>): Array<PinnedTool & { facts: CapabilityFacts }> {
  return declarations.flatMap((decl) => {
    const pin = pins.get(decl.name);
    if (decl.disabled || !pin) return [];
    return upstreamToolNames(decl.name, Object.keys(pin.tools)).map((names) => {
      const { surface, behavior } = pin.tools[names.tool]!;
      const annotations = {
        title: surface.title,
        readOnlyHint: behavior.readOnly,
        destructiveHint: behavior.destructive,
        idempotentHint: behavior.idempotent,
        openWorldHint: behavior.openWorld,
      };
      return { capability: names.capability, inputSchema: surface.inputSchema, facts: { risk: upstreamRisk(decl, names.tool, behavior), upstream: decl.name, annotations } };
    });
  });
}

/**
 * Rules whose conditions read an argument none of the pinned tools they name declares, as lines
 * (docs/policy-conditions.md §5): `policy set` refuses them, `policy test` fails on them.
 */
export function argsProblems(policy: PolicyInForce, catalogue: Catalogue): string[] {
  return ruleArgsProblems(policy.document, catalogue.pinned).map((p) => p.message);
}

/** The flags of explain, as parsed. */
export interface ExplainFlags {
  readonly capability?: string | undefined;
  readonly principal?: string | undefined;
  readonly roles?: string | undefined;
  readonly args?: string | undefined;
  readonly now?: string | undefined;
  readonly host?: string | undefined;
  readonly risk?: string | undefined;
}

const RISKS = ["low", "medium", "high", "critical"] as const;

function parseArgs(text: string | undefined): Record<string, unknown> {
  if (text === undefined) return {};
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--args: not valid JSON (${(err as Error).message})`);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new UsageError("--args: must be a JSON object, the call's arguments by name");
  return value as Record<string, unknown>;
}

function parseNow(text: string | undefined): Date {
  if (text === undefined) return new Date();
  const date = new Date(text);
  if (!/^\d{4}-\d{2}-\d{2}T/.test(text) || Number.isNaN(date.getTime())) throw new UsageError(`--now: "${text}" is not an ISO 8601 time such as 2026-12-07T19:00:00Z`);
  return date;
}

/** What policy would decide for the call the flags describe. */
export function explain(flags: ExplainFlags, policy: PolicyInForce, tenant: string, catalogue: ReadonlyMap<string, CapabilityFacts>): Explanation & { risk: string } {
  if (!flags.capability) throw new UsageError("explain needs --capability NAME");
  if (flags.risk !== undefined && !(RISKS as readonly string[]).includes(flags.risk)) throw new UsageError(`--risk must be one of ${RISKS.join(", ")}`);
  const known = catalogue.get(flags.capability);
  const risk = (flags.risk as CapabilityFacts["risk"] | undefined) ?? known?.risk;
  if (risk === undefined) {
    throw new UsageError(`"${flags.capability}" is not a capability this environment's registry knows (built-in or a pinned upstream tool); give its --risk`);
  }
  const roles = flags.roles ? flags.roles.split(",").map((r) => r.trim()).filter((r) => r !== "") : [];
  const explanation = explainDecision(
    {
      capability: flags.capability,
      facts: { ...known, risk },
      call: { args: parseArgs(flags.args), principal: flags.principal ?? "policy-explain", roles, tenant, now: parseNow(flags.now) },
      ...(flags.host ? { httpHost: flags.host } : {}),
    },
    policy.document,
    policy.version,
  );
  return { ...explanation, risk };
}

/** An explanation as `--json` prints it. */
export function explanationJson(e: Explanation & { risk: string }, policy: PolicyInForce, tenant: string, capability: string, problems: readonly string[]) {
  const d = e.decision;
  return {
    tenant,
    policy_version: policy.version,
    source: policy.source,
    capability,
    risk: e.risk,
    decision: d.decision,
    matched_rule: d.matchedRule,
    reason: d.reason,
    ...(d.condition !== undefined ? { condition: d.condition } : {}),
    ...(d.conditionError !== undefined ? { condition_error: d.conditionError } : {}),
    ...(d.evaluatedAt ? { evaluated_at: d.evaluatedAt.toISOString() } : {}),
    ...(d.approvalChannels ? { approval_channels: d.approvalChannels, channels_rule: d.channelsRule } : {}),
    rules: e.trace,
    ...(problems.length > 0 ? { args_problems: problems } : {}),
  };
}

/** An explanation as a person reads it. */
export function explanationText(e: Explanation & { risk: string }, policy: PolicyInForce, capability: string, problems: readonly string[]): string {
  const d = e.decision;
  const lines = [
    `${d.decision} by ${d.matchedRule} (policy version ${policy.version}, ${policy.source}; ${capability} at ${e.risk} risk)`,
    ...(d.condition !== undefined ? [`  condition: ${d.condition}`] : []),
    ...(d.conditionError !== undefined ? [`  condition error: ${d.conditionError}`] : []),
    ...(d.approvalChannels ? [`  approval channels: ${d.approvalChannels.join(", ")} (${d.channelsRule})`] : []),
    `  ${d.reason}`,
  ];
  if (e.trace.length === 0) lines.push(`no rule names ${capability}`);
  else {
    lines.push(`rules naming ${capability}:`);
    for (const t of e.trace) lines.push(`  ${t.rule}\t${t.effect}\t${t.result}${t.when !== undefined ? `\t${t.when}` : ""}${t.error ? `\t(${t.error})` : ""}`);
  }
  for (const p of problems) lines.push(`warning: ${p}`);
  return `${lines.join("\n")}\n`;
}

/** Reads a tests file (`{cases: [...]}`), naming the file and each bad field. */
export async function readPolicyTests(file: string) {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new PolicyDocumentError(file, [{ path: "", message: `not valid JSON (${(err as Error).message})` }]);
  }
  return parsePolicyTests(value, file);
}

/** Runs the cases; the summary line ends `N passed, N failed`. */
/** Runs the cases; a rule reading an argument no pinned tool it names declares fails the run too. */
export function testPolicy(cases: Awaited<ReturnType<typeof readPolicyTests>>, policy: PolicyInForce, tenant: string, catalogue: Catalogue) {
  const results = runPolicyTests(cases, { document: policy.document, version: policy.version, lookup: (c) => catalogue.facts.get(c), tenant, now: new Date() });
  const problems = argsProblems(policy, catalogue);
  const failed = results.filter((r) => !r.passed).length + problems.length;
  return { results, args_problems: problems, passed: results.length - (failed - problems.length), failed };
}

/**
 * What `upstreams lock` and `approve` say before they re-pin (docs/policy-conditions.md §5): the
 * rules of the data directory's policy.json whose conditions read an argument none of the tools
 * they name would declare under the new pins. Nothing when there is no readable policy.json.
 */
export async function argsProblemsUnderPins(policyFile: string, declarations: readonly UpstreamDeclaration[], pins: ReadonlyMap<string, ContractSet>): Promise<string[]> {
  if (!existsSync(policyFile)) return [];
  let document: PolicyDocumentJson;
  try {
    document = parsePolicyDocument(await readFile(policyFile, "utf8"), policyFile);
  } catch {
    // A policy file that does not load is refused where it is loaded; the pins are not its judge.
    return [];
  }
  return ruleArgsProblems(document, pinnedUpstreamTools(declarations, pins)).map((p) => `${policyFile}: ${p.message}`);
}
