/**
 * The toolsets of the MCP surface (DESIGN.md, "The MCP surface"): the groups of tools an
 * operator enables per tenant (`chaos-core tenants settings <id> --toolsets`). Named here, below
 * the policy service that stores a tenant's choice and the edge that serves it.
 */
export const TOOLSET_NAMES = ["core", "council", "governance", "finance-reference"] as const;

/** One of {@link TOOLSET_NAMES}. */
export type ToolsetName = (typeof TOOLSET_NAMES)[number];

/**
 * What a tenant is served while its operator chose no toolsets (no registry entry, or an empty
 * list): every toolset but `finance-reference`, whose tools are synthetic bank calls an operator
 * turns on where they are wanted (a demonstration, a test of the receipt-gated path).
 */
export const DEFAULT_TOOLSETS: readonly ToolsetName[] = Object.freeze(["core", "council", "governance"] as const);

/** The toolsets a tenant is served: the ones its operator enabled, else {@link DEFAULT_TOOLSETS}. */
export function servedToolsets(enabled: readonly string[] | undefined): readonly string[] {
  return enabled !== undefined && enabled.length > 0 ? enabled : DEFAULT_TOOLSETS;
}
