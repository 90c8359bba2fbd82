import type { Tool } from "@modelcontextprotocol/client";
import { diffContracts, entryDigest, upstreamContracts, type ContractSet, type Verdict } from "@chaos-core/contracts";
import type { Logger, UpstreamDeclaration } from "@chaos-core/kit";
import { definitionOf } from "./pin.js";
import { quarantineKey, type UpstreamBoard } from "./upstream-board.js";

/**
 * One change of one upstream tool against its pin, as it is recorded (the ledger's
 * `upstream.drift`, docs/federation.md §4): names, a verdict, sections and digests — never
 * anything of the upstream's declaration (headers, environment).
 */
export interface UpstreamDriftEvent {
  readonly upstream: string;
  readonly tool: string;
  /**
   * `quarantined`: its definition changed past COSMETIC (or the upstream no longer lists it), so
   * it is hidden and refused; `served`: a COSMETIC change, served as before; `released`: it left
   * quarantine and is served again.
   */
  readonly state: "quarantined" | "served" | "released";
  /** Why it was released: an operator re-pinned it, the upstream went back to its pin, or it is no longer pinned. */
  readonly reason?: "re-pinned" | "reverted" | "unpinned";
  /** The verdict against the pin (quarantined, served): an unlisted tool is a BREAKING change of section `entry`. */
  readonly verdict?: Verdict;
  /** The contract sections that changed, sorted (quarantined, served). */
  readonly sections: readonly string[];
  /** The pinned contract's digest, as `upstreams.lock` states it; absent when the tool is no longer pinned. */
  readonly pinnedDigest?: string;
  /** The digest of the contract the upstream lists now; absent when it no longer lists the tool. */
  readonly liveDigest?: string;
}

/**
 * What each upstream lists now against what was pinned (docs/federation.md §4): a tool whose
 * definition changed with any verdict but COSMETIC — or that the upstream no longer lists — is
 * quarantined: left out of every list and its calls refused `contract_drift`, until an operator
 * approves the new contract (`chaos-core upstreams approve`, which re-pins it) or the upstream
 * goes back to what was pinned. A COSMETIC change is recorded and served. The rest of the upstream
 * keeps serving. Fed by the pool: when a connection opens, when the upstream says its list
 * changed, and on a periodic re-read.
 */
export interface UpstreamDrift {
  /**
   * Compares an upstream's tools as it lists them now with its pin. `askedAt`: when the list was
   * asked for (ms), where the caller knows; a quarantine another replica shared before then, of a
   * tool this list shows as pinned, is withdrawn (the upstream went back).
   */
  observe(decl: UpstreamDeclaration, tools: readonly Tool[], askedAt?: number): void;
  /** `upstreams/<upstream>/<tool> (<sections>): <verdict>` when that tool is quarantined; undefined when it is served. */
  driftOf(upstream: string, tool: string): string | undefined;
  /** The pins changed (an approval re-pinned): every upstream seen is compared again. */
  setPins(pins: ReadonlyMap<string, ContractSet>): void;
  /** Called whenever a tool enters or leaves quarantine. */
  onChange(listener: () => void): void;
  /**
   * Called once per change in this process: a tool entering quarantine (again only when what it
   * drifted to, or its pin, changes), a COSMETIC change first seen, a tool leaving quarantine. The
   * same drift seen again — the periodic re-read, a reconnection, another `list_changed` — is not
   * told again.
   */
  onEvent(listener: (event: UpstreamDriftEvent) => void): void;
}

/** One tool's pinned contract, as a set of its own, so a diff names only its changes. */
function only(set: ContractSet, tool: string): ContractSet {
  const contract = set.tools[tool];
  return { tools: contract ? { [tool]: contract } : {}, prompts: {}, resources: {}, capabilities: {} };
}

/** A tool found different from its pin: why (the refusal's words), and the change as recorded. */
interface Finding {
  readonly why: string;
  readonly event: UpstreamDriftEvent;
}

/** The same change: the same pin and the same live definition. */
const sameChange = (a: UpstreamDriftEvent, b: UpstreamDriftEvent) => a.pinnedDigest === b.pinnedDigest && a.liveDigest === b.liveDigest;

/** How much older than its answer a list read at an unknown time (after the upstream's list_changed) is taken to be. */
const UNDATED_READ_MARGIN_MS = 30_000;

/** What makes two drift events the same change, for the board's claims: every field but none of the upstream's declaration. */
const changeId = (e: UpstreamDriftEvent) => JSON.stringify([e.upstream, e.tool, e.state, e.reason ?? "", e.pinnedDigest ?? "", e.liveDigest ?? ""]);

/**
 * `board`: where the replicas share what they find (docs/federation.md §4, "Across replicas"): a
 * quarantine found here is put there, and one put there by another replica is refused here too
 * while the pin it drifted from is in force; a change is told only by the replica that claims it
 * first. Without one (the standalone: one process), this process's own findings are all there is.
 */
export function createUpstreamDrift(initial: ReadonlyMap<string, ContractSet>, logger: Logger, board?: UpstreamBoard): UpstreamDrift {
  let pins = initial;
  /** `upstream\u0000tool` → the digest of its pin in force. */
  let pinDigests = digestsOf(initial);
  /** What each upstream listed when last seen, as contracts. */
  const live = new Map<string, ContractSet>();
  /** `upstream\u0000tool` → the quarantine in force. */
  let quarantined = new Map<string, Finding>();
  /** `upstream\u0000tool` → the COSMETIC change last told, so a re-read does not tell it again. */
  let cosmetic = new Map<string, UpstreamDriftEvent>();
  const listeners: Array<() => void> = [];
  const eventListeners: Array<(event: UpstreamDriftEvent) => void> = [];

  const tellHere = (event: UpstreamDriftEvent) => {
    for (const listener of eventListeners) {
      try {
        listener(event);
      } catch (err) {
        logger.error({ err: err instanceof Error ? err.message : String(err), upstream: event.upstream, tool: event.tool }, "an upstream drift listener failed");
      }
    }
  };

  // One replica records a change; the others, finding the same, do not record it again.
  const tell = (event: UpstreamDriftEvent) => {
    if (!board) return tellHere(event);
    void board.claim(changeId(event)).then((first) => first && tellHere(event));
  };

  /** Another replica's quarantine of this tool, while the pin it drifted from is the one in force. */
  const sharedDrift = (upstream: string, tool: string) => {
    const key = quarantineKey(upstream, tool);
    const shared = board?.current().get(key);
    return shared && shared.pinnedDigest === pinDigests.get(key) ? shared.why : undefined;
  };

  const compare = (upstream: string, intoQuarantine: Map<string, Finding>, intoCosmetic: Map<string, UpstreamDriftEvent>) => {
    const pinned = pins.get(upstream);
    const now = live.get(upstream);
    if (!pinned || !now) return;
    for (const tool of Object.keys(pinned.tools)) {
      const key = quarantineKey(upstream, tool);
      const pinnedDigest = pinDigests.get(key)!;
      const current = now.tools[tool];
      if (!current) {
        const event: UpstreamDriftEvent = { upstream, tool, state: "quarantined", verdict: "BREAKING", sections: ["entry"], pinnedDigest };
        intoQuarantine.set(key, { why: `upstreams/${upstream}/${tool}: the upstream no longer lists it`, event });
        continue;
      }
      const diff = diffContracts(only(pinned, tool), only(now, tool));
      if (diff.changes.length === 0 || diff.verdict === "NONE") continue;
      const sections = [...new Set(diff.changes.map((c) => c.section))].sort();
      const event = { upstream, tool, verdict: diff.verdict, sections, pinnedDigest, liveDigest: entryDigest(current) };
      if (diff.verdict === "COSMETIC") intoCosmetic.set(key, { ...event, state: "served" });
      else intoQuarantine.set(key, { why: `upstreams/${upstream}/${tool} (${sections.join(", ")}): ${diff.verdict}`, event: { ...event, state: "quarantined" } });
    }
  };

  /** Why a tool left quarantine: its pin changed (an approval), it is no longer pinned, or the upstream went back. */
  const releaseOf = (left: Finding): UpstreamDriftEvent => {
    const { upstream, tool } = left.event;
    const pinnedDigest = pinDigests.get(quarantineKey(upstream, tool));
    const listed = live.get(upstream)?.tools[tool];
    const reason = !pinnedDigest ? "unpinned" : pinnedDigest !== left.event.pinnedDigest ? "re-pinned" : "reverted";
    return {
      upstream,
      tool,
      state: "released",
      reason,
      sections: [],
      ...(pinnedDigest ? { pinnedDigest } : {}),
      ...(listed ? { liveDigest: entryDigest(listed) } : {}),
    };
  };

  const recompute = () => {
    const next = new Map<string, Finding>();
    const nextCosmetic = new Map<string, UpstreamDriftEvent>();
    for (const upstream of live.keys()) compare(upstream, next, nextCosmetic);
    const changed = next.size !== quarantined.size || [...next].some(([k, v]) => quarantined.get(k)?.why !== v.why);
    const told: UpstreamDriftEvent[] = [];
    for (const [key, left] of quarantined) if (!next.has(key)) told.push(releaseOf(left));
    for (const [key, found] of next) {
      const before = quarantined.get(key);
      if (before && sameChange(before.event, found.event)) continue;
      logger.warn({ tool: key.replace("\u0000", "/"), why: found.why }, "an upstream tool changed since it was pinned: quarantined until an operator approves it (chaos-core upstreams approve)");
      told.push(found.event);
    }
    for (const [key, event] of nextCosmetic) {
      const before = cosmetic.get(key);
      if (before && sameChange(before, event)) continue;
      logger.info({ upstream: event.upstream, tool: event.tool }, "an upstream tool changed cosmetically since it was pinned; it is served");
      told.push(event);
    }
    if (board) {
      for (const [key, left] of quarantined) if (!next.has(key)) void board.withdraw(left.event.upstream, left.event.tool, left.event.pinnedDigest!);
      for (const [key, found] of next) {
        if (quarantined.get(key)?.why === found.why) continue;
        void board.put({ upstream: found.event.upstream, tool: found.event.tool, why: found.why, pinnedDigest: found.event.pinnedDigest!, at: Date.now() });
      }
    }
    quarantined = next;
    cosmetic = nextCosmetic;
    for (const event of told) tell(event);
    if (changed) for (const listener of listeners) listener();
  };

  /**
   * Another replica's quarantine of a tool this process just read as pinned is withdrawn: the
   * upstream went back (read after the record was put, so this read is the newer one).
   */
  const withdrawReverted = (upstream: string, readAt: number) => {
    if (!board) return;
    const now = live.get(upstream);
    for (const shared of board.current().values()) {
      if (shared.upstream !== upstream || shared.at >= readAt) continue;
      const key = quarantineKey(upstream, shared.tool);
      const listed = now?.tools[shared.tool];
      if (quarantined.has(key) || !listed || pinDigests.get(key) !== shared.pinnedDigest || entryDigest(listed) !== shared.pinnedDigest) continue;
      void board.withdraw(upstream, shared.tool, shared.pinnedDigest);
    }
  };

  board?.onChange(() => {
    for (const listener of listeners) listener();
  });

  return {
    observe(decl, tools, askedAt) {
      live.set(decl.name, upstreamContracts(decl.name, tools.map(definitionOf)));
      recompute();
      // A list read when it was asked for is not known to be newer than what another replica put a moment ago.
      withdrawReverted(decl.name, askedAt ?? Date.now() - UNDATED_READ_MARGIN_MS);
    },
    driftOf: (upstream, tool) => quarantined.get(quarantineKey(upstream, tool))?.why ?? sharedDrift(upstream, tool),
    setPins(next) {
      pins = next;
      pinDigests = digestsOf(next);
      recompute();
    },
    onChange(listener) {
      listeners.push(listener);
    },
    onEvent(listener) {
      eventListeners.push(listener);
    },
  };
}

/** The digest of each pinned tool, by `upstream\u0000tool`. */
function digestsOf(pins: ReadonlyMap<string, ContractSet>): Map<string, string> {
  const digests = new Map<string, string>();
  for (const [upstream, set] of pins) for (const [tool, contract] of Object.entries(set.tools)) digests.set(quarantineKey(upstream, tool), entryDigest(contract));
  return digests;
}
