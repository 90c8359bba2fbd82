/**
 * Roles a credential holds (docs/tenants.md, docs/federation.md §6). The operator names them:
 * whatever matches {@link ROLE_NAME_RE} can be granted by the API keys file, a registry key
 * (`chaos-core keys create --role`) or an OAuth scope (`chaoscore:role:<name>`). One name means
 * something by itself: `approver`, which may answer pending approvals of its tenant
 * (`chaoscore_approve`; never one's own request). Any other name means nothing except where an
 * upstream's exposure rule names it (`roles: [...]`). Roles travel per request, in the signed
 * call context, never with a session.
 */
export const APPROVER_ROLE = "approver";

/** What a role name looks like: a lowercase letter, then lowercase letters, digits, - and _, at most 63 in all. */
export const ROLE_NAME_RE = /^[a-z][a-z0-9_-]{0,62}$/;

/** The most roles one credential (and so one call context) may hold. */
export const MAX_ROLES = 32;

/** The rule in words, for refusals. */
export const ROLE_NAME_RULE = "a role name is a lowercase letter, then lowercase letters, digits, - and _, at most 63 characters";

/** Why `role` is not a role name, or undefined when it is. */
export function roleNameProblem(role: unknown): string | undefined {
  if (typeof role !== "string") return "must be a role name (a string)";
  if (!ROLE_NAME_RE.test(role)) return `"${role.length > 80 ? `${role.slice(0, 80)}…` : role}" is not a role name: ${ROLE_NAME_RULE}`;
  return undefined;
}

/**
 * Why a list of roles cannot be granted, with the index of the entry at fault (undefined for the
 * list as a whole); undefined when it can: every entry a role name, none twice, at most
 * {@link MAX_ROLES}.
 */
export function rolesProblem(roles: readonly unknown[]): { readonly index?: number; readonly problem: string } | undefined {
  if (roles.length > MAX_ROLES) return { problem: `holds ${roles.length} roles; at most ${MAX_ROLES}` };
  for (let i = 0; i < roles.length; i++) {
    const problem = roleNameProblem(roles[i]);
    if (problem) return { index: i, problem };
    if (roles.indexOf(roles[i]) !== i) return { index: i, problem: `"${roles[i] as string}" is listed twice` };
  }
  return undefined;
}
