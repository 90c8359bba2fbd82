import type {
  DescMessage,
  DescMethod,
  DescService,
  MessageInitShape,
  MessageShape,
} from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import type { CallContext } from "../context.js";

/** Any generated service descriptor. */
export type AnyService = GenService<GenServiceMethods>;

type Methods<S> = S extends GenService<infer M> ? M : never;

/** What a handler knows about the call beyond its request message. */
export interface HandlerContext {
  /** The verified call context (tenant, principal, session). */
  readonly call: CallContext;
  /** Aborted when the caller cancels or the deadline passes. */
  readonly signal: AbortSignal;
}

/** Options every client call takes: the context is required, a deadline always applies. */
export interface CallOptions {
  readonly ctx: CallContext;
  /** Per-call timeout; defaults to the client's. */
  readonly timeoutMs?: number;
  readonly signal?: AbortSignal;
}

type UnaryImpl<I extends DescMessage, O extends DescMessage> = (
  req: MessageShape<I>,
  ctx: HandlerContext,
) => Promise<MessageInitShape<O>>;

type ServerStreamImpl<I extends DescMessage, O extends DescMessage> = (
  req: MessageShape<I>,
  ctx: HandlerContext,
) => AsyncIterable<MessageInitShape<O>>;

/** The server side of a service: one function per RPC (unary or server streaming). */
export type ServiceImpl<S extends AnyService> = {
  [K in keyof Methods<S>]: Methods<S>[K] extends {
    methodKind: "unary";
    input: infer I extends DescMessage;
    output: infer O extends DescMessage;
  }
    ? UnaryImpl<I, O>
    : Methods<S>[K] extends {
          methodKind: "server_streaming";
          input: infer I extends DescMessage;
          output: infer O extends DescMessage;
        }
      ? ServerStreamImpl<I, O>
      : never;
};

/** The typed client of a service, whatever transport is under it. */
export type ServiceClient<S extends AnyService> = {
  [K in keyof Methods<S>]: Methods<S>[K] extends {
    methodKind: "unary";
    input: infer I extends DescMessage;
    output: infer O extends DescMessage;
  }
    ? (req: MessageInitShape<I>, opts: CallOptions) => Promise<MessageShape<O>>
    : Methods<S>[K] extends {
          methodKind: "server_streaming";
          input: infer I extends DescMessage;
          output: infer O extends DescMessage;
        }
      ? (req: MessageInitShape<I>, opts: CallOptions) => AsyncIterable<MessageShape<O>>
      : never;
};

/** Untyped views used inside the transports, where the mapped types cannot follow. */
export type UntypedUnary = (req: unknown, ctx: HandlerContext) => Promise<unknown>;
export type UntypedStream = (req: unknown, ctx: HandlerContext) => AsyncIterable<unknown>;

export function supportedMethods(service: DescService): DescMethod[] {
  for (const m of service.methods) {
    if (m.methodKind !== "unary" && m.methodKind !== "server_streaming") {
      throw new Error(`${service.typeName}.${m.name}: ${m.methodKind} RPCs are not supported`);
    }
  }
  return service.methods;
}

/** The default deadline of a client call. */
export const DEFAULT_TIMEOUT_MS = 10_000;
