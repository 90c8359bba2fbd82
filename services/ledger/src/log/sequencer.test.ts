import { describe, expect, it } from "vitest";
import { Sequencer, type Settled } from "./sequencer.js";

describe("Sequencer", () => {
  it("batches concurrent submissions per key, one write at a time per key", async () => {
    const writes: Array<{ key: string; items: number[] }> = [];
    let inFlight = 0;
    let maxInFlight = 0;
    const seq = new Sequencer<number, string>(async (key, items) => {
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      writes.push({ key, items });
      await new Promise((r) => setImmediate(r));
      inFlight--;
      return items.map((i): Settled<string> => ({ ok: true, value: `${key}:${i}` }));
    });
    const a = Array.from({ length: 50 }, (_, i) => seq.submit("a", i));
    const b = Array.from({ length: 5 }, (_, i) => seq.submit("b", i));
    expect(await Promise.all(a)).toEqual(Array.from({ length: 50 }, (_, i) => `a:${i}`));
    expect(await Promise.all(b)).toEqual(Array.from({ length: 5 }, (_, i) => `b:${i}`));
    expect(writes.filter((w) => w.key === "a")).toHaveLength(1);
    expect(seq.stats()).toMatchObject({ submitted: 55, batches: 2, largestBatch: 50, failedBatches: 0 });
    // The two keys may run side by side; one key never does.
    expect(maxInFlight).toBeLessThanOrEqual(2);
    await seq.idle();
  });

  it("rejects only the items the writer says failed, and every item of a batch that throws", async () => {
    let fail = false;
    const seq = new Sequencer<number, number>(async (_key, items) => {
      if (fail) throw new Error("database down");
      return items.map((i) => (i % 2 === 0 ? { ok: true, value: i } : { ok: false, error: new Error(`odd ${i}`) }));
    });
    const r = await Promise.allSettled([1, 2, 3, 4].map((i) => seq.submit("k", i)));
    expect(r.map((x) => x.status)).toEqual(["rejected", "fulfilled", "rejected", "fulfilled"]);
    fail = true;
    const down = await Promise.allSettled([6, 8].map((i) => seq.submit("k", i)));
    expect(down.map((x) => (x as PromiseRejectedResult).reason.message)).toEqual(["database down", "database down"]);
    fail = false;
    expect(await seq.submit("k", 10)).toBe(10);
    expect(seq.stats().failedBatches).toBe(1);
  });

  it("splits a long queue into batches of at most maxBatch", async () => {
    const sizes: number[] = [];
    const seq = new Sequencer<number, number>(
      async (_k, items) => {
        sizes.push(items.length);
        return items.map((i) => ({ ok: true, value: i }));
      },
      { maxBatch: 4 },
    );
    await Promise.all(Array.from({ length: 10 }, (_, i) => seq.submit("k", i)));
    expect(sizes).toEqual([4, 4, 2]);
  });

  it("pipelines up to depth batches of one key that may overlap, and runs one that may not alone", async () => {
    let inFlight = 0;
    let maxInFlight = 0;
    const running: number[][] = [];
    const gates: Array<() => void> = [];
    const seq = new Sequencer<number, number>(
      async (_k, items) => {
        inFlight++;
        maxInFlight = Math.max(maxInFlight, inFlight);
        running.push(items);
        await new Promise<void>((r) => gates.push(r));
        inFlight--;
        return items.map((i) => ({ ok: true, value: i }));
      },
      { depth: 2, maxBatch: 2, overlaps: (_k, i) => i >= 0 },
    );
    const release = async () => {
      while (gates.length === 0) await new Promise((r) => setImmediate(r));
      gates.shift()!();
    };
    const all = [1, 2, 3, 4, -5, 6].map((i) => seq.submit("k", i));
    // Batches of two; two in flight at once; the one that may not overlap waits for both (and
    // may carry items that could have, as a batch of one key always could).
    while (running.length < 2) await new Promise((r) => setImmediate(r));
    expect(running).toEqual([[1, 2], [3, 4]]);
    await release();
    await release();
    while (running.length < 3) await new Promise((r) => setImmediate(r));
    expect(running[2]).toEqual([-5, 6]);
    await release();
    expect(await Promise.all(all)).toEqual([1, 2, 3, 4, -5, 6]);
    expect(maxInFlight).toBe(2);
    await seq.idle();
  });
});
