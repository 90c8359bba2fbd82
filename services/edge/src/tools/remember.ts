import type { JsonValue } from "@bufbuild/protobuf";
import { z } from "zod";
import { defineTool } from "../definitions/tool.js";
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
    "Store a JSON value under a key in the tenant's durable memory, with optional tags and time to live; an " +
    "existing key's value, tags and expiry are replaced. Runs as capability memory.remember, through policy and the " +
    "audit ledger. If a person must approve it, a client with URL-mode elicitation has its user sent to the console " +
    "page and the call waits; otherwise (or on timeout) the error gives the approval_id for chaoscore_execute.",
  input: z.object({
    key: keySchema,
    value: z.unknown().describe("Any JSON value, at most 1 MiB as JSON text"),
    tags: tagsSchema.optional().describe("Up to 32, to filter recall by"),
    ttl_seconds: z
      .number()
      .int()
      .min(1)
      .max(MAX_TTL_SECONDS)
      .optional()
      .describe("Seconds until it expires; omitted: kept until replaced"),
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
