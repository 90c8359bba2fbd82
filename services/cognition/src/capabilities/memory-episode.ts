import { z } from "zod";
import { defineCapability } from "./capability.js";
import { keySchema, storeItem, tagsSchema, ttlSecondsSchema } from "./memory-item.js";
import { memoryRememberCapability } from "./memory-remember.js";

/**
 * The largest episode or procedure value, as UTF-8 JSON text. An episode is a summary (statuses,
 * problems, output shapes), never a transcript; the brain compacts a long run's episode to fit
 * (brain/memory-records.ts), so the bound never costs a run its record.
 */
export const MAX_BOOKKEEPING_VALUE_BYTES = 64 * 1024;

/** The namespace of the brain's own tags; bookkeeping writes carry no other. */
const TAG_PREFIX = "chaoscore.";

/**
 * `memory.episode`: the cognitive core's own bookkeeping, an episode (`episode:…`) or a procedure
 * (`procedure:…`) written to the tenant's memory. Internal: only the brain runs it, through the
 * executor like every step, so policy decides first and the decision and outcome are in the
 * ledger. It implies `memory.remember` (the write it makes underneath): a DENY on either holds.
 */
export const memoryEpisodeCapability = defineCapability({
  name: "memory.episode",
  description:
    "The cognitive core's own bookkeeping: record what happened in a run (an episode) or the capability " +
    "sequence that succeeded (a procedure) in durable memory. Internal: never planned and refused as an " +
    "explicit step; governed by policy as itself and as memory.remember.",
  risk: "low",
  implies: [memoryRememberCapability.name],
  internal: true,
  inputSchema: z.object({
    key: keySchema.regex(/^(episode|procedure):/, "must start with episode: or procedure:"),
    value: z
      .json()
      .refine((v) => Buffer.byteLength(JSON.stringify(v), "utf8") <= MAX_BOOKKEEPING_VALUE_BYTES, {
        message: `must be at most ${MAX_BOOKKEEPING_VALUE_BYTES} bytes as JSON text`,
      }),
    tags: tagsSchema.refine((tags) => tags.every((t) => t.startsWith(TAG_PREFIX)), { message: `every tag must start with ${TAG_PREFIX}` }),
    ttl_seconds: ttlSecondsSchema,
  }),
  // The same write underneath as memory.remember: the same output and hints (a procedure
  // replaces the previous one for its objective).
  outputSchema: memoryRememberCapability.outputSchema,
  annotations: memoryRememberCapability.annotations,
  handler: storeItem,
});
