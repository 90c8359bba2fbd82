import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { expectChaosError } from "../test-support/expect-error.js";
import {
  errorReply,
  responsesReply,
  startOpenAIStandIn,
  type OpenAIStandIn,
  type ScriptedReply,
} from "../test-support/openai-stand-in.js";
import { OpenAIProvider } from "./openai.js";
import { generateValidated } from "./validated-json.js";

const KEY = "sk-test-4f9a1c7e-never-show-me";
const MODEL = "gpt-test-model";

let server: OpenAIStandIn;
beforeEach(async () => {
  server = await startOpenAIStandIn();
});
afterEach(async () => {
  await server.close();
});

function provider(overrides: { timeoutMs?: number; maxRetries?: number; apiKey?: string } = {}): OpenAIProvider {
  return new OpenAIProvider({ apiKey: KEY, model: MODEL, baseURL: server.baseURL, maxRetries: 0, ...overrides });
}

describe("openai provider (Responses API against a local stand-in)", () => {
  it("sends the configured model, instructions and input to /v1/responses with the key, and returns the text", async () => {
    server.script(responsesReply("Paris.", "gpt-test-model-2026-05-01"));
    const result = await provider().generateText({ instructions: "Answer briefly.", input: "Capital of France?", maxOutputTokens: 50 });

    expect(result).toEqual({ text: "Paris.", model: "gpt-test-model-2026-05-01", providerId: "openai" });
    expect(server.requests).toHaveLength(1);
    const [request] = server.requests;
    expect(request?.path).toBe("/v1/responses");
    expect(request?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(request?.body).toMatchObject({
      model: MODEL,
      instructions: "Answer briefly.",
      input: "Capital of France?",
      max_output_tokens: 50,
      store: false,
    });
    expect(request?.body).not.toHaveProperty("text");
  });

  it("asks for JSON mode with the shape in the instructions, and returns the raw answer untouched", async () => {
    server.script(responsesReply('{"goal": "x"}'));
    const result = await provider().generateJson({ instructions: "Analyse.", input: "objective", shapeDescription: "{ goal: string }" });

    expect(result).toEqual({ raw: '{"goal": "x"}', model: "gpt-stand-in-2026-01-01", providerId: "openai" });
    const body = server.requests[0]?.body;
    expect(body?.text).toEqual({ format: { type: "json_object" } });
    expect(body?.instructions).toMatch(/^Analyse\.\n\n.*JSON object.*\n\{ goal: string \}$/s);
    expect(body?.input).toBe("objective");
  });

  it("rejects malformed model output through generateValidated: retried once with the problem, then reported", async () => {
    const schema = z.object({ goal: z.string() });
    server.script(responsesReply("Sure! Here is the plan."), responsesReply('{"goal": 42}'));
    const err = await expectChaosError(
      generateValidated(provider(), schema, { instructions: "Analyse.", input: "o", shapeDescription: "{ goal: string }" }),
      "internal",
    );
    expect(err.message).toMatch(/not valid JSON/);
    expect(err.message).toMatch(/goal/);
    expect(server.requests).toHaveLength(2);
    expect(server.requests[1]?.body.instructions).toMatch(/previous answer was rejected because the answer is not valid JSON/);
  });

  it("maps a request that outlives the timeout to deadline_exceeded", async () => {
    server.script({ kind: "hang" });
    const started = Date.now();
    await expectChaosError(provider({ timeoutMs: 150 }).generateText({ instructions: "i", input: "x" }), "deadline_exceeded", [KEY]);
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("maps 429 to resource_exhausted and passes on retry-after", async () => {
    server.script(errorReply(429, "Rate limit reached", { "retry-after": "7" }));
    const err = await expectChaosError(provider().generateText({ instructions: "i", input: "x" }), "resource_exhausted", [KEY]);
    expect(err.message).toMatch(/HTTP 429.*retry after 7 s.*Rate limit reached/);
  });

  it("lets the openai package retry a 429 when retries are allowed, honouring retry-after", async () => {
    server.script(errorReply(429, "slow down", { "retry-after": "0" }), responsesReply("done"));
    const result = await provider({ maxRetries: 1 }).generateText({ instructions: "i", input: "x" });
    expect(result.text).toBe("done");
    expect(server.requests).toHaveLength(2);
    expect(server.requests[1]?.headers["x-stainless-retry-count"]).toBe("1");
  });

  it("maps 500 to unavailable", async () => {
    server.script(errorReply(500, "The server had an error"));
    const err = await expectChaosError(provider().generateText({ instructions: "i", input: "x" }), "unavailable", [KEY]);
    expect(err.message).toMatch(/openai: .*HTTP 500.*The server had an error/);
  });

  it("never lets the key into an error, even when the server echoes it back", async () => {
    // A careless server that quotes the Authorization header back in its error body.
    const echo = (status: number): ScriptedReply => ({
      kind: "dynamic",
      reply: (request) => errorReply(status, `Incorrect API key provided: ${String(request.headers.authorization)}`),
    });
    server.script(echo(401), echo(503));
    const refused = await expectChaosError(provider().generateText({ instructions: "i", input: "x" }), "failed_precondition", [KEY]);
    expect(refused.message).toMatch(/HTTP 401\); check OPENAI_API_KEY.*Bearer \[redacted\]/);
    await expectChaosError(provider().generateText({ instructions: "i", input: "x" }), "unavailable", [KEY]);
  });

  it("maps a server that cannot be reached to unavailable", async () => {
    const { baseURL } = server;
    await server.close();
    server = await startOpenAIStandIn(); // afterEach closes this one
    const gone = new OpenAIProvider({ apiKey: KEY, model: MODEL, baseURL, maxRetries: 0 });
    await expectChaosError(gone.generateText({ instructions: "i", input: "x" }), "unavailable", [KEY]);
  });

  it("maps a caller's abort to cancelled", async () => {
    server.script({ kind: "hang" });
    const controller = new AbortController();
    const call = provider().generateText({ instructions: "i", input: "x", signal: controller.signal });
    setTimeout(() => controller.abort(), 50);
    await expectChaosError(call, "cancelled", [KEY]);
  });

  it("reports an empty answer instead of returning empty text", async () => {
    server.script(responsesReply(""));
    await expectChaosError(provider().generateText({ instructions: "i", input: "x" }), "internal");
  });

  it("is not configured without a key, and then refuses without sending anything", async () => {
    const unconfigured = provider({ apiKey: "" });
    expect(unconfigured.isConfigured()).toBe(false);
    const err = await expectChaosError(unconfigured.generateText({ instructions: "i", input: "x" }), "failed_precondition");
    expect(err.message).toMatch(/OPENAI_API_KEY/);
    expect(server.requests).toHaveLength(0);
  });
});
