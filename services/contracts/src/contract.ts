import { ChaosError, sha256Rfc8785 } from "@chaos-core/kit";
import type { JsonSchema } from "./json-schema.js";
import { tokenEconomics, type TokenEconomics } from "./token-economics.js";

/** A tool as its definition states it: what `tools/list` publishes, and its toolset. */
export interface ToolSource {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly toolset: string;
  /** The JSON Schema clients see in `tools/list`. */
  readonly inputSchema: JsonSchema;
  readonly outputSchema: JsonSchema;
  readonly annotations: {
    readonly readOnlyHint: boolean;
    readonly destructiveHint: boolean;
    readonly idempotentHint: boolean;
    readonly openWorldHint: boolean;
  };
}

/** A prompt as `prompts/list` describes it. */
export interface PromptSource {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly arguments: ReadonlyArray<{ readonly name: string; readonly required: boolean; readonly description: string }>;
}

/** A resource or resource template as `resources/list` / `resources/templates/list` describe it. */
export interface ResourceSource {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly uri?: string;
  readonly uriTemplate?: string;
  readonly mimeType: string;
  readonly cacheHint?: unknown;
}

/** A cognition capability as its definition states it. */
export interface CapabilitySource {
  readonly name: string;
  readonly description: string;
  readonly risk: string;
  readonly inputSchema: JsonSchema;
  readonly outputSchema: JsonSchema;
  readonly annotations: ToolSource["annotations"];
  readonly implies: readonly string[];
  readonly internal: boolean;
}

/** The code-defined path a tool call takes (never the operator's per-tenant policy). */
export interface Gates {
  /** Capabilities the tool runs through the executor by name (sorted). */
  readonly capabilities: readonly string[];
  /** Reaches cognition's executor (`Execute`, `ExecuteStream` or `Achieve`). */
  readonly executor: boolean;
  /** Reaches an approval RPC (docs/contracts.md §2). */
  readonly approvalPath: boolean;
}

/** What the code may do, derived from its source at lock time (the scanner). */
export interface Entitlements {
  readonly filesystem: boolean;
  readonly filesystemWrite: boolean;
  readonly network: boolean;
  readonly subprocess: boolean;
  readonly crypto: boolean;
  readonly codeEvaluation: boolean;
  /** Services reached through the project's typed clients, sorted. */
  readonly services: readonly string[];
  /** `service.method` of each typed-client call, sorted. */
  readonly serviceMethods: readonly string[];
  /** Evasion signals, `kind @ file`, sorted. */
  readonly evasion: readonly string[];
  /** `category: api @ file`, sorted: why each flag is set. */
  readonly evidence: readonly string[];
}

export const NO_ENTITLEMENTS: Entitlements = Object.freeze({
  filesystem: false,
  filesystemWrite: false,
  network: false,
  subprocess: false,
  crypto: false,
  codeEvaluation: false,
  services: [],
  serviceMethods: [],
  evasion: [],
  evidence: [],
});

export const NO_GATES: Gates = Object.freeze({ capabilities: [], executor: false, approvalPath: false });

export interface ToolSurface {
  readonly name: string;
  readonly title: string;
  readonly description: string;
  readonly toolset: string;
  readonly inputSchema: JsonSchema;
  readonly inputSchemaDigest: string;
}

export interface ToolBehavior {
  readonly outputSchema: JsonSchema;
  readonly outputSchemaDigest: string;
  readonly readOnly: boolean;
  readonly destructive: boolean;
  readonly idempotent: boolean;
  readonly openWorld: boolean;
  readonly gates: Gates;
}

/** A tool's contract: four sections, each hashed on its own (docs/contracts.md §2–3). */
export interface ToolContract {
  readonly surface: ToolSurface;
  readonly behavior: ToolBehavior;
  readonly tokenEconomics: TokenEconomics;
  readonly entitlements: Entitlements;
}

export interface CapabilityContract {
  readonly surface: {
    readonly name: string;
    readonly description: string;
    readonly risk: string;
    readonly implies: readonly string[];
    readonly internal: boolean;
    readonly inputSchema: JsonSchema;
    readonly inputSchemaDigest: string;
  };
  readonly behavior: Omit<ToolBehavior, "gates">;
  readonly entitlements: Entitlements;
}

export interface PromptContract {
  readonly surface: PromptSource;
}

export interface ResourceContract {
  readonly surface: ResourceSource;
}

/** Every contract of a server, by kind and name: what a lockfile pins. */
export interface ContractSet {
  readonly tools: Readonly<Record<string, ToolContract>>;
  readonly prompts: Readonly<Record<string, PromptContract>>;
  readonly resources: Readonly<Record<string, ResourceContract>>;
  readonly capabilities: Readonly<Record<string, CapabilityContract>>;
}

export type ContractKind = keyof ContractSet;
export const CONTRACT_KINDS: readonly ContractKind[] = ["tools", "prompts", "resources", "capabilities"];

/** `sha256:` + hex SHA-256 of the value's RFC 8785 form. */
export function digestOf(value: unknown): string {
  return `sha256:${sha256Rfc8785(value)}`;
}

const sorted = (xs: readonly string[]) => [...new Set(xs)].sort();

function normaliseEntitlements(e: Entitlements): Entitlements {
  return {
    filesystem: e.filesystem || e.filesystemWrite,
    filesystemWrite: e.filesystemWrite,
    network: e.network,
    subprocess: e.subprocess,
    crypto: e.crypto,
    codeEvaluation: e.codeEvaluation,
    services: sorted(e.services),
    serviceMethods: sorted(e.serviceMethods),
    evasion: sorted(e.evasion),
    evidence: sorted(e.evidence),
  };
}

/**
 * A tool's contract from its definition and what the scanner derived from its source (gates and
 * entitlements; at run time both come from the lock, as nothing then reads source).
 */
export function toolContract(tool: ToolSource, derived: { gates: Gates; entitlements: Entitlements }): ToolContract {
  return {
    surface: {
      name: tool.name,
      title: tool.title,
      description: tool.description,
      toolset: tool.toolset,
      inputSchema: tool.inputSchema,
      inputSchemaDigest: digestOf(tool.inputSchema),
    },
    behavior: {
      outputSchema: tool.outputSchema,
      outputSchemaDigest: digestOf(tool.outputSchema),
      readOnly: tool.annotations.readOnlyHint,
      destructive: tool.annotations.destructiveHint,
      idempotent: tool.annotations.idempotentHint,
      openWorld: tool.annotations.openWorldHint,
      gates: { capabilities: sorted(derived.gates.capabilities), executor: derived.gates.executor, approvalPath: derived.gates.approvalPath },
    },
    tokenEconomics: tokenEconomics(tool.inputSchema, tool.outputSchema),
    entitlements: normaliseEntitlements(derived.entitlements),
  };
}

export function capabilityContract(c: CapabilitySource, entitlements: Entitlements): CapabilityContract {
  return {
    surface: {
      name: c.name,
      description: c.description,
      risk: c.risk,
      implies: sorted(c.implies),
      internal: c.internal,
      inputSchema: c.inputSchema,
      inputSchemaDigest: digestOf(c.inputSchema),
    },
    behavior: {
      outputSchema: c.outputSchema,
      outputSchemaDigest: digestOf(c.outputSchema),
      readOnly: c.annotations.readOnlyHint,
      destructive: c.annotations.destructiveHint,
      idempotent: c.annotations.idempotentHint,
      openWorld: c.annotations.openWorldHint,
    },
    entitlements: normaliseEntitlements(entitlements),
  };
}

export function promptContract(p: PromptSource): PromptContract {
  return { surface: { ...p, arguments: [...p.arguments].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) } };
}

export function resourceContract(r: ResourceSource): ResourceContract {
  return { surface: { ...r } };
}

/** The digest of each section of a contract, by section name. */
export function sectionDigests(contract: object): Record<string, string> {
  return Object.fromEntries(Object.entries(contract).map(([section, body]) => [section, digestOf(body)]));
}

/** An entry's digest: over its section digests. */
export function entryDigest(contract: object): string {
  return digestOf(sectionDigests(contract));
}

/** The server digest: over the sorted entry digests of each kind. */
export function serverDigest(set: ContractSet): string {
  return digestOf(Object.fromEntries(CONTRACT_KINDS.map((kind) => [kind, Object.values(set[kind]).map(entryDigest).sort()])));
}

/**
 * A read-only tool whose own code writes files, opens sockets (unless it says it is open-world)
 * or spawns processes. Calls through the typed service clients are not its own sockets.
 */
export function violationsOf(name: string, contract: ToolContract | CapabilityContract): string[] {
  if (!contract.behavior.readOnly) return [];
  const e = contract.entitlements;
  const out: string[] = [];
  if (e.filesystemWrite) out.push(`${name} is marked read-only but its code writes files`);
  // An open-world read (http.request's GET) says it reaches outside; a closed one may not.
  if (e.network && !contract.behavior.openWorld) out.push(`${name} is marked read-only and closed-world but its code opens network connections`);
  if (e.subprocess) out.push(`${name} is marked read-only but its code spawns processes`);
  return out;
}

/** Builds a set, refusing two entries of one kind under one name. */
export function contractSet(entries: {
  tools: ReadonlyArray<ToolContract>;
  prompts: ReadonlyArray<PromptContract>;
  resources: ReadonlyArray<ResourceContract>;
  capabilities: ReadonlyArray<CapabilityContract>;
}): ContractSet {
  const byName = <T extends { surface: { name: string } }>(kind: string, list: ReadonlyArray<T>): Record<string, T> => {
    const out: Record<string, T> = {};
    for (const c of list) {
      if (Object.hasOwn(out, c.surface.name)) throw new ChaosError("invalid_argument", `${kind}.${c.surface.name}: defined twice`);
      out[c.surface.name] = c;
    }
    return out;
  };
  return {
    tools: byName("tools", entries.tools),
    prompts: byName("prompts", entries.prompts),
    resources: byName("resources", entries.resources),
    capabilities: byName("capabilities", entries.capabilities),
  };
}

/**
 * A definition's answer (a drift, a digest), kept per definition object and recomputed only when
 * one of its `parts` changes: the objects whose conversion is the costly part (schemas) by
 * identity, and a string of its plain fields by value, so a field changed in place on the same
 * object is still seen. What the run-time guards of the edge and cognition keep their checks in.
 */
export function cachedPerDefinition<D extends object, R>(parts: (d: D) => readonly unknown[], compute: (d: D) => R): (d: D) => R {
  const seen = new WeakMap<D, { parts: readonly unknown[]; result: R }>();
  return (d) => {
    const now = parts(d);
    const was = seen.get(d);
    if (was && was.parts.length === now.length && was.parts.every((p, i) => p === now[i])) return was.result;
    const result = compute(d);
    seen.set(d, { parts: now, result });
    return result;
  };
}

/**
 * `kind/name (<sections>)` naming the sections of `current()` whose digests differ from the pinned
 * contract's, `kind/name (not in the lock)` when nothing is pinned, undefined when all match: the
 * run-time guards' one compare.
 */
export function sectionDrift<P extends object>(kind: ContractKind, name: string, pinned: P | undefined, current: (pinned: P) => object): string | undefined {
  if (!pinned) return `${kind}/${name} (not in the lock)`;
  const was = sectionDigests(pinned);
  const bad = Object.entries(sectionDigests(current(pinned))).filter(([s, d]) => was[s] !== d).map(([s]) => s);
  return bad.length > 0 ? `${kind}/${name} (${bad.join(", ")})` : undefined;
}
