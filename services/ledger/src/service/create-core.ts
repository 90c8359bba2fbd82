import type { Db, Logger, ServiceClient } from "@chaos-core/kit";
import type { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import { createPolicyChannelSource } from "../adapters/approval-channels.js";
import type { NonceCache } from "../adapters/nonce-cache.js";
import type { WebhookConfig } from "../config.js";
import type { Keyring } from "../keys/keyring.js";
import { emitEntryLogRecords } from "../log/entry-log-records.js";
import { createLedgerStore } from "../log/ledger-store.js";
import { createWebhookDispatcher, type WebhookDispatcher } from "../webhooks/dispatcher.js";
import { notifies } from "../webhooks/events.js";
import { createWebhookOutbox } from "../webhooks/outbox.js";
import { LedgerCore } from "./ledger-core.js";
import type { OperatorPolicies } from "../adapters/operator-policies.js";

/** What {@link createLedgerCore} wires; the database is migrated by the caller. */
export interface LedgerCoreOptions {
  readonly db: Db;
  readonly keyring: Keyring;
  readonly policies: OperatorPolicies;
  readonly nonces: NonceCache;
  /**
   * The policy service (gRPC when the ledger runs alone, in-process in standalone): it says which
   * approval channels may answer a spend or a tool receipt.
   */
  readonly policy: ServiceClient<typeof PolicyService>;
  readonly logger: Logger;
  readonly version: string;
  /** Checkpoint origin prefix; each tenant's log is `<origin>/<tenant>`. */
  readonly origin?: string;
  /**
   * Signed approval notifications (docs/approvals.md §6): with it, the entries that notify write
   * an outbox row in their flush transaction and a dispatcher sends them (started here, stopped
   * by `LedgerCore.close`). Without it nothing is written or sent.
   */
  readonly webhooks?: WebhookConfig;
  readonly now?: () => Date;
}

/**
 * The ledger core on a database: the store signs checkpoints with the keyring's active key
 * (the same operator key that signs receipts), under one origin per tenant, and the policy
 * service chooses the approval channels.
 */
export function createLedgerCore(options: LedgerCoreOptions): LedgerCore {
  const { db, keyring, policies, nonces, logger, version } = options;
  const webhooks = options.webhooks;
  const outbox = webhooks ? createWebhookOutbox(db, webhooks.publicUrl !== undefined ? { publicUrl: webhooks.publicUrl } : {}) : undefined;
  let dispatcher: WebhookDispatcher | undefined;
  const store = createLedgerStore(db, {
    batches: {
      inTransaction: async (q, tenant, entries) => {
        if (outbox) await outbox.enqueue(q, tenant, entries);
      },
      committed: (tenant, entries) => {
        // Each entry leaves as an OTLP log record once it is committed (best effort; the outbox is the durable path).
        emitEntryLogRecords(entries);
        if (outbox && entries.some((e) => notifies(e.event))) dispatcher?.wake(tenant);
      },
    },
    // Asked for (CHAOS_CORE_WEBHOOK_CHECKPOINTS): each signed checkpoint leaves through the outbox too (ledger.checkpoint), written with it.
    ...(outbox && webhooks?.checkpoints ? { integration: { onCheckpoint: (q, tenant, checkpoint) => outbox.enqueueCheckpoint(q, tenant, checkpoint) } } : {}),
    key: {
      name: `${options.origin ?? "chaos-core/ledger"}/{tenant}`,
      privateKey: keyring.active.privateKey,
      publicKey: keyring.active.publicKey,
    },
    ...(options.now ? { now: options.now } : {}),
  });
  const channels = createPolicyChannelSource(options.policy);
  if (outbox && webhooks) {
    dispatcher = createWebhookDispatcher({ outbox, config: webhooks, logger: logger.child({ component: "webhooks" }), version });
    dispatcher.start();
  }
  return new LedgerCore({
    store,
    db,
    keyring,
    policies,
    nonces,
    channels,
    logger,
    version,
    ...(dispatcher ? { webhooks: dispatcher } : {}),
    ...(options.now ? { now: options.now } : {}),
  });
}
