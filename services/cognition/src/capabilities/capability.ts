import type { z } from "zod";
import type { CallContext, ServiceClient, UpstreamGrant } from "@chaos-core/kit";
import type { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import type { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import type { AIProvider } from "../providers/ai-provider.js";

/** Risk of a capability, least to most dangerous; policy's risk rules act on it. */
export type CapabilityRisk = "low" | "medium" | "high" | "critical";

/** Honest hints about what a capability does, mirrored from MCP tool annotations. */
export interface CapabilityAnnotations {
  readonly readOnlyHint: boolean;
  readonly destructiveHint: boolean;
  readonly idempotentHint: boolean;
  readonly openWorldHint: boolean;
}

/**
 * Whether a step of this capability has no side effect at all, so the executor may record its
 * policy decision and its outcome in one ledger entry, after the handler and before the result is
 * returned (docs/ledger.md, "One entry for a read-only step"). All three hints must say so: it
 * only reads (`readOnlyHint`), it changes nothing (`destructiveHint` false), and it reaches
 * nothing outside Chaos Core (`openWorldHint` false) — a prompt sent to a model provider or a
 * request sent to an HTTP host is itself an effect, even when the call only reads, so
 * `cognition.generate_text` and `http.request` do not qualify. The annotations are part of the
 * capability's contract, so where a lock pins it a definition that starts claiming this without
 * a new lock drifts and is not run.
 */
export function hasNoSideEffect(annotations: CapabilityAnnotations): boolean {
  return annotations.readOnlyHint && !annotations.destructiveHint && !annotations.openWorldHint;
}

/**
 * Whether the executor may record a step of this capability in one entry after the handler
 * ({@link hasNoSideEffect}). Never for an upstream tool: its annotations are the upstream's
 * untrusted hints, so its decision is durable before the call leaves, as for any side effect
 * (docs/federation.md §5).
 */
export function mayRecordInOneEntry(capability: Pick<Capability, "annotations" | "upstream">): boolean {
  return capability.upstream === undefined && hasNoSideEffect(capability.annotations);
}

/** Which tool of which upstream MCP server a capability is, and how the edge serves it. */
export interface UpstreamToolRef {
  /** The upstream's name (the capability's prefix). */
  readonly name: string;
  /** The tool's name as the upstream lists it. */
  readonly tool: string;
  /** The MCP tool the edge lists: `<upstream>__<tool>`. */
  readonly mcpName: string;
  /** The upstream's title for it; empty when it gave none. */
  readonly title: string;
  /** The pinned input schema, as the upstream published it (what clients see in `tools/list`). */
  readonly inputSchema: Record<string, unknown>;
  /** Why it is quarantined (its live definition drifted from its pin), or undefined while it is served. */
  readonly drift?: () => string | undefined;
  /** Who is offered it, and how (the declaration's exposure rules for this tool): whom none offers it, it does not exist for. */
  readonly grants: readonly UpstreamGrant[];
}

/** Facts of one call that policy rules look at, derived from the validated input. */
export interface CapabilityFacts {
  /** The host an outbound HTTP call will reach first. */
  readonly httpHost?: string;
  readonly attributes?: Readonly<Record<string, string>>;
}

/** What a handler may use. It never sees the transport, the session store or a secret. */
export interface CapabilityContext {
  /** Who the call is for (tenant, principal, session). */
  readonly call: CallContext;
  /** Aborted when the caller cancels or the step's deadline passes. */
  readonly signal: AbortSignal;
  readonly provider: AIProvider;
  readonly memory: ServiceClient<typeof MemoryService>;
  readonly policy: ServiceClient<typeof PolicyService>;
  /**
   * Passes one line to the caller while the step runs, when it asked for progress (ExecuteStream);
   * unset otherwise. The line names its source (`files: 3/10`) and goes to that caller alone.
   */
  readonly progress?: (message: string) => void;
}

/**
 * A capability: one thing the cognitive core can do. Adding one is a file exporting a
 * `Capability` plus one line in the registry list; nothing in the core, policy, edge or a
 * transport changes. Handlers run only through the executor, after policy allowed the call.
 */
export interface Capability<I extends z.ZodType = z.ZodType, O extends z.ZodType = z.ZodType> {
  /** Dotted lower-case name, e.g. `http.request`; what policy documents list. */
  readonly name: string;
  /** What it does, for planners (the heuristic ranks these) and for people. */
  readonly description: string;
  readonly risk: CapabilityRisk;
  readonly inputSchema: I;
  readonly outputSchema: O;
  readonly annotations: CapabilityAnnotations;
  /**
   * Capabilities whose policy also governs this one (`memory.episode` implies `memory.remember`):
   * the executor evaluates this capability and each one named here, at its own registered risk,
   * and the strictest decision holds. So a DENY on what a capability does underneath cannot be
   * stepped around by calling it under another name. Each must be registered and imply nothing.
   */
  readonly implies?: readonly string[];
  /**
   * The cognitive core's own bookkeeping, run by the brain only (`memory.episode`): listed by
   * ListCapabilities, never offered to planners, and refused with `invalid_argument` in a plan or
   * an explicit step.
   */
  readonly internal?: boolean;
  /**
   * Set on a tool of an upstream MCP server (docs/federation.md): which upstream and which of its
   * tools. It is held to its pin in upstreams.lock, not chaoscore.lock, its result's hash goes into
   * the outcome entry, and it never takes the single-entry read path.
   */
  readonly upstream?: UpstreamToolRef;
  /** Facts policy needs before the handler may run (e.g. the target host). */
  facts?(input: z.output<I>): CapabilityFacts;
  /**
   * The input a call serving `objective` would take, derived by plain deterministic rules (no
   * model), or undefined when the objective holds nothing this capability can act on. The
   * heuristic planner plans only capabilities whose hook answers; the answer must still pass
   * `inputSchema`, like any planned input.
   */
  fromObjective?(objective: string): z.input<I> | undefined;
  handler(input: z.output<I>, ctx: CapabilityContext): Promise<z.output<O>>;
}

/** Keeps a capability's input and output types tied to its schemas. */
export function defineCapability<I extends z.ZodType, O extends z.ZodType>(c: Capability<I, O>): Capability<I, O> {
  return c;
}
