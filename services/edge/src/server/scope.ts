import { randomBytes } from "node:crypto";
import type { AuthInfo } from "@modelcontextprotocol/server";
import { ATTR, withSubjectToken, type CallContext } from "@chaos-core/kit";
import { rolesOf, subjectTokenOfAuth, tenantGenerationOf } from "../auth/identity.js";
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
 * `call` carrying the request's verified OAuth access token beside it (kit subject-token.ts), for
 * cognition to exchange for an upstream declared `token_exchange` (docs/federation-platform.md
 * §3): only when the credential is the scope's own tenant and principal; as it is otherwise.
 */
export function withCredentialSubject(call: CallContext, auth: AuthInfo | undefined, scope: ServerScope): CallContext {
  const token = subjectTokenOfAuth(auth, scope);
  return token === undefined ? call : withSubjectToken(call, token);
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
    return { call: withCredentialSubject({ tenant: scope.tenant, principal: scope.principal, requestRef, ...facts }, auth, scope), spanAttrs: { [ATTR.requestRef]: requestRef } };
  }
  return { call: withCredentialSubject({ tenant: scope.tenant, principal: scope.principal, sessionId: scope.id, ...facts }, auth, scope), spanAttrs: {} };
}

/** The fields that name a scope in log lines. */
export function scopeLogFields(scope: ServerScope): Record<string, string> {
  return isModernScope(scope) ? { tenant: scope.tenant, principal: scope.principal } : { tenant: scope.tenant, principal: scope.principal, session: scope.id };
}
