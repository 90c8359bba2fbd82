/**
 * The real ledger service for the edge's tests: the ledger's own test fixture (the handlers its
 * gRPC main serves, a fresh Postgres database and Ed25519 keyring), with the in-process nonce
 * cache standalone uses, reached through an in-process client. Nothing is simulated.
 */
import { createLedgerFixture } from "../../../ledger/src/test-support/ledger-fixture.js";
import type { LedgerClient } from "../deps.js";

export interface TestLedger {
  readonly client: LedgerClient;
  close(): Promise<void>;
}

/**
 * Starts the ledger. `policies` is an operator policy document (`{defaults, tenants}`, as the
 * ledger's policy file); without it every tenant gets the reference spend policies and no
 * tool-approval policy.
 */
export async function startTestLedger(name: string, policies?: unknown): Promise<TestLedger> {
  const fixture = await createLedgerFixture({ name: `chaoscore_edge_${name}`, nonces: "memory", ...(policies !== undefined ? { policies } : {}) });
  return { client: fixture.client, close: () => fixture.close() };
}
