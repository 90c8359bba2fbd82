import { z } from "zod";
import { defineTool } from "./define.js";
import { EDGE_CAPABILITIES } from "./capabilities.js";
import { keySchema, memoryItemOutput, memoryItemToOutput, tagsSchema } from "./memory-item.js";
import { requireAllowed } from "./policy-gate.js";

const SEARCH_FIELDS = ["query", "tags", "limit", "cursor"] as const;

/** `chaoscore_recall`: one item by key, or a page of items by substring and tags. */
export const recallTool = defineTool({
  name: "chaoscore_recall",
  toolset: "core",
  title: "Recall",
  description:
    "Recall from durable memory: pass `key` for the one item stored under it, or search with `query` " +
    "(case-insensitive substring of key or value), `tags` (all must match), `limit` (1-100, default 20) and " +
    "`cursor` (from a previous `next_cursor`). Expired items are never returned. Policy decides first " +
    "(capability memory.recall).",
  input: z
    .object({
      key: keySchema.optional().describe("Exact key to recall; cannot be combined with the search fields"),
      query: z.string().max(512).optional().describe("Case-insensitive substring of the key or JSON value"),
      tags: tagsSchema.optional().describe("Only items carrying every one of these tags"),
      limit: z.number().int().min(1).max(100).optional().describe("Page size, 1-100 (default 20)"),
      cursor: z.string().min(1).max(2048).optional().describe("The next_cursor of the previous page"),
    })
    .superRefine((args, issue) => {
      if (args.key === undefined) return;
      for (const field of SEARCH_FIELDS) {
        if (args[field] !== undefined) {
          issue.addIssue({
            code: "custom",
            path: [field],
            message: `${field} cannot be combined with key: pass key alone to recall one item, or search without it`,
          });
        }
      }
    }),
  output: z.object({
    items: z.array(memoryItemOutput),
    next_cursor: z.string().optional().describe("Pass as cursor for the next page; absent on the last page"),
  }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, ctx) {
    await requireAllowed(ctx, "memory.recall", EDGE_CAPABILITIES["memory.recall"]);
    const opts = { ctx: ctx.call, signal: ctx.signal };
    if (args.key !== undefined) {
      const res = await ctx.deps.memory.recall({ key: args.key }, opts);
      return { items: res.item ? [memoryItemToOutput(res.item)] : [] };
    }
    const res = await ctx.deps.memory.search(
      { query: args.query ?? "", tags: args.tags ?? [], limit: args.limit ?? 0, cursor: args.cursor ?? "" },
      opts,
    );
    return {
      items: res.items.map(memoryItemToOutput),
      ...(res.nextCursor ? { next_cursor: res.nextCursor } : {}),
    };
  },
});
