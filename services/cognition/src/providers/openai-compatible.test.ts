import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { expectChaosError } from "../test-support/expect-error.js";
import { chatReply, errorReply, startOpenAIStandIn, type OpenAIStandIn } from "../test-support/openai-stand-in.js";
import { OpenAICompatibleProvider } from "./openai-compatible.js";
import { generateValidated } from "./validated-json.js";

const KEY = "local-key-93b1d0-never-show-me";
const MODEL = "llama3.1:8b";

let server: OpenAIStandIn;
beforeEach(async () => {
  server = await startOpenAIStandIn();
});
afterEach(async () => {
  await server.close();
});

function provider(overrides: { timeoutMs?: number; apiKey?: string } = {}): OpenAICompatibleProvider {
  return new OpenAICompatibleProvider({ baseURL: server.baseURL, model: MODEL, maxRetries: 0, ...overrides });
}

describe("openai-compatible provider (chat completions against a local stand-in)", () => {
  it("sends instructions as the system message and input as the user message, with no key when none is set", async () => {
    server.script(chatReply("Hello back."));
    const result = await provider().generateText({ instructions: "Be terse.", input: "Hello", maxOutputTokens: 20 });

    expect(result).toEqual({ text: "Hello back.", model: "llama-stand-in", providerId: "openai-compatible" });
    const [request] = server.requests;
    expect(request?.path).toBe("/v1/chat/completions");
    expect(request?.headers).not.toHaveProperty("authorization");
    expect(request?.body).toMatchObject({
      model: MODEL,
      max_tokens: 20,
      messages: [
        { role: "system", content: "Be terse." },
        { role: "user", content: "Hello" },
      ],
    });
  });

  it("sends the key as a bearer token when one is set", async () => {
    server.script(chatReply("ok"));
    await provider({ apiKey: KEY }).generateText({ instructions: "i", input: "x" });
    expect(server.requests[0]?.headers.authorization).toBe(`Bearer ${KEY}`);
  });

  it("asks for JSON in the system message without response_format, and returns the raw answer", async () => {
    server.script(chatReply("```json\n{\"steps\": []}\n```"));
    const result = await provider().generateJson({ instructions: "Plan.", input: "objective", shapeDescription: "{ steps: [] }" });
    expect(result.raw).toBe("```json\n{\"steps\": []}\n```");
    const body = server.requests[0]?.body;
    expect(body).not.toHaveProperty("response_format");
    expect(body?.messages).toEqual([
      { role: "system", content: expect.stringMatching(/^Plan\.\n\n.*JSON object.*\{ steps: \[\] \}$/s) },
      { role: "user", content: "objective" },
    ]);
  });

  it("accepts a good second answer after a malformed first one, through generateValidated", async () => {
    const schema = z.object({ steps: z.array(z.string()) });
    server.script(chatReply('{"steps": "not a list"}'), chatReply('```json\n{"steps": ["a", "b"]}\n```'));
    const result = await generateValidated(provider(), schema, { instructions: "Plan.", input: "o", shapeDescription: "{ steps: string[] }" });
    expect(result).toMatchObject({ value: { steps: ["a", "b"] }, attempts: 2, providerId: "openai-compatible" });
    const retried = server.requests[1]?.body.messages as Array<{ content: string }>;
    expect(retried[0]?.content).toMatch(/previous answer was rejected because the JSON does not have the expected shape:[\s\S]*steps/);
  });

  it("maps a hang past the timeout to deadline_exceeded", async () => {
    server.script({ kind: "hang" });
    await expectChaosError(provider({ timeoutMs: 150, apiKey: KEY }).generateText({ instructions: "i", input: "x" }), "deadline_exceeded", [KEY]);
  });

  it("maps 429 to resource_exhausted and 500 to unavailable, without the key", async () => {
    server.script(errorReply(429, "too many requests", { "retry-after": "3" }), errorReply(500, `boom for ${KEY}`));
    const limited = await expectChaosError(provider({ apiKey: KEY }).generateText({ instructions: "i", input: "x" }), "resource_exhausted", [KEY]);
    expect(limited.message).toMatch(/retry after 3 s/);
    const failed = await expectChaosError(provider({ apiKey: KEY }).generateText({ instructions: "i", input: "x" }), "unavailable", [KEY]);
    expect(failed.message).toMatch(/HTTP 500.*boom for \[redacted\]/);
  });

  it("maps an unknown model (404) to failed_precondition naming OPENAI_MODEL", async () => {
    server.script(errorReply(404, "model 'llama3.1:8b' not found"));
    const err = await expectChaosError(provider().generateText({ instructions: "i", input: "x" }), "failed_precondition");
    expect(err.message).toMatch(/OPENAI_MODEL/);
  });

  it("reports a completion with no content instead of returning empty text", async () => {
    server.script(chatReply(""));
    await expectChaosError(provider().generateText({ instructions: "i", input: "x" }), "internal");
  });
});
