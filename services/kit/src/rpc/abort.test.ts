import { describe, expect, it } from "vitest";
import { ChaosError } from "../errors.js";
import { raceAbort, raceSignal } from "./abort.js";

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

describe("raceAbort", () => {
  it("says whether the deadline passed or the caller cancelled, and normalises other failures", async () => {
    const timedOut = new AbortController();
    timedOut.abort(new DOMException("slow", "TimeoutError"));
    await expect(raceAbort(never, timedOut.signal)).rejects.toMatchObject({ code: "deadline_exceeded" });
    const cancelled = new AbortController();
    const waiting = raceAbort(never, cancelled.signal);
    cancelled.abort();
    await expect(waiting).rejects.toMatchObject({ code: "cancelled" });
    const crashed = await raceAbort(Promise.reject(new Error("secret detail")), new AbortController().signal).catch((e: unknown) => e);
    expect(crashed).toBeInstanceOf(ChaosError);
    expect(crashed).toMatchObject({ code: "internal", message: "internal error" });
  });
});
