import { ChaosError } from "@chaos-core/kit";
import type OpenAI from "openai";
import type { AIProvider, JsonRequest, JsonResult, TextRequest, TextResult } from "./ai-provider.js";
import { createOpenAIClient, PROVIDER_MAX_RETRIES, PROVIDER_TIMEOUT_MS, jsonInstructions } from "./openai-client.js";
import { fromOpenAIError } from "./openai-errors.js";

/** Settings of the OpenAI-compatible provider; `config.ts` builds them from the environment. */
export interface OpenAICompatibleProviderOptions {
  /** The server's API root, usually ending in `/v1` (for example `http://127.0.0.1:11434/v1`). */
  readonly baseURL: string;
  readonly model: string;
  /** Sent as a bearer token when set; local servers usually need none. */
  readonly apiKey?: string;
  /** Per-attempt timeout in milliseconds (default {@link PROVIDER_TIMEOUT_MS}). */
  readonly timeoutMs?: number;
  /** Retries by the `openai` package (default {@link PROVIDER_MAX_RETRIES}). */
  readonly maxRetries?: number;
}

/**
 * Any server that speaks OpenAI chat completions (`POST /v1/chat/completions`): vLLM, Ollama,
 * LM Studio, llama.cpp… JSON requests do not send `response_format`, because support for it
 * differs from server to server; the instructions ask for JSON and `generateValidated` checks it.
 */
export class OpenAICompatibleProvider implements AIProvider {
  readonly id = "openai-compatible";
  readonly displayName = "OpenAI-compatible server (chat completions)";
  readonly model: string;
  readonly #apiKey: string | undefined;
  readonly #baseURL: string;
  readonly #client: OpenAI | undefined;

  constructor(options: OpenAICompatibleProviderOptions) {
    this.model = options.model;
    this.#apiKey = options.apiKey === "" ? undefined : options.apiKey;
    this.#baseURL = options.baseURL;
    this.#client = this.isConfigured()
      ? createOpenAIClient({
          ...(this.#apiKey === undefined ? {} : { apiKey: this.#apiKey }),
          baseURL: options.baseURL,
          timeoutMs: options.timeoutMs ?? PROVIDER_TIMEOUT_MS,
          maxRetries: options.maxRetries ?? PROVIDER_MAX_RETRIES,
        })
      : undefined;
  }

  isConfigured(): boolean {
    return this.#baseURL !== "" && this.model !== "";
  }

  async generateText(request: TextRequest): Promise<TextResult> {
    const answer = await this.#complete(request.instructions, request.input, request.maxOutputTokens, request.signal);
    return { text: answer.output, model: answer.model, providerId: this.id };
  }

  async generateJson(request: JsonRequest): Promise<JsonResult> {
    const instructions = jsonInstructions(request.instructions, request.shapeDescription);
    const answer = await this.#complete(instructions, request.input, undefined, request.signal);
    return { raw: answer.output, model: answer.model, providerId: this.id };
  }

  async #complete(
    instructions: string,
    input: string,
    maxTokens: number | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ output: string; model: string }> {
    const client = this.#client;
    if (client === undefined) {
      throw new ChaosError(
        "failed_precondition",
        "the openai-compatible provider is not configured: set OPENAI_BASE_URL and OPENAI_MODEL",
      );
    }
    let completion: OpenAI.Chat.Completions.ChatCompletion;
    try {
      completion = await client.chat.completions.create(
        {
          model: this.model,
          messages: [
            { role: "system", content: instructions },
            { role: "user", content: input },
          ],
          // max_tokens rather than max_completion_tokens: it is the one compatible servers know.
          ...(maxTokens === undefined ? {} : { max_tokens: maxTokens }),
        },
        signal === undefined ? {} : { signal },
      );
    } catch (err) {
      throw fromOpenAIError(err, this.id, this.#apiKey);
    }
    const choice = completion.choices[0];
    const output = choice?.message.content ?? "";
    if (output === "") {
      throw new ChaosError("internal", `${this.id}: the model returned no text (${choice?.finish_reason ?? "no choices"})`);
    }
    return { output, model: completion.model || this.model };
  }
}
