import { ChaosError } from "@chaos-core/kit";
import type { Capability, CapabilityAnnotations, CapabilityRisk } from "./capability.js";

/**
 * A capability name: lowercase dotted segments (`http.request`, `memory.recall`). The same rule
 * the policy service applies to the names in a policy document, so every registered name can be
 * listed there and matched exactly.
 */
export const CAPABILITY_NAME_RE = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)*$/;

/**
 * What planners, `chaoscore_inspect` and the heuristic ranking see of a capability: never its
 * handler. Structurally a `CapabilityDescriptor`, so it feeds `HeuristicProvider.rank` as is.
 */
export interface CapabilityInfo {
  readonly name: string;
  readonly description: string;
  readonly risk: CapabilityRisk;
  readonly annotations: CapabilityAnnotations;
}

/** The capabilities the cognitive core may use; the executor resolves plan steps only through it. */
export interface CapabilityRegistry {
  /** The capability registered under exactly this name, or undefined (never a near match). */
  get(name: string): Capability | undefined;
  /** Every capability, in registration order. */
  list(): readonly Capability[];
  /** Name, description, risk and annotations of every capability, in registration order. */
  descriptors(): readonly CapabilityInfo[];
}

/**
 * Builds a registry from a list of capabilities. Refuses (with `invalid_argument`, naming the
 * capability) a malformed name, a name listed twice, or an empty description, because a
 * registry that guesses which of two capabilities a name means is not one policy can reason about.
 */
export function createCapabilityRegistry(capabilities: readonly Capability[]): CapabilityRegistry {
  const byName = new Map<string, Capability>();
  for (const capability of capabilities) {
    const { name } = capability;
    if (!CAPABILITY_NAME_RE.test(name)) {
      throw new ChaosError(
        "invalid_argument",
        `capability name "${name}" is not valid: use lowercase dotted segments such as "memory.recall"`,
      );
    }
    if (byName.has(name)) throw new ChaosError("invalid_argument", `capability "${name}" is registered twice`);
    if (capability.description.trim() === "") {
      throw new ChaosError("invalid_argument", `capability "${name}" has no description; planners rank by it`);
    }
    byName.set(name, capability);
  }
  const list = Object.freeze([...byName.values()]);
  const descriptors = Object.freeze(
    list.map((c): CapabilityInfo => ({
      name: c.name,
      description: c.description,
      risk: c.risk,
      annotations: { ...c.annotations },
    })),
  );
  return {
    // Object.hasOwn-style lookup through a Map, so "constructor" or "__proto__" never resolve.
    get: (name) => byName.get(name),
    list: () => list,
    descriptors: () => descriptors,
  };
}
