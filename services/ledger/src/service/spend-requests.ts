import { ChaosError, canonicalJson, contentHash, type Queryable } from "@chaos-core/kit";
import type { ApprovalChannel } from "../adapters/approval-channels.js";
import { SPEND_REQUEST_WINDOW_MS } from "../domain/spend-request-window.js";
import { parseCanonicalJson, parseEvent } from "../log/entry.js";

/** How a person's answer to a spend request reached the ledger (`approved_via` in ledger.proto). */
export const SPEND_ANSWER_VIAS = ["approver_role", "elicitation", "operator", "console"] as const;
export type SpendAnswerVia = (typeof SPEND_ANSWER_VIAS)[number];

/** The canonical channel name (docs/approvals.md §1) of each `approved_via`. */
export const CHANNEL_OF_VIA: Readonly<Record<SpendAnswerVia, ApprovalChannel>> = {
  approver_role: "approver",
  elicitation: "client_elicitation",
  operator: "operator",
  console: "console",
};

/** The principal the local admin endpoint answers as; `approved_via: "operator"` needs it. */
export const OPERATOR_PRINCIPAL = "operator";

/** `approved_via` of a spend answer, checked. */
export function spendAnswerVia(via: string): SpendAnswerVia {
  if ((SPEND_ANSWER_VIAS as readonly string[]).includes(via)) return via as SpendAnswerVia;
  throw new ChaosError("invalid_argument", `approved_via: must be one of ${SPEND_ANSWER_VIAS.map((v) => `"${v}"`).join(", ")}, got "${via}"`);
}

/**
 * Who an answer is recorded as (`spend.approved.approver`, the gate's "approved by", and the
 * actor of a receipt signed for it): `alice` (approver key), `console:alice`, `operator`,
 * `elicitation:<principal>`.
 */
export function answerActor(via: SpendAnswerVia, principal: string): string {
  switch (via) {
    case "approver_role":
      return principal;
    case "elicitation":
      return `elicitation:${principal}`;
    case "console":
      return `console:${principal}`;
    case "operator":
      return OPERATOR_PRINCIPAL;
  }
}

/** Where a spend request stands; see {@link spendRequestState}. */
export const SPEND_REQUEST_STATES = ["PENDING", "APPROVED", "COLLECTED", "DECLINED", "BLOCKED", "EXPIRED"] as const;
export type SpendRequestState = (typeof SPEND_REQUEST_STATES)[number];

/** A stored spend request with its request entry, its answer and its collection, as read. */
export interface StoredSpendRequest {
  readonly requestSeq: number;
  readonly kind: "spend" | "finance";
  readonly policy: string;
  readonly tool: string | null;
  readonly argsHash: string;
  /** Every argument, as CHP values (a `100.0` stays a float, so it hashes as recorded). */
  readonly arguments: Record<string, unknown>;
  readonly principal: string;
  readonly session: string;
  readonly createdAt: Date;
  /** The request entry's event and content hash. */
  readonly entry: { readonly event: Record<string, unknown>; readonly contentHash: string };
  /** The entry that answered it (`spend.approved` or `spend.declined`), if any. */
  readonly answer?: { readonly seq: number; readonly principal: string; readonly event: Record<string, unknown> };
  /** The entry that recorded its collection, if any. */
  readonly collectSeq?: number;
}

/** A row to store with a HITL_REQUIRED request, inside the flush transaction that records it. */
export interface NewSpendRequest {
  readonly requestSeq: number;
  readonly kind: "spend" | "finance";
  readonly policy: string;
  readonly tool?: string;
  readonly argsHash: string;
  readonly arguments: Record<string, unknown>;
  readonly principal: string;
  readonly session: string;
  readonly createdAt: Date;
}

/** Stores a spend request; call it from the hook of the entry that records the request. */
export async function insertSpendRequest(tx: Queryable, tenant: string, r: NewSpendRequest): Promise<void> {
  await tx.query(
    `INSERT INTO ledger.spend_requests (tenant_id, request_seq, kind, policy_name, tool, args_hash, arguments, principal, session, created_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7::json, $8, $9, $10)`,
    [tenant, r.requestSeq, r.kind, r.policy, r.tool ?? null, r.argsHash, canonicalJson(r.arguments), r.principal, r.session, r.createdAt.toISOString()],
  );
}

interface RequestRow {
  request_seq: string | number;
  kind: string;
  policy_name: string;
  tool: string | null;
  args_hash: string;
  arguments_text: string;
  principal: string;
  session: string;
  created_at: Date | string;
  request_event: string;
  request_content_hash: string;
  answer_seq: string | number | null;
  answer_principal: string | null;
  answer_event: string | null;
  collect_seq: string | number | null;
}

// The answer and the collection are the marker rows committed with the entries that record
// them; the request entry is joined so its recorded args_hash is what the arguments are checked
// against (a row whose entry is missing is not a request).
const SELECT_REQUESTS = `
  SELECT r.request_seq, r.kind, r.policy_name, r.tool, r.args_hash, r.arguments::text AS arguments_text,
         r.principal, r.session, r.created_at,
         e.event::text AS request_event, e.content_hash AS request_content_hash,
         a.entry_seq AS answer_seq, ae.principal AS answer_principal, ae.event::text AS answer_event,
         c.entry_seq AS collect_seq
    FROM ledger.spend_requests r
    JOIN ledger.entries e ON e.tenant_id = r.tenant_id AND e.seq = r.request_seq
    LEFT JOIN ledger.nonces a ON a.tenant_id = r.tenant_id AND a.nonce = 'request-' || r.request_seq
    LEFT JOIN ledger.entries ae ON ae.tenant_id = r.tenant_id AND ae.seq = a.entry_seq
    LEFT JOIN ledger.nonces c ON c.tenant_id = r.tenant_id AND c.nonce = 'collect-' || r.request_seq
   WHERE r.tenant_id = $1`;

function toRequest(row: RequestRow): StoredSpendRequest {
  const args = parseCanonicalJson(row.arguments_text);
  return {
    requestSeq: Number(row.request_seq),
    kind: row.kind === "finance" ? "finance" : "spend",
    policy: row.policy_name,
    tool: row.tool,
    argsHash: row.args_hash,
    arguments: args !== null && typeof args === "object" && !Array.isArray(args) ? (args as Record<string, unknown>) : {},
    principal: row.principal,
    session: row.session,
    createdAt: new Date(row.created_at),
    entry: { event: parseEvent(row.request_event), contentHash: row.request_content_hash },
    ...(row.answer_seq !== null && row.answer_event !== null
      ? { answer: { seq: Number(row.answer_seq), principal: row.answer_principal ?? "", event: parseEvent(row.answer_event) } }
      : {}),
    ...(row.collect_seq !== null ? { collectSeq: Number(row.collect_seq) } : {}),
  };
}

/** Which stored requests to read; every filter is optional. */
export interface SpendRequestFilter {
  readonly requestSeq?: number;
  /** The requester's requests for one exact call (the finance tools' pick-up). */
  readonly call?: { readonly principal: string; readonly tool: string; readonly argsHash: string };
  /** Only requests no one has answered, created after this instant (not expired). */
  readonly pendingAfter?: Date;
  readonly limit?: number;
}

/** Reads stored spend requests of one tenant, oldest first. */
export async function readSpendRequests(q: Queryable, tenant: string, filter: SpendRequestFilter = {}): Promise<StoredSpendRequest[]> {
  const params: unknown[] = [tenant];
  let sql = SELECT_REQUESTS;
  const param = (v: unknown) => {
    params.push(v);
    return `$${params.length}`;
  };
  if (filter.requestSeq !== undefined) sql += ` AND r.request_seq = ${param(filter.requestSeq)}`;
  if (filter.call) {
    sql += ` AND r.principal = ${param(filter.call.principal)} AND r.tool = ${param(filter.call.tool)} AND r.args_hash = ${param(filter.call.argsHash)}`;
  }
  if (filter.pendingAfter) sql += ` AND a.nonce IS NULL AND r.created_at > ${param(filter.pendingAfter.toISOString())}`;
  sql += ` ORDER BY r.request_seq LIMIT ${param(filter.limit ?? 500)}`;
  const res = await q.query<RequestRow>(sql, params);
  return res.rows.map(toRequest);
}

/** The marker of a request's one answer (approval or decline). */
export const answerMarker = (seq: number) => `request-${seq}`;
/** The marker of an approval's one collection. */
export const collectMarker = (seq: number) => `collect-${seq}`;

/** Inserts a marker row in `ledger.nonces`, once; false when it was there already. */
export async function insertMarker(tx: Queryable, tenant: string, marker: string, seq: number): Promise<boolean> {
  const res = await tx.query(
    "INSERT INTO ledger.nonces (tenant_id, nonce, entry_seq) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING nonce",
    [tenant, marker, seq],
  );
  return res.rows.length > 0;
}

/** The instant a request stops being answerable and collectable. */
export function expiresAt(r: StoredSpendRequest): Date {
  return new Date(r.createdAt.getTime() + SPEND_REQUEST_WINDOW_MS);
}

/**
 * Where a request stands at `now`: DECLINED or BLOCKED once so answered; an approval that
 * locked is APPROVED until collected (COLLECTED); anything unanswered, or approved and never
 * collected, is EXPIRED after the window.
 */
export function spendRequestState(r: StoredSpendRequest, now: Date): SpendRequestState {
  const expired = now.getTime() >= expiresAt(r).getTime();
  const answer = r.answer?.event;
  if (answer?.type === "spend.declined") return "DECLINED";
  if (answer?.type === "spend.approved") {
    if (answer.state !== "LOCKED") return "BLOCKED";
    if (r.collectSeq !== undefined) return "COLLECTED";
    return expired ? "EXPIRED" : "APPROVED";
  }
  return expired ? "EXPIRED" : "PENDING";
}

/**
 * Whether the stored arguments are the ones the request entry recorded: they hash to the
 * entry's args_hash (and the row says the same). A row changed behind the ledger's back fails
 * here, so nothing is approved or collected on arguments the chain does not vouch for.
 */
export function argumentsVerified(r: StoredSpendRequest): boolean {
  const recorded = r.entry.event.args_hash;
  return typeof recorded === "string" && recorded === r.argsHash && contentHash(r.arguments) === recorded;
}

/** The recorded answerer and channel of an answered request. */
export function answerOf(r: StoredSpendRequest): { answeredBy: string; channel: string; reason: string } | undefined {
  const ev = r.answer?.event;
  if (!ev) return undefined;
  const by = ev.type === "spend.declined" ? ev.declined_by : ev.approver;
  return {
    answeredBy: typeof by === "string" ? by : r.answer!.principal,
    channel: typeof ev.channel === "string" ? ev.channel : CHANNEL_OF_VIA[ev.approved_via === "elicitation" ? "elicitation" : "approver_role"],
    reason: typeof ev.reason === "string" ? ev.reason : "",
  };
}

/**
 * The channels policy allowed for a request when it was made, as its entry recorded them, and
 * the rule that chose them; none for a request recorded before channels were stored. Shown to
 * the people who may answer; an answer is checked against policy's channels when it is given.
 */
export function requestChannels(r: StoredSpendRequest): { channels: string[]; rule: string } {
  const ev = r.entry.event;
  const listed = Array.isArray(ev.approval_channels) ? ev.approval_channels.filter((c): c is string => typeof c === "string") : [];
  return { channels: listed, rule: typeof ev.channels_rule === "string" ? ev.channels_rule : "" };
}

/** A stored spend request as a caller sees it. */
export interface SpendRequestView {
  readonly request: StoredSpendRequest;
  readonly state: SpendRequestState;
  readonly expiresAt: Date;
  readonly argumentsVerified: boolean;
  readonly answer?: { readonly answeredBy: string; readonly channel: string; readonly reason: string };
  /** The channels policy allowed when it was made, and the rule; empty for an older request. */
  readonly channels: { readonly channels: readonly string[]; readonly rule: string };
}

/** A stored request as {@link SpendRequestView} shows it at `now`. */
export function spendRequestView(request: StoredSpendRequest, now: Date): SpendRequestView {
  const answer = answerOf(request);
  return {
    request,
    state: spendRequestState(request, now),
    expiresAt: expiresAt(request),
    argumentsVerified: argumentsVerified(request),
    ...(answer ? { answer } : {}),
    channels: requestChannels(request),
  };
}

/** Why a HITL_REQUIRED entry without a stored request cannot be answered. */
export function legacyRequest(seq: number): string {
  return `ledger entry ${seq} was recorded before spend requests were stored with their arguments, so no person can be shown what it would run: make the request again`;
}

/** A refusal decided inside a flush transaction, thrown once its entry is committed. */
export interface Refusal {
  readonly code: string;
  readonly problem: string;
  readonly errorCode: "permission_denied" | "failed_precondition";
}

/** The error a recorded refusal answers with, naming the entry that records it. */
export function refusalError(r: Refusal, seq: number): ChaosError {
  return new ChaosError(r.errorCode, `${r.code}: ${r.problem} (refusal recorded as ledger entry ${seq})`);
}
