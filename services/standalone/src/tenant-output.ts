import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { DEFAULT_TOOLSETS } from "@chaos-core/kit";
import type { ApiKey, Tenant } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import { KeyStatus, TenantStatus } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";

// Tenants and keys as `chaos-core tenants` and `keys` print them: a line each, or JSON.

const STATUS_NAME: Record<number, string> = {
  [TenantStatus.ENABLED]: "enabled",
  [TenantStatus.DISABLED]: "disabled",
  [TenantStatus.DELETED]: "deleted",
};
const KEY_STATUS_NAME: Record<number, string> = { [KeyStatus.ACTIVE]: "active", [KeyStatus.REVOKED]: "revoked", [KeyStatus.EXPIRED]: "expired" };
const iso = (t: Timestamp | undefined) => (t ? timestampDate(t).toISOString() : null);

/** A tenant as `--json` prints it. */
export function tenantJson(t: Tenant) {
  return {
    id: t.id,
    display_name: t.displayName,
    status: STATUS_NAME[t.status] ?? "unknown",
    settings: {
      memory_retention_days: t.settings?.memoryRetentionDays ?? 0,
      council_retention_days: t.settings?.councilRetentionDays ?? 0,
      toolsets: [...(t.settings?.toolsets ?? [])],
      rate_limits: t.settings?.rateLimits ?? null,
      ledger_policy: t.settings?.ledgerPolicy ?? null,
    },
    generation: Number(t.generation),
    created_at: iso(t.createdAt),
    updated_at: iso(t.updatedAt),
  };
}

/** A key as `--json` prints it (never the key itself). */
export function keyJson(k: ApiKey) {
  return {
    key_id: k.keyId,
    prefix: `cc_${k.keyId}_`,
    tenant: k.tenant,
    principal: k.principal,
    roles: [...k.roles],
    status: KEY_STATUS_NAME[k.status] ?? "unknown",
    created_at: iso(k.createdAt),
    expires_at: iso(k.expiresAt),
    revoked_at: iso(k.revokedAt),
    last_used_at: iso(k.lastUsedAt),
  };
}

export function tenantLine(t: ReturnType<typeof tenantJson>): string {
  const s = t.settings;
  const retention = `memory ${s.memory_retention_days || "∞"}d, council ${s.council_retention_days || "∞"}d`;
  const toolsets = s.toolsets.length > 0 ? s.toolsets.join(",") : `default toolsets (${DEFAULT_TOOLSETS.join(",")})`;
  return `${t.id}\t${t.status}\t${t.display_name || "-"}\t${retention}\t${toolsets}\n`;
}

export function keyLine(k: ReturnType<typeof keyJson>): string {
  return `${k.prefix}\t${k.principal}\t${k.roles.join(",") || "-"}\t${k.status}\tcreated ${k.created_at}\texpires ${k.expires_at ?? "never"}\tlast used ${k.last_used_at ?? "never"}\n`;
}
