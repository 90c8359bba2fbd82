/**
 * The cognition service run alone as a gRPC server, the way Kubernetes runs it:
 * telemetry → config → clients (policy, memory, ledger) → plan store → provider → server → signals.
 * Prints nothing on stdout; logs are JSON on stderr.
 */
import { readFileSync } from "node:fs";
import type { ChangeCounters, Logger, TenantGenerations } from "@chaos-core/kit";
import type { Redis as RedisClient } from "ioredis";
import type { ApprovalStore } from "./executor/approvals.js";
import type { PlanStore } from "./plans/plan-store.js";

// The bootstrap first (.env, then telemetry): its loader hook has to be in place before grpc-js
// and ioredis are imported, which is why everything else below is imported dynamically.
await import("@chaos-core/kit/telemetry");
const { ContextSigner, createGrpcClient, createLogger, createRedisChangeCounters, createRedisTenantGenerations, loadLifecycleConfig, onShutdown, openGrpcTransport } = await import("@chaos-core/kit");
const { MemoryService } = await import("@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js");
const { PolicyService } = await import("@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js");
const { TenantDirectoryService } = await import("@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js");
const { UpstreamApprovalService } = await import("@chaos-core/proto/gen/chaoscore/policy/v1/upstream_approvals_pb.js");
const { LedgerService } = await import("@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js");
const { closeRedis, connectRedis } = await import("@chaos-core/kit/redis");
const { loadCognitionConfig } = await import("./config.js");
const { createMemoryApprovalStore } = await import("./executor/approvals.js");
const { createRedisApprovalStore } = await import("./executor/redis-approval-store.js");
const { createMemoryPlanStore } = await import("./plans/memory-plan-store.js");
const { createRedisPlanStore } = await import("./plans/redis-plan-store.js");
const { createDefaultCognitionDeps, startCognitionServer } = await import("./server.js");
const { pinCapabilitiesAtStart } = await import("./capabilities/pin.js");
const { serveUpstreams } = await import("./capabilities/served-upstreams.js");
const { createTenantUpstreams } = await import("./capabilities/tenant-upstreams.js");
const { createRedisUpstreamBoards } = await import("./upstreams/upstream-board.js");
const { createPolicySnapshots } = await import("./executor/policy-snapshots.js");

/** The version upstreams are told in the MCP handshake (clientInfo). */
const VERSION = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version;

let logger: Logger = createLogger("cognition");
let redis: RedisClient | undefined;
try {
  const config = loadCognitionConfig();
  const lifecycle = loadLifecycleConfig();
  logger = createLogger("cognition", config.logLevel);
  // CHAOS_CORE_GRPC_TLS_*: the certificate files are read and checked now (a problem stops the start, naming the variable).
  const transport = openGrpcTransport(logger);
  const signer = new ContextSigner(config.contextKey, [config.contextKeyAccepted]);
  const policy = createGrpcClient(PolicyService, config.policyAddr, signer, { tls: transport.tls });
  const memory = createGrpcClient(MemoryService, config.memoryAddr, signer, { tls: transport.tls });
  const ledger = createGrpcClient(LedgerService, config.ledgerAddr, signer, { tls: transport.tls });
  // The tenant registry (served beside PolicyService): each tenant's own upstreams.
  const directory = createGrpcClient(TenantDirectoryService, config.policyAddr, signer, { tls: transport.tls });
  // The operator's approvals where the upstreams lock is read-only (the chart's ConfigMap): ListApprovals on policy's main port.
  const approvalsClient = createGrpcClient(UpstreamApprovalService, config.policyAddr, signer, { tls: transport.tls });
  let plans: PlanStore;
  let approvals: ApprovalStore;
  let changes: ChangeCounters | undefined;
  let generations: TenantGenerations | undefined;
  if (config.plans.kind === "redis") {
    redis = await connectRedis(config.plans.url, { logger, name: "chaos-core-cognition" });
    plans = createRedisPlanStore(redis, { prefix: config.plans.prefix });
    approvals = createRedisApprovalStore(redis, { prefix: config.plans.prefix });
    // The policy service announces each stored policy here: snapshots use it from their next decision.
    changes = createRedisChangeCounters(redis, { prefix: config.plans.prefix, name: "policy-changes" });
    // The policy service publishes each tenant's generation here: a tenant's upstreams are read again when it moves.
    generations = createRedisTenantGenerations(redis, { prefix: config.plans.prefix });
  } else {
    logger.warn(
      "REDIS_URL is not set: plans and pending approvals live in this process, so replicas will not share them (a plan made, or an approval asked for, on one cannot be used on another)",
    );
    plans = createMemoryPlanStore();
    approvals = createMemoryApprovalStore();
  }
  // The operator's upstream MCP servers (docs/federation.md): each pinned tool a capability; a
  // drift it sees is recorded in the ledger. A stdio upstream starts on first use, in this container.
  // With Redis, a quarantine one replica finds is refused by every replica at once (docs/federation.md §4), and a breaker one opens is open in all (§7).
  const boards = redis ? await createRedisUpstreamBoards(redis, { prefix: config.plans.kind === "redis" ? config.plans.prefix : "chaoscore:", logger }) : undefined;
  const board = config.upstreams ? await boards?.board("operator") : undefined;
  if (config.upstreams && !board) logger.warn("REDIS_URL is not set: a quarantined upstream tool is refused by the replica that found it drifted, not by the others until they read the upstream again, and each replica opens its own upstream breakers");
  const upstreams = config.upstreams ? await serveUpstreams(config.upstreams, VERSION, logger, ledger.client, board, { client: approvalsClient.client, ...(generations ? { generations } : {}) }) : undefined;
  if (upstreams) logger.info({ file: config.upstreams?.file, lock: config.upstreams?.lock }, `upstreams: ${upstreams.summary}`);
  // Each tenant's own upstreams from the registry (docs/federation.md §12): Streamable HTTP, reached through the address checks.
  const tenantUpstreams = createTenantUpstreams({
    directory: directory.client,
    ...(generations ? { generations } : {}),
    allowedAddresses: config.httpAllowedAddresses,
    secrets: config.tenantUpstreams.secrets,
    ...(config.tenantUpstreams.maxResultBytes !== undefined ? { maxResultBytes: config.tenantUpstreams.maxResultBytes } : {}),
    ...(config.tenantUpstreams.tokenMaxSeconds !== undefined ? { tokenMaxSeconds: config.tenantUpstreams.tokenMaxSeconds } : {}),
    version: VERSION,
    logger,
    operatorNames: new Set(upstreams?.transports.keys() ?? []),
    ...(boards ? { boards } : {}),
    // A tenant's drift is recorded in its own ledger.
    ledger: ledger.client,
  });
  const providerConfig = config.provider;
  const snapshots = config.policySnapshots ? createPolicySnapshots(policy.client, { logger, ...(changes ? { changes } : {}) }) : undefined;
  const deps = createDefaultCognitionDeps({
    ...(snapshots ? { policySnapshots: snapshots } : {}),
    policy: policy.client,
    memory: memory.client,
    plans,
    approvals,
    ledger: ledger.client,
    logger,
    provider: providerConfig,
    ...(upstreams ? { upstreamCapabilities: upstreams.capabilities, upstreams } : {}),
    httpAllowedAddresses: config.httpAllowedAddresses,
    tenantUpstreams,
  });
  // Every capability against chaoscore.lock, before anything is served; held to it from then on.
  await pinCapabilitiesAtStart(deps.registry, config.contractLockFile);
  logger.info(
    { provider: providerConfig.id, selection: providerConfig.selection, model: deps.provider.model ?? "none" },
    `AI provider ${providerConfig.id} (${providerConfig.selection === "explicit" ? "set by CHAOS_CORE_PROVIDER" : "inferred from the environment"})`,
  );
  const server = await startCognitionServer({ host: config.host, port: config.port, signer, deps, transport });
  logger.info({ policy: config.policyAddr, memory: config.memoryAddr, ledger: config.ledgerAddr, plans: config.plans.kind }, "cognition ready");
  const opened = redis;
  onShutdown(logger, async (graceMs) => {
    await server.shutdown(graceMs);
    await upstreams?.close();
    await tenantUpstreams.close();
    await boards?.close();
    directory.close();
    approvalsClient.close();
    snapshots?.close();
    policy.close();
    memory.close();
    ledger.close();
    if (opened) await closeRedis(opened);
  }, lifecycle.shutdownGraceMs);
} catch (err) {
  // The message names what is wrong (a variable); the stack adds nothing.
  logger.fatal({ err: err instanceof Error ? err.message : String(err) }, "cognition failed to start");
  redis?.disconnect();
  process.exit(1);
}
