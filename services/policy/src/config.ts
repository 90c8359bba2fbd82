import { resolve } from "node:path";
import { envVars, parseEnv, requireStorage, type Env, type LOG_LEVELS } from "@chaos-core/kit";
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
  })
  .superRefine(requireStorage("a policy.json file there"));

/**
 * Reads the policy service's configuration from an environment record (tests pass their own):
 * `HOST` (default 127.0.0.1), `PORT` (default 50051), `DATABASE_URL` for the Postgres store or
 * else `CHAOS_CORE_DATA_DIR` for `<dir>/policy.json`, `CHAOS_CORE_CONTEXT_KEY` (required, at
 * least 32 characters) and `LOG_LEVEL`.
 * @param env defaults to `process.env`; this module is the only reader of it.
 * @throws ConfigError naming every bad variable.
 */
export function loadPolicyConfig(env: Env = process.env): PolicyConfig {
  const parsed = parseEnv(schema, env);
  return {
    host: parsed.HOST,
    port: parsed.PORT,
    contextKey: parsed.CHAOS_CORE_CONTEXT_KEY,
    ...(parsed.CHAOS_CORE_CONTEXT_KEY_ACCEPTED ? { contextKeyAccepted: parsed.CHAOS_CORE_CONTEXT_KEY_ACCEPTED } : {}),
    logLevel: parsed.LOG_LEVEL,
    store:
      parsed.DATABASE_URL !== undefined
        ? { kind: "postgres", databaseUrl: parsed.DATABASE_URL }
        : { kind: "file", path: resolve(parsed.CHAOS_CORE_DATA_DIR ?? ".", "policy.json") },
  };
}
