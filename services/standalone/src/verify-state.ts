import { createHash, createPublicKey, type KeyObject } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { Env } from "@chaos-core/kit";
import { isKeySet, keysAt, parseCheckpointText, parseNote, parseVerifierKey, type PublicKeyInput, type VerificationKey } from "@chaos-core/ledger";
import { userStateDir } from "./config.js";

/**
 * What `chaos-core ledger verify` remembers between runs (docs/ledger.md, "A verifier that
 * remembers"): per log — its origin and the public key it is verified with, since two
 * deployments may name their logs alike — the newest signed checkpoint it verified, with its
 * tenant and when. From then on the log must stay consistent with it, so a rewrite or truncation below it is
 * caught even when every checkpoint in the database went with it: the copy is outside the
 * operator's database, in the verifying person's own state directory (or `--state FILE`).
 */
export const VERIFY_STATE_FORMAT = "chaos-core-verify-state/1";

/** One remembered checkpoint. */
export interface RememberedCheckpoint {
  readonly origin: string;
  /** The SHA-256 of the verifying public key (SPKI DER), hex. */
  readonly key: string;
  readonly tenant: string;
  /** The signed note, as the ledger signed it. */
  readonly checkpoint: string;
  /** When it was verified (ISO 8601). */
  readonly verifiedAt: string;
}

/** The state file: remembered checkpoints by `<origin> <key>` ({@link logKey}). */
export interface VerifyState {
  readonly file: string;
  readonly logs: Readonly<Record<string, RememberedCheckpoint>>;
}

/** Where a log's checkpoint is remembered: its origin and the key it verifies with. */
export const logKey = (origin: string, key: string) => `${origin} ${key}`;

/** The fingerprints of the keys a log is verified with: one, or each of a set. */
export function keyFingerprints(key: VerificationKey): string[] {
  return isKeySet(key) ? key.keys.map((k) => keyFingerprint(k.key)) : [keyFingerprint(key)];
}

/** The fingerprint a checkpoint of `size` is remembered under: the key trusted at that size. */
export function fingerprintAt(key: VerificationKey, size: number): string | undefined {
  if (!isKeySet(key)) return keyFingerprint(key);
  const [first] = keysAt(key, size);
  return first === undefined ? undefined : keyFingerprint(first);
}

/** The fingerprint of a verifying public key: a verifier key (`<name>+<hash>+<base64 key>`), a PEM or a KeyObject. */
export function keyFingerprint(key: PublicKeyInput): string {
  let object: KeyObject;
  if (typeof key !== "string") object = key;
  else if (key.trim().startsWith("-----BEGIN")) object = createPublicKey(key.trim());
  else object = parseVerifierKey(key.trim()).publicKey;
  return createHash("sha256").update(object.export({ format: "der", type: "spki" })).digest("hex");
}

/** The default state file: `<per-user state directory>/ledger-verify-state.json`. */
export function defaultVerifyStateFile(env: Env): string {
  return join(userStateDir(env, "--state"), "ledger-verify-state.json");
}

/** The origin and size a signed checkpoint note names (its signature is checked by verify). */
export function checkpointHead(note: string): { origin: string; size: number } {
  const { origin, size } = parseCheckpointText(parseNote(note).text);
  return { origin, size };
}

/** Reads the state file; one that does not exist yet holds nothing. A file that is not one is an error naming it. */
export async function loadVerifyState(file: string): Promise<VerifyState> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { file, logs: {} };
    throw new Error(`the verify state ${file} cannot be read (${(err as Error).message})`, { cause: err });
  }
  let parsed: { format?: unknown; logs?: unknown };
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch (err) {
    throw new Error(`the verify state ${file} is not JSON (${(err as Error).message}); move it aside to start afresh, knowing that what it remembered is then lost`, { cause: err });
  }
  if (parsed.format !== VERIFY_STATE_FORMAT || typeof parsed.logs !== "object" || parsed.logs === null) {
    throw new Error(`the verify state ${file} is not a ${VERIFY_STATE_FORMAT} file`);
  }
  const logs: Record<string, RememberedCheckpoint> = {};
  for (const [name, r] of Object.entries(parsed.logs as Record<string, Partial<RememberedCheckpoint>>)) {
    const fields = ["origin", "key", "tenant", "checkpoint", "verifiedAt"] as const;
    const missing = fields.filter((f) => typeof r?.[f] !== "string");
    if (missing.length > 0 || name !== logKey(r.origin!, r.key!)) {
      throw new Error(`the verify state ${file}: logs[${JSON.stringify(name)}] needs ${fields.join(", ")} strings, under "<origin> <key>"`);
    }
    logs[name] = { origin: r.origin!, key: r.key!, tenant: r.tenant!, checkpoint: r.checkpoint!, verifiedAt: r.verifiedAt! };
  }
  return { file, logs };
}

/** Writes the state with the log's checkpoint replaced, whole or not at all (a temporary file renamed over it). */
export async function rememberCheckpoint(state: VerifyState, remembered: RememberedCheckpoint): Promise<void> {
  const next = { format: VERIFY_STATE_FORMAT, logs: { ...state.logs, [logKey(remembered.origin, remembered.key)]: remembered } };
  await mkdir(dirname(state.file), { recursive: true, mode: 0o700 });
  const temporary = `${state.file}.${process.pid}.tmp`;
  await writeFile(temporary, `${JSON.stringify(next, null, 2)}\n`, { mode: 0o600 });
  await rename(temporary, state.file);
}

/**
 * A checkpoint an auditor kept (`--trusted-checkpoint FILE`): the signed note itself, or a JSON
 * object holding it as `note` (an export's checkpoint line, `inspect_audit_ledger`'s answer) or
 * `checkpoint` (an entry of a state file).
 */
export async function readTrustedCheckpoint(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (err) {
    throw new Error(`--trusted-checkpoint ${file} cannot be read (${(err as Error).message})`, { cause: err });
  }
  let note = text;
  if (text.trimStart().startsWith("{")) {
    const held = JSON.parse(text) as { note?: unknown; checkpoint?: unknown };
    const found = typeof held.note === "string" ? held.note : held.checkpoint;
    if (typeof found !== "string") throw new Error(`--trusted-checkpoint ${file} is JSON without a "note" or "checkpoint" string`);
    note = found;
  }
  try {
    checkpointHead(note);
  } catch (err) {
    throw new Error(`--trusted-checkpoint ${file} is not a signed checkpoint note (${(err as Error).message})`, { cause: err });
  }
  return note;
}
