import { z } from "zod";
import { ROLE_NAME_RE, ROLE_NAME_RULE } from "./roles.js";

/**
 * Who is offered an upstream's tools, and how (docs/federation.md §6). One rule grants the tools it
 * names (all of them when it names none) to the tenants it lists (`"*"`: every tenant) — to the
 * principals it lists when it lists any, to callers holding one of the roles it lists when it lists
 * any (the request's roles, signed in its call context; `tenants`, `principals` and `roles` all
 * hold at once) — either as MCP tools the edge lists (`"tools"`, the
 * default; planners may use them too) or to the planners only (`"planner"`: `chaoscore_plan`,
 * `chaoscore_execute` and `chaoscore_achieve` may use them, `tools/list` does not show them).
 * Rules add up; `"tools"` wins over `"planner"`. Whoever no rule grants sees nothing of the tool:
 * it is absent from every list and refused by name as an unknown one.
 */
export type UpstreamOffer = "tools" | "planner";

/** One exposure rule of an upstream declaration. */
export interface UpstreamExposureRule {
  readonly tenants: readonly string[];
  readonly principals?: readonly string[];
  /** Role names (kit `roles.ts`): the rule holds only for a caller holding at least one of them. */
  readonly roles?: readonly string[];
  readonly tools?: readonly string[];
  readonly as?: UpstreamOffer;
}

/** A rule as it applies to one tool (its `tools` already matched). */
export type UpstreamGrant = Omit<UpstreamExposureRule, "tools">;

/**
 * Where a declaration says nothing: the operator's upstreams go to the local tenant `default`
 * (the standalone's own user) and to no other — a tenant of a shared control plane is offered an
 * operator's upstream only by name.
 */
export const DEFAULT_UPSTREAM_EXPOSURE: readonly UpstreamExposureRule[] = Object.freeze([Object.freeze({ tenants: Object.freeze(["default"]) })]);

const TENANT = /^([a-z0-9][a-z0-9_-]{0,62}|\*)$/;

export const upstreamExposureSchema = z
  .array(
    z.strictObject({
      tenants: z
        .array(z.string().regex(TENANT, 'must be a tenant id (lowercase letters, digits, - and _, at most 63) or "*" for every tenant'))
        .min(1, 'must name at least one tenant, or "*" for every tenant')
        .max(1024),
      principals: z.array(z.string().min(1, "must not be empty").max(256)).min(1, "must name at least one principal; leave it out for every principal").max(1024).optional(),
      roles: z
        .array(z.string().regex(ROLE_NAME_RE, `must be a role name: ${ROLE_NAME_RULE}`))
        .min(1, "must name at least one role; leave it out for callers holding any or none")
        .max(64)
        .optional(),
      tools: z.array(z.string().min(1, "must not be empty").max(128)).min(1, "must name at least one tool; leave it out for every tool").max(1024).optional(),
      as: z.enum(["tools", "planner"]).optional(),
    }),
  )
  .max(64, "must hold at most 64 rules");

/** The rules of `exposure` (or the default) that apply to `tool`, as the upstream lists it. */
export function exposureOfTool(exposure: readonly UpstreamExposureRule[] | undefined, tool: string): UpstreamGrant[] {
  return (exposure ?? DEFAULT_UPSTREAM_EXPOSURE)
    .filter((rule) => rule.tools === undefined || rule.tools.includes(tool))
    .map(({ tenants, principals, roles, as }) => ({ tenants, ...(principals ? { principals } : {}), ...(roles ? { roles } : {}), ...(as ? { as } : {}) }));
}

/** Who asks to be offered a tool: a call context's tenant, principal and roles (none when absent). */
export interface ExposureSubject {
  readonly tenant: string;
  readonly principal: string;
  readonly roles?: readonly string[];
}

/** How `who` is offered a tool with these grants: as an MCP tool, to the planners only, or not at all. */
export function upstreamOffer(grants: readonly UpstreamGrant[], who: ExposureSubject): UpstreamOffer | undefined {
  let offer: UpstreamOffer | undefined;
  for (const grant of grants) {
    if (!grant.tenants.includes("*") && !grant.tenants.includes(who.tenant)) continue;
    if (grant.principals !== undefined && !grant.principals.includes(who.principal)) continue;
    if (grant.roles !== undefined && !grant.roles.some((r) => who.roles?.includes(r))) continue;
    if ((grant.as ?? "tools") === "tools") return "tools";
    offer = "planner";
  }
  return offer;
}

/**
 * The most `who`'s tenant and principal could be offered a tool with these grants, whatever roles
 * a request holds: what a session registers, each request then held to {@link upstreamOffer} with
 * its own roles (roles travel per request, a session may be used by keys holding different ones).
 */
export function upstreamOfferWithAnyRoles(grants: readonly UpstreamGrant[], who: Omit<ExposureSubject, "roles">): UpstreamOffer | undefined {
  return upstreamOffer(grants, { ...who, roles: grants.flatMap((g) => g.roles ?? []) });
}
