import {
  cachedPerDefinition,
  changesSincePinned,
  EMPTY_HISTORY,
  entryDigest,
  promptContract,
  resourceContract,
  sectionDrift,
  toolContract,
  type ContractHistory,
  type ContractKind,
  type ContractSet,
  type SincePinned,
} from "@chaos-core/contracts";
import type { PromptDefinition } from "../definitions/prompt.js";
import type { ResourceDefinition } from "../definitions/resource.js";
import type { ToolDefinition } from "../definitions/tool.js";
import { promptSource, resourceSource, toolSource } from "./sources.js";

/**
 * What a tool's contract is recomputed on: its schemas by identity (converting them is the costly
 * part), the rest by value — strings compare by value as they are, only the annotations object is
 * serialised. It runs twice per call: serialising the description with them took 0.7 % of the
 * embedded server's CPU under 16 clients (issue 14).
 */
const toolParts = (def: ToolDefinition) => [def.input, def.output, def.name, def.title, def.description, def.toolset, JSON.stringify(def.annotations)];

/**
 * The run-time rug-pull guard (docs/contracts.md §7): each tool definition the edge is about to
 * list or call, against the contract pinned in the lock the start check read. A digest compare
 * per section; each definition object's result is kept and recomputed only when its schemas'
 * objects or its plain fields change, so a listing does not convert every schema again.
 */
export class ContractGuard {
  private readonly checked = cachedPerDefinition(toolParts, (def: ToolDefinition) => this.compute(def));

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
    return this.checked(def);
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

  private drift<K extends ContractKind>(kind: K, name: string, current: (pinned: ContractSet[K][string]) => object): string | undefined {
    return sectionDrift(kind, name, this.lock[kind][name] as ContractSet[K][string] | undefined, current);
  }
}

const guards = new WeakMap<ContractSet, ContractGuard>();

/** One guard (and so one cache) per parsed lock. */
export function guardFor(pinned: { readonly lock: ContractSet; readonly history: ContractHistory }): ContractGuard {
  let g = guards.get(pinned.lock);
  if (!g) guards.set(pinned.lock, (g = new ContractGuard(pinned.lock, pinned.history)));
  return g;
}
