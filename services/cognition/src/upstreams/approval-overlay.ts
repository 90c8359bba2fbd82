import { entryDigest, parseUpstreamToolEntry, type ContractSet } from "@chaos-core/contracts";

/**
 * An operator's approvals kept in the registry where `upstreams.lock` is read-only
 * (docs/federation.md §4), merged over the lock's pins. Pure: `serveUpstreams` and `chaos-core
 * upstreams diff|approve` read the same verdicts.
 */

/** One approval, as `UpstreamApprovalService.ListApprovals` answers it. */
export interface UpstreamApprovalEntry {
  readonly upstream: string;
  readonly tool: string;
  /** The approved contract: the tool's `upstreams.lock` entry as JSON text. */
  readonly entry: string;
  /** The lock digest it replaces; empty for a tool the lock does not pin. */
  readonly replacesDigest: string;
  readonly digest: string;
  readonly approvedBy: string;
}

/**
 * What became of an approval against the lock now:
 * - `in-force` — the lock still pins what it replaced (or, for `replaces` empty, no such tool): served as approved;
 * - `moot` — the lock pins the approved contract itself: the lock caught up;
 * - `overridden` — the lock pins something else: the lock wins;
 * - `invalid` — its entry does not parse or its digests do not match (never served).
 */
export type ApprovalState = "in-force" | "moot" | "overridden" | "invalid";

export interface ApprovalOutcome {
  readonly upstream: string;
  readonly tool: string;
  readonly state: ApprovalState;
  readonly digest: string;
  readonly replacesDigest: string;
  /** The lock's digest for the tool now; empty when the lock pins no such tool. */
  readonly lockDigest: string;
  readonly approvedBy: string;
  /** Why it is `invalid`. */
  readonly problem?: string;
}

const EMPTY: ContractSet = { tools: {}, prompts: {}, resources: {}, capabilities: {} };

/**
 * The pins to serve: the lock's, with each approval in force put over its tool. An approval
 * applies while the lock's digest for its tool is the one it replaced (or the lock has no such
 * tool and it replaced none); when the lock pins the approved digest the approval is moot; when
 * it pins anything else the lock wins. An approval whose entry is not a valid `upstreams.lock`
 * entry with matching digests (parsed again here: the registry's word is not taken) is not
 * applied, so nothing is ever served that an operator did not approve or pin.
 */
export function overlayApprovals(lock: ReadonlyMap<string, ContractSet>, approvals: readonly UpstreamApprovalEntry[]): { pins: Map<string, ContractSet>; outcomes: ApprovalOutcome[] } {
  const pins = new Map(lock);
  const outcomes: ApprovalOutcome[] = [];
  for (const a of approvals) {
    const locked = lock.get(a.upstream)?.tools[a.tool];
    const lockDigest = locked ? entryDigest(locked) : "";
    const outcome = { upstream: a.upstream, tool: a.tool, digest: a.digest, replacesDigest: a.replacesDigest, lockDigest, approvedBy: a.approvedBy };
    let contract;
    try {
      const parsed = parseUpstreamToolEntry(a.upstream, a.tool, a.entry, `approval of ${a.upstream}/${a.tool}: entry`);
      if (parsed.digest !== a.digest) throw new Error(`approval of ${a.upstream}/${a.tool}: digest: ${a.digest} is not its entry's digest ${parsed.digest}`);
      contract = parsed.contract;
    } catch (err) {
      outcomes.push({ ...outcome, state: "invalid", problem: err instanceof Error ? err.message : String(err) });
      continue;
    }
    if (lockDigest === a.digest) outcomes.push({ ...outcome, state: "moot" });
    else if (lockDigest !== a.replacesDigest) outcomes.push({ ...outcome, state: "overridden" });
    else {
      const set = pins.get(a.upstream) ?? EMPTY;
      pins.set(a.upstream, { ...set, tools: { ...set.tools, [a.tool]: contract } });
      outcomes.push({ ...outcome, state: "in-force" });
    }
  }
  return { pins, outcomes };
}
