import { defaultLockFile } from "@chaos-core/contracts";
import { ConfigError, envVars, parseAllowedAddresses, parseEnv, type Env, type LOG_LEVELS, type SecretSources } from "@chaos-core/kit";
import { z } from "zod";
import { loadProviderConfig, type ProviderConfig } from "./providers/config.js";
import { upstreamMaxResultBytesOf, upstreamsConfigOf, upstreamSecretsOf, upstreamTokenMaxSecondsOf, type UpstreamsConfig } from "./upstreams/config.js";

/** The cognition service's configuration, parsed once at start. Holds secrets: never log it whole. */
export interface CognitionConfig {
  readonly host: string;
  readonly port: number;
  /** The HMAC key call contexts are verified and signed with; there is deliberately no default. */
  readonly contextKey: string;
  /** `CHAOS_CORE_CONTEXT_KEY_ACCEPTED`: a second key whose signatures are accepted while the key is rotated. */
  readonly contextKeyAccepted?: string;
  readonly policyAddr: string;
  readonly memoryAddr: string;
  /** The ledger: every decision is recorded there, and approved steps run on its receipts. */
  readonly ledgerAddr: string;
  /** Where plans live between Plan and Execute: Redis (shared by replicas) or this process. */
  readonly plans: { readonly kind: "redis"; readonly url: string; readonly prefix: string } | { readonly kind: "memory" };
  readonly provider: ProviderConfig;
  readonly logLevel: (typeof LOG_LEVELS)[number];
  /** The contracts lock the capabilities are pinned to (`CHAOS_CORE_CONTRACT_LOCK_FILE`, docs/contracts.md §7). */
  readonly contractLockFile: string;
  /** `CHAOS_CORE_POLICY_SNAPSHOTS` (default on): decide from a watched policy snapshot (docs/cognition.md "Policy snapshots"). */
  readonly policySnapshots: boolean;
  /** The operator's upstream MCP servers (`CHAOS_CORE_UPSTREAMS_FILE`, docs/federation.md §10); none unless named. */
  readonly upstreams?: UpstreamsConfig;
  /** `CHAOS_CORE_HTTP_ALLOWED_ADDRESSES`: internal ranges `http.request` (and tenants' upstreams) may reach. */
  readonly httpAllowedAddresses: readonly string[];
  /** Tenants' own registry upstreams: where their header references resolve, and the result cap (docs/federation.md §12). */
  readonly tenantUpstreams: { readonly secrets: SecretSources; readonly maxResultBytes?: number; readonly tokenMaxSeconds?: number };
}

/** A service address; required, since the service runs alone and reaches its peers over gRPC. */
const serviceAddr = (service: string) => envVars.serviceAddr("cognition", service);

const schema = z.object({
  HOST: envVars.host(),
  PORT: envVars.port(50053),
  CHAOS_CORE_CONTEXT_KEY: envVars.contextKey(),
  CHAOS_CORE_CONTEXT_KEY_ACCEPTED: envVars.contextKeyAccepted(),
  POLICY_ADDR: serviceAddr("policy"),
  MEMORY_ADDR: serviceAddr("memory"),
  LEDGER_ADDR: serviceAddr("ledger"),
  REDIS_URL: envVars.redisUrl(),
  CHAOS_CORE_REDIS_PREFIX: z.string().regex(/^[\x21-\x7e]{1,64}$/, "must be 1 to 64 visible ASCII characters").default("chaoscore:"),
  LOG_LEVEL: envVars.logLevel(),
  CHAOS_CORE_CONTRACT_LOCK_FILE: z.string().min(1, "must name the lockfile").optional(),
  CHAOS_CORE_POLICY_SNAPSHOTS: z.enum(["on", "off"], { error: "must be on or off" }).default("on"),
});

/** The operator's allowed ranges, a malformed entry named as a ConfigError names a variable. */
function allowedAddresses(env: Env): string[] {
  try {
    return parseAllowedAddresses(env.CHAOS_CORE_HTTP_ALLOWED_ADDRESSES);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}

/**
 * Reads the configuration of the cognition service run alone from an environment record
 * (`process.env` unless given): `CHAOS_CORE_CONTEXT_KEY`, `POLICY_ADDR`, `MEMORY_ADDR` and
 * `LEDGER_ADDR` are required (no decision without an audit ledger); `REDIS_URL` puts plans in Redis (under `CHAOS_CORE_REDIS_PREFIX`) so replicas share
 * them. The AI provider is read from the same record by `loadProviderConfig`, the operator's
 * upstreams by `upstreamsConfigOf` (none unless `CHAOS_CORE_UPSTREAMS_FILE` is set). Throws
 * `ConfigError` naming every bad variable.
 */
export function loadCognitionConfig(env: Env = process.env): CognitionConfig {
  const e = parseEnv(schema, env);
  const provider = loadProviderConfig(env);
  const upstreams = upstreamsConfigOf(env);
  const maxResultBytes = upstreamMaxResultBytesOf(env);
  const tokenMaxSeconds = upstreamTokenMaxSecondsOf(env);
  return {
    host: e.HOST,
    port: e.PORT,
    contextKey: e.CHAOS_CORE_CONTEXT_KEY,
    ...(e.CHAOS_CORE_CONTEXT_KEY_ACCEPTED ? { contextKeyAccepted: e.CHAOS_CORE_CONTEXT_KEY_ACCEPTED } : {}),
    policyAddr: e.POLICY_ADDR,
    memoryAddr: e.MEMORY_ADDR,
    ledgerAddr: e.LEDGER_ADDR,
    plans: e.REDIS_URL ? { kind: "redis", url: e.REDIS_URL, prefix: e.CHAOS_CORE_REDIS_PREFIX } : { kind: "memory" },
    provider,
    logLevel: e.LOG_LEVEL,
    contractLockFile: e.CHAOS_CORE_CONTRACT_LOCK_FILE ?? defaultLockFile(),
    policySnapshots: e.CHAOS_CORE_POLICY_SNAPSHOTS === "on",
    ...(upstreams ? { upstreams } : {}),
    httpAllowedAddresses: allowedAddresses(env),
    tenantUpstreams: { secrets: upstreamSecretsOf(env), ...(maxResultBytes !== undefined ? { maxResultBytes } : {}), ...(tokenMaxSeconds !== undefined ? { tokenMaxSeconds } : {}) },
  };
}
