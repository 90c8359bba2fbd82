import { ChaosError } from "../errors.js";
import type { CallOptions } from "./types.js";

// Deadlines and cancellation as every client outside gRPC applies them (in-process, deferred).

/** Aborts when the caller's signal does or when the deadline passes. */
export function callSignal(opts: CallOptions, defaultTimeoutMs: number): AbortSignal {
  const timeout = AbortSignal.timeout(opts.timeoutMs ?? defaultTimeoutMs);
  return opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
}

/** The error a call ends with when its signal aborts: its deadline passed, or its caller cancelled. */
export function abortError(signal: AbortSignal): ChaosError {
  const reason: unknown = signal.reason;
  return reason instanceof DOMException && reason.name === "TimeoutError"
    ? new ChaosError("deadline_exceeded", "the call ran past its deadline")
    : new ChaosError("cancelled", "the call was cancelled");
}

/**
 * Settles as `promise` does, or rejects with `signal.reason` when `signal` aborts first. The
 * rejection is passed on untouched, so a caller can still read what failed (an errno `code`).
 */
export function raceSignal<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason as unknown);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as unknown);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener("abort", onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(e);
      },
    );
  });
}

/** Settles as `promise` does (errors normalised to ChaosError), or rejects when `signal` aborts first. */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return raceSignal(promise, signal).catch((e: unknown) => {
    throw signal.aborted && e === signal.reason ? abortError(signal) : ChaosError.from(e);
  });
}
