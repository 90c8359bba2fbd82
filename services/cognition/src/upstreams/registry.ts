import { parseUpstreamsLock, UPSTREAMS_LOCK_VERSION, type ContractSet } from "@chaos-core/contracts";
import { ChaosError, describeZodIssues, upstreamDeclarationSchema, type HttpUpstreamDeclaration } from "@chaos-core/kit";
import { upstreamToolNames } from "./names.js";

/** One enabled upstream as the registry answers it (`ListTenantUpstreams`): its declaration and its pin's text. */
export interface RegistryUpstreamEntry {
  readonly declaration?: Record<string, unknown> | undefined;
  readonly pin: string;
}

/**
 * A tenant's registry upstreams as the serving step takes them (docs/federation.md §12): the
 * declarations checked again with kit's schema (Streamable HTTP only) and the pins as
 * `upstreams.lock` entries, their digests recomputed — the same shapes `loadUpstreams` gives for
 * the operator's file, so `upstreamCapabilities` serves both. What the registry holds is trusted
 * no more than a file: an entry that no longer parses fails the whole read (`failed_precondition`,
 * naming the tenant, the upstream and the field), never served in part.
 */
export function registryUpstreams(tenant: string, entries: readonly RegistryUpstreamEntry[]): { declarations: HttpUpstreamDeclaration[]; pins: Map<string, ContractSet> } {
  const declarations: HttpUpstreamDeclaration[] = [];
  const lock: Record<string, unknown> = {};
  entries.forEach((entry, i) => {
    const where = `tenant "${tenant}" registry upstream [${i}]`;
    const parsed = upstreamDeclarationSchema.safeParse({ ...entry.declaration, disabled: false }, { reportInput: true });
    if (!parsed.success) throw new ChaosError("failed_precondition", `${where}: ${describeZodIssues(parsed.error, upstreamDeclarationSchema, "declaration", { underRoot: true }).join("; ")}`);
    if (parsed.data.transport !== "http") throw new ChaosError("failed_precondition", `${where}: declaration: a registry upstream is Streamable HTTP only`);
    declarations.push(parsed.data);
    try {
      lock[parsed.data.name] = JSON.parse(entry.pin) as unknown;
    } catch (err) {
      throw new ChaosError("failed_precondition", `${where}: pin: not JSON`, { cause: err });
    }
  });
  const pins = parseUpstreamsLock(JSON.stringify({ upstreamsLockVersion: UPSTREAMS_LOCK_VERSION, upstreams: lock }), `tenant "${tenant}" registry pins`);
  // Two tools mapping to one capability name: refused as at pin time (AddUpstream cannot check it: the mapping is cognition's).
  for (const [name, set] of pins) {
    try {
      upstreamToolNames(name, Object.keys(set.tools));
    } catch (err) {
      throw new ChaosError("failed_precondition", `tenant "${tenant}" registry pins: ${(err as Error).message}`, { cause: err });
    }
  }
  return { declarations, pins };
}
