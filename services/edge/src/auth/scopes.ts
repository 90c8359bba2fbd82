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
 * Every scope this resource server understands, as Protected Resource Metadata lists them. There
 * is deliberately no operator scope: the operator channel is the local admin endpoint, never a
 * token an authorization server issues.
 */
export const SCOPES_SUPPORTED = [AGENT_SCOPE, APPROVER_SCOPE] as const;

/** The roles an access token's scopes grant; scopes this server does not know grant nothing. */
export function rolesOfScopes(scopes: readonly string[]): Role[] {
  return scopes.includes(APPROVER_SCOPE) ? ["approver"] : [];
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
