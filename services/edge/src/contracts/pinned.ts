import type { CallToolResult } from "@modelcontextprotocol/server";
import type { ContractChange, SincePinned } from "@chaos-core/contracts";
import { ChaosError, isObject, toMcpErrorResult } from "@chaos-core/kit";

/**
 * The `_meta` key under which `tools/list` gives each tool's pinned contract digest
 * (`{ digest }`) and under which a client sends the digest it built a call against (issue 15
 * item 8, docs/contracts.md §9).
 */
export const TOOL_CONTRACT_META_KEY = "dev.chaoscore/contract";

/**
 * The digest a client says it pinned, from a request's `_meta`: `{ digest: "sha256:…" }` as
 * `tools/list` gives it, or the loose forms a client naturally writes (the digest as a plain
 * string, the hex without its `sha256:` prefix). Undefined when none is given.
 */
export function pinnedDigestOf(meta: Record<string, unknown> | undefined): string | undefined {
  const value = meta?.[TOOL_CONTRACT_META_KEY];
  const digest = isObject(value) ? value.digest : value;
  if (typeof digest !== "string") return undefined;
  const trimmed = digest.trim().toLowerCase();
  return /^[0-9a-f]{64}$/.test(trimmed) ? `sha256:${trimmed}` : trimmed;
}

const short = (digest: string) => (digest.length > 19 ? `${digest.slice(0, 19)}…` : digest);

/** One change as a model reads it: `BREAKING surface /required: a new required field "x"`. */
export function describeChange(c: ContractChange): string {
  return `${c.verdict} ${c.section}${c.path ? ` ${c.path}` : ""}: ${c.reasons.join("; ")}`;
}

/**
 * An `invalid_argument` refusal of a call built against an older contract, made to say what
 * changed since, so a model can adapt in the same turn: the message gains the BREAKING and
 * RISKY changes (at most five) and the result's `_meta` carries them as data. A pin that is
 * current leaves the refusal as it is; one this server does not know says so.
 */
export function explainAgainstPinned(refusal: CallToolResult, pinned: string, current: string, since: SincePinned): CallToolResult {
  if (since.kind === "current") return refusal;
  const error = (refusal.structuredContent as { error?: { code: string; message: string } } | undefined)?.error;
  if (!error) return refusal;
  let suffix: string;
  let meta: Record<string, unknown>;
  if (since.kind === "unknown") {
    suffix = `; the contract digest you pinned (${short(pinned)}) is not one this server has served: list the tools again for the current contract (${short(current)})`;
    meta = { pinned, current, known: false };
  } else {
    const listed = since.changes.map(describeChange);
    const more = since.more > 0 ? ` (and ${since.more} more)` : "";
    suffix =
      listed.length > 0
        ? `; this tool's contract changed since the digest you pinned (${short(pinned)}): ${listed.join("; ")}${more}`
        : `; this tool's contract changed since the digest you pinned (${short(pinned)}), in safe or cosmetic ways only`;
    meta = { pinned, current, known: true, changes: since.changes.map(({ verdict, section, path, reasons }) => ({ verdict, section, path, reasons })), more: since.more };
  }
  const explained = toMcpErrorResult(new ChaosError(error.code as ChaosError["code"], `${error.message}${suffix}`));
  return { ...explained, _meta: { ...refusal._meta, [TOOL_CONTRACT_META_KEY]: meta } };
}
