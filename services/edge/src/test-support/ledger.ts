/**
 * The real ledger service for the edge's tests: the ledger's own test fixture (the handlers its
 * gRPC main serves, a fresh Postgres database and Ed25519 keyring), with the in-process nonce
 * cache standalone uses, reached through an in-process client. Nothing is simulated.
 */
import type { ServiceClient } from "@chaos-core/kit";
import type { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { createLedgerFixture } from "../../../ledger/src/test-support/ledger-fixture.js";
import type { LedgerClient } from "../clients/service-clients.js";

export interface TestLedger {
  readonly client: LedgerClient;
  close(): Promise<void>;
}

/**
 * Starts the ledger. `policies` is an operator policy document (`{defaults, tenants}`, as the
 * ledger's policy file); without it every tenant gets the reference spend policies and no
 * tool-approval policy. `policy` is the policy service the ledger asks for approval channels:
 * pass the edge's (`startTestServices(...).policy`) so both read the same `approvalChannels`;
 * without it the ledger has its own, on the default policy.
 */
export async function startTestLedger(name: string, policies?: unknown, policy?: ServiceClient<typeof PolicyService>): Promise<TestLedger> {
  const fixture = await createLedgerFixture({
    name: `chaoscore_edge_${name}`,
    nonces: "memory",
    ...(policies !== undefined ? { policies } : {}),
    ...(policy ? { policy } : {}),
  });
  return { client: fixture.client, close: () => fixture.close() };
}
