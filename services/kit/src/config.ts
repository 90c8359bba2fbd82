import { existsSync } from "node:fs";
import { resolve } from "node:path";
import type { z } from "zod";

/** An environment record, as `process.env` is; tests pass their own. */
export type Env = Record<string, string | undefined>;

/** Thrown when configuration is invalid; the message names every bad variable. */
export class ConfigError extends Error {
  override readonly name = "ConfigError";
}

/**
 * Parses an environment record with a zod object schema whose keys are variable names.
 * Empty strings count as unset, so `FOO=` in a .env file falls back to the default.
 */
export function parseEnv<S extends z.ZodType>(schema: S, env: Env): z.output<S> {
  const cleaned: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v !== "") cleaned[k] = v;
  const result = schema.safeParse(cleaned);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => {
    const name = issue.path.join(".") || "(environment)";
    return `${name}: ${issue.message}`;
  });
  throw new ConfigError(`invalid configuration:\n  ${problems.join("\n  ")}`);
}

/** Loads `.env` from the working directory into process.env, if the file exists. */
export function loadDotEnv(cwd = process.cwd()): void {
  const file = resolve(cwd, ".env");
  if (existsSync(file)) process.loadEnvFile(file);
}
