/**
 * Real policy, memory, council and cognition services for the edge's tests: the same handlers the gRPC
 * mains serve, on a fresh Postgres database (`test/support/real-services.ts`), reached through
 * in-process clients. No fakes:
 * cognition uses the built-in capabilities and the heuristic provider (no model). No built-in
 * capability is high risk, so a test that needs one asks for {@link TEST_PAYOUT} too.
 */
import { z } from "zod";
import { createInProcessClient, createLogger } from "@chaos-core/kit";
import {
  BUILT_IN_CAPABILITIES,
  createCapabilityRegistry,
  defineCapability,
  createCognitionHandlers,
  createMemoryApprovalStore,
  createInMemoryAuditSink,
  createLedgerAuditSink,
  createMemoryPlanStore,
  createProvider,
  type AuditSink,
  type InMemoryAuditSink,
  type LedgerClient,
} from "@chaos-core/cognition";
import { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { startRealServices } from "../../../../test/support/real-services.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import type { SessionStore } from "../sessions/session-store.js";
import { createMemorySessionStore } from "../sessions/memory-store.js";

/** The high-risk test capability: records a payout in the test's memory (never anywhere else). */
export const TEST_PAYOUT = "test.payout";

/** Options of {@link startTestServices}. */
export interface TestServicesOptions {
  /** Registers {@link TEST_PAYOUT}, risk high: what the default policy holds for a person. */
  readonly highRisk?: boolean;
  /** How long cognition's approvals can be answered (its store's TTL; a day when unset). */
  readonly approvalTtlSeconds?: number;
  /**
   * The ledger cognition's audit also goes to, once it is started (it needs these services'
   * policy first): each event is appended there too, as `chaos-core serve` records it, and the
   * answer's entry seq is what `ResolveApproval` returns.
   */
  readonly auditLedger?: () => LedgerClient | undefined;
}

/** The in-memory sink, and the ledger's when there is one. */
function teeAudit(memory: InMemoryAuditSink, ledger: () => LedgerClient | undefined): AuditSink {
  return {
    async record(event) {
      await memory.record(event);
      const client = ledger();
      return client ? createLedgerAuditSink(client).record(event) : undefined;
    },
  };
}

/** A high-risk capability whose handler only notes that it ran, with what. */
function payoutCapability(runs: unknown[]) {
  return defineCapability({
    name: TEST_PAYOUT,
    description: "Pays an amount to a beneficiary (a test capability: it only records the call).",
    risk: "high",
    inputSchema: z.object({ beneficiary: z.string().min(1), amount: z.number().positive() }),
    outputSchema: z.object({ paid: z.boolean() }),
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true },
    handler(input) {
      runs.push(input);
      return Promise.resolve({ paid: true });
    },
  });
}

export interface TestServices {
  readonly policy: EdgeDeps["policy"];
  readonly memory: EdgeDeps["memory"];
  readonly cognition: EdgeDeps["cognition"];
  readonly council: EdgeDeps["council"];
  /** Every decision and outcome the cognition executor recorded. */
  readonly audit: InMemoryAuditSink;
  /** The inputs {@link TEST_PAYOUT}'s handler ran with, in order (with `highRisk` only). */
  readonly payouts: readonly unknown[];
  /** Deps for an edge over these services, with its own session store unless one is given. */
  deps(sessions?: SessionStore): EdgeDeps;
  /** Stores a policy document (protobuf JSON, as in policy.json) for a tenant. */
  putPolicy(tenant: string, document: Record<string, unknown>): Promise<number>;
  close(): Promise<void>;
}

export async function startTestServices(name: string, options: TestServicesOptions = {}): Promise<TestServices> {
  const real = await startRealServices(`chaoscore_edge_${name}`);
  const { policy, memory, council } = real;
  const logger = createLogger("edge-test", "silent");
  const audit = createInMemoryAuditSink();
  const payouts: unknown[] = [];
  const cognition = createInProcessClient(
    CognitionService,
    createCognitionHandlers({
      registry: createCapabilityRegistry([...BUILT_IN_CAPABILITIES, ...(options.highRisk ? [payoutCapability(payouts)] : [])]),
      provider: createProvider({ id: "heuristic", selection: "inferred" }),
      policy,
      memory,
      plans: createMemoryPlanStore(),
      audit: options.auditLedger ? teeAudit(audit, options.auditLedger) : audit,
      approvals: createMemoryApprovalStore(options.approvalTtlSeconds ? { ttlSeconds: options.approvalTtlSeconds } : {}),
      logger,
    }),
  );
  return {
    policy,
    memory,
    cognition,
    council,
    audit,
    payouts,
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
