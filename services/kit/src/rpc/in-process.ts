import { create, type DescMessage } from "@bufbuild/protobuf";
import { assertTenantId } from "../context.js";
import { guardCall, type CallGuard } from "./abort.js";
import { instrument, instrumentStream } from "./instrument.js";
import {
  DEFAULT_TIMEOUT_MS,
  supportedMethods,
  type AnyService,
  type CallOptions,
  type HandlerContext,
  type ServiceClient,
  type ServiceImpl,
  type UntypedStream,
  type UntypedUnary,
} from "./types.js";

/**
 * A client that calls the service's handlers directly with the same messages: no sockets, no
 * serialisation (the idea of connect-es's router transport). Deadlines, cancellation, error
 * normalisation and spans behave as over gRPC, so the same tests hold for both transports.
 */
export function createInProcessClient<S extends AnyService>(
  service: S,
  impl: ServiceImpl<S>,
  options: { timeoutMs?: number } = {},
): ServiceClient<S> {
  const defaultTimeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const client: Record<string, unknown> = {};
  for (const method of supportedMethods(service)) {
    const handler = (impl as Record<string, unknown>)[method.localName];
    if (typeof handler !== "function") {
      throw new Error(`${service.typeName}: no handler for ${method.name}`);
    }
    const input = method.input as DescMessage;
    const output = method.output as DescMessage;
    const handlerContext = (opts: CallOptions, guard: CallGuard): HandlerContext => ({
      call: opts.ctx,
      // Built only if the handler reads it (guardCall).
      get signal() {
        return guard.signal;
      },
    });
    if (method.methodKind === "unary") {
      const fn = handler as UntypedUnary;
      client[method.localName] = (req: object, opts: CallOptions) =>
        instrument("client", method, opts.ctx.tenant, async () => {
          assertTenantId(opts.ctx.tenant);
          const guard = guardCall(opts, defaultTimeout);
          try {
            const res = await guard.race(fn.call(impl, create(input, req as never), handlerContext(opts, guard)));
            return create(output, res as never);
          } finally {
            guard.dispose();
          }
        });
    } else {
      const fn = handler as UntypedStream;
      client[method.localName] = (req: object, opts: CallOptions) =>
        instrumentStream("client", method, opts.ctx.tenant, async function* () {
          assertTenantId(opts.ctx.tenant);
          const guard = guardCall(opts, defaultTimeout);
          const it = fn.call(impl, create(input, req as never), handlerContext(opts, guard))[Symbol.asyncIterator]();
          try {
            for (;;) {
              const next = await guard.race(it.next());
              if (next.done) return;
              yield create(output, next.value as never);
            }
          } finally {
            guard.dispose();
            await it.return?.();
          }
        });
    }
  }
  return client as ServiceClient<S>;
}
