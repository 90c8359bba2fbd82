import type { Db, Logger } from "@chaos-core/kit";
import type { NonceCache } from "../adapters/nonce-cache.js";
import type { Keyring } from "../keys/keyring.js";
import { createLedgerStore } from "../log/ledger-store.js";
import { LedgerCore } from "./ledger-core.js";
import type { OperatorPolicies } from "./operator-policies.js";

/** What {@link createLedgerCore} wires; the database is migrated by the caller. */
export interface LedgerCoreOptions {
  readonly db: Db;
  readonly keyring: Keyring;
  readonly policies: OperatorPolicies;
  readonly nonces: NonceCache;
  readonly logger: Logger;
  readonly version: string;
  /** Checkpoint origin prefix; each tenant's log is `<origin>/<tenant>`. */
  readonly origin?: string;
  readonly now?: () => Date;
}

/**
 * The ledger core on a database: the store signs checkpoints with the keyring's active key
 * (the same operator key that signs receipts), under one origin per tenant.
 */
export function createLedgerCore(options: LedgerCoreOptions): LedgerCore {
  const { db, keyring, policies, nonces, logger, version } = options;
  const store = createLedgerStore(db, {
    key: {
      name: `${options.origin ?? "chaos-core/ledger"}/{tenant}`,
      privateKey: keyring.active.privateKey,
      publicKey: keyring.active.publicKey,
    },
    ...(options.now ? { now: options.now } : {}),
  });
  return new LedgerCore({ store, db, keyring, policies, nonces, logger, version, ...(options.now ? { now: options.now } : {}) });
}
