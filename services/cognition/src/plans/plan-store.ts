import { createHash, randomBytes } from "node:crypto";
import { assertTenantId, ChaosError, type CallContext } from "@chaos-core/kit";
import { type NewPlan, type StoredPlan, storedPlanSchema } from "./plan.js";

/** How long a plan lives when the caller does not say: long enough to review and execute it. */
export const DEFAULT_PLAN_TTL_SECONDS = 60 * 60;
/** The longest a caller may ask a plan to live; plans are working state, not records. */
export const MAX_PLAN_TTL_SECONDS = 24 * 60 * 60;
/** Most steps one plan may have. */
export const MAX_PLAN_STEPS = 50;
/** Largest plan, serialized as JSON (UTF-8), that a store accepts: 256 KiB. */
export const MAX_PLAN_BYTES = 256 * 1024;

/**
 * Where plans live between `chaoscore_plan` and `chaoscore_execute`, possibly on different
 * replicas. A plan is bound to its tenant and scope ({@link planScopeOf}: the session, or the
 * principal of a call without one): any other pair finds nothing, exactly as if the id did not
 * exist.
 */
export interface PlanStore {
  /**
   * Validates and stores a plan for `ttlSeconds` (default {@link DEFAULT_PLAN_TTL_SECONDS}).
   * @throws ChaosError `invalid_argument` naming the limit or rule that was broken.
   */
  put(plan: NewPlan, ttlSeconds?: number): Promise<StoredPlan>;
  /** The plan, or `undefined` when it does not exist, has expired or belongs to another scope or tenant. */
  get(tenant: string, scope: string, planId: string): Promise<StoredPlan | undefined>;
  /** Removes the plan; `false` when there was nothing this tenant and scope could see. */
  delete(tenant: string, scope: string, planId: string): Promise<boolean>;
}

/** Settings both implementations share. */
export interface PlanStoreOptions {
  defaultTtlSeconds?: number;
  maxTtlSeconds?: number;
  /** Milliseconds since the epoch; injectable so tests control time. */
  now?: () => number;
}

/** A plan ready to store: the record, its JSON and its lifetime. */
export interface PreparedPlan {
  readonly plan: StoredPlan;
  readonly json: string;
  readonly ttlSeconds: number;
}

const PLAN_ID_BYTES = 16;
const PLAN_ID_RE = /^[A-Za-z0-9_-]{22}$/;
// MCP session ids are visible ASCII; the bound keeps keys small.
const SCOPE_RE = /^[\x21-\x7e]{1,256}$/;

/** How the scope of a plan made without a session starts. */
export const PRINCIPAL_SCOPE_PREFIX = "principal:";

/**
 * The scope a call's plans are bound to (docs/protocol.md §5): its MCP session when it has one
 * (2025-11-25 keeps session scoping), else `principal:` + the hex SHA-256 of the principal — a
 * fixed-size, visible-ASCII key part whatever characters a principal holds, and another for
 * every principal, so another principal of the tenant finds nothing.
 */
export function planScopeOf(call: Pick<CallContext, "principal" | "sessionId">): string {
  if (call.sessionId) {
    // Session ids are minted by the edge (UUIDs); one shaped like a principal scope would alias it.
    if (call.sessionId.startsWith(PRINCIPAL_SCOPE_PREFIX)) {
      throw new ChaosError("invalid_argument", `a session id cannot start with "${PRINCIPAL_SCOPE_PREFIX}"`);
    }
    return call.sessionId;
  }
  return PRINCIPAL_SCOPE_PREFIX + createHash("sha256").update(call.principal, "utf8").digest("hex");
}

/** Whether a scope is a session's (as opposed to a principal's). */
export function isSessionScope(scope: string): boolean {
  return !scope.startsWith(PRINCIPAL_SCOPE_PREFIX);
}

/** A fresh plan id: 128 random bits, base64url. */
export function newPlanId(): string {
  return randomBytes(PLAN_ID_BYTES).toString("base64url");
}

/**
 * Whether `id` could be a plan id. Anything else is simply not found, and never reaches a key,
 * so an id like `x:<id>` cannot reach into another scope's key space.
 */
export function isPlanId(id: string): boolean {
  return PLAN_ID_RE.test(id);
}

/** Checks the tenant and scope a plan is bound to; both come from the call context. */
export function assertPlanOwner(tenant: string, scope: string): void {
  assertTenantId(tenant);
  if (typeof scope !== "string" || !SCOPE_RE.test(scope)) {
    throw new ChaosError("invalid_argument", "plan scope (the session id) must be 1 to 256 visible ASCII characters");
  }
}

function invalid(message: string): ChaosError {
  return new ChaosError("invalid_argument", message);
}

function resolveTtl(ttlSeconds: number | undefined, defaultTtl: number, maxTtl: number): number {
  const ttl = ttlSeconds ?? defaultTtl;
  if (!Number.isSafeInteger(ttl) || ttl < 1) {
    throw invalid(`plan TTL must be a whole number of seconds, at least 1 (got ${String(ttl)})`);
  }
  if (ttl > maxTtl) throw invalid(`plan TTL may be at most ${maxTtl} seconds (got ${ttl})`);
  return ttl;
}

/**
 * Everything both stores check before storing, so they accept and reject the same plans:
 * owner, TTL, step count, JSON-only content and serialized size. The stored plan is a copy;
 * later changes to the caller's objects do not reach it.
 */
export function preparePlan(input: NewPlan, ttlSeconds: number | undefined, options: PlanStoreOptions): PreparedPlan {
  assertPlanOwner(input.tenant, input.scope);
  const ttl = resolveTtl(
    ttlSeconds,
    options.defaultTtlSeconds ?? DEFAULT_PLAN_TTL_SECONDS,
    options.maxTtlSeconds ?? MAX_PLAN_TTL_SECONDS,
  );
  if (!Array.isArray(input.steps)) throw invalid("plan steps must be a list");
  if (input.steps.length > MAX_PLAN_STEPS) {
    throw invalid(`a plan may have at most ${MAX_PLAN_STEPS} steps (got ${input.steps.length})`);
  }

  const nowMs = (options.now ?? Date.now)();
  const candidate: StoredPlan = {
    id: newPlanId(),
    tenant: input.tenant,
    scope: input.scope,
    ...(isSessionScope(input.scope) ? { sessionId: input.scope } : {}),
    objective: input.objective,
    steps: input.steps,
    createdAt: new Date(nowMs).toISOString(),
    expiresAt: new Date(nowMs + ttl * 1000).toISOString(),
    ...(input.provider === undefined ? {} : { provider: input.provider }),
    ...(input.model === undefined ? {} : { model: input.model }),
  };

  // Size first, so the shape check below never walks more than the limit allows.
  let raw: string;
  try {
    raw = JSON.stringify(candidate);
  } catch (err) {
    throw new ChaosError("invalid_argument", "a plan must be plain JSON (no cycles, BigInt values or extreme nesting)", {
      cause: err,
    });
  }
  const bytes = Buffer.byteLength(raw, "utf8");
  if (bytes > MAX_PLAN_BYTES) {
    throw invalid(`a plan may be at most ${MAX_PLAN_BYTES} bytes (256 KiB) as JSON (got ${bytes})`);
  }

  const parsed = checkShape(candidate);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue && issue.path.length > 0 ? `${issue.path.join(".")}: ` : "";
    throw invalid(`invalid plan: ${where}${issue?.message ?? "not a plan"}`);
  }
  const plan = parsed.data as StoredPlan;
  return { plan, json: JSON.stringify(plan), ttlSeconds: ttl };
}

function checkShape(candidate: StoredPlan): ReturnType<typeof storedPlanSchema.safeParse> {
  try {
    return storedPlanSchema.safeParse(candidate);
  } catch (err) {
    // Nesting deep enough to exhaust the stack fits in the size limit; it is the caller's input.
    if (err instanceof RangeError) {
      throw new ChaosError("invalid_argument", "a plan's step input is nested too deeply", { cause: err });
    }
    throw err;
  }
}

/**
 * Reads a plan from its stored JSON, trusting nothing: a value that is not a plan, or that names
 * another owner or id than the one it was stored under, is `internal` (the caller logs it). A
 * plan written before scopes existed names only its `sessionId`, which is its scope.
 */
export function parseStoredPlan(json: string, tenant: string, scope: string, planId: string): StoredPlan {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (err) {
    throw new ChaosError("internal", "a stored plan could not be read", { cause: err });
  }
  const parsed = storedPlanSchema.safeParse(value);
  if (!parsed.success) {
    throw new ChaosError("internal", "a stored plan could not be read", { cause: parsed.error });
  }
  const stored = parsed.data;
  const sessionAgrees = stored.sessionId === undefined || stored.scope === undefined || stored.sessionId === stored.scope;
  const plan = { ...stored, scope: stored.scope ?? stored.sessionId } as StoredPlan;
  if (plan.tenant !== tenant || plan.scope !== scope || !sessionAgrees || plan.id !== planId) {
    throw new ChaosError("internal", "a stored plan could not be read", {
      cause: new Error("the stored plan names another owner or id than its key"),
    });
  }
  return plan;
}
