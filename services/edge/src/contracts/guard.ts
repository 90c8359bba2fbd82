import {
  changesSincePinned,
  EMPTY_HISTORY,
  entryDigest,
  promptContract,
  resourceContract,
  sectionDigests,
  toolContract,
  type ContractHistory,
  type ContractKind,
  type ContractSet,
  type SincePinned,
} from "@chaos-core/contracts";
import type { PromptDefinition } from "../prompts/define.js";
import type { ResourceDefinition } from "../resources/define.js";
import type { ToolDefinition } from "../tools/define.js";
import { promptSource, resourceSource, toolSource } from "./sources.js";

/**
 * What a definition's contract depends on, compared by identity or value before anything is
 * recomputed: the schemas by object (converting them is the costly part), the rest by value, so
 * a description or an annotation changed in place on the same object is still seen.
 */
interface Checked {
  readonly input: unknown;
  readonly output: unknown;
  readonly key: string;
  /** The drifted entry and sections, e.g. `tools/x (surface)`; undefined when it matches the lock. */
  readonly drift: string | undefined;
}

const cheapKey = (def: ToolDefinition) => JSON.stringify([def.name, def.title, def.description, def.toolset, def.annotations]);

/**
 * The run-time rug-pull guard (docs/contracts.md §7): each tool definition the edge is about to
 * list or call, against the contract pinned in the lock the start check read. A digest compare
 * per section; each definition object's result is kept and recomputed only when its schemas'
 * objects or its plain fields change, so a listing does not convert every schema again.
 */
export class ContractGuard {
  private readonly checked = new WeakMap<ToolDefinition, Checked>();

  private readonly digests = new Map<string, string | undefined>();

  constructor(
    private readonly lock: ContractSet,
    private readonly history: ContractHistory = EMPTY_HISTORY,
  ) {}

  /** The entry digest the lock pins for a tool (what `tools/list` tells clients to pin), undefined when the lock has none. */
  pinnedDigest(name: string): string | undefined {
    if (!this.digests.has(name)) {
      const pinned = this.lock.tools[name];
      this.digests.set(name, pinned && entryDigest(pinned));
    }
    return this.digests.get(name);
  }

  /**
   * What a client's pinned digest of a tool says against the contract served (which the guard
   * holds to the lock's): current, unknown, or the BREAKING and RISKY changes since (item 8).
   */
  sincePinned(name: string, pinned: string): SincePinned | undefined {
    const served = this.lock.tools[name];
    return served && changesSincePinned(this.history, served, name, pinned);
  }

  /** `tools/<name> (<sections>)` when the definition no longer matches its pinned contract, else undefined. */
  toolDrift(def: ToolDefinition): string | undefined {
    const key = cheapKey(def);
    const seen = this.checked.get(def);
    if (seen && seen.input === def.input && seen.output === def.output && seen.key === key) return seen.drift;
    const drift = this.compute(def);
    this.checked.set(def, { input: def.input, output: def.output, key, drift });
    return drift;
  }

  /**
   * `prompts/<name> (surface)` when the prompt no longer matches its pinned contract. A prompt's
   * contract is a few strings, so it is recomputed at each check rather than cached.
   */
  promptDrift(def: PromptDefinition): string | undefined {
    return this.drift("prompts", def.name, () => promptContract(promptSource(def)));
  }

  /** `resources/<name> (surface)` when the resource (a fixed URI or a template) no longer matches; recomputed at each check, like a prompt's. */
  resourceDrift(def: ResourceDefinition): string | undefined {
    return this.drift("resources", def.name, () => resourceContract(resourceSource(def)));
  }

  private compute(def: ToolDefinition): string | undefined {
    return this.drift("tools", def.name, (pinned) =>
      toolContract(toolSource(def), { gates: pinned.behavior.gates, entitlements: pinned.entitlements }),
    );
  }

  /** `kind/name (<sections>)` naming the sections whose digests differ from the lock's; `current` is computed from the pinned entry. */
  private drift<K extends ContractKind>(kind: K, name: string, current: (pinned: ContractSet[K][string]) => object): string | undefined {
    const pinned = this.lock[kind][name] as ContractSet[K][string] | undefined;
    if (!pinned) return `${kind}/${name} (not in the lock)`;
    const was = sectionDigests(pinned);
    const bad = Object.entries(sectionDigests(current(pinned))).filter(([s, d]) => was[s] !== d).map(([s]) => s);
    return bad.length > 0 ? `${kind}/${name} (${bad.join(", ")})` : undefined;
  }
}

const guards = new WeakMap<ContractSet, ContractGuard>();

/** One guard (and so one cache) per parsed lock. */
export function guardFor(pinned: { readonly lock: ContractSet; readonly history: ContractHistory }): ContractGuard {
  let g = guards.get(pinned.lock);
  if (!g) guards.set(pinned.lock, (g = new ContractGuard(pinned.lock, pinned.history)));
  return g;
}
