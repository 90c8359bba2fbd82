import { register, startGrpcServer, type ContextSigner, type GrpcTransport, type Logger, type RunningGrpcServer } from "@chaos-core/kit";
import { TenantAdminService } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import { TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { UpstreamApprovalService } from "@chaos-core/proto/gen/chaoscore/policy/v1/upstream_approvals_pb.js";
import type { PolicyStore } from "./domain/policy-store.js";
import type { TenantRegistry } from "./domain/tenants.js";
import { noUpstreamApprovals, type UpstreamApprovals } from "./domain/upstream-approvals.js";
import { createPolicyHandlers } from "./handlers/policy-handlers.js";
import { createTenantAdminHandlers, createTenantDirectoryHandlers } from "./handlers/tenant-handlers.js";
import type { UpstreamAdminOptions } from "./handlers/upstream-handlers.js";
import { createUpstreamApprovalHandlers } from "./handlers/upstream-approval-handlers.js";

/** What the policy gRPC server needs; everything is built by the caller. */
export interface PolicyServerOptions {
  readonly host: string;
  readonly port: number;
  readonly signer: ContextSigner;
  readonly store: PolicyStore;
  /** The tenant registry: TenantDirectoryService on `port`, TenantAdminService on `adminPort`. */
  readonly registry: TenantRegistry;
  /** Where TenantAdminService listens, apart from the rest so a NetworkPolicy can guard it. */
  readonly adminPort: number;
  /**
   * The operator's approvals of drifted upstream tools where the lock is read-only
   * (UpstreamApprovalService: ListApprovals on `port`, RecordApproval too on `adminPort`). None kept when unset.
   */
  readonly approvals?: UpstreamApprovals;
  /** How AddUpstream checks a tenant's upstream (the operator's names, the allowed ranges). */
  readonly upstreams?: UpstreamAdminOptions;
  readonly logger: Logger;
  /** TLS and the plaintext health port (`CHAOS_CORE_GRPC_TLS_*`, `CHAOS_CORE_GRPC_HEALTH_PORT`); plaintext when unset. */
  readonly transport?: GrpcTransport | undefined;
}

/** The two listeners of the policy service. */
export interface RunningPolicyServer extends RunningGrpcServer {
  readonly admin: RunningGrpcServer;
}

/**
 * The policy service as gRPC servers (with health and reflection): PolicyService,
 * TenantDirectoryService and UpstreamApprovalService (its ListApprovals) on the main port;
 * TenantAdminService and UpstreamApprovalService whole on the admin port. Creating it has
 * no side effect; `start()` binds both ports and reports SERVING.
 */
export function createPolicyServer(options: PolicyServerOptions): { start(): Promise<RunningPolicyServer> } {
  const handlers = createPolicyHandlers(options.store);
  const approvals = options.approvals ?? noUpstreamApprovals();
  return {
    async start() {
      const main = await startGrpcServer({
        host: options.host,
        port: options.port,
        signer: options.signer,
        logger: options.logger,
        registrations: [
          register(PolicyService, handlers),
          register(TenantDirectoryService, createTenantDirectoryHandlers(options.registry)),
          register(UpstreamApprovalService, createUpstreamApprovalHandlers(approvals, { record: false })),
        ],
        tls: options.transport?.tls,
        healthPort: options.transport?.healthPort,
      });
      let admin: RunningGrpcServer;
      try {
        admin = await startGrpcServer({
          host: options.host,
          port: options.adminPort,
          signer: options.signer,
          logger: options.logger,
          registrations: [
            register(TenantAdminService, createTenantAdminHandlers(options.registry, options.upstreams)),
            register(UpstreamApprovalService, createUpstreamApprovalHandlers(approvals, { record: true })),
          ],
          tls: options.transport?.tls,
        });
      } catch (err) {
        await main.shutdown(0);
        throw err;
      }
      return {
        ...main,
        port: main.port,
        healthPort: main.healthPort,
        health: main.health,
        admin,
        setServing(serving) {
          main.setServing(serving);
          admin.setServing(serving);
        },
        async shutdown(graceMs) {
          await Promise.all([main.shutdown(graceMs), admin.shutdown(graceMs)]);
        },
      };
    },
  };
}
