import { parseArgs } from "node:util";
import { ConfigError, likelyMeant, type Env } from "@chaos-core/kit";
import { loadOperatorStores, type OperatorStores } from "./config.js";

/** A wrong command line: the command answers with the message and its usage, and exits 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

/** The options a command accepts, as `node:util` parseArgs takes them. */
export type OptionSpecs = Record<string, { type: "string" | "boolean"; short?: string }>;

type Values<T extends OptionSpecs> = { [K in keyof T]?: T[K]["type"] extends "string" ? string : boolean };

/**
 * ` (did you mean "serve"?)` when `given` is a likely typo of one of the `known` names (kit's
 * {@link likelyMeant}, the measure tool names are suggested by); else empty.
 */
export function meantHint(given: string, known: readonly string[]): string {
  const meant = likelyMeant(given, known);
  return meant === undefined ? "" : ` (did you mean "${meant}"?)`;
}

/** The error for a command name `given` that is none of `known`: `unknown <what> "serv" (did you mean "serve"?)`. */
export function unknownCommand(what: string, given: string, known: readonly string[]): UsageError {
  return new UsageError(`unknown ${what} "${given}"${meantHint(given, known)}`);
}

/**
 * The unknown long option of `args` (the first, the one parseArgs refused) and the option it is
 * likely a typo of: `--prot` → `--port`. Undefined when it is a short option or close to none.
 */
function misspeltOption(args: string[], options: OptionSpecs): { given: string; meant: string } | undefined {
  const { tokens } = parseArgs({ args, options, strict: false, allowPositionals: true, tokens: true });
  const unknown = tokens.find((t) => t.kind === "option" && !Object.hasOwn(options, t.name));
  if (unknown?.kind !== "option" || !unknown.rawName.startsWith("--")) return undefined;
  const meant = likelyMeant(unknown.name, Object.keys(options));
  return meant === undefined ? undefined : { given: unknown.rawName, meant: `--${meant}` };
}

/**
 * Parses a command's arguments strictly. Unknown options, a missing or empty value and
 * unexpected arguments are a {@link UsageError} with a one-line message, never parseArgs' own
 * exception (whose stack trace is what a user met before); an unknown option close to a known
 * one names it (`unknown option '--prot' (did you mean "--port"?)`).
 */
export function parseCommandLine<T extends OptionSpecs>(
  args: string[],
  options: T,
  { positionals = false }: { positionals?: boolean } = {},
): { values: Values<T>; positionals: string[] } {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args, options, strict: true, allowPositionals: positionals });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ERR_PARSE_ARGS_UNKNOWN_OPTION") {
      const typo = misspeltOption(args, options);
      if (typo) throw new UsageError(`unknown option '${typo.given}' (did you mean "${typo.meant}"?)`);
    }
    // parseArgs' own sentence ("Unknown option '--x'"), as one line of ours.
    const message = err instanceof Error ? err.message : String(err);
    throw new UsageError(message.charAt(0).toLowerCase() + message.slice(1));
  }
  for (const [name, value] of Object.entries(parsed.values)) {
    // An empty value would read as "unset" once it is in the environment record: refuse it here.
    if (value === "") throw new UsageError(`--${name} needs a value`);
  }
  return { values: parsed.values as Values<T>, positionals: parsed.positionals };
}

/** Which environment variable each flag sets (`{ port: "PORT" }`). */
export type FlagVariables = Readonly<Record<string, string>>;

/**
 * The environment a command runs with: `env` with each given flag's value written over its
 * variable, so flags win and the configuration loaders validate both the same way. Returns the
 * variables that came from a flag, to name the flag when one is refused ({@link flagProblem}).
 */
export function withFlags(env: Env, values: Record<string, unknown>, variables: FlagVariables): { env: Env; fromFlags: Map<string, string> } {
  const merged: Env = { ...env };
  const fromFlags = new Map<string, string>();
  for (const [flag, variable] of Object.entries(variables)) {
    const value = values[flag];
    if (typeof value !== "string") continue;
    merged[variable] = value;
    fromFlags.set(variable, `--${flag}`);
  }
  return { env: merged, fromFlags };
}

/**
 * When a configuration error is about a variable a flag set, the line that names the flag
 * (`--port: must be between 0 and 65535`); undefined when the error is about something else.
 */
export function flagProblem(err: unknown, fromFlags: ReadonlyMap<string, string>): string | undefined {
  if (!(err instanceof ConfigError)) return undefined;
  const lines = err.issues.flatMap((issue) => {
    const flag = fromFlags.get(issue.variable);
    return flag ? [`${flag}: ${issue.message}`] : [];
  });
  return lines.length > 0 ? lines.join("; ") : undefined;
}

/** The flags an operator command (ledger, policy) chooses its stores with, and their variables. */
export const STORE_FLAGS = { "database-url": "DATABASE_URL", "data-dir": "CHAOS_CORE_DATA_DIR" } as const satisfies FlagVariables;

/**
 * The stores an operator command works on: `--database-url`, else `--data-dir`, else what the
 * environment gives a server (DATABASE_URL, else CHAOS_CORE_DATA_DIR, else the per-user data
 * directory). A bad flag value is a {@link UsageError} naming the flag.
 */
export function storesFromCommandLine(values: Record<string, unknown>, env: Env): OperatorStores {
  if (values["database-url"] !== undefined && values["data-dir"] !== undefined) {
    throw new UsageError("give --database-url or --data-dir, not both");
  }
  // --data-dir asks for the embedded stores even where the environment names a database.
  const base = values["data-dir"] !== undefined ? { ...env, DATABASE_URL: undefined } : env;
  const { env: merged, fromFlags } = withFlags(base, values, STORE_FLAGS);
  try {
    return loadOperatorStores(merged);
  } catch (err) {
    const problem = flagProblem(err, fromFlags);
    if (problem) throw new UsageError(problem);
    throw err;
  }
}
