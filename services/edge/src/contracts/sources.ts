import { publishedArguments, resultSchema, withErrorAlternative } from "../definitions/tool-schemas.js";
import type { PromptDefinition } from "../definitions/prompt.js";
import { PROMPT_DEFINITIONS } from "../prompts/index.js";
import { RESOURCE_DEFINITIONS } from "../resources/index.js";
import { RESOURCE_MIME_TYPE, type ResourceDefinition } from "../definitions/resource.js";
import type { ToolDefinition } from "../definitions/tool.js";
import { TOOLSETS } from "../tools/index.js";

/**
 * The edge's surface as plain data, for the contracts of docs/contracts.md: each tool's input
 * schema exactly as `tools/list` publishes it (the same published schema the SDK converts, with
 * the SDK's conversion target) and its result schema whole (`tools/list` publishes its top
 * level), prompts' arguments and resources' URIs. Nothing here runs a
 * tool; the shapes match `@chaos-core/contracts`' sources structurally, so the edge does not
 * depend on that package for them.
 */
export interface EdgeSurface {
  readonly tools: ReadonlyArray<{
    name: string;
    title: string;
    description: string;
    toolset: string;
    inputSchema: Record<string, unknown>;
    outputSchema: Record<string, unknown>;
    annotations: { readOnlyHint: boolean; destructiveHint: boolean; idempotentHint: boolean; openWorldHint: boolean };
  }>;
  readonly prompts: ReadonlyArray<{ name: string; title: string; description: string; arguments: Array<{ name: string; required: boolean; description: string }> }>;
  readonly resources: ReadonlyArray<{ name: string; title: string; description: string; uri?: string; uriTemplate?: string; mimeType: string; cacheHint?: unknown }>;
}

/** The target the SDK asks published schemas for (it passes it to `~standard.jsonSchema`). */
const SDK_TARGET = "draft-2020-12";

/** Copies through JSON, so the contract holds data only (no zod internals, no undefined). */
const plain = (v: unknown): Record<string, unknown> => JSON.parse(JSON.stringify(v)) as Record<string, unknown>;

/** One tool definition as its contract's source: its input schema as `tools/list` publishes it, its result schema whole (the costly part). */
export function toolSource(def: ToolDefinition, toolset: string = def.toolset): EdgeSurface["tools"][number] {
  return {
    name: def.name,
    title: def.title,
    description: def.description,
    toolset,
    inputSchema: plain(publishedArguments(def.input)["~standard"].jsonSchema.input({ target: SDK_TARGET })),
    // Every result whole, what the tool's behaviour is held to; tools/list publishes its top level.
    outputSchema: plain(resultSchema(withErrorAlternative(def.output))),
    annotations: { ...def.annotations },
  };
}

/** One prompt definition as its contract's source. */
export function promptSource(p: PromptDefinition): EdgeSurface["prompts"][number] {
  return {
    name: p.name,
    title: p.title,
    description: p.description,
    arguments: Object.entries(p.args ?? {}).map(([name, schema]) => ({ name, required: !schema.isOptional(), description: schema.description ?? "" })),
  };
}

/** One resource definition (a fixed URI or a template) as its contract's source. */
export function resourceSource(r: ResourceDefinition): EdgeSurface["resources"][number] {
  return {
    name: r.name,
    title: r.title,
    description: r.description,
    ...(r.kind === "static" ? { uri: r.uri } : { uriTemplate: r.uriTemplate }),
    mimeType: RESOURCE_MIME_TYPE,
    cacheHint: plain(r.cacheHint),
  };
}

export function edgeSurface(): EdgeSurface {
  const tools = Object.entries(TOOLSETS).flatMap(([toolset, defs]) => (defs ?? []).map((def) => toolSource(def, toolset)));
  const prompts = PROMPT_DEFINITIONS.map(promptSource);
  return { tools, prompts, resources: RESOURCE_DEFINITIONS.map(resourceSource) };
}
