import { ChaosError } from "@chaos-core/kit";
import type OpenAI from "openai";
import type { AIProvider, JsonRequest, JsonResult, TextRequest, TextResult } from "./ai-provider.js";
import { createOpenAIClient, PROVIDER_MAX_RETRIES, PROVIDER_TIMEOUT_MS, jsonInstructions } from "./openai-client.js";
import { fromOpenAIError } from "./openai-errors.js";

/** The public endpoint, used unless a proxy or test stand-in is configured. */
export const OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1";

/** Settings of the OpenAI provider; `config.ts` builds them from the environment. */
export interface OpenAIProviderOptions {
  readonly apiKey: string;
  readonly model: string;
  /** A proxy or test stand-in; the public endpoint when absent. */
  readonly baseURL?: string;
  /** Per-attempt timeout in milliseconds (default {@link PROVIDER_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
  /** Retries by the `openai` package (default {@link PROVIDER_MAX_RETRIES}). */
  readonly maxRetries?: number;
}

/**
 * OpenAI through the Responses API (`POST /v1/responses`). Responses are created with
 * `store: false`: Chaos Core keeps its own episodes and has no reason to leave objectives and
 * plans stored at the provider.
 */
export class OpenAIProvider implements AIProvider {
  readonly id = "openai";
  readonly displayName = "OpenAI (Responses API)";
  readonly model: string;
  readonly #apiKey: string;
  readonly #client: OpenAI | undefined;

  constructor(options: OpenAIProviderOptions) {
    this.model = options.model;
    this.#apiKey = options.apiKey;
    // No client without a key: the calls then fail with failed_precondition instead of sending
    // an unauthenticated request.
    this.#client = this.isConfigured()
      ? createOpenAIClient({
          apiKey: options.apiKey,
          baseURL: options.baseURL ?? OPENAI_DEFAULT_BASE_URL,
          timeoutMs: options.timeoutMs ?? PROVIDER_TIMEOUT_MS,
          maxRetries: options.maxRetries ?? PROVIDER_MAX_RETRIES,
        })
      : undefined;
  }

  isConfigured(): boolean {
    return this.#apiKey !== "" && this.model !== "";
  }

  async generateText(request: TextRequest): Promise<TextResult> {
    const text = await this.#create(request.instructions, request.input, request.maxOutputTokens, false, request.signal);
    return { text: text.output, model: text.model, providerId: this.id };
  }

  async generateJson(request: JsonRequest): Promise<JsonResult> {
    const instructions = jsonInstructions(request.instructions, request.shapeDescription);
    const answer = await this.#create(instructions, request.input, undefined, true, request.signal);
    return { raw: answer.output, model: answer.model, providerId: this.id };
  }

  async #create(
    instructions: string,
    input: string,
    maxOutputTokens: number | undefined,
    json: boolean,
    signal: AbortSignal | undefined,
  ): Promise<{ output: string; model: string }> {
    const client = this.#client;
    if (client === undefined) {
      throw new ChaosError("failed_precondition", "the openai provider is not configured: set OPENAI_API_KEY and OPENAI_MODEL");
    }
    let response: OpenAI.Responses.Response;
    try {
      response = await client.responses.create(
        {
          model: this.model,
          instructions,
          input,
          store: false,
          ...(maxOutputTokens === undefined ? {} : { max_output_tokens: maxOutputTokens }),
          // JSON mode guarantees syntax, not shape; generateValidated checks the shape.
          ...(json ? { text: { format: { type: "json_object" as const } } } : {}),
        },
        signal === undefined ? {} : { signal },
      );
    } catch (err) {
      throw fromOpenAIError(err, this.id, this.#apiKey);
    }
    const output = response.output_text;
    if (output === "") {
      const why = response.incomplete_details?.reason ?? response.status ?? "no output";
      throw new ChaosError("internal", `${this.id}: the model returned no text (${why})`);
    }
    return { output, model: response.model || this.model };
  }
}
