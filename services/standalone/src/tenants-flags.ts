import { readFileSync } from "node:fs";
import type { JsonObject } from "@bufbuild/protobuf";
import { TOOLSET_NAMES } from "@chaos-core/kit";
import { UsageError, type parseCommandLine } from "./command-line.js";

// The flags of `chaos-core tenants` and `keys`, and how their values are read.

export const OPTIONS = {
  "admin-addr": { type: "string" },
  "database-url": { type: "string" },
  "data-dir": { type: "string" },
  json: { type: "boolean" },
  name: { type: "string" },
  "memory-retention-days": { type: "string" },
  "council-retention-days": { type: "string" },
  toolsets: { type: "string" },
  tenant: { type: "string" },
  principal: { type: "string" },
  role: { type: "string" },
  "expires-in": { type: "string" },
  out: { type: "string" },
  confirm: { type: "string" },
  "rate-limits": { type: "string" },
  "ledger-policy": { type: "string" },
} as const;

export type Values = ReturnType<typeof parseCommandLine<typeof OPTIONS>>["values"];

/**
 * The toolsets `--toolsets` names: a list, `all` (every toolset, the opt-in finance-reference
 * included), or `default` (the empty list: the default toolsets, whatever a release makes them).
 */
export function toolsetsFlag(value: string): string[] {
  if (value === "default") return [];
  if (value === "all") return [...TOOLSET_NAMES];
  return value.split(",").map((t) => t.trim()).filter(Boolean);
}

export function days(values: Values, flag: "memory-retention-days" | "council-retention-days"): number | undefined {
  const v = values[flag];
  if (v === undefined) return undefined;
  if (!/^[0-9]{1,5}$/.test(v)) throw new UsageError(`--${flag} must be a whole number of days (0 keeps data for ever), got "${v}"`);
  return Number(v);
}

/** `--expires-in 30d | 12h | 90m` as a date from now. */
export function expiresIn(v: string | undefined): Date | undefined {
  if (v === undefined) return undefined;
  const m = /^([1-9][0-9]{0,5})([dhms])$/.exec(v);
  if (!m) throw new UsageError(`--expires-in must be a number and a unit, like 30d, 12h, 90m or 45s; got "${v}"`);
  const unit = { d: 86_400_000, h: 3_600_000, m: 60_000, s: 1_000 }[m[2] as "d" | "h" | "m" | "s"];
  return new Date(Date.now() + Number(m[1]) * unit);
}

/**
 * A settings flag's `FILE` as the JSON object it holds (the registry checks its fields); `none`
 * clears the setting. `shape` says in the error what the object holds.
 */
export function jsonObjectFile(flag: string, v: string, shape: string): JsonObject | undefined {
  if (v === "none") return undefined;
  let text: string;
  try {
    text = readFileSync(v, "utf8");
  } catch (err) {
    throw new UsageError(`--${flag}: cannot read ${v} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--${flag}: ${v} is not JSON (${(err as Error).message})`);
  }
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new UsageError(`--${flag}: ${v} must hold a JSON object (${shape})`);
  return doc as JsonObject;
}

export function only(positionals: string[], what: string): string {
  if (positionals.length !== 1) throw new UsageError(`expected exactly one ${what}`);
  return positionals[0]!;
}

/** Flags that belong to other commands are a usage error, not silently ignored. */
export function allow(values: Values, command: string, allowed: string[]): void {
  const common = ["admin-addr", "database-url", "data-dir", "json"];
  for (const [flag, value] of Object.entries(values)) {
    if (value !== undefined && !common.includes(flag) && !allowed.includes(flag)) throw new UsageError(`--${flag} does not belong to ${command}`);
  }
}
