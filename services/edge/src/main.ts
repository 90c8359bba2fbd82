/**
 * The edge alone: MCP over Streamable HTTP in front of policy, memory, cognition and council reached over gRPC.
 * Composition root: telemetry → config → adapters → server → signals. Nothing is written to
 * stdout; logs are JSON on stderr.
 */

import { readFileSync } from "node:fs";

// The bootstrap first (.env, then telemetry), before http, grpc-js or ioredis are imported,
// or their spans never appear; so every other module is imported dynamically below.
await import("@chaos-core/kit/telemetry");

const { ContextSigner, createGrpcClient, createLogger, loadLifecycleConfig, onShutdown, openGrpcTransport } = await import("@chaos-core/kit");
const { CognitionService } = await import("@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js");
const { CouncilService } = await import("@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js");
const { LedgerService } = await import("@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js");
const { MemoryService } = await import("@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js");
const { PolicyService } = await import("@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js");
const { TenantDirectoryService } = await import("@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js");
const { createCredentialDirectory } = await import("./auth/directory.js");
const { createUpstreamCatalog } = await import("./clients/upstream-catalog.js");
const { createRedisTenantGenerations } = await import("@chaos-core/kit");
const { closeRedis, connectRedis } = await import("@chaos-core/kit/redis");
const { loadEdgeAloneConfig } = await import("./config.js");
const { loadMrtrKeyring } = await import("./mrtr/keyring.js");
const { createMemorySessionStore } = await import("./sessions/memory-store.js");
const { createRedisSessionStore } = await import("./sessions/redis-store.js");
const { createRedisEdgeEvents } = await import("./events/feeds.js");
const { startHttpTransport } = await import("./transport/http.js");
const { consoleSigningKey } = await import("./console/csrf.js");
const { checkContractsAtStart } = await import("./contracts/start.js");
const { createRateLimiter } = await import("./limits/limiter.js");
const { loadRateLimitsFile } = await import("./limits/limits-file.js");
const { createMemoryConsoleSessionStore } = await import("./console/sessions.js");
const { createRedisConsoleSessionStore } = await import("./console/redis-sessions.js");

const VERSION = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version;

const bootLogger = createLogger("edge");
try {
  const config = loadEdgeAloneConfig();
  const lifecycle = loadLifecycleConfig();
  const logger = createLogger("edge", config.logLevel);
  // CHAOS_CORE_GRPC_TLS_*: the certificate files are read and checked now (a problem stops the start, naming the variable).
  const transport = openGrpcTransport(logger);
  // Read before anything connects: a missing or malformed keyring stops the start, naming the file and field.
  const mrtrKeyring = await loadMrtrKeyring(config.mrtrKeysFile);
  // The definitions served against chaoscore.lock and its signed note: drift or a bad signature
  // stops the start (an AttestationError naming the drifted entries), before anything connects.
  const attestation = await checkContractsAtStart(config.contracts, logger);
  // CHAOS_CORE_RATE_LIMITS_FILE: a file that cannot be read or parsed stops the start, naming it.
  const rateLimits = config.rateLimitsFile ? loadRateLimitsFile(config.rateLimitsFile) : undefined;

  const signer = new ContextSigner(config.contextKey, [config.contextKeyAccepted]);
  const policy = createGrpcClient(PolicyService, config.policyAddr, signer, { tls: transport.tls });
  const tenantDirectory = createGrpcClient(TenantDirectoryService, config.policyAddr, signer, { tls: transport.tls });
  const memory = createGrpcClient(MemoryService, config.memoryAddr, signer, { tls: transport.tls });
  // The default deadline stays for quick calls; the tools that wait on a model or run
  // capabilities pass their own (up to five minutes for chaoscore_achieve's stream).
  const cognition = createGrpcClient(CognitionService, config.cognitionAddr, signer, { tls: transport.tls, forwardSubjectToken: true });
  const council = createGrpcClient(CouncilService, config.councilAddr, signer, { tls: transport.tls });
  const ledger = config.ledgerAddr ? createGrpcClient(LedgerService, config.ledgerAddr, signer, { tls: transport.tls }) : undefined;
  if (!ledger) logger.warn("LEDGER_ADDR is not set: the governance and finance-reference tools fail closed (unavailable)");
  const redis = config.redisUrl ? await connectRedis(config.redisUrl, { logger, name: "chaos-core-edge" }) : undefined;
  if (!redis) logger.warn("REDIS_URL is not set: sessions live in this process, so only this replica can serve them");
  const sessions = redis
    ? createRedisSessionStore(redis, { prefix: config.redisPrefix, ttlSeconds: config.sessionTtlSeconds })
    : createMemorySessionStore({ ttlSeconds: config.sessionTtlSeconds });
  // Resumable SSE streams and change events span the replicas where the sessions do.
  const events = redis ? await createRedisEdgeEvents(redis, { prefix: config.redisPrefix, ttlSeconds: config.sessionTtlSeconds, logger }) : undefined;

  // Keys and tenant status from the policy service's registry, cached while the tenant's
  // generation in Redis holds; without Redis every request asks the policy service.
  const generations = redis ? createRedisTenantGenerations(redis, { prefix: config.redisPrefix, logger }) : undefined;
  // Set once the catalog exists: a tenant whose generation moved has its own upstream tools read again (docs/federation.md §12).
  const tenantChanged: { tell?: (tenant: string) => void } = {};
  const directory = createCredentialDirectory({
    client: tenantDirectory.client,
    ...(generations ? { generations } : {}),
    logger,
    onTenantChange: (tenant) => tenantChanged.tell?.(tenant),
  });
  // The upstream tools cognition serves (docs/federation.md §6), read now; a cognition that does
  // not answer yet leaves the list empty until the next read, every minute.
  const upstreams = createUpstreamCatalog(cognition.client, logger);
  await upstreams.refresh().catch(() => {});
  const upstreamRefresh = setInterval(() => void upstreams.refresh().catch(() => {}), 60_000).unref();
  tenantChanged.tell = (tenant) => upstreams.tenantChanged?.(tenant);
  // Each change committed on this Redis is announced: a tenant's own tools are read again at once,
  // so its sessions and listen streams here hear tools/list_changed without a request of theirs.
  // Announcements lost while Redis was away: every tenant is read again once it is back.
  const stopHearing = await generations?.watch({
    changed: (tenant) => upstreams.tenantChanged?.(tenant),
    missed: () => void upstreams.refresh().catch(() => {}),
  });
  const http = await startHttpTransport(
    {
      policy: policy.client,
      memory: memory.client,
      cognition: cognition.client,
      upstreams,
      council: council.client,
      ...(ledger ? { ledger: ledger.client } : {}),
      sessions,
      servicesRemote: true,
      logger,
      version: VERSION,
      approvalWaitSeconds: config.approvalWaitSeconds,
      mrtrKeyring,
      mrtrTtlSeconds: config.mrtrTtlSeconds,
      contracts: attestation,
      ...(events ? { events } : {}),
      // The registry's limits of a tenant win over the file's (read with its status on every request).
      limiter: createRateLimiter(rateLimits, redis, { prefix: config.redisPrefix, logger, registry: (tenant) => directory.tenantLimits(tenant) }),
    },
    {
      ...config.http,
      directory,
      // The console's sessions live where the MCP sessions do, and its sign-in forms are signed
      // with a key derived from the context key: every replica serves every console session.
      ...(config.http.console
        ? {
            console: {
              ...config.http.console,
              sessions: redis ? createRedisConsoleSessionStore(redis, { prefix: config.redisPrefix }) : createMemoryConsoleSessionStore(),
              signingKey: consoleSigningKey(config.contextKey),
            },
          }
        : {}),
    },
  );
  logger.info(
    {
      url: http.url,
      policy: config.policyAddr,
      memory: config.memoryAddr,
      cognition: config.cognitionAddr,
      council: config.councilAddr,
      ledger: config.ledgerAddr ?? "not configured",
      sessions: redis ? "redis" : "in-process",
      events: events?.kind ?? "in-process",
      console: http.consoleUrl ?? "off",
      apiKeys: config.http.apiKeysFile ?? "off",
      oauth: config.oauth ? `${config.oauth.issuer} for ${config.oauth.resource}` : "off",
      mrtrKey: mrtrKeyring.activeKid,
      contracts: attestation.attested ? `attested by ${attestation.keyNames.join(", ")}` : "not attested (no CHAOS_CORE_CONTRACT_KEYS)",
    },
    "edge listening",
  );

  onShutdown(logger, async (graceMs) => {
    clearInterval(upstreamRefresh);
    await stopHearing?.();
    await http.close(graceMs);
    await events?.close();
    policy.close();
    tenantDirectory.close();
    memory.close();
    cognition.close();
    council.close();
    ledger?.close();
    if (redis) await closeRedis(redis);
  }, lifecycle.shutdownGraceMs);
} catch (err) {
  // The message names what is wrong (a variable, a file and entry); the stack adds nothing.
  bootLogger.fatal({ err: err instanceof Error ? err.message : String(err) }, "edge failed to start");
  process.exit(1);
}
