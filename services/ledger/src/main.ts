/**
 * The ledger service run alone as a gRPC server, the way Kubernetes runs it:
 * telemetry → config → keyring and policies → policy client → database → migrations → core (and its
 * webhook dispatcher, when configured) → server → signals.
 * Prints nothing on stdout; logs are JSON on stderr.
 */
import type { Db, Logger } from "@chaos-core/kit";
import type { Redis as RedisClient } from "ioredis";

// The bootstrap first (.env, then telemetry): its loader hook has to be in place before pg,
// ioredis and grpc-js are imported, which is why everything else below is imported dynamically.
await import("@chaos-core/kit/telemetry");
const { readFileSync } = await import("node:fs");
const { ContextSigner, createGrpcClient, createLogger, createRedisTenantGenerations, loadLifecycleConfig, onShutdown, openGrpcTransport, schemaGate } = await import("@chaos-core/kit");
const { PolicyService } = await import("@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js");
const { TenantDirectoryService } = await import("@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js");
const { closeRedis, connectRedis } = await import("@chaos-core/kit/redis");
const { loadLedgerConfig } = await import("./config.js");
const { loadKeyring } = await import("./keys/keyring.js");
const { loadOperatorPolicies } = await import("./adapters/operator-policies.js");
const { createRegistryOperatorPolicies } = await import("./adapters/registry-policies.js");
const { openLedgerDb } = await import("./adapters/open-db.js");
const { migrateLedger, pendingLedgerMigrations } = await import("./log/migrations.js");
const { createMemoryNonceCache, createRedisNonceCache } = await import("./adapters/nonce-cache.js");
const { createLedgerCore } = await import("./service/create-core.js");
const { startLedgerServer } = await import("./server.js");

const VERSION = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string }).version;

let logger: Logger = createLogger("ledger");
let db: Db | undefined;
let redis: RedisClient | undefined;
let policy: { close(): void } | undefined;
let directory: { close(): void } | undefined;
try {
  const config = loadLedgerConfig();
  const lifecycle = loadLifecycleConfig();
  logger = createLogger("ledger", config.logLevel);
  // CHAOS_CORE_GRPC_TLS_*: the certificate files are read and checked now (a problem stops the start, naming the variable).
  const transport = openGrpcTransport(logger);
  // Keys and policies first: a missing key or a malformed policy fails before anything opens.
  const keyring = await loadKeyring(config.keysFile).catch((err: unknown) => {
    // The keyring's message names the file; the operator also needs the variable that chose it.
    throw new Error(`CHAOS_CORE_LEDGER_KEYS_FILE: ${(err as Error).message}`, { cause: err });
  });
  const filePolicies = await loadOperatorPolicies(config.policyFile);
  const signer = new ContextSigner(config.contextKey, [config.contextKeyAccepted]);
  // Policy says which approval channels count for a spend or a tool receipt; the ledger enforces.
  const policyClient = createGrpcClient(PolicyService, config.policyAddr, signer, { tls: transport.tls });
  policy = policyClient;
  // The tenant registry, on the policy service's port, holds tenants' own spend and tool-approval policies.
  const directoryClient = createGrpcClient(TenantDirectoryService, config.policyAddr, signer, { tls: transport.tls });
  directory = directoryClient;
  db = await openLedgerDb(config.storage);
  // CHAOS_CORE_MIGRATE=auto applies the migrations now; verify serves NOT_SERVING until they are current.
  const migrating = db;
  const schema = await schemaGate(lifecycle.migrate, { apply: () => migrateLedger(migrating), pending: () => pendingLedgerMigrations(migrating), logger });
  let nonces;
  let generations;
  if (config.nonces.kind === "redis") {
    redis = await connectRedis(config.nonces.url, { logger, name: "chaos-core-ledger" });
    nonces = createRedisNonceCache(redis, { prefix: config.nonces.prefix });
    // The generations the policy service publishes: a tenant's policies are re-read only when its generation moved.
    generations = createRedisTenantGenerations(redis, { prefix: config.nonces.prefix });
  } else {
    nonces = createMemoryNonceCache();
  }
  const policies = createRegistryOperatorPolicies(filePolicies, { client: directoryClient.client, logger, ...(generations ? { generations } : {}) });
  const core = createLedgerCore({
    db,
    keyring,
    policies,
    nonces,
    policy: policyClient.client,
    logger,
    version: VERSION,
    origin: config.origin,
    ...(config.webhooks ? { webhooks: config.webhooks } : {}),
  });
  const server = await startLedgerServer({ host: config.host, port: config.port, signer, core, logger, transport });
  logger.info(
    { kid: keyring.active.kid, policies: policies.source, nonces: config.nonces.kind, policy: config.policyAddr, webhooks: config.webhooks ? new URL(config.webhooks.url).origin : "off" },
    "ledger ready",
  );
  const opened = db;
  const openedRedis = redis;
  schema.hold(server);
  onShutdown(logger, async (graceMs) => {
    schema.stop();
    await server.shutdown(graceMs);
    policyClient.close();
    directoryClient.close();
    await core.close();
    await core.store.close();
    if (openedRedis) await closeRedis(openedRedis);
    await opened.close();
  }, lifecycle.shutdownGraceMs);
} catch (err) {
  logger.fatal({ err }, (err as Error).message ?? "failed to start");
  policy?.close();
  directory?.close();
  await redis?.quit().catch(() => undefined);
  await db?.close().catch(() => undefined);
  process.exit(1);
}
