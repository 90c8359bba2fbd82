import type { AIProvider } from "./ai-provider.js";
import type { ProviderConfig } from "./config.js";
import { HeuristicProvider } from "./heuristic.js";
import { OpenAIProvider } from "./openai.js";
import { OpenAICompatibleProvider } from "./openai-compatible.js";

/** Transport limits for the model providers; the defaults are explained in `openai-client.ts`. */
export interface ProviderLimits {
  readonly timeoutMs?: number;
  readonly maxRetries?: number;
}

/**
 * Builds the provider `config` selects. It is the one place a provider is registered: adding one
 * is a file implementing `AIProvider`, an id in `PROVIDER_IDS`, and a case here.
 */
export function createProvider(config: ProviderConfig, limits: ProviderLimits = {}): AIProvider {
  switch (config.id) {
    case "openai":
      return new OpenAIProvider({
        apiKey: config.apiKey,
        model: config.model,
        ...(config.baseURL === undefined ? {} : { baseURL: config.baseURL }),
        ...limits,
      });
    case "openai-compatible":
      return new OpenAICompatibleProvider({
        baseURL: config.baseURL,
        model: config.model,
        ...(config.apiKey === undefined ? {} : { apiKey: config.apiKey }),
        ...limits,
      });
    case "heuristic":
      return new HeuristicProvider();
  }
}
