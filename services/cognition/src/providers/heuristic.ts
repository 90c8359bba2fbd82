import { ChaosError } from "@chaos-core/kit";
import type { AIProvider, JsonRequest, JsonResult, TextRequest, TextResult } from "./ai-provider.js";
import { rankCapabilities, type CapabilityDescriptor, type RankedCapability } from "./capability-ranking.js";
import { parseObjective, type ParsedObjective } from "./objective-parser.js";

export { rankCapabilities } from "./capability-ranking.js";
export { tokenize } from "./tokens.js";
export type { CapabilityDescriptor, RankedCapability } from "./capability-ranking.js";

/** The model name the heuristic provider reports: it uses none. */
export const NO_MODEL = "none";

/**
 * The offline provider: no model, no network, same input → same output. It reads everyday
 * objectives with a deterministic parser ({@link HeuristicProvider.parse}: remember, ask, list,
 * forget, fetch, and compositions of those), and grounds anything else by ranking capability
 * descriptions against the objective ({@link HeuristicProvider.rank}). It does
 * not pretend to be a model: `generateText` answers that no text was generated, and
 * `generateJson` refuses with `failed_precondition`, because the shapes the planner asks for
 * cannot be produced honestly without one.
 */
export class HeuristicProvider implements AIProvider {
  readonly id = "heuristic";
  readonly displayName = "Heuristic (offline, no model)";
  readonly model = null;

  isConfigured(): boolean {
    return true;
  }

  /** The offline reading of an everyday objective; see {@link parseObjective}. */
  parse(objective: string): ParsedObjective {
    return parseObjective(objective);
  }

  /** See {@link rankCapabilities}. */
  rank(objective: string, descriptors: readonly CapabilityDescriptor[], k: number): RankedCapability[] {
    return rankCapabilities(objective, descriptors, k);
  }

  async generateText(_request: TextRequest): Promise<TextResult> {
    return {
      text:
        "No language model was used: Chaos Core is running with the heuristic provider, which does not generate text. " +
        "To enable generation, set CHAOS_CORE_PROVIDER=openai (with OPENAI_API_KEY and OPENAI_MODEL) or " +
        "CHAOS_CORE_PROVIDER=openai-compatible (with OPENAI_BASE_URL and OPENAI_MODEL).",
      model: NO_MODEL,
      providerId: this.id,
    };
  }

  async generateJson(_request: JsonRequest): Promise<JsonResult> {
    throw new ChaosError(
      "failed_precondition",
      "the heuristic provider uses no model and does not generate free JSON; use rank() to ground a plan in capabilities",
    );
  }
}
