import { ChaosError } from "@chaos-core/kit";

/**
 * Runs `work` and yields the events it pushes as the stream drains, then what `last` makes of
 * its result. The work is cancelled with the call, or when the consumer stops reading early
 * (`abandoned` is the reason it is given); its error ends the stream.
 */
export async function* eventsWhile<E, R>(
  callSignal: AbortSignal,
  work: (push: (event: E) => void, signal: AbortSignal) => Promise<R>,
  last: (result: R) => E,
  abandoned: string,
): AsyncGenerator<E> {
  const stop = new AbortController();
  const signal = AbortSignal.any([callSignal, stop.signal]);
  const queue: E[] = [];
  let wake: (() => void) | undefined;
  let outcome: { value: R } | { error: unknown } | undefined;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  void work((event) => {
    queue.push(event);
    notify();
  }, signal).then(
    (value) => {
      outcome = { value };
      notify();
    },
    (error: unknown) => {
      outcome = { error };
      notify();
    },
  );
  callSignal.addEventListener("abort", notify, { once: true });
  try {
    for (;;) {
      const next = queue.shift();
      if (next !== undefined) {
        yield next;
        continue;
      }
      if (callSignal.aborted) throw callSignal.reason instanceof ChaosError ? callSignal.reason : new ChaosError("cancelled", "the call was cancelled");
      if (outcome) break;
      await new Promise<void>((resolve) => (wake = resolve));
    }
    if ("error" in outcome) throw outcome.error;
    yield last(outcome.value);
  } finally {
    callSignal.removeEventListener("abort", notify);
    if (!outcome) stop.abort(new ChaosError("cancelled", abandoned));
  }
}
