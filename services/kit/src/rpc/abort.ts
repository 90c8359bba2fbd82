import { ChaosError } from "../errors.js";
import type { CallOptions } from "./types.js";

// Deadlines and cancellation as every client outside gRPC applies them (in-process, deferred).

/** A call's deadline and its caller's cancellation, outside gRPC (see {@link guardCall}). */
export interface CallGuard {
  /** Aborts when the caller's signal does or when the deadline passes; built on first read. */
  readonly signal: AbortSignal;
  /**
   * Settles as `promise` does (errors normalised to ChaosError), or rejects first when the
   * deadline passes (`deadline_exceeded`) or the caller cancels (`cancelled`).
   */
  race<T>(promise: Promise<T>): Promise<T>;
  /** The call is over: stops the deadline's timer and stops listening to the caller's signal. */
  dispose(): void;
}

/**
 * Guards one call with its deadline and its caller's signal, holding both with a plain timer and
 * one listener: the AbortSignal a handler may read is built only when it reads it. Most handlers
 * never do, and an in-process call came to cost more than its work otherwise — AbortSignal.timeout
 * measured 10–18 µs a call here and its timer lives until it fires, AbortSignal.any 30–40 µs
 * more, for each of the four to five calls of a governed step (issue 14).
 */
export function guardCall(opts: CallOptions, defaultTimeoutMs: number): CallGuard {
  const timeoutMs = opts.timeoutMs ?? defaultTimeoutMs;
  const deadline = performance.now() + timeoutMs;
  const caller = opts.signal;
  let signal: AbortSignal | undefined;
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const stop = new Promise<never>((_, reject) => {
    if (caller?.aborted) return reject(abortError(caller));
    timer = setTimeout(() => reject(new ChaosError("deadline_exceeded", "the call ran past its deadline")), timeoutMs);
    if (caller) {
      onAbort = () => reject(abortError(caller));
      caller.addEventListener("abort", onAbort, { once: true });
    }
  });
  // Seen by race() when it matters; a stop nobody races at that moment is not an unhandled rejection.
  stop.catch(() => {});
  return {
    get signal() {
      if (!signal) {
        const timeout = AbortSignal.timeout(Math.max(0, Math.ceil(deadline - performance.now())));
        signal = caller ? AbortSignal.any([caller, timeout]) : timeout;
      }
      return signal;
    },
    race(promise) {
      return Promise.race([stop, promise]).catch((e: unknown) => {
        // A handler that rejects with its signal's reason lost to the deadline or the caller.
        throw signal?.aborted && e === signal.reason ? abortError(signal) : ChaosError.from(e);
      });
    },
    dispose() {
      clearTimeout(timer);
      if (onAbort) caller?.removeEventListener("abort", onAbort);
    },
  };
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
