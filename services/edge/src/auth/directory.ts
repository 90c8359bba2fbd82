import {
  ChaosError,
  hashApiKey,
  issuedKeyId,
  rolesProblem,
  parseTenantLimits,
  publishedGeneration,
  type CallContext,
  type Logger,
  type ServiceClient,
  type TenantGenerations,
  type TenantLimits,
} from "@chaos-core/kit";
import { KeyStatus, TenantStatus, type TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import type { Identity } from "./identity.js";

/** The typed client of the policy service's tenant directory, whatever transport is under it. */
export type TenantDirectoryClient = ServiceClient<typeof TenantDirectoryService>;

/** Why a credential that was recognised is refused (its message says it to the caller). */
export type CredentialRefusal =
  | { readonly kind: "key_revoked" | "key_expired"; readonly message: string }
  | { readonly kind: "tenant_disabled" | "tenant_deleted"; readonly message: string };

/** What the directory says about a presented key. */
export type KeyAnswer =
  | { readonly kind: "identity"; readonly identity: Identity; readonly keyId: string }
  | { readonly kind: "refused"; readonly refusal: CredentialRefusal }
  | { readonly kind: "unknown" };

/**
 * The edge's view of the tenant registry (docs/tenants.md): operator-issued keys and tenant
 * status, cached per replica and re-read whenever the tenant's generation moved, so a revoked
 * key or a disabled tenant is refused on the very next request on every replica.
 */
export interface CredentialDirectory {
  /** An operator-issued key (`cc_<id>_…`); any other string is `unknown` without a lookup. */
  resolveKey(key: string): Promise<KeyAnswer>;
  /**
   * The registry key with this SHA-256 (lowercase hex): how a console session, which keeps only
   * the digest, re-reads its key on every request.
   */
  resolveDigest(sha256: string): Promise<KeyAnswer>;
  /** Whether `tenant` may be served; a refusal when it is disabled or deleted. */
  tenantRefusal(tenant: string): Promise<CredentialRefusal | undefined>;
  /**
   * The toolsets the tenant's clients see, as {@link tenantRefusal} last read them (every request
   * reads them before anything is served); undefined or empty: the default toolsets.
   */
  enabledToolsets(tenant: string): readonly string[] | undefined;
  /** The tenant's rate limits in the registry, as {@link tenantRefusal} last read them; undefined: none there. */
  tenantLimits(tenant: string): TenantLimits | undefined;
  /**
   * The tenant's generation as {@link tenantRefusal} last read or confirmed it (every request
   * reads it before anything is served): what the edge signs into the call context
   * (`CallContext.tenantGeneration`), so cognition need not read it again. Undefined: not read here.
   */
  tenantGeneration(tenant: string): number | undefined;
  /**
   * Whether credentials already admitted are still in force: the tenant's status and each of its
   * registry keys (by SHA-256) as {@link tenantRefusal} and {@link resolveDigest} answer them now,
   * with the tenant's published generation read once for them all — while nothing changed, one
   * Redis `GET` for the tenant, whatever the number of keys. What the edge re-checks the
   * credentials behind open streams with (transport/credential-watch.ts).
   */
  recheck(tenant: string, digests: readonly string[]): Promise<Recheck>;
}

/** What {@link CredentialDirectory.recheck} found no longer in force. */
export interface Recheck {
  /** Why the tenant is no longer served; undefined while it is. */
  readonly tenant: CredentialRefusal | undefined;
  /** The keys refused now, by SHA-256 (a key the registry no longer knows, or of another tenant, counts as revoked). */
  readonly keys: ReadonlyMap<string, CredentialRefusal>;
}

export interface CredentialDirectoryOptions {
  readonly client: TenantDirectoryClient;
  /**
   * Where the policy service publishes generations: Redis across replicas, the process's own in
   * the standalone. Without it nothing is cached and every request asks the policy service.
   */
  readonly generations?: TenantGenerations;
  readonly logger: Logger;
  /** Longest a cached answer is used even while the generation holds (default 60 s): bounds the last-used time's lag. */
  readonly maxAgeMs?: number;
  /** How long "no such key" is remembered, so a flood of made-up keys does not reach the database (default 10 s). */
  readonly unknownTtlMs?: number;
  /** Most answers cached (default 10 000); the oldest go first. */
  readonly maxEntries?: number;
  /**
   * Told when a tenant is read again and its generation moved since the last read (a change to
   * the tenant, its keys or its own upstreams): the edge reads the tenant's upstream tools again.
   */
  readonly onTenantChange?: (tenant: string) => void;
}

/** The context of a directory lookup: the key names the tenant, so the call is the edge's own. */
const LOOKUP_CONTEXT: CallContext = Object.freeze({ tenant: "default", principal: "chaos-core-edge" });

interface Cached<T> {
  readonly value: T;
  readonly tenant: string | undefined;
  readonly generation: number;
  readonly at: number;
}

/** A bounded map that forgets its oldest entries first (insertion order). */
class Bounded<T> {
  private readonly map = new Map<string, Cached<T>>();
  constructor(private readonly max: number) {}
  get(k: string) {
    return this.map.get(k);
  }
  set(k: string, v: Cached<T>) {
    this.map.delete(k);
    this.map.set(k, v);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value!);
  }
}

function tenantRefusal(tenant: string, status: TenantStatus): CredentialRefusal | undefined {
  if (status === TenantStatus.DISABLED) {
    return { kind: "tenant_disabled", message: `tenant "${tenant}" is disabled by its operator; no call is served until it is enabled again` };
  }
  if (status === TenantStatus.DELETED) return { kind: "tenant_deleted", message: `tenant "${tenant}" was deleted; its calls are no longer served` };
  return undefined;
}

/** See {@link CredentialDirectory}. */
export function createCredentialDirectory(options: CredentialDirectoryOptions): CredentialDirectory {
  const { client, generations, logger } = options;
  const maxAgeMs = options.maxAgeMs ?? 60_000;
  const unknownTtlMs = options.unknownTtlMs ?? 10_000;
  const keys = new Bounded<KeyAnswer>(options.maxEntries ?? 10_000);
  const tenants = new Bounded<{ readonly refusal: CredentialRefusal | undefined; readonly toolsets: readonly string[]; readonly limits?: TenantLimits }>(
    options.maxEntries ?? 10_000,
  );

  /** The published generation, undefined when none can be read (then nothing cached is used: the policy service is asked). */
  const published = (tenant: string) => publishedGeneration(generations, tenant, logger);

  /** Where a lookup reads the published generation: {@link published}, or a recheck's one read per tenant. */
  type GenerationOf = (tenant: string) => Promise<number | undefined>;

  async function fresh<T>(entry: Cached<T> | undefined, now: number, generationOf: GenerationOf): Promise<boolean> {
    if (!entry) return false;
    if (entry.tenant === undefined) return now - entry.at < unknownTtlMs;
    if (now - entry.at >= maxAgeMs) return false;
    return (await generationOf(entry.tenant)) === entry.generation;
  }

  async function resolveDigest(sha256: string, generationOf: GenerationOf): Promise<KeyAnswer> {
    if (!/^[0-9a-f]{64}$/.test(sha256)) return { kind: "unknown" };
    const now = performance.now();
    const cached = keys.get(sha256);
    if (await fresh(cached, now, generationOf)) return cached!.value;
    const r = await client.resolveApiKey({ sha256 }, { ctx: LOOKUP_CONTEXT });
    if (!r.found) {
      keys.set(sha256, { value: { kind: "unknown" }, tenant: undefined, generation: 0, at: now });
      return { kind: "unknown" };
    }
    let answer: KeyAnswer;
    const refused = tenantRefusal(r.tenant, r.tenantStatus);
    if (refused) answer = { kind: "refused", refusal: refused };
    else if (r.keyStatus === KeyStatus.REVOKED) answer = { kind: "refused", refusal: { kind: "key_revoked", message: `the API key cc_${r.keyId} was revoked` } };
    else if (r.keyStatus === KeyStatus.EXPIRED) answer = { kind: "refused", refusal: { kind: "key_expired", message: `the API key cc_${r.keyId} has expired` } };
    else if (r.keyStatus !== KeyStatus.ACTIVE) throw new ChaosError("internal", "the tenant directory answered an unknown key status");
    else {
      // The registry checked the roles when it stored them; roles that no longer pass are none, said in the log.
      const problem = rolesProblem(r.roles);
      if (problem) logger.error({ keyId: r.keyId, problem: problem.problem }, "the tenant registry holds roles for a key the edge cannot read; the key holds none here");
      const roles = problem ? [] : [...r.roles].sort();
      answer = { kind: "identity", keyId: r.keyId, identity: Object.freeze({ tenant: r.tenant, principal: r.principal, roles: Object.freeze(roles) }) };
    }
    // An expiring key is not cached past its expiry.
    const expiresIn = r.expiresAt ? Number(r.expiresAt.seconds) * 1000 + r.expiresAt.nanos / 1e6 - Date.now() : Infinity;
    if (expiresIn > maxAgeMs) keys.set(sha256, { value: answer, tenant: r.tenant, generation: Number(r.generation), at: now });
    return answer;
  }

  async function tenantRefusalOf(tenant: string, generationOf: GenerationOf): Promise<CredentialRefusal | undefined> {
    const now = performance.now();
    const cached = tenants.get(tenant);
    if (await fresh(cached, now, generationOf)) return cached!.value.refusal;
    const r = await client.getTenantState({}, { ctx: { tenant, principal: "chaos-core-edge" } });
    const refusal = tenantRefusal(tenant, r.status);
    // The registry checked the limits when they were stored; a document that no longer parses is no limit here, said in the log.
    let limits: TenantLimits | undefined;
    if (r.rateLimits) {
      try {
        limits = parseTenantLimits(r.rateLimits, `the registry's rate limits of tenant "${tenant}"`);
      } catch (err) {
        logger.error({ tenant, err: (err as Error).message }, "the tenant registry holds rate limits the edge cannot read; the rate limits file's apply");
      }
    }
    tenants.set(tenant, { value: { refusal, toolsets: Object.freeze([...r.toolsets]), ...(limits ? { limits } : {}) }, tenant, generation: Number(r.generation), at: now });
    if (cached && cached.generation !== Number(r.generation)) options.onTenantChange?.(tenant);
    return refusal;
  }

  const directory: CredentialDirectory = {
    async resolveKey(key) {
      if (issuedKeyId(key) === undefined) return { kind: "unknown" };
      return resolveDigest(hashApiKey(key), published);
    },

    resolveDigest: (sha256) => resolveDigest(sha256, published),

    tenantRefusal: (tenant) => tenantRefusalOf(tenant, published),

    async recheck(tenant, digests) {
      const read = new Map<string, Promise<number | undefined>>();
      const once: GenerationOf = (t) => {
        let generation = read.get(t);
        if (!generation) read.set(t, (generation = published(t)));
        return generation;
      };
      const refused = new Map<string, CredentialRefusal>();
      for (const sha256 of digests) {
        const answer = await resolveDigest(sha256, once);
        if (answer.kind === "refused") refused.set(sha256, answer.refusal);
        else if (answer.kind === "unknown" || answer.identity.tenant !== tenant) {
          refused.set(sha256, { kind: "key_revoked", message: "the API key is no longer known to the tenant registry" });
        }
      }
      return { tenant: await tenantRefusalOf(tenant, once), keys: refused };
    },

    enabledToolsets(tenant) {
      return tenants.get(tenant)?.value.toolsets;
    },

    tenantLimits(tenant) {
      return tenants.get(tenant)?.value.limits;
    },

    tenantGeneration(tenant) {
      return tenants.get(tenant)?.generation;
    },
  };
  return directory;
}
