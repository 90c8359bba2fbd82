import { z } from "zod";
import { defaultLockFile } from "@chaos-core/contracts";
import { envVars, isLoopbackHost, parseEnv, parseVerifierKey, type Env, type LOG_LEVELS } from "@chaos-core/kit";
import { ALLOWED_OAUTH_ALGORITHMS, DEFAULT_CLOCK_SKEW_SECONDS, DEFAULT_OAUTH_ALGORITHMS, DEFAULT_TENANT_CLAIM, type OAuthOptions } from "./auth/oauth.js";
import { DEFAULT_INTROSPECTION_CACHE_SECONDS } from "./auth/introspection.js";
import { DEFAULT_REQUEST_STATE_TTL_SECONDS, MAX_REQUEST_STATE_TTL_SECONDS } from "./mrtr/sealed-state.js";

/** The largest request body the edge ever accepts; CHAOS_CORE_MAX_BODY_BYTES may only lower it. */
export const MAX_BODY_BYTES = 4 * 1024 * 1024;

/**
 * Most live MCP sessions one API key's tenant and principal may hold when
 * CHAOS_CORE_MAX_SESSIONS_PER_KEY is not set. An idle session costs a replica about 100 KiB, so
 * this bounds what one key can pin at about 10 MiB, far above what a client needs.
 */
export const DEFAULT_MAX_SESSIONS_PER_KEY = 100;

/**
 * How deep objects and arrays may nest in what a client sends: in a tool call's `arguments`
 * (the arguments object is level 1), or in any other message (the message is level 1). Checked
 * without recursion before anything recursive (zod, hashing, storage) reads the value.
 */
export const MAX_JSON_DEPTH = 64;

/**
 * How many values (object members and array items, at any depth) one tool call's `arguments` may
 * hold. A 4 MiB body can carry two million; zod, the SDK and hashing each walk them all, so a
 * call that size would hold the process (every tenant's calls) for seconds.
 */
export const MAX_ARGUMENT_VALUES = 100_000;

// Kit's, since the ledger checks webhook URLs with it too; still exported here for the edge's callers.
export { isLoopbackHost };

/**
 * How long a tool call that asked its client's user to open the approval console waits for a
 * person's answer there (`CHAOS_CORE_APPROVAL_WAIT_SECONDS`), by default and at most.
 */
export const DEFAULT_APPROVAL_WAIT_SECONDS = 300;
export const MAX_APPROVAL_WAIT_SECONDS = 3600;

const list = z.string().transform((s) =>
  s
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean),
);

const originList = list.pipe(
  z.array(
    z.string().refine((o) => {
      try {
        return new URL(o).origin === o;
      } catch {
        return false;
      }
    }, "must be a list of origins such as https://app.example.com (scheme, host and optional port, no path)"),
  ),
);

/** Verifier keys (`NAME+HASH+BASE64`), each checked now so a bad one names its place in the list. */
const verifierKeyList = list.superRefine((keys, ctx) => {
  keys.forEach((key, i) => {
    try {
      parseVerifierKey(key);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: `key ${i + 1} of the list: ${err instanceof Error ? err.message : String(err)}` });
    }
  });
});

/**
 * An OAuth URL (issuer, resource, JWKS, introspection endpoint): https, or http to a loopback
 * host only (a local test issuer); no credentials or fragment. Kept as given: an issuer is
 * compared to `iss` character by character.
 */
const oauthUrl = (what: string) =>
  z.string().superRefine((s, ctx) => {
    let url: URL;
    try {
      url = new URL(s);
    } catch {
      return void ctx.addIssue({ code: "custom", message: `must be the absolute URL of ${what}` });
    }
    if (url.protocol !== "https:" && !(url.protocol === "http:" && isLoopbackHost(url.hostname))) {
      ctx.addIssue({ code: "custom", message: `must be an https URL (http only to a loopback host), got ${s}` });
    } else if (url.username || url.password || url.hash || s.includes("#")) {
      ctx.addIssue({ code: "custom", message: "must not carry a user name, password or fragment" });
    }
  });

const oauthAlgorithms = list.superRefine((algs, ctx) => {
  if (algs.length === 0) ctx.addIssue({ code: "custom", message: "lists no algorithm" });
  for (const alg of algs) {
    if (!(ALLOWED_OAUTH_ALGORITHMS as readonly string[]).includes(alg)) {
      const why = /^none$/i.test(alg) ? "an unsigned token proves nothing" : /^HS/i.test(alg) ? "HMAC keys are shared secrets, not an issuer's signature" : "unknown algorithm";
      ctx.addIssue({ code: "custom", message: `${alg} is not accepted (${why}); choose from ${ALLOWED_OAUTH_ALGORITHMS.join(", ")}` });
    }
  }
});

const seconds = (max: number, fallback: number) =>
  z.coerce
    .number({ error: "must be a whole number of seconds" })
    .int("must be a whole number of seconds")
    .min(0, "must not be negative")
    .max(max, `must be at most ${max} seconds`)
    .default(fallback);

/** OAuth variables without a default: set without the issuer they would silently do nothing. */
const OAUTH_DEPENDENT_VARIABLES = [
  "CHAOS_CORE_OAUTH_RESOURCE",
  "CHAOS_CORE_OAUTH_JWKS_URL",
  "CHAOS_CORE_OAUTH_ALGORITHMS",
  "CHAOS_CORE_OAUTH_INTROSPECTION_URL",
  "CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_ID",
  "CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_SECRET_FILE",
  "CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID",
  "CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE",
] as const;

/** The console's client at the issuer: both or neither. */
const CONSOLE_OAUTH_VARIABLES = ["CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID", "CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE"] as const;

const INTROSPECTION_VARIABLES = [
  "CHAOS_CORE_OAUTH_INTROSPECTION_URL",
  "CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_ID",
  "CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_SECRET_FILE",
] as const;

const EdgeEnvSchema = z
  .object({
    HOST: envVars.host(),
    PORT: envVars.port(3000),
    REDIS_URL: envVars.redisUrl(),
    POLICY_ADDR: envVars.optionalServiceAddr(),
    MEMORY_ADDR: envVars.optionalServiceAddr(),
    COGNITION_ADDR: envVars.optionalServiceAddr(),
    COUNCIL_ADDR: envVars.optionalServiceAddr(),
    LEDGER_ADDR: envVars.optionalServiceAddr(),
    CHAOS_CORE_CONTEXT_KEY: envVars.contextKey().optional(),
    CHAOS_CORE_CONTEXT_KEY_ACCEPTED: envVars.contextKeyAccepted(),
    MCP_ALLOWED_HOSTS: list.optional(),
    MCP_ALLOWED_ORIGINS: originList.optional(),
    CHAOS_CORE_MAX_BODY_BYTES: z.coerce.number().int().min(1024).max(MAX_BODY_BYTES).default(MAX_BODY_BYTES),
    CHAOS_CORE_API_KEYS_FILE: z.string().min(1).optional(),
    CHAOS_CORE_OAUTH_ISSUER: oauthUrl("the authorization server's issuer (the iss of its tokens)").optional(),
    CHAOS_CORE_OAUTH_RESOURCE: oauthUrl("this server's MCP endpoint as clients reach it, e.g. https://mcp.example.com/mcp").optional(),
    CHAOS_CORE_OAUTH_JWKS_URL: oauthUrl("the issuer's JSON Web Key Set").optional(),
    CHAOS_CORE_OAUTH_ALGORITHMS: oauthAlgorithms.optional(),
    CHAOS_CORE_OAUTH_TENANT_CLAIM: z.string().min(1).max(256).default(DEFAULT_TENANT_CLAIM),
    CHAOS_CORE_OAUTH_ACCEPT_JWT_TYP: z.enum(["true", "false"], { error: 'must be "true" or "false"' }).default("false"),
    CHAOS_CORE_OAUTH_CLOCK_SKEW_SECONDS: seconds(300, DEFAULT_CLOCK_SKEW_SECONDS),
    CHAOS_CORE_OAUTH_INTROSPECTION_URL: oauthUrl("the RFC 7662 introspection endpoint").optional(),
    CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_ID: z.string().min(1).optional(),
    CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_SECRET_FILE: z.string().min(1, "must name the file holding the client secret").optional(),
    CHAOS_CORE_OAUTH_INTROSPECTION_CACHE_SECONDS: seconds(300, DEFAULT_INTROSPECTION_CACHE_SECONDS),
    CHAOS_CORE_SESSION_TTL_SECONDS: z.coerce.number().int().min(60).max(7 * 24 * 3600).default(3600),
    CHAOS_CORE_RATE_LIMITS_FILE: z.string().min(1, "must name the rate limits file").optional(),
    CHAOS_CORE_MAX_SESSIONS_PER_KEY: z.coerce.number().int().min(1).max(100_000).default(DEFAULT_MAX_SESSIONS_PER_KEY),
    CHAOS_CORE_CONSOLE: z.enum(["on", "off"], { error: 'must be "on" or "off"' }).default("on"),
    CHAOS_CORE_PUBLIC_URL: envVars.publicUrl(),
    CHAOS_CORE_CONSOLE_PORT: envVars.port(0),
    CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID: z.string().min(1).max(256).optional(),
    CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE: z.string().min(1, "must name the file holding the client secret").optional(),
    CHAOS_CORE_APPROVAL_WAIT_SECONDS: z.coerce
      .number({ error: "must be a whole number of seconds" })
      .int("must be a whole number of seconds")
      .min(1, "must be at least 1 second")
      .max(MAX_APPROVAL_WAIT_SECONDS, `must be at most ${MAX_APPROVAL_WAIT_SECONDS} seconds (an hour)`)
      .default(DEFAULT_APPROVAL_WAIT_SECONDS),
    CHAOS_CORE_MRTR_KEYS_FILE: z.string().min(1, "must name the keyring file").optional(),
    CHAOS_CORE_MRTR_TTL_SECONDS: z.coerce
      .number({ error: "must be a whole number of seconds" })
      .int("must be a whole number of seconds")
      .min(1, "must be at least 1 second")
      .max(MAX_REQUEST_STATE_TTL_SECONDS, `must be at most ${MAX_REQUEST_STATE_TTL_SECONDS} seconds (an hour)`)
      .default(DEFAULT_REQUEST_STATE_TTL_SECONDS),
    CHAOS_CORE_CONTRACT_KEYS: verifierKeyList.optional(),
    CHAOS_CORE_CONTRACT_LOCK_FILE: z.string().min(1, "must name the lockfile").optional(),
    LOG_LEVEL: envVars.logLevel(),
  })
  .superRefine((env, ctx) => {
    // A non-loopback HOST without a keys file or an issuer is not refused: the HTTP transport then
    // requires a credential on every request and only the tenant registry's keys are accepted
    // (startHttpTransport, "required"); nobody reaches tenant default unauthenticated.
    const consoleOAuth = CONSOLE_OAUTH_VARIABLES.filter((name) => env[name] !== undefined);
    if (consoleOAuth.length > 0 && env.CHAOS_CORE_CONSOLE === "off") {
      for (const name of consoleOAuth) {
        ctx.addIssue({ code: "custom", path: [name], message: "has no effect with CHAOS_CORE_CONSOLE=off: it signs people in to the approval console; unset it, or turn the console on" });
      }
    }
    if (!env.CHAOS_CORE_OAUTH_ISSUER) {
      for (const name of OAUTH_DEPENDENT_VARIABLES) {
        if (env[name] !== undefined) {
          ctx.addIssue({ code: "custom", path: [name], message: "has no effect without CHAOS_CORE_OAUTH_ISSUER: set the issuer too, or unset it" });
        }
      }
      return;
    }
    if (!env.CHAOS_CORE_OAUTH_RESOURCE) {
      ctx.addIssue({
        code: "custom",
        path: ["CHAOS_CORE_OAUTH_RESOURCE"],
        message: "is required with CHAOS_CORE_OAUTH_ISSUER: this server's canonical resource URI (the audience of its tokens), e.g. https://mcp.example.com/mcp",
      });
    }
    if (consoleOAuth.length > 0) {
      for (const name of CONSOLE_OAUTH_VARIABLES) {
        if (env[name] === undefined) ctx.addIssue({ code: "custom", path: [name], message: `is required with ${consoleOAuth[0]}: the console signs in at the issuer as a confidential client, with its client id and secret` });
      }
    }
    const introspection = INTROSPECTION_VARIABLES.filter((name) => env[name] !== undefined);
    if (introspection.length > 0) {
      for (const name of INTROSPECTION_VARIABLES) {
        if (env[name] === undefined) ctx.addIssue({ code: "custom", path: [name], message: `is required with ${introspection[0]}: introspection needs its endpoint and this server's client id and secret` });
      }
    }
  });

/**
 * What the environment sets of the HTTP transport's options: `startHttpTransport` takes them as
 * they are, beside what a composition root adds (the tenant registry, the console's session store).
 * Declared here, not taken from the transport, because config sits below every layer that reads it.
 */
export interface HttpSettings {
  host: string;
  port: number;
  maxBodyBytes: number;
  maxSessionsPerKey: number;
  readonly allowedHosts?: readonly string[];
  readonly allowedOrigins?: readonly string[];
  readonly apiKeysFile?: string;
  readonly oauth?: OAuthOptions;
  /** The console is on (absent: off): where people reach it, and its client at the OAuth issuer. */
  readonly console?: { readonly publicUrl?: string; readonly oauthClient?: { readonly clientId: string; readonly clientSecretFile: string } };
}

/** The edge's configuration, from environment variables only. */
export interface EdgeConfig {
  /** Options for `startHttpTransport`. */
  readonly http: HttpSettings;
  readonly redisUrl?: string;
  readonly policyAddr?: string;
  readonly memoryAddr?: string;
  readonly cognitionAddr?: string;
  readonly councilAddr?: string;
  /**
   * The ledger service. Optional even for the edge alone until every deployment runs one:
   * without it the governance and finance-reference tools fail closed (`unavailable`).
   */
  readonly ledgerAddr?: string;
  /**
   * The OAuth resource server (`CHAOS_CORE_OAUTH_*`, docs/auth.md), also in `http.oauth`; absent
   * without CHAOS_CORE_OAUTH_ISSUER.
   */
  readonly oauth?: OAuthOptions;
  /** The HMAC key that signs the call context for gRPC services. Never logged. */
  readonly contextKey?: string;
  /** `CHAOS_CORE_RATE_LIMITS_FILE`: the tenants' rate limits (docs/operations.md "Rate limits"); unset: none. */
  readonly rateLimitsFile?: string;
  readonly sessionTtlSeconds: number;
  readonly logLevel: (typeof LOG_LEVELS)[number];
  /**
   * `CHAOS_CORE_PUBLIC_URL` without a trailing slash: where people reach this server from
   * outside. Its host and origin are in `http.allowedHosts` / `http.allowedOrigins` already.
   */
  readonly publicUrl?: string;
  /**
   * The approval console (`CHAOS_CORE_CONSOLE`, on by default); absent when off. Served at
   * `/approvals` on the MCP listener (`http.console`), and by `chaos-core stdio` on a loopback
   * listener of its own at `listenerPort` (`CHAOS_CORE_CONSOLE_PORT`; 0 picks a free port).
   * With the OAuth issuer and `CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID` / `…_CLIENT_SECRET_FILE`,
   * `http.console.oauthClient` lets people sign in through the issuer (on the MCP listener only:
   * stdio's listener has no OAuth).
   */
  readonly console?: { readonly publicUrl?: string; readonly listenerPort: number };
  /**
   * `CHAOS_CORE_APPROVAL_WAIT_SECONDS` (1..3600, default 300): how long a call that sent its
   * client's user to the console (URL-mode elicitation) waits for the answer, never past the
   * approval's expiry. Composition roots put it in `EdgeDeps.approvalWaitSeconds`.
   */
  readonly approvalWaitSeconds: number;
  /**
   * `CHAOS_CORE_MRTR_KEYS_FILE`: the keyring that seals multi-round-trip `requestState`
   * (docs/protocol.md §7). Required by the edge alone; standalone generates
   * `<data dir>/mrtr-keyring.json` when unset. There is no default key.
   */
  readonly mrtrKeysFile?: string;
  /** `CHAOS_CORE_MRTR_TTL_SECONDS` (1..3600, default 600): how long a sealed state opens. */
  readonly mrtrTtlSeconds: number;
  /**
   * The start-time contract check (docs/contracts.md §7): `lockFile` is
   * `CHAOS_CORE_CONTRACT_LOCK_FILE` (by default `chaoscore.lock` at the root of the installed app:
   * contracts' `defaultLockFile`), its signed note
   * `<lockFile>.sig`; `verifierKeys` is `CHAOS_CORE_CONTRACT_KEYS` (public keys only). Without
   * keys the served definitions are still checked against the lock, but nothing is attested.
   */
  readonly contracts: { readonly lockFile: string; readonly verifierKeys: readonly string[] };
}

/** The configuration of the edge alone, which reaches its services over gRPC. */
export interface EdgeAloneConfig extends EdgeConfig {
  readonly policyAddr: string;
  readonly memoryAddr: string;
  readonly cognitionAddr: string;
  readonly councilAddr: string;
  readonly contextKey: string;
  /** `CHAOS_CORE_CONTEXT_KEY_ACCEPTED`: a second key whose signatures are accepted while the key is rotated. */
  readonly contextKeyAccepted?: string;
  readonly mrtrKeysFile: string;
  /**
   * `CHAOS_CORE_REDIS_PREFIX` (default `chaoscore:`), as the other services read it: the prefix of
   * the edge's Redis keys and channels — the tenant generations and change announcements the
   * policy service publishes under its own must be read under the same. (The standalone keys
   * everything under `chaoscore:`.)
   */
  readonly redisPrefix: string;
}

/** A Redis key prefix, as every service's `CHAOS_CORE_REDIS_PREFIX` accepts it. */
const REDIS_PREFIX_RE = /^[\x21-\x7e]{1,64}$/;

/**
 * Reads the edge's configuration from an environment record (tests pass their own), as the
 * standalone composer needs it: services are wired in process, so none of their addresses is
 * required. Fails with a {@link ConfigError} naming every bad variable.
 */
export function loadEdgeConfig(env: Env = process.env): EdgeConfig {
  return toConfig(parseEnv(EdgeEnvSchema, env));
}

/**
 * Reads the configuration of the edge alone (`main.ts`): POLICY_ADDR, MEMORY_ADDR,
 * COGNITION_ADDR, COUNCIL_ADDR, CHAOS_CORE_CONTEXT_KEY and CHAOS_CORE_MRTR_KEYS_FILE are
 * required as well.
 */
export function loadEdgeAloneConfig(env: Env = process.env): EdgeAloneConfig {
  const schema = EdgeEnvSchema.superRefine((e, ctx) => {
    for (const name of ["POLICY_ADDR", "MEMORY_ADDR", "COGNITION_ADDR", "COUNCIL_ADDR", "CHAOS_CORE_CONTEXT_KEY"] as const) {
      if (!e[name]) ctx.addIssue({ code: "custom", path: [name], message: "required when the edge runs alone" });
    }
    if (!e.CHAOS_CORE_MRTR_KEYS_FILE) {
      ctx.addIssue({
        code: "custom",
        path: ["CHAOS_CORE_MRTR_KEYS_FILE"],
        message:
          "required when the edge runs alone: the keyring that seals multi-round-trip requestState (there is no default key; " +
          "every edge replica mounts the same file)",
      });
    }
    const prefix = env.CHAOS_CORE_REDIS_PREFIX;
    if (prefix && !REDIS_PREFIX_RE.test(prefix)) ctx.addIssue({ code: "custom", path: ["CHAOS_CORE_REDIS_PREFIX"], message: "must be 1 to 64 visible ASCII characters" });
    // The edge serves no gRPC (its probes are HTTP /readyz and /healthz): a health port here would open nothing.
    if (env.CHAOS_CORE_GRPC_HEALTH_PORT !== undefined) ctx.addIssue({ code: "custom", path: ["CHAOS_CORE_GRPC_HEALTH_PORT"], message: "is for the gRPC services only: the edge runs no gRPC server (its probes are HTTP /readyz and /healthz); unset it for the edge" });
  });
  const e = parseEnv(schema, env);
  return {
    ...toConfig(e),
    policyAddr: e.POLICY_ADDR!,
    memoryAddr: e.MEMORY_ADDR!,
    cognitionAddr: e.COGNITION_ADDR!,
    councilAddr: e.COUNCIL_ADDR!,
    contextKey: e.CHAOS_CORE_CONTEXT_KEY!,
    ...(e.CHAOS_CORE_CONTEXT_KEY_ACCEPTED ? { contextKeyAccepted: e.CHAOS_CORE_CONTEXT_KEY_ACCEPTED } : {}),
    mrtrKeysFile: e.CHAOS_CORE_MRTR_KEYS_FILE!,
    redisPrefix: env.CHAOS_CORE_REDIS_PREFIX || "chaoscore:",
  };
}

/** The Host names a loopback bind accepts without a list (the SDK's `localhostHostValidation`). */
const LOOPBACK_HOST_NAMES = ["localhost", "127.0.0.1", "[::1]"];

/**
 * The Host and Origin lists with CHAOS_CORE_PUBLIC_URL's host and origin added. A loopback bind
 * without MCP_ALLOWED_HOSTS checks the loopback names: the public host joins them. A non-loopback
 * bind without a list checks no Host (API keys guard it): there is no list to add to.
 */
function allowLists(e: z.output<typeof EdgeEnvSchema>): { allowedHosts?: string[]; allowedOrigins?: string[] } {
  let hosts = e.MCP_ALLOWED_HOSTS?.length ? [...e.MCP_ALLOWED_HOSTS] : undefined;
  let origins = e.MCP_ALLOWED_ORIGINS?.length ? [...e.MCP_ALLOWED_ORIGINS] : undefined;
  if (e.CHAOS_CORE_PUBLIC_URL) {
    const url = new URL(e.CHAOS_CORE_PUBLIC_URL);
    if (!hosts && isLoopbackHost(e.HOST)) hosts = [...LOOPBACK_HOST_NAMES];
    if (hosts && !hosts.includes(url.hostname)) hosts.push(url.hostname);
    origins = origins ?? [];
    if (!origins.includes(url.origin)) origins.push(url.origin);
  }
  return { ...(hosts ? { allowedHosts: hosts } : {}), ...(origins ? { allowedOrigins: origins } : {}) };
}

/** The OAuth options of the environment, when an issuer is set (the schema checked the rest). */
function oauthOf(e: z.output<typeof EdgeEnvSchema>): OAuthOptions | undefined {
  if (!e.CHAOS_CORE_OAUTH_ISSUER || !e.CHAOS_CORE_OAUTH_RESOURCE) return undefined;
  const secretFile = e.CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_SECRET_FILE;
  return {
    issuer: e.CHAOS_CORE_OAUTH_ISSUER,
    resource: e.CHAOS_CORE_OAUTH_RESOURCE,
    ...(e.CHAOS_CORE_OAUTH_JWKS_URL ? { jwksUrl: e.CHAOS_CORE_OAUTH_JWKS_URL } : {}),
    algorithms: e.CHAOS_CORE_OAUTH_ALGORITHMS ?? [...DEFAULT_OAUTH_ALGORITHMS],
    tenantClaim: e.CHAOS_CORE_OAUTH_TENANT_CLAIM,
    acceptJwtTyp: e.CHAOS_CORE_OAUTH_ACCEPT_JWT_TYP === "true",
    clockSkewSeconds: e.CHAOS_CORE_OAUTH_CLOCK_SKEW_SECONDS,
    ...(e.CHAOS_CORE_OAUTH_INTROSPECTION_URL && e.CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_ID && secretFile
      ? {
          introspection: {
            url: e.CHAOS_CORE_OAUTH_INTROSPECTION_URL,
            clientId: e.CHAOS_CORE_OAUTH_INTROSPECTION_CLIENT_ID,
            clientSecretFile: secretFile,
            cacheSeconds: e.CHAOS_CORE_OAUTH_INTROSPECTION_CACHE_SECONDS,
          },
        }
      : {}),
  };
}

function toConfig(e: z.output<typeof EdgeEnvSchema>): EdgeConfig {
  const oauth = oauthOf(e);
  const publicUrl = e.CHAOS_CORE_PUBLIC_URL ? { publicUrl: e.CHAOS_CORE_PUBLIC_URL } : {};
  const consoleOn = e.CHAOS_CORE_CONSOLE === "on";
  // The console's client at the issuer (the schema checked it comes whole, with the issuer).
  const oauthClient =
    oauth && e.CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID && e.CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE
      ? { oauthClient: { clientId: e.CHAOS_CORE_CONSOLE_OAUTH_CLIENT_ID, clientSecretFile: e.CHAOS_CORE_CONSOLE_OAUTH_CLIENT_SECRET_FILE } }
      : {};
  return {
    http: {
      host: e.HOST,
      port: e.PORT,
      maxBodyBytes: e.CHAOS_CORE_MAX_BODY_BYTES,
      maxSessionsPerKey: e.CHAOS_CORE_MAX_SESSIONS_PER_KEY,
      ...allowLists(e),
      ...(e.CHAOS_CORE_API_KEYS_FILE ? { apiKeysFile: e.CHAOS_CORE_API_KEYS_FILE } : {}),
      ...(oauth ? { oauth } : {}),
      ...(consoleOn ? { console: { ...publicUrl, ...oauthClient } } : {}),
    },
    ...publicUrl,
    ...(oauth ? { oauth } : {}),
    approvalWaitSeconds: e.CHAOS_CORE_APPROVAL_WAIT_SECONDS,
    ...(e.CHAOS_CORE_MRTR_KEYS_FILE ? { mrtrKeysFile: e.CHAOS_CORE_MRTR_KEYS_FILE } : {}),
    mrtrTtlSeconds: e.CHAOS_CORE_MRTR_TTL_SECONDS,
    contracts: { lockFile: e.CHAOS_CORE_CONTRACT_LOCK_FILE ?? defaultLockFile(), verifierKeys: e.CHAOS_CORE_CONTRACT_KEYS ?? [] },
    ...(consoleOn ? { console: { ...publicUrl, listenerPort: e.CHAOS_CORE_CONSOLE_PORT } } : {}),
    ...(e.REDIS_URL ? { redisUrl: e.REDIS_URL } : {}),
    ...(e.POLICY_ADDR ? { policyAddr: e.POLICY_ADDR } : {}),
    ...(e.MEMORY_ADDR ? { memoryAddr: e.MEMORY_ADDR } : {}),
    ...(e.COGNITION_ADDR ? { cognitionAddr: e.COGNITION_ADDR } : {}),
    ...(e.COUNCIL_ADDR ? { councilAddr: e.COUNCIL_ADDR } : {}),
    ...(e.LEDGER_ADDR ? { ledgerAddr: e.LEDGER_ADDR } : {}),
    ...(e.CHAOS_CORE_CONTEXT_KEY ? { contextKey: e.CHAOS_CORE_CONTEXT_KEY } : {}),
    ...(e.CHAOS_CORE_RATE_LIMITS_FILE ? { rateLimitsFile: e.CHAOS_CORE_RATE_LIMITS_FILE } : {}),
    sessionTtlSeconds: e.CHAOS_CORE_SESSION_TTL_SECONDS,
    logLevel: e.LOG_LEVEL,
  };
}
