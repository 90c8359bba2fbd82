import { randomBytes } from "node:crypto";
import { ATTR, type CallContext } from "@chaos-core/kit";
import { isModernScope, type ServerScope } from "../sessions/server-scope.js";

/** A 2026-07-28 request's ref: 128 random bits, base64url (docs/protocol.md §5). */
export function mintRequestRef(): string {
  return randomBytes(16).toString("base64url");
}

/**
 * The call context of one request a server built for `scope` serves, with the span attribute
 * that names it: (2026-07-28, no session) a fresh request ref; a 2025-11-25 session is named by
 * the request span's own `mcp.session.id`.
 */
export function scopedCall(scope: ServerScope): { call: CallContext; spanAttrs: Record<string, string> } {
  if (isModernScope(scope)) {
    const requestRef = mintRequestRef();
    return { call: { tenant: scope.tenant, principal: scope.principal, requestRef }, spanAttrs: { [ATTR.requestRef]: requestRef } };
  }
  return { call: { tenant: scope.tenant, principal: scope.principal, sessionId: scope.id }, spanAttrs: {} };
}

/** The fields that name a scope in log lines. */
export function scopeLogFields(scope: ServerScope): Record<string, string> {
  return isModernScope(scope) ? { tenant: scope.tenant, principal: scope.principal } : { tenant: scope.tenant, principal: scope.principal, session: scope.id };
}
