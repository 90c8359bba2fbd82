import { ChaosError } from "../errors.js";
import { guardCall } from "./abort.js";
import {
  DEFAULT_TIMEOUT_MS,
  supportedMethods,
  type AnyService,
  type CallOptions,
  type ServiceClient,
} from "./types.js";

type UntypedClientUnary = (req: unknown, opts: CallOptions) => Promise<unknown>;
type UntypedClientStream = (req: unknown, opts: CallOptions) => AsyncIterable<unknown>;

/**
 * A client usable before the service behind it exists: each call waits for `pending` (the real
 * client), then goes to it with what is left of its deadline, as a gRPC call waits for its
 * channel to be ready. Cancellation and the deadline apply to the wait as to the call. When
 * `pending` rejects, every call, waiting or later, fails with that error (normalised by
 * `ChaosError.from`, so reject with a ChaosError that says why). It lets a process answer what
 * needs no service while its stores are still opening.
 */
export function createDeferredClient<S extends AnyService>(
  service: S,
  pending: Promise<ServiceClient<S>>,
  options: { timeoutMs?: number } = {},
): ServiceClient<S> {
  const defaultTimeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  // Once it is there, calls go straight to it: no wait, no deadline of their own to keep here.
  let arrived: ServiceClient<S> | undefined;
  // Handled here once, so a rejection no call has waited for yet is not reported as unhandled.
  pending.then(
    (c) => (arrived = c),
    () => {},
  );
  const ready = async (opts: CallOptions): Promise<{ client: Record<string, unknown>; opts: CallOptions }> => {
    if (arrived) return { client: arrived as Record<string, unknown>, opts };
    const timeoutMs = opts.timeoutMs ?? defaultTimeout;
    const started = performance.now();
    let client: ServiceClient<S>;
    const guard = guardCall(opts, defaultTimeout);
    try {
      client = await guard.race(pending);
    } catch (err) {
      const e = ChaosError.from(err);
      if (e.code === "deadline_exceeded") {
        throw new ChaosError("deadline_exceeded", `the call ran past its deadline (${timeoutMs} ms) while the service was still starting`);
      }
      throw e;
    } finally {
      guard.dispose();
    }
    const left = Math.max(1, Math.round(timeoutMs - (performance.now() - started)));
    return { client: client as Record<string, unknown>, opts: { ...opts, timeoutMs: left } };
  };

  const client: Record<string, unknown> = {};
  for (const method of supportedMethods(service)) {
    const name = method.localName;
    if (method.methodKind === "unary") {
      client[name] = async (req: unknown, opts: CallOptions) => {
        const real = await ready(opts);
        return (real.client[name] as UntypedClientUnary)(req, real.opts);
      };
    } else {
      client[name] = (req: unknown, opts: CallOptions) =>
        (async function* () {
          const real = await ready(opts);
          yield* (real.client[name] as UntypedClientStream)(req, real.opts);
        })();
    }
  }
  return client as ServiceClient<S>;
}
