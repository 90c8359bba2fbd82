import { ChaosError } from "@chaos-core/kit";

/**
 * How an upstream's tool names become Chaos Core names (docs/federation.md §5): the capability
 * `<upstream>.<tool>` must pass the capability-name rule (`[a-z][a-z0-9_]*` per segment), and the
 * MCP tool the edge lists, `<upstream>__<tool>`, the hosts' `[A-Za-z0-9_-]{1,64}`.
 */

/** Longest MCP tool name the widely used hosts accept. */
export const MAX_MCP_TOOL_NAME = 64;

/**
 * An upstream tool's name as one capability segment: camelCase split (`createIssue` →
 * `create_issue`), every character outside `[a-z0-9_]` a `_` (`get-env` → `get_env`), runs of `_`
 * collapsed and trimmed, a leading digit prefixed `t_`. Undefined when nothing is left.
 */
export function toolSegment(tool: string): string | undefined {
  const snake = tool
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .replace(/([A-Z]+)([A-Z][a-z])/g, "$1_$2")
    .toLowerCase()
    .replace(/[^a-z0-9_]+/g, "_")
    .replace(/_+/g, "_")
    .replace(/^_|_$/g, "");
  if (snake === "") return undefined;
  return /^[0-9]/.test(snake) ? `t_${snake}` : snake;
}

/** The names one upstream tool is known by here. */
export interface UpstreamToolNames {
  /** As the upstream lists it. */
  readonly tool: string;
  /** `<upstream>.<segment>`: what policy documents and plans name. */
  readonly capability: string;
  /** `<upstream>__<segment>`: the MCP tool the edge lists. */
  readonly mcpName: string;
}

/**
 * The names of every tool of `upstream`, in the order given. Refused (`invalid_argument`, naming
 * them) when a name maps to nothing, when two tools map to one name — never one dropped or renamed
 * silently — or when the MCP name would pass {@link MAX_MCP_TOOL_NAME}.
 */
export function upstreamToolNames(upstream: string, tools: readonly string[]): UpstreamToolNames[] {
  const problems: string[] = [];
  const bySegment = new Map<string, string>();
  const names: UpstreamToolNames[] = [];
  for (const tool of tools) {
    const segment = toolSegment(tool);
    if (segment === undefined) {
      problems.push(`tool "${tool}" has no letter or digit to name it by`);
      continue;
    }
    const first = bySegment.get(segment);
    if (first !== undefined) {
      problems.push(`tools "${first}" and "${tool}" both map to ${upstream}.${segment}`);
      continue;
    }
    bySegment.set(segment, tool);
    const mcpName = `${upstream}__${segment}`;
    if (mcpName.length > MAX_MCP_TOOL_NAME) problems.push(`tool "${tool}" would be listed as ${mcpName}, longer than ${MAX_MCP_TOOL_NAME} characters`);
    else names.push({ tool, capability: `${upstream}.${segment}`, mcpName });
  }
  if (problems.length > 0) throw new ChaosError("invalid_argument", `upstream "${upstream}": ${problems.join("; ")}`);
  return names;
}
