import { createHash } from "node:crypto";
import { ChaosError, upstreamOffer, type CallContext, type Logger, type UpstreamOffer } from "@chaos-core/kit";
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
  /**
   * Called after a read that changed what a client would list: a tool added or gone, quarantined
   * or freed. `change` names the sets before and after (the same on every replica that sees the
   * same change), so a change published by several replicas reaches a client once. Returns a
   * function that stops it.
   */
  onChange(listener: (change: string) => void): () => void;
}

/**
 * How `who` is offered an upstream tool of the catalog (docs/federation.md §6): listed as an MCP
 * tool, to the planners only, or not at all (its grants, as cognition sent them).
 */
export function offerOf(capability: Capability, who: { readonly tenant: string; readonly principal: string }): UpstreamOffer | undefined {
  const grants = (capability.upstream?.grants ?? []).map((g) => ({
    tenants: g.tenants,
    ...(g.principals.length > 0 ? { principals: g.principals } : {}),
    as: g.as === "planner" ? ("planner" as const) : ("tools" as const),
  }));
  return upstreamOffer(grants, who);
}

/** The context the edge reads the catalog in: its own; it asks for every upstream tool and whom each is offered to. */
const CATALOG_CONTEXT: CallContext = Object.freeze({ tenant: "default", principal: "chaos-core-edge" });

/** What a client's list depends on, as one string: each tool's name and whether (and why) it is quarantined. */
export function catalogVersion(capabilities: readonly Capability[]): string {
  const parts = capabilities.map((c) => `${c.name}\u0000${c.upstream?.quarantined ?? ""}`).sort();
  return createHash("sha256").update(parts.join("\u0001")).digest("hex").slice(0, 32);
}

export function createUpstreamCatalog(cognition: CognitionClient, logger: Logger): UpstreamCatalog {
  let current: readonly Capability[] = [];
  let version = catalogVersion(current);
  const listeners = new Set<(change: string) => void>();
  return {
    capabilities: () => current,
    async refresh() {
      let capabilities: Capability[];
      try {
        ({ capabilities } = await cognition.listCapabilities({ everyUpstreamTool: true }, { ctx: CATALOG_CONTEXT }));
      } catch (err) {
        const e = ChaosError.from(err);
        logger.warn({ code: e.code, message: e.message }, "the upstream tools could not be read from cognition; the last list stays");
        throw e;
      }
      current = Object.freeze(capabilities.filter((c) => c.upstream !== undefined));
      const next = catalogVersion(current);
      if (next === version) return;
      const change = `${version}>${next}`;
      version = next;
      for (const listener of [...listeners]) {
        try {
          listener(change);
        } catch (err) {
          logger.warn({ err }, "a listener of the upstream tools failed");
        }
      }
    },
    onChange(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
  };
}

/**
 * A catalog that exists before the one it stands for (the stdio standalone answers `tools/list`
 * before its stores open): empty until `later` resolves, then that catalog. A listener added
 * meanwhile is told when the real catalog first holds tools, and of every change after.
 */
export function deferredUpstreamCatalog(later: Promise<UpstreamCatalog | undefined>): UpstreamCatalog {
  let ready: UpstreamCatalog | undefined;
  const listeners = new Set<(change: string) => void>();
  const tell = (change: string) => {
    for (const listener of [...listeners]) listener(change);
  };
  later.then(
    (catalog) => {
      if (!catalog) return;
      ready = catalog;
      catalog.onChange(tell);
      if (catalog.capabilities().length > 0) tell(`${catalogVersion([])}>${catalogVersion(catalog.capabilities())}`);
    },
    () => {},
  );
  return {
    capabilities: () => ready?.capabilities() ?? [],
    refresh: async () => (await later)?.refresh(),
    onChange(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
  };
}
