/** A request for free text. */
export interface TextRequest {
  /** System-level guidance: who the model is and how to answer. */
  readonly instructions: string;
  /** The user-level content the model works on. */
  readonly input: string;
  /** Upper bound on generated tokens; the provider's default when omitted. */
  readonly maxOutputTokens?: number;
  /** Cancels the call; an aborted call rejects with a `cancelled` ChaosError. */
  readonly signal?: AbortSignal;
}

/** A request for one JSON object. The answer is raw text: callers validate it (see `generateValidated`). */
export interface JsonRequest {
  readonly instructions: string;
  readonly input: string;
  /** Plain-language (or JSON Schema) description of the object the caller expects. */
  readonly shapeDescription: string;
  readonly signal?: AbortSignal;
}

/** What a provider answered to a text request. */
export interface TextResult {
  readonly text: string;
  /** The model that answered, as the provider reported it; `none` when no model was used. */
  readonly model: string;
  readonly providerId: string;
}

/** What a provider answered to a JSON request: untrusted text that should hold one JSON object. */
export interface JsonResult {
  readonly raw: string;
  readonly model: string;
  readonly providerId: string;
}

/**
 * The one interface between the cognitive core and a language model. Nothing outside a provider
 * file imports a provider SDK. Every failure is a kit `ChaosError` with a stable code
 * (`unavailable`, `resource_exhausted`, `deadline_exceeded`, `cancelled`, `failed_precondition`,
 * `invalid_argument`, `internal`), and no error message ever contains a credential.
 */
export interface AIProvider {
  /** Stable identifier, the value of `CHAOS_CORE_PROVIDER` that selects it. */
  readonly id: string;
  readonly displayName: string;
  /** The configured model name; `null` for providers that use no model. */
  readonly model: string | null;
  /** Whether the provider has what it needs to answer (for example a key and a model). */
  isConfigured(): boolean;
  generateText(request: TextRequest): Promise<TextResult>;
  generateJson(request: JsonRequest): Promise<JsonResult>;
}

/** What `chaoscore_inspect` may show about a provider. It never carries a credential. */
export interface ProviderDescription {
  readonly id: string;
  readonly displayName: string;
  readonly model: string | null;
  readonly configured: boolean;
}

/** Describes a provider for inspection, built field by field so that no secret can slip in. */
export function describeProvider(provider: AIProvider): ProviderDescription {
  return {
    id: provider.id,
    displayName: provider.displayName,
    model: provider.model,
    configured: provider.isConfigured(),
  };
}
