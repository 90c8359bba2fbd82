import { join } from "node:path";
import { appRoot, canonicalJsonRfc8785, ChaosError, isObject } from "@chaos-core/kit";
import { CONTRACT_KINDS, entryDigest, sectionDigests, serverDigest, type ContractKind, type ContractSet } from "./contract.js";
import { diffContracts, type ContractDiff } from "./diff.js";

export const LOCKFILE_NAME = "chaoscore.lock";

/**
 * Where the edge and cognition read the lock when CHAOS_CORE_CONTRACT_LOCK_FILE is not set: at the
 * root of the installed app (kit's `appRoot`: the repository in a checkout, `/app` in the image,
 * the package directory of an installed `chaos-core` tarball), where `contracts lock` writes it
 * and `deploy/stage-app.sh` ships it. Its signed note is `<lock>.sig`, its history `<lock>.history`.
 */
export function defaultLockFile(): string {
  return join(appRoot(), LOCKFILE_NAME);
}
export const LOCKFILE_VERSION = 1;

/** The sections each kind's entries carry. */
export const SECTIONS: Readonly<Record<ContractKind, readonly string[]>> = {
  tools: ["surface", "behavior", "tokenEconomics", "entitlements"],
  prompts: ["surface"],
  resources: ["surface"],
  capabilities: ["surface", "behavior", "entitlements"],
};

/** A parsed lockfile: the contracts it pins and the digests it states for them. */
export interface Lockfile {
  readonly serverName: string;
  readonly integrityDigest: string;
  readonly contracts: ContractSet;
  /** The digests the file states, by `kind/name`: compared, never trusted. */
  readonly statedDigests: ReadonlyMap<string, { digest: string; sections: Record<string, string> }>;
}

/** The text of a JSON document as the lockfile is written: RFC 8785 member order, two-space indent, a trailing newline. */
export function deterministicJson(value: unknown): string {
  return `${pretty(value, "")}\n`;
}

/** RFC 8785 member order, two-space indent, RFC 8785 number and string forms. */
function pretty(value: unknown, indent: string): string {
  if (Array.isArray(value)) {
    if (value.length === 0) return "[]";
    const inner = indent + "  ";
    return `[\n${value.map((v) => inner + pretty(v, inner)).join(",\n")}\n${indent}]`;
  }
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined);
    if (entries.length === 0) return "{}";
    const inner = indent + "  ";
    // Default sort: UTF-16 code units, the order RFC 8785 uses.
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{\n${entries.map(([k, v]) => `${inner}${canonicalJsonRfc8785(k)}: ${pretty(v, inner)}`).join(",\n")}\n${indent}}`;
  }
  return canonicalJsonRfc8785(value);
}

/** The lockfile's text for a contract set: the same contracts always give the same bytes. */
export function serializeLock(contracts: ContractSet, serverName = "chaos-core"): string {
  // Checked as a whole first, so a value that is not I-JSON is refused with its path.
  canonicalJsonRfc8785(contracts);
  const doc: Record<string, unknown> = { lockfileVersion: LOCKFILE_VERSION, serverName, integrityDigest: serverDigest(contracts) };
  for (const kind of CONTRACT_KINDS) {
    doc[kind] = Object.fromEntries(
      Object.entries(contracts[kind]).map(([name, c]) => [name, { digest: entryDigest(c), sections: sectionDigests(c), ...c }]),
    );
  }
  return deterministicJson(doc);
}

/** Refuses a field, named at its depth (declared with this type so the compiler narrows after it). */
export type Refusal = (path: string, what: string) => never;

/** A refusal of a field of `file`: `invalid_argument`, `<file>: <path>: <what>`. */
export function refusalIn(file: string): Refusal {
  return (path, what) => {
    throw new ChaosError("invalid_argument", `${file}: ${path}: ${what}`);
  };
}

const bad: Refusal = refusalIn(LOCKFILE_NAME);

/** The text as a JSON object, refused through `bad` as `(file)` when it is not JSON or not an object. */
export function jsonObject(text: string, bad: Refusal): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    bad("(file)", `not JSON: ${(err as Error).message}`);
  }
  if (!isObject(doc)) bad("(file)", "must be a JSON object");
  return doc;
}

/** Parses a lockfile, refusing a malformed one with the field named at its depth. */
export function parseLock(text: string): Lockfile {
  const doc = jsonObject(text, bad);
  if (doc.lockfileVersion !== LOCKFILE_VERSION) bad("lockfileVersion", `must be ${LOCKFILE_VERSION}, got ${JSON.stringify(doc.lockfileVersion)}`);
  if (typeof doc.serverName !== "string" || doc.serverName === "") bad("serverName", "must be a non-empty string");
  if (typeof doc.integrityDigest !== "string" || !/^sha256:[0-9a-f]{64}$/.test(doc.integrityDigest)) bad("integrityDigest", "must be sha256:<64 hex digits>");
  const contracts: Record<string, Record<string, unknown>> = {};
  const stated = new Map<string, { digest: string; sections: Record<string, string> }>();
  for (const kind of CONTRACT_KINDS) {
    const entries = doc[kind];
    if (!isObject(entries)) bad(kind, "must be an object of entries by name");
    contracts[kind] = {};
    for (const [name, entry] of Object.entries(entries)) {
      const at = `${kind}.${name}`;
      if (!isObject(entry)) bad(at, "must be an object");
      if (typeof entry.digest !== "string") bad(`${at}.digest`, "must be a string");
      if (!isObject(entry.sections)) bad(`${at}.sections`, "must be an object of section digests");
      const body: Record<string, unknown> = {};
      for (const section of SECTIONS[kind]) {
        if (!isObject(entry[section])) bad(`${at}.${section}`, "must be an object");
        if (typeof entry.sections[section] !== "string") bad(`${at}.sections.${section}`, "must be a string");
        body[section] = entry[section];
      }
      const surface = body.surface as Record<string, unknown>;
      if (surface.name !== name) bad(`${at}.surface.name`, `must be ${JSON.stringify(name)}, the entry's key`);
      contracts[kind][name] = body;
      stated.set(`${kind}/${name}`, { digest: entry.digest, sections: entry.sections as Record<string, string> });
    }
  }
  return { serverName: doc.serverName, integrityDigest: doc.integrityDigest, contracts: contracts as unknown as ContractSet, statedDigests: stated };
}

/** What `contracts lock --check` found. */
export interface LockCheck {
  readonly ok: boolean;
  /** The pinned contracts (the file's sections) against the ones recomputed from code. */
  readonly diff: ContractDiff;
  /** Digests the file states that are not the digests of its own sections, and other problems. */
  readonly problems: readonly string[];
}

/**
 * Compares a lockfile with contracts recomputed from the code. The file's sections are diffed
 * against the recomputed ones, and its stated digests are recomputed from its own sections, so
 * neither a hand-edited section nor a hand-edited digest passes; last, the file must be the exact
 * bytes `lock` would write.
 */
export function checkLock(text: string, recomputed: ContractSet, serverName = "chaos-core"): LockCheck {
  const lock = parseLock(text);
  const diff = diffContracts(lock.contracts, recomputed);
  const problems: string[] = [];
  for (const kind of CONTRACT_KINDS) {
    for (const [name, c] of Object.entries(lock.contracts[kind])) {
      const stated = lock.statedDigests.get(`${kind}/${name}`)!;
      const sections = sectionDigests(c);
      for (const [s, d] of Object.entries(sections)) {
        if (stated.sections[s] !== d) problems.push(`${kind}/${name}: the file states ${s} digest ${stated.sections[s]}, but its ${s} section hashes to ${d}`);
      }
      if (stated.digest !== entryDigest(c)) problems.push(`${kind}/${name}: the file states digest ${stated.digest}, but its sections hash to ${entryDigest(c)}`);
    }
  }
  if (lock.integrityDigest !== serverDigest(lock.contracts)) {
    problems.push(`integrityDigest: the file states ${lock.integrityDigest}, but its entries hash to ${serverDigest(lock.contracts)}`);
  }
  if (diff.changes.length === 0 && problems.length === 0 && text !== serializeLock(recomputed, serverName)) {
    problems.push(`${LOCKFILE_NAME} is not in the form chaos-core contracts lock writes (keys, indentation or trailing newline)`);
  }
  return { ok: diff.changes.length === 0 && problems.length === 0, diff, problems };
}
