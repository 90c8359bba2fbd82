import { createHmac, timingSafeEqual } from "node:crypto";
import { subjectTokenDigest, withSubjectToken } from "./subject-token.js";
import { ChaosError } from "./errors.js";
import { rolesProblem } from "./roles.js";

/**
 * Who a call is for. The edge derives it from a verified credential (never from a header,
 * an argument or a session id) and every service call carries it.
 */
export interface CallContext {
  readonly tenant: string;
  readonly principal: string;
  /** The MCP session the call belongs to (2025-11-25), when there is one. */
  readonly sessionId?: string;
  /**
   * The edge's handle for a call without a session (2026-07-28): 128 random bits, base64url,
   * one per request, or the flow id of a multi-round-trip flow on its every round
   * (docs/protocol.md §5). A call carries a session or a request ref, never both.
   */
  readonly requestRef?: string;
  /**
   * The roles the request's verified credential holds (kit `roles.ts`): set by the edge per
   * request, never from a session; absent or empty: none. Signed sorted, each a role name, at most
   * `MAX_ROLES`. What upstream exposure rules naming roles match (docs/federation.md §6).
   */
  readonly roles?: readonly string[];
  /**
   * The tenant's published generation as the edge read it admitting this request (its credential
   * directory reads it on every authenticated request): lets cognition tell whether what it cached
   * for the tenant still holds without reading it again. Absent: read it (cognition's own calls,
   * stdio, the console, a cluster edge without a registry).
   */
  readonly tenantGeneration?: number;
}

/** What a request ref looks like: base64url, at least 96 bits, bounded so it stays a small label. */
const REQUEST_REF_RE = /^[A-Za-z0-9_-]{16,128}$/;

/** Checks a call context's request ref, naming the field; a bad one never reaches a label or a key. */
export function assertRequestRef(requestRef: string): void {
  if (!REQUEST_REF_RE.test(requestRef)) {
    throw new ChaosError("invalid_argument", "requestRef must be 16 to 128 base64url characters (A-Z, a-z, 0-9, - and _)");
  }
}

/** The prefix of a ledger context label for a call without a session: `request:<requestRef>`. */
export const REQUEST_LABEL_PREFIX = "request:";

/**
 * The context label a record of this call carries (the ledger's `session` field,
 * docs/ledger.md): the MCP session id, `request:<requestRef>` for a call without a session,
 * `""` for a call with neither (the operator endpoint, cognition's own work).
 */
export function contextLabel(call: Pick<CallContext, "sessionId" | "requestRef">): string {
  if (call.sessionId) return call.sessionId;
  return call.requestRef ? `${REQUEST_LABEL_PREFIX}${call.requestRef}` : "";
}

/** Who made a request or an approval, as far as an elicitation answer to it is concerned. */
export interface Asker {
  readonly tenant: string;
  readonly principal: string;
  /** The MCP session it was made in; absent (or "") when it was made without one. */
  readonly sessionId?: string;
}

/**
 * The asker a stored context label stands for: a label that is neither `""` nor
 * `request:<ref>` is the MCP session the request was made in. MCP session ids are minted by
 * the server (UUIDs; the console's `console-<hex>`), so none starts with `request:`.
 */
export function askerOfLabel(tenant: string, principal: string, label: string): Asker {
  const inSession = label !== "" && !label.startsWith(REQUEST_LABEL_PREFIX);
  return { tenant, principal, ...(inSession ? { sessionId: label } : {}) };
}

/** Whether an elicitation answer comes from whoever asked, and if not, why (a stable code first). */
export type SameAsker =
  | { readonly same: true }
  | { readonly same: false; readonly code: "wrong_session" | "not_requester"; readonly problem: string };

/**
 * The one rule for an answer given through the client's own elicitation (docs/protocol.md §5),
 * for both protocol revisions: a request made **in a session** is answered only from that
 * session (`wrong_session`); one made **without a session** only by the same tenant and
 * principal, through a call that carries a request ref — the edge resolves through elicitation
 * there only after it opened a sealed multi-round-trip state naming that request
 * (`not_requester`).
 */
export function sameAsker(asked: Asker, by: CallContext): SameAsker {
  if (asked.sessionId) {
    return by.tenant === asked.tenant && by.sessionId === asked.sessionId
      ? { same: true }
      : { same: false, code: "wrong_session", problem: "an elicitation answer counts only from the session that made the request" };
  }
  return by.tenant === asked.tenant && by.principal === asked.principal && !by.sessionId && !!by.requestRef
    ? { same: true }
    : {
        same: false,
        code: "not_requester",
        problem: `it was made without a session, so an elicitation answer counts only from ${asked.principal}'s own request (a call that carries a request ref)`,
      };
}

const TENANT_RE = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** Checks that a tenant id is safe to use as a key prefix and row label. */
export function assertTenantId(tenant: string): void {
  if (!TENANT_RE.test(tenant)) {
    throw new ChaosError(
      "invalid_argument",
      `tenant "${tenant}" is not a valid tenant id (lowercase letters, digits, - and _, at most 63)`,
    );
  }
}

export const CONTEXT_HEADER = "chaoscore-context";
export const CONTEXT_SIG_HEADER = "chaoscore-context-sig";

/** How long a signed context stays acceptable, to bound replay inside the cluster. */
const MAX_AGE_MS = 5 * 60_000;
const MIN_KEY_LENGTH = 32;

interface WireContext {
  t: string;
  p: string;
  s?: string;
  r?: string;
  /** Roles, sorted; absent when none. */
  ro?: string[];
  /** The tenant's generation as the edge read it. */
  g?: number;
  /** The digest of the subject token sent beside the context (subject-token.ts). */
  st?: string;
  iat: number;
}

/** The roles of a context as signed: sorted and checked, or a refusal naming `roles`. */
function wireRoles(roles: readonly string[]): string[] {
  const problem = rolesProblem(roles);
  if (problem) throw new ChaosError("invalid_argument", `roles${problem.index === undefined ? "" : `[${problem.index}]`}: ${problem.problem}`);
  return [...roles].sort();
}

/** Whether a signed context's roles are as the edge signs them: role names, each once, sorted, bounded. */
function wellFormedRoles(ro: unknown): ro is string[] {
  if (!Array.isArray(ro) || ro.length === 0 || rolesProblem(ro) !== undefined) return false;
  return ro.every((r: string, i) => i === 0 || (ro[i - 1] as string) < r);
}

function isGeneration(g: unknown): g is number {
  return typeof g === "number" && Number.isSafeInteger(g) && g >= 0;
}

/**
 * Signs and verifies the call context with a shared HMAC key, so a service only acts for a
 * tenant the edge vouched for. There is no default key: a service without one refuses to start.
 *
 * Rotation without downtime (docs/operations.md, "Rotating the call-context key"): `accepted`
 * keys (`CHAOS_CORE_CONTEXT_KEY_ACCEPTED`) verify but never sign. Every replica first accepts
 * the new key beside its own, then each signs with the new one and accepts the old, then the old
 * is dropped; at no step does a replica refuse what another signs.
 */
export class ContextSigner {
  private readonly key: Buffer;
  private readonly verifying: readonly Buffer[];

  /** `accepted`: keys that verify too; an undefined entry (an unset variable) is skipped. */
  constructor(key: string, accepted: ReadonlyArray<string | undefined> = []) {
    const also = accepted.filter((k): k is string => k !== undefined);
    for (const k of [key, ...also]) {
      if (k.length < MIN_KEY_LENGTH) {
        throw new ChaosError(
          "failed_precondition",
          `the call-context key${k === key ? "" : " accepted beside it"} must be at least ${MIN_KEY_LENGTH} characters`,
        );
      }
    }
    this.key = Buffer.from(key, "utf8");
    this.verifying = [this.key, ...also.map((k) => Buffer.from(k, "utf8"))];
  }

  /** `subjectToken`: the one sent beside the context (cognition-bound calls), bound into the signature by its digest. */
  sign(ctx: CallContext, now = Date.now(), subjectToken?: string): { context: string; signature: string } {
    const wire: WireContext = { t: ctx.tenant, p: ctx.principal, iat: now };
    if (subjectToken !== undefined) wire.st = subjectTokenDigest(subjectToken);
    if (ctx.sessionId) wire.s = ctx.sessionId;
    if (ctx.requestRef) {
      if (ctx.sessionId) {
        throw new ChaosError("invalid_argument", "a call context carries a sessionId (2025-11-25) or a requestRef (2026-07-28), never both");
      }
      assertRequestRef(ctx.requestRef);
      wire.r = ctx.requestRef;
    }
    if (ctx.roles && ctx.roles.length > 0) wire.ro = wireRoles(ctx.roles);
    if (ctx.tenantGeneration !== undefined) {
      if (!isGeneration(ctx.tenantGeneration)) throw new ChaosError("invalid_argument", "tenantGeneration must be a non-negative integer");
      wire.g = ctx.tenantGeneration;
    }
    const context = Buffer.from(JSON.stringify(wire), "utf8").toString("base64url");
    return { context, signature: this.mac(context) };
  }

  /** `subjectToken`: the one received beside the context; it must be the one the context was signed with. */
  verify(context: string | undefined, signature: string | undefined, now = Date.now(), subjectToken?: string): CallContext {
    if (!context || !signature) {
      throw new ChaosError("unauthenticated", "the call carries no signed call context");
    }
    const given = Buffer.from(signature, "hex");
    const valid = this.verifying.some((key) => {
      const expected = Buffer.from(this.mac(context, key), "hex");
      return expected.length === given.length && timingSafeEqual(expected, given);
    });
    if (!valid) throw new ChaosError("unauthenticated", "the call context signature is not valid");
    let wire: WireContext;
    try {
      wire = JSON.parse(Buffer.from(context, "base64url").toString("utf8")) as WireContext;
    } catch {
      throw new ChaosError("unauthenticated", "the call context is not readable");
    }
    if (typeof wire.iat !== "number" || Math.abs(now - wire.iat) > MAX_AGE_MS) {
      throw new ChaosError("unauthenticated", "the call context has expired");
    }
    assertTenantId(wire.t);
    if (wire.r !== undefined && (typeof wire.r !== "string" || !REQUEST_REF_RE.test(wire.r) || wire.s)) {
      throw new ChaosError("unauthenticated", "the call context's request ref is not valid");
    }
    if (wire.ro !== undefined && !wellFormedRoles(wire.ro)) throw new ChaosError("unauthenticated", "the call context's roles are not valid");
    if (wire.g !== undefined && !isGeneration(wire.g)) throw new ChaosError("unauthenticated", "the call context's tenant generation is not valid");
    if ((wire.st !== undefined || subjectToken !== undefined) && (subjectToken === undefined || wire.st !== subjectTokenDigest(subjectToken))) {
      throw new ChaosError("unauthenticated", "the subject token sent with the call is not the one its signed context names");
    }
    const ctx: CallContext = {
      tenant: wire.t,
      principal: wire.p,
      ...(wire.s ? { sessionId: wire.s } : {}),
      ...(wire.r ? { requestRef: wire.r } : {}),
      ...(wire.ro ? { roles: Object.freeze(wire.ro) } : {}),
      ...(wire.g !== undefined ? { tenantGeneration: wire.g } : {}),
    };
    return subjectToken === undefined ? ctx : withSubjectToken(ctx, subjectToken);
  }

  private mac(data: string, key: Buffer = this.key): string {
    return createHmac("sha256", key).update(data).digest("hex");
  }
}
