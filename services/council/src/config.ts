import { envVars, parseEnv, requireStorage, serviceStorage, type ServiceStorage, type Env, type LOG_LEVELS } from "@chaos-core/kit";
import { z } from "zod";

/** Where the council service keeps its sessions. */
export type CouncilStorageConfig = ServiceStorage;

/** The council service's configuration, parsed once at start. */
export interface CouncilConfig {
  readonly host: string;
  readonly port: number;
  readonly storage: CouncilStorageConfig;
  /** The HMAC key call contexts are verified with; there is deliberately no default. */
  readonly contextKey: string;
  /** `CHAOS_CORE_CONTEXT_KEY_ACCEPTED`: a second key whose signatures are accepted while the key is rotated. */
  readonly contextKeyAccepted?: string;
  readonly logLevel: (typeof LOG_LEVELS)[number];
}

/** The port the council service listens on unless PORT says otherwise. */
export const COUNCIL_DEFAULT_PORT = 50055;

const schema = z
  .object({
    HOST: envVars.host(),
    PORT: envVars.port(COUNCIL_DEFAULT_PORT),
    DATABASE_URL: envVars.postgresUrl(),
    CHAOS_CORE_DATA_DIR: z.string().optional(),
    CHAOS_CORE_CONTEXT_KEY: envVars.contextKey(),
    CHAOS_CORE_CONTEXT_KEY_ACCEPTED: envVars.contextKeyAccepted(),
    LOG_LEVEL: envVars.logLevel(),
  })
  .superRefine(requireStorage("embedded PGlite"));

/**
 * Reads the council service's configuration from an environment record (`process.env` unless
 * given). `DATABASE_URL` wins over `CHAOS_CORE_DATA_DIR` when both are set, so a cluster
 * deployment never silently falls back to a local file. Throws `ConfigError` naming every
 * bad variable.
 */
export function loadCouncilConfig(env: Env = process.env): CouncilConfig {
  const e = parseEnv(schema, env);
  return {
    host: e.HOST,
    port: e.PORT,
    storage: serviceStorage(e),
    contextKey: e.CHAOS_CORE_CONTEXT_KEY,
    ...(e.CHAOS_CORE_CONTEXT_KEY_ACCEPTED ? { contextKeyAccepted: e.CHAOS_CORE_CONTEXT_KEY_ACCEPTED } : {}),
    logLevel: e.LOG_LEVEL,
  };
}
