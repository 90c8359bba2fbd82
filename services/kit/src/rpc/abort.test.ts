import { getEventListeners } from "node:events";
import { describe, expect, it } from "vitest";
import { ChaosError } from "../errors.js";
import { guardCall, raceSignal } from "./abort.js";

const never = new Promise<never>(() => {});

describe("raceSignal", () => {
  it("ends a wait that outlives its signal with the signal's own reason", async () => {
    const reason = new DOMException("slow", "TimeoutError");
    const controller = new AbortController();
    const waiting = raceSignal(never, controller.signal);
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    await expect(raceSignal(Promise.resolve(1), controller.signal)).rejects.toBe(reason);
  });

  it("passes what failed on untouched, so its errno code can still be read", async () => {
    const failure = Object.assign(new Error("getaddrinfo ENOTFOUND nowhere.test"), { code: "ENOTFOUND" });
    await expect(raceSignal(Promise.reject(failure), new AbortController().signal)).rejects.toBe(failure);
    await expect(raceSignal(Promise.resolve("answer"), new AbortController().signal)).resolves.toBe("answer");
  });
});

describe("guardCall", () => {
  const ctx = { tenant: "acme", principal: "agent@acme.example" };

  it("says whether the deadline passed or the caller cancelled, and normalises other failures", async () => {
    const late = guardCall({ ctx, timeoutMs: 30 }, 5_000);
    await expect(late.race(never)).rejects.toMatchObject({ code: "deadline_exceeded" });
    late.dispose();
    const timedOutCaller = new AbortController();
    timedOutCaller.abort(new DOMException("slow", "TimeoutError"));
    await expect(guardCall({ ctx, signal: timedOutCaller.signal }, 5_000).race(never)).rejects.toMatchObject({ code: "deadline_exceeded" });
    const caller = new AbortController();
    const waiting = guardCall({ ctx, signal: caller.signal }, 5_000).race(never);
    caller.abort();
    await expect(waiting).rejects.toMatchObject({ code: "cancelled" });
    const crashed = await guardCall({ ctx }, 5_000).race(Promise.reject(new Error("secret detail"))).catch((e: unknown) => e);
    expect(crashed).toBeInstanceOf(ChaosError);
    expect(crashed).toMatchObject({ code: "internal", message: "internal error" });
    await expect(guardCall({ ctx }, 5_000).race(Promise.resolve("answer"))).resolves.toBe("answer");
  });

  it("gives a handler that reads it a signal that aborts at the same deadline or with the caller", async () => {
    const guard = guardCall({ ctx, timeoutMs: 30 }, 5_000);
    const signal = guard.signal;
    expect(guard.signal).toBe(signal);
    // A handler that passes its signal on and fails with its reason lost to the deadline.
    const handler = new Promise<never>((_, reject) => signal.addEventListener("abort", () => reject(signal.reason as Error)));
    await expect(guard.race(handler)).rejects.toMatchObject({ code: "deadline_exceeded" });
    // Its own signal aborts at the deadline too (its timer, within a millisecond of the guard's).
    await expect(handler).rejects.toMatchObject({ name: "TimeoutError" });
    expect(signal.aborted).toBe(true);
    const caller = new AbortController();
    const cancelled = guardCall({ ctx, signal: caller.signal }, 5_000);
    const seen = cancelled.signal;
    caller.abort();
    expect(seen.aborted).toBe(true);
    await expect(cancelled.race(never)).rejects.toMatchObject({ code: "cancelled" });
  });

  it("once disposed, neither its deadline nor the caller's signal ends anything", async () => {
    const caller = new AbortController();
    const guard = guardCall({ ctx, signal: caller.signal, timeoutMs: 20 }, 5_000);
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(1);
    await expect(guard.race(Promise.resolve(1))).resolves.toBe(1);
    guard.dispose();
    expect(getEventListeners(caller.signal, "abort")).toHaveLength(0);
    caller.abort();
    // Past the deadline: nothing was rejected unhandled meanwhile (vitest fails the run on one).
    await new Promise((r) => setTimeout(r, 60));
  });
});
