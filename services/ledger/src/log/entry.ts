import { ChaosError, auditEntryChainHash, canonicalJson, canonicalJsonAndHash, isPlainObject, parseChpJson } from "@chaos-core/kit";

/**
 * One audit-log entry as stored, exported and verified. Field names are the CHP names the
 * chain hashes (`content_hash`, `prev_sig`), so an export line is readable by any CHP tool.
 */
export interface LedgerEntry {
  /** 1-based position in the tenant's log; leaf `seq - 1` of its Merkle tree. */
  seq: number;
  /** RFC 3339 UTC with milliseconds, as signed. */
  ts: string;
  tenant: string;
  session: string;
  principal: string;
  /** The event as CHP values (a `100.0` read back is a ChpFloat, so it hashes as written). */
  event: Record<string, unknown>;
  /** `contentHash(event)`. */
  content_hash: string;
  /** The previous entry's `sig`; `""` for the first. */
  prev_sig: string;
  /** `chainHash(prev_sig, {seq, ts, tenant, session, principal, event, content_hash})`. */
  sig: string;
}

/** The object a `sig` covers: the entry without its chain fields. */
export function signedPart(e: Omit<LedgerEntry, "prev_sig" | "sig">): Record<string, unknown> {
  return {
    seq: e.seq,
    ts: e.ts,
    tenant: e.tenant,
    session: e.session,
    principal: e.principal,
    event: e.event,
    content_hash: e.content_hash,
  };
}

/** The Merkle leaf data of an entry: the bytes of its `sig` (hex-decoded). */
export function leafData(sig: string): Buffer {
  return Buffer.from(sig, "hex");
}

/** An event ready to be written: its canonical text (stored as is) and hash. */
export interface CanonicalEvent {
  event: Record<string, unknown>;
  text: string;
  hash: string;
}

/**
 * Checks an event and computes its canonical text and hash. The stored text is exactly what
 * was hashed, so a verifier that parses it with {@link parseChpJson} hashes the same bytes.
 */
export function canonicalEvent(event: unknown): CanonicalEvent {
  if (!isPlainObject(event)) throw new ChaosError("invalid_argument", "an audit event is a JSON object");
  // CHP defines contentHash as SHA-256 of exactly this text; hashing the text already made
  // saves a second canonicalisation per entry on the append path (verify uses contentHash).
  return { event, ...canonicalJsonAndHash(event) };
}

/** Refuses what Postgres text cannot hold (NUL) and what no caller means (a lone surrogate). */
export function assertLedgerText(value: unknown, field: string): asserts value is string {
  if (typeof value !== "string") throw new ChaosError("invalid_argument", `${field} must be a string`);
  if (value.includes("\u0000") || /[\uD800-\uDFFF]/u.test(value)) {
    throw new ChaosError("invalid_argument", `${field} contains a NUL or an unpaired surrogate`);
  }
}

/** Computes the chain fields of the next entry; `eventText` is the event's canonical text (an append has it). */
export function chainEntry(prevSig: string, e: Omit<LedgerEntry, "prev_sig" | "sig">, eventText: string): LedgerEntry {
  return { ...e, prev_sig: prevSig, sig: auditEntryChainHash(prevSig, e, eventText) };
}

/**
 * Reads JSON text that should be canonical, for hashing. When plain `JSON.parse` reads it back
 * to the very same canonical text, every number in it already renders as written (no `100.0`,
 * no integer beyond 2^53, no duplicate key, no whitespace), so those values hash exactly as
 * {@link parseChpJson}'s would — at a fraction of the cost, which is what makes verifying a
 * large ledger quick. Any other text (tampered, or with such numbers) takes the lossless path.
 */
export function parseCanonicalJson(text: string): unknown {
  let fast: unknown;
  try {
    fast = JSON.parse(text);
    if (canonicalJson(fast) === text) return fast;
  } catch {
    // Not JSON, or not canonical-able (a lone surrogate): the lossless parser decides.
  }
  return parseChpJson(text);
}

/** Parses an event's stored text back to CHP values. */
export function parseEvent(text: string): Record<string, unknown> {
  const value = parseCanonicalJson(text);
  if (!isPlainObject(value)) throw new ChaosError("invalid_argument", "the stored event is not a JSON object");
  return value;
}

/**
 * One export line for an entry. The event is spliced in as its stored text so that the line
 * carries the exact bytes that were hashed; the rest is plain JSON.
 */
export function entryLine(e: Omit<LedgerEntry, "event">, eventText: string): string {
  const head = JSON.stringify({ type: "entry", seq: e.seq, ts: e.ts, tenant: e.tenant, session: e.session, principal: e.principal });
  const tail = JSON.stringify({ content_hash: e.content_hash, prev_sig: e.prev_sig, sig: e.sig });
  return `${head.slice(0, -1)},"event":${eventText},${tail.slice(1)}\n`;
}

/** One export line for a checkpoint. */
export function checkpointLine(size: number, note: string): string {
  return `${JSON.stringify({ type: "checkpoint", size, note })}\n`;
}

/** The first line of an export: what it is and which log. */
export function headerLine(tenant: string, origin: string): string {
  return `${JSON.stringify({ type: "header", format: EXPORT_FORMAT, tenant, origin })}\n`;
}

/** The `format` of a ledger export's header line. */
export const EXPORT_FORMAT = "chaos-core-ledger/1";
