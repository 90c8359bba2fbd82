import { openNote, parseNote, signNote, type NoteSigner, type NoteVerifier } from "@chaos-core/kit";
import { CONTRACT_KINDS, promptContract, resourceContract, sectionDigests, serverDigest, toolContract, type ContractSet, type PromptSource, type ResourceSource, type ToolSource } from "./contract.js";
import { parseLock, type Lockfile } from "./lockfile.js";

/** The first line of an attestation note: what the signed digest is of. */
export const ATTESTATION_ORIGIN = "chaos-core/contracts";

/** The file beside the lock that holds the signed note. */
export const SIGNATURE_FILE = "chaoscore.lock.sig";

/**
 * The attested surface does not match: a signature that does not verify, a lockfile whose
 * entries are not what it states, or live definitions that drifted from the lock. `drifted`
 * names each entry (`tools/<name>`) and its sections.
 */
export class AttestationError extends Error {
  override readonly name = "AttestationError";
  constructor(
    message: string,
    readonly drifted: readonly string[] = [],
  ) {
    super(message);
  }
}

/** The signed text: the origin line and the server digest. */
export function attestationText(digest: string): string {
  return `${ATTESTATION_ORIGIN}\n${digest}\n`;
}

function digestOfText(text: string): string {
  const m = /^chaos-core\/contracts\n(sha256:[0-9a-f]{64})\n$/.exec(text);
  if (!m) throw new AttestationError(`the signed note is not a contracts attestation ("${ATTESTATION_ORIGIN}" and a sha256 digest)`);
  return m[1]!;
}

/** Entries whose stated digests are not those of their own sections (a hand-edited lockfile). */
function tampered(lock: Lockfile): string[] {
  const out: string[] = [];
  for (const kind of CONTRACT_KINDS) {
    for (const [name, c] of Object.entries(lock.contracts[kind])) {
      const stated = lock.statedDigests.get(`${kind}/${name}`)!;
      const bad = Object.entries(sectionDigests(c)).filter(([s, d]) => stated.sections[s] !== d).map(([s]) => s);
      if (bad.length > 0) out.push(`${kind}/${name} (${bad.join(", ")})`);
    }
  }
  return out;
}

/**
 * Signs a lockfile's server digest as a C2SP signed note. The digest is recomputed from the
 * file's entries first: a file whose stated digests disagree with its contents is refused.
 */
export function signAttestation(lockText: string, signer: NoteSigner): string {
  const lock = parseLock(lockText);
  const bad = tampered(lock);
  const digest = serverDigest(lock.contracts);
  if (bad.length > 0 || digest !== lock.integrityDigest) throw new AttestationError(`the lockfile does not hash to what it states: ${bad.join("; ") || "integrityDigest"}`, bad);
  return signNote(attestationText(digest), signer);
}

/** Adds a signature line (an operator's countersignature) to an attestation note. */
export function countersign(note: string, signer: NoteSigner): string {
  const { text } = parseNote(note);
  digestOfText(text);
  const signed = signNote(text, signer);
  return `${note}${signed.slice(text.length + 1)}`;
}

/** The live definitions the edge serves, as `edgeSurface()` gives them. */
export interface LiveSurface {
  readonly tools: readonly ToolSource[];
  readonly prompts: readonly PromptSource[];
  readonly resources: readonly ResourceSource[];
}

/**
 * What the edge can recompute at start: surface, behavior and token economics from the live
 * definitions, with gates and entitlements taken from the lock (nothing at run time reads source).
 * Capabilities run in cognition and are not compared here. Returns the drifted entries.
 */
export function driftFromLock(lock: ContractSet, live: LiveSurface): string[] {
  const drifted: string[] = [];
  const compare = (kind: string, name: string, pinned: object | undefined, now: object) => {
    if (!pinned) return void drifted.push(`${kind}/${name} (not in the lock)`);
    const a = sectionDigests(pinned);
    const b = sectionDigests(now);
    const bad = Object.keys(b).filter((s) => a[s] !== b[s]);
    if (bad.length > 0) drifted.push(`${kind}/${name} (${bad.join(", ")})`);
  };
  for (const t of live.tools) {
    const pinned = lock.tools[t.name];
    if (!pinned) drifted.push(`tools/${t.name} (not in the lock)`);
    else compare("tools", t.name, pinned, toolContract(t, { gates: pinned.behavior.gates, entitlements: pinned.entitlements }));
  }
  for (const p of live.prompts) compare("prompts", p.name, lock.prompts[p.name], promptContract(p));
  for (const r of live.resources) compare("resources", r.name, lock.resources[r.name], resourceContract(r));
  const served = { tools: new Set(live.tools.map((t) => t.name)), prompts: new Set(live.prompts.map((p) => p.name)), resources: new Set(live.resources.map((r) => r.name)) };
  for (const kind of ["tools", "prompts", "resources"] as const) {
    for (const name of Object.keys(lock[kind])) if (!served[kind].has(name)) drifted.push(`${kind}/${name} (pinned but not served)`);
  }
  return drifted.sort();
}

/** What a verified attestation says. */
export interface Attestation {
  readonly serverDigest: string;
  /** The names of the trusted keys whose signatures verified. */
  readonly keyNames: readonly string[];
}

/**
 * Verifies a contracts note with public keys alone, without the lock: what a client holds when
 * a server shows it the note (`chaoscore://contracts/attestation`). Resolves with the signed
 * server digest and the names of the keys that verified; throws {@link AttestationError}.
 */
export function verifyAttestationNote(note: string, verifiers: readonly NoteVerifier[]): Attestation {
  let text: string;
  try {
    text = openNote(note, verifiers);
  } catch (err) {
    throw new AttestationError(`the contracts signature does not verify: ${(err as Error).message}`);
  }
  const parsed = parseNote(note);
  const keyNames = [...new Set(parsed.signatures.filter((s) => verifiers.some((v) => v.name === s.name && v.keyHash.equals(s.keyHash))).map((s) => s.name))].sort();
  return { serverDigest: digestOfText(text), keyNames };
}

/**
 * Checks a signed lockfile: the note verifies with one of `verifiers` (public keys only), its
 * digest is the lock's server digest as recomputed from the lock's entries (never the digest the
 * file states), and, given `live`, the live definitions match the lock. Any failure is an
 * {@link AttestationError} naming the entries that drifted.
 */
export function verifyAttestation(args: { lockText: string; note: string; verifiers: readonly NoteVerifier[]; live?: LiveSurface }): Attestation {
  let text: string;
  try {
    text = openNote(args.note, args.verifiers);
  } catch (err) {
    throw new AttestationError(`the contracts signature does not verify: ${(err as Error).message}`);
  }
  const signed = digestOfText(text);
  const lock = parseLock(args.lockText);
  const bad = tampered(lock);
  if (bad.length > 0) throw new AttestationError(`the lockfile was edited: ${bad.join("; ")} do not hash to the digests it states`, bad);
  const digest = serverDigest(lock.contracts);
  if (digest !== signed) throw new AttestationError(`the lockfile's entries hash to ${digest}, but the signature is for ${signed}`);
  if (args.live) {
    const drifted = driftFromLock(lock.contracts, args.live);
    if (drifted.length > 0) throw new AttestationError(`the served definitions drifted from the signed lock: ${drifted.join("; ")}`, drifted);
  }
  const parsed = parseNote(args.note);
  const keyNames = [...new Set(parsed.signatures.filter((s) => args.verifiers.some((v) => v.name === s.name && v.keyHash.equals(s.keyHash))).map((s) => s.name))].sort();
  return { serverDigest: digest, keyNames };
}
