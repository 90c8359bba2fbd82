import { z } from "zod";
import { defineCapability } from "./capability.js";

const DEFAULT_INSTRUCTIONS = "Answer the request accurately and concisely. Say so when you do not know.";

/**
 * `cognition.generate_text`: free text from the active AI provider.
 *
 * Risk `medium`, not `low`: the prompt (which a plan may fill with recalled memory) leaves the
 * deployment for a third-party model provider, and every call costs money. It changes nothing
 * in Chaos Core or elsewhere, so it is read-only and idempotent in the MCP sense, and open-world
 * because it reaches an outside service. The default policy (approval at `high`) lets it run;
 * an operator who wants a human to see what leaves can require approval at `medium`.
 */
export const generateTextCapability = defineCapability({
  name: "cognition.generate_text",
  description:
    "Generate free text, such as a summary, a draft or an answer, with the active language model. " +
    "The prompt is sent to the configured model provider; the offline heuristic provider generates none.",
  risk: "medium",
  inputSchema: z.object({
    prompt: z.string().min(1).max(100_000).describe("What to write about, with any material it needs"),
    instructions: z.string().min(1).max(10_000).optional().describe("How to answer (tone, format, length)"),
    max_output_tokens: z.number().int().min(1).max(32_768).optional().describe("Upper bound on generated tokens"),
  }),
  outputSchema: z.object({
    text: z.string(),
    model: z.string().min(1).describe('The model that answered; "none" when no model was used'),
    provider: z.string().min(1),
  }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: true },
  fromObjective(objective) {
    const prompt = objective.trim();
    return prompt === "" ? undefined : { prompt: prompt.slice(0, 100_000) };
  },
  async handler(input, ctx) {
    const result = await ctx.provider.generateText({
      instructions: input.instructions ?? DEFAULT_INSTRUCTIONS,
      input: input.prompt,
      ...(input.max_output_tokens !== undefined ? { maxOutputTokens: input.max_output_tokens } : {}),
      signal: ctx.signal,
    });
    return { text: result.text, model: result.model, provider: result.providerId };
  },
});
