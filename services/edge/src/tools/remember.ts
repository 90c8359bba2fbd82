import { z } from "zod";
import { ChaosError } from "@chaos-core/kit";
import { defineTool } from "./define.js";
import { EDGE_CAPABILITIES } from "./capabilities.js";
import { jsonToValue, keySchema, memoryItemOutput, memoryItemToOutput, tagsSchema } from "./memory-item.js";
import { requireAllowed } from "./policy-gate.js";

const MAX_TTL_SECONDS = 2 ** 32 - 1;

/** `chaoscore_remember`: stores a JSON value under a key in the tenant's durable memory. */
export const rememberTool = defineTool({
  name: "chaoscore_remember",
  toolset: "core",
  title: "Remember",
  description:
    "Store a JSON value under a key in durable memory (per tenant), with optional tags and a time to live. " +
    "Storing under an existing key replaces its value, tags and expiry. Policy decides first (capability memory.remember).",
  input: z.object({
    key: keySchema.describe("The key to store under (1-512 characters); an existing item with this key is replaced"),
    value: z.unknown().describe("Any JSON value, at most 1 MiB as JSON text"),
    tags: tagsSchema.optional().describe("Up to 32 tags (1-64 characters each) to filter recall by"),
    ttl_seconds: z
      .number()
      .int()
      .min(1)
      .max(MAX_TTL_SECONDS)
      .optional()
      .describe("Seconds until the item expires; omit to keep it until it is replaced"),
  }),
  output: z.object({ item: memoryItemOutput }),
  annotations: {
    readOnlyHint: false,
    // Writing under an existing key replaces what was there: not a purely additive update.
    destructiveHint: true,
    // The same call twice leaves memory as one call does.
    idempotentHint: true,
    openWorldHint: false,
  },
  async run(args, ctx) {
    await requireAllowed(ctx, "memory.remember", EDGE_CAPABILITIES["memory.remember"]);
    const res = await ctx.deps.memory.remember(
      { key: args.key, value: jsonToValue(args.value), tags: args.tags ?? [], ttlSeconds: args.ttl_seconds ?? 0 },
      { ctx: ctx.call, signal: ctx.signal },
    );
    if (!res.item) throw new ChaosError("internal", "memory stored the item but returned none");
    return { item: memoryItemToOutput(res.item) };
  },
});
