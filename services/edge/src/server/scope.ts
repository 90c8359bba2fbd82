import { randomBytes } from "node:crypto";
import type { AuthInfo } from "@modelcontextprotocol/server";
import { ATTR, type CallContext } from "@chaos-core/kit";
import { rolesOf, tenantGenerationOf } from "../auth/identity.js";
import { isModernScope, type ServerScope } from "../sessions/server-scope.js";

/** A 2026-07-28 request's ref: 128 random bits, base64url (docs/protocol.md §5). */
export function mintRequestRef(): string {
  return randomBytes(16).toString("base64url");
}

/**
 * What a request's verified credential adds to its call context (`auth`: the SDK's
 * `extra.http.authInfo`, set by the transport's authentication): the roles it holds, per request
 * and never from the session, and the tenant generation the edge read admitting it. Nothing
 * without one (stdio, unauthenticated loopback, a completion, which the SDK hands no request).
 */
export function credentialFacts(auth: AuthInfo | undefined, scope: ServerScope): Pick<CallContext, "roles" | "tenantGeneration"> {
  const roles = [...rolesOf(auth, scope)].sort();
  const tenantGeneration = tenantGenerationOf(auth, scope);
  return { ...(roles.length > 0 ? { roles } : {}), ...(tenantGeneration !== undefined ? { tenantGeneration } : {}) };
}

/**
 * The call context of one request a server built for `scope` serves, with the span attribute
 * that names it: (2026-07-28, no session) a fresh request ref; a 2025-11-25 session is named by
 * the request span's own `mcp.session.id`. `auth`: the request's, see {@link credentialFacts}.
 */
export function scopedCall(scope: ServerScope, auth?: AuthInfo): { call: CallContext; spanAttrs: Record<string, string> } {
  const facts = credentialFacts(auth, scope);
  if (isModernScope(scope)) {
    const requestRef = mintRequestRef();
    return { call: { tenant: scope.tenant, principal: scope.principal, requestRef, ...facts }, spanAttrs: { [ATTR.requestRef]: requestRef } };
  }
  return { call: { tenant: scope.tenant, principal: scope.principal, sessionId: scope.id, ...facts }, spanAttrs: {} };
}

/** The fields that name a scope in log lines. */
export function scopeLogFields(scope: ServerScope): Record<string, string> {
  return isModernScope(scope) ? { tenant: scope.tenant, principal: scope.principal } : { tenant: scope.tenant, principal: scope.principal, session: scope.id };
}
