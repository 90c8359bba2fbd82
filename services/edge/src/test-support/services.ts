/**
 * Real policy, memory, council and cognition services for the edge's tests: the same handlers the gRPC
 * mains serve, on a fresh Postgres database (`test/support/real-services.ts`), reached through
 * in-process clients. No fakes:
 * cognition uses the built-in capabilities and the heuristic provider (no model).
 */
import { createInProcessClient, createLogger } from "@chaos-core/kit";
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
import { startRealServices } from "../../../../test/support/real-services.js";
import type { EdgeDeps } from "../deps.js";
import type { SessionStore } from "../sessions/session-store.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";

export interface TestServices {
  readonly policy: EdgeDeps["policy"];
  readonly memory: EdgeDeps["memory"];
  readonly cognition: EdgeDeps["cognition"];
  readonly council: EdgeDeps["council"];
  /** Every decision and outcome the cognition executor recorded. */
  readonly audit: InMemoryAuditSink;
  /** Deps for an edge over these services, with its own session store unless one is given. */
  deps(sessions?: SessionStore): EdgeDeps;
  /** Stores a policy document (protobuf JSON, as in policy.json) for a tenant. */
  putPolicy(tenant: string, document: Record<string, unknown>): Promise<number>;
  close(): Promise<void>;
}

export async function startTestServices(name: string): Promise<TestServices> {
  const real = await startRealServices(`chaoscore_edge_${name}`);
  const { policy, memory, council } = real;
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
    council,
    audit,
    deps: (sessions) => ({
      policy,
      memory,
      cognition,
      council,
      sessions: sessions ?? createMemorySessionStore(),
      logger,
      version: "0.0.0-test",
    }),
    putPolicy: (tenant, document) => real.putPolicy(tenant, document),
    close: () => real.close(),
  };
}
