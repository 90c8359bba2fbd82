import { parseCheckpointText, parseNote } from "../log/checkpoint.js";
import type { SignedCheckpoint } from "../log/integrator.js";

/**
 * A `ledger.checkpoint` event (issue 35 item 3): each signed checkpoint leaves the operator's
 * database as it is made, through the durable outbox (written in the transaction that signs it),
 * so a receiver — an auditor's store, a SIEM, a witness feeder — keeps the tree heads the ledger
 * committed to and can later hold the log to them (`chaos-core ledger verify
 * --trusted-checkpoint`). The note is the signed checkpoint itself, verifiable with the public key.
 */
export interface CheckpointWebhookEvent {
  readonly type: "ledger.checkpoint";
  /** When it was signed, RFC 3339. */
  readonly timestamp: string;
  readonly data: {
    readonly tenant: string;
    /** The log's origin, as the note names it. */
    readonly origin: string;
    readonly size: number;
    /** The RFC 6962 root, base64 (as the note's root line). */
    readonly root_hash: string;
    /** The signed note (C2SP tlog-checkpoint), verbatim. */
    readonly note: string;
  };
}

export function checkpointEventOf(tenant: string, checkpoint: SignedCheckpoint, signedAt: Date): CheckpointWebhookEvent {
  const { origin } = parseCheckpointText(parseNote(checkpoint.note).text);
  return {
    type: "ledger.checkpoint",
    timestamp: signedAt.toISOString(),
    data: { tenant, origin, size: checkpoint.size, root_hash: checkpoint.root.toString("base64"), note: checkpoint.note },
  };
}
