import { createHmac } from "node:crypto";

/** The headers of one delivery attempt (Standard Webhooks v1). */
export interface WebhookHeaders {
  readonly "webhook-id": string;
  readonly "webhook-timestamp": string;
  readonly "webhook-signature": string;
}

/**
 * A message's id: the same on every attempt, so a receiver dedupes retries by it. One entry
 * makes at most one event (`msg_<tenant>_<seq>`), one checkpoint one `ledger.checkpoint`
 * (`msg_<tenant>_checkpoint_<size>`), and a tenant id holds only `[a-z0-9_-]`, so it is unique
 * and header-safe.
 */
export function webhookId(tenant: string, key: number | { readonly kind: "entry" | "checkpoint"; readonly entrySeq: number }): string {
  if (typeof key === "number") return `msg_${tenant}_${key}`;
  return key.kind === "checkpoint" ? `msg_${tenant}_checkpoint_${key.entrySeq}` : `msg_${tenant}_${key.entrySeq}`;
}

/** `v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`. */
export function signatureOf(key: Buffer, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac("sha256", key).update(`${id}.${timestamp}.${body}`).digest("base64")}`;
}

/**
 * The headers that sign `body` for one attempt at `at`: one signature per key, space separated
 * (a receiver accepts any one it knows, so secrets rotate without a gap). The timestamp is this
 * attempt's, in whole seconds, so a receiver can refuse an old replay.
 */
export function signWebhook(keys: readonly Buffer[], id: string, body: string, at: Date): WebhookHeaders {
  if (keys.length === 0) throw new Error("a webhook needs at least one signing key");
  const timestamp = Math.floor(at.getTime() / 1000);
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": keys.map((k) => signatureOf(k, id, timestamp, body)).join(" "),
  };
}
