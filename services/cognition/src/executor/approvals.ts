import { assertTenantId, ChaosError, sameAsker, type CallContext } from "@chaos-core/kit";
import { z } from "zod";
import { stepCheckSchema } from "./evaluate.js";
import type { ApprovalChannel, PendingApproval } from "./step-types.js";

/** Where pending approvals are created. A `create` that rejects means none exists, and the step fails. */
export interface ApprovalSink {
  /** Stores a new pending approval; resolves to it as stored (its `createdAt` and `expiresAt`). */
  create(approval: PendingApproval): Promise<StoredApproval>;
}

/** Every channel, in the order policy lists them. */
export const APPROVAL_CHANNELS: readonly ApprovalChannel[] = Object.freeze(["client_elicitation", "approver", "operator", "console"]);

/**
 * What an approval stored before channels existed accepts: every channel but the client's own
 * answer, policy's default at high risk, so an old approval never accepts more than a new one would.
 */
export const LEGACY_CHANNELS: readonly ApprovalChannel[] = Object.freeze(["approver", "operator", "console"]);

/** The only principal the `operator` channel answers as (the standalone admin endpoint's). */
export const OPERATOR_PRINCIPAL = "operator";

/** The channels an approval accepts: its own, or {@link LEGACY_CHANNELS} when it was stored without any. */
export function channelsOf(approval: Pick<PendingApproval, "channels">): readonly ApprovalChannel[] {
  return approval.channels && approval.channels.length > 0 ? approval.channels : LEGACY_CHANNELS;
}

/** `pending` → `approved` | `rejected` (once) ; `approved` → `consumed` (once). */
export type ApprovalStatus = "pending" | "approved" | "rejected" | "consumed";

export interface ApprovalResolution {
  readonly approved: boolean;
  /** A resolution stored as `"elicitation"` (before channels existed) reads `client_elicitation`. */
  readonly channel: ApprovalChannel;
  /** As recorded: `"<principal> (<channel>)"`, or `"human via elicitation in session <id>"` (`in request <ref>`). */
  readonly resolvedBy: string;
  readonly principal: string;
  readonly sessionId?: string;
  readonly requestRef?: string;
  readonly resolvedAt: string;
  /** The ledger's signed receipt for an approving answer, when a ledger is wired; presented once to run the step. */
  readonly receipt?: Record<string, unknown>;
}

/** An approval as a store holds it. */
export interface StoredApproval extends PendingApproval {
  readonly status: ApprovalStatus;
  readonly createdAt: string;
  readonly expiresAt: string;
  /** Set once resolved (also on `consumed`, which only an approved approval becomes). */
  readonly resolution?: ApprovalResolution;
  readonly consumedAt?: string;
}

/** A resolve request: the answer, how it was given, and the verified caller that gave it. */
export interface ResolveApprovalInput {
  readonly approve: boolean;
  readonly channel: ApprovalChannel;
  readonly by: CallContext;
  /** The ledger's receipt for this answer, stored with the resolution. */
  readonly receipt?: Record<string, unknown>;
}

/**
 * Pending approvals and their answers. Every method is tenant-bound: an approval of another
 * tenant, an unknown id and an expired approval are all `not_found` (one answer, so ids reveal
 * nothing). Transitions are atomic: `resolve` succeeds once (a second is `failed_precondition`),
 * `consume` succeeds once and only on an approved approval.
 */
export interface ApprovalStore extends ApprovalSink {
  get(tenant: string, approvalId: string): Promise<StoredApproval | undefined>;
  /** Records the answer, after {@link checkResolver}'s rules (an accepted channel, then that channel's own rule). */
  resolve(tenant: string, approvalId: string, input: ResolveApprovalInput): Promise<StoredApproval>;
  /** `approved` → `consumed`, atomically; anything else is refused (`failed_precondition`). */
  consume(tenant: string, approvalId: string): Promise<StoredApproval>;
  /**
   * The tenant's live `pending` approvals, soonest to expire first, at most `limit`
   * (1..{@link MAX_LIST_APPROVALS}; anything else is `invalid_argument`).
   */
  listPending(tenant: string, limit: number): Promise<StoredApproval[]>;
}

/** Most pending approvals one `listPending` returns. */
export const MAX_LIST_APPROVALS = 500;

/** Checks a `listPending` limit. */
export function assertListLimit(limit: number): void {
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIST_APPROVALS) {
    throw new ChaosError("invalid_argument", `limit must be an integer from 1 to ${MAX_LIST_APPROVALS} (got ${limit})`);
  }
}

/** Orders approvals soonest to expire first (ties by id, so the order is stable). */
export function byExpiry(a: StoredApproval, b: StoredApproval): number {
  return Date.parse(a.expiresAt) - Date.parse(b.expiresAt) || (a.approvalId < b.approvalId ? -1 : a.approvalId > b.approvalId ? 1 : 0);
}

/** Options every approval store takes. */
export interface ApprovalStoreOptions {
  /** How long an approval can be answered and used; default {@link DEFAULT_APPROVAL_TTL_SECONDS}. */
  ttlSeconds?: number;
  /** The clock (tests); defaults to `Date.now`. */
  now?: () => number;
}

/** An approval lives a day: long enough for a human to answer, then it is gone. */
export const DEFAULT_APPROVAL_TTL_SECONDS = 24 * 60 * 60;

const APPROVAL_ID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** Approval ids are UUIDs; anything else is never looked up (nor put into a key). */
export function isApprovalId(id: string): boolean {
  return typeof id === "string" && APPROVAL_ID_RE.test(id);
}

export function approvalNotFound(approvalId: string): ChaosError {
  return new ChaosError("not_found", `no approval ${approvalId} in this tenant (approvals expire after a day)`);
}

/** Who resolved, as recorded. */
export function resolvedByOf(channel: ApprovalChannel, by: CallContext): string {
  if (channel !== "client_elicitation") return `${by.principal} (${channel})`;
  if (by.sessionId) return `human via elicitation in session ${by.sessionId}`;
  return by.requestRef ? `human via elicitation in request ${by.requestRef}` : "human via elicitation";
}

/** Why a resolver was refused, with a stable code (the first word of the error message). */
export interface ResolverRefusal {
  readonly code: "channel_not_allowed" | "wrong_session" | "not_requester" | "not_operator" | "self_approval";
  readonly message: string;
}

/**
 * The rules a resolver must meet, whatever the store. The channel must be one the approval
 * accepts (policy chose them when it asked for approval); then each channel's own rule: a
 * `client_elicitation` answer counts only from whoever asked (kit's `sameAsker`: the session
 * that requested the approval, whose client the edge asked; without a session, the requester's
 * own request); `operator` only as {@link OPERATOR_PRINCIPAL}; every other
 * channel's principal must differ from the requester (no self-approval). Undefined when the
 * resolver may answer.
 */
export function resolverRefusal(approval: PendingApproval, input: ResolveApprovalInput): ResolverRefusal | undefined {
  const { channel, by } = input;
  if (!(APPROVAL_CHANNELS as readonly string[]).includes(channel)) {
    throw new ChaosError("invalid_argument", `channel must be one of ${APPROVAL_CHANNELS.join(", ")}`);
  }
  const allowed = channelsOf(approval);
  if (!allowed.includes(channel)) {
    return {
      code: "channel_not_allowed",
      message:
        `channel_not_allowed: policy accepts ${allowed.join(", ")} for approval ${approval.approvalId} ` +
        `(${approval.capability}, risk ${approval.risk}${approval.channelsRule ? `, rule ${approval.channelsRule}` : ""}), not ${channel}`,
    };
  }
  if (channel === "client_elicitation") {
    const same = sameAsker(approval.call, by);
    if (same.same) return undefined;
    return same.code === "wrong_session"
      ? {
          code: "wrong_session",
          message: "wrong_session: an elicitation answer counts only from the session that requested the approval; use an approver for another session",
        }
      : {
          code: "not_requester",
          message:
            `not_requester: approval ${approval.approvalId} was requested without a session by ${approval.call.principal}; ` +
            "an elicitation answer counts only from that principal's own request; use an approver for anyone else",
        };
  }
  if (channel === "operator" && by.principal !== OPERATOR_PRINCIPAL) {
    return { code: "not_operator", message: `not_operator: the operator channel answers only as the principal ${OPERATOR_PRINCIPAL}, not ${by.principal}` };
  }
  if (by.principal === approval.call.principal) {
    return { code: "self_approval", message: `self_approval: no self-approval: ${by.principal} requested this step and cannot approve it` };
  }
  return undefined;
}

/** {@link resolverRefusal} as a check: throws `permission_denied` with the refusal's message. */
export function checkResolver(approval: PendingApproval, input: ResolveApprovalInput): void {
  const refusal = resolverRefusal(approval, input);
  if (refusal) throw new ChaosError("permission_denied", refusal.message);
}

export function resolutionOf(input: ResolveApprovalInput, at: number): ApprovalResolution {
  return {
    approved: input.approve,
    channel: input.channel,
    resolvedBy: resolvedByOf(input.channel, input.by),
    principal: input.by.principal,
    ...(input.by.sessionId !== undefined ? { sessionId: input.by.sessionId } : {}),
    ...(input.by.requestRef !== undefined ? { requestRef: input.by.requestRef } : {}),
    resolvedAt: new Date(at).toISOString(),
    ...(input.receipt ? { receipt: input.receipt } : {}),
  };
}

export function resolveTtlSeconds(ttlSeconds: number | undefined): number {
  const ttl = ttlSeconds ?? DEFAULT_APPROVAL_TTL_SECONDS;
  if (!Number.isFinite(ttl) || ttl <= 0 || ttl > DEFAULT_APPROVAL_TTL_SECONDS) {
    throw new ChaosError("invalid_argument", `an approval's TTL must be > 0 and at most ${DEFAULT_APPROVAL_TTL_SECONDS} s`);
  }
  return ttl;
}

/** Checks what `create` is given before anything is stored. */
export function assertNewApproval(approval: PendingApproval): void {
  assertTenantId(approval.call.tenant);
  if (!isApprovalId(approval.approvalId)) throw new ChaosError("invalid_argument", "an approval id must be a UUID");
}

/** The refusal for a transition from the wrong state. */
export function wrongState(approvalId: string, status: string, wanted: "resolve" | "consume"): ChaosError {
  if (wanted === "resolve") {
    return new ChaosError("failed_precondition", `approval ${approvalId} was already resolved (${status}); an approval is answered once`);
  }
  const why =
    status === "consumed"
      ? "was already used; an approval runs its step once"
      : status === "pending"
        ? "has not been answered yet"
        : `was ${status}`;
  return new ChaosError("failed_precondition", `approval ${approvalId} ${why}`);
}

const auditCallSchema = z.object({ tenant: z.string(), principal: z.string(), sessionId: z.string().optional(), requestRef: z.string().optional() });
const storedStepSchema = z.object({ id: z.string(), capability: z.string(), input: z.unknown(), checks: z.array(stepCheckSchema).optional() });
const continuationSchema = z.object({
  planId: z.string().optional(),
  objective: z.string().optional(),
  expiresAt: z.string(),
  rest: z.array(storedStepSchema),
  outputs: z.record(z.string(), z.unknown()),
  executed: z.array(z.string()),
});
const pendingSchema = z.object({
  approvalId: z.string(),
  step: storedStepSchema,
  capability: z.string(),
  risk: z.enum(["low", "medium", "high", "critical"]),
  argsHash: z.string(),
  policyVersion: z.number(),
  matchedRule: z.string(),
  reason: z.string(),
  channels: z.array(z.enum(APPROVAL_CHANNELS as [ApprovalChannel, ...ApprovalChannel[]])).optional(),
  channelsRule: z.string().optional(),
  call: auditCallSchema,
  continuation: continuationSchema.optional(),
  createdAt: z.string(),
  expiresAt: z.string(),
});
const resolutionSchema = z.object({
  approved: z.boolean(),
  // "elicitation" is how resolutions were stored before channels had canonical names.
  channel: z
    .enum(["elicitation", ...APPROVAL_CHANNELS])
    .transform((c): ApprovalChannel => (c === "elicitation" ? "client_elicitation" : (c as ApprovalChannel))),
  resolvedBy: z.string(),
  principal: z.string(),
  sessionId: z.string().optional(),
  requestRef: z.string().optional(),
  resolvedAt: z.string(),
  receipt: z.record(z.string(), z.unknown()).optional(),
});

/** Parses the immutable part of a stored approval; anything odd (or another tenant's) is `internal`, never trusted. */
export function parseStoredRecord(json: string, tenant: string, approvalId: string): Omit<StoredApproval, "status" | "resolution" | "consumedAt"> {
  let parsed: z.infer<typeof pendingSchema>;
  try {
    parsed = pendingSchema.parse(JSON.parse(json));
  } catch {
    throw new ChaosError("internal", "a stored approval could not be read");
  }
  if (parsed.call.tenant !== tenant || parsed.approvalId !== approvalId) throw new ChaosError("internal", "a stored approval could not be read");
  return parsed as Omit<StoredApproval, "status" | "resolution" | "consumedAt">;
}

export function parseStoredResolution(json: string): ApprovalResolution {
  try {
    return resolutionSchema.parse(JSON.parse(json));
  } catch {
    throw new ChaosError("internal", "a stored approval could not be read");
  }
}

/** An approval store kept in this process (tests, standalone). */
export interface InMemoryApprovalStore extends ApprovalStore {
  /** Every live pending approval, oldest first (for inspection). */
  pending(): readonly StoredApproval[];
}

/** Most approvals one tenant holds in the in-process store; creating more is refused (`resource_exhausted`). */
export const DEFAULT_MEMORY_MAX_APPROVALS_PER_TENANT = 10_000;

/** Most approvals the in-process store holds over every tenant: a memory safety net, refused beyond. */
export const DEFAULT_MEMORY_MAX_APPROVALS = 100_000;

/** Bounds of the in-process approval store. */
export interface MemoryApprovalStoreOptions extends ApprovalStoreOptions {
  /** Most approvals one tenant may hold at once (default {@link DEFAULT_MEMORY_MAX_APPROVALS_PER_TENANT}). */
  maxApprovalsPerTenant?: number;
  /** Most approvals the process holds over every tenant (default {@link DEFAULT_MEMORY_MAX_APPROVALS}). */
  maxApprovals?: number;
}

/**
 * An approval store in this process. Each tenant has its own bound, so one tenant that asks for
 * approvals nobody answers cannot stop another from asking; the process-wide bound is a safety
 * net for memory. At either bound, expired approvals are dropped first, then creating is refused
 * (`resource_exhausted`): a pending approval is never evicted to make room.
 */
export function createMemoryApprovalStore(options: MemoryApprovalStoreOptions = {}): InMemoryApprovalStore {
  const now = options.now ?? Date.now;
  const ttlMs = resolveTtlSeconds(options.ttlSeconds) * 1000;
  const maxPerTenant = options.maxApprovalsPerTenant ?? DEFAULT_MEMORY_MAX_APPROVALS_PER_TENANT;
  const max = options.maxApprovals ?? DEFAULT_MEMORY_MAX_APPROVALS;
  const tenants = new Map<string, Map<string, StoredApproval>>();
  let total = 0;
  const live = (a: StoredApproval) => Date.parse(a.expiresAt) > now();
  const drop = (tenant: string, own: Map<string, StoredApproval>, id: string) => {
    if (own.delete(id)) total -= 1;
    if (own.size === 0) tenants.delete(tenant);
  };
  const dropExpired = (tenant: string, own: Map<string, StoredApproval>) => {
    for (const [id, a] of own) if (!live(a)) drop(tenant, own, id);
  };
  const find = (tenant: string, id: string): StoredApproval | undefined => {
    assertTenantId(tenant);
    if (!isApprovalId(id)) return undefined;
    const own = tenants.get(tenant);
    const found = own?.get(id);
    if (found && !live(found)) {
      drop(tenant, own!, id);
      return undefined;
    }
    return found;
  };
  /** Replaces a live approval after a transition; the counts do not change. */
  const replace = (tenant: string, next: StoredApproval) => tenants.get(tenant)!.set(next.approvalId, next);
  const copy = (a: StoredApproval) => structuredClone(a);

  return {
    create(approval) {
      try {
        assertNewApproval(approval);
        const tenant = approval.call.tenant;
        let own = tenants.get(tenant);
        if (own?.has(approval.approvalId)) throw new ChaosError("already_exists", "an approval with this id exists");
        if (own && own.size >= maxPerTenant) dropExpired(tenant, own);
        if (own && own.size >= maxPerTenant) {
          throw new ChaosError(
            "resource_exhausted",
            `tenant ${tenant} holds ${maxPerTenant} approvals already, the most one tenant may hold here; answer some, or wait for them to expire`,
          );
        }
        if (total >= max) for (const [t, o] of [...tenants]) dropExpired(t, o);
        if (total >= max) {
          throw new ChaosError("resource_exhausted", `this process holds ${max} approvals already (every tenant's together); try again later`);
        }
        const at = now();
        own = tenants.get(tenant);
        if (!own) tenants.set(tenant, (own = new Map()));
        const stored: StoredApproval = {
          ...structuredClone(approval),
          status: "pending",
          createdAt: new Date(at).toISOString(),
          expiresAt: new Date(at + ttlMs).toISOString(),
        };
        own.set(approval.approvalId, stored);
        total += 1;
        return Promise.resolve(copy(stored));
      } catch (err) {
        return Promise.reject(err as Error);
      }
    },
    get(tenant, approvalId) {
      try {
        const found = find(tenant, approvalId);
        return Promise.resolve(found ? copy(found) : undefined);
      } catch (err) {
        return Promise.reject(err as Error);
      }
    },
    // Check and transition happen in one synchronous turn: nothing can interleave.
    resolve(tenant, approvalId, input) {
      try {
        const found = find(tenant, approvalId);
        if (!found) throw approvalNotFound(approvalId);
        checkResolver(found, input);
        if (found.status !== "pending") throw wrongState(approvalId, found.status, "resolve");
        const next: StoredApproval = { ...found, status: input.approve ? "approved" : "rejected", resolution: resolutionOf(input, now()) };
        replace(tenant, next);
        return Promise.resolve(copy(next));
      } catch (err) {
        return Promise.reject(err as Error);
      }
    },
    consume(tenant, approvalId) {
      try {
        const found = find(tenant, approvalId);
        if (!found) throw approvalNotFound(approvalId);
        if (found.status !== "approved") throw wrongState(approvalId, found.status, "consume");
        const next: StoredApproval = { ...found, status: "consumed", consumedAt: new Date(now()).toISOString() };
        replace(tenant, next);
        return Promise.resolve(copy(next));
      } catch (err) {
        return Promise.reject(err as Error);
      }
    },
    listPending(tenant, limit) {
      try {
        assertTenantId(tenant);
        assertListLimit(limit);
        const found = [...(tenants.get(tenant)?.values() ?? [])].filter((a) => a.status === "pending" && live(a));
        return Promise.resolve(found.sort(byExpiry).slice(0, limit).map(copy));
      } catch (err) {
        return Promise.reject(err as Error);
      }
    },
    pending: () =>
      [...tenants.values()]
        .flatMap((own) => [...own.values()])
        .filter((a) => a.status === "pending" && live(a))
        .sort((a, b) => Date.parse(a.createdAt) - Date.parse(b.createdAt))
        .map(copy),
  };
}

