import type { JsonValue } from "@bufbuild/protobuf";
import { z } from "zod";
import { defineTool } from "./define.js";
import { keySchema, memoryItemOutput, tagsSchema } from "./memory-item.js";
import { runCapability } from "./run-capability.js";

const MAX_TTL_SECONDS = 2 ** 32 - 1;

const output = z.object({ item: memoryItemOutput });

/**
 * `chaoscore_remember`: stores a JSON value under a key in the tenant's durable memory, as the
 * `memory.remember` step of cognition's executor (policy first, decision and outcome in the audit
 * ledger). The schema here refuses a bad argument naming the field before any call.
 */
export const rememberTool = defineTool({
  name: "chaoscore_remember",
  toolset: "core",
  title: "Remember",
  description:
    "Store a JSON value under a key in durable memory (per tenant), with optional tags and a time to live. " +
    "Storing under an existing key replaces its value, tags and expiry. Runs as capability memory.remember " +
    "through the executor: policy decides first and the decision is recorded in the audit ledger; when policy " +
    "requires a person's approval, a client that supports URL-mode elicitation has its user sent to the approval's " +
    "console page and the call waits for the answer given there; otherwise (or when no one answers in time) the error " +
    "gives the approval_id to run it with chaoscore_execute.",
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
  output,
  annotations: {
    readOnlyHint: false,
    // Writing under an existing key replaces what was there: not a purely additive update.
    destructiveHint: true,
    // The same call twice leaves memory as one call does.
    idempotentHint: true,
    openWorldHint: false,
  },
  async run(args, ctx) {
    return runCapability(
      ctx,
      "memory.remember",
      {
        key: args.key,
        // Arguments arrive as JSON, so the value is a JSON value.
        value: args.value as JsonValue,
        ...(args.tags !== undefined ? { tags: args.tags } : {}),
        ...(args.ttl_seconds !== undefined ? { ttl_seconds: args.ttl_seconds } : {}),
      },
      output,
    );
  },
});
