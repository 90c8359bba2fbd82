import { ConfigError } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { describeProvider } from "./ai-provider.js";
import { loadProviderConfig } from "./config.js";
import { HeuristicProvider } from "./heuristic.js";
import { createProvider } from "./index.js";
import { OpenAIProvider } from "./openai.js";
import { OpenAICompatibleProvider } from "./openai-compatible.js";

const KEY = "sk-config-test-5d1e-never-show-me";

function configError(env: Record<string, string | undefined>): string {
  try {
    loadProviderConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("expected a ConfigError");
}

describe("provider config: explicit selection", () => {
  it("selects openai with key and model, and an optional proxy URL", () => {
    expect(loadProviderConfig({ CHAOS_CORE_PROVIDER: "openai", OPENAI_API_KEY: KEY, OPENAI_MODEL: "gpt-x" })).toEqual({
      id: "openai",
      selection: "explicit",
      apiKey: KEY,
      model: "gpt-x",
    });
    expect(
      loadProviderConfig({ CHAOS_CORE_PROVIDER: "openai", OPENAI_API_KEY: KEY, OPENAI_MODEL: "gpt-x", OPENAI_BASE_URL: "https://proxy.internal/v1" }),
    ).toMatchObject({ id: "openai", baseURL: "https://proxy.internal/v1" });
  });

  it("selects openai-compatible with base URL and model, the key optional", () => {
    expect(
      loadProviderConfig({ CHAOS_CORE_PROVIDER: "openai-compatible", OPENAI_BASE_URL: "http://127.0.0.1:11434/v1", OPENAI_MODEL: "llama3" }),
    ).toEqual({ id: "openai-compatible", selection: "explicit", baseURL: "http://127.0.0.1:11434/v1", model: "llama3" });
    expect(
      loadProviderConfig({ CHAOS_CORE_PROVIDER: "openai-compatible", OPENAI_BASE_URL: "http://vllm:8000/v1", OPENAI_MODEL: "m", OPENAI_API_KEY: KEY }),
    ).toMatchObject({ apiKey: KEY });
  });

  it("selects heuristic even when model variables are set", () => {
    expect(loadProviderConfig({ CHAOS_CORE_PROVIDER: "heuristic", OPENAI_API_KEY: KEY, OPENAI_MODEL: "gpt-x" })).toEqual({
      id: "heuristic",
      selection: "explicit",
    });
  });
});

describe("provider config: inferred selection when CHAOS_CORE_PROVIDER is unset", () => {
  it("is heuristic on a fresh machine, so npm start works without a key", () => {
    expect(loadProviderConfig({})).toEqual({ id: "heuristic", selection: "inferred" });
    expect(loadProviderConfig({ OPENAI_MODEL: "gpt-x", OPENAI_API_KEY: "", OPENAI_BASE_URL: "" })).toEqual({ id: "heuristic", selection: "inferred" });
  });

  it("is openai with a key alone, and openai-compatible with a base URL (key or not)", () => {
    expect(loadProviderConfig({ OPENAI_API_KEY: KEY, OPENAI_MODEL: "gpt-x" })).toMatchObject({ id: "openai", selection: "inferred" });
    expect(loadProviderConfig({ OPENAI_BASE_URL: "http://lm:1234/v1", OPENAI_MODEL: "m" })).toMatchObject({ id: "openai-compatible", selection: "inferred" });
    expect(loadProviderConfig({ OPENAI_BASE_URL: "http://lm:1234/v1", OPENAI_MODEL: "m", OPENAI_API_KEY: KEY })).toMatchObject({
      id: "openai-compatible",
      apiKey: KEY,
    });
  });
});

describe("provider config: misconfiguration names the variable and never falls back", () => {
  it("rejects an unknown provider", () => {
    expect(configError({ CHAOS_CORE_PROVIDER: "anthropic" })).toMatch(/CHAOS_CORE_PROVIDER: must be one of openai, openai-compatible, heuristic/);
  });

  it("openai without a key or a model", () => {
    expect(configError({ CHAOS_CORE_PROVIDER: "openai", OPENAI_MODEL: "gpt-x" })).toMatch(/OPENAI_API_KEY: is required for the openai provider/);
    expect(configError({ CHAOS_CORE_PROVIDER: "openai", OPENAI_API_KEY: KEY })).toMatch(/OPENAI_MODEL: is required for the openai provider/);
    const both = configError({ CHAOS_CORE_PROVIDER: "openai" });
    expect(both).toMatch(/OPENAI_API_KEY/);
    expect(both).toMatch(/OPENAI_MODEL/);
  });

  it("a key without a model is an error, not a quiet switch to the heuristic provider", () => {
    const message = configError({ OPENAI_API_KEY: KEY });
    expect(message).toMatch(/OPENAI_MODEL: is required for the openai provider/);
    expect(message).not.toContain(KEY);
  });

  it("openai-compatible without a base URL or a model, or with a URL that is not one", () => {
    expect(configError({ CHAOS_CORE_PROVIDER: "openai-compatible", OPENAI_MODEL: "m" })).toMatch(/OPENAI_BASE_URL: is required for the openai-compatible provider/);
    expect(configError({ CHAOS_CORE_PROVIDER: "openai-compatible", OPENAI_BASE_URL: "http://h/v1" })).toMatch(/OPENAI_MODEL: is required for the openai-compatible provider/);
    expect(configError({ OPENAI_BASE_URL: "localhost:11434", OPENAI_MODEL: "m" })).toMatch(/OPENAI_BASE_URL: must be an http:\/\/ or https:\/\/ URL/);
  });
});

describe("createProvider and describeProvider", () => {
  it("builds the selected provider, and describes it without the key", () => {
    const openai = createProvider(loadProviderConfig({ OPENAI_API_KEY: KEY, OPENAI_MODEL: "gpt-x" }));
    expect(openai).toBeInstanceOf(OpenAIProvider);
    const described = describeProvider(openai);
    expect(described).toEqual({ id: "openai", displayName: "OpenAI (Responses API)", model: "gpt-x", configured: true });
    expect(JSON.stringify(described)).not.toContain(KEY);

    const compatible = createProvider(loadProviderConfig({ OPENAI_BASE_URL: "http://127.0.0.1:1/v1", OPENAI_MODEL: "m", OPENAI_API_KEY: KEY }));
    expect(compatible).toBeInstanceOf(OpenAICompatibleProvider);
    expect(JSON.stringify(describeProvider(compatible))).not.toContain(KEY);

    expect(createProvider(loadProviderConfig({}))).toBeInstanceOf(HeuristicProvider);
  });
});
