import {
  assertTenantId,
  ChaosError,
  parseLedgerPolicySection,
  parseTenantLimits,
  principalProblem,
  rolesProblem,
  type LedgerPolicySection,
  type TenantLimits,
  TOOLSET_NAMES,
} from "@chaos-core/kit";
import { unregisteredUpstreams, type TenantUpstreamRegistry } from "./tenant-upstreams.js";

/** Whether a tenant is served. `deleted`: its data was removed; it is never served again. */
export type TenantStatus = "enabled" | "disabled" | "deleted";

/** Toolsets a tenant may have enabled (DESIGN.md, "The MCP surface"). */
export const TOOLSETS = TOOLSET_NAMES;

/** Per-tenant choices of the operator. Zero retention keeps data for ever. */
export interface TenantSettings {
  readonly councilRetentionDays: number;
  readonly memoryRetentionDays: number;
  /** Empty: the default toolsets (kit's `DEFAULT_TOOLSETS`: all but finance-reference). */
  readonly toolsets: readonly string[];
  /** The tenant's rate limits (the rate limits file's shape for one tenant); unset: the file's. */
  readonly rateLimits?: TenantLimits;
  /**
   * The tenant's spend policies and tool-approval policy, which the ledger enforces (one tenant's
   * section of the ledger policy file); each key set wins over the file's. Unset: the file's.
   */
  readonly ledgerPolicy?: LedgerPolicySection;
}

export const DEFAULT_TENANT_SETTINGS: TenantSettings = Object.freeze({ councilRetentionDays: 0, memoryRetentionDays: 0, toolsets: [] });

/** A registered tenant. */
export interface TenantRecord {
  readonly id: string;
  readonly displayName: string;
  readonly status: TenantStatus;
  readonly settings: TenantSettings;
  /** Grows with every change to the tenant or its keys (docs/tenants.md, "Revocation"). */
  readonly generation: number;
  readonly createdAt: Date;
  readonly updatedAt: Date;
}

/** An operator-issued API key as the registry keeps it: never the key, only its SHA-256. */
export interface ApiKeyRecord {
  readonly keyId: string;
  readonly tenant: string;
  readonly principal: string;
  /** Role names (kit `roles.ts`): `approver`, or any the operator names for its exposure rules. */
  readonly roles: readonly string[];
  readonly createdAt: Date;
  readonly expiresAt?: Date;
  readonly revokedAt?: Date;
  readonly lastUsedAt?: Date;
}

export type KeyStatus = "active" | "revoked" | "expired";

/** A key's status at `now`: revoked wins over expired. */
export function keyStatus(key: Pick<ApiKeyRecord, "expiresAt" | "revokedAt">, now = new Date()): KeyStatus {
  if (key.revokedAt) return "revoked";
  if (key.expiresAt && key.expiresAt.getTime() <= now.getTime()) return "expired";
  return "active";
}

/** What the edge learns from a key's digest. */
export interface ResolvedKey {
  readonly key: ApiKeyRecord;
  readonly status: KeyStatus;
  readonly tenantStatus: TenantStatus;
  readonly generation: number;
}

/** Whether the tenant may be served, as the edge asks on a request it cannot answer from its cache. */
export interface TenantState {
  readonly registered: boolean;
  readonly status: TenantStatus;
  readonly generation: number;
  /** The toolsets its clients see; empty: the default toolsets (all but finance-reference). */
  readonly toolsets: readonly string[];
  /** Its rate limits in the registry, when it holds some. */
  readonly rateLimits?: TenantLimits;
  /** Its ledger policy in the registry, when it holds one. */
  readonly ledgerPolicy?: LedgerPolicySection;
}

/**
 * The tenant registry: tenants, their settings, their API keys (docs/tenants.md) and their own
 * upstreams (docs/federation.md §12). Every change raises the tenant's generation and publishes
 * it before it commits.
 */
export interface TenantRegistry extends TenantUpstreamRegistry {
  createTenant(input: { id: string; displayName?: string; settings?: Partial<TenantSettings> }): Promise<TenantRecord>;
  listTenants(): Promise<TenantRecord[]>;
  getTenant(id: string): Promise<TenantRecord | undefined>;
  setStatus(id: string, status: "enabled" | "disabled"): Promise<TenantRecord>;
  updateSettings(id: string, settings: TenantSettings): Promise<TenantRecord>;
  /** Marks the tenant deleted, revokes its keys and removes its upstreams; returns how many keys were revoked. */
  markDeleted(id: string): Promise<{ tenant: TenantRecord; revokedKeys: number }>;
  createKey(input: { tenant: string; principal: string; roles?: readonly string[]; expiresAt?: Date }): Promise<{ key: ApiKeyRecord; secret: string }>;
  listKeys(tenant: string): Promise<ApiKeyRecord[]>;
  revokeKey(tenant: string, keyId: string): Promise<ApiKeyRecord>;
  /** The key with this SHA-256 (lowercase hex) in any tenant; refreshes its last-used time. */
  resolveKey(sha256: string): Promise<ResolvedKey | undefined>;
  tenantState(tenant: string): Promise<TenantState>;
}

/** Throws `invalid_argument` naming `field`. */
function invalid(field: string, problem: string): never {
  throw new ChaosError("invalid_argument", `${field}: ${problem}`);
}

/** Checks a tenant id, naming the field. */
export function checkTenantId(id: string, field = "id"): void {
  try {
    assertTenantId(id);
  } catch (err) {
    invalid(field, id === "" ? "required; pass the tenant id" : (err as Error).message);
  }
}

/** Checks and normalises settings, naming each field; missing fields take the defaults. */
export function checkSettings(settings: Partial<TenantSettings> | undefined, field = "settings"): TenantSettings {
  const s = { ...DEFAULT_TENANT_SETTINGS, ...settings };
  for (const name of ["councilRetentionDays", "memoryRetentionDays"] as const) {
    const v = s[name];
    if (!Number.isInteger(v) || v < 0 || v > 36_500) invalid(`${field}.${name}`, "must be a whole number of days from 0 (keep) to 36500");
  }
  const seen = new Set<string>();
  s.toolsets.forEach((t, i) => {
    if (!(TOOLSETS as readonly string[]).includes(t)) invalid(`${field}.toolsets[${i}]`, `"${t}" is not a toolset; use ${TOOLSETS.join(", ")}`);
    if (seen.has(t)) invalid(`${field}.toolsets[${i}]`, `"${t}" is listed twice`);
    seen.add(t);
  });
  const rateLimits = s.rateLimits === undefined ? undefined : parseTenantLimits(s.rateLimits, `${field}.rateLimits`);
  let ledgerPolicy: LedgerPolicySection | undefined;
  if (s.ledgerPolicy !== undefined) {
    const parsed = parseLedgerPolicySection(s.ledgerPolicy, `${field}.ledgerPolicy`);
    if (!parsed.ok) throw new ChaosError("invalid_argument", parsed.problem);
    ledgerPolicy = parsed.section;
  }
  return {
    councilRetentionDays: s.councilRetentionDays,
    memoryRetentionDays: s.memoryRetentionDays,
    toolsets: [...s.toolsets],
    ...(rateLimits ? { rateLimits } : {}),
    ...(ledgerPolicy ? { ledgerPolicy } : {}),
  };
}

/** Checks a new key's principal and roles, naming the field. */
export function checkKeyInput(input: { principal: string; roles?: readonly string[]; expiresAt?: Date }, now = new Date()): string[] {
  const p = principalProblem(input.principal);
  if (p) invalid("principal", input.principal === "" ? "required; pass who the key is for" : p);
  const roles = [...(input.roles ?? [])];
  const problem = rolesProblem(roles);
  if (problem) invalid(problem.index === undefined ? "roles" : `roles[${problem.index}]`, problem.problem);
  if (input.expiresAt && input.expiresAt.getTime() <= now.getTime()) invalid("expires_at", "must be in the future");
  return roles.sort();
}

/**
 * The registry of a policy service without a database (the `policy.json` file store of a
 * development run): no tenant is registered, every tenant is served, and administration says
 * what it needs.
 */
export function unregisteredTenants(): TenantRegistry {
  const needsDatabase = async (): Promise<never> => {
    throw new ChaosError("failed_precondition", "the tenant registry needs a database: start the policy service with DATABASE_URL");
  };
  return {
    createTenant: needsDatabase,
    listTenants: async () => [],
    getTenant: async () => undefined,
    setStatus: needsDatabase,
    updateSettings: needsDatabase,
    markDeleted: needsDatabase,
    createKey: needsDatabase,
    listKeys: async () => [],
    revokeKey: needsDatabase,
    resolveKey: async () => undefined,
    tenantState: async () => ({ registered: false, status: "enabled", generation: 0, toolsets: [] }),
    ...unregisteredUpstreams(),
  };
}
