import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { z } from "zod";
import { parseEnv, UPSTREAM_SECRET_ENV_PREFIX, type Env, type SecretSources } from "@chaos-core/kit";

/** Where the operator's upstreams are read from, and what they may use (docs/federation.md §10). */
export interface UpstreamsConfig {
  /** The declarations: `CHAOS_CORE_UPSTREAMS_FILE` (the standalone's default: `<dataDir>/upstreams.json`). */
  readonly file: string;
  /** Whether {@link file} was named (a missing named file is an error; the standalone's default may be absent). */
  readonly fileChosen: boolean;
  /** The pins: `CHAOS_CORE_UPSTREAMS_LOCK`, else `upstreams.lock` beside the declarations. */
  readonly lock: string;
  /** The secrets references may name: only `CHAOS_CORE_UPSTREAM_SECRET_*` variables are kept. */
  readonly secrets: SecretSources;
  /** Where stdio upstreams run, a folder each. */
  readonly workDir: string;
  /** The largest upstream result served (`CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES`); the pool's default (1 MiB) when unset. */
  readonly maxResultBytes?: number;
  /** The longest an upstream's OAuth token is used (`CHAOS_CORE_UPSTREAM_TOKEN_MAX_SECONDS`); the pool's default (300) when unset. */
  readonly tokenMaxSeconds?: number;
}

const schema = z.object({
  CHAOS_CORE_UPSTREAMS_FILE: z.string().optional(),
  CHAOS_CORE_UPSTREAMS_LOCK: z.string().optional(),
  CHAOS_CORE_UPSTREAM_SECRETS_DIR: z.string().optional(),
  CHAOS_CORE_UPSTREAMS_WORK_DIR: z.string().optional(),
  CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES: z.coerce
    .number({ error: "must be a number of bytes" })
    .int("must be a whole number of bytes")
    .min(1024, "must be at least 1024")
    .max(256 * 1024 * 1024, "must be at most 268435456 (256 MiB)")
    .optional(),
  CHAOS_CORE_UPSTREAM_TOKEN_MAX_SECONDS: z.coerce
    .number({ error: "must be a number of seconds" })
    .int("must be a whole number of seconds")
    .min(10, "must be at least 10")
    .max(3600, "must be at most 3600")
    .optional(),
});

/**
 * The upstreams configuration from an environment record: the declarations `CHAOS_CORE_UPSTREAMS_FILE`
 * (else `defaults.file`, when the caller has one), their pins `CHAOS_CORE_UPSTREAMS_LOCK` (else beside
 * them), `CHAOS_CORE_UPSTREAM_SECRETS_DIR`, the `CHAOS_CORE_UPSTREAM_SECRET_*` variables, where stdio
 * upstreams run (`CHAOS_CORE_UPSTREAMS_WORK_DIR`, else `defaults.workDir`, else a folder in the
 * system's temporary directory) and `CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES`. Undefined when no file
 * is named and the caller has no default: this process fronts no upstreams. Throws `ConfigError`
 * naming a bad variable.
 */
export function upstreamsConfigOf(env: Env, defaults: { readonly file?: string; readonly workDir?: string; readonly cwd?: string } = {}): UpstreamsConfig | undefined {
  const e = parseEnv(schema, env);
  const cwd = defaults.cwd ?? process.cwd();
  const named = e.CHAOS_CORE_UPSTREAMS_FILE;
  const file = named ? resolve(cwd, named) : defaults.file;
  if (file === undefined) return undefined;
  return {
    file,
    fileChosen: named !== undefined,
    lock: e.CHAOS_CORE_UPSTREAMS_LOCK ? resolve(cwd, e.CHAOS_CORE_UPSTREAMS_LOCK) : join(dirname(file), "upstreams.lock"),
    secrets: upstreamSecretsOf(env, cwd),
    workDir: e.CHAOS_CORE_UPSTREAMS_WORK_DIR ? resolve(cwd, e.CHAOS_CORE_UPSTREAMS_WORK_DIR) : (defaults.workDir ?? join(tmpdir(), "chaos-core-upstreams")),
    ...(e.CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES !== undefined ? { maxResultBytes: e.CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES } : {}),
    ...(e.CHAOS_CORE_UPSTREAM_TOKEN_MAX_SECONDS !== undefined ? { tokenMaxSeconds: e.CHAOS_CORE_UPSTREAM_TOKEN_MAX_SECONDS } : {}),
  };
}

/**
 * Where upstream header references resolve, with or without an upstreams file (a tenant's
 * registry upstreams use them too): the `CHAOS_CORE_UPSTREAM_SECRET_*` variables and
 * `CHAOS_CORE_UPSTREAM_SECRETS_DIR`; never any other variable.
 */
export function upstreamSecretsOf(env: Env, cwd: string = process.cwd()): SecretSources {
  const e = parseEnv(schema, env);
  const secretEnv = Object.fromEntries(Object.entries(env).filter(([name]) => name.startsWith(UPSTREAM_SECRET_ENV_PREFIX)));
  const secretsDir = e.CHAOS_CORE_UPSTREAM_SECRETS_DIR ? resolve(cwd, e.CHAOS_CORE_UPSTREAM_SECRETS_DIR) : undefined;
  return { env: secretEnv, ...(secretsDir ? { secretsDir } : {}) };
}

/** `CHAOS_CORE_UPSTREAM_TOKEN_MAX_SECONDS`, or undefined (the pool's default, 300). */
export function upstreamTokenMaxSecondsOf(env: Env): number | undefined {
  return parseEnv(schema, env).CHAOS_CORE_UPSTREAM_TOKEN_MAX_SECONDS;
}

/** `CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES`, or undefined (the pool's default). */
export function upstreamMaxResultBytesOf(env: Env): number | undefined {
  return parseEnv(schema, env).CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES;
}
