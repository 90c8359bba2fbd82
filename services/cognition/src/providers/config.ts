import { parseEnv, type Env } from "@chaos-core/kit";
import { z } from "zod";

/** The values `CHAOS_CORE_PROVIDER` accepts. */
export const PROVIDER_IDS = ["openai", "openai-compatible", "heuristic"] as const;
export type ProviderId = (typeof PROVIDER_IDS)[number];

/** How the provider was chosen: named in `CHAOS_CORE_PROVIDER`, or inferred from the other variables. */
export type ProviderSelection = "explicit" | "inferred";

/** The AI provider configuration, parsed once at start. Holds the API key: never log or return it. */
export type ProviderConfig =
  | {
      readonly id: "openai";
      readonly selection: ProviderSelection;
      readonly apiKey: string;
      readonly model: string;
      /** A proxy or test stand-in for the Responses API; the public endpoint when absent. */
      readonly baseURL?: string;
    }
  | {
      readonly id: "openai-compatible";
      readonly selection: ProviderSelection;
      readonly baseURL: string;
      readonly model: string;
      /** Many local servers (Ollama, LM Studio) need none. */
      readonly apiKey?: string;
    }
  | { readonly id: "heuristic"; readonly selection: ProviderSelection };

const schema = z
  .object({
    CHAOS_CORE_PROVIDER: z.enum(PROVIDER_IDS, { error: `must be one of ${PROVIDER_IDS.join(", ")}` }).optional(),
    OPENAI_API_KEY: z.string().optional(),
    OPENAI_MODEL: z.string().optional(),
    OPENAI_BASE_URL: z
      .string()
      .refine((v) => /^https?:\/\/\S+$/.test(v), "must be an http:// or https:// URL")
      .optional(),
  })
  .superRefine((env, ctx) => {
    const id = selectProvider(env);
    const need = (name: "OPENAI_API_KEY" | "OPENAI_MODEL" | "OPENAI_BASE_URL", why: string) => {
      if (env[name] === undefined) ctx.addIssue({ code: "custom", path: [name], message: `is required ${why}` });
    };
    if (id === "openai") {
      need("OPENAI_API_KEY", "for the openai provider");
      need("OPENAI_MODEL", "for the openai provider (the model name is configured once, here)");
    } else if (id === "openai-compatible") {
      need("OPENAI_BASE_URL", "for the openai-compatible provider (the server's /v1 URL)");
      need("OPENAI_MODEL", "for the openai-compatible provider (the model name the server serves)");
    }
  });

type RawEnv = z.input<typeof schema>;

/**
 * The rule when `CHAOS_CORE_PROVIDER` is unset: a base URL means a compatible server (chat
 * completions is what every such server speaks), a key alone means OpenAI, and neither means the
 * offline heuristic provider, so a fresh machine works. Anything else must be named explicitly —
 * for example OpenAI's Responses API behind a proxy is `CHAOS_CORE_PROVIDER=openai` with
 * `OPENAI_BASE_URL`.
 */
function selectProvider(env: RawEnv): ProviderId {
  if (env.CHAOS_CORE_PROVIDER !== undefined) return env.CHAOS_CORE_PROVIDER;
  if (env.OPENAI_BASE_URL !== undefined) return "openai-compatible";
  if (env.OPENAI_API_KEY !== undefined) return "openai";
  return "heuristic";
}

/**
 * Reads the AI provider configuration from an environment record. `CHAOS_CORE_PROVIDER` selects
 * the provider; when it is unset, `OPENAI_BASE_URL` means `openai-compatible`, else
 * `OPENAI_API_KEY` means `openai`, else `heuristic` (so a fresh machine works offline). A provider
 * that is selected or inferred but not fully configured is a `ConfigError` naming the missing
 * variable — never a silent fall back to another provider. Empty variables count as unset.
 */
export function loadProviderConfig(env: Env = process.env): ProviderConfig {
  const e = parseEnv(schema, env);
  const selection: ProviderSelection = e.CHAOS_CORE_PROVIDER === undefined ? "inferred" : "explicit";
  const id = selectProvider(e);
  // The refinement above guarantees the variables each branch reads.
  switch (id) {
    case "openai":
      return {
        id,
        selection,
        apiKey: e.OPENAI_API_KEY as string,
        model: e.OPENAI_MODEL as string,
        ...(e.OPENAI_BASE_URL === undefined ? {} : { baseURL: e.OPENAI_BASE_URL }),
      };
    case "openai-compatible":
      return {
        id,
        selection,
        baseURL: e.OPENAI_BASE_URL as string,
        model: e.OPENAI_MODEL as string,
        ...(e.OPENAI_API_KEY === undefined ? {} : { apiKey: e.OPENAI_API_KEY }),
      };
    case "heuristic":
      return { id, selection };
  }
}
