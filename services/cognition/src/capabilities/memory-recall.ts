import { z } from "zod";
import { defineCapability } from "./capability.js";
import { keySchema, memoryItemOutput, memoryItemToOutput, tagsSchema } from "./memory-item.js";

const SEARCH_FIELDS = ["query", "tags", "limit", "cursor"] as const;

// Words of an objective that say "look in memory" rather than what to look for.
const RECALL_NOISE = new Set(
  "about all and any anything are did does everything find for from have know look memory memories recall remember remembered search show store stored tell that the there this what when where which who with you your"
    .split(" "),
);

/** `memory.recall`: one item by key, or a page of items by substring and tags. */
export const memoryRecallCapability = defineCapability({
  name: "memory.recall",
  description:
    "Recall what was stored earlier in durable memory (per tenant): pass `key` for the one item stored under " +
    "it, or search with `query` (case-insensitive substring of key or value), `tags` (all must match), " +
    "`limit` (1-100, default 20) and `cursor`. Expired items are never returned.",
  risk: "low",
  inputSchema: z
    .object({
      key: keySchema.optional().describe("Exact key to recall; cannot be combined with the search fields"),
      query: z.string().max(512).optional().describe("Case-insensitive substring of the key or JSON value"),
      tags: tagsSchema.optional().describe("Only items carrying every one of these tags"),
      limit: z.number().int().min(1).max(100).optional().describe("Page size, 1-100 (default 20)"),
      cursor: z.string().min(1).max(2048).optional().describe("The next_cursor of the previous page"),
    })
    .superRefine((input, issue) => {
      if (input.key === undefined) return;
      for (const field of SEARCH_FIELDS) {
        if (input[field] !== undefined) {
          issue.addIssue({
            code: "custom",
            path: [field],
            message: `${field} cannot be combined with key: pass key alone to recall one item, or search without it`,
          });
        }
      }
    }),
  outputSchema: z.object({
    items: z.array(memoryItemOutput),
    next_cursor: z.string().min(1).optional().describe("Pass as cursor for the next page; absent on the last page"),
  }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  fromObjective(objective) {
    // Search is a substring match, so one word finds more than a phrase; the longest remaining
    // word is taken as the most specific (ties keep the first, so the answer is deterministic).
    let best: string | undefined;
    for (const word of objective.toLowerCase().split(/[^\p{L}\p{N}_-]+/u)) {
      if (word.length < 3 || RECALL_NOISE.has(word)) continue;
      if (best === undefined || word.length > best.length) best = word;
    }
    return best === undefined ? undefined : { query: best.slice(0, 512), limit: 20 };
  },
  async handler(input, ctx) {
    const opts = { ctx: ctx.call, signal: ctx.signal };
    if (input.key !== undefined) {
      const res = await ctx.memory.recall({ key: input.key }, opts);
      return { items: res.item ? [memoryItemToOutput(res.item)] : [] };
    }
    const res = await ctx.memory.search(
      { query: input.query ?? "", tags: input.tags ?? [], limit: input.limit ?? 0, cursor: input.cursor ?? "" },
      opts,
    );
    return {
      items: res.items.map(memoryItemToOutput),
      ...(res.nextCursor ? { next_cursor: res.nextCursor } : {}),
    };
  },
});
