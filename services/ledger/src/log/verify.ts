import { canonicalJson, chainHash, contentHash, isObject, parseChpJson } from "@chaos-core/kit";
import { openCheckpoint, parseCheckpointText, parseNote, type Checkpoint } from "./checkpoint.js";
import { EXPORT_FORMAT, entryLine, leafData, signedPart, type LedgerEntry } from "./entry.js";
import { TreeFrontier, hashLeaf } from "./merkle.js";
import { verifiersFor, type VerificationKey, type Verifiers } from "./verification-keys.js";

export type { VerificationKey } from "./verification-keys.js";

/**
 * Verifies a ledger with only the public key: every entry's `content_hash` and chain `sig`,
 * then the Merkle tree at every signed checkpoint. The chain alone is unkeyed (whoever can
 * write the table can re-chain it), so a rewritten-and-rechained history is caught by the
 * first signed root it no longer matches; the store signs one checkpoint per commit, so that
 * names the first bad entry to within one commit.
 */

/** What failed. */
export type VerifyCheck =
  | "format"
  | "seq"
  | "tenant"
  | "content_hash"
  | "prev_sig"
  | "sig"
  | "checkpoint_signature"
  | "checkpoint_origin"
  | "checkpoint_root"
  | "missing_entries"
  | "unsigned_entries"
  | "outside_checkpoint"
  | "unintegrated_entries";

/** The first bad entry and why. */
export interface VerifyFailure {
  /** The first entry that cannot be trusted (0 when a checkpoint record cannot even be read). */
  seq: number;
  check: VerifyCheck;
  message: string;
  /**
   * For a checkpoint failure: the entries between the last checkpoint that matched and the one
   * that does not. The first bad entry is somewhere in it; `seq` is its first.
   */
  range?: { from: number; to: number };
}

/** The outcome of {@link verifyLedger}. */
export interface VerifyReport {
  ok: boolean;
  tenant?: string;
  origin?: string;
  entries: number;
  checkpoints: number;
  /** The largest checkpoint size whose root matched. */
  verifiedSize: number;
  /**
   * With `pending: "allow"`: entries after the newest checkpoint, checked by their chain only
   * (sequenced, not yet integrated into a signed checkpoint).
   */
  pending?: number;
  /** When the first pending entry was appended (its `ts`). */
  pendingSince?: string;
  /** Checkpoints kept outside the database that were given ({@link VerifyOptions.outside}). */
  outsideCheckpoints: number;
  /** The largest of them the log matched; 0 when none was given or none matched. */
  outsideSize: number;
  /** The newest checkpoint the log matched, as signed: what a verifier remembers for next time. */
  newest?: { size: number; note: string };
  /**
   * The RFC 6962 root of all entries read, in base64: the encoding of the signed checkpoint's
   * root line and of `inspect_audit_ledger`'s `root_hash`.
   */
  root: string;
  failure?: VerifyFailure;
}


/** Options of {@link verifyLedger}. */
export interface VerifyOptions {
  /** The checkpoint origin to expect; by default the first valid checkpoint's. */
  origin?: string;
  /** The tenant every entry must carry; by default the first entry's. */
  tenant?: string;
  /**
   * Entries after the newest checkpoint whose chain verifies: `"fail"` (the default) reports
   * them as `unsigned_entries`; `"allow"` counts them in `pending` instead — a live log whose
   * integrator has not signed its newest entries yet (or a database read after a crash, before
   * a ledger restarted and integrated them). They are covered by the chain only.
   */
  pending?: "fail" | "allow";
  /**
   * Signed checkpoints kept outside the database — remembered by an earlier verify, or kept by an
   * auditor — which the log must still match: a rewrite or truncation below one fails
   * (`outside_checkpoint`, `missing_entries`) even when every checkpoint in the database was
   * deleted with it.
   */
  outside?: readonly string[];
  /**
   * With `pending: "allow"`: how long an entry may wait for a signed checkpoint (a running ledger
   * signs within seconds); a pending tail older than this is `unintegrated_entries`. Unset: no bound.
   */
  integrationBoundMs?: number;
  /** The clock the bound is measured with (tests). */
  now?: number;
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** The context of the next entry in a chain. */
interface ChainCursor {
  expectedSeq: number;
  /** The previous entry's sig; undefined when it is not known (a segment without its link). */
  prevSig: string | undefined;
  tenant: string | undefined;
}

/** Checks one entry against its predecessor; returns the first failure, if any. */
export function checkEntry(entry: unknown, cursor: ChainCursor): Omit<VerifyFailure, "range"> | undefined {
  const seq = cursor.expectedSeq;
  if (!isObject(entry)) return { seq, check: "format", message: `entry ${seq} is not an object` };
  const e = entry as Partial<Record<keyof LedgerEntry, unknown>>;
  if (e.seq !== seq) {
    return { seq, check: "seq", message: `expected entry ${seq}, found ${JSON.stringify(e.seq) ?? "nothing"}` };
  }
  for (const f of ["ts", "tenant", "session", "principal", "content_hash", "prev_sig", "sig"] as const) {
    if (typeof e[f] !== "string") return { seq, check: "format", message: `entry ${seq}: ${f} is not a string` };
  }
  if (!isObject(e.event)) return { seq, check: "format", message: `entry ${seq}: event is not an object` };
  if (cursor.tenant !== undefined && e.tenant !== cursor.tenant) {
    return { seq, check: "tenant", message: `entry ${seq} belongs to tenant "${String(e.tenant)}", not "${cursor.tenant}"` };
  }
  let hash: string;
  try {
    hash = contentHash(e.event);
  } catch (err) {
    return { seq, check: "format", message: `entry ${seq}: the event cannot be hashed: ${errorText(err)}` };
  }
  if (hash !== e.content_hash) {
    return { seq, check: "content_hash", message: `entry ${seq}: content_hash does not match the event (the event was changed)` };
  }
  if (cursor.prevSig !== undefined && e.prev_sig !== cursor.prevSig) {
    return { seq, check: "prev_sig", message: `entry ${seq}: prev_sig is not entry ${seq - 1}'s sig (the chain is broken)` };
  }
  const full = entry as unknown as LedgerEntry;
  if (chainHash(full.prev_sig, signedPart(full)) !== full.sig) {
    return { seq, check: "sig", message: `entry ${seq}: sig does not match its fields (seq, ts, tenant, session, principal, event or sig was changed)` };
  }
  return undefined;
}

/**
 * Re-hashes a run of consecutive entries `firstSeq..lastSeq`; returns the first failure. With
 * `prevSig` undefined the first entry's link to its predecessor is not checked.
 */
export function verifyChainSegment(
  entries: readonly LedgerEntry[],
  opts: { firstSeq: number; lastSeq: number; prevSig: string | undefined; tenant?: string },
): Omit<VerifyFailure, "range"> | undefined {
  const cursor: ChainCursor = { expectedSeq: opts.firstSeq, prevSig: opts.prevSig, tenant: opts.tenant };
  for (const e of entries) {
    const bad = checkEntry(e, cursor);
    if (bad) return bad;
    cursor.expectedSeq++;
    cursor.prevSig = e.sig;
  }
  if (cursor.expectedSeq <= opts.lastSeq) {
    return { seq: cursor.expectedSeq, check: "seq", message: `entries ${cursor.expectedSeq}..${opts.lastSeq} are missing` };
  }
  return undefined;
}

interface OpenedCheckpoint {
  size: number;
  note: string;
  /** Kept outside the database (remembered, or an auditor's). */
  outside: boolean;
  cp?: Checkpoint;
  error?: string;
}

function openAll(notes: Iterable<string>, verifiers: Verifiers, outside: readonly string[]): OpenedCheckpoint[] {
  const out: OpenedCheckpoint[] = [];
  const tagged = [...[...notes].map((note) => ({ note, outside: false })), ...outside.map((note) => ({ note, outside: true }))];
  for (const { note, outside: kept } of tagged) {
    try {
      const cp = openCheckpoint(note, verifiers(note));
      out.push({ size: cp.size, note, outside: kept, cp });
    } catch (err) {
      // The size it claims orders the failure among the others; it proves nothing.
      let size: number;
      try {
        size = parseCheckpointText(parseNote(note).text).size;
      } catch {
        size = -1;
      }
      out.push({ size, note, outside: kept, error: errorText(err) });
    }
  }
  return out.sort((a, b) => a.size - b.size);
}

/**
 * Verifies entries (in seq order, as iterated) against signed checkpoint notes with only the
 * public key. Reports the first entry that cannot be trusted: an exact seq for a changed event,
 * timestamp, field or sig (the chain), the first entry after the last matching checkpoint when
 * a history was rewritten and re-chained (the signed roots), entries missing at the tail
 * (a checkpoint larger than the log) and entries no checkpoint signs.
 */
export async function verifyLedger(
  entries: Iterable<unknown> | AsyncIterable<unknown>,
  checkpointNotes: Iterable<string>,
  key: VerificationKey,
  options: VerifyOptions = {},
): Promise<VerifyReport> {
  const verifiers = verifiersFor(key);
  const checkpoints = openAll(checkpointNotes, verifiers, options.outside ?? []);
  let origin = options.origin;
  let entryFailure: Omit<VerifyFailure, "range"> | undefined;
  let checkpointFailure: VerifyFailure | undefined;
  let unreadable: VerifyFailure | undefined;
  let verifiedSize = 0;
  let outsideSize = 0;
  let newest: { size: number; note: string } | undefined;
  let firstUnsignedTs: string | undefined;

  const cursor: ChainCursor = { expectedSeq: 1, prevSig: "", tenant: options.tenant };
  const tree = new TreeFrontier();
  let next = 0;

  const checkUpTo = (count: number): void => {
    while (next < checkpoints.length && checkpoints[next]!.size <= count) {
      const c = checkpoints[next++]!;
      if (checkpointFailure) continue;
      if (!c.cp) {
        const message = `checkpoint${c.size >= 0 ? ` at size ${c.size}` : ""} does not verify: ${c.error}`;
        if (c.size < 0) {
          unreadable ??= { seq: 0, check: "checkpoint_signature", message };
        } else {
          checkpointFailure = { seq: verifiedSize + 1, check: "checkpoint_signature", message, range: { from: verifiedSize + 1, to: c.size } };
        }
        continue;
      }
      origin ??= c.cp.origin;
      if (c.cp.origin !== origin) {
        checkpointFailure = {
          seq: verifiedSize + 1,
          check: "checkpoint_origin",
          message: `checkpoint at size ${c.size} is for log "${c.cp.origin}", not "${origin}"`,
          range: { from: verifiedSize + 1, to: c.size },
        };
      } else if (!c.cp.root.equals(tree.root())) {
        checkpointFailure = {
          seq: verifiedSize + 1,
          check: c.outside ? "outside_checkpoint" : "checkpoint_root",
          message: c.outside
            ? `the log is not consistent with the checkpoint of size ${c.size} kept outside the database: entries 1..${c.size} no longer hash to its signed root, ` +
              `so an entry in ${verifiedSize + 1}..${c.size} was changed and the history re-chained (whatever checkpoints the database holds now)`
            : `the signed root at size ${c.size} does not match entries 1..${c.size}: an entry in ${verifiedSize + 1}..${c.size} ` +
              `was changed (history rewritten and re-chained)`,
          range: { from: verifiedSize + 1, to: c.size },
        };
      } else {
        verifiedSize = c.size;
        if (c.outside) outsideSize = c.size;
        newest = { size: c.size, note: c.note };
      }
    }
  };

  checkUpTo(0);
  let count = 0;
  for await (const raw of entries) {
    count++;
    // The first entry past the newest matched checkpoint: how long the tail has waited.
    if (count === verifiedSize + 1) firstUnsignedTs = (raw as Partial<LedgerEntry> | null)?.ts;
    if (!entryFailure) {
      const bad = checkEntry(raw, cursor);
      if (bad) entryFailure = bad;
      const e = raw as Partial<LedgerEntry> | null;
      cursor.tenant ??= typeof e?.tenant === "string" ? e.tenant : undefined;
    }
    // The tree is built from the sigs as stored, failing or not: the signed roots judge them.
    const sig = (raw as Partial<LedgerEntry> | null)?.sig;
    tree.append(hashLeaf(leafData(typeof sig === "string" ? sig : "")));
    cursor.expectedSeq++;
    cursor.prevSig = typeof sig === "string" ? sig : undefined;
    checkUpTo(count);
  }

  let tailFailure: VerifyFailure | undefined;
  let pendingTail = 0;
  if (next < checkpoints.length) {
    const beyond = checkpoints[checkpoints.length - 1]!;
    tailFailure = {
      seq: count + 1,
      check: "missing_entries",
      message: `a checkpoint${beyond.outside ? " kept outside the database" : ""} signs ${beyond.size} entries but only ${count} are present: entries ${count + 1}..${beyond.size} were removed`,
      range: { from: count + 1, to: beyond.size },
    };
  } else if (count > verifiedSize && !checkpointFailure && options.pending === "allow" && next === checkpoints.length && !entryFailure && !unreadable) {
    // Every checkpoint matched and the chain holds through the tail: not yet integrated — unless it has waited too long.
    pendingTail = count - verifiedSize;
    const waitedMs = firstUnsignedTs !== undefined ? (options.now ?? Date.now()) - Date.parse(firstUnsignedTs) : NaN;
    if (options.integrationBoundMs !== undefined && waitedMs > options.integrationBoundMs) {
      tailFailure = {
        seq: verifiedSize + 1,
        check: "unintegrated_entries",
        message:
          `entries ${verifiedSize + 1}..${count} have waited ${Math.round(waitedMs / 1000)} s (since ${firstUnsignedTs}) for a signed checkpoint, longer than the ` +
          `integration bound (${Math.round(options.integrationBoundMs / 1000)} s): a running ledger signs its entries within seconds, so their checkpoints were deleted or no ledger has run since`,
        range: { from: verifiedSize + 1, to: count },
      };
      pendingTail = 0;
    }
  } else if (count > verifiedSize && !checkpointFailure) {
    tailFailure = {
      seq: verifiedSize + 1,
      check: "unsigned_entries",
      message: `entries ${verifiedSize + 1}..${count} are not covered by any signed checkpoint`,
      range: { from: verifiedSize + 1, to: count },
    };
  }

  const failure = pickFirst(entryFailure, checkpointFailure, tailFailure, unreadable);
  const report: VerifyReport = {
    ok: failure === undefined,
    entries: count,
    checkpoints: checkpoints.length,
    verifiedSize,
    outsideCheckpoints: options.outside?.length ?? 0,
    outsideSize,
    root: tree.root().toString("base64"),
  };
  if (options.pending === "allow") report.pending = pendingTail;
  if (pendingTail > 0 && firstUnsignedTs !== undefined) report.pendingSince = firstUnsignedTs;
  if (newest) report.newest = newest;
  if (cursor.tenant !== undefined) report.tenant = cursor.tenant;
  if (origin !== undefined) report.origin = origin;
  if (failure) report.failure = failure;
  return report;
}

/**
 * The failure that names the earliest entry. An exact chain failure inside a checkpoint's
 * range is the better answer than the range's first entry, so it wins there.
 */
function pickFirst(
  entry: Omit<VerifyFailure, "range"> | undefined,
  ...others: Array<VerifyFailure | undefined>
): VerifyFailure | undefined {
  const candidates: VerifyFailure[] = [];
  for (const o of others) {
    if (!o) continue;
    if (entry && o.range && entry.seq >= o.range.from && entry.seq <= o.range.to) continue;
    candidates.push(o);
  }
  if (entry) candidates.unshift(entry);
  const rank = (f: VerifyFailure): number => (f.seq === 0 ? Number.MAX_SAFE_INTEGER : f.seq);
  return candidates.sort((a, b) => rank(a) - rank(b))[0];
}

/** A parsed JSONL export. */
export interface ParsedExport {
  header?: { tenant?: string; origin?: string; format?: string };
  entries: unknown[];
  checkpoints: string[];
}

/** Thrown for an export that is not JSONL of ledger records; the message names the line. */
export class ExportFormatError extends Error {
  override readonly name = "ExportFormatError";
}

/**
 * One export line. An entry line exactly as the store writes it (its event canonical and
 * plainly parseable, see `parseCanonicalJson`) is read with `JSON.parse`; anything else with
 * the lossless parser, so numbers keep their written form.
 */
function parseRecord(line: string): unknown {
  try {
    const fast = JSON.parse(line) as unknown;
    if (isObject(fast) && fast.type === "entry" && isObject(fast.event)) {
      const rebuilt = entryLine(fast as unknown as LedgerEntry, canonicalJson(fast.event));
      if (rebuilt === `${line}\n`) return fast;
    }
  } catch {
    // Fall through to the lossless parser, which reports what is wrong.
  }
  return parseChpJson(line);
}

/**
 * Reads a JSONL export (as text or as lines). Numbers keep their written form (`100.0` stays
 * a float), so events hash exactly as they were signed.
 */
export async function parseExport(source: string | Iterable<string> | AsyncIterable<string>): Promise<ParsedExport> {
  const out: ParsedExport = { entries: [], checkpoints: [] };
  let lineNo = 0;
  const lines = typeof source === "string" ? source.split("\n") : source;
  for await (const chunk of lines) {
    for (const line of chunk.split("\n")) {
      lineNo++;
      if (line.trim() === "") continue;
      let rec: unknown;
      try {
        rec = parseRecord(line);
      } catch (err) {
        throw new ExportFormatError(`line ${lineNo}: ${errorText(err)}`);
      }
      if (!isObject(rec)) throw new ExportFormatError(`line ${lineNo}: not a JSON object`);
      const { type, ...rest } = rec;
      if (type === "entry") out.entries.push(rest);
      else if (type === "checkpoint") {
        if (typeof rest.note !== "string") throw new ExportFormatError(`line ${lineNo}: a checkpoint record has a note`);
        out.checkpoints.push(rest.note);
      } else if (type === "header") {
        if (rest.format !== EXPORT_FORMAT) throw new ExportFormatError(`line ${lineNo}: format ${JSON.stringify(rest.format)} is not ${EXPORT_FORMAT}`);
        out.header = {
          ...(typeof rest.tenant === "string" ? { tenant: rest.tenant } : {}),
          ...(typeof rest.origin === "string" ? { origin: rest.origin } : {}),
          format: EXPORT_FORMAT,
        };
      } else throw new ExportFormatError(`line ${lineNo}: unknown record type ${JSON.stringify(type)}`);
    }
  }
  return out;
}

/**
 * Verifies a JSONL export. The header's tenant and origin (unsigned claims) must agree with
 * the entries and the signed checkpoints.
 */
export async function verifyExport(
  source: string | Iterable<string> | AsyncIterable<string>,
  key: VerificationKey,
  options: VerifyOptions = {},
): Promise<VerifyReport> {
  return verifyParsedExport(await parseExport(source), key, options);
}

/** Verifies an export already parsed (its header read first, e.g. to choose the checkpoints kept outside); as {@link verifyExport}. */
export function verifyParsedExport(parsed: ParsedExport, key: VerificationKey, options: VerifyOptions = {}): Promise<VerifyReport> {
  return verifyLedger(parsed.entries, parsed.checkpoints, key, {
    ...(parsed.header?.origin !== undefined ? { origin: parsed.header.origin } : {}),
    ...(parsed.header?.tenant !== undefined ? { tenant: parsed.header.tenant } : {}),
    ...options,
  });
}

/** What {@link verifyStoredLedger} needs of a store (a `LedgerReader` or `LedgerStore`). */
export interface LedgerSource {
  readLedger(tenant: string): AsyncIterable<
    { type: "entry"; entry: LedgerEntry } | { type: "checkpoint"; checkpoint: { note: string } }
  >;
}

/**
 * Verifies a tenant's live ledger, read through the store up to one committed size (entries
 * appended meanwhile are left for the next run). A `LedgerStore` integrates first and reads up
 * to the checkpoint that covers everything appended before the call; a keyless `LedgerReader`
 * reads every entry, so pass `pending: "allow"` to accept a tail not yet integrated.
 */
export async function verifyStoredLedger(
  source: LedgerSource,
  tenant: string,
  key: VerificationKey,
  options: VerifyOptions = {},
): Promise<VerifyReport> {
  // Checkpoints must be known before the entries they sign are checked, and the store yields
  // each checkpoint after its last entry: collect both, then verify.
  const entries: LedgerEntry[] = [];
  const notes: string[] = [];
  for await (const r of source.readLedger(tenant)) {
    if (r.type === "entry") entries.push(r.entry);
    else notes.push(r.checkpoint.note);
  }
  return verifyLedger(entries, notes, key, { tenant, ...options });
}
