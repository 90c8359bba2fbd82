import { resolve } from "node:path";
import { z } from "zod";
import { envVars, parseEnv, type Env, type LOG_LEVELS } from "@chaos-core/kit";
// The configuration modules alone, not the services: `chaos-core stdio` reads its configuration
// before it answers initialize, and loads the services after.
import { loadProviderConfig, type ProviderConfig } from "@chaos-core/cognition/provider-config";
import { originVar } from "@chaos-core/ledger/config";

const schema = z.object({
  CHAOS_CORE_DATA_DIR: z.string().default("./data"),
  DATABASE_URL: envVars.postgresUrl(),
  REDIS_URL: envVars.redisUrl(),
  LOG_LEVEL: envVars.logLevel(),
  CHAOS_CORE_LEDGER_KEYS_FILE: z.string().optional(),
  CHAOS_CORE_LEDGER_POLICY_FILE: z.string().optional(),
  CHAOS_CORE_LEDGER_ORIGIN: originVar(),
});

/** What the standalone process needs beyond the edge's own configuration. */
export interface StandaloneConfig {
  /** Absolute path of the data directory (embedded database, policy file, lock). */
  dataDir: string;
  /** Postgres instead of the embedded database, when set. */
  databaseUrl: string | undefined;
  /** Redis instead of in-process session storage, when set. */
  redisUrl: string | undefined;
  logLevel: (typeof LOG_LEVELS)[number];
  /** The AI provider cognition uses (holds an API key when one is set: never log it whole). */
  provider: ProviderConfig;
  /** The operator's ledger keyring; unset = one generated into the data directory on first run. */
  ledgerKeysFile: string | undefined;
  /** The operator's spend and tool-approval policies; unset = the reference policies. */
  ledgerPolicyFile: string | undefined;
  /** Checkpoint origin prefix of the audit ledger. */
  ledgerOrigin: string;
}

/**
 * Reads the standalone configuration from an environment record (only this file reads env). A
 * selected AI provider that is not configured fails here, naming the missing variable.
 */
export function loadStandaloneConfig(env: Env, cwd = process.cwd()): StandaloneConfig {
  const c = parseEnv(schema, env);
  const provider = loadProviderConfig(env);
  return {
    dataDir: resolve(cwd, c.CHAOS_CORE_DATA_DIR),
    databaseUrl: c.DATABASE_URL,
    redisUrl: c.REDIS_URL,
    logLevel: c.LOG_LEVEL,
    provider,
    ledgerKeysFile: c.CHAOS_CORE_LEDGER_KEYS_FILE ? resolve(cwd, c.CHAOS_CORE_LEDGER_KEYS_FILE) : undefined,
    ledgerPolicyFile: c.CHAOS_CORE_LEDGER_POLICY_FILE ? resolve(cwd, c.CHAOS_CORE_LEDGER_POLICY_FILE) : undefined,
    ledgerOrigin: c.CHAOS_CORE_LEDGER_ORIGIN,
  };
}
