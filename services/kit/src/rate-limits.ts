import { z } from "zod";
import { ChaosError } from "./errors.js";
import { describeZodIssues } from "./zod-issues.js";

/**
 * One rate limit (docs/operations.md "Rate limits"): a GCRA of `requests` per `per`, with up to
 * `burst` at once (`requests` by default). Per `day` it is a quota: `requests` a day, refilled
 * continuously (one every day ÷ `requests`), never all at once at midnight.
 */
export interface RateLimit {
  readonly requests: number;
  readonly per: "second" | "minute" | "hour" | "day";
  readonly burst?: number;
}

/** A tenant's limits: the whole tenant, each principal, each tool per principal (`tools` overrides `tool` by name). */
export interface TenantLimits {
  readonly tenant?: RateLimit;
  readonly principal?: RateLimit;
  readonly tool?: RateLimit;
  readonly tools?: Readonly<Record<string, RateLimit>>;
}

export const rateLimitSchema = z
  .object({
    requests: z.number().int().min(1).max(1_000_000),
    per: z.enum(["second", "minute", "hour", "day"]),
    burst: z.number().int().min(1).max(1_000_000).optional(),
  })
  .strict();

/** A tenant's limits as `CHAOS_CORE_RATE_LIMITS_FILE` and the tenant registry's settings hold them. */
export const tenantLimitsSchema = z
  .object({ tenant: rateLimitSchema.optional(), principal: rateLimitSchema.optional(), tool: rateLimitSchema.optional(), tools: z.record(z.string().min(1), rateLimitSchema).optional() })
  .strict();

/** Parses one tenant's limits, naming the field at its depth (`<source>: tools.x.per: …`). */
export function parseTenantLimits(doc: unknown, source: string): TenantLimits {
  const parsed = tenantLimitsSchema.safeParse(doc);
  if (!parsed.success) throw new ChaosError("invalid_argument", `${source}: ${describeZodIssues(parsed.error, tenantLimitsSchema).join("; ")}`);
  return parsed.data;
}
