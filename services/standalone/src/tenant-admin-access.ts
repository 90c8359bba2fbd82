import {
  ContextSigner,
  createGrpcClient,
  createInProcessClient,
  createMemoryTenantGenerations,
  createPostgresDb,
  loadGrpcTransportConfig,
  openGrpcTls,
  createLogger,
  type Db,
  type Env,
  type ServiceClient,
  type TenantGenerations,
} from "@chaos-core/kit";
import { TenantAdminService } from "@chaos-core/proto/gen/chaoscore/admin/v1/admin_pb.js";
import { CouncilService } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { UpstreamApprovalService } from "@chaos-core/proto/gen/chaoscore/policy/v1/upstream_approvals_pb.js";
import { adminRpcClient } from "./admin-rpc.js";
import type { TenantDataServices } from "./tenant-data.js";
import { storesFromCommandLine, UsageError } from "./command-line.js";
import { loadUpstreamsConfig } from "./config.js";
import { accessDataDir } from "./data-dir-access.js";
import { openEmbeddedDb } from "./data-dir-layout.js";

// How `chaos-core tenants` and `keys` reach the tenant registry: a cluster's tenant admin API,
// Postgres, or the data directory's server or embedded database.

/** The flags that say where the registry is. */
export type WhereFlags = {
  readonly "admin-addr"?: string | undefined;
  readonly "database-url"?: string | undefined;
  readonly "data-dir"?: string | undefined;
};

/** The admin client and how to let it go; with the data services where the registry was reached through them. */
export interface Admin {
  client: ServiceClient<typeof TenantAdminService>;
  /** The operator's upstream approvals where the lock is read-only (`chaos-core upstreams approve --overlay`). */
  approvals: ServiceClient<typeof UpstreamApprovalService>;
  where: string;
  /** Set when the tenants' data is reachable (a running server, or a cluster's addresses). */
  data?: TenantDataServices;
  /** The audit ledger, when reachable through the same way (a running server; a cluster's `LEDGER_ADDR`). */
  ledger?: ServiceClient<typeof LedgerService>;
  close(): Promise<void>;
}

/** Why export, delete and retention cannot run on what `where` reached. */
export const NEEDS_SERVICES =
  "needs the tenant's services: run it against a running server (chaos-core serve on this data directory) or a cluster " +
  "(--admin-addr with MEMORY_ADDR, COUNCIL_ADDR, LEDGER_ADDR and POLICY_ADDR)";

async function directAdmin(open: () => Promise<{ db: Db; release(): Promise<void> }>, generations: TenantGenerations, where: string, env: Env): Promise<Admin> {
  const { migratePolicy, createSqlTenantRegistry, createSqlUpstreamApprovals, createTenantAdminHandlers, createUpstreamApprovalHandlers, createUpstreamUrlCheck, operatorUpstreamNames } = await import("@chaos-core/policy");
  const { db, release } = await open();
  try {
    await migratePolicy(db);
  } catch (err) {
    await release();
    throw err;
  }
  const upstreams = loadUpstreamsConfig(env);
  const checks = { operatorUpstreams: operatorUpstreamNames(upstreams.file), checkUrl: createUpstreamUrlCheck({ allowedAddresses: upstreams.allowedAddresses }) };
  const client = createInProcessClient(TenantAdminService, createTenantAdminHandlers(createSqlTenantRegistry(db, { generations }), checks));
  const approvals = createInProcessClient(UpstreamApprovalService, createUpstreamApprovalHandlers(createSqlUpstreamApprovals(db, { generations }), { record: true }));
  return { client, approvals, where, close: release };
}

/** Finds the registry: the cluster's admin API, Postgres, or the data directory's (the usage's "Where the registry is", tenants-usage.ts). */
export async function openAdmin(values: WhereFlags, env: Env): Promise<Admin> {
  const addr = values["admin-addr"] ?? env.CHAOS_CORE_ADMIN_ADDR;
  if (addr !== undefined && addr !== "") {
    if (values["database-url"] !== undefined || values["data-dir"] !== undefined) throw new UsageError("give --admin-addr or a store (--database-url, --data-dir), not both");
    const key = env.CHAOS_CORE_CONTEXT_KEY;
    if (!key) throw new Error("CHAOS_CORE_CONTEXT_KEY is required to call the tenant admin API (the cluster's call-context key)");
    const tlsConfig = loadGrpcTransportConfig(env).tls;
    const tls = tlsConfig ? openGrpcTls(tlsConfig, { logger: createLogger("chaos-core-tenants", "silent") }) : undefined;
    const signer = new ContextSigner(key);
    const options = tls ? { tls } : {};
    const grpc = createGrpcClient(TenantAdminService, addr, signer, options);
    // On the admin port, where RecordApproval is answered.
    const approvals = createGrpcClient(UpstreamApprovalService, addr, signer, options);
    const closers: Array<() => void> = [() => grpc.close(), () => approvals.close()];
    let data: TenantDataServices | undefined;
    let ledger: ServiceClient<typeof LedgerService> | undefined;
    const { MEMORY_ADDR, COUNCIL_ADDR, LEDGER_ADDR, POLICY_ADDR } = env;
    if (LEDGER_ADDR && !(MEMORY_ADDR && COUNCIL_ADDR && POLICY_ADDR)) {
      const alone = createGrpcClient(LedgerService, LEDGER_ADDR, signer, options);
      closers.push(() => alone.close());
      ledger = alone.client;
    }
    if (MEMORY_ADDR && COUNCIL_ADDR && LEDGER_ADDR && POLICY_ADDR) {
      const memory = createGrpcClient(MemoryService, MEMORY_ADDR, signer, options);
      const council = createGrpcClient(CouncilService, COUNCIL_ADDR, signer, options);
      const ledgerGrpc = createGrpcClient(LedgerService, LEDGER_ADDR, signer, options);
      const policy = createGrpcClient(PolicyService, POLICY_ADDR, signer, options);
      closers.push(() => memory.close(), () => council.close(), () => ledgerGrpc.close(), () => policy.close());
      data = { admin: grpc.client, memory: memory.client, council: council.client, ledger: ledgerGrpc.client, policy: policy.client };
    }
    ledger ??= data?.ledger;
    return {
      client: grpc.client,
      approvals: approvals.client,
      where: `the tenant admin API at ${addr}`,
      ...(data ? { data } : {}),
      ...(ledger ? { ledger } : {}),
      close: async () => {
        for (const close of closers) close();
        tls?.close();
      },
    };
  }
  const stores = storesFromCommandLine(values, env);
  if (stores.kind === "postgres") {
    const redisUrl = env.REDIS_URL;
    let generations = createMemoryTenantGenerations();
    let closeRedis = async () => undefined as void;
    if (redisUrl) {
      const redisModule = await import("@chaos-core/kit/redis");
      const { createRedisTenantGenerations } = await import("@chaos-core/kit");
      const redis = await redisModule.connectRedis(redisUrl, { logger: createLogger("chaos-core-tenants", "silent"), name: "chaos-core-tenants" });
      generations = createRedisTenantGenerations(redis, { prefix: env.CHAOS_CORE_REDIS_PREFIX || "chaoscore:" });
      closeRedis = () => redisModule.closeRedis(redis);
    }
    const admin = await directAdmin(
      async () => {
        const db = createPostgresDb({ connectionString: stores.url, max: 2, applicationName: "chaos-core-tenants-cli" });
        return { db, release: async () => (await db.close(), await closeRedis()) };
      },
      generations,
      redisUrl ? "postgres (edges told through Redis)" : "postgres",
      env,
    );
    return admin;
  }
  const access = await accessDataDir(stores.dataDir);
  if (access.running) {
    const admin = adminRpcClient(TenantAdminService, access.admin);
    const data: TenantDataServices = {
      admin,
      memory: adminRpcClient(MemoryService, access.admin),
      council: adminRpcClient(CouncilService, access.admin),
      ledger: adminRpcClient(LedgerService, access.admin),
      policy: adminRpcClient(PolicyService, access.admin),
    };
    return { client: admin, approvals: adminRpcClient(UpstreamApprovalService, access.admin), data, ledger: data.ledger, where: `the server running on ${stores.dataDir}`, close: async () => undefined };
  }
  return directAdmin(
    async () => {
      try {
        // Created on a first use: an operator may register tenants before the first start.
        const db = await openEmbeddedDb(stores.dataDir, { create: true });
        return { db, release: async () => (await db.close(), await access.release()) };
      } catch (err) {
        await access.release();
        throw err;
      }
    },
    createMemoryTenantGenerations(),
    `the embedded database in ${stores.dataDir} (no server running; the next start serves it)`,
    env,
  );
}
