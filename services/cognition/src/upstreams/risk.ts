import type { Risk, UpstreamDeclaration } from "@chaos-core/kit";

/** What an upstream tool's pinned contract says it does (the contract's behaviour section). */
export interface PinnedHints {
  readonly readOnly: boolean;
  readonly destructive: boolean;
  readonly openWorld: boolean;
}

/**
 * An upstream tool's risk (docs/federation.md §5): the operator's word first (per tool, then for
 * the upstream); else, while the operator trusts the upstream's annotations, what they imply with
 * the MCP spec's defaults already in the pin — read-only: low, or medium when it reaches the open
 * world; a write that is not destructive: medium; a destructive write (the default when the hint
 * is absent): high. An upstream whose annotations are not trusted is high. An annotation can
 * never lower the operator's risk: it is only read where the operator set none.
 */
export function upstreamRisk(decl: UpstreamDeclaration, tool: string, hints: PinnedHints): Risk {
  const set = decl.risk?.tools?.[tool] ?? decl.risk?.default;
  if (set) return set;
  if (!decl.trustAnnotations) return "high";
  if (hints.readOnly) return hints.openWorld ? "medium" : "low";
  return hints.destructive ? "high" : "medium";
}
