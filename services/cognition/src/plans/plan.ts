import { z } from "zod";

/** A value JSON can carry; what a step input (a `google.protobuf.Struct` on the wire) holds. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** A JSON object, the shape of every step input. */
export type JsonObject = { [key: string]: JsonValue };

/** One step of a plan: a call of a registered capability with its input. */
export interface PlanStep {
  /** Unique within its plan; outcomes and re-plans refer to steps by it. */
  readonly id: string;
  /** The registered capability the step calls, e.g. `http.request`. */
  readonly capability: string;
  readonly input: JsonObject;
  /** Why the planner chose this step, for people reading the trace. */
  readonly rationale: string;
}

/**
 * A plan as the store keeps it. It belongs to one tenant and one scope inside it (the MCP
 * session that made it, or the principal that made it without a session): only that pair can
 * read it back, so a plan id that leaks to another session or principal is useless there.
 */
export interface StoredPlan {
  /** Random, URL-safe, 128 bits. */
  readonly id: string;
  readonly tenant: string;
  /**
   * What the plan is bound to inside its tenant ({@link planScopeOf}): the MCP session id
   * (2025-11-25), or `principal:` + the hex SHA-256 of the principal for a call without a
   * session (docs/protocol.md §5).
   */
  readonly scope: string;
  /**
   * The same session id again, written for a session scope only so that a replica of an older
   * version still reads the plan during a rolling upgrade; a plan written before scopes existed
   * has only this, and reads with it as its scope.
   */
  readonly sessionId?: string;
  readonly objective: string;
  readonly steps: readonly PlanStep[];
  /** ISO 8601, UTC. */
  readonly createdAt: string;
  /** ISO 8601, UTC; the plan is gone after this instant. */
  readonly expiresAt: string;
  /** The AI provider that produced the plan (`heuristic` when no model was used). */
  readonly provider?: string;
  readonly model?: string;
}

/** What a caller hands to {@link PlanStore.put}; the store assigns id and timestamps. */
export type NewPlan = Omit<StoredPlan, "id" | "createdAt" | "expiresAt" | "sessionId">;

const planStepSchema = z.object({
  id: z.string().min(1),
  capability: z.string().min(1),
  input: z.record(z.string(), z.json()),
  rationale: z.string(),
});

/**
 * The shape of a stored plan. Applied on the way in (so only JSON is stored) and on the way
 * out of a shared store (so a value someone else wrote is never trusted as a plan).
 */
export const storedPlanSchema = z.object({
  id: z.string(),
  tenant: z.string(),
  scope: z.string().optional(),
  sessionId: z.string().optional(),
  objective: z.string(),
  steps: z.array(planStepSchema).refine((steps) => new Set(steps.map((s) => s.id)).size === steps.length, {
    message: "step ids must be unique within a plan",
  }),
  createdAt: z.iso.datetime(),
  expiresAt: z.iso.datetime(),
  provider: z.string().optional(),
  model: z.string().optional(),
});
