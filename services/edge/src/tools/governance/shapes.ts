import { z } from "zod";
import type { JsonObject, MessageInitShape } from "@bufbuild/protobuf";
import type { Entry, ToolCallSchema } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { seqNumber } from "../../definitions/ledger-access.js";

/** Largest arguments object a governed call may carry (canonical hashing reads all of it). */
export const MAX_ARGUMENTS_BYTES = 64 * 1024;
/** Largest receipt accepted: a real one is well under 1 KiB. */
export const MAX_RECEIPT_BYTES = 8 * 1024;

/**
 * A JSON object of at most `maxBytes` when serialized and `maxKeys` top-level keys, so a
 * garbage or oversized value is refused at the edge with the field named.
 */
export function boundedJsonObject(maxBytes: number, maxKeys = 256) {
  return z
    .record(z.string().max(256, "has a key longer than 256 characters"), z.json())
    .superRefine((value, ctx) => {
      const keys = Object.keys(value).length;
      if (keys > maxKeys) ctx.addIssue({ code: "custom", message: `has ${keys} keys; at most ${maxKeys}` });
      const bytes = Buffer.byteLength(JSON.stringify(value), "utf8");
      if (bytes > maxBytes) ctx.addIssue({ code: "custom", message: `is ${bytes} bytes of JSON; at most ${maxBytes}` });
    });
}

/** A ledger sequence number given back by the caller (`request_seq`). */
export const requestSeq = z.number().int().min(1).max(Number.MAX_SAFE_INTEGER);

/** A receipt's lifetime as the ledger takes it. */
export const ttlSeconds = z
  .number()
  .int()
  .min(1)
  .max(3600)
  .optional()
  .describe("Seconds an issued receipt stays valid (default 300)");

/**
 * The call a tool-approval receipt is bound to. Strict: host-bound values (tenant, index…) come
 * from the operator's tenant configuration, so a `host_bound` or `_meta` here is refused rather
 * than silently dropped or trusted. Wildcards and other ambiguity are the ledger's to deny (and
 * record); the edge refuses only what is not a call at all.
 */
export const toolCallInput = z
  .strictObject({
    tool: z.string().min(1).max(256).describe("Exact tool name, e.g. stripe.create_charge (no wildcards)"),
    resource: z.string().min(1).max(512).describe("Exact account, tenant or scope, e.g. acct_live_acme"),
    arguments: boundedJsonObject(MAX_ARGUMENTS_BYTES).describe("As the call will send them; the operator's host-bound fields are added, not to be overridden"),
  })
  .describe("The governed call");

/** A receipt passed back whole. Only bounded here: its schema and signature are the ledger's to check (and record). */
export const receiptInput = z
  .record(z.string().max(64, "has a key longer than 64 characters"), z.json())
  .superRefine((value, ctx) => {
    const bytes = Buffer.byteLength(JSON.stringify(value), "utf8");
    if (bytes > MAX_RECEIPT_BYTES) ctx.addIssue({ code: "custom", message: `is ${bytes} bytes of JSON; a receipt is at most ${MAX_RECEIPT_BYTES}` });
  })
  .describe("The signed receipt exactly as issued, whole (a changed field fails its signature)");

/** Any JSON object in a result (gate results, receipts, decision logs, ledger info). */
export const jsonObjectOutput = z.record(z.string(), z.unknown());

/** The proto form of a validated call. */
export function toProtoCall(call: z.output<typeof toolCallInput>): MessageInitShape<typeof ToolCallSchema> {
  return { tool: call.tool, resource: call.resource, arguments: call.arguments as JsonObject };
}

/** One audit entry as a tool shows it. */
export const entryOutput = z.object({
  seq: z.number().int(),
  ts: z.string().describe("RFC 3339 UTC, exactly as hashed"),
  tenant: z.string(),
  session: z.string(),
  principal: z.string(),
  event: jsonObjectOutput,
  content_hash: z.string().describe("content_hash(event)"),
  prev_sig: z.string(),
  sig: z.string().describe("chain_hash(prev_sig, {seq, ts, tenant, session, principal, event, content_hash})"),
});

/** Maps a ledger entry to {@link entryOutput}. */
export function toEntryOutput(e: Entry): z.output<typeof entryOutput> {
  return {
    seq: seqNumber(e.seq),
    ts: e.ts,
    tenant: e.tenant,
    session: e.session,
    principal: e.principal,
    event: e.event ?? {},
    content_hash: e.contentHash,
    prev_sig: e.prevSig,
    sig: e.sig,
  };
}
