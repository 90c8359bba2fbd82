import { ChaosError, parseLedgerPolicySection, publishedGeneration, type Logger, type ServiceClient, type TenantGenerations } from "@chaos-core/kit";
import type { TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import type { OperatorPolicies, TenantPolicies } from "./operator-policies.js";

export interface RegistryPoliciesOptions {
  /** The policy service's tenant directory (its main port; in-process in the standalone). */
  readonly client: ServiceClient<typeof TenantDirectoryService>;
  /**
   * Where the policy service publishes tenant generations (Redis across replicas, the process's
   * own in the standalone). Without it nothing is cached: every call asks the policy service.
   */
  readonly generations?: TenantGenerations;
  readonly logger: Logger;
  /** Longest a cached answer is used while the generation holds (default 60 s). */
  readonly maxAgeMs?: number;
  /** How long one registry read may take (default 2 s); then the call fails closed. */
  readonly timeoutMs?: number;
}

interface Cached {
  readonly policies: TenantPolicies;
  readonly generation: number;
  readonly at: number;
}

/**
 * A tenant's spend and tool-approval policies as the tenant registry holds them
 * (`chaos-core tenants settings <id> --ledger-policy FILE`), over `file` — the ledger policy file,
 * the bootstrap and default (docs/tenants.md, "Which service owns which per-tenant document"):
 * each key the registry's section sets wins over the file's for that tenant.
 *
 * Cached per tenant with the generation it was read at, and re-read when the published
 * generation moved — every change to a tenant raises it before it commits — so a change applies
 * from the tenant's next call on every ledger replica, as a revoked key does at the edge. When the
 * registry cannot be read the call fails closed (`unavailable`): a spend is never judged by a
 * policy the operator may have just tightened.
 */
export function createRegistryOperatorPolicies(file: OperatorPolicies, options: RegistryPoliciesOptions): OperatorPolicies {
  const { client, generations, logger } = options;
  const maxAgeMs = options.maxAgeMs ?? 60_000;
  const timeoutMs = options.timeoutMs ?? 2_000;
  const cache = new Map<string, Cached>();

  async function read(tenant: string): Promise<Cached> {
    const at = performance.now();
    let state;
    try {
      state = await client.getTenantState({}, { ctx: { tenant, principal: "chaos-core-ledger" }, timeoutMs });
    } catch (err) {
      throw new ChaosError(
        "unavailable",
        `the tenant registry (policy service) cannot be read for tenant "${tenant}"'s spend and tool-approval policies, so nothing is decided: ${(err as Error).message}`,
        { cause: err },
      );
    }
    const base = await file.forTenant(tenant);
    let policies = base;
    if (state.ledgerPolicy) {
      // The registry checked the section when it was stored; one that no longer parses is refused, never guessed around.
      const parsed = parseLedgerPolicySection(state.ledgerPolicy, `the registry's ledger policy of tenant "${tenant}"`);
      if (!parsed.ok) {
        logger.error({ tenant, problem: parsed.problem }, "the tenant registry holds a ledger policy the ledger cannot read");
        throw new ChaosError("failed_precondition", `${parsed.problem}; the operator sets it again with chaos-core tenants settings ${tenant} --ledger-policy FILE`);
      }
      const { spend_policies, tool_approval } = parsed.section;
      policies = { spendPolicies: spend_policies ?? base.spendPolicies, toolPolicy: tool_approval ?? base.toolPolicy };
    }
    return { policies, generation: Number(state.generation), at };
  }

  return {
    source: `${file.source}, under the tenant registry's ledger policies`,
    async forTenant(tenant) {
      const cached = cache.get(tenant);
      if (cached && performance.now() - cached.at < maxAgeMs && (await publishedGeneration(generations, tenant, logger)) === cached.generation) return cached.policies;
      const fresh = await read(tenant);
      cache.delete(tenant);
      cache.set(tenant, fresh);
      // Bounded: the oldest tenant read goes first.
      if (cache.size > 10_000) cache.delete(cache.keys().next().value!);
      return fresh.policies;
    },
  };
}
