import type { Tool } from "@modelcontextprotocol/client";
import { diffContracts, upstreamContracts, type ContractSet } from "@chaos-core/contracts";
import type { Logger, UpstreamDeclaration } from "@chaos-core/kit";
import { definitionOf } from "./pin.js";

/**
 * What each upstream lists now against what was pinned (docs/federation.md §4): a tool whose
 * definition changed with any verdict but COSMETIC — or that the upstream no longer lists — is
 * quarantined: left out of every list and its calls refused `contract_drift`, until an operator
 * approves the new contract (`chaos-core upstreams approve`, which re-pins it) or the upstream
 * goes back to what was pinned. A COSMETIC change is logged and served. The rest of the upstream
 * keeps serving. Fed by the pool: when a connection opens, when the upstream says its list
 * changed, and on a periodic re-read.
 */
export interface UpstreamDrift {
  /** Compares an upstream's tools as it lists them now with its pin. */
  observe(decl: UpstreamDeclaration, tools: readonly Tool[]): void;
  /** `upstreams/<upstream>/<tool> (<sections>): <verdict>` when that tool is quarantined; undefined when it is served. */
  driftOf(upstream: string, tool: string): string | undefined;
  /** The pins changed (an approval re-pinned): every upstream seen is compared again. */
  setPins(pins: ReadonlyMap<string, ContractSet>): void;
  /** Called whenever a tool enters or leaves quarantine. */
  onChange(listener: () => void): void;
}

/** One tool's pinned contract, as a set of its own, so a diff names only its changes. */
function only(set: ContractSet, tool: string): ContractSet {
  const contract = set.tools[tool];
  return { tools: contract ? { [tool]: contract } : {}, prompts: {}, resources: {}, capabilities: {} };
}

export function createUpstreamDrift(initial: ReadonlyMap<string, ContractSet>, logger: Logger): UpstreamDrift {
  let pins = initial;
  /** What each upstream listed when last seen, as contracts. */
  const live = new Map<string, ContractSet>();
  /** `upstream\u0000tool` → why it is quarantined. */
  let quarantined = new Map<string, string>();
  const listeners: Array<() => void> = [];

  const compare = (upstream: string): Map<string, string> => {
    const found = new Map<string, string>();
    const pinned = pins.get(upstream);
    const now = live.get(upstream);
    if (!pinned || !now) return found;
    for (const tool of Object.keys(pinned.tools)) {
      if (!now.tools[tool]) {
        found.set(`${upstream}\u0000${tool}`, `upstreams/${upstream}/${tool}: the upstream no longer lists it`);
        continue;
      }
      const diff = diffContracts(only(pinned, tool), only(now, tool));
      if (diff.changes.length === 0) continue;
      if (diff.verdict === "COSMETIC") {
        logger.info({ upstream, tool }, "an upstream tool changed cosmetically since it was pinned; it is served");
        continue;
      }
      const sections = [...new Set(diff.changes.map((c) => c.section))].join(", ");
      found.set(`${upstream}\u0000${tool}`, `upstreams/${upstream}/${tool} (${sections}): ${diff.verdict}`);
    }
    return found;
  };

  const recompute = () => {
    const next = new Map<string, string>();
    for (const upstream of live.keys()) for (const [key, why] of compare(upstream)) next.set(key, why);
    const changed = next.size !== quarantined.size || [...next].some(([k, v]) => quarantined.get(k) !== v);
    for (const [key, why] of next) if (!quarantined.has(key)) logger.warn({ tool: key.replace("\u0000", "/"), why }, "an upstream tool changed since it was pinned: quarantined until an operator approves it (chaos-core upstreams approve)");
    quarantined = next;
    if (changed) for (const listener of listeners) listener();
  };

  return {
    observe(decl, tools) {
      live.set(decl.name, upstreamContracts(decl.name, tools.map(definitionOf)));
      recompute();
    },
    driftOf: (upstream, tool) => quarantined.get(`${upstream}\u0000${tool}`),
    setPins(next) {
      pins = next;
      recompute();
    },
    onChange(listener) {
      listeners.push(listener);
    },
  };
}
