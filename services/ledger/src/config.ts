import { envVars, isLoopbackHost, parseEnv, requireStorage, serviceStorage, type ServiceStorage, type Env, type LOG_LEVELS } from "@chaos-core/kit";
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
  /** `CHAOS_CORE_CONTEXT_KEY_ACCEPTED`: a second key whose signatures are accepted while the key is rotated. */
  readonly contextKeyAccepted?: string;
  /** The Ed25519 keyring file (operator configuration); there is no default key. */
  readonly keysFile: string;
  /** The policy service, which says which approval channels may answer a spend or a tool receipt. */
  readonly policyAddr: string;
  /** The operator's spend and tool-approval policies; unset = the reference policies. */
  readonly policyFile?: string;
  /** Prefix of each tenant's checkpoint origin: `<origin>/<tenant>`. */
  readonly origin: string;
  readonly logLevel: (typeof LOG_LEVELS)[number];
  /** Signed approval notifications (docs/approvals.md §6); unset when `CHAOS_CORE_WEBHOOK_URL` is. */
  readonly webhooks?: WebhookConfig;
}

/**
 * Where the ledger sends approval notifications and how (docs/operations.md, "Webhooks"). Holds
 * the signing keys: never log it.
 */
export interface WebhookConfig {
  /** The receiver: https, or http to a loopback host. Its path may itself be a secret (chat webhooks): log only its origin. */
  readonly url: string;
  /** The HMAC keys (decoded `whsec_` secrets); every request carries one signature per key, for rotation. */
  readonly keys: readonly Buffer[];
  /** How long one delivery attempt may take. */
  readonly timeoutMs: number;
  /** The wait before each retry after a failed attempt; its length is the number of retries. */
  readonly retrySeconds: readonly number[];
  /** `CHAOS_CORE_PUBLIC_URL`: links to the approval console in each event; no link when unset. */
  readonly publicUrl?: string;
  /**
   * `CHAOS_CORE_WEBHOOK_CHECKPOINTS=true`: each signed checkpoint is sent too, as a
   * `ledger.checkpoint` event (one per integration batch: many, so only when asked for).
   */
  readonly checkpoints?: boolean;
}

/** Standard Webhooks' retry schedule after the first attempt: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h. */
export const DEFAULT_WEBHOOK_RETRY_SECONDS: readonly number[] = Object.freeze([5, 300, 1800, 7200, 18000, 36000, 36000]);

/** The longest a delivery attempt may take: well inside the 30 s lease a dispatcher holds on a row. */
export const MAX_WEBHOOK_TIMEOUT_MS = 20_000;

/** The shortest secret Standard Webhooks allows, in bytes. */
const MIN_SECRET_BYTES = 24;

const webhookUrl = z.string().superRefine((v, ctx) => {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    ctx.addIssue({ code: "custom", message: "must be a URL (https://hooks.example.com/chaos-core)" });
    return;
  }
  if (u.username || u.password) {
    ctx.addIssue({ code: "custom", message: "must not hold credentials: the signature authenticates each request" });
  } else if (u.protocol === "http:" && !isLoopbackHost(u.hostname)) {
    ctx.addIssue({ code: "custom", message: "must be https:// (http:// only to a loopback host such as 127.0.0.1)" });
  } else if (u.protocol !== "https:" && u.protocol !== "http:") {
    ctx.addIssue({ code: "custom", message: "must be an https:// URL (http:// only to a loopback host)" });
  }
});

/** `whsec_<base64>` secrets, comma separated; never echoed in an error. */
const webhookSecrets = z.string().transform((v, ctx) => {
  const parts = v.split(",").map((p) => p.trim());
  const keys: Buffer[] = [];
  parts.forEach((part, i) => {
    const b64 = part.startsWith("whsec_") ? part.slice("whsec_".length) : undefined;
    const key = b64 !== undefined && /^[A-Za-z0-9+/]+={0,2}$/.test(b64) ? Buffer.from(b64, "base64") : undefined;
    if (!key || key.length < MIN_SECRET_BYTES) {
      const which = parts.length > 1 ? `secret ${i + 1} of ${parts.length}` : "the secret";
      ctx.addIssue({
        code: "custom",
        message: `${which} must be whsec_ followed by the base64 of at least ${MIN_SECRET_BYTES} random bytes (e.g. whsec_$(openssl rand -base64 32))`,
      });
    } else {
      keys.push(key);
    }
  });
  return keys;
});

const retrySeconds = z.string().transform((v, ctx) => {
  const parts = v.split(",").map((p) => p.trim());
  const out = parts.map(Number);
  if (parts.length > 20 || out.some((n, i) => parts[i] === "" || !Number.isFinite(n) || n <= 0 || n > 7 * 86400)) {
    ctx.addIssue({ code: "custom", message: "must be 1 to 20 comma-separated waits in seconds, each above 0 and at most 604800 (e.g. 5,300,1800)" });
  }
  return out;
});

/**
 * The webhook variables, shared by the ledger run alone and standalone (which spreads them into
 * its own schema and refines with {@link requireWebhookSecret}).
 */
export const WEBHOOK_ENV = {
  CHAOS_CORE_WEBHOOK_URL: webhookUrl.optional(),
  CHAOS_CORE_WEBHOOK_SECRET: webhookSecrets.optional(),
  CHAOS_CORE_WEBHOOK_TIMEOUT_MS: z.coerce
    .number({ error: "must be a number of milliseconds" })
    .int("must be a whole number of milliseconds")
    .min(100, `must be from 100 to ${MAX_WEBHOOK_TIMEOUT_MS}`)
    .max(MAX_WEBHOOK_TIMEOUT_MS, `must be from 100 to ${MAX_WEBHOOK_TIMEOUT_MS}`)
    .default(5000),
  CHAOS_CORE_WEBHOOK_RETRY_SECONDS: retrySeconds.optional(),
  CHAOS_CORE_WEBHOOK_CHECKPOINTS: z.enum(["true", "false"], { error: 'must be "true" or "false"' }).default("false"),
  CHAOS_CORE_PUBLIC_URL: envVars.publicUrl(),
};

type WebhookEnv = { CHAOS_CORE_WEBHOOK_URL?: string | undefined; CHAOS_CORE_WEBHOOK_SECRET?: Buffer[] | undefined };

/** The secret is required with the URL, and a secret without a URL is a mistake, not a no-op. */
export function requireWebhookSecret(env: WebhookEnv, ctx: z.RefinementCtx): void {
  if (env.CHAOS_CORE_WEBHOOK_URL !== undefined && env.CHAOS_CORE_WEBHOOK_SECRET === undefined) {
    ctx.addIssue({ code: "custom", path: ["CHAOS_CORE_WEBHOOK_SECRET"], message: "is required with CHAOS_CORE_WEBHOOK_URL: the whsec_ secret that signs every notification (there is no default)" });
  }
  if (env.CHAOS_CORE_WEBHOOK_URL === undefined && env.CHAOS_CORE_WEBHOOK_SECRET !== undefined) {
    ctx.addIssue({ code: "custom", path: ["CHAOS_CORE_WEBHOOK_URL"], message: "is required with CHAOS_CORE_WEBHOOK_SECRET: the receiver of the notifications" });
  }
}

/** The webhook configuration from parsed {@link WEBHOOK_ENV} values; undefined without a URL. */
export function webhookConfigOf(e: {
  CHAOS_CORE_WEBHOOK_URL?: string | undefined;
  CHAOS_CORE_WEBHOOK_SECRET?: Buffer[] | undefined;
  CHAOS_CORE_WEBHOOK_TIMEOUT_MS: number;
  CHAOS_CORE_WEBHOOK_RETRY_SECONDS?: number[] | undefined;
  CHAOS_CORE_WEBHOOK_CHECKPOINTS?: "true" | "false" | undefined;
  CHAOS_CORE_PUBLIC_URL?: string | undefined;
}): WebhookConfig | undefined {
  if (e.CHAOS_CORE_WEBHOOK_URL === undefined || e.CHAOS_CORE_WEBHOOK_SECRET === undefined) return undefined;
  return {
    url: e.CHAOS_CORE_WEBHOOK_URL,
    keys: e.CHAOS_CORE_WEBHOOK_SECRET,
    timeoutMs: e.CHAOS_CORE_WEBHOOK_TIMEOUT_MS,
    retrySeconds: e.CHAOS_CORE_WEBHOOK_RETRY_SECONDS ?? DEFAULT_WEBHOOK_RETRY_SECONDS,
    ...(e.CHAOS_CORE_PUBLIC_URL !== undefined ? { publicUrl: e.CHAOS_CORE_PUBLIC_URL } : {}),
    ...(e.CHAOS_CORE_WEBHOOK_CHECKPOINTS === "true" ? { checkpoints: true } : {}),
  };
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
    CHAOS_CORE_CONTEXT_KEY_ACCEPTED: envVars.contextKeyAccepted(),
    POLICY_ADDR: envVars.serviceAddr("the ledger", "policy"),
    CHAOS_CORE_LEDGER_KEYS_FILE: z.string({
      error: "is required: the Ed25519 keyring file that signs receipts and checkpoints (there is no default key)",
    }),
    CHAOS_CORE_LEDGER_POLICY_FILE: z.string().optional(),
    CHAOS_CORE_LEDGER_ORIGIN: originVar(),
    LOG_LEVEL: envVars.logLevel(),
    ...WEBHOOK_ENV,
  })
  .superRefine(requireStorage("embedded PGlite"))
  .superRefine(requireWebhookSecret);

/** A checkpoint origin: a schema-less URL-like name without spaces or `+` (C2SP signed notes). */
export function originVar() {
  return z
    .string()
    .regex(/^[a-z0-9][a-z0-9.\-/]{0,120}$/i, "must be letters, digits, '.', '-' and '/' (e.g. chaos-core.example.com/ledger)")
    .default("chaos-core/ledger");
}

/**
 * Reads the ledger service's configuration (`process.env` unless given). `DATABASE_URL` wins
 * over `CHAOS_CORE_DATA_DIR`; `CHAOS_CORE_LEDGER_KEYS_FILE` and `POLICY_ADDR` are required, and
 * `CHAOS_CORE_WEBHOOK_SECRET` with `CHAOS_CORE_WEBHOOK_URL`. Throws `ConfigError` naming every bad
 * variable (never a secret's value).
 */
export function loadLedgerConfig(env: Env = process.env): LedgerConfig {
  const e = parseEnv(schema, env);
  const webhooks = webhookConfigOf(e);
  return {
    host: e.HOST,
    port: e.PORT,
    storage: serviceStorage(e),
    nonces: e.REDIS_URL ? { kind: "redis", url: e.REDIS_URL, prefix: e.CHAOS_CORE_REDIS_PREFIX } : { kind: "memory" },
    contextKey: e.CHAOS_CORE_CONTEXT_KEY,
    ...(e.CHAOS_CORE_CONTEXT_KEY_ACCEPTED ? { contextKeyAccepted: e.CHAOS_CORE_CONTEXT_KEY_ACCEPTED } : {}),
    keysFile: e.CHAOS_CORE_LEDGER_KEYS_FILE,
    policyAddr: e.POLICY_ADDR,
    ...(e.CHAOS_CORE_LEDGER_POLICY_FILE ? { policyFile: e.CHAOS_CORE_LEDGER_POLICY_FILE } : {}),
    origin: e.CHAOS_CORE_LEDGER_ORIGIN,
    logLevel: e.LOG_LEVEL,
    ...(webhooks ? { webhooks } : {}),
  };
}
