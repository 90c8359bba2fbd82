import { z } from "zod";
import type { Capability } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { ToolDefinition } from "../definitions/tool.js";
import { runCapability } from "./run-capability.js";
import { executeWithProgress } from "./upstream-progress.js";

/** What an upstream tool answers: its content as the upstream sent it; checked again by cognition's executor. */
const UPSTREAM_RESULT = z.looseObject({
  content: z.array(z.looseObject({ type: z.string() })),
  structuredContent: z.record(z.string(), z.unknown()).optional(),
  isError: z.boolean().optional(),
});

// Upstream arguments are checked by cognition against the pinned schema, so the edge takes any object.
const ANY_ARGUMENTS = z.looseObject({});

const built = new WeakMap<Capability, ToolDefinition>();

/**
 * An upstream capability as the MCP tool the edge lists (docs/federation.md §6): its MCP name
 * (`files__read_text_file`), the upstream's title and description (its words, shown as they are:
 * they rank and describe, never instruct), the pinned input schema and annotations. A call runs
 * the capability as one executor step (`runCapability`: policy, approval channels, the ledger), so
 * one that needs a person answers exactly as `chaoscore_execute` does; its progress and log lines
 * reach a caller that asked for progress. Built once per capability.
 */
export function upstreamToolDefinition(capability: Capability): ToolDefinition {
  let tool = built.get(capability);
  if (tool) return tool;
  const upstream = capability.upstream!;
  const annotations = capability.annotations;
  tool = {
    name: upstream.mcpName,
    toolset: "upstream",
    title: upstream.title || `${upstream.tool} (${upstream.upstream})`,
    description: capability.description,
    input: ANY_ARGUMENTS,
    output: UPSTREAM_RESULT,
    annotations: {
      readOnlyHint: annotations?.readOnlyHint ?? false,
      destructiveHint: annotations?.destructiveHint ?? true,
      idempotentHint: annotations?.idempotentHint ?? false,
      openWorldHint: annotations?.openWorldHint ?? true,
    },
    upstream: {
      capability: capability.name,
      inputSchema: (capability.inputSchema as Record<string, unknown> | undefined) ?? { type: "object" },
    },
    // What the upstream reports while it runs reaches a caller that asked for progress.
    run: (args, ctx) => runCapability(ctx, capability.name, args as never, UPSTREAM_RESULT, executeWithProgress),
  };
  built.set(capability, tool);
  return tool;
}
