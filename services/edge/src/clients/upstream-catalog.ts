import { ChaosError, type CallContext, type Logger } from "@chaos-core/kit";
import type { Capability } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { CognitionClient } from "./service-clients.js";

/**
 * The tools of upstream MCP servers that cognition serves as capabilities (docs/federation.md §6),
 * as the edge lists them: read from cognition's `ListCapabilities` (those with `upstream` set) and
 * kept here, because a server is built synchronously for each session and request.
 */
export interface UpstreamCatalog {
  /** The upstream tools as last read, quarantined ones included (`upstream.quarantined`); none before the first read. */
  capabilities(): readonly Capability[];
  /** Reads them from cognition now; resolves once read. A failure keeps the last list and rejects. */
  refresh(): Promise<void>;
}

/** The context the edge reads the catalog in: its own, not a tenant's (the operator's upstreams are the same for all). */
const CATALOG_CONTEXT: CallContext = Object.freeze({ tenant: "default", principal: "chaos-core-edge" });

export function createUpstreamCatalog(cognition: CognitionClient, logger: Logger): UpstreamCatalog {
  let current: readonly Capability[] = [];
  return {
    capabilities: () => current,
    async refresh() {
      try {
        const { capabilities } = await cognition.listCapabilities({}, { ctx: CATALOG_CONTEXT });
        current = Object.freeze(capabilities.filter((c) => c.upstream !== undefined));
      } catch (err) {
        const e = ChaosError.from(err);
        logger.warn({ code: e.code, message: e.message }, "the upstream tools could not be read from cognition; the last list stays");
        throw e;
      }
    },
  };
}
