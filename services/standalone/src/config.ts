import { homedir } from "node:os";
import { isAbsolute, join, resolve, win32 } from "node:path";
import { z } from "zod";
import { ConfigError, envVars, parseAllowedAddresses, parseEnv, type Env, type LOG_LEVELS } from "@chaos-core/kit";
// The configuration modules alone, not the services: `chaos-core stdio` reads its configuration
// before it answers initialize, and loads the services after.
import { loadProviderConfig, type ProviderConfig } from "@chaos-core/cognition/provider-config";
import { upstreamsConfigOf, type UpstreamsConfig as CognitionUpstreamsConfig } from "@chaos-core/cognition/upstreams-config";
import { originVar, requireWebhookSecret, WEBHOOK_ENV, webhookConfigOf, type WebhookConfig } from "@chaos-core/ledger/config";

const schema = z.object({
  CHAOS_CORE_DATA_DIR: z.string().optional(),
  DATABASE_URL: envVars.postgresUrl(),
  CHAOS_CORE_PG_POOL_MAX: z.coerce.number({ error: "must be a number" }).int("must be a whole number").min(1, "must be between 1 and 200").max(200, "must be between 1 and 200").default(10),
  REDIS_URL: envVars.redisUrl(),
  CHAOS_CORE_REDIS_PREFIX: z.string().regex(/^[\x21-\x7e]{1,64}$/, "must be 1 to 64 visible ASCII characters").default("chaoscore:"),
  CHAOS_CORE_POLICY_SNAPSHOTS: z.enum(["on", "off"], { error: "must be on or off" }).default("on"),
  LOG_LEVEL: envVars.logLevel(),
  CHAOS_CORE_LEDGER_KEYS_FILE: z.string().optional(),
  CHAOS_CORE_LEDGER_POLICY_FILE: z.string().optional(),
  CHAOS_CORE_LEDGER_ORIGIN: originVar(),
  CHAOS_CORE_STDIO_ATTACH_SECONDS: z.coerce.number({ error: "must be a number" }).int("must be a whole number").min(0, "must be between 0 and 600").max(600, "must be between 0 and 600").default(30),
  // The ledger's approval notifications, read as the ledger run alone reads them.
  ...WEBHOOK_ENV,
}).superRefine(requireWebhookSecret);

/** What the standalone process needs beyond the edge's own configuration. */
export interface StandaloneConfig {
  /** Absolute path of the data directory (embedded database, policy file, lock). */
  dataDir: string;
  /**
   * The data directory was chosen (CHAOS_CORE_DATA_DIR or --data-dir), not the per-user default:
   * a `chaos-core approvals` command printed for the operator must name it.
   */
  dataDirChosen: boolean;
  /** Postgres instead of the embedded database, when set. */
  databaseUrl: string | undefined;
  /** The most Postgres connections the process opens (`CHAOS_CORE_PG_POOL_MAX`, 10). */
  pgPoolMax: number;
  /** `CHAOS_CORE_POLICY_SNAPSHOTS` (default on): cognition decides from a watched policy snapshot; off asks policy each step. */
  policySnapshots: boolean;
  /** Redis instead of in-process session storage, when set. */
  redisUrl: string | undefined;
  /**
   * Every key and channel in Redis under it (`CHAOS_CORE_REDIS_PREFIX`, `chaoscore:`), as the
   * services and `chaos-core tenants|keys|upstreams` read it: a change one makes, the others hear.
   */
  redisPrefix: string;
  logLevel: (typeof LOG_LEVELS)[number];
  /** The AI provider cognition uses (holds an API key when one is set: never log it whole). */
  provider: ProviderConfig;
  /** The operator's ledger keyring; unset = one generated into the data directory on first run. */
  ledgerKeysFile: string | undefined;
  /** The operator's spend and tool-approval policies; unset = the reference policies. */
  ledgerPolicyFile: string | undefined;
  /** Checkpoint origin prefix of the audit ledger. */
  ledgerOrigin: string;
  /** Signed approval notifications (`CHAOS_CORE_WEBHOOK_*`); unset = off. Holds keys: never log it. */
  webhooks: WebhookConfig | undefined;
  /**
   * How long `chaos-core stdio` waits, when another process holds its data directory, for that
   * process to offer its MCP endpoint or to let go (`CHAOS_CORE_STDIO_ATTACH_SECONDS`, default 30).
   */
  stdioAttachSeconds: number;
}

/** The folder, inside the per-user data directory of the platform, that Chaos Core owns. */
const APP_DIR = "chaos-core";

/**
 * The per-user data directory every `chaos-core` command defaults to, so a server a host
 * started (in whatever working directory) and the operator's commands find the same one:
 * `$XDG_DATA_HOME/chaos-core`, else `~/.local/share/chaos-core` (Linux and other Unixes);
 * `~/Library/Application Support/chaos-core` (macOS); `%LOCALAPPDATA%\chaos-core` (Windows).
 * @throws ConfigError naming CHAOS_CORE_DATA_DIR when no home directory is known.
 */
export function userDataDir(env: Env, platform: NodeJS.Platform = process.platform, home: () => string = homedir): string {
  return perUserDir(env, "XDG_DATA_HOME", [".local", "share"], "CHAOS_CORE_DATA_DIR", platform, home);
}

/**
 * The per-user state directory (what a command remembers between runs, such as the checkpoints
 * `ledger verify` verified): `$XDG_STATE_HOME/chaos-core`, else `~/.local/state/chaos-core`
 * (Linux and other Unixes); the data directory's place on macOS and Windows.
 * @throws ConfigError naming `variable` when no home directory is known.
 */
export function userStateDir(env: Env, variable: string, platform: NodeJS.Platform = process.platform, home: () => string = homedir): string {
  return perUserDir(env, "XDG_STATE_HOME", [".local", "state"], variable, platform, home);
}

function perUserDir(env: Env, xdg: string, unix: string[], variable: string, platform: NodeJS.Platform, home: () => string): string {
  const fromHome = (...parts: string[]) => {
    let dir: string;
    try {
      dir = env.HOME || home();
    } catch {
      dir = "";
    }
    if (!dir) {
      const message = `there is no home directory to keep ${variable === "CHAOS_CORE_DATA_DIR" ? "data" : "state"} in; set ${variable}`;
      throw new ConfigError(`${variable}: ${message}`, [{ variable, message }]);
    }
    return (platform === "win32" ? win32.join : join)(dir, ...parts, APP_DIR);
  };
  if (platform === "win32") return env.LOCALAPPDATA ? win32.join(env.LOCALAPPDATA, APP_DIR) : fromHome("AppData", "Local");
  if (platform === "darwin") return fromHome("Library", "Application Support");
  // The XDG spec: a relative XDG_DATA_HOME (or XDG_STATE_HOME) is invalid and ignored.
  const set = env[xdg];
  if (set && isAbsolute(set)) return join(set, APP_DIR);
  return fromHome(...unix);
}

/**
 * The data directory a command uses: `CHAOS_CORE_DATA_DIR` (the command line's `--data-dir` is
 * mapped onto it), resolved against `cwd`, else {@link userDataDir}. The one rule for every
 * command (serve, stdio, approvals, ledger, policy).
 */
export function resolveDataDir(env: Env, cwd = process.cwd()): string {
  const set = env.CHAOS_CORE_DATA_DIR;
  return set ? resolve(cwd, set) : userDataDir(env);
}

const storesSchema = z.object({ DATABASE_URL: envVars.postgresUrl() });

/** Where an operator command finds the stores: Postgres, or a data directory's embedded ones. */
export type OperatorStores = { readonly kind: "postgres"; readonly url: string } | { readonly kind: "data-dir"; readonly dataDir: string };

/**
 * The stores a server started with the same environment uses, for the operator's commands
 * (`ledger`, `policy`): Postgres when DATABASE_URL is set, else the data directory
 * ({@link resolveDataDir}).
 * @throws ConfigError naming DATABASE_URL when it is not a postgres:// URL.
 */
export function loadOperatorStores(env: Env, cwd = process.cwd()): OperatorStores {
  const c = parseEnv(storesSchema, env);
  return c.DATABASE_URL ? { kind: "postgres", url: c.DATABASE_URL } : { kind: "data-dir", dataDir: resolveDataDir(env, cwd) };
}

/**
 * Reads the standalone configuration from an environment record (only this file reads env). A
 * selected AI provider that is not configured fails here, naming the missing variable.
 */
export function loadStandaloneConfig(env: Env, cwd = process.cwd()): StandaloneConfig {
  const c = parseEnv(schema, env);
  const provider = loadProviderConfig(env);
  return {
    dataDir: resolveDataDir(env, cwd),
    dataDirChosen: Boolean(env.CHAOS_CORE_DATA_DIR),
    databaseUrl: c.DATABASE_URL,
    pgPoolMax: c.CHAOS_CORE_PG_POOL_MAX,
    policySnapshots: c.CHAOS_CORE_POLICY_SNAPSHOTS === "on",
    redisUrl: c.REDIS_URL,
    redisPrefix: c.CHAOS_CORE_REDIS_PREFIX,
    logLevel: c.LOG_LEVEL,
    provider,
    ledgerKeysFile: c.CHAOS_CORE_LEDGER_KEYS_FILE ? resolve(cwd, c.CHAOS_CORE_LEDGER_KEYS_FILE) : undefined,
    ledgerPolicyFile: c.CHAOS_CORE_LEDGER_POLICY_FILE ? resolve(cwd, c.CHAOS_CORE_LEDGER_POLICY_FILE) : undefined,
    ledgerOrigin: c.CHAOS_CORE_LEDGER_ORIGIN,
    webhooks: webhookConfigOf(c),
    stdioAttachSeconds: c.CHAOS_CORE_STDIO_ATTACH_SECONDS,
  };
}

/**
 * Where the operator's upstreams are declared and pinned, and where they run (docs/federation.md §3,
 * §10), and `CHAOS_CORE_HTTP_ALLOWED_ADDRESSES`: internal ranges a tenant's upstream (and
 * `http.request`) may reach; none by default.
 */
export type UpstreamsConfig = CognitionUpstreamsConfig & { readonly allowedAddresses: readonly string[] };

/** The operator's allowed ranges; a malformed entry fails as a bad variable does. */
function allowedAddressesOf(env: Env): string[] {
  try {
    return parseAllowedAddresses(env.CHAOS_CORE_HTTP_ALLOWED_ADDRESSES);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
}

/**
 * Reads {@link UpstreamsConfig} from an environment record (the command line's `--upstreams`
 * already in it): the standalone's declarations default to `<dataDir>/upstreams.json`, its stdio
 * upstreams run in `<dataDir>/upstreams/`.
 */
export function loadUpstreamsConfig(env: Env, cwd = process.cwd()): UpstreamsConfig {
  const dataDir = resolveDataDir(env, cwd);
  const upstreams = upstreamsConfigOf(env, { file: join(dataDir, "upstreams.json"), workDir: join(dataDir, "upstreams"), cwd })!;
  return { ...upstreams, allowedAddresses: allowedAddressesOf(env) };
}
