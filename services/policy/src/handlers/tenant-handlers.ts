import { timestampDate, timestampFromDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { JsonObject } from "@bufbuild/protobuf";
import { ChaosError, type ServiceImpl } from "@chaos-core/kit";
import type { TenantAdminService, TenantSettings as TenantSettingsProto } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import { KeyStatus, TenantStatus, type TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import {
  keyStatus,
  type ApiKeyRecord,
  type KeyStatus as KeyStatusName,
  type TenantRecord,
  type TenantRegistry,
  type TenantSettings,
  type TenantStatus as TenantStatusName,
} from "../domain/tenants.js";
import { createUpstreamAdminHandlers, createUpstreamDirectoryHandlers, type UpstreamAdminOptions } from "./upstream-handlers.js";

const TENANT_STATUS: Record<TenantStatusName, TenantStatus> = {
  enabled: TenantStatus.ENABLED,
  disabled: TenantStatus.DISABLED,
  deleted: TenantStatus.DELETED,
};

const KEY_STATUS: Record<KeyStatusName, KeyStatus> = {
  active: KeyStatus.ACTIVE,
  revoked: KeyStatus.REVOKED,
  expired: KeyStatus.EXPIRED,
};

const ts = (d: Date | undefined) => (d ? timestampFromDate(d) : undefined);

function settingsToProto(s: TenantSettings) {
  return {
    councilRetentionDays: s.councilRetentionDays,
    memoryRetentionDays: s.memoryRetentionDays,
    toolsets: [...s.toolsets],
    ...(s.rateLimits ? { rateLimits: s.rateLimits as JsonObject } : {}),
    ...(s.ledgerPolicy ? { ledgerPolicy: s.ledgerPolicy as JsonObject } : {}),
  };
}

function settingsFromProto(s: TenantSettingsProto | undefined): TenantSettings | undefined {
  if (!s) return undefined;
  // Checked with the rest of the settings (checkSettings), naming the field.
  return {
    councilRetentionDays: s.councilRetentionDays,
    memoryRetentionDays: s.memoryRetentionDays,
    toolsets: [...s.toolsets],
    ...(s.rateLimits ? { rateLimits: s.rateLimits as TenantSettings["rateLimits"] } : {}),
    ...(s.ledgerPolicy ? { ledgerPolicy: s.ledgerPolicy as TenantSettings["ledgerPolicy"] } : {}),
  };
}

function tenantToProto(t: TenantRecord) {
  return {
    id: t.id,
    displayName: t.displayName,
    status: TENANT_STATUS[t.status],
    settings: settingsToProto(t.settings),
    generation: BigInt(t.generation),
    createdAt: ts(t.createdAt),
    updatedAt: ts(t.updatedAt),
  };
}

function keyToProto(k: ApiKeyRecord) {
  return {
    keyId: k.keyId,
    tenant: k.tenant,
    principal: k.principal,
    roles: [...k.roles],
    status: KEY_STATUS[keyStatus(k)],
    createdAt: ts(k.createdAt),
    expiresAt: ts(k.expiresAt),
    revokedAt: ts(k.revokedAt),
    lastUsedAt: ts(k.lastUsedAt),
  };
}

/**
 * TenantDirectoryService: what the edge asks on a request it cannot answer from its cache. The
 * key's digest names its tenant; GetTenantState answers for the context's tenant only.
 */
export function createTenantDirectoryHandlers(registry: TenantRegistry): ServiceImpl<typeof TenantDirectoryService> {
  return {
    async resolveApiKey(req) {
      const resolved = await registry.resolveKey(req.sha256);
      if (!resolved) return { found: false };
      return {
        found: true,
        keyId: resolved.key.keyId,
        tenant: resolved.key.tenant,
        principal: resolved.key.principal,
        roles: [...resolved.key.roles],
        keyStatus: KEY_STATUS[resolved.status],
        tenantStatus: TENANT_STATUS[resolved.tenantStatus],
        generation: BigInt(resolved.generation),
        expiresAt: ts(resolved.key.expiresAt),
      };
    },

    ...createUpstreamDirectoryHandlers(registry),

    async getTenantState(_req, ctx) {
      const state = await registry.tenantState(ctx.call.tenant);
      return {
        registered: state.registered,
        status: TENANT_STATUS[state.status],
        generation: BigInt(state.generation),
        toolsets: [...state.toolsets],
        ...(state.rateLimits ? { rateLimits: state.rateLimits as JsonObject } : {}),
        ...(state.ledgerPolicy ? { ledgerPolicy: state.ledgerPolicy as JsonObject } : {}),
      };
    },
  };
}

/** The only principal the admin API answers: the operator's tooling signs for it. */
const OPERATOR = "operator";

/**
 * TenantAdminService: the operator's administration of tenants, keys and tenants' upstreams
 * (`upstreams`: what checks an upstream when it is added). The tenant a call acts on is a field
 * of the request (the operator administers every tenant); the call context must be the operator's.
 */
export function createTenantAdminHandlers(registry: TenantRegistry, upstreams: UpstreamAdminOptions = {}): ServiceImpl<typeof TenantAdminService> {
  const asOperator = (principal: string) => {
    if (principal !== OPERATOR) throw new ChaosError("permission_denied", `the tenant admin API answers only the operator, not "${principal}"`);
  };
  const need = (field: string, value: string, what: string) => {
    if (value === "") throw new ChaosError("invalid_argument", `${field}: required; pass ${what}`);
  };
  const status = (s: TenantStatus): "enabled" | "disabled" => {
    if (s === TenantStatus.ENABLED) return "enabled";
    if (s === TenantStatus.DISABLED) return "disabled";
    throw new ChaosError("invalid_argument", "status: must be ENABLED or DISABLED (deleting is MarkTenantDeleted)");
  };
  return {
    ...createUpstreamAdminHandlers(registry, asOperator, upstreams),
    async createTenant(req, ctx) {
      asOperator(ctx.call.principal);
      need("id", req.id, "the tenant id");
      const settings = settingsFromProto(req.settings);
      return { tenant: tenantToProto(await registry.createTenant({ id: req.id, displayName: req.displayName, ...(settings ? { settings } : {}) })) };
    },
    async listTenants(_req, ctx) {
      asOperator(ctx.call.principal);
      return { tenants: (await registry.listTenants()).map(tenantToProto) };
    },
    async getTenant(req, ctx) {
      asOperator(ctx.call.principal);
      need("id", req.id, "the tenant id");
      const tenant = await registry.getTenant(req.id);
      if (!tenant) throw new ChaosError("not_found", `tenant "${req.id}" is not registered`);
      const activeKeys = (await registry.listKeys(req.id)).filter((k) => keyStatus(k) === "active").length;
      return { tenant: tenantToProto(tenant), activeKeys };
    },
    async setTenantStatus(req, ctx) {
      asOperator(ctx.call.principal);
      need("id", req.id, "the tenant id");
      return { tenant: tenantToProto(await registry.setStatus(req.id, status(req.status))) };
    },
    async updateTenantSettings(req, ctx) {
      asOperator(ctx.call.principal);
      need("id", req.id, "the tenant id");
      const settings = settingsFromProto(req.settings);
      if (!settings) throw new ChaosError("invalid_argument", "settings: required");
      return { tenant: tenantToProto(await registry.updateSettings(req.id, settings)) };
    },
    async markTenantDeleted(req, ctx) {
      asOperator(ctx.call.principal);
      need("id", req.id, "the tenant id");
      const { tenant, revokedKeys } = await registry.markDeleted(req.id);
      return { tenant: tenantToProto(tenant), revokedKeys };
    },
    async createApiKey(req, ctx) {
      asOperator(ctx.call.principal);
      need("tenant", req.tenant, "the tenant the key is for");
      const expiresAt = req.expiresAt ? timestampDate(req.expiresAt as Timestamp) : undefined;
      const { key, secret } = await registry.createKey({ tenant: req.tenant, principal: req.principal, roles: req.roles, ...(expiresAt ? { expiresAt } : {}) });
      return { key: keyToProto(key), secret };
    },
    async listApiKeys(req, ctx) {
      asOperator(ctx.call.principal);
      need("tenant", req.tenant, "the tenant");
      return { keys: (await registry.listKeys(req.tenant)).map(keyToProto) };
    },
    async revokeApiKey(req, ctx) {
      asOperator(ctx.call.principal);
      need("tenant", req.tenant, "the tenant");
      need("key_id", req.keyId, "the key id (the 8 characters after cc_)");
      return { key: keyToProto(await registry.revokeKey(req.tenant, req.keyId)) };
    },
  };
}
