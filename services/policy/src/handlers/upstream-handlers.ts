import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { JsonObject } from "@bufbuild/protobuf";
import { ChaosError, type ServiceImpl } from "@chaos-core/kit";
import { UpstreamStatus, type TenantAdminService } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import type { TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { createUpstreamUrlCheck, type UpstreamUrlCheck } from "../adapters/upstream-address.js";
import { checkPin, checkTenantUpstreamDeclaration, checkUpstreamName, declarationJson, type TenantUpstreamRecord, type TenantUpstreamStatus } from "../domain/tenant-upstreams.js";
import type { TenantRegistry } from "../domain/tenants.js";

/** What the admin API needs besides the registry to check a tenant's upstream when it is added. */
export interface UpstreamAdminOptions {
  /** The names the operator's upstreams file declares now: a tenant's upstream may not shadow one. None when unset. */
  readonly operatorUpstreams?: () => readonly string[] | Promise<readonly string[]>;
  /** The URL's address check; `http.request`'s rules with no allowed range when unset. */
  readonly checkUrl?: UpstreamUrlCheck;
}

const STATUS: Record<TenantUpstreamStatus, UpstreamStatus> = { enabled: UpstreamStatus.ENABLED, disabled: UpstreamStatus.DISABLED };

function upstreamToProto(u: TenantUpstreamRecord) {
  return {
    tenant: u.tenant,
    name: u.declaration.name,
    declaration: declarationJson(u.declaration) as JsonObject,
    status: STATUS[u.status],
    pinnedTools: u.pinnedTools,
    createdAt: timestampFromDate(u.createdAt),
    updatedAt: timestampFromDate(u.updatedAt),
    pinnedAt: timestampFromDate(u.pinnedAt),
  };
}

type UpstreamAdminMethods = Pick<ServiceImpl<typeof TenantAdminService>, "addUpstream" | "listUpstreams" | "getUpstream" | "removeUpstream" | "setUpstreamStatus" | "repinUpstream">;

/**
 * The upstream RPCs of TenantAdminService (docs/federation.md §12), authorized exactly as the
 * tenant and key RPCs are (`asOperator`): a tenant's own upstreams and their pins. AddUpstream
 * checks the declaration (kit's schema, HTTP only, no shadowing of the operator's file), the pin
 * (an `upstreams.lock` entry whose digests match) and the URL's addresses, in that order, before
 * anything is stored. RepinUpstream checks the name as AddUpstream does (not the operator's) and
 * the new pin, and replaces the stored one only while it is the pin the caller read.
 */
export function createUpstreamAdminHandlers(registry: TenantRegistry, asOperator: (principal: string) => void, options: UpstreamAdminOptions = {}): UpstreamAdminMethods {
  const checkUrl = options.checkUrl ?? createUpstreamUrlCheck();
  const need = (field: string, value: string, what: string) => {
    if (value === "") throw new ChaosError("invalid_argument", `${field}: required; pass ${what}`);
  };
  const status = (s: UpstreamStatus): TenantUpstreamStatus => {
    if (s === UpstreamStatus.ENABLED) return "enabled";
    if (s === UpstreamStatus.DISABLED) return "disabled";
    throw new ChaosError("invalid_argument", "status: must be ENABLED or DISABLED");
  };
  return {
    async addUpstream(req, ctx) {
      asOperator(ctx.call.principal);
      need("tenant", req.tenant, "the tenant the upstream is for");
      const declaration = checkTenantUpstreamDeclaration(req.declaration, (await options.operatorUpstreams?.()) ?? []);
      const pin = checkPin(declaration.name, req.pin);
      await checkUrl(declaration.url);
      return { upstream: upstreamToProto(await registry.addUpstream(req.tenant, declaration, pin)) };
    },
    async listUpstreams(req, ctx) {
      asOperator(ctx.call.principal);
      need("tenant", req.tenant, "the tenant");
      return { upstreams: (await registry.listUpstreams(req.tenant)).map(upstreamToProto) };
    },
    async getUpstream(req, ctx) {
      asOperator(ctx.call.principal);
      need("tenant", req.tenant, "the tenant");
      checkUpstreamName(req.name);
      const found = await registry.getUpstream(req.tenant, req.name);
      if (!found) throw new ChaosError("not_found", `tenant "${req.tenant}" has no upstream "${req.name}"`);
      return { upstream: upstreamToProto(found), pin: found.pin };
    },
    async removeUpstream(req, ctx) {
      asOperator(ctx.call.principal);
      need("tenant", req.tenant, "the tenant");
      return { upstream: upstreamToProto(await registry.removeUpstream(req.tenant, req.name)) };
    },
    async setUpstreamStatus(req, ctx) {
      asOperator(ctx.call.principal);
      need("tenant", req.tenant, "the tenant");
      return { upstream: upstreamToProto(await registry.setUpstreamStatus(req.tenant, req.name, status(req.status))) };
    },
    async repinUpstream(req, ctx) {
      asOperator(ctx.call.principal);
      need("tenant", req.tenant, "the tenant");
      checkUpstreamName(req.name);
      // Named by the operator's file since it was added: it is not served (the operator's wins), so not re-pinned either.
      if (((await options.operatorUpstreams?.()) ?? []).includes(req.name)) {
        throw new ChaosError("invalid_argument", `name: "${req.name}" is an upstream of the operator's upstreams file; a tenant's upstream may not shadow it: remove it (chaos-core upstreams remove ${req.name} --tenant ${req.tenant})`);
      }
      const pin = checkPin(req.name, req.pin);
      const { upstream, changed } = await registry.repinUpstream(req.tenant, req.name, pin, req.replaces);
      return { upstream: upstreamToProto(upstream), changed };
    },
  };
}

/**
 * ListTenantUpstreams of TenantDirectoryService: the context's tenant's enabled upstreams with their
 * pins and the generation they were read at — what the serving step (cognition) reads and caches
 * by generation. Never another tenant's: the tenant is the signed context's.
 */
export function createUpstreamDirectoryHandlers(registry: TenantRegistry): Pick<ServiceImpl<typeof TenantDirectoryService>, "listTenantUpstreams"> {
  return {
    async listTenantUpstreams(_req, ctx) {
      const tenant = ctx.call.tenant;
      // The generation first: a change after it is read makes the caller read again, never keep a stale answer.
      const { generation } = await registry.tenantState(tenant);
      const upstreams = (await registry.listUpstreams(tenant)).filter((u) => u.status === "enabled");
      return { upstreams: upstreams.map((u) => ({ declaration: declarationJson(u.declaration) as JsonObject, pin: u.pin })), generation: BigInt(generation) };
    },
  };
}
