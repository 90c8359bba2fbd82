import { APPROVER_ROLE, MAX_ROLES, ROLE_NAME_RE } from "@chaos-core/kit";
import { BearerRefusal } from "./bearer-refusal.js";
import type { Role } from "./identity.js";

/**
 * The scope every OAuth access token needs to use `/mcp` at all (tools, prompts, resources):
 * what an agent's client asks for.
 */
export const AGENT_SCOPE = "chaoscore:agent";

/**
 * The scope that grants the `approver` role for the request it comes with: its principal may
 * answer pending approvals of its tenant (`chaoscore_approve`), never its own.
 */
export const APPROVER_SCOPE = "chaoscore:approver";

/**
 * The prefix of a scope that grants an operator-defined role for the request it comes with:
 * `chaoscore:role:support` grants `support` (kit `roles.ts`), which means something only where an
 * upstream's exposure rule names it; `chaoscore:role:approver` is the approver role, as
 * {@link APPROVER_SCOPE}.
 */
export const ROLE_SCOPE_PREFIX = "chaoscore:role:";

/**
 * Every fixed scope this resource server understands, as Protected Resource Metadata lists them
 * (the `chaoscore:role:<name>` scopes are the operator's to name, so none is listed). There is
 * deliberately no operator scope: the operator channel is the local admin endpoint, never a token
 * an authorization server issues.
 */
export const SCOPES_SUPPORTED = [AGENT_SCOPE, APPROVER_SCOPE] as const;

/**
 * The roles an access token's scopes grant, sorted: `chaoscore:approver`, and each
 * `chaoscore:role:<name>` whose name is a role name; scopes this server does not know, and role
 * scopes whose name is not one, grant nothing. A token granting more than `MAX_ROLES` roles is
 * refused (`invalid_token`) rather than cut short.
 */
export function rolesOfScopes(scopes: readonly string[]): Role[] {
  const roles = new Set<Role>();
  for (const scope of scopes) {
    if (scope === APPROVER_SCOPE) roles.add(APPROVER_ROLE);
    else if (scope.startsWith(ROLE_SCOPE_PREFIX) && ROLE_NAME_RE.test(scope.slice(ROLE_SCOPE_PREFIX.length))) roles.add(scope.slice(ROLE_SCOPE_PREFIX.length));
  }
  if (roles.size > MAX_ROLES) throw new BearerRefusal("invalid_token", `the access token grants ${roles.size} roles (${ROLE_SCOPE_PREFIX}…); at most ${MAX_ROLES}`);
  return [...roles].sort();
}

/**
 * The scopes of a token's claims: `scope` (RFC 9068 and RFC 7662, space-separated) or `scp`
 * (a list or a space-separated string, as some authorization servers send it). Anything else
 * counts as no scope.
 */
export function scopesOfClaims(claims: Readonly<Record<string, unknown>>): string[] {
  const split = (s: string) => s.split(" ").filter(Boolean);
  const { scope, scp } = claims;
  if (typeof scope === "string") return split(scope);
  if (typeof scp === "string") return split(scp);
  if (Array.isArray(scp)) return scp.filter((s): s is string => typeof s === "string");
  return [];
}
