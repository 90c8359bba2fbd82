import { SPEND_REQUEST_WINDOW_MS } from "../domain/spend-request-window.js";
import type { LedgerEntry } from "../log/entry.js";
import { notifiesUpstream, upstreamEventOf, type UpstreamDriftWebhookEvent } from "./upstream-events.js";

/** The event types a webhook receives (docs/approvals.md §6; `upstream.drift`: docs/federation.md §4). */
export const WEBHOOK_EVENT_TYPES = ["approval.pending", "approval.resolved", "upstream.drift"] as const;
export type WebhookEventType = (typeof WEBHOOK_EVENT_TYPES)[number];

/** How an approval was resolved: a spend approval the gate then blocks on a hard rule is `blocked`. */
export type WebhookOutcome = "approved" | "rejected" | "blocked";

/**
 * What an event says about one approval. Names, hashes and links only: never the call's
 * arguments, a receipt, a nonce, a key, a token or an MCP session id, so a chat channel or a
 * pager can hold it. Fields a ledger entry does not record are absent, never guessed.
 */
export interface WebhookEventData {
  readonly tenant: string;
  readonly kind: "step" | "spend";
  /** A step's approval (cognition's id). */
  readonly approval_id?: string;
  /** A spend's or finance call's request: the sequence number of the entry that asked. */
  readonly request_seq?: number;
  /** The entry this event is about (the request, or the answer). */
  readonly ledger_seq: number;
  readonly capability?: string;
  readonly tool?: string;
  readonly spend_policy?: string;
  readonly risk?: string;
  readonly requested_by?: string;
  readonly expires_at?: string;
  /** The channels policy accepts for it (canonical names, docs/approvals.md §1). */
  readonly channels?: readonly string[];
  /** `<CHAOS_CORE_PUBLIC_URL>/approvals/step/<id>` or `/approvals/spend/<seq>`; absent without a public URL. */
  readonly console_url?: string;
  readonly args_hash?: string;
  readonly outcome?: WebhookOutcome;
  /** The channel that answered. */
  readonly channel?: string;
  /** Who answered, as the ledger records it (`alice`, `console:alice`, `operator`). */
  readonly resolved_by?: string;
}

/** An approval webhook's JSON body (Standard Webhooks' `type`, `timestamp`, `data`); upstream-events.ts has the other kind. */
export interface WebhookEvent {
  readonly type: "approval.pending" | "approval.resolved";
  /** The entry's time, RFC 3339. */
  readonly timestamp: string;
  readonly data: WebhookEventData;
}

/** A stored spend request, as far as an event about it goes (read beside the entry). */
export interface SpendRequestFacts {
  readonly requestSeq: number;
  readonly policy: string;
  readonly tool: string | null;
  readonly argsHash: string;
  readonly requestedBy: string;
  readonly createdAt: Date;
  /** The channels recorded in the request entry. */
  readonly channels: readonly string[];
}

/** What turns an entry into an event besides the entry itself. */
export interface WebhookEventContext {
  /** `CHAOS_CORE_PUBLIC_URL`, without a trailing slash. */
  readonly publicUrl?: string;
  /** The spend request the entry asks for or answers ({@link spendRequestSeqOf}). */
  readonly request?: SpendRequestFacts;
}

/** A recorded string of a sane size, else nothing (an entry never puts a blob into an event). */
function text(v: unknown, max = 256): string | undefined {
  return typeof v === "string" && v.length > 0 && v.length <= max ? v : undefined;
}

function seqOf(v: unknown): number | undefined {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 1 ? v : undefined;
}

function names(v: unknown): string[] | undefined {
  if (!Array.isArray(v) || v.length > 16) return undefined;
  const out = v.map((c) => text(c, 64));
  return out.every((c): c is string => c !== undefined) ? out : undefined;
}

/** Only the fields that are set, so an absent fact is absent in the JSON too. */
function defined(data: Record<string, unknown>): WebhookEventData {
  return Object.fromEntries(Object.entries(data).filter(([, v]) => v !== undefined)) as unknown as WebhookEventData;
}

/** Whether the event held a spend or finance call for a person (its entry is the request). */
function isHeldSpend(ev: Record<string, unknown>): boolean {
  return (ev.type === "spend_gate.evaluated" && ev.state === "HITL_REQUIRED") || (ev.type === "reference.requested" && ev.status === "HITL_REQUIRED");
}

/**
 * The spend request an entry's event is about, when it asks for one (its own sequence number)
 * or answers one (`request_seq`); the outbox reads it beside the entry.
 */
export function spendRequestSeqOf(entry: Pick<LedgerEntry, "seq" | "event">): number | undefined {
  const ev = entry.event;
  if (isHeldSpend(ev)) return entry.seq;
  if (ev.type === "spend.approved" || ev.type === "spend.declined") return seqOf(ev.request_seq);
  return undefined;
}

/** Whether an event can become a webhook event (a cheap test, before anything is read). */
export function notifies(event: Record<string, unknown>): boolean {
  return (
    (event.type === "step.outcome" && event.status === "pending_approval") ||
    event.type === "approval.resolution" ||
    event.type === "spend.approved" ||
    event.type === "spend.declined" ||
    isHeldSpend(event) ||
    notifiesUpstream(event)
  );
}

function consoleUrl(publicUrl: string | undefined, path: string): string | undefined {
  return publicUrl === undefined ? undefined : `${publicUrl}/approvals/${path}`;
}

/**
 * The webhook event a ledger entry makes, or nothing. `approval.pending`: cognition's
 * `step.outcome` with status `pending_approval`, and the HITL_REQUIRED spend and finance
 * requests (`spend_gate.evaluated`, `reference.requested`). `approval.resolved`: a step's
 * `approval.resolution`, a spend's `spend.approved` and `spend.declined`. Every field is picked
 * by name from what the entry records: nothing else of the entry reaches the body.
 * `upstream.drift`: the upstream entries (upstream-events.ts).
 */
export function webhookEventOf(entry: LedgerEntry, context: WebhookEventContext = {}): WebhookEvent | UpstreamDriftWebhookEvent | undefined {
  const ev = entry.event;
  if (notifiesUpstream(ev)) return upstreamEventOf(entry);
  const base = { tenant: entry.tenant, ledger_seq: entry.seq };
  if (ev.type === "step.outcome" && ev.status === "pending_approval") {
    const approvalId = text(ev.approvalId, 128);
    if (!approvalId) return undefined;
    return {
      type: "approval.pending",
      timestamp: entry.ts,
      data: defined({
        ...base,
        kind: "step",
        approval_id: approvalId,
        capability: text(ev.capability),
        risk: text(ev.risk, 32),
        requested_by: entry.principal,
        expires_at: text(ev.approvalExpiresAt, 64),
        channels: names(ev.approvalChannels),
        console_url: consoleUrl(context.publicUrl, `step/${encodeURIComponent(approvalId)}`),
        args_hash: text(ev.argsHash, 128),
      }),
    };
  }
  if (ev.type === "approval.resolution") {
    const approvalId = text(ev.approvalId, 128);
    if (!approvalId) return undefined;
    return {
      type: "approval.resolved",
      timestamp: entry.ts,
      data: defined({
        ...base,
        kind: "step",
        approval_id: approvalId,
        capability: text(ev.capability),
        console_url: consoleUrl(context.publicUrl, `step/${encodeURIComponent(approvalId)}`),
        args_hash: text(ev.argsHash, 128),
        outcome: ev.approved === true ? "approved" : "rejected",
        channel: text(ev.channel, 64),
        // The resolver's principal, not `resolvedBy`: that one names the MCP session of an elicitation.
        resolved_by: text(ev.principal) ?? entry.principal,
      }),
    };
  }
  const requestSeq = spendRequestSeqOf(entry);
  if (requestSeq === undefined) return undefined;
  const r = context.request?.requestSeq === requestSeq ? context.request : undefined;
  const held = isHeldSpend(ev);
  const createdAt = r?.createdAt ?? (held ? new Date(entry.ts) : undefined);
  const spend = {
    ...base,
    kind: "spend",
    request_seq: requestSeq,
    tool: held ? text(ev.tool) : (r?.tool ?? undefined),
    spend_policy: held ? text(ev.policy) : r?.policy,
    requested_by: held ? entry.principal : r?.requestedBy,
    expires_at: createdAt ? new Date(createdAt.getTime() + SPEND_REQUEST_WINDOW_MS).toISOString() : undefined,
    channels: held ? names(ev.approval_channels) : r ? [...r.channels] : undefined,
    console_url: consoleUrl(context.publicUrl, `spend/${requestSeq}`),
    args_hash: held ? text(ev.args_hash, 128) : r?.argsHash,
  };
  if (held) return { type: "approval.pending", timestamp: entry.ts, data: defined(spend) };
  const approved = ev.type === "spend.approved";
  return {
    type: "approval.resolved",
    timestamp: entry.ts,
    data: defined({
      ...spend,
      outcome: approved ? (ev.state === "LOCKED" ? "approved" : "blocked") : "rejected",
      channel: text(ev.channel, 64),
      resolved_by: text(approved ? ev.approver : ev.declined_by) ?? entry.principal,
    }),
  };
}
