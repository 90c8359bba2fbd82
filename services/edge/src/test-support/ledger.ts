/**
 * The real ledger service for the edge's tests: the handlers the ledger's gRPC main serves,
 * over a fresh Postgres database (`test/support/postgres.ts`), a fresh Ed25519 keyring and the
 * in-process nonce cache standalone uses, reached through an in-process client. Nothing is
 * simulated: the gate, receipts, nonces and the hash chain are the ledger's own.
 */
import { createInProcessClient, createLogger, createPostgresDb } from "@chaos-core/kit";
import {
  createKeyring,
  createLedgerCore,
  createLedgerHandlers,
  createMemoryNonceCache,
  generateSigningKey,
  migrateLedger,
  parseOperatorPolicies,
  referenceOperatorPolicies,
} from "@chaos-core/ledger";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { createTestDatabase } from "../../../../test/support/postgres.js";
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
  const database = await createTestDatabase(`chaoscore_edge_${name}`);
  const db = createPostgresDb({ connectionString: database.url });
  try {
    await migrateLedger(db);
    const core = createLedgerCore({
      db,
      keyring: createKeyring(generateSigningKey()),
      policies: policies === undefined ? referenceOperatorPolicies() : parseOperatorPolicies(policies, "test policies"),
      nonces: createMemoryNonceCache(),
      logger: createLogger("ledger-test", "silent"),
      version: "0.0.0-test",
    });
    return {
      client: createInProcessClient(LedgerService, createLedgerHandlers(core)),
      close: async () => {
        await db.close();
        await database.drop();
      },
    };
  } catch (err) {
    await db.close();
    await database.drop();
    throw err;
  }
}
