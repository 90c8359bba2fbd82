import { z } from "zod";

// The limits the memory service enforces, mirrored here so a bad argument is refused by the
// schema (naming the field) before any call is made. Cognition's memory capabilities
// (services/cognition/src/capabilities/memory-item.ts) check the same limits again: the edge
// does not depend on cognition at runtime, so the two packages each keep these few shapes.
const KEY_MAX_CHARS = 512;
const TAG_MAX_CHARS = 64;
const MAX_TAGS = 32;

/** A memory key, as the memory service accepts it. */
export const keySchema = z.string().min(1).max(KEY_MAX_CHARS);
/** A tag list, as the memory service accepts it. */
export const tagsSchema = z.array(z.string().min(1).max(TAG_MAX_CHARS)).max(MAX_TAGS);

/**
 * One memory item as the memory tools return it: the output of cognition's memory.remember and
 * memory.recall capabilities (which check it more strictly: JSON value, ISO 8601 datetimes), as
 * this tool surface publishes it.
 */
export const memoryItemOutput = z.object({
  key: z.string(),
  value: z.unknown().describe("The stored JSON value"),
  tags: z.array(z.string()),
  created_at: z.string().describe("ISO 8601"),
  updated_at: z.string().describe("ISO 8601"),
  expires_at: z.string().optional().describe("ISO 8601; absent when the item never expires"),
});
