import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { assertTenantId, ChaosError, describeZodIssues, tenantLimitsSchema, type RateLimit, type TenantLimits } from "@chaos-core/kit";
import { z } from "zod";

// Rate limits per tenant (issue 13 item 7, docs/operations.md "Rate limits"): one limit for the
// whole tenant, one per principal of it, one per tool per principal, each a GCRA (a token bucket
// without a refill loop). One tenant's shape is kit's, shared with the tenant registry's settings.
export type { RateLimit, TenantLimits };

/** What `CHAOS_CORE_RATE_LIMITS_FILE` holds: the limits every tenant gets, and per tenant what differs. */
export interface RateLimits {
  readonly default: TenantLimits;
  readonly tenants: Readonly<Record<string, TenantLimits>>;
}

const PERIOD_MS = { second: 1_000, minute: 60_000, hour: 3_600_000, day: 86_400_000 } as const;

const tenantLimits = tenantLimitsSchema;

const schema = z
  .object({
    default: tenantLimits.default({}),
    tenants: z
      .record(
        z.string().superRefine((t, ctx) => {
          try {
            assertTenantId(t);
          } catch (err) {
            ctx.addIssue({ code: "custom", message: (err as Error).message });
          }
        }),
        tenantLimits,
      )
      .default({}),
  })
  .strict();

/** No limits at all: what runs when no file is configured. */
export const NO_RATE_LIMITS: RateLimits = { default: {}, tenants: {} };

/** Parses the limits document, naming the field at its depth. */
export function parseRateLimits(doc: unknown, source = "the rate limits"): RateLimits {
  const parsed = schema.safeParse(doc);
  if (!parsed.success) throw new ChaosError("invalid_argument", `${source}: ${describeZodIssues(parsed.error, schema).join("; ")}`);
  return parsed.data;
}

/** Reads `CHAOS_CORE_RATE_LIMITS_FILE`; a file that cannot be read or parsed refuses the start, naming it. */
export function loadRateLimitsFile(path: string): RateLimits {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new ChaosError("failed_precondition", `CHAOS_CORE_RATE_LIMITS_FILE: cannot read ${path} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new ChaosError("invalid_argument", `CHAOS_CORE_RATE_LIMITS_FILE: ${path} is not JSON: ${(err as Error).message}`);
  }
  return parseRateLimits(doc, `CHAOS_CORE_RATE_LIMITS_FILE ${path}`);
}

/** One bucket to check: its key suffix and GCRA parameters in milliseconds. */
export interface Bucket {
  /** Which limit it is, for the refusal: `tenant`, `principal` or `tool`. */
  readonly scope: "tenant" | "principal" | "tool";
  /** The key within the tenant (`rl:t`, `rl:p:<sha256(principal)>`, `rl:x:<sha256(principal)>:<tool>`). */
  readonly key: string;
  /** Milliseconds between requests at the sustained rate. */
  readonly intervalMs: number;
  /** Requests allowed at once. */
  readonly burst: number;
  readonly limit: RateLimit;
}

const bucket = (scope: Bucket["scope"], key: string, limit: RateLimit | undefined): Bucket[] =>
  limit ? [{ scope, key, intervalMs: PERIOD_MS[limit.per] / limit.requests, burst: limit.burst ?? limit.requests, limit }] : [];

/**
 * The buckets a call of `tool` by `principal` of `tenant` passes through: the tenant's own limits
 * over the defaults, field by field. `registry`: the tenant's limits in the tenant registry, which
 * win over the file's entry for it (docs/tenants.md). Without a tool (a `resources/read`, a
 * `prompts/get`…) only the tenant's and the principal's buckets: the same ones its tool calls take from.
 */
export function bucketsFor(limits: RateLimits, tenant: string, principal: string, tool: string | undefined, registry?: TenantLimits): Bucket[] {
  const own = registry ?? limits.tenants[tenant] ?? {};
  const d = limits.default;
  // The principal is hashed into a fixed-length key part: a principal is any string the credential names.
  const p = createHash("sha256").update(principal, "utf8").digest("hex").slice(0, 32);
  return [
    ...bucket("tenant", "rl:t", own.tenant ?? d.tenant),
    ...bucket("principal", `rl:p:${p}`, own.principal ?? d.principal),
    ...(tool === undefined ? [] : bucket("tool", `rl:x:${p}:${tool}`, own.tools?.[tool] ?? own.tool ?? d.tools?.[tool] ?? d.tool)),
  ];
}

/** How a limit reads in a refusal: `100 per minute (burst 20)`. */
export function describeLimit(l: RateLimit): string {
  return `${l.requests} per ${l.per}${l.burst !== undefined && l.burst !== l.requests ? ` (burst ${l.burst})` : ""}`;
}
