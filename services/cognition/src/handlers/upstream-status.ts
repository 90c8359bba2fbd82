import type { MessageInitShape } from "@bufbuild/protobuf";
import type { ListUpstreamsResponseSchema } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { CapabilityRegistry } from "../capabilities/registry.js";
import type { Capability } from "../capabilities/capability.js";
import type { BreakerState } from "../upstreams/pool.js";

/** What ListUpstreams reads of the upstreams this replica fronts (capabilities/served-upstreams.ts). */
export interface UpstreamsView {
  /** The breakers of the connections opened so far. */
  breakers(): readonly BreakerState[];
  /** Each served upstream's transport, by name. */
  readonly transports: ReadonlyMap<string, "http" | "stdio">;
  /** Tells each new set of the operator's upstream tools as capabilities, when their pins change (served-upstreams.ts). */
  onCapabilities?(listener: (capabilities: readonly Capability[]) => void): void;
}

/**
 * The upstreams as ListUpstreams shows them (docs/federation.md §7): for a caller, those it is
 * offered a tool of (`registry` is its view) with the shared breakers and its tenant's own; for
 * `tenant` undefined (the edge's readiness), every upstream and breaker.
 */
export function upstreamStatuses(registry: CapabilityRegistry, view: UpstreamsView, tenant: string | undefined): MessageInitShape<typeof ListUpstreamsResponseSchema> {
  const served = new Set(registry.list());
  const tools = new Map<string, { served: number; quarantined: number }>();
  for (const c of registry.upstreamTools()) {
    const counts = tools.get(c.upstream!.name) ?? { served: 0, quarantined: 0 };
    if (served.has(c)) counts.served += 1;
    else counts.quarantined += 1;
    tools.set(c.upstream!.name, counts);
  }
  const breakers = view.breakers().filter((b) => tenant === undefined || b.scope === "shared" || b.scope === tenant);
  return {
    upstreams: [...tools].map(([name, counts]) => ({
      name,
      // Not one of the operator's: a tenant's own registry upstream, Streamable HTTP only.
      transport: view.transports.get(name) ?? "http",
      toolsServed: counts.served,
      toolsQuarantined: counts.quarantined,
      breakers: breakers
        .filter((b) => b.upstream === name)
        .map((b) => ({ scope: b.scope, state: b.state, consecutiveFailures: b.consecutiveFailures, retryAt: b.retryAt ?? "" })),
    })),
  };
}
