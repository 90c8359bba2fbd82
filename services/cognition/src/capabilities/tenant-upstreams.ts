import { tmpdir } from "node:os";
import { join } from "node:path";
import { ChaosError, publishedGeneration, type CallContext, type Logger, type SecretSources, type ServiceClient, type TenantGenerations, type UpstreamDeclaration } from "@chaos-core/kit";
import type { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import type { TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { connectUpstream } from "../upstreams/connect.js";
import { createUpstreamDrift, type UpstreamDrift } from "../upstreams/drift.js";
import { ledgerUpstreamDrift } from "../upstreams/drift-ledger.js";
import type { UpstreamBoard, UpstreamBoards } from "../upstreams/upstream-board.js";
import { guardedUpstreamFetch } from "../upstreams/guarded-fetch.js";
import { createUpstreamPool, type BreakerState, type UpstreamPool } from "../upstreams/pool.js";
import { registryUpstreams, type RegistryUpstreamEntry } from "../upstreams/registry.js";
import type { Capability } from "./capability.js";
import type { CallerUpstreams } from "./registry.js";
import { upstreamCapabilities } from "./upstream-tools.js";

/** Longest a tenant's upstreams are served from the cache while its published generation holds. */
export const TENANT_UPSTREAMS_MAX_AGE_MS = 60_000;
/** How long a replaced pool keeps serving the calls already on it before it closes. */
const RETIRE_MS = 60_000;

/** A tenant's registry upstreams as this process serves them: read from the registry, cached by generation. */
export interface TenantUpstreams {
  /**
   * The caller's tenant's own upstream tools (enabled and pinned in the registry) as
   * capabilities, each offered to that tenant only; or, when the registry cannot be read or what
   * it holds no longer parses, none and why (`unavailable`, naming the registry): fail closed.
   */
  forCall(call: CallContext): Promise<CallerUpstreams>;
  /** The breakers of the connections opened so far, every tenant's (`scope` is the tenant). */
  breakers(): BreakerState[];
  /** Resolves once every drift entry told so far is written to its tenant's ledger, or given up (tests). */
  settled(): Promise<void>;
  close(): Promise<void>;
}

export interface TenantUpstreamsOptions {
  /** `TenantDirectoryService` (the policy service): `ListTenantUpstreams` answers the call context's tenant. */
  readonly directory: ServiceClient<typeof TenantDirectoryService>;
  /**
   * Where the policy service publishes tenant generations (Redis, or the standalone's own): read
   * per call that does not carry the generation the edge read (`CallContext.tenantGeneration`), a
   * cached answer is used only while the generation it was read at holds. Without it, and
   * without one in the call, the registry is asked on every call (rebuilding nothing while its
   * generation holds).
   */
  readonly generations?: TenantGenerations;
  /** `CHAOS_CORE_HTTP_ALLOWED_ADDRESSES`: internal ranges a tenant's upstream may be reached at. */
  readonly allowedAddresses: readonly string[];
  /** Where header secret references resolve (`CHAOS_CORE_UPSTREAM_SECRET_*`, `CHAOS_CORE_UPSTREAM_SECRETS_DIR`). */
  readonly secrets: SecretSources;
  /** The version told to upstreams in the handshake. */
  readonly version: string;
  readonly logger: Logger;
  /** The operator's upstream names: a tenant's upstream of one of these names is not served (the operator's wins). */
  readonly operatorNames?: ReadonlySet<string>;
  readonly maxResultBytes?: number;
  /** The longest a tenant's upstream's OAuth token is used (`CHAOS_CORE_UPSTREAM_TOKEN_MAX_SECONDS`). */
  readonly tokenMaxSeconds?: number;
  /**
   * Where each tenant's drift is recorded: its quarantines, cosmetic changes and releases as
   * `upstream.drift` entries in that tenant's own ledger (principal `chaos-core`), once per change
   * in this process. Unset: logged only.
   */
  readonly ledger?: ServiceClient<typeof LedgerService>;
  /** Told the tenant whenever one of its tools enters or leaves quarantine (so its lists can be read again). */
  readonly onDrift?: (tenant: string) => void;
  /**
   * Where the replicas share their quarantines (docs/federation.md §4, "Across replicas"): each
   * tenant with upstreams has its own board (`tenant:<id>`). Without: each replica finds a drift alone.
   */
  readonly boards?: UpstreamBoards;
  /** Default {@link TENANT_UPSTREAMS_MAX_AGE_MS}. */
  readonly maxAgeMs?: number;
  readonly now?: () => number;
}

interface Served {
  readonly generation: bigint;
  at: number;
  /** What was built from: the registry's answer as text, so an unchanged answer at a new generation rebuilds nothing. */
  readonly source: string;
  readonly capabilities: readonly Capability[];
  readonly pool: UpstreamPool;
}

/** A registry upstream's exposure: whatever the tenant wrote, confined to the tenant itself (§6). */
function confined(decl: UpstreamDeclaration, tenant: string): UpstreamDeclaration {
  const rules = decl.exposure && decl.exposure.length > 0 ? decl.exposure : [{ tenants: [tenant] }];
  return { ...decl, exposure: rules.map((r) => ({ ...r, tenants: [tenant] })) };
}

/**
 * Serves each tenant its own registry upstreams (docs/federation.md §12): `ListTenantUpstreams`
 * in the caller's context, checked again (`registryUpstreams`), each pinned tool a capability
 * offered to that tenant only, called through a pool of the tenant's own whose connections go
 * through `guardedUpstreamFetch` (the address checks at connect time and after every redirect)
 * and drift-checked against the registry's pins — by one drift tracker per tenant, kept across
 * reads and given the new pins when they change, so an approval (RepinUpstream) releases the
 * quarantine it ends and a change is recorded once, in the tenant's own ledger. Cached per tenant
 * with the generation it was read at; read again when the published generation moved, or after
 * `maxAgeMs`. A read that fails offers none of the tenant's upstreams (fail closed) and says why.
 */
export function createTenantUpstreams(options: TenantUpstreamsOptions): TenantUpstreams {
  const log = options.logger.child({ service: "tenant-upstreams" });
  const now = options.now ?? Date.now;
  const maxAgeMs = options.maxAgeMs ?? TENANT_UPSTREAMS_MAX_AGE_MS;
  const served = new Map<string, Served>();
  const reading = new Map<string, Promise<Served>>();
  const retiring = new Set<UpstreamPool>();
  const shadowed = new Set<string>();
  const drifts = new Map<string, { drift: UpstreamDrift; board?: UpstreamBoard }>();
  const recordings: Array<{ settled(): Promise<void> }> = [];

  /** The tenant's drift tracker: made on its first read, given the pins of every later one. */
  const driftOf = (tenant: string, pins: Parameters<UpstreamDrift["setPins"]>[0], board: UpstreamBoard | undefined): UpstreamDrift => {
    const kept = drifts.get(tenant);
    // One made before the tenant had upstreams has no board, and nothing of them to keep.
    if (kept && (kept.board !== undefined || board === undefined)) {
      kept.drift.setPins(pins);
      return kept.drift;
    }
    const drift = createUpstreamDrift(pins, log.child({ tenant }), board);
    drifts.set(tenant, { drift, ...(board ? { board } : {}) });
    if (options.ledger) recordings.push(ledgerUpstreamDrift(drift, options.ledger, log.child({ tenant }), tenant));
    if (options.onDrift) drift.onChange(() => options.onDrift?.(tenant));
    return drift;
  };

  const retire = (pool: UpstreamPool) => {
    retiring.add(pool);
    setTimeout(() => {
      retiring.delete(pool);
      void pool.close();
    }, RETIRE_MS).unref();
  };

  const build = (tenant: string, generation: bigint, source: string, entries: readonly RegistryUpstreamEntry[], board: UpstreamBoard | undefined): Served => {
    const { declarations, pins } = registryUpstreams(tenant, entries);
    const own = declarations.filter((d) => {
      if (!options.operatorNames?.has(d.name)) return true;
      const key = `${tenant}\u0000${d.name}`;
      if (!shadowed.has(key)) {
        shadowed.add(key);
        log.warn({ tenant, upstream: d.name }, `tenant "${tenant}"'s registry upstream "${d.name}" is not served: the operator's upstreams file declares an upstream "${d.name}" too, and the operator's wins`);
      }
      return false;
    });
    const drift = driftOf(tenant, pins, board);
    const fetchOf = (decl: UpstreamDeclaration) => guardedUpstreamFetch({ who: `upstream "${decl.name}" of tenant "${tenant}"`, allowedAddresses: options.allowedAddresses });
    const pool = createUpstreamPool({
      connect: { secrets: options.secrets, workDir: join(tmpdir(), "chaos-core-tenant-upstreams"), version: options.version },
      logger: log.child({ tenant }),
      drift,
      perTenant: true,
      ...(options.maxResultBytes !== undefined ? { maxResultBytes: options.maxResultBytes } : {}),
      ...(options.tokenMaxSeconds !== undefined ? { tokenMaxSeconds: options.tokenMaxSeconds } : {}),
      // Only through the guarded fetch: every request and redirect resolved and vetted, an OAuth issuer's too.
      open: (decl, connect, hooks) => connectUpstream(decl, { ...connect, fetch: fetchOf(decl) }, hooks),
      tokenFetch: fetchOf,
      ...(board ? { board } : {}),
    });
    const { capabilities } = upstreamCapabilities(
      own.map((d) => confined(d, tenant)),
      pins,
      pool,
      drift,
    );
    // A tenant with none is the common case: said at debug level only.
    log[own.length > 0 ? "info" : "debug"]({ tenant, generation: Number(generation), upstreams: own.map((d) => d.name), tools: capabilities.length }, "tenant registry upstreams read");
    return { generation, at: now(), source, capabilities, pool };
  };

  // Shared by the tenant's calls waiting on it, so no one caller's cancellation ends it.
  const read = async (call: CallContext): Promise<Served> => {
    const tenant = call.tenant;
    const answer = await options.directory.listTenantUpstreams({}, { ctx: call, signal: AbortSignal.timeout(10_000) });
    const cached = served.get(tenant);
    const entries = answer.upstreams.map((u): RegistryUpstreamEntry => ({ declaration: u.declaration as Record<string, unknown> | undefined, pin: u.pin }));
    const source = JSON.stringify(entries);
    if (cached && cached.source === source) {
      const kept = { ...cached, generation: answer.generation, at: now() };
      served.set(tenant, kept);
      return kept;
    }
    // A tenant with upstreams shares its quarantines with the other replicas (read before it serves any).
    const board = entries.length > 0 ? await options.boards?.board(`tenant:${tenant}`) : undefined;
    const built = build(tenant, answer.generation, source, entries, board);
    served.set(tenant, built);
    if (cached) retire(cached.pool);
    return built;
  };

  return {
    async forCall(call) {
      const tenant = call.tenant;
      const cached = served.get(tenant);
      if (cached && now() - cached.at < maxAgeMs) {
        // The generation the edge read admitting this request, signed in its context, when it
        // carries one (no second read of the same key); else read here, as for cognition's own calls.
        const published = call.tenantGeneration ?? (await publishedGeneration(options.generations, tenant, log));
        if (published !== undefined && BigInt(published) === cached.generation) return { capabilities: cached.capabilities };
      }
      let pending = reading.get(tenant);
      if (!pending) {
        pending = read(call).finally(() => reading.delete(tenant));
        reading.set(tenant, pending);
      }
      try {
        return { capabilities: (await pending).capabilities };
      } catch (err) {
        const e = ChaosError.from(err);
        log.warn({ tenant, err: e.message }, "tenant registry upstreams could not be read; none of them is offered");
        return {
          capabilities: [],
          unavailable: new ChaosError("unavailable", `the tenant registry could not be read for tenant "${tenant}", so its own upstreams are not offered now: ${e.message}`, { cause: err }),
        };
      }
    },
    breakers: () => [...served.values()].flatMap((s) => s.pool.breakers()),
    settled: async () => void (await Promise.all(recordings.map((r) => r.settled()))),
    async close() {
      const pools = [...[...served.values()].map((s) => s.pool), ...retiring];
      served.clear();
      retiring.clear();
      drifts.clear();
      await Promise.all(pools.map((p) => p.close()));
    },
  };
}
