/** Reading and planning with a model: the real OpenAI-compatible provider against the local stand-in server. */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BUILT_IN_CAPABILITIES } from "../capabilities/index.js";
import { createCapabilityRegistry } from "../capabilities/registry.js";
import { OpenAICompatibleProvider } from "../providers/openai-compatible.js";
import { expectChaosError } from "../test-support/expect-error.js";
import { chatReply, startOpenAIStandIn, type OpenAIStandIn } from "../test-support/openai-stand-in.js";
import { reason } from "./intent.js";
import { plan } from "./planner.js";

const registry = createCapabilityRegistry(BUILT_IN_CAPABILITIES);
let server: OpenAIStandIn;
let deps: { provider: OpenAICompatibleProvider; registry: typeof registry };
beforeEach(async () => {
  server = await startOpenAIStandIn();
  deps = { provider: new OpenAICompatibleProvider({ baseURL: server.baseURL, model: "llama3.1:8b", maxRetries: 0 }), registry };
});
afterEach(async () => {
  await server.close();
});

function systemMessage(i: number): string {
  const messages = server.requests[i]?.body.messages as Array<{ role: string; content: string }>;
  return messages.find((m) => m.role === "system")?.content ?? "";
}

describe("model reason", () => {
  it("keeps only registered candidate capabilities and says which were dropped", async () => {
    server.script(
      chatReply(
        JSON.stringify({
          goal: "store the build server's name",
          constraints: [],
          successCriteria: ["the fact is stored"],
          ambiguities: [],
          risk: "low",
          candidateCapabilities: ["memory.remember", "shell.exec"],
        }),
      ),
    );
    const intent = await reason("Remember that the build server is ci-7", undefined, deps);
    expect(intent).toMatchObject({ goal: "store the build server's name", provider: "openai-compatible", model: "llama-stand-in" });
    expect(intent.candidateCapabilities).toEqual(["memory.remember"]);
    expect(intent.ambiguities.join(" ")).toContain("shell.exec");
  });
});

describe("model plan", () => {
  it("rejects a step naming an unknown capability, retries once with the problem, and keeps the valid answer", async () => {
    server.script(
      chatReply(JSON.stringify({ steps: [{ capability: "shell.exec", input: { cmd: "rm -rf /" }, rationale: "clean up" }] })),
      chatReply(JSON.stringify({ steps: [{ capability: "memory.remember", input: { key: "build-server", value: "ci-7" }, rationale: "store it" }] })),
    );
    const result = await plan("Remember that the build server is ci-7", undefined, deps);
    expect(result).toEqual({
      source: "model",
      provider: "openai-compatible",
      model: "llama-stand-in",
      notes: [],
      steps: [{ id: "s1", capability: "memory.remember", input: { key: "build-server", value: "ci-7" }, rationale: "store it" }],
    });
    expect(server.requests).toHaveLength(2);
    expect(systemMessage(1)).toContain('"shell.exec" is not a registered capability');
  });

  it("rejects a step whose input fails its capability's schema, naming the field", async () => {
    server.script(
      chatReply(JSON.stringify({ steps: [{ capability: "http.request", input: { url: "https://example.com", method: "POST" }, rationale: "post" }] })),
      chatReply(JSON.stringify({ steps: [{ capability: "http.request", input: { url: "https://example.com" }, rationale: "get" }] })),
    );
    const result = await plan("fetch https://example.com", undefined, deps);
    expect(result.steps.map((s) => s.input)).toEqual([{ url: "https://example.com" }]);
    expect(systemMessage(1)).toContain("steps.0.input.method");
  });

  it("fails with a clear error after two malformed answers when the offline parser reads nothing either", async () => {
    server.script(chatReply("Sure! Here is the plan: step one…"), chatReply(JSON.stringify({ steps: [{ capability: "nope.nope", input: {}, rationale: "" }] })));
    const err = await expectChaosError(plan("frobnicate the gizmos", undefined, deps), "internal");
    expect(err.message).toContain("after 2 attempts");
    expect(err.message).toContain('"nope.nope" is not a registered capability');
    expect(server.requests).toHaveLength(2);
  });

  it("offers the offline reading as a hint, and plans with it when the model's answer fails validation twice", async () => {
    server.script(chatReply("Sure! Here is the plan: step one…"), chatReply(JSON.stringify({ steps: [{ capability: "nope.nope", input: {}, rationale: "" }] })));
    const result = await plan("Remember that the build server is ci-7", undefined, deps);
    const input = JSON.parse((server.requests[0]?.body.messages as Array<{ role: string; content: string }>).find((m) => m.role === "user")?.content ?? "{}") as {
      offlineReading: unknown;
    };
    expect(input.offlineReading).toEqual([{ capability: "memory.remember", input: { key: "build-server", value: "ci-7", tags: ["note"] } }]);
    expect(result).toMatchObject({
      source: "heuristic",
      model: "none",
      steps: [{ id: "s1", capability: "memory.remember", input: { key: "build-server", value: "ci-7", tags: ["note"] } }],
    });
    expect(result.notes.join(" ")).toMatch(/failed validation twice.*offline parser.s reading was used instead/s);
  });

  it("does not hint when the parser reads nothing", async () => {
    server.script(chatReply(JSON.stringify({ steps: [] })));
    await plan("frobnicate the gizmos", undefined, deps);
    const input = JSON.parse((server.requests[0]?.body.messages as Array<{ role: string; content: string }>).find((m) => m.role === "user")?.content ?? "{}") as {
      offlineReading: unknown;
    };
    expect(input.offlineReading).toBeNull();
  });
});
