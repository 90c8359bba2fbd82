import { isObject } from "@chaos-core/kit";
import { entryDigest, type ContractSet, type ToolContract } from "./contract.js";
import { diffContracts, type ContractChange } from "./diff.js";
import { deterministicJson, jsonObject, LOCKFILE_NAME, parseLock, refusalIn, SECTIONS, serializeLock, type Refusal } from "./lockfile.js";

/**
 * The file beside the lock that keeps the tool contracts earlier locks pinned, by entry digest
 * (docs/contracts.md §9), so a call from a client that pinned an older digest can be told what
 * changed since (issue 15 item 8). Every entry is its own proof: it must hash to its key.
 */
export const HISTORY_FILE = "chaoscore.lock.history";
export const HISTORY_VERSION = 1;

/** Superseded tool contracts by entry digest. */
export type ContractHistory = ReadonlyMap<string, { readonly name: string; readonly contract: ToolContract }>;

export const EMPTY_HISTORY: ContractHistory = new Map();

const bad: Refusal = refusalIn(HISTORY_FILE);

/** Parses a history file; an entry that does not hash to its key (an edited one) is refused, named. */
export function parseHistory(text: string): ContractHistory {
  const doc = jsonObject(text, bad);
  if (doc.historyVersion !== HISTORY_VERSION) bad("historyVersion", `must be ${HISTORY_VERSION}, got ${JSON.stringify(doc.historyVersion)}`);
  if (!isObject(doc.tools)) bad("tools", "must be an object of tool contracts by entry digest");
  const out = new Map<string, { name: string; contract: ToolContract }>();
  for (const [digest, entry] of Object.entries(doc.tools)) {
    const at = `tools.${digest}`;
    if (!isObject(entry)) bad(at, "must be an object");
    const body: Record<string, unknown> = {};
    for (const section of SECTIONS.tools) {
      if (!isObject(entry[section])) bad(`${at}.${section}`, "must be an object");
      body[section] = entry[section];
    }
    const contract = body as unknown as ToolContract;
    if (entryDigest(contract) !== digest) bad(at, `the entry hashes to ${entryDigest(contract)}, not to its key`);
    out.set(digest, { name: contract.surface.name, contract });
  }
  return out;
}

/** The history file's text: sorted, two-space indent, trailing newline, like the lock. */
export function serializeHistory(history: ContractHistory): string {
  return deterministicJson({
    historyVersion: HISTORY_VERSION,
    tools: Object.fromEntries([...history].map(([digest, { contract }]) => [digest, contract])),
  });
}

/**
 * The history after re-locking from `previous` to `next`: every tool contract `previous` pinned
 * that `next` does not pin under the same digest joins it (a changed or removed tool), so a
 * digest once served stays explainable. Nothing is ever dropped.
 */
export function extendHistory(history: ContractHistory, previous: ContractSet, next: ContractSet): ContractHistory {
  const out = new Map(history);
  for (const [name, contract] of Object.entries(previous.tools)) {
    const digest = entryDigest(contract);
    const now = next.tools[name];
    if (!now || entryDigest(now) !== digest) out.set(digest, { name, contract });
  }
  return out;
}

/** What a client's pinned digest of a tool says against the contract now served. */
export type SincePinned =
  | { readonly kind: "current" }
  /** A digest neither served nor in the history (a different build, or not a digest at all). */
  | { readonly kind: "unknown" }
  /** The BREAKING and RISKY changes since the pinned contract, gravest first, at most `max`; `more` counts the rest. */
  | { readonly kind: "changed"; readonly changes: readonly ContractChange[]; readonly more: number };

/**
 * The changes a model must know to adapt a call of `name` it built against the contract with
 * entry digest `pinned`: `diffContracts` between that contract (from the history) and the one
 * served, BREAKING and RISKY only, at most `max` (five by default).
 */
export function changesSincePinned(history: ContractHistory, served: ToolContract, name: string, pinned: string, max = 5): SincePinned {
  if (entryDigest(served) === pinned) return { kind: "current" };
  const then = history.get(pinned);
  if (!then || then.name !== name) return { kind: "unknown" };
  const only = (c: ToolContract): ContractSet => ({ tools: { [name]: c }, prompts: {}, resources: {}, capabilities: {} });
  const grave = diffContracts(only(then.contract), only(served)).changes.filter((c) => c.verdict === "BREAKING" || c.verdict === "RISKY");
  const ordered = [...grave.filter((c) => c.verdict === "BREAKING"), ...grave.filter((c) => c.verdict === "RISKY")];
  return { kind: "changed", changes: ordered.slice(0, max), more: Math.max(0, ordered.length - max) };
}

/** What `chaos-core contracts lock` writes: the new lock, and the history when it grew. */
export interface Relocked {
  readonly lockText: string;
  /** The history's new text; absent when nothing was superseded (the file is left as it is). */
  readonly historyText?: string;
  /** How many superseded contracts joined the history. */
  readonly kept: number;
  /** Said when the previous lock could not be read, so its contracts could not be kept. */
  readonly warning?: string;
}

/**
 * Re-locking: the lock for `contracts`, and the history extended with what the previous lock
 * (`previousLock`, the file's text, when there was one) pinned and no longer does. A history
 * that does not parse is refused (an edited entry must be repaired, not dropped).
 */
export function relock(contracts: ContractSet, previousLock?: string, previousHistory?: string): Relocked {
  const history = previousHistory === undefined ? EMPTY_HISTORY : parseHistory(previousHistory);
  let previous: ContractSet | undefined;
  let warning: string | undefined;
  if (previousLock !== undefined) {
    try {
      previous = parseLock(previousLock).contracts;
    } catch (err) {
      warning = `the previous ${LOCKFILE_NAME} is not readable (${(err as Error).message}): its contracts are not kept in ${HISTORY_FILE}`;
    }
  }
  const extended = previous ? extendHistory(history, previous, contracts) : history;
  const kept = extended.size - history.size;
  return { lockText: serializeLock(contracts), ...(kept > 0 ? { historyText: serializeHistory(extended) } : {}), kept, ...(warning ? { warning } : {}) };
}
