import { describe, expect, it } from "vitest";
import { expectChaosError } from "../test-support/expect-error.js";
import { describeProvider } from "./ai-provider.js";
import { HeuristicProvider, NO_MODEL, rankCapabilities, tokenize, type CapabilityDescriptor } from "./heuristic.js";

const CAPABILITIES: CapabilityDescriptor[] = [
  { name: "http.request", description: "Fetch a web page or JSON document with an HTTP GET request from an allowlisted host." },
  { name: "memory.remember", description: "Store a fact in durable semantic memory under a key, with tags and an optional TTL." },
  { name: "memory.recall", description: "Search semantic memory for facts previously remembered, by key, tag or text." },
  { name: "cognition.generate_text", description: "Generate free text, such as a summary or an answer, with the active language model." },
  { name: "finance.place_order", description: "Place a synthetic equity order for a ticker; no real venue is contacted." },
];

// A fixed permutation, so the test is itself deterministic.
function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = [...items];
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1_103_515_245 + 12_345) % 2_147_483_648;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

describe("heuristic ranking (BM25)", () => {
  it("puts the obviously relevant capability first", () => {
    expect(rankCapabilities("fetch the status page over HTTP", CAPABILITIES, 3)[0]?.name).toBe("http.request");
    expect(rankCapabilities("remember that the deploy window is Friday", CAPABILITIES, 3)[0]?.name).toBe("memory.remember");
    expect(rankCapabilities("what did I store in memory about deploys?", CAPABILITIES, 3).map((r) => r.name)).toEqual(
      expect.arrayContaining(["memory.recall", "memory.remember"]),
    );
    expect(rankCapabilities("write a summary of the incident", CAPABILITIES, 3)[0]?.name).toBe("cognition.generate_text");
  });

  it("returns only positive scores, in descending order, at most k, and only names from the list", () => {
    const names = new Set(CAPABILITIES.map((c) => c.name));
    for (const objective of ["fetch a page and remember it", "place an order for ACME", "memory memory memory", "zzz unknown words"]) {
      const ranked = rankCapabilities(objective, CAPABILITIES, 2);
      expect(ranked.length).toBeLessThanOrEqual(2);
      for (const r of ranked) {
        expect(names.has(r.name)).toBe(true);
        expect(r.score).toBeGreaterThan(0);
      }
      expect([...ranked].sort((a, b) => b.score - a.score)).toEqual(ranked);
    }
    expect(rankCapabilities("zzz unknown words", CAPABILITIES, 5)).toEqual([]);
    expect(rankCapabilities("the and of", CAPABILITIES, 5)).toEqual([]);
  });

  it("gives the same answer every time, whatever order the descriptors come in", () => {
    const objective = "fetch the release notes page and remember the version in memory";
    const expected = rankCapabilities(objective, CAPABILITIES, 5);
    expect(expected.length).toBeGreaterThan(1);
    for (let seed = 1; seed <= 25; seed++) {
      expect(rankCapabilities(objective, shuffled(CAPABILITIES, seed), 5)).toEqual(expected);
    }
  });

  it("breaks ties by name", () => {
    const twins: CapabilityDescriptor[] = [
      { name: "b.sync", description: "synchronise the catalogue" },
      { name: "a.sync", description: "synchronise the catalogue" },
      { name: "c.other", description: "unrelated" },
    ];
    expect(rankCapabilities("synchronise catalogue", twins, 5).map((r) => r.name)).toEqual(["a.sync", "b.sync"]);
    expect(rankCapabilities("synchronise catalogue", shuffled(twins, 7), 5).map((r) => r.name)).toEqual(["a.sync", "b.sync"]);
  });

  it("refuses an ambiguous registry and a nonsensical k", () => {
    expect(() => rankCapabilities("x", [CAPABILITIES[0] as CapabilityDescriptor, CAPABILITIES[0] as CapabilityDescriptor], 1)).toThrow(
      /listed twice/,
    );
    expect(() => rankCapabilities("x", CAPABILITIES, -1)).toThrow(/k must be/);
  });

  it("tokenizes names and text alike", () => {
    expect(tokenize("memory_recall http.request Requests")).toEqual(["memory", "recall", "http", "request", "request"]);
  });
});

describe("HeuristicProvider", () => {
  const provider = new HeuristicProvider();

  it("ranks through rank(), identical to rankCapabilities", () => {
    expect(provider.rank("fetch over http", CAPABILITIES, 2)).toEqual(rankCapabilities("fetch over http", CAPABILITIES, 2));
  });

  it("says plainly that no model was used", async () => {
    const result = await provider.generateText({ instructions: "Summarise.", input: "a long incident report" });
    expect(result.model).toBe(NO_MODEL);
    expect(result.providerId).toBe("heuristic");
    expect(result.text).toMatch(/^No language model was used/);
    expect(describeProvider(provider)).toEqual({ id: "heuristic", displayName: "Heuristic (offline, no model)", model: null, configured: true });
  });

  it("refuses free JSON with failed_precondition", async () => {
    await expectChaosError(provider.generateJson({ instructions: "Plan.", input: "o", shapeDescription: "{}" }), "failed_precondition");
  });
});
