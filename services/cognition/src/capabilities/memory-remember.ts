import { z } from "zod";
import { defineCapability } from "./capability.js";
import { keyFromPhrase } from "../providers/objective-parser.js";
import { keySchema, memoryItemOutput, storeItem, tagsSchema, ttlSecondsSchema } from "./memory-item.js";

// "remember [that] <fact>", and a fact of the form "<subject> is|are|=|: <value>".
const REMEMBER = /\bremember\s+(?:that\s+)?(.+)$/isu;
const FACT = /^(.+?)\s*(?:\s(?:is|are)\s|=|:)\s*(.+)$/isu;

/** `memory.remember`: stores a JSON value under a key in the tenant's durable memory. */
export const memoryRememberCapability = defineCapability({
  name: "memory.remember",
  description:
    "Remember a fact: store a JSON value under a key in durable memory (per tenant), with optional tags and " +
    "a time to live. Storing under an existing key replaces its value, tags and expiry.",
  risk: "low",
  inputSchema: z.object({
    key: keySchema.describe("The key to store under (1-512 characters); an existing item with this key is replaced"),
    value: z.json().describe("Any JSON value, at most 1 MiB as JSON text"),
    tags: tagsSchema.optional().describe("Up to 32 tags (1-64 characters each) to filter recall by"),
    ttl_seconds: ttlSecondsSchema
      .optional()
      .describe("Seconds until the item expires; omit to keep it until it is replaced"),
  }),
  outputSchema: z.object({ item: memoryItemOutput }),
  annotations: {
    readOnlyHint: false,
    // Writing under an existing key replaces what was there.
    destructiveHint: true,
    idempotentHint: true,
    openWorldHint: false,
  },
  fromObjective(objective) {
    const said = REMEMBER.exec(objective.trim())?.[1]?.trim().replace(/[.!]+$/, "");
    if (!said) return undefined;
    const fact = FACT.exec(said);
    // The same key the offline parser gives ("the build server" → build-server).
    const subject = keyFromPhrase(fact?.[1] ?? said);
    if (subject === "") return undefined;
    return { key: subject, value: fact?.[2]?.trim() ?? said, tags: ["note"] };
  },
  handler: storeItem,
});
