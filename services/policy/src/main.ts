/**
 * The policy service on its own: telemetry → config → store → gRPC server → signals.
 * Nothing is written to stdout; logs go to stderr as JSON.
 */
import type { SchemaGate } from "@chaos-core/kit";

// The bootstrap first (.env, then telemetry), before grpc-js or pg are imported, or their
// spans never appear; so every other module is imported dynamically below.
await import("@chaos-core/kit/telemetry");

const { ContextSigner, createLogger, createPostgresDb, loadLifecycleConfig, onShutdown, openGrpcTransport, schemaGate } = await import("@chaos-core/kit");
const { loadPolicyConfig } = await import("./config.js");
const { createSqlPolicyStore, migratePolicy, pendingPolicyMigrations } = await import("./adapters/sql-store.js");
const { createFilePolicyStore } = await import("./adapters/file-store.js");
const { announcePolicyChanges } = await import("./adapters/announcing-store.js");
const { createSqlTenantRegistry } = await import("./adapters/tenant-registry.js");
const { createSqlUpstreamApprovals } = await import("./adapters/upstream-approvals.js");
const { createUpstreamUrlCheck } = await import("./adapters/upstream-address.js");
const { operatorUpstreamNames } = await import("./adapters/operator-upstreams.js");
const { unregisteredTenants } = await import("./domain/tenants.js");
const { createMemoryTenantGenerations, createRedisChangeCounters, createRedisTenantGenerations } = await import("@chaos-core/kit");
const { closeRedis, connectRedis } = await import("@chaos-core/kit/redis");
const { createPolicyServer } = await import("./server.js");

const bootLogger = createLogger("policy");
try {
  const config = loadPolicyConfig();
  const lifecycle = loadLifecycleConfig();
  const logger = createLogger("policy", config.logLevel);
  // CHAOS_CORE_GRPC_TLS_*: the certificate files are read and checked now (a problem stops the start, naming the variable).
  const transport = openGrpcTransport(logger);
  const signer = new ContextSigner(config.contextKey, [config.contextKeyAccepted]);

  let closeDb = async (): Promise<void> => undefined;
  let schema: SchemaGate | undefined;
  let store;
  let registry;
  let approvals;
  // Tenant generations reach the edges through Redis; without it, edges sharing no Redis with
  // this service resolve every request here (docs/tenants.md, "Revocation").
  const redis = config.redis ? await connectRedis(config.redis.url, { logger, name: "chaos-core-policy" }) : undefined;
  const generations = redis ? createRedisTenantGenerations(redis, { prefix: config.redis!.prefix, logger }) : createMemoryTenantGenerations({ logger });
  if (config.store.kind === "postgres") {
    const db = createPostgresDb({ connectionString: config.store.databaseUrl, applicationName: "chaos-core-policy" });
    closeDb = () => db.close();
    // CHAOS_CORE_MIGRATE=auto applies the migrations now; verify serves NOT_SERVING until they are current.
    schema = await schemaGate(lifecycle.migrate, { apply: () => migratePolicy(db), pending: () => pendingPolicyMigrations(db), logger });
    store = createSqlPolicyStore(db, { logger });
    registry = createSqlTenantRegistry(db, { generations });
    approvals = createSqlUpstreamApprovals(db, { generations });
  } else {
    store = await createFilePolicyStore({ path: config.store.path, logger });
    registry = unregisteredTenants();
  }

  // A stored policy is announced through Redis, so cognition's policy snapshots use it from their next decision.
  if (redis) store = announcePolicyChanges(store, createRedisChangeCounters(redis, { prefix: config.redis!.prefix, name: "policy-changes" }), logger);
  // A tenant's upstream: never one of the operator's names, never an internal address but the allowed ranges.
  const upstreams = { operatorUpstreams: operatorUpstreamNames(config.upstreamsFile), checkUrl: createUpstreamUrlCheck({ allowedAddresses: config.httpAllowedAddresses }) };
  const server = await createPolicyServer({ host: config.host, port: config.port, adminPort: config.adminPort, signer, store, registry, ...(approvals ? { approvals } : {}), upstreams, logger, transport }).start();
  logger.info({ adminPort: server.admin.port, generations: redis ? "redis" : "in-process" }, "tenant admin API listening");
  schema?.hold(server);
  onShutdown(logger, async (graceMs) => {
    schema?.stop();
    await server.shutdown(graceMs);
    await store.close();
    await closeDb();
    if (redis) await closeRedis(redis);
  }, lifecycle.shutdownGraceMs);
} catch (err) {
  // The message names what is wrong (a variable, a file and field); the stack adds nothing.
  bootLogger.fatal({ err: err instanceof Error ? err.message : String(err) }, "policy service failed to start");
  process.exit(1);
}
