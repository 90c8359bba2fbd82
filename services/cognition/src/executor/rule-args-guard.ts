import { ChaosError, type CallContext, type Logger, type ServiceClient } from "@chaos-core/kit";
import { entryMatches, policyDocumentFromProto, readsArgs, ruleArgsProblem, type PolicyRuleJson, type RuleArgsProblem } from "@chaos-core/policy";
import type { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import type { Capability } from "../capabilities/capability.js";
import type { CapabilityRegistry } from "../capabilities/registry.js";
import type { PolicyVerdict } from "./step-types.js";

/**
 * Rules' conditions checked against the pins this process serves (docs/policy-conditions.md §5):
 * a policy version, however it was stored (the policy file's reload and the gRPC API check `args`
 * as a dynamic map only), and a pin, however it arrived (an operator's approval, a tenant's
 * registry upstream), meet here, where both are known. A rule whose condition reads an argument
 * none of the pinned tools its pattern names declares would never see that argument — a `deny`
 * that never fires, an `allow` that never applies — so the tools it names are denied, the verdict
 * naming the rule and the problem, until the policy or the pins change.
 *
 * The check runs for a step on an upstream tool, after policy decided it: the policy version the
 * decision names is read once per tenant (GetPolicy), its rules that read `args` kept, and each
 * rule's problem kept against the pinned input schemas it was checked with — checked again when
 * one of them changes (a new pin is a new schema object). With no rule reading `args` a step costs
 * a map lookup.
 */
/** What the check reads of a step's deps (the executor's deps are one). */
export interface RuleArgsDeps {
  readonly registry: CapabilityRegistry;
  readonly policy: ServiceClient<typeof PolicyService>;
  readonly call: CallContext;
  readonly signal?: AbortSignal;
}

export interface RuleArgsGuard {
  /** The DENY that holds for this step instead of `verdict`, or undefined when none does. */
  refusal(capability: Capability, verdict: PolicyVerdict, deps: RuleArgsDeps): Promise<PolicyVerdict | undefined>;
}

/** One rule reading `args`, and what it was last checked against. */
interface ArgsRule {
  readonly index: number;
  readonly rule: PolicyRuleJson;
  checkedWith?: readonly unknown[];
  problem?: RuleArgsProblem | undefined;
}

/** A tenant's policy version as far as this check reads it. */
interface TenantRules {
  readonly version: number;
  readonly rules: Promise<readonly ArgsRule[]>;
}

/** Tenants whose rules are kept at once; the least recently used is dropped. */
const MAX_TENANTS = 1_000;
/** Problems remembered as said, so each is logged once; forgotten all at once past this many. */
const MAX_LOGGED = 10_000;

function sameSchemas(a: readonly unknown[] | undefined, b: readonly unknown[]): boolean {
  return a !== undefined && a.length === b.length && a.every((schema, i) => schema === b[i]);
}

export function createRuleArgsGuard(options: { logger: Logger }): RuleArgsGuard {
  const tenants = new Map<string, TenantRules>();
  const logged = new Set<string>();

  /** The rules reading `args` of the tenant's policy at `version`: read once per version, shared by concurrent steps. */
  const rulesAt = (capability: Capability, version: number, deps: RuleArgsDeps): Promise<readonly ArgsRule[]> => {
    const tenant = deps.call.tenant;
    const held = tenants.get(tenant);
    if (held?.version === version) {
      tenants.delete(tenant);
      tenants.set(tenant, held);
      return held.rules;
    }
    const rules = (async () => {
      const read = await deps.policy.getPolicy({}, { ctx: deps.call, ...(deps.signal ? { signal: deps.signal } : {}) });
      if (Number(read.version) !== version) {
        throw new ChaosError(
          "conflict",
          `policy changed while ${capability.name} was being decided (version ${version} decided it, ${read.version} is in force now); nothing ran, retry`,
        );
      }
      if (!read.document) throw new ChaosError("internal", "the policy service answered without a document");
      const document = policyDocumentFromProto(read.document, "document");
      return document.rules.flatMap((rule, index): ArgsRule[] => (readsArgs(rule) ? [{ index, rule }] : []));
    })();
    tenants.set(tenant, { version, rules });
    if (tenants.size > MAX_TENANTS) tenants.delete(tenants.keys().next().value as string);
    // A failed read is not kept: the next step reads again.
    rules.catch(() => {
      if (tenants.get(tenant)?.rules === rules) tenants.delete(tenant);
    });
    return rules;
  };

  /** The rule's problem against the pinned tools it names in this caller's registry, checked again when a pin changed. */
  const problemOf = (r: ArgsRule, registry: CapabilityRegistry, tenant: string, version: number): RuleArgsProblem | undefined => {
    const named = registry.upstreamTools().filter((c) => c.upstream && entryMatches(r.rule.capability, c.name));
    const schemas = named.map((c) => c.upstream!.inputSchema);
    if (sameSchemas(r.checkedWith, schemas)) return r.problem;
    r.problem = ruleArgsProblem(r.rule, r.index, named.map((c) => ({ capability: c.name, inputSchema: c.upstream!.inputSchema })));
    r.checkedWith = schemas;
    const said = r.problem && `${tenant}\u0000${version}\u0000${r.problem.message}`;
    if (said && !logged.has(said)) {
      if (logged.size >= MAX_LOGGED) logged.clear();
      logged.add(said);
      options.logger.warn(
        { tenant, policy_version: version, rule: `rules[${r.index}]`, tools: r.problem!.tools.slice(0, 20) },
        `${r.problem!.message}: the tools it names are denied until the rule or the pins change`,
      );
    }
    return r.problem;
  };

  return {
    async refusal(capability, verdict, deps) {
      // Only upstream tools are pinned with input schemas; a denial needs nothing more.
      if (!capability.upstream || verdict.decision === "DENY") return undefined;
      const rules = await rulesAt(capability, verdict.policyVersion, deps);
      for (const r of rules) {
        if (!entryMatches(r.rule.capability, capability.name)) continue;
        const problem = problemOf(r, deps.registry, deps.call.tenant, verdict.policyVersion);
        if (!problem) continue;
        return {
          decision: "DENY",
          matchedRule: `rules[${r.index}]`,
          reason:
            `Policy version ${verdict.policyVersion}'s rules[${r.index}]${r.rule.description ? ` ("${r.rule.description}")` : ""} reads an argument ` +
            `the pinned tools it names do not declare, so it cannot govern ${capability.name}: denied until the rule or the pins change.`,
          policyVersion: verdict.policyVersion,
          condition: r.rule.when!,
          conditionError: problem.message,
        };
      }
      return undefined;
    },
  };
}
