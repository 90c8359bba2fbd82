import type { UpstreamsView } from "./handlers/upstream-status.js";
import { register, startGrpcServer, type ContextSigner, type GrpcTransport, type Logger, type RunningGrpcServer } from "@chaos-core/kit";
import { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { Capability } from "./capabilities/capability.js";
import { createHttpRequestCapability } from "./capabilities/http-request.js";
import { BUILT_IN_CAPABILITIES } from "./capabilities/index.js";
import { createCapabilityRegistry } from "./capabilities/registry.js";
import { createMemoryApprovalStore, type ApprovalStore } from "./executor/approvals.js";
import { createInMemoryAuditSink } from "./executor/audit.js";
import { createLedgerAuditSink, createLedgerStepReceipts, type LedgerClient } from "./executor/ledger.js";
import { createCognitionHandlers, type CognitionDeps } from "./handlers/cognition-handlers.js";
import type { PlanStore } from "./plans/plan-store.js";
import type { ProviderConfig } from "./providers/config.js";
import { createProvider } from "./providers/index.js";
import type { PolicySnapshots } from "./executor/policy-snapshots.js";
import { createRuleArgsGuard } from "./executor/rule-args-guard.js";

/** What {@link startCognitionServer} needs; everything is built by the caller. */
export interface CognitionServerOptions {
  host: string;
  /** 0 picks a free port; read it from the result. */
  port: number;
  signer: ContextSigner;
  deps: CognitionDeps;
  /** TLS and the plaintext health port (`CHAOS_CORE_GRPC_TLS_*`, `CHAOS_CORE_GRPC_HEALTH_PORT`); plaintext when unset. */
  transport?: GrpcTransport | undefined;
}

/**
 * Serves the cognition service over gRPC, with health (SERVING once bound) and reflection.
 * Nothing happens until it is called: importing this module starts nothing.
 */
export function startCognitionServer(options: CognitionServerOptions): Promise<RunningGrpcServer> {
  const { host, port, signer, deps } = options;
  return startGrpcServer({
    host,
    port,
    signer,
    logger: deps.logger,
    registrations: [register(CognitionService, createCognitionHandlers(deps))],
    tls: options.transport?.tls,
    healthPort: options.transport?.healthPort,
  });
}

/** What {@link createDefaultCognitionDeps} takes: the clients and the plan store are the caller's. */
export interface DefaultCognitionDepsOptions {
  policy: CognitionDeps["policy"];
  memory: CognitionDeps["memory"];
  plans: PlanStore;
  /** Where pending approvals live; in this process when unset (replicas then do not share them). */
  approvals?: ApprovalStore;
  /**
   * The ledger: every decision and outcome is appended there, and approved steps run only on a
   * receipt it authorizes. Unset only in tests of cognition alone (an in-memory audit sink then).
   */
  ledger?: LedgerClient;
  logger: Logger;
  /** The AI provider, as `loadProviderConfig` read it from the environment. */
  provider: ProviderConfig;
  stepTimeoutMs?: number;
  /**
   * Decide from a policy snapshot beside the executor, fed by the watch stream, instead of asking
   * the policy service each step (`CHAOS_CORE_POLICY_SNAPSHOTS=on`; docs/cognition.md "Policy
   * snapshots"). Off by default.
   */
  policySnapshots?: PolicySnapshots;
  /** The pinned tools of the operator's upstreams, as capabilities (`upstreamCapabilities`), beside the built-in ones. */
  upstreamCapabilities?: readonly Capability[];
  /** Their breakers and transports, for ListUpstreams (`serveUpstreams`' answer is one). */
  upstreams?: UpstreamsView;
  /** `CHAOS_CORE_HTTP_ALLOWED_ADDRESSES`: internal ranges `http.request` may reach (none by default). */
  httpAllowedAddresses?: readonly string[];
  /** Each tenant's own registry upstreams (`createTenantUpstreams`), served to that tenant's callers. */
  tenantUpstreams?: CognitionDeps["tenantUpstreams"];
}

/** The built-in capabilities, `http.request` reaching the operator's allowed ranges when there are some. */
function builtIns(httpAllowedAddresses: readonly string[] = []): readonly Capability[] {
  if (httpAllowedAddresses.length === 0) return BUILT_IN_CAPABILITIES;
  const http = createHttpRequestCapability({ allowAddress: httpAllowedAddresses }) as unknown as Capability;
  return BUILT_IN_CAPABILITIES.map((c) => (c.name === http.name ? http : c));
}

/**
 * The usual deps: the built-in capabilities, the configured provider, the ledger as audit sink
 * and receipt authority (an in-memory audit sink without one), and the given approval store
 * (in-process when none is given).
 */
export function createDefaultCognitionDeps(options: DefaultCognitionDepsOptions): CognitionDeps {
  const registry = createCapabilityRegistry([...builtIns(options.httpAllowedAddresses), ...(options.upstreamCapabilities ?? [])]);
  // An approval re-pins: the upstream tools are served as pinned now (docs/federation.md §4).
  options.upstreams?.onCapabilities?.((tools) => registry.replaceUpstreamTools(tools));
  return {
    registry,
    provider: createProvider(options.provider),
    policy: options.policySnapshots?.client ?? options.policy,
    memory: options.memory,
    plans: options.plans,
    audit: options.ledger ? createLedgerAuditSink(options.ledger) : createInMemoryAuditSink(),
    ...(options.ledger ? { receipts: createLedgerStepReceipts(options.ledger) } : {}),
    approvals: options.approvals ?? createMemoryApprovalStore(),
    ruleArgs: createRuleArgsGuard({ logger: options.logger }),
    logger: options.logger,
    ...(options.stepTimeoutMs !== undefined ? { stepTimeoutMs: options.stepTimeoutMs } : {}),
    ...(options.upstreams ? { upstreams: options.upstreams } : {}),
    ...(options.tenantUpstreams ? { tenantUpstreams: options.tenantUpstreams } : {}),
  };
}
