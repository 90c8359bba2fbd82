import { z } from "zod";
import { defineCapability } from "./capability.js";
import { keySchema, memoryItemOutput, memoryItemToOutput, tagsSchema } from "./memory-item.js";

const SEARCH_FIELDS = ["query", "tags", "limit", "cursor"] as const;

/** Keys of the cognitive core's own bookkeeping items (brain/memory-records.ts). */
function isBookkeepingKey(key: string): boolean {
  return key.startsWith("episode:") || key.startsWith("procedure:");
}

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
    "it, or search with `query` (case-insensitive substring of key or value; several words separated by spaces or " +
    "\"-\" also find items holding every word), `tags` (all must match), `limit` (1-100, default 20) and `cursor`. " +
    "An item stored under exactly the query comes first. Expired items, and the core's own episodes and procedures " +
    "(unless asked for by their chaoscore.* tags), are never returned.",
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
    const query = input.query ?? "";
    const tags = input.tags ?? [];
    const search = (q: string, limit: number, cursor: string) => ctx.memory.search({ query: q, tags: [...tags], limit, cursor }, opts);
    const res = await search(query, input.limit ?? 0, input.cursor ?? "");
    let items = res.items.map(memoryItemToOutput);
    let nextCursor = res.nextCursor;
    // Several words ("on-call-week", "deploy keys") that are not one substring: items holding
    // every word, in key or value, found through the longest word.
    const words = [...new Set(query.toLowerCase().split(/[\s-]+/).filter((w) => w.length >= 2))];
    if (items.length === 0 && !input.cursor && words.length > 1) {
      const longest = words.reduce((a, b) => (b.length > a.length ? b : a));
      const wide = await search(longest, 100, "");
      items = wide.items
        .map(memoryItemToOutput)
        .filter((item) => {
          const text = `${item.key} ${JSON.stringify(item.value)}`.toLowerCase();
          return words.every((w) => text.includes(w));
        })
        .slice(0, input.limit ?? 20);
      nextCursor = "";
    }
    // The item stored under exactly the words asked for comes first, even beyond this page.
    if (query !== "" && !input.cursor && keySchema.safeParse(query).success) {
      const exact = items.find((i) => i.key === query);
      if (exact) {
        items = [exact, ...items.filter((i) => i !== exact)];
      } else {
        const byKey = await ctx.memory.recall({ key: query }, opts);
        const item = byKey.item ? memoryItemToOutput(byKey.item) : undefined;
        if (item && tags.every((t) => item.tags.includes(t))) items = [item, ...items];
      }
    }
    // The brain's own bookkeeping (episodes, procedures) is not what a person searches for; it
    // shows when asked for by its tags or key.
    if (!tags.some((t) => t.startsWith("chaoscore."))) items = items.filter((i) => !isBookkeepingKey(i.key));
    return { items, ...(nextCursor ? { next_cursor: nextCursor } : {}) };
  },
});
