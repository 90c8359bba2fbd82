import { z } from "zod";
import type { ContractSet } from "@chaos-core/contracts";
import { exposureOfTool, type UpstreamDeclaration } from "@chaos-core/kit";
import { compileUpstreamSchema, zodFromJsonSchema } from "../upstreams/json-schema.js";
import { upstreamToolNames } from "../upstreams/names.js";
import { noticeLine, type UpstreamNotice } from "../upstreams/notices.js";
import { inputFromObjective } from "../upstreams/objective-input.js";
import type { UpstreamDrift } from "../upstreams/drift.js";
import type { UpstreamPool } from "../upstreams/pool.js";
import { upstreamRisk } from "../upstreams/risk.js";
import type { Capability } from "./capability.js";

/** What an upstream tool answers: its content as the upstream sent it (text, images, structured content, resource links). */
const RESULT = z.looseObject({
  content: z.array(z.looseObject({ type: z.string() })),
  structuredContent: z.record(z.string(), z.unknown()).optional(),
  isError: z.boolean().optional(),
});
type UpstreamResult = z.output<typeof RESULT>;

/** The text of an upstream's error answer, for the step's problem (bounded: it is the upstream's). */
function errorText(result: UpstreamResult): string {
  const text = result.content.map((c) => (c.type === "text" && typeof c.text === "string" ? c.text : `[${c.type}]`)).join(" ");
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}

/**
 * The output schema of an upstream tool's capability: the MCP result whole; an answer the upstream
 * marked `isError` fails the step (naming what it said); and where the pin declares an output
 * schema, `structuredContent` must be there and match it.
 */
function resultSchema(upstream: string, tool: string, outputSchema: Record<string, unknown>): z.ZodType<UpstreamResult> {
  const declared = Object.keys(outputSchema).length > 0 ? compileUpstreamSchema(outputSchema) : undefined;
  return RESULT.superRefine((result, ctx) => {
    if (result.isError === true) {
      ctx.addIssue({ code: "custom", path: ["isError"], message: `upstream "${upstream}" answered ${tool} with an error: ${errorText(result)}` });
      return;
    }
    if (!declared) return;
    if (result.structuredContent === undefined) ctx.addIssue({ code: "custom", path: ["structuredContent"], message: "required: the pinned tool declares an output schema" });
    else if (!declared(result.structuredContent)) {
      for (const e of declared.errors ?? []) ctx.addIssue({ code: "custom", path: ["structuredContent", ...e.instancePath.split("/").slice(1)], message: e.message ?? e.keyword });
    }
  });
}

/**
 * Every pinned tool of the declared upstreams as a capability (docs/federation.md §5):
 * `<upstream>.<tool>`, its risk from the pin, its input checked by Ajv against the pinned schema,
 * its call made through the pool (the upstream's timeout, its breaker, the caller's cancellation).
 * A declared upstream with no pin offers nothing — it is named in `unpinned` — and a disabled
 * one neither.
 */
export function upstreamCapabilities(
  declarations: readonly UpstreamDeclaration[],
  pins: ReadonlyMap<string, ContractSet>,
  pool: UpstreamPool,
  drift?: Pick<UpstreamDrift, "driftOf">,
): { capabilities: Capability[]; unpinned: string[] } {
  const capabilities: Capability[] = [];
  const unpinned: string[] = [];
  for (const decl of declarations) {
    if (decl.disabled) continue;
    const pin = pins.get(decl.name);
    if (!pin) {
      unpinned.push(decl.name);
      continue;
    }
    for (const names of upstreamToolNames(decl.name, Object.keys(pin.tools))) {
      const { surface, behavior } = pin.tools[names.tool]!;
      const capability: Capability<z.ZodType<Record<string, unknown>>, z.ZodType<UpstreamResult>> = {
        name: names.capability,
        description: surface.description || surface.title || `${names.tool}, a tool of the upstream ${decl.name}`,
        risk: upstreamRisk(decl, names.tool, behavior),
        inputSchema: zodFromJsonSchema(surface.inputSchema as Record<string, unknown>),
        outputSchema: resultSchema(decl.name, names.tool, behavior.outputSchema as Record<string, unknown>),
        annotations: { readOnlyHint: behavior.readOnly, destructiveHint: behavior.destructive, idempotentHint: behavior.idempotent, openWorldHint: behavior.openWorld },
        upstream: {
          name: decl.name,
          tool: names.tool,
          mcpName: names.mcpName,
          title: surface.title,
          inputSchema: surface.inputSchema as Record<string, unknown>,
          ...(drift ? { drift: () => drift.driftOf(decl.name, names.tool) } : {}),
          grants: exposureOfTool(decl.exposure, names.tool),
        },
        // The heuristic planner's input for it, read from an objective by its pinned schema (docs/federation-platform.md §4).
        fromObjective: (objective) => inputFromObjective(surface.inputSchema as Record<string, unknown>, objective),
        // What the upstream reports about this call reaches its caller when it asked for progress.
        handler: async (input, ctx) => {
          const progress = ctx.progress;
          const onNotice = progress ? (notice: UpstreamNotice) => progress(noticeLine(decl.name, notice)) : undefined;
          return (await pool.call(decl, ctx.call, names.tool, input, ctx.signal, onNotice)) as UpstreamResult;
        },
      };
      capabilities.push(capability as unknown as Capability);
    }
  }
  return { capabilities, unpinned };
}
