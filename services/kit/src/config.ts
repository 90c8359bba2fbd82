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
  /**
   * `CHAOS_CORE_CONTEXT_KEY_ACCEPTED`: one more call-context key whose signatures are accepted
   * (never used to sign) while the key is rotated: the next key before it becomes
   * `CHAOS_CORE_CONTEXT_KEY`, then the previous one until every replica signs with the new.
   */
  contextKeyAccepted: () => z.string().min(32, "must be at least 32 characters").optional(),
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

/**
 * The gRPC transport settings every service reads (the edge as a client only):
 * - `CHAOS_CORE_GRPC_TLS_CERT_FILE`, `CHAOS_CORE_GRPC_TLS_KEY_FILE`, `CHAOS_CORE_GRPC_TLS_CA_FILE`:
 *   TLS between the services, all three or none (a cert-manager Secret's `tls.crt`, `tls.key`,
 *   `ca.crt`). The certificate and key are what the service's gRPC server presents (and, with
 *   mutual TLS, what it presents as a client); the CA verifies the peers.
 * - `CHAOS_CORE_GRPC_TLS_MUTUAL` (`false` by default): servers require a client certificate
 *   signed by the CA, and clients present theirs.
 * - `CHAOS_CORE_GRPC_TLS_SERVER_NAME`: the name clients verify in every server's certificate
 *   instead of the host of the address (one certificate for every service, or `ipv4:` lists).
 * - `CHAOS_CORE_GRPC_HEALTH_PORT`: a second, plaintext port that serves only `grpc.health.v1`
 *   (the kubelet's gRPC probe cannot speak TLS); unset, health is served on the main port only.
 */
export interface GrpcTransportConfig {
  readonly tls: GrpcTlsConfig | undefined;
  readonly healthPort: number | undefined;
}

/** Files and options of TLS between the services; see {@link GrpcTransportConfig}. */
export interface GrpcTlsConfig {
  readonly certFile: string;
  readonly keyFile: string;
  readonly caFile: string;
  readonly mutual: boolean;
  readonly serverName: string | undefined;
}

export const GRPC_TLS_VARS = {
  cert: "CHAOS_CORE_GRPC_TLS_CERT_FILE",
  key: "CHAOS_CORE_GRPC_TLS_KEY_FILE",
  ca: "CHAOS_CORE_GRPC_TLS_CA_FILE",
  mutual: "CHAOS_CORE_GRPC_TLS_MUTUAL",
  serverName: "CHAOS_CORE_GRPC_TLS_SERVER_NAME",
} as const;

const TLS_FILES = "gRPC TLS needs all three of CHAOS_CORE_GRPC_TLS_CERT_FILE, CHAOS_CORE_GRPC_TLS_KEY_FILE and CHAOS_CORE_GRPC_TLS_CA_FILE (a cert-manager Secret's tls.crt, tls.key and ca.crt), or none of them";

const transportSchema = z
  .object({
    CHAOS_CORE_GRPC_TLS_CERT_FILE: z.string().optional(),
    CHAOS_CORE_GRPC_TLS_KEY_FILE: z.string().optional(),
    CHAOS_CORE_GRPC_TLS_CA_FILE: z.string().optional(),
    CHAOS_CORE_GRPC_TLS_MUTUAL: z.enum(["true", "false"], { error: 'must be "true" or "false"' }).default("false"),
    CHAOS_CORE_GRPC_TLS_SERVER_NAME: z
      .string()
      .regex(/^[A-Za-z0-9_*](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$|^[0-9a-fA-F:.]+$/, "must be a DNS name or an IP address, as in the servers' certificates")
      .optional(),
    CHAOS_CORE_GRPC_HEALTH_PORT: z.coerce
      .number({ error: "must be a port number" })
      .int("must be a whole number")
      .min(0, "must be between 0 and 65535 (0 picks a free port)")
      .max(65535, "must be between 0 and 65535 (0 picks a free port)")
      .optional(),
  })
  .superRefine((env, ctx) => {
    const files = [GRPC_TLS_VARS.cert, GRPC_TLS_VARS.key, GRPC_TLS_VARS.ca] as const;
    const set = files.filter((k) => env[k] !== undefined);
    if (set.length > 0 && set.length < files.length) {
      for (const k of files.filter((f) => env[f] === undefined)) {
        ctx.addIssue({ code: "custom", path: [k], message: `is required with ${set.join(" and ")}: ${TLS_FILES}` });
      }
    }
    if (set.length === 0) {
      if (env.CHAOS_CORE_GRPC_TLS_MUTUAL === "true") ctx.addIssue({ code: "custom", path: [GRPC_TLS_VARS.mutual], message: `is true, but TLS is off: ${TLS_FILES}` });
      if (env.CHAOS_CORE_GRPC_TLS_SERVER_NAME !== undefined) ctx.addIssue({ code: "custom", path: [GRPC_TLS_VARS.serverName], message: `is set, but TLS is off: ${TLS_FILES}` });
    }
  });

/** Reads {@link GrpcTransportConfig}; a half-configured TLS throws a ConfigError naming each missing variable. */
export function loadGrpcTransportConfig(env: Env = process.env): GrpcTransportConfig {
  const p = parseEnv(transportSchema, env);
  const tls =
    p.CHAOS_CORE_GRPC_TLS_CERT_FILE !== undefined && p.CHAOS_CORE_GRPC_TLS_KEY_FILE !== undefined && p.CHAOS_CORE_GRPC_TLS_CA_FILE !== undefined
      ? {
          certFile: p.CHAOS_CORE_GRPC_TLS_CERT_FILE,
          keyFile: p.CHAOS_CORE_GRPC_TLS_KEY_FILE,
          caFile: p.CHAOS_CORE_GRPC_TLS_CA_FILE,
          mutual: p.CHAOS_CORE_GRPC_TLS_MUTUAL === "true",
          serverName: p.CHAOS_CORE_GRPC_TLS_SERVER_NAME,
        }
      : undefined;
  return { tls, healthPort: p.CHAOS_CORE_GRPC_HEALTH_PORT };
}
