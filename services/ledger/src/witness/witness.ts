import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import type { KeyObject } from "node:crypto";
import { decodeBase64, noteVerifier, parseNote, type NoteSigner } from "@chaos-core/kit";
import { openCheckpoint, parseCheckpointText } from "../log/checkpoint.js";
import { HASH_SIZE, verifyConsistency } from "../log/merkle.js";
import { cosign } from "./cosignature.js";

/**
 * A witness (C2SP `tlog-witness`, https://c2sp.org/tlog-witness): it cosigns a log's checkpoint
 * only if it is consistent with the last one it cosigned for that origin, so a log that shows two
 * histories — a rewrite, a truncation, a fork — cannot get both cosigned. Chaos Core's ledger keeps
 * one log per tenant, each its own origin under one signing key, so a witness trusts a key for a
 * family of origins (`chaos-core/ledger/` and every origin below it). State — per origin the
 * latest cosigned checkpoint, and the evidence of every refused inconsistency — is a JSON file
 * written whole (a temporary file renamed over it) before a cosignature is answered.
 */

/** A log key the witness trusts, for every origin starting with `originPrefix`. */
export interface TrustedLog {
  readonly originPrefix: string;
  readonly publicKey: KeyObject;
}

export interface WitnessOptions {
  readonly signer: NoteSigner;
  readonly logs: readonly TrustedLog[];
  readonly stateFile: string;
  /** Seconds since the epoch (tests). */
  readonly now?: () => number;
}

/** Two checkpoints of one origin that cannot both be true: kept as evidence. */
export interface ForkEvidence {
  readonly origin: string;
  /** When it was refused (ISO 8601). */
  readonly at: string;
  readonly why: string;
  /** The checkpoint the witness had cosigned. */
  readonly cosigned: string;
  /** The one it refused, with the request's old size and proof. */
  readonly offered: string;
  readonly oldSize: number;
  readonly proof: readonly string[];
}

interface WitnessState {
  format: typeof STATE_FORMAT;
  logs: Record<string, { size: number; note: string }>;
  evidence: ForkEvidence[];
}

const STATE_FORMAT = "chaos-core-witness-state/1";
/** The most consistency proof lines a request may carry (the spec's bound). */
const MAX_PROOF_LINES = 63;

/** An HTTP answer of add-checkpoint. */
export interface WitnessAnswer {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
}

const answer = (status: number, body: string, contentType = "text/plain; charset=utf-8"): WitnessAnswer => ({ status, contentType, body: body.endsWith("\n") ? body : `${body}\n` });

export interface Witness {
  /** Handles an add-checkpoint request body; the answer is what the HTTP response carries. */
  addCheckpoint(body: string): Promise<WitnessAnswer>;
  /** The latest cosigned checkpoint of each origin, and the evidence kept. */
  state(): Promise<{ logs: Readonly<Record<string, { size: number; note: string }>>; evidence: readonly ForkEvidence[] }>;
}

async function loadState(file: string): Promise<WitnessState> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { format: STATE_FORMAT, logs: {}, evidence: [] };
    throw new Error(`the witness state ${file} cannot be read (${(err as Error).message})`, { cause: err });
  }
  const parsed = JSON.parse(text) as Partial<WitnessState>;
  if (parsed.format !== STATE_FORMAT || typeof parsed.logs !== "object" || !Array.isArray(parsed.evidence)) {
    throw new Error(`the witness state ${file} is not a ${STATE_FORMAT} file`);
  }
  return parsed as WitnessState;
}

async function saveState(file: string, state: WitnessState): Promise<void> {
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
  await rename(temporary, file);
}

/** Splits a request body: the old size, the proof hashes, and the checkpoint note; or why it cannot. */
function parseRequest(body: string): { oldSize: number; proof: Buffer[]; proofLines: string[]; note: string } | string {
  const blank = body.indexOf("\n\n");
  if (blank < 0) return "the body is an old size line, proof lines, an empty line and a checkpoint";
  const head = body.slice(0, blank).split("\n");
  const note = body.slice(blank + 2);
  const old = /^old (0|[1-9][0-9]*)$/.exec(head[0] ?? "");
  if (!old || !Number.isSafeInteger(Number(old[1]))) return 'the first line is "old <size>", the size in decimal without leading zeroes';
  const proofLines = head.slice(1);
  if (proofLines.length > MAX_PROOF_LINES) return `at most ${MAX_PROOF_LINES} consistency proof lines`;
  const proof: Buffer[] = [];
  for (const [i, line] of proofLines.entries()) {
    let hash: Buffer;
    try {
      hash = decodeBase64(line, `proof line ${i + 1}`);
    } catch (err) {
      return (err as Error).message;
    }
    if (hash.length !== HASH_SIZE) return `proof line ${i + 1} is not a ${HASH_SIZE}-byte hash`;
    proof.push(hash);
  }
  return { oldSize: Number(old[1]), proof, proofLines, note };
}

export async function createWitness(options: WitnessOptions): Promise<Witness> {
  const now = options.now ?? (() => Math.floor(Date.now() / 1000));
  let state = await loadState(options.stateFile);
  // One request at a time: checking the old size and persisting the new checkpoint are atomic (the spec's race).
  let queue: Promise<unknown> = Promise.resolve();
  const serialized = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = queue.then(fn, fn);
    queue = run.catch(() => undefined);
    return run;
  };

  const refuse = async (origin: string, why: string, offered: string, oldSize: number, proof: readonly string[]): Promise<void> => {
    const cosigned = state.logs[origin]?.note ?? "";
    state = { ...state, evidence: [...state.evidence, { origin, at: new Date(now() * 1000).toISOString(), why, cosigned, offered, oldSize, proof }] };
    await saveState(options.stateFile, state);
  };

  const handle = async (body: string): Promise<WitnessAnswer> => {
    const request = parseRequest(body);
    if (typeof request === "string") return answer(400, request);
    let origin: string;
    let parsedText: string;
    try {
      parsedText = parseNote(request.note).text;
      origin = parseCheckpointText(parsedText).origin;
    } catch (err) {
      return answer(400, `the checkpoint is not a signed note: ${(err as Error).message}`);
    }
    const trusted = options.logs.filter((l) => origin.startsWith(l.originPrefix));
    if (trusted.length === 0) return answer(404, `unknown log origin ${origin}`);
    let checkpoint: ReturnType<typeof openCheckpoint>;
    try {
      checkpoint = openCheckpoint(request.note, trusted.map((l) => noteVerifier(origin, l.publicKey)), origin);
    } catch (err) {
      return answer(403, `no signature of a trusted key for ${origin} verifies: ${(err as Error).message}`);
    }
    const held = state.logs[origin];
    const heldSize = held?.size ?? 0;
    // A signed tree smaller than one already cosigned: the log went back on what it showed (kept as evidence).
    if (held && checkpoint.size < held.size) {
      await refuse(origin, `a checkpoint of size ${checkpoint.size}, smaller than the cosigned ${held.size}: the log was truncated or rolled back`, request.note, request.oldSize, request.proofLines);
      return answer(409, `${heldSize}`, "text/x.tlog.size");
    }
    if (request.oldSize > checkpoint.size) return answer(400, `old size ${request.oldSize} is larger than the checkpoint's ${checkpoint.size}`);
    if (request.oldSize !== heldSize) return answer(409, `${heldSize}`, "text/x.tlog.size");
    const heldRoot = held ? parseCheckpointText(parseNote(held.note).text).root : undefined;
    if (held && heldRoot && checkpoint.size === held.size) {
      if (!heldRoot.equals(checkpoint.root)) {
        await refuse(origin, `a checkpoint of size ${checkpoint.size} with another root than the one cosigned: a fork`, request.note, request.oldSize, request.proofLines);
        return answer(409, `${heldSize}`, "text/x.tlog.size");
      }
    } else if (held && heldRoot) {
      if (!verifyConsistency(held.size, checkpoint.size, heldRoot, checkpoint.root, request.proof)) {
        await refuse(origin, `the consistency proof from size ${held.size} to ${checkpoint.size} does not verify: the log rewrote what it showed before`, request.note, request.oldSize, request.proofLines);
        return answer(422, `the consistency proof from ${held.size} to ${checkpoint.size} does not verify`);
      }
    } else if (request.proof.length > 0) {
      return answer(422, "the proof from size 0 is empty");
    }
    // Persisted before it is answered.
    state = { ...state, logs: { ...state.logs, [origin]: { size: checkpoint.size, note: request.note } } };
    await saveState(options.stateFile, state);
    return answer(200, cosign(parsedText, options.signer, now()));
  };

  return {
    addCheckpoint: (body) => serialized(() => handle(body)),
    state: async () => ({ logs: state.logs, evidence: state.evidence }),
  };
}
