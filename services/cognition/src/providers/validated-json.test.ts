import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { expectChaosError } from "../test-support/expect-error.js";
import { errorReply, responsesReply, startOpenAIStandIn, type OpenAIStandIn } from "../test-support/openai-stand-in.js";
import { HeuristicProvider } from "./heuristic.js";
import { OpenAIProvider } from "./openai.js";
import { generateValidated, stripJsonFence } from "./validated-json.js";

const intent = z.object({ goal: z.string().min(1), risk: z.enum(["low", "medium", "high"]) });
const request = { instructions: "Analyse the objective.", input: "back up the database", shapeDescription: "{ goal: string, risk: low|medium|high }" };

let server: OpenAIStandIn;
let provider: OpenAIProvider;
beforeEach(async () => {
  server = await startOpenAIStandIn();
  provider = new OpenAIProvider({ apiKey: "sk-x", model: "m", baseURL: server.baseURL, maxRetries: 0 });
});
afterEach(async () => {
  await server.close();
});

describe("generateValidated", () => {
  it("accepts a valid first answer without a retry", async () => {
    server.script(responsesReply('{"goal": "back up", "risk": "low"}'));
    const result = await generateValidated(provider, intent, request);
    expect(result).toEqual({
      value: { goal: "back up", risk: "low" },
      raw: '{"goal": "back up", "risk": "low"}',
      model: "gpt-stand-in-2026-01-01",
      providerId: "openai",
      attempts: 1,
    });
    expect(server.requests).toHaveLength(1);
  });

  it("retries once with the validation error in the instructions, and accepts a good second answer", async () => {
    server.script(responsesReply('{"goal": "back up", "risk": "catastrophic"}'), responsesReply('{"goal": "back up", "risk": "high"}'));
    const result = await generateValidated(provider, intent, request);
    expect(result.value).toEqual({ goal: "back up", risk: "high" });
    expect(result.attempts).toBe(2);
    const second = server.requests[1]?.body.instructions as string;
    expect(second.startsWith(request.instructions)).toBe(true);
    expect(second).toMatch(/previous answer was rejected because the JSON does not have the expected shape:[\s\S]*risk/);
    // The retry asks the same question: only the instructions grow.
    expect(server.requests[1]?.body.input).toBe(request.input);
  });

  it("reports a second bad answer instead of trusting it", async () => {
    server.script(responsesReply("I think the risk is low."), responsesReply('{"goal": ""}'));
    const err = await expectChaosError(generateValidated(provider, intent, request), "internal");
    expect(err.message).toMatch(/after 2 attempts; first: the answer is not valid JSON.*second: the JSON does not have the expected shape/s);
    expect(server.requests).toHaveLength(2);
  });

  it("does not retry provider failures: those are the client's to retry", async () => {
    server.script(errorReply(500, "down"));
    await expectChaosError(generateValidated(provider, intent, request), "unavailable");
    expect(server.requests).toHaveLength(1);
  });

  it("passes on the heuristic provider's refusal to invent JSON", async () => {
    const err = await expectChaosError(generateValidated(new HeuristicProvider(), intent, request), "failed_precondition");
    expect(err.message).toMatch(/use rank\(\)/);
  });
});

describe("stripJsonFence", () => {
  it("removes one surrounding fence, with or without a language tag, and nothing else", () => {
    expect(stripJsonFence('```json\n{"a": 1}\n```')).toBe('{"a": 1}');
    expect(stripJsonFence('  ```\n{"a": 1}\n```  ')).toBe('{"a": 1}');
    expect(stripJsonFence('{"a": "```"}')).toBe('{"a": "```"}');
    expect(stripJsonFence('Here you go: ```json\n{"a": 1}\n```')).toBe('Here you go: ```json\n{"a": 1}\n```');
  });
});
