import { randomBytes } from "node:crypto";
import { ATTR, type CallContext } from "@chaos-core/kit";
import { isModernScope, type ServerScope } from "../deps.js";

/** A 2026-07-28 request's ref: 128 random bits, base64url (docs/protocol.md §5). */
export function mintRequestRef(): string {
  return randomBytes(16).toString("base64url");
}

/**
 * The call context of one request a server built for `scope` serves, with the span attribute
 * that names it: a 2025-11-25 session's id, or (2026-07-28, no session) a fresh request ref.
 */
export function scopedCall(scope: ServerScope): { call: CallContext; spanAttrs: Record<string, string> } {
  if (isModernScope(scope)) {
    const requestRef = mintRequestRef();
    return { call: { tenant: scope.tenant, principal: scope.principal, requestRef }, spanAttrs: { [ATTR.requestRef]: requestRef } };
  }
  return { call: { tenant: scope.tenant, principal: scope.principal, sessionId: scope.id }, spanAttrs: { [ATTR.session]: scope.id } };
}

/** The fields that name a scope in log lines. */
export function scopeLogFields(scope: ServerScope): Record<string, string> {
  return isModernScope(scope) ? { tenant: scope.tenant, principal: scope.principal } : { tenant: scope.tenant, principal: scope.principal, session: scope.id };
}
