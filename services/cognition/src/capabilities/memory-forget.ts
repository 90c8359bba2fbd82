import { z } from "zod";
import { defineCapability } from "./capability.js";
import { keySchema } from "./memory-item.js";

/**
 * `memory.forget`: deletes the one item stored under a key in the tenant's memory.
 *
 * Risk `medium`: it destroys what a person asked to be kept, and it cannot be undone. The default
 * policy (approval at `high`) runs it and records the decision and outcome in the audit ledger;
 * an operator who wants a person to see each deletion lists it in `requireConfirmationFor` or
 * lowers `riskRules.requireApprovalAtOrAbove` to `medium`. It deletes by exact key only (never a
 * near match or a search), so what is approved is exactly what goes.
 */
export const memoryForgetCapability = defineCapability({
  name: "memory.forget",
  description:
    "Forget (delete) the one item stored under an exact key in durable memory (per tenant). Says whether an item " +
    "was there; forgetting a key that holds nothing changes nothing.",
  risk: "medium",
  inputSchema: z.object({
    key: keySchema.describe("The exact key to forget (1-512 characters)"),
  }),
  outputSchema: z.object({
    key: z.string(),
    deleted: z.boolean().describe("True when an item was stored under the key and is now gone"),
  }),
  annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
  async handler(input, ctx) {
    const res = await ctx.memory.forget({ key: input.key }, { ctx: ctx.call, signal: ctx.signal });
    return { key: input.key, deleted: res.deleted };
  },
});
