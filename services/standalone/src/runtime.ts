import { existsSync } from "node:fs";
import { join } from "node:path";
import {
  ChaosError,
  createInProcessClient,
  createMemoryChangeCounters,
  createMemoryTenantGenerations,
  createPostgresDb,
  createRedisChangeCounters,
  createRedisTenantGenerations,
  type Db,
  type Logger,
  type ServiceClient,
  type ChangeCounters,
  type TenantGenerations,
} from "@chaos-core/kit";
import { TenantAdminService } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import { TenantDirectoryService } from "@chaos-core/proto/gen/chaoscore/policy/v1/directory_pb.js";
import { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { CouncilService } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import {
  createLedgerCore,
  createLedgerHandlers,
  createMemoryNonceCache,
  createRedisNonceCache,
  loadKeyring,
  createRegistryOperatorPolicies,
  loadOperatorPolicies,
  loadOrCreateKeyring,
  migrateLedger,
  type NonceCache,
} from "@chaos-core/ledger";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { UpstreamApprovalService } from "@chaos-core/proto/gen/chaoscore/policy/v1/upstream_approvals_pb.js";
import { createMemoryHandlers, createSqlMemoryStore, migrateMemory } from "@chaos-core/memory";
import { createCouncilHandlers, createSqlCouncilStore, migrateCouncil } from "@chaos-core/council";
import {
  announcePolicyChanges,
  createFilePolicyStore,
  createPolicyHandlers,
  createRoutedPolicyStore,
  createSqlPolicyStore,
  createSqlTenantRegistry,
  createSqlUpstreamApprovals,
  createTenantAdminHandlers,
  createUpstreamApprovalHandlers,
  createTenantDirectoryHandlers,
  createUpstreamUrlCheck,
  operatorUpstreamNames,
  migratePolicy,
  STANDALONE_TENANT,
  type PolicyStore,
} from "@chaos-core/policy";
import {
  createCognitionHandlers,
  createDefaultCognitionDeps,
  createPolicySnapshots,
  pinCapabilitiesAtStart,
  serveUpstreams,
  createTenantUpstreams,
  upstreamSecretsOf,
  createMemoryApprovalStore,
  createRedisApprovalStore,
  createMemoryPlanStore,
  createRedisPlanStore,
  type ApprovalStore,
  type PlanStore,
  type ProviderConfig,
} from "@chaos-core/cognition";
import {
  createCredentialDirectory,
  createUpstreamCatalog,
  createMemorySessionStore,
  createMemoryRateLimiter,
  createRedisEdgeEvents,
  createRedisRateLimiter,
  createRedisSessionStore,
  NO_RATE_LIMITS,
  type EdgeDeps,
  type CredentialDirectory,
  type EdgeEvents,
  type RateLimiter,
  type RateLimits,
  type SessionStore,
  type SignInLinks,
} from "@chaos-core/edge";
import type { StandaloneConfig, UpstreamsConfig } from "./config.js";
import { startAdminServer, type RunningAdminServer } from "./admin-server.js";
import { startRetentionSweeps } from "./tenant-data.js";
import { embeddedDbPath, openEmbeddedDb, policyFilePath } from "./data-dir-layout.js";
import { lockDataDir } from "@chaos-core/kit";
import { closeRedis, connectRedis } from "@chaos-core/kit/redis";
import type { Redis } from "ioredis";

/** Every service of Chaos Core in one process, wired with in-process clients. */
export interface Runtime {
  /** The edge's dependencies; the limiter always (with no limits configured, a tenant's in the registry still hold). */
  readonly deps: EdgeDeps & { readonly limiter: RateLimiter };
  /** Which stores were chosen, for the start-up line a person reads. */
  readonly stores: {
    database: string;
    policy: string;
    sessions: string;
    plans: string;
    /** Where the rate limits' buckets are: shared in Redis, or this process's. */
    rateLimits: string;
    provider: string;
    ledgerKey: string;
    ledgerPolicies: string;
    /** The webhook receiver's origin (never its path, which may be a credential), or "off". */
    webhooks: string;
    /** The operator's upstreams served, or "none". */
    upstreams: string;
    /** The kid that seals multi-round-trip requestState, and where its keyring is (set by `startRuntime`). */
    mrtrKey?: string;
  };
  /** The operator's loopback admin endpoint (`chaos-core approvals`), when started. */
  readonly admin?: RunningAdminServer;
  /**
   * The tenant registry (docs/tenants.md): the directory the HTTP transport checks credentials
   * and tenant status against, and the admin API `chaos-core tenants|keys` reach through the
   * admin endpoint.
   */
  readonly tenants: {
    readonly directory: CredentialDirectory;
    readonly admin: ServiceClient<typeof TenantAdminService>;
    /** The operator's approvals where the upstreams lock is read-only (`chaos-core upstreams approve --overlay`). */
    readonly approvals: ServiceClient<typeof UpstreamApprovalService>;
    readonly generations: TenantGenerations;
  };
  /** A tenant's audit ledger as export JSONL lines (`chaos-core ledger export` through the admin endpoint). */
  exportLedger(tenant: string): AsyncIterable<string>;
  close(): Promise<void>;
}

/**
 * A turn of the event loop. PGlite answers synchronously, so opening it and migrating would
 * otherwise run as one long chain of microtasks in which a transport already serving (stdio
 * answers before the stores are open) could not read a single request.
 */
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** How {@link createRuntime} builds the runtime. */
export interface RuntimeOptions {
  version: string;
  sessionTtlSeconds: number;
  /**
   * Start the operator's loopback admin endpoint and write `<dataDir>/admin.json` once everything
   * is open (serve and stdio start it earlier, through `startRuntime`).
   */
  admin?: boolean;
  /** The data directory's lock when the caller took it already; released on close like one taken here. */
  dataDirLock?: () => Promise<void>;
  /**
   * The in-process session store to use when Redis is not configured: stdio writes its session
   * record at initialize, which it answers before the stores are open.
   */
  sessions?: SessionStore;
  /** The approval console's one-time sign-in links the admin endpoint issues (with `admin`). */
  signInLinks?: SignInLinks;
  /** Awaited just before the database opens: tests hold the start-up there to see what answers meanwhile. */
  beforeDatabase?: () => Promise<void>;
  /**
   * Multi-round-trip requestState (`startRuntime` only): the operator's keyring file
   * (`CHAOS_CORE_MRTR_KEYS_FILE`; unset = `<dataDir>/mrtr-keyring.json`, generated on first run)
   * and the lifetime of a sealed state (`CHAOS_CORE_MRTR_TTL_SECONDS`).
   */
  mrtr?: { keysFile?: string; ttlSeconds: number };
  /**
   * `startRuntime` only: open the stores when `StartingRuntime.open` is called, not at once.
   * `chaos-core stdio` opens them on the first request that is not `server/discover`, so a
   * 2026-07-28 client's short-lived version probe never touches the database (docs/protocol.md §14).
   */
  openOnDemand?: boolean;
  /**
   * The contracts lock the capabilities are pinned to (`CHAOS_CORE_CONTRACT_LOCK_FILE`); unset in
   * tests composing a runtime, where nothing is pinned. `serve` and `stdio` check the lock at start
   * first (cli.ts), so a drift found here is one that appeared since.
   */
  contractLockFile?: string;
  /** The operator's upstream MCP servers (docs/federation.md): their pinned tools are served as capabilities. */
  upstreams?: UpstreamsConfig;
  /**
   * The tenants' rate limits (`CHAOS_CORE_RATE_LIMITS_FILE`), a tenant's in the registry over them:
   * in Redis when it is configured, shared by every process using it (as the edge replicas share
   * them); else in this process.
   */
  rateLimits?: RateLimits;
  /**
   * The in-process limiter to use when Redis is not configured: stdio gates the calls it answers
   * before the stores are open with it, and the runtime must hold the same buckets.
   */
  limiter?: RateLimiter;
}

/** The provider as the start-up line shows it: which, with which model, and why (never a key). */
function describeProviderChoice(config: ProviderConfig): string {
  const why = config.selection === "explicit" ? "set by CHAOS_CORE_PROVIDER" : "inferred from the environment";
  return config.id === "heuristic" ? `heuristic (no model; ${why})` : `${config.id} (model ${config.model}; ${why})`;
}

/**
 * Builds the standalone runtime: embedded stores under the data directory by default,
 * Postgres and Redis (sessions and plans) when their URLs are set, and the AI provider the
 * configuration selected. The services are the same handlers the gRPC
 * mains serve, reached through in-process clients (no sockets, no serialisation).
 */
export async function createRuntime(config: StandaloneConfig, logger: Logger, options: RuntimeOptions): Promise<Runtime> {
  const unlock = options.dataDirLock ?? (await lockDataDir(config.dataDir));
  const closers: Array<() => Promise<unknown>> = [unlock];
  const close = async () => {
    // Last opened, first closed; each closer runs once even if close is called again.
    for (let c = closers.pop(); c; c = closers.pop()) {
      await c().catch((err: unknown) => logger.warn({ err }, "close failed"));
    }
  };
  try {
    // The policy file first: a malformed one fails in milliseconds, before the database opens.
    let policyStore: PolicyStore | undefined;
    let policySource = "postgres";
    if (!config.databaseUrl) {
      policySource = policyFilePath(config.dataDir);
      const fileStore = await createFilePolicyStore({ path: policySource, logger });
      closers.push(async () => fileStore.close());
      policyStore = fileStore;
    }

    await options.beforeDatabase?.();
    const opening = performance.now();
    await nextTurn();
    let db: Db;
    if (config.databaseUrl) {
      logger.info("connecting to Postgres and applying migrations");
      db = createPostgresDb({ connectionString: config.databaseUrl, max: config.pgPoolMax, applicationName: "chaos-core-standalone" });
    } else {
      const path = embeddedDbPath(config.dataDir);
      // Seconds on a first run or a busy machine: a person watching stderr sees which step it is.
      logger.info(
        { path },
        existsSync(join(path, "PG_VERSION"))
          ? "opening the embedded database"
          : "creating the embedded database (first run: this takes several seconds)",
      );
      db = await openEmbeddedDb(config.dataDir, { create: true }).catch((err: unknown) => {
        throw new ChaosError("unavailable", `the embedded database in ${path} did not open: ${(err as Error).message}`, { cause: err });
      });
    }
    closers.push(() => db.close());
    for (const migrateService of [migrateMemory, migrateCouncil, migrateLedger]) {
      await nextTurn();
      await migrateService(db);
    }

    // The policy schema always: it holds the tenant registry too. On the embedded stores tenant
    // "default" keeps policy.json and every other tenant a document in the embedded database.
    await migratePolicy(db);
    const sqlPolicies = createSqlPolicyStore(db);
    if (policyStore) {
      policyStore = createRoutedPolicyStore({ defaultTenant: STANDALONE_TENANT, forDefault: policyStore, forOthers: sqlPolicies });
      policySource = `${policySource} (tenant default; other tenants in the database)`;
    } else {
      policyStore = sqlPolicies;
    }
    logger.info({ ms: Math.round(performance.now() - opening) }, "database open, migrations applied");

    await nextTurn();
    // The operator's keyring when configured; otherwise one generated into the data directory
    // on first run (and said so in the log). There is never a built-in key.
    const keyring = config.ledgerKeysFile ? await loadKeyring(config.ledgerKeysFile) : await loadOrCreateKeyring(config.dataDir, logger);
    const ledgerPolicies = await loadOperatorPolicies(config.ledgerPolicyFile);

    let generations: TenantGenerations = createMemoryTenantGenerations({ logger });
    let policyChanges: ChangeCounters = createMemoryChangeCounters();
    let sessions: EdgeDeps["sessions"];
    let events: EdgeEvents | undefined;
    let nonces: NonceCache;
    let plans: PlanStore;
    let approvals: ApprovalStore;
    let redis: Redis | undefined;
    if (config.redisUrl) {
      const connected = await connectRedis(config.redisUrl, { logger, name: "chaos-core-standalone" });
      redis = connected;
      closers.push(() => closeRedis(connected));
      sessions = createRedisSessionStore(redis, { prefix: config.redisPrefix, ttlSeconds: options.sessionTtlSeconds });
      // Resumable SSE streams and change events across the processes sharing this Redis.
      const edgeEvents = await createRedisEdgeEvents(redis, { prefix: config.redisPrefix, ttlSeconds: sessions.ttlSeconds, logger });
      closers.push(() => edgeEvents.close());
      events = edgeEvents;
      plans = createRedisPlanStore(redis, { prefix: config.redisPrefix });
      approvals = createRedisApprovalStore(redis, { prefix: config.redisPrefix });
      nonces = createRedisNonceCache(redis, { prefix: config.redisPrefix });
      // Several processes may share this database and Redis: a change any of them makes reaches the others' next request.
      generations = createRedisTenantGenerations(redis, { prefix: config.redisPrefix, logger });
      policyChanges = createRedisChangeCounters(redis, { prefix: config.redisPrefix, name: "policy-changes" });
    } else {
      sessions = options.sessions ?? createMemorySessionStore({ ttlSeconds: options.sessionTtlSeconds });
      plans = createMemoryPlanStore();
      approvals = createMemoryApprovalStore();
      nonces = createMemoryNonceCache();
    }

    // Each stored policy is announced, so policy snapshots (this process's, and other processes' on this Redis) use it from their next decision.
    const policy = createInProcessClient(PolicyService, createPolicyHandlers(announcePolicyChanges(policyStore, policyChanges, logger.child({ service: "policy" }))));
    const registry = createSqlTenantRegistry(db, { generations });
    // The tenant stdio and unauthenticated loopback serve is registered like any other: listed,
    // and its keys and settings set without a `tenants create` first. Another process sharing the
    // database may have registered it already; an operator's changes to it are kept.
    await registry.createTenant({ id: STANDALONE_TENANT, displayName: "local user (stdio and loopback)" }).then(
      () => logger.info({ tenant: STANDALONE_TENANT }, "registered the local tenant in the tenant registry"),
      (err: unknown) => {
        if (!(err instanceof ChaosError && err.code === "already_exists")) throw err;
      },
    );
    const tenantDirectory = createInProcessClient(TenantDirectoryService, createTenantDirectoryHandlers(registry));
    const adminHandlers = createTenantAdminHandlers(registry, {
      operatorUpstreams: operatorUpstreamNames(options.upstreams?.file),
      checkUrl: createUpstreamUrlCheck({ allowedAddresses: options.upstreams?.allowedAddresses ?? [] }),
    });
    // Set once the edge's catalog exists: a tenant whose generation moved has its own upstream tools read again.
    const upstreamsChanged: { tell?: (tenant: string) => void; approved?: () => Promise<void> } = {};
    // Approvals recorded where the lock is read-only: read by the operator's upstreams at once (below), as any serving process reads them on the generation.
    const approvalStore = createSqlUpstreamApprovals(db, { generations });
    const recordingApprovals = createUpstreamApprovalHandlers(approvalStore, { record: true });
    const tenants = {
      directory: createCredentialDirectory({
        client: tenantDirectory,
        generations,
        logger: logger.child({ service: "edge" }),
        // Another process sharing this database and Redis changed the tenant: its own upstreams too, maybe.
        onTenantChange: (tenant) => upstreamsChanged.tell?.(tenant),
      }),
      admin: createInProcessClient(TenantAdminService, adminHandlers),
      approvals: createInProcessClient(UpstreamApprovalService, {
        ...recordingApprovals,
        recordApproval: async (req, ctx) => {
          const answer = await recordingApprovals.recordApproval(req, ctx);
          await upstreamsChanged.approved?.();
          return answer;
        },
      }),
      generations,
    };
    // The limits are the tenant's, not this process's: with Redis every `serve` process and edge
    // replica sharing it takes from the same buckets (the edge's limiter, its outage fallback
    // included); without it this one process holds them.
    const rateLimits = options.rateLimits ?? NO_RATE_LIMITS;
    const registryLimits = (tenant: string) => tenants.directory.tenantLimits(tenant);
    const limiter = redis
      ? createRedisRateLimiter(redis, rateLimits, { prefix: config.redisPrefix, logger: logger.child({ service: "edge" }), registry: registryLimits })
      : (options.limiter ?? createMemoryRateLimiter(rateLimits, registryLimits));
    const memory = createInProcessClient(MemoryService, createMemoryHandlers(createSqlMemoryStore(db)));
    const council = createInProcessClient(CouncilService, createCouncilHandlers(createSqlCouncilStore(db)));
    const ledgerCore = createLedgerCore({
      db,
      keyring,
      // The tenant registry's spend and tool-approval policies over the file's.
      policies: createRegistryOperatorPolicies(ledgerPolicies, { client: tenantDirectory, generations, logger: logger.child({ service: "ledger" }) }),
      nonces,
      // Policy chooses which approval channels count for spends and tool receipts too.
      policy,
      logger: logger.child({ service: "ledger" }),
      version: options.version,
      origin: config.ledgerOrigin,
      ...(config.webhooks ? { webhooks: config.webhooks } : {}),
    });
    // Appends still queued when the process stops are written, and integrated, before the database closes.
    closers.push(() => ledgerCore.store.close());
    // First of the two: the webhook dispatcher stops (rows in flight are given back) before the drain.
    closers.push(() => ledgerCore.close());
    const ledger = createInProcessClient(LedgerService, createLedgerHandlers(ledgerCore));
    const snapshots = config.policySnapshots ? createPolicySnapshots(policy, { logger: logger.child({ service: "cognition" }), changes: policyChanges }) : undefined;
    if (snapshots) closers.push(async () => snapshots.close());
    const approvalsRead = createInProcessClient(UpstreamApprovalService, createUpstreamApprovalHandlers(approvalStore, { record: false }));
    const upstreams = options.upstreams ? await serveUpstreams(options.upstreams, options.version, logger, ledger, undefined, { client: approvalsRead, generations }) : undefined;
    if (upstreams) closers.push(() => upstreams.close());
    if (upstreams) upstreamsChanged.approved = () => upstreams.approvalsChanged();
    // Each tenant's own upstreams from the registry (docs/federation.md §12), read again when its generation moves.
    const tenantUpstreams = createTenantUpstreams({
      directory: tenantDirectory,
      generations,
      allowedAddresses: options.upstreams?.allowedAddresses ?? [],
      secrets: options.upstreams?.secrets ?? upstreamSecretsOf({}),
      ...(options.upstreams?.maxResultBytes !== undefined ? { maxResultBytes: options.upstreams.maxResultBytes } : {}),
      ...(options.upstreams?.tokenMaxSeconds !== undefined ? { tokenMaxSeconds: options.upstreams.tokenMaxSeconds } : {}),
      version: options.version,
      logger: logger.child({ service: "cognition" }),
      operatorNames: new Set(upstreams?.transports.keys() ?? []),
      // A tenant's drift in its own ledger; a tool quarantined or released leaves or joins its list at once.
      ledger,
      onDrift: (tenant) => upstreamsChanged.tell?.(tenant),
    });
    closers.push(() => tenantUpstreams.close());
    const cognitionDeps = createDefaultCognitionDeps({
      ...(upstreams ? { upstreamCapabilities: upstreams.capabilities, upstreams } : {}),
      ...(options.upstreams ? { httpAllowedAddresses: options.upstreams.allowedAddresses } : {}),
      ...(snapshots ? { policySnapshots: snapshots } : {}),
      tenantUpstreams,
      provider: config.provider,
      policy,
      memory,
      plans,
      approvals,
      ledger,
      logger: logger.child({ service: "cognition" }),
    });
    // The capabilities are held to chaoscore.lock while serving, as the cognition service run alone holds them (docs/contracts.md §7).
    if (options.contractLockFile) await pinCapabilitiesAtStart(cognitionDeps.registry, options.contractLockFile);
    const cognition = createInProcessClient(CognitionService, createCognitionHandlers(cognitionDeps));

    // The registry's retention settings, applied a minute after the start and then hourly (a
    // cluster runs `chaos-core tenants retention` on a schedule instead).
    const retention = startRetentionSweeps({ admin: tenants.admin, memory, council, ledger, policy }, logger.child({ service: "retention" }));
    closers.push(async () => retention.stop());

    // Last: the endpoint answers only once everything it calls is up, and closes first.
    let admin: RunningAdminServer | undefined;
    if (options.admin) {
      const started = await startAdminServer({
        dataDir: config.dataDir,
        cognition,
        ledger,
        policy,
        tenantAdmin: tenants.admin,
        upstreamApprovals: tenants.approvals,
        memory,
        council,
        exportLedger: (tenant) => ledgerCore.store.exportLedger(tenant),
        logger: logger.child({ service: "admin" }),
        ...(options.signInLinks ? { signInLinks: options.signInLinks } : {}),
      });
      closers.push(() => started.close());
      admin = started;
    }

    // The upstream tools cognition serves, as the edge lists them (docs/federation.md §6).
    const upstreamCatalog = createUpstreamCatalog(cognition, logger.child({ service: "edge" }));
    await upstreamCatalog.refresh();
    // A tool quarantined or approved leaves or joins the list at once.
    upstreams?.drift.onChange(() => void upstreamCatalog.refresh().catch(() => {}));
    // An approval re-pinned (a changed schema, a tool pinned later): listed as pinned now.
    upstreams?.onCapabilities(() => void upstreamCatalog.refresh().catch(() => {}));
    upstreamsChanged.tell = (tenant) => upstreamCatalog.tenantChanged?.(tenant);
    // Each change to a tenant is announced once committed — by this process's admin path (its
    // `upstreams add|remove|disable|enable`), or, with Redis, by any process sharing it: the
    // tenant's sessions hear tools/list_changed at once. The credential directory, finding the
    // same change on the tenant's next request, tells the catalog too (told together, read once).
    const stopHearing = await generations.watch({
      changed: (tenant) => upstreamCatalog.tenantChanged?.(tenant),
      missed: () => void upstreamCatalog.refresh().catch(() => {}),
    });
    closers.push(stopHearing);

    return {
      ...(admin ? { admin } : {}),
      tenants,
      exportLedger: (tenant) => ledgerCore.store.exportLedger(tenant),
      deps: {
        policy,
        memory,
        cognition,
        upstreams: upstreamCatalog,
        council,
        ledger,
        sessions,
        ...(events ? { events } : {}),
        limiter,
        logger,
        version: options.version,
      },
      stores: {
        database: config.databaseUrl ? "postgres" : `embedded (${embeddedDbPath(config.dataDir)})`,
        policy: policySource,
        sessions: config.redisUrl ? "redis" : "in-process",
        plans: config.redisUrl ? "redis" : "in-process",
        rateLimits: config.redisUrl ? "redis" : "in-process",
        provider: describeProviderChoice(config.provider),
        ledgerKey: `${keyring.active.kid} (${config.ledgerKeysFile ?? "generated in the data directory"})`,
        ledgerPolicies: ledgerPolicies.source,
        webhooks: config.webhooks ? new URL(config.webhooks.url).origin : "off",
        upstreams: upstreams?.summary ?? "none",
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
