import { createHash } from "node:crypto";
import { ChaosError, upstreamOffer, upstreamOfferWithAnyRoles, type CallContext, type ExposureSubject, type Logger, type UpstreamGrant, type UpstreamOffer } from "@chaos-core/kit";
import type { Capability } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { CognitionClient } from "./service-clients.js";

/**
 * The tools of upstream MCP servers that cognition serves as capabilities (docs/federation.md §6),
 * as the edge lists them: read from cognition's `ListCapabilities` (those with `upstream` set) and
 * kept here, because a server is built synchronously for each session and request.
 */
export interface UpstreamCatalog {
  /**
   * The upstream tools as last read, quarantined ones included (`upstream.quarantined`); none
   * before the first read. With `tenant`, that tenant's own registry upstreams' tools too, as last
   * read for it (a read is started when there is none, or it is older than a minute).
   */
  capabilities(tenant?: string): readonly Capability[];
  /**
   * Reads them from cognition now, and each tenant's own read so far; resolves once read. A
   * failure keeps the last list and rejects.
   */
  refresh(): Promise<void>;
  /**
   * Reads `tenant`'s own registry upstream tools now (docs/federation.md §12): those cognition
   * answers in the tenant's context beside the operator's, offered to that tenant only. A change
   * tells the listeners with `tenant`. A failure keeps its last list.
   */
  refreshTenant?(tenant: string): Promise<void>;
  /**
   * `tenant` changed (its generation moved: announced, or found by the credential directory):
   * its own tools are read again if this edge read them before — one never read here is read when
   * first listed. A burst is read once, after {@link TENANT_CHANGE_SETTLE_MS}; a change told
   * while a read is under way is read again after it (that read may have started before it).
   */
  tenantChanged?(tenant: string): void;
  /**
   * Called after a read that changed what a client would list: a tool added or gone, quarantined
   * or freed. `change` names the sets before and after (the same on every replica that sees the
   * same change), so a change published by several replicas reaches a client once. Returns a
   * function that stops it.
   */
  onChange(listener: (change: string, tenant?: string) => void): () => void;
}

/** An upstream tool's grants, as cognition sent them. */
function grantsOf(capability: Capability): UpstreamGrant[] {
  return (capability.upstream?.grants ?? []).map((g) => ({
    tenants: g.tenants,
    ...(g.principals.length > 0 ? { principals: g.principals } : {}),
    ...(g.roles.length > 0 ? { roles: g.roles } : {}),
    as: g.as === "planner" ? ("planner" as const) : ("tools" as const),
  }));
}

/**
 * How `who` (a request's tenant, principal and roles) is offered an upstream tool of the catalog
 * (docs/federation.md §6): listed as an MCP tool, to the planners only, or not at all.
 */
export function offerOf(capability: Capability, who: ExposureSubject): UpstreamOffer | undefined {
  return upstreamOffer(grantsOf(capability), who);
}

/**
 * The most `who`'s tenant and principal are offered an upstream tool whatever roles a request
 * holds: what a 2025-11-25 session registers, each of its requests then held to {@link offerOf}
 * with the roles of its own credential.
 */
export function mostOfferOf(capability: Capability, who: Omit<ExposureSubject, "roles">): UpstreamOffer | undefined {
  return upstreamOfferWithAnyRoles(grantsOf(capability), who);
}

/** The principal the edge reads the catalog as; it asks for every upstream tool and whom each is offered to. */
const EDGE_PRINCIPAL = "chaos-core-edge";
/** The context the edge reads the operator's upstream tools in: its own. */
const CATALOG_CONTEXT: CallContext = Object.freeze({ tenant: "default", principal: EDGE_PRINCIPAL });
/** How long a tenant's own tools are listed from the last read before it is read again. */
const TENANT_MAX_AGE_MS = 60_000;
/** How long a change waits for others of the same tenant before its tools are read (one read for a burst). */
export const TENANT_CHANGE_SETTLE_MS = 50;

/** Whether an upstream tool is `tenant`'s own: every grant names that tenant alone (a registry upstream's, §12). */
function ownedBy(capability: Capability, tenant: string): boolean {
  const grants = capability.upstream?.grants ?? [];
  return grants.length > 0 && grants.every((g) => g.tenants.length === 1 && g.tenants[0] === tenant);
}

interface TenantTools {
  capabilities: readonly Capability[];
  version: string;
  at: number;
  reading?: Promise<void>;
  /** A change told, waiting {@link TENANT_CHANGE_SETTLE_MS}. */
  settling?: NodeJS.Timeout;
  /** A change told while reading: read once more after. */
  again?: boolean;
}

/**
 * What a client's list depends on, as one string: each tool's name, whether (and why) it is
 * quarantined, and what a client sees of it (an approval can re-pin a new schema or description).
 */
export function catalogVersion(capabilities: readonly Capability[]): string {
  const surface = (c: Capability) => JSON.stringify([c.description, c.risk, c.upstream?.title ?? "", c.inputSchema ?? null, c.annotations ?? null]);
  const parts = capabilities.map((c) => `${c.name}\u0000${c.upstream?.quarantined ?? ""}\u0000${surface(c)}`).sort();
  return createHash("sha256").update(parts.join("\u0001")).digest("hex").slice(0, 32);
}

export function createUpstreamCatalog(cognition: CognitionClient, logger: Logger): UpstreamCatalog {
  let current: readonly Capability[] = [];
  let version = catalogVersion(current);
  const listeners = new Set<(change: string, tenant?: string) => void>();
  const tenants = new Map<string, TenantTools>();
  const tell = (change: string, tenant?: string) => {
    for (const listener of [...listeners]) {
      try {
        listener(change, tenant);
      } catch (err) {
        logger.warn({ err }, "a listener of the upstream tools failed");
      }
    }
  };
  const readTenant = async (tenant: string, entry: TenantTools): Promise<void> => {
    let capabilities: Capability[];
    try {
      ({ capabilities } = await cognition.listCapabilities({ everyUpstreamTool: true }, { ctx: { tenant, principal: EDGE_PRINCIPAL } }));
    } catch (err) {
      const e = ChaosError.from(err);
      logger.warn({ tenant, code: e.code, message: e.message }, "a tenant's own upstream tools could not be read from cognition; its last list stays");
      // Tried again when listed 5 s from now, not at every listing meanwhile.
      entry.at = Date.now() - TENANT_MAX_AGE_MS + 5_000;
      return;
    }
    const operators = new Set(current.map((c) => c.name));
    const own = Object.freeze(capabilities.filter((c) => c.upstream !== undefined && !operators.has(c.name) && ownedBy(c, tenant)));
    entry.at = Date.now();
    const next = catalogVersion(own);
    entry.capabilities = own;
    if (next === entry.version) return;
    const change = `${tenant}:${entry.version}>${next}`;
    entry.version = next;
    tell(change, tenant);
  };
  const refreshTenant = (tenant: string): Promise<void> => {
    let entry = tenants.get(tenant);
    if (!entry) tenants.set(tenant, (entry = { capabilities: [], version: catalogVersion([]), at: 0 }));
    const e = entry;
    e.reading ??= readTenant(tenant, e).finally(() => {
      e.reading = undefined;
      if (e.again) {
        e.again = false;
        void refreshTenant(tenant);
      }
    });
    return e.reading;
  };
  const tenantChanged = (tenant: string): void => {
    const entry = tenants.get(tenant);
    if (!entry || entry.settling) return;
    entry.settling = setTimeout(() => {
      entry.settling = undefined;
      if (entry.reading) entry.again = true;
      else void refreshTenant(tenant);
    }, TENANT_CHANGE_SETTLE_MS);
    entry.settling.unref();
  };
  return {
    capabilities: (tenant) => {
      if (tenant === undefined) return current;
      const entry = tenants.get(tenant);
      if (!entry || Date.now() - entry.at > TENANT_MAX_AGE_MS) void refreshTenant(tenant);
      return entry && entry.capabilities.length > 0 ? [...current, ...entry.capabilities] : current;
    },
    refreshTenant,
    tenantChanged,
    async refresh() {
      try {
        await refreshOperators();
      } finally {
        // Then each tenant's own, told apart from the operator's as just read.
        await Promise.allSettled([...tenants.keys()].map(refreshTenant));
      }
    },
    onChange(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
  };

  async function refreshOperators(): Promise<void> {
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
    tell(change);
  }
}

/**
 * A catalog that exists before the one it stands for (the stdio standalone answers `tools/list`
 * before its stores open): empty until `later` resolves, then that catalog. A listener added
 * meanwhile is told when the real catalog first holds tools, and of every change after.
 */
export function deferredUpstreamCatalog(later: Promise<UpstreamCatalog | undefined>): UpstreamCatalog {
  let ready: UpstreamCatalog | undefined;
  const listeners = new Set<(change: string, tenant?: string) => void>();
  const tell = (change: string, tenant?: string) => {
    for (const listener of [...listeners]) listener(change, tenant);
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
    capabilities: (tenant) => ready?.capabilities(tenant) ?? [],
    refresh: async () => (await later)?.refresh(),
    refreshTenant: async (tenant) => (await later)?.refreshTenant?.(tenant),
    tenantChanged: (tenant) => ready?.tenantChanged?.(tenant),
    onChange(listener) {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
  };
}
