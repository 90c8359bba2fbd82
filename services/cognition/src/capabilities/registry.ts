import type { ContractSet } from "@chaos-core/contracts";
import { CAPABILITY_NAME_RE, ChaosError, upstreamOffer, type ExposureSubject } from "@chaos-core/kit";
import type { Capability, CapabilityAnnotations, CapabilityRisk } from "./capability.js";
import { CapabilityGuard } from "./contract.js";

/**
 * What planners, `chaoscore_inspect` and the heuristic ranking see of a capability: never its
 * handler. Structurally a `CapabilityDescriptor`, so it feeds `HeuristicProvider.rank` as is.
 */
export interface CapabilityInfo {
  readonly name: string;
  readonly description: string;
  /** An upstream tool's title, as pinned (ranked beside its name and description). */
  readonly title?: string;
  readonly risk: CapabilityRisk;
  readonly annotations: CapabilityAnnotations;
}

/** The capabilities the cognitive core may use; the executor resolves plan steps only through it. */
export interface CapabilityRegistry {
  /** The capability registered under exactly this name, or undefined (never a near match). */
  get(name: string): Capability | undefined;
  /** Every capability, in registration order, internal ones included (ListCapabilities flags them). */
  list(): readonly Capability[];
  /**
   * Every upstream tool registered, quarantined ones included (ListCapabilities names why, so
   * the edge can refuse their calls naming it and list them again once approved).
   */
  upstreamTools(): readonly Capability[];
  /** The capabilities planners may use, in registration order: every one but the internal ones. */
  offered(): readonly Capability[];
  /** Name, description, risk and annotations of every offered capability, in registration order. */
  descriptors(): readonly CapabilityInfo[];
  /**
   * From now on, holds every capability to the contract `lock` pins (docs/contracts.md §7): one
   * that no longer matches is left out of `list`, `offered` and `descriptors`, and {@link drift}
   * names it, so the executor refuses to run it. Returns the capabilities that drift now (the
   * start check refuses to start on any).
   */
  pin(lock: ContractSet): readonly string[];
  /** `capabilities/<name> (<sections>)` when the pinned capability `name` no longer matches its contract; undefined when it does, or nothing is pinned. */
  drift(name: string): string | undefined;
  /**
   * This registry as one caller sees it (docs/federation.md §6): an upstream tool that no exposure
   * rule offers `who` (a call context: its tenant, principal and roles) is not there — absent from
   * every list, and `get` does not find it, so a step naming it is refused as an unknown
   * capability. Pinning goes to the whole registry.
   */
  forCaller(who: ExposureSubject, own?: CallerUpstreams): CapabilityRegistry;
  /**
   * Why a name this registry does not find cannot be called just now, when that is not simply
   * "unknown": the caller's tenant registry could not be read, so the name may be one of its own
   * upstream tools (`unavailable`, naming the registry). Undefined: the name is unknown.
   */
  unresolved(name: string): ChaosError | undefined;
  /**
   * Serves `tools` in place of the upstream tools registered so far (the operator approved a new
   * contract: its pins changed, docs/federation.md §4), checked as at construction; the built-in
   * capabilities stay as they are. A caller's view sees the change on its next lookup. Refuses
   * (and changes nothing) a set the registry could not be built with.
   */
  replaceUpstreamTools(tools: readonly Capability[]): void;
}

/**
 * The caller's tenant's own upstream tools (its registry upstreams, docs/federation.md §12), as
 * capabilities, merged into its view; or why they cannot be offered now (the registry could not
 * be read: nothing of them is offered, and a step naming an unknown capability fails `unavailable`).
 */
export interface CallerUpstreams {
  readonly capabilities: readonly Capability[];
  readonly unavailable?: ChaosError;
}

/** What planners see of a capability: never its handler. */
function infoOf(c: Capability): CapabilityInfo {
  return { name: c.name, description: c.description, ...(c.upstream?.title ? { title: c.upstream.title } : {}), risk: c.risk, annotations: { ...c.annotations } };
}

/** The view of `registry` for `who`, with its tenant's own upstream tools: what {@link CapabilityRegistry.forCaller} answers. */
function callerView(registry: CapabilityRegistry, who: ExposureSubject, own?: CallerUpstreams): CapabilityRegistry {
  const visible = (c: Capability) => c.upstream === undefined || upstreamOffer(c.upstream.grants, who) !== undefined;
  // A tenant's own tools never shadow a capability of the registry (the operator's names win, §12 item 5).
  const extra = new Map<string, Capability>();
  for (const c of own?.capabilities ?? []) if (registry.get(c.name) === undefined && visible(c)) extra.set(c.name, c);
  const extraDrift = (c: Capability) => c.upstream?.drift?.();
  const extraTools = () => [...extra.values()];
  const extraServed = () => extraTools().filter((c) => extraDrift(c) === undefined);
  const view: CapabilityRegistry = {
    get: (name) => {
      const c = registry.get(name);
      if (c) return visible(c) ? c : undefined;
      return extra.get(name);
    },
    list: () => [...registry.list().filter(visible), ...extraServed()],
    upstreamTools: () => [...registry.upstreamTools().filter(visible), ...extraTools()],
    offered: () => [...registry.offered().filter(visible), ...extraServed().filter((c) => c.internal !== true)],
    descriptors: () => {
      const hidden = new Set(registry.upstreamTools().filter((c) => !visible(c)).map((c) => c.name));
      return [
        ...registry.descriptors().filter((d) => !hidden.has(d.name)),
        ...extraServed()
          .filter((c) => c.internal !== true)
          .map(infoOf),
      ];
    },
    pin: (lock) => registry.pin(lock),
    drift: (name) => {
      const mine = extra.get(name);
      if (mine) return extraDrift(mine);
      return view.get(name) ? registry.drift(name) : undefined;
    },
    forCaller: (other, otherOwn) => callerView(registry, other, otherOwn),
    unresolved: (name) => (view.get(name) === undefined ? own?.unavailable : undefined),
    replaceUpstreamTools: (tools) => registry.replaceUpstreamTools(tools),
  };
  return view;
}

/** Why a capability's `implies` list cannot be honoured, or undefined when it can. */
function impliesProblem(capability: Capability, byName: ReadonlyMap<string, Capability>): string | undefined {
  for (const name of capability.implies ?? []) {
    if (name === capability.name) return "implies itself";
    const implied = byName.get(name);
    if (!implied) return `implies "${name}", which is not registered, so its policy could not be asked`;
    // One level only: the executor asks policy for exactly the names listed, so a chain would
    // silently leave its far end unasked.
    if ((implied.implies ?? []).length > 0) return `implies "${name}", which implies others in turn; list every capability directly`;
  }
  return undefined;
}

/**
 * Builds a registry from a list of capabilities. Refuses (with `invalid_argument`, naming the
 * capability) a malformed name, a name listed twice, an empty description, or an `implies` entry
 * that is not a registered capability implying nothing itself, because a registry that guesses
 * which of two capabilities a name means is not one policy can reason about.
 */
export function createCapabilityRegistry(capabilities: readonly Capability[]): CapabilityRegistry {
  let byName = indexed(capabilities);
  let all = Object.freeze([...byName.values()]);
  let guard: CapabilityGuard | undefined;
  // An upstream tool is held to its own pin (upstreams.lock, what it lists now), never to chaoscore.lock.
  const driftOf = (c: Capability) => (c.upstream ? c.upstream.drift?.() : guard?.drift(c));
  const served = (c: Capability) => driftOf(c) === undefined;
  const list = () => (guard ? all.filter(served) : all);
  const offered = () => list().filter((c) => c.internal !== true);
  const registry: CapabilityRegistry = {
    // Object.hasOwn-style lookup through a Map, so "constructor" or "__proto__" never resolve.
    get: (name) => byName.get(name),
    list,
    upstreamTools: () => all.filter((c) => c.upstream !== undefined),
    offered,
    descriptors: () =>
      offered().map(infoOf),
    pin: (lock) => {
      guard = new CapabilityGuard(lock);
      return all.flatMap((c) => driftOf(c) ?? []);
    },
    drift: (name) => {
      const c = byName.get(name);
      return c && driftOf(c);
    },
    forCaller: (who, own) => callerView(registry, who, own),
    unresolved: () => undefined,
    replaceUpstreamTools: (tools) => {
      const next = indexed([...all.filter((c) => c.upstream === undefined), ...tools]);
      byName = next;
      all = Object.freeze([...next.values()]);
    },
  };
  return registry;
}

/** The capabilities by name, each checked (see {@link createCapabilityRegistry}). */
function indexed(capabilities: readonly Capability[]): Map<string, Capability> {
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
  for (const capability of byName.values()) {
    const problem = impliesProblem(capability, byName);
    if (problem) throw new ChaosError("invalid_argument", `capability "${capability.name}" ${problem}`);
  }
  return byName;
}

/** The capability registered under exactly this name when planners may use it (not internal), else undefined. */
export function offeredCapability(registry: CapabilityRegistry, name: string): Capability | undefined {
  const capability = registry.get(name);
  return capability?.internal === true ? undefined : capability;
}
