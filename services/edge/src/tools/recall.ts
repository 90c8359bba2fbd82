import type { JsonObject } from "@bufbuild/protobuf";
import { z } from "zod";
import { defineTool } from "../definitions/tool.js";
import { keySchema, memoryItemOutput, tagsSchema } from "./memory-item.js";
import { runCapability } from "./run-capability.js";

const SEARCH_FIELDS = ["query", "tags", "limit", "cursor"] as const;

const output = z.object({
  items: z.array(memoryItemOutput),
  next_cursor: z.string().optional().describe("Absent on the last page"),
});

/**
 * `chaoscore_recall`: one item by key, or a page of items by substring and tags, as the
 * `memory.recall` step of cognition's executor (policy first, decision and outcome in the audit
 * ledger). The schema here refuses a bad argument naming the field before any call.
 */
export const recallTool = defineTool({
  name: "chaoscore_recall",
  toolset: "core",
  title: "Recall",
  description:
    "Recall from durable memory: `key` for the one item stored under it, or search with `query`, `tags`, `limit` " +
    "and `cursor`. Expired items are never returned. Runs as capability memory.recall, through policy and the " +
    "audit ledger. If a person must approve it, a client with URL-mode elicitation has its user sent to the console " +
    "page and the call waits; otherwise (or on timeout) the error gives the approval_id for chaoscore_execute.",
  input: z
    .object({
      key: keySchema.optional().describe("Exact key; not with the search fields"),
      query: z.string().max(512).optional().describe("Case-insensitive substring of the key or JSON value"),
      tags: tagsSchema.optional().describe("Only items with all of these tags"),
      limit: z.number().int().min(1).max(100).optional().describe("Page size, 1-100 (default 20)"),
      cursor: z.string().min(1).max(2048).optional().describe("The previous page's next_cursor"),
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
  output,
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(args, ctx) {
    // Only the fields given: the capability's schema refuses key combined with a search field.
    const input = Object.fromEntries(Object.entries(args).filter(([, v]) => v !== undefined)) as JsonObject;
    return runCapability(ctx, "memory.recall", input, output);
  },
});
