import { isIP } from "node:net";
import { z } from "zod";
import { LOG_LEVELS } from "./logger.js";
import { GRPC_TARGET_FORMS, parseGrpcTarget } from "./rpc/target.js";

/** A peer service's address in any form grpc-js balances over (see `parseGrpcTarget`). */
function grpcTarget(required?: string) {
  return z.string(required === undefined ? undefined : { error: required }).superRefine((v, ctx) => {
    const parsed = parseGrpcTarget(v);
    if (!parsed.ok) ctx.addIssue({ code: "custom", message: parsed.error });
  });
}

/** An environment record, as `process.env` is; tests pass their own. */
export type Env = Record<string, string | undefined>;

/** One bad variable: its name (`PORT`) and what is wrong with it. */
export interface ConfigIssue {
  readonly variable: string;
  readonly message: string;
}

/** Thrown when configuration is invalid; the message names every bad variable. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";

  /**
   * @param issues each bad variable, so a caller that set a variable from a command-line flag
   *   can name the flag instead.
   */
  constructor(
    message: string,
    readonly issues: readonly ConfigIssue[] = [],
  ) {
    super(message);
  }
}

/**
 * Parses an environment record with a zod object schema whose keys are variable names.
 * Empty strings count as unset, so `FOO=` in a .env file falls back to the default.
 */
export function parseEnv<S extends z.ZodType>(schema: S, env: Env): z.output<S> {
  const cleaned: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v !== "") cleaned[k] = v;
  const result = schema.safeParse(cleaned);
  if (result.success) return result.data;
  const issues = result.error.issues.map((issue) => ({ variable: issue.path.join(".") || "(environment)", message: issue.message }));
  throw new ConfigError(`invalid configuration:\n  ${issues.map((i) => `${i.variable}: ${i.message}`).join("\n  ")}`, issues);
}


/** Whether a host name or address only reaches this machine (`localhost`, `::1`, `127.0.0.0/8`). */
export function isLoopbackHost(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  if (h === "localhost" || h === "::1") return true;
  return isIP(h) === 4 && h.startsWith("127.");
}

/**
 * The variables every service shares, defined once so they parse and fail alike everywhere.
 * Each is a function so a service can set its own default.
 */
export const envVars = {
  host: () => z.string().min(1).default("127.0.0.1"),
  port: (fallback: number) =>
    z.coerce
      .number({ error: "must be a port number" })
      .int("must be a whole number")
      .min(0, "must be between 0 and 65535")
      .max(65535, "must be between 0 and 65535")
      .default(fallback),
  postgresUrl: () =>
    z
      .string()
      .refine((v) => /^postgres(ql)?:\/\/\S+$/.test(v), "must be a postgres:// or postgresql:// URL")
      .optional(),
  redisUrl: () => z.string().regex(/^rediss?:\/\/\S+$/, "must be a redis:// or rediss:// URL").optional(),
  contextKey: () =>
    z
      .string({ error: "is required: the shared key that signs and verifies call contexts" })
      .min(32, "must be at least 32 characters"),
  logLevel: () => z.enum(LOG_LEVELS).default("info"),
  /**
   * `CHAOS_CORE_PUBLIC_URL`: the address people reach Chaos Core at (behind an Ingress), from
   * which links to the approval console are built. An http(s) origin with an optional path,
   * without credentials, query or fragment; read without its trailing slash.
   */
  publicUrl: () =>
    z
      .string()
      .transform((s, ctx) => {
        let url: URL;
        try {
          url = new URL(s);
        } catch {
          ctx.addIssue({ code: "custom", message: "must be an absolute URL such as https://chaos.example.com" });
          return z.NEVER;
        }
        const problem =
          url.protocol !== "http:" && url.protocol !== "https:"
            ? `must be an http or https URL, got ${url.protocol}`
            : url.username || url.password
              ? "must not carry a user name or password"
              : url.search || url.hash || s.includes("?") || s.includes("#")
                ? "must not carry a query or a fragment"
                : undefined;
        if (problem) {
          ctx.addIssue({ code: "custom", message: problem });
          return z.NEVER;
        }
        return `${url.origin}${url.pathname}`.replace(/\/+$/, "");
      })
      .optional(),
  /**
   * The address of another service, required: a service run alone reaches its peers over gRPC.
   * `who` names the service that needs it, `service` the one it reaches. Any of
   * {@link GRPC_TARGET_FORMS}; `dns:///` for a headless Service with several replicas.
   */
  serviceAddr: (who: string, service: string) =>
    grpcTarget(`is required when ${who} runs alone: the address of the ${service} service (${GRPC_TARGET_FORMS})`),
  /** The address of another service where it is optional (the edge's, which standalone wires in process). */
  optionalServiceAddr: () => grpcTarget().optional(),
};

/**
 * A refinement for services that keep data: Postgres (`DATABASE_URL`) or an embedded store
 * under `CHAOS_CORE_DATA_DIR`, never a silent local fallback when neither is set (a cluster
 * replica that lost its `DATABASE_URL` must not quietly serve its own local data).
 */
export function requireStorage(embedded: string) {
  return (env: { DATABASE_URL?: string | undefined; CHAOS_CORE_DATA_DIR?: string | undefined }, ctx: z.RefinementCtx) => {
    if (env.DATABASE_URL === undefined && env.CHAOS_CORE_DATA_DIR === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["DATABASE_URL"],
        message: `set DATABASE_URL (Postgres) or CHAOS_CORE_DATA_DIR (${embedded})`,
      });
    }
  };
}

/**
 * How a service run alone starts and stops, read from the environment:
 * - `CHAOS_CORE_SHUTDOWN_GRACE_SECONDS` (default 25, 0..3600): on SIGTERM, how long in-flight calls
 *   may still run before they are cut. Keep it below the pod's `terminationGracePeriodSeconds`
 *   (Kubernetes' default 30) so the process exits on its own before the kubelet's SIGKILL.
 * - `CHAOS_CORE_MIGRATE` (`auto` by default, or `verify`): `auto` applies the service's own
 *   migrations on start (under the advisory lock); `verify` applies nothing — the service reports
 *   NOT_SERVING until `chaos-core migrate` (a Job) has brought its schema current.
 */
export interface LifecycleConfig {
  readonly shutdownGraceMs: number;
  readonly migrate: "auto" | "verify";
}

export const DEFAULT_SHUTDOWN_GRACE_SECONDS = 25;

const lifecycleSchema = z.object({
  CHAOS_CORE_SHUTDOWN_GRACE_SECONDS: z.coerce
    .number({ error: "must be a number of seconds" })
    .int("must be a whole number of seconds")
    .min(0, "must be between 0 and 3600 seconds")
    .max(3600, "must be between 0 and 3600 seconds")
    .default(DEFAULT_SHUTDOWN_GRACE_SECONDS),
  CHAOS_CORE_MIGRATE: z.enum(["auto", "verify"], { error: 'must be "auto" (apply on start) or "verify" (wait for chaos-core migrate)' }).default("auto"),
});

/** Reads {@link LifecycleConfig}; a bad value throws a ConfigError naming the variable. */
export function loadLifecycleConfig(env: Env = process.env): LifecycleConfig {
  const parsed = parseEnv(lifecycleSchema, env);
  return { shutdownGraceMs: parsed.CHAOS_CORE_SHUTDOWN_GRACE_SECONDS * 1000, migrate: parsed.CHAOS_CORE_MIGRATE };
}
