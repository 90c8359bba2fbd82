import { ChaosError } from "../errors.js";
import { guardCall } from "./abort.js";
import {
  supportedMethods,
  type AnyService,
  type CallOptions,
  type ServiceClient,
} from "./types.js";

type UntypedClientUnary = (req: unknown, opts: CallOptions) => Promise<unknown>;
type UntypedClientStream = (req: unknown, opts: CallOptions) => AsyncIterable<unknown>;

/** How long a call on the default deadline waits for its service to start (see {@link createDeferredClient}). */
export const START_WAIT_MS = 60_000;

/**
 * A client usable before the service behind it exists: each call waits for `pending` (the real
 * client), then goes to it. A call that names its deadline (`timeoutMs`) gets it end to end, as a
 * gRPC call waiting for its channel to be ready does: the wait counts against it. A call on the
 * default deadline waits for the start up to `startTimeoutMs` (default {@link START_WAIT_MS}),
 * then has its whole default deadline (10 s) for the work: that deadline bounds a service's answer, and
 * a first start (the embedded database's initdb, seconds on a busy machine) is no slow answer.
 * Cancellation applies to the wait as to the call. When `pending` rejects, every call, waiting or
 * later, fails with that error (normalised by `ChaosError.from`, so reject with a ChaosError that
 * says why). It lets a process answer what needs no service while its stores are still opening.
 */
export function createDeferredClient<S extends AnyService>(
  service: S,
  pending: Promise<ServiceClient<S>>,
  options: { startTimeoutMs?: number } = {},
): ServiceClient<S> {
  const startTimeout = options.startTimeoutMs ?? START_WAIT_MS;
  // Once it is there, calls go straight to it: no wait, no deadline of their own to keep here.
  let arrived: ServiceClient<S> | undefined;
  // Handled here once, so a rejection no call has waited for yet is not reported as unhandled.
  pending.then(
    (c) => (arrived = c),
    () => {},
  );
  const ready = async (opts: CallOptions): Promise<{ client: Record<string, unknown>; opts: CallOptions }> => {
    if (arrived) return { client: arrived as Record<string, unknown>, opts };
    const ownDeadline = opts.timeoutMs !== undefined;
    const waitMs = opts.timeoutMs ?? startTimeout;
    const started = performance.now();
    let client: ServiceClient<S>;
    // The call's own deadline when it names one, else the start bound.
    const guard = guardCall(opts, startTimeout);
    try {
      client = await guard.race(pending);
    } catch (err) {
      const e = ChaosError.from(err);
      if (e.code !== "deadline_exceeded") throw e;
      if (ownDeadline) throw new ChaosError("deadline_exceeded", `the call ran past its deadline (${waitMs} ms) while the service was still starting`);
      throw new ChaosError("unavailable", `the service did not finish starting within ${Math.round(waitMs / 1000)} s; try again shortly`);
    } finally {
      guard.dispose();
    }
    if (!ownDeadline) return { client: client as Record<string, unknown>, opts };
    const left = Math.max(1, Math.round(waitMs - (performance.now() - started)));
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
