/**
 * The real policy, memory and council services (the handlers their gRPC mains serve) on a fresh
 * Postgres database, reached through in-process clients: what the cognition and edge tests and the
 * bench run against.
 */
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { createInProcessClient, createLogger, createPostgresDb, type ChangeCounters, type Db, type ServiceClient } from "@chaos-core/kit";
import { createCouncilHandlers, createSqlCouncilStore, migrateCouncil } from "@chaos-core/council";
import { createMemoryHandlers, createSqlMemoryStore, migrateMemory } from "@chaos-core/memory";
import { announcePolicyChanges, createPolicyHandlers, createSqlPolicyStore, migratePolicy, type PolicyStore } from "@chaos-core/policy";
import { CouncilService } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { PolicyDocumentSchema, PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { createTestDatabase, type TestDatabase } from "./postgres.js";

export interface RealServices {
  readonly policy: ServiceClient<typeof PolicyService>;
  readonly memory: ServiceClient<typeof MemoryService>;
  readonly council: ServiceClient<typeof CouncilService>;
  /** Stores a policy document (protobuf JSON) for a tenant, as an operator does; returns its version. */
  putPolicy(tenant: string, document: Record<string, unknown>): Promise<number>;
  /** Closes the stores and drops the database. */
  close(): Promise<void>;
}

/**
 * `policyChanges`: the policy store announces each stored version there, as the policy main does
 * with Redis. `policyNow`: the policy service's clock, what rules' conditions read as `now`.
 */
export async function startRealServices(prefix: string, options: { policyChanges?: ChangeCounters; policyNow?: () => Date } = {}): Promise<RealServices> {
  const database: TestDatabase = await createTestDatabase(prefix);
  const db: Db = createPostgresDb({ connectionString: database.url });
  await migrateMemory(db);
  await migratePolicy(db);
  await migrateCouncil(db);
  const policyStore: PolicyStore = createSqlPolicyStore(db);
  const served = options.policyChanges ? announcePolicyChanges(policyStore, options.policyChanges, createLogger("policy", "silent")) : policyStore;
  const policy = createInProcessClient(PolicyService, createPolicyHandlers(served, options.policyNow ? { now: options.policyNow } : {}));
  const memory = createInProcessClient(MemoryService, createMemoryHandlers(createSqlMemoryStore(db)));
  const council = createInProcessClient(CouncilService, createCouncilHandlers(createSqlCouncilStore(db)));
  return {
    policy,
    memory,
    council,
    async putPolicy(tenant, document) {
      const res = await policy.putPolicy(
        { document: fromJson(PolicyDocumentSchema, document as JsonValue) },
        { ctx: { tenant, principal: "operator" } },
      );
      return Number(res.version);
    },
    async close() {
      await policyStore.close();
      await db.close();
      await database.drop();
    },
  };
}
