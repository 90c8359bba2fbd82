import { COUNCIL_PROMPTS } from "./council.js";
import type { PromptDefinition } from "../definitions/prompt.js";

/**
 * The prompt surface. Later issues add prompts by adding definitions here; nothing else
 * registers a prompt.
 */
export const PROMPT_DEFINITIONS: readonly PromptDefinition[] = [...COUNCIL_PROMPTS];
