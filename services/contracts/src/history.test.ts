import { describe, expect, it } from "vitest";
import { contractSet, entryDigest, NO_ENTITLEMENTS, NO_GATES, toolContract, type ToolSource } from "./contract.js";
import { changesSincePinned, EMPTY_HISTORY, extendHistory, parseHistory, relock, serializeHistory } from "./history.js";
import { serializeLock } from "./lockfile.js";

const source = (over: Partial<ToolSource> & { required?: string[] } = {}): ToolSource => ({
  name: "search",
  title: "Search",
  description: "Searches.",
  toolset: "core",
  inputSchema: { type: "object", properties: { q: { type: "string" }, limit: { type: "number" } }, required: over.required ?? ["q"] },
  outputSchema: { type: "object", properties: { n: { type: "number" } } },
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  ...over,
});
const contract = (over: Partial<ToolSource> & { required?: string[] } = {}) => toolContract(source(over), { gates: NO_GATES, entitlements: NO_ENTITLEMENTS });
const set = (...tools: ReturnType<typeof contract>[]) => contractSet({ tools, prompts: [], resources: [], capabilities: [] });

describe("the contract history (docs/contracts.md §9)", () => {
  const v1 = contract();
  const v2 = contract({ required: ["q", "limit"], description: "Searches, now paged." });

  it("keeps every contract a re-lock supersedes or removes, by its digest, and nothing that stays", () => {
    const other = contract({ name: "other" });
    const h = extendHistory(EMPTY_HISTORY, set(v1, other), set(v2, other));
    expect([...h.keys()]).toEqual([entryDigest(v1)]);
    const removed = extendHistory(h, set(v2, other), set(v2));
    expect([...removed.keys()].sort()).toEqual([entryDigest(v1), entryDigest(other)].sort());
  });

  it("round-trips byte for byte, and refuses an entry edited after it was kept, naming it", () => {
    const text = serializeHistory(extendHistory(EMPTY_HISTORY, set(v1), set(v2)));
    expect(serializeHistory(parseHistory(text))).toBe(text);
    expect(text.endsWith("}\n")).toBe(true);
    const edited = text.replace("Searches.", "Searches everything.");
    expect(() => parseHistory(edited)).toThrow(`chaoscore.lock.history: tools.${entryDigest(v1)}: the entry hashes to`);
    expect(() => parseHistory('{"historyVersion":2,"tools":{}}')).toThrow("historyVersion: must be 1, got 2");
  });

  it("explains a pinned digest: current, unknown, or the BREAKING and RISKY changes only", () => {
    const h = extendHistory(EMPTY_HISTORY, set(v1), set(v2));
    expect(changesSincePinned(h, v2, "search", entryDigest(v2))).toEqual({ kind: "current" });
    expect(changesSincePinned(h, v2, "search", "sha256:" + "0".repeat(64))).toEqual({ kind: "unknown" });
    // A digest of another tool is not this one's history.
    expect(changesSincePinned(h, v2, "other", entryDigest(v1))).toEqual({ kind: "unknown" });
    const since = changesSincePinned(h, v2, "search", entryDigest(v1));
    expect(since).toMatchObject({ kind: "changed", more: 0 });
    // The description changed too (COSMETIC): not among them.
    expect(since.kind === "changed" && since.changes.map((c) => [c.verdict, c.reasons])).toEqual([["BREAKING", ["field limit became required"]]]);
  });

  it("gives the gravest first and at most five, counting the rest", () => {
    const wide = (n: number, required: boolean, idempotentHint = true) =>
      contract({
        inputSchema: { type: "object", properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`f${i}`, { type: "string" }])), required: required ? Array.from({ length: n }, (_, i) => `f${i}`) : [] },
        annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint, openWorldHint: false },
      });
    const before = wide(7, false);
    const after = wide(7, true, false);
    const since = changesSincePinned(extendHistory(EMPTY_HISTORY, set(before), set(after)), after, "search", entryDigest(before));
    if (since.kind !== "changed") throw new Error(`expected changes, got ${since.kind}`);
    expect(since.changes).toHaveLength(5);
    expect(since.changes.every((c) => c.verdict === "BREAKING")).toBe(true);
    // Seven fields became required (BREAKING) and idempotent flipped (RISKY): 8 in all.
    expect(since.more).toBe(3);
  });
});

describe("relock (what chaos-core contracts lock writes)", () => {
  const v1 = contract();
  const v2 = contract({ required: ["q", "limit"] });

  it("writes the lock; the history only when the previous lock pinned something that changed", () => {
    const first = relock(set(v1));
    expect(first).toEqual({ lockText: serializeLock(set(v1)), kept: 0 });
    expect(relock(set(v1), first.lockText)).toEqual({ lockText: first.lockText, kept: 0 });
    const second = relock(set(v2), first.lockText);
    expect(second.kept).toBe(1);
    expect([...parseHistory(second.historyText!).keys()]).toEqual([entryDigest(v1)]);
    // Back and forth: each digest once; a history that did not grow is not rewritten.
    const third = relock(set(v1), second.lockText, second.historyText);
    expect([...parseHistory(third.historyText!).keys()].sort()).toEqual([entryDigest(v1), entryDigest(v2)].sort());
    expect(relock(set(v1), third.lockText, third.historyText)).toEqual({ lockText: third.lockText, kept: 0 });
  });

  it("says so when the previous lock is unreadable, and refuses an edited history", () => {
    expect(relock(set(v1), "{not json")).toMatchObject({ kept: 0, warning: expect.stringContaining("the previous chaoscore.lock is not readable") });
    const { historyText } = relock(set(v2), relock(set(v1)).lockText);
    expect(() => relock(set(v2), undefined, historyText!.replace("Searches.", "Searches all."))).toThrow("the entry hashes to");
  });
});
