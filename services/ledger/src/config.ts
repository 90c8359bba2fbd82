import { envVars, parseEnv, requireStorage, serviceStorage, type ServiceStorage, type Env, type LOG_LEVELS } from "@chaos-core/kit";
import { z } from "zod";

/** Where the ledger keeps its log, nonces and spend totals. */
export type LedgerStorageConfig = ServiceStorage;

/** The ledger service's configuration, parsed once at start. */
export interface LedgerConfig {
  readonly host: string;
  readonly port: number;
  readonly storage: LedgerStorageConfig;
  /** The receipt nonce fast path: Redis shared by replicas, or this process. Postgres decides either way. */
  readonly nonces: { readonly kind: "redis"; readonly url: string; readonly prefix: string } | { readonly kind: "memory" };
  readonly contextKey: string;
  /** The Ed25519 keyring file (operator configuration); there is no default key. */
  readonly keysFile: string;
  /** The policy service, which says which approval channels may answer a spend or a tool receipt. */
  readonly policyAddr: string;
  /** The operator's spend and tool-approval policies; unset = the reference policies. */
  readonly policyFile?: string;
  /** Prefix of each tenant's checkpoint origin: `<origin>/<tenant>`. */
  readonly origin: string;
  readonly logLevel: (typeof LOG_LEVELS)[number];
}

const schema = z
  .object({
    HOST: envVars.host(),
    PORT: envVars.port(50054),
    DATABASE_URL: envVars.postgresUrl(),
    CHAOS_CORE_DATA_DIR: z.string().optional(),
    REDIS_URL: envVars.redisUrl(),
    CHAOS_CORE_REDIS_PREFIX: z.string().regex(/^[\x21-\x7e]{1,64}$/, "must be 1 to 64 visible ASCII characters").default("chaoscore:"),
    CHAOS_CORE_CONTEXT_KEY: envVars.contextKey(),
    POLICY_ADDR: envVars.serviceAddr("the ledger", "policy"),
    CHAOS_CORE_LEDGER_KEYS_FILE: z.string({
      error: "is required: the Ed25519 keyring file that signs receipts and checkpoints (there is no default key)",
    }),
    CHAOS_CORE_LEDGER_POLICY_FILE: z.string().optional(),
    CHAOS_CORE_LEDGER_ORIGIN: originVar(),
    LOG_LEVEL: envVars.logLevel(),
  })
  .superRefine(requireStorage("embedded PGlite"));

/** A checkpoint origin: a schema-less URL-like name without spaces or `+` (C2SP signed notes). */
export function originVar() {
  return z
    .string()
    .regex(/^[a-z0-9][a-z0-9.\-/]{0,120}$/i, "must be letters, digits, '.', '-' and '/' (e.g. chaos-core.example.com/ledger)")
    .default("chaos-core/ledger");
}

/**
 * Reads the ledger service's configuration (`process.env` unless given). `DATABASE_URL` wins
 * over `CHAOS_CORE_DATA_DIR`; `CHAOS_CORE_LEDGER_KEYS_FILE` and `POLICY_ADDR` are required. Throws `ConfigError`
 * naming every bad variable.
 */
export function loadLedgerConfig(env: Env = process.env): LedgerConfig {
  const e = parseEnv(schema, env);
  return {
    host: e.HOST,
    port: e.PORT,
    storage: serviceStorage(e),
    nonces: e.REDIS_URL ? { kind: "redis", url: e.REDIS_URL, prefix: e.CHAOS_CORE_REDIS_PREFIX } : { kind: "memory" },
    contextKey: e.CHAOS_CORE_CONTEXT_KEY,
    keysFile: e.CHAOS_CORE_LEDGER_KEYS_FILE,
    policyAddr: e.POLICY_ADDR,
    ...(e.CHAOS_CORE_LEDGER_POLICY_FILE ? { policyFile: e.CHAOS_CORE_LEDGER_POLICY_FILE } : {}),
    origin: e.CHAOS_CORE_LEDGER_ORIGIN,
    logLevel: e.LOG_LEVEL,
  };
}
