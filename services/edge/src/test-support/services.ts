/**
 * Real policy, memory and cognition services for the edge's tests: the same handlers the gRPC
 * mains serve, on a fresh Postgres database, reached through in-process clients. No fakes:
 * cognition uses the built-in capabilities and the heuristic provider (no model).
 */
import { createInProcessClient, createLogger, createPostgresDb, type Db } from "@chaos-core/kit";
import { createMemoryHandlers, createSqlMemoryStore, migrateMemory } from "@chaos-core/memory";
import { createPolicyHandlers, createSqlPolicyStore, migratePolicy, type PolicyStore } from "@chaos-core/policy";
import {
  BUILT_IN_CAPABILITIES,
  createCapabilityRegistry,
  createCognitionHandlers,
  createMemoryApprovalStore,
  createInMemoryAuditSink,
  createMemoryPlanStore,
  createProvider,
  type InMemoryAuditSink,
} from "@chaos-core/cognition";
import { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import { PolicyDocumentSchema, PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { fromJson, type JsonValue } from "@bufbuild/protobuf";
import { createTestDatabase, type TestDatabase } from "../../../../test/support/postgres.js";
import type { EdgeDeps } from "../deps.js";
import type { SessionStore } from "../sessions/session-store.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";

export interface TestServices {
  readonly policy: EdgeDeps["policy"];
  readonly memory: EdgeDeps["memory"];
  readonly cognition: EdgeDeps["cognition"];
  /** Every decision and outcome the cognition executor recorded. */
  readonly audit: InMemoryAuditSink;
  /** Deps for an edge over these services, with its own session store unless one is given. */
  deps(sessions?: SessionStore): EdgeDeps;
  /** Stores a policy document (protobuf JSON, as in policy.json) for a tenant. */
  putPolicy(tenant: string, document: Record<string, unknown>): Promise<number>;
  close(): Promise<void>;
}

export async function startTestServices(name: string): Promise<TestServices> {
  const database: TestDatabase = await createTestDatabase(`chaoscore_edge_${name}`);
  const db: Db = createPostgresDb({ connectionString: database.url });
  await migrateMemory(db);
  await migratePolicy(db);
  const policyStore: PolicyStore = createSqlPolicyStore(db);
  const policy = createInProcessClient(PolicyService, createPolicyHandlers(policyStore));
  const memory = createInProcessClient(MemoryService, createMemoryHandlers(createSqlMemoryStore(db)));
  const logger = createLogger("edge-test", "silent");
  const audit = createInMemoryAuditSink();
  const cognition = createInProcessClient(
    CognitionService,
    createCognitionHandlers({
      registry: createCapabilityRegistry(BUILT_IN_CAPABILITIES),
      provider: createProvider({ id: "heuristic", selection: "inferred" }),
      policy,
      memory,
      plans: createMemoryPlanStore(),
      audit,
      approvals: createMemoryApprovalStore(),
      logger,
    }),
  );
  return {
    policy,
    memory,
    cognition,
    audit,
    deps: (sessions) => ({
      policy,
      memory,
      cognition,
      sessions: sessions ?? createMemorySessionStore(),
      logger,
      version: "0.0.0-test",
    }),
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
