import type { AuthInfo } from "@modelcontextprotocol/server";
import { ROLE_NAME_RE } from "@chaos-core/kit";

/**
 * A role an operator granted (kit `roles.ts`): `approver` may answer pending approvals of its
 * tenant (`chaoscore_approve`; cognition still refuses an approver approving its own request);
 * any other name means something only where an upstream's exposure rule names it.
 */
export type Role = string;

/**
 * Who is calling, as a verified credential says. The edge never takes a tenant, a principal or
 * a role from a header, an argument or a session id: only from one of these.
 */
export interface Identity {
  readonly tenant: string;
  readonly principal: string;
  /** Granted by the operator (the API keys file, a registry key, OAuth scopes); none when absent. */
  readonly roles?: readonly Role[];
}

/**
 * The identity of stdio and of unauthenticated loopback HTTP: whoever can reach the process
 * locally is its one user. It holds no roles: the local user is the requester, not an approver.
 */
export const LOCAL_IDENTITY: Identity = Object.freeze({ tenant: "default", principal: "local", roles: Object.freeze([]) });

/**
 * What the HTTP transport attaches to a request whose credential it verified (`req.auth`); the
 * SDK hands it to the tool handler as `extra.authInfo`. Roles travel per request, not per
 * session, so a session opened with one key gains nothing when used with another key of the same
 * principal. An API key goes no further than the verifier (`token` is empty); a verified OAuth
 * access token (`subjectToken`) is kept for one use only: cognition may exchange it for an
 * upstream declared `token_exchange` (docs/federation-platform.md §3; {@link subjectTokenOfAuth}).
 */
export function authInfoOf(identity: Identity, tenantGeneration?: number, subjectToken?: string): AuthInfo {
  return {
    token: subjectToken ?? "",
    clientId: identity.principal,
    scopes: [...(identity.roles ?? [])],
    extra: { tenant: identity.tenant, ...(tenantGeneration !== undefined ? { tenantGeneration } : {}) },
  };
}

/**
 * The verified OAuth access token of a request, when its credential is `session`'s own tenant and
 * principal (never a session's: a token travels per request, like roles); none for an API key,
 * stdio or unauthenticated loopback.
 */
export function subjectTokenOfAuth(auth: AuthInfo | undefined, session: { tenant: string; principal: string }): string | undefined {
  if (!auth || auth.token === "" || auth.clientId !== session.principal || auth.extra?.["tenant"] !== session.tenant) return undefined;
  return auth.token;
}

/**
 * The tenant's generation the edge read admitting this request (its credential directory), for
 * the call context (`CallContext.tenantGeneration`); undefined when none was read or the request
 * is not the session's tenant.
 */
export function tenantGenerationOf(auth: AuthInfo | undefined, session: { tenant: string }): number | undefined {
  const generation = auth?.extra?.["tenantGeneration"];
  if (auth?.extra?.["tenant"] !== session.tenant || typeof generation !== "number") return undefined;
  return generation;
}

/**
 * The roles a request holds: those of its verified credential, when that credential is the
 * session's own tenant and principal; none otherwise (stdio, unauthenticated loopback).
 */
export function rolesOf(auth: AuthInfo | undefined, session: { tenant: string; principal: string }): ReadonlySet<Role> {
  if (!auth || auth.clientId !== session.principal || auth.extra?.["tenant"] !== session.tenant) return new Set();
  return new Set(auth.scopes.filter((r) => ROLE_NAME_RE.test(r)));
}
