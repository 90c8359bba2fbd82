export { describeProvider } from "./providers/ai-provider.js";
export type {
  AIProvider,
  JsonRequest,
  JsonResult,
  ProviderDescription,
  TextRequest,
  TextResult,
} from "./providers/ai-provider.js";
export { loadProviderConfig, PROVIDER_IDS } from "./providers/config.js";
export type { ProviderConfig, ProviderId, ProviderSelection } from "./providers/config.js";
export { HeuristicProvider, NO_MODEL, rankCapabilities, tokenize } from "./providers/heuristic.js";
export type { CapabilityDescriptor, RankedCapability } from "./providers/heuristic.js";
export { createProvider } from "./providers/index.js";
export type { ProviderLimits } from "./providers/index.js";
export { PROVIDER_MAX_RETRIES, PROVIDER_TIMEOUT_MS } from "./providers/openai-client.js";
export { OPENAI_DEFAULT_BASE_URL, OpenAIProvider } from "./providers/openai.js";
export type { OpenAIProviderOptions } from "./providers/openai.js";
export { OpenAICompatibleProvider } from "./providers/openai-compatible.js";
export type { OpenAICompatibleProviderOptions } from "./providers/openai-compatible.js";
export { generateValidated, stripJsonFence } from "./providers/validated-json.js";
export type { ValidatedJson } from "./providers/validated-json.js";
