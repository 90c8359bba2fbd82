import { resolve } from "node:path";
import { LOG_LEVELS, parseEnv, type Env } from "@chaos-core/kit";
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
  readonly logLevel: (typeof LOG_LEVELS)[number];
  readonly store: PolicyStoreConfig;
}

const MIN_CONTEXT_KEY_LENGTH = 32;

const schema = z
  .object({
    HOST: z.string().default("127.0.0.1"),
    PORT: z.coerce
      .number({ error: "must be a port number" })
      .int("must be a whole number")
      .min(0, "must be between 0 and 65535")
      .max(65535, "must be between 0 and 65535")
      .default(50051),
    DATABASE_URL: z.url({ error: "must be a postgres:// URL" }).optional(),
    CHAOS_CORE_DATA_DIR: z.string().optional(),
    CHAOS_CORE_CONTEXT_KEY: z
      .string({ error: "required: the shared key that verifies signed call contexts" })
      .min(MIN_CONTEXT_KEY_LENGTH, `must be at least ${MIN_CONTEXT_KEY_LENGTH} characters`),
    LOG_LEVEL: z.enum(LOG_LEVELS).default("info"),
  })
  .superRefine((env, ctx) => {
    // No silent fallback: a cluster replica that lost DATABASE_URL must not quietly serve its
    // own local file policy while the other replicas serve the database one.
    if (env.DATABASE_URL === undefined && env.CHAOS_CORE_DATA_DIR === undefined) {
      ctx.addIssue({
        code: "custom",
        path: ["DATABASE_URL"],
        message: "set DATABASE_URL (policies in Postgres) or CHAOS_CORE_DATA_DIR (a policy.json file there)",
      });
    }
  });

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
    logLevel: parsed.LOG_LEVEL,
    store:
      parsed.DATABASE_URL !== undefined
        ? { kind: "postgres", databaseUrl: parsed.DATABASE_URL }
        : { kind: "file", path: resolve(parsed.CHAOS_CORE_DATA_DIR ?? ".", "policy.json") },
  };
}
