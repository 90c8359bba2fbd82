import { promptContract, sectionDigests, toolContract, type ContractSet } from "@chaos-core/contracts";
import type { PromptDefinition } from "../prompts/define.js";
import type { ToolDefinition } from "../tools/define.js";
import { promptSource, toolSource } from "./sources.js";

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

  constructor(private readonly lock: ContractSet) {}

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
    const pinned = this.lock.prompts[def.name];
    if (!pinned) return `prompts/${def.name} (not in the lock)`;
    const now = sectionDigests(promptContract(promptSource(def)));
    const was = sectionDigests(pinned);
    const bad = Object.keys(now).filter((s) => was[s] !== now[s]);
    return bad.length > 0 ? `prompts/${def.name} (${bad.join(", ")})` : undefined;
  }

  private compute(def: ToolDefinition): string | undefined {
    const pinned = this.lock.tools[def.name];
    if (!pinned) return `tools/${def.name} (not in the lock)`;
    const now = sectionDigests(toolContract(toolSource(def), { gates: pinned.behavior.gates, entitlements: pinned.entitlements }));
    const was = sectionDigests(pinned);
    const bad = Object.keys(now).filter((s) => was[s] !== now[s]);
    return bad.length > 0 ? `tools/${def.name} (${bad.join(", ")})` : undefined;
  }
}

const guards = new WeakMap<ContractSet, ContractGuard>();

/** One guard (and so one cache) per parsed lock. */
export function guardFor(lock: ContractSet): ContractGuard {
  let g = guards.get(lock);
  if (!g) guards.set(lock, (g = new ContractGuard(lock)));
  return g;
}
