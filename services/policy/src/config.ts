import { resolve } from "node:path";
import { ConfigError, envVars, parseAllowedAddresses, parseEnv, requireStorage, type Env, type LOG_LEVELS } from "@chaos-core/kit";
import { z } from "zod";

/** Where the policy documents live: Postgres in a cluster, a `policy.json` file standalone. */
export type PolicyStoreConfig =
  | { readonly kind: "postgres"; readonly databaseUrl: string }
  | { readonly kind: "file"; readonly path: string };

/** The policy service's configuration. */
export interface PolicyConfig {
  readonly host: string;
  readonly port: number;
  readonly contextKey: string;
  /** `CHAOS_CORE_CONTEXT_KEY_ACCEPTED`: a second key whose signatures are accepted while the key is rotated. */
  readonly contextKeyAccepted?: string;
  readonly logLevel: (typeof LOG_LEVELS)[number];
  readonly store: PolicyStoreConfig;
  /**
   * `CHAOS_CORE_ADMIN_PORT`: where TenantAdminService listens (a port of its own, so a
   * NetworkPolicy can admit only the operator's pods to it); 0 picks a free port.
   */
  readonly adminPort: number;
  /** `REDIS_URL`: where tenant generations are published for the edges (docs/tenants.md). */
  readonly redis?: { readonly url: string; readonly prefix: string };
  /** `CHAOS_CORE_HTTP_ALLOWED_ADDRESSES`: internal ranges a tenant's upstream URL may name (none by default). */
  readonly httpAllowedAddresses: readonly string[];
  /** `CHAOS_CORE_UPSTREAMS_FILE`: the operator's upstreams, whose names a tenant's upstream may not take. */
  readonly upstreamsFile?: string;
}

const schema = z
  .object({
    HOST: envVars.host(),
    PORT: envVars.port(50051),
    DATABASE_URL: envVars.postgresUrl(),
    CHAOS_CORE_DATA_DIR: z.string().optional(),
    CHAOS_CORE_CONTEXT_KEY: envVars.contextKey(),
    CHAOS_CORE_CONTEXT_KEY_ACCEPTED: envVars.contextKeyAccepted(),
    LOG_LEVEL: envVars.logLevel(),
    CHAOS_CORE_ADMIN_PORT: envVars.port(50056),
    REDIS_URL: envVars.redisUrl(),
    CHAOS_CORE_REDIS_PREFIX: z.string().regex(/^[\x21-\x7e]{1,64}$/, "must be 1 to 64 visible ASCII characters").default("chaoscore:"),
    CHAOS_CORE_UPSTREAMS_FILE: z.string().optional(),
  })
  .superRefine(requireStorage("a policy.json file there"));

/**
 * Reads the policy service's configuration from an environment record (tests pass their own):
 * `HOST` (default 127.0.0.1), `PORT` (default 50051), `DATABASE_URL` for the Postgres store or
 * else `CHAOS_CORE_DATA_DIR` for `<dir>/policy.json`, `CHAOS_CORE_CONTEXT_KEY` (required, at
 * least 32 characters), `LOG_LEVEL`, `CHAOS_CORE_ADMIN_PORT` (default 50056: the tenant admin API)
 * and `REDIS_URL` (+ `CHAOS_CORE_REDIS_PREFIX`) where tenant generations are published.
 * @param env defaults to `process.env`; this module is the only reader of it.
 * @throws ConfigError naming every bad variable.
 */
export function loadPolicyConfig(env: Env = process.env): PolicyConfig {
  const parsed = parseEnv(schema, env);
  let httpAllowedAddresses: string[];
  try {
    httpAllowedAddresses = parseAllowedAddresses(env.CHAOS_CORE_HTTP_ALLOWED_ADDRESSES);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  return {
    httpAllowedAddresses,
    ...(parsed.CHAOS_CORE_UPSTREAMS_FILE ? { upstreamsFile: resolve(parsed.CHAOS_CORE_UPSTREAMS_FILE) } : {}),
    host: parsed.HOST,
    port: parsed.PORT,
    contextKey: parsed.CHAOS_CORE_CONTEXT_KEY,
    ...(parsed.CHAOS_CORE_CONTEXT_KEY_ACCEPTED ? { contextKeyAccepted: parsed.CHAOS_CORE_CONTEXT_KEY_ACCEPTED } : {}),
    logLevel: parsed.LOG_LEVEL,
    adminPort: parsed.CHAOS_CORE_ADMIN_PORT,
    ...(parsed.REDIS_URL ? { redis: { url: parsed.REDIS_URL, prefix: parsed.CHAOS_CORE_REDIS_PREFIX } } : {}),
    store:
      parsed.DATABASE_URL !== undefined
        ? { kind: "postgres", databaseUrl: parsed.DATABASE_URL }
        : { kind: "file", path: resolve(parsed.CHAOS_CORE_DATA_DIR ?? ".", "policy.json") },
  };
}
