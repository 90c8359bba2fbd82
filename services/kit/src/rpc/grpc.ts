import { create, fromBinary, toBinary, type DescMessage, type DescMethod } from "@bufbuild/protobuf";
import {
  Client,
  credentials,
  Metadata,
  type ChannelOptions,
  type ClientReadableStream,
  type sendUnaryData,
  type Server,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceDefinition,
  type ServiceError,
  type UntypedServiceImplementation,
} from "@grpc/grpc-js";
import { once } from "node:events";
import { ChaosError, CODE_TRAILER, toGrpcError } from "../errors.js";
import { CONTEXT_HEADER, CONTEXT_SIG_HEADER, type ContextSigner } from "../context.js";
import { SUBJECT_TOKEN_HEADER, subjectTokenOf } from "../subject-token.js";
import { extractTrace, injectTrace, instrument, instrumentStream } from "./instrument.js";
import { defaultChannelOptions } from "./target.js";
import type { GrpcTls } from "./tls.js";
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

function path(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

function serializer(schema: DescMessage) {
  return (msg: object) => Buffer.from(toBinary(schema, msg as never));
}

/**
 * How deep a message may nest when it is decoded. JSON values travel as `google.protobuf.Value`,
 * two message levels per JSON level (Value → Struct or ListValue), inside the request or
 * response message and its own nesting: protobuf-es's default of 100 refuses a value at about 48
 * JSON levels, below the 64 the edge admits. Decoding stays bounded (the decoder counts depth).
 */
const GRPC_RECURSION_LIMIT = 256;

function deserializer(schema: DescMessage) {
  return (bytes: Buffer) => fromBinary(schema, bytes, { recursionLimit: GRPC_RECURSION_LIMIT });
}

/** A grpc-js service definition built from a protobuf-es service descriptor. */
export function grpcServiceDefinition(service: AnyService): ServiceDefinition {
  const def: Record<string, ServiceDefinition[string]> = {};
  for (const method of supportedMethods(service)) {
    const input = method.input as DescMessage;
    const output = method.output as DescMessage;
    def[method.localName] = {
      path: path(method),
      requestStream: false,
      responseStream: method.methodKind === "server_streaming",
      requestSerialize: serializer(input),
      requestDeserialize: deserializer(input),
      responseSerialize: serializer(output),
      responseDeserialize: deserializer(output),
      originalName: method.localName,
    };
  }
  return def as ServiceDefinition;
}

function metadataValue(md: Metadata, key: string): string | undefined {
  const v = md.get(key)[0];
  return typeof v === "string" ? v : undefined;
}

/**
 * The verified context of a server call and its cancellation signal; `answered` marks the call
 * done. grpc-js emits `cancelled` when a call's stream closes, after an answer too: from then on
 * it is not the caller cancelling, and no error is built for it (one with a stack per call).
 */
function serverHandlerContext(
  call: { metadata: Metadata; on(event: "cancelled", fn: () => void): unknown; getDeadline(): Date | number },
  signer: ContextSigner,
): { hctx: HandlerContext; answered: () => void } {
  const ctx = signer.verify(
    metadataValue(call.metadata, CONTEXT_HEADER),
    metadataValue(call.metadata, CONTEXT_SIG_HEADER),
    Date.now(),
    metadataValue(call.metadata, SUBJECT_TOKEN_HEADER),
  );
  const controller = new AbortController();
  let done = false;
  call.on("cancelled", () => {
    if (!done) controller.abort(new ChaosError("cancelled", "the caller cancelled"));
  });
  return { hctx: { call: ctx, signal: controller.signal }, answered: () => (done = true) };
}

/**
 * Registers a service implementation on a grpc-js server. Every call's context is verified
 * with the signer before the handler runs; errors are mapped to gRPC status once, here.
 */
export function addGrpcService<S extends AnyService>(
  server: Server,
  service: S,
  impl: ServiceImpl<S>,
  signer: ContextSigner,
): void {
  const handlers: UntypedServiceImplementation = {};
  for (const method of supportedMethods(service)) {
    const output = method.output as DescMessage;
    const handler = (impl as Record<string, unknown>)[method.localName];
    if (typeof handler !== "function") throw new Error(`${service.typeName}: no handler for ${method.name}`);
    if (method.methodKind === "unary") {
      const fn = handler as UntypedUnary;
      handlers[method.localName] = (call: ServerUnaryCall<object, object>, callback: sendUnaryData<object>) => {
        const parent = extractTrace((k) => metadataValue(call.metadata, k));
        let server: ReturnType<typeof serverHandlerContext>;
        try {
          server = serverHandlerContext(call, signer);
        } catch (err) {
          callback(toGrpcError(err) as ServiceError);
          return;
        }
        const { hctx, answered } = server;
        instrument("server", method, hctx.call.tenant, () => fn.call(impl, call.request, hctx), parent)
          .finally(answered)
          .then(
            (res) => callback(null, create(output, res as never)),
            (err: unknown) => callback(toGrpcError(err) as ServiceError),
          );
      };
    } else {
      const fn = handler as UntypedStream;
      handlers[method.localName] = (call: ServerWritableStream<object, object>) => {
        const parent = extractTrace((k) => metadataValue(call.metadata, k));
        let server: ReturnType<typeof serverHandlerContext>;
        try {
          server = serverHandlerContext(call, signer);
        } catch (err) {
          call.emit("error", toGrpcError(err));
          return;
        }
        const { hctx, answered } = server;
        instrument(
          "server",
          method,
          hctx.call.tenant,
          async () => {
            for await (const msg of fn.call(impl, call.request, hctx)) {
              if (hctx.signal.aborted) break;
              if (!call.write(create(output, msg as never))) {
                // A cancelled call never drains: without the signal the handler would wait here
                // for good, its generator (and whatever it holds) with it.
                await once(call, "drain", { signal: hctx.signal }).catch((err: unknown) => {
                  if (!hctx.signal.aborted) throw err;
                });
                if (hctx.signal.aborted) break;
              }
            }
          },
          parent,
        )
          .finally(answered)
          .then(
            () => call.end(),
            (err: unknown) => call.emit("error", toGrpcError(err)),
          );
      };
    }
  }
  server.addService(grpcServiceDefinition(service), handlers);
}

export interface GrpcClientOptions {
  /** Default deadline of every call. */
  timeoutMs?: number;
  /** Merged over {@link defaultChannelOptions} (round robin, re-resolution, keepalive). */
  channelOptions?: ChannelOptions;
  /** TLS to the server (presenting this service's certificate under mutual TLS); plaintext without. */
  tls?: GrpcTls | undefined;
  /**
   * Sends the caller's subject token beside the signed context (kit subject-token.ts): set on the
   * edge's client of cognition only, the one service that exchanges it for upstreams.
   */
  forwardSubjectToken?: boolean;
}

/** "chaoscore.memory.v1.MemoryService" → "the memory service". */
function serviceLabel(service: AnyService): string {
  const parts = service.typeName.split(".");
  return parts.length >= 3 && parts[0] === "chaoscore" ? `the ${parts[1]} service` : service.typeName;
}

/**
 * A call's error. A failure of the connection itself (`unavailable` that no server sent: nothing
 * listens there, the connection dropped, the name does not resolve) says which service could
 * not be reached; an error a server sent passes through unchanged.
 */
function callError(err: unknown, service: AnyService): ChaosError {
  const e = ChaosError.from(err);
  const fromServer = err instanceof Error && (err as Partial<ServiceError>).metadata?.get(CODE_TRAILER).length;
  if (e.code !== "unavailable" || fromServer) return e;
  return new ChaosError("unavailable", `${serviceLabel(service)} is unreachable: ${transportReason(e.message)}`, { cause: err });
}

/**
 * grpc-js's reason without its nesting: "round_robin: No connection established. Last error: No
 * connection established. Last error: Error: connect ECONNREFUSED 10.0.0.7:50052. Resolution
 * note: " becomes "connect ECONNREFUSED 10.0.0.7:50052". The whole text stays in the cause.
 */
function transportReason(details: string): string {
  let reason = details.replace(/^round_robin: /, "");
  while (reason.startsWith("No connection established. Last error: ")) reason = reason.slice("No connection established. Last error: ".length);
  reason = reason.replace(/^Error: /, "").replace(/\. Resolution note: $/, "");
  return reason || details;
}

/** A typed client plus the channel it owns. */
export interface GrpcClient<S extends AnyService> {
  readonly client: ServiceClient<S>;
  close(): void;
}

/**
 * A typed gRPC client for a service at `address`, over TLS when `options.tls` is given
 * (`CHAOS_CORE_GRPC_TLS_*`), else plaintext. `address` is any form {@link parseGrpcTarget} accepts: `host:port`,
 * `dns:///host:port` (a headless Service: every pod), or an `ipv4:`/`ipv6:` address list. The
 * channel balances calls round robin over every address the target resolves to, looks the
 * name up again when a connection is lost, and reconnects to a restarted service by itself
 * ({@link defaultChannelOptions}). Every call is signed with the call context, carries the W3C
 * trace context and a deadline.
 */
export function createGrpcClient<S extends AnyService>(
  service: S,
  address: string,
  signer: ContextSigner,
  options: GrpcClientOptions = {},
): GrpcClient<S> {
  const channel = new Client(address, options.tls ? options.tls.channelCredentials() : credentials.createInsecure(), {
    ...defaultChannelOptions(),
    ...options.tls?.channelOptions(),
    ...options.channelOptions,
  });
  const defaultTimeout = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const client: Record<string, unknown> = {};

  const prepare = (opts: CallOptions) => {
    const md = new Metadata();
    const subject = options.forwardSubjectToken ? subjectTokenOf(opts.ctx) : undefined;
    const signed = signer.sign(opts.ctx, Date.now(), subject);
    md.set(CONTEXT_HEADER, signed.context);
    md.set(CONTEXT_SIG_HEADER, signed.signature);
    if (subject !== undefined) md.set(SUBJECT_TOKEN_HEADER, subject);
    injectTrace((k, v) => md.set(k, v));
    const deadline = Date.now() + (opts.timeoutMs ?? defaultTimeout);
    return { md, deadline };
  };

  for (const method of supportedMethods(service)) {
    const input = method.input as DescMessage;
    const output = method.output as DescMessage;
    const ser = serializer(input);
    const de = deserializer(output);
    if (method.methodKind === "unary") {
      client[method.localName] = (req: object, opts: CallOptions) =>
        instrument("client", method, opts.ctx.tenant, () => {
          const { md, deadline } = prepare(opts);
          return new Promise((resolve, reject) => {
            // The caller's signal may outlive this call: the listener goes when the call ends.
            const onAbort = () => call.cancel();
            const call = channel.makeUnaryRequest(path(method), ser, de, create(input, req as never), md, { deadline }, (err, res) => {
              opts.signal?.removeEventListener("abort", onAbort);
              if (err) reject(callError(err, service));
              else resolve(res);
            });
            opts.signal?.addEventListener("abort", onAbort, { once: true });
          });
        });
    } else {
      client[method.localName] = (req: object, opts: CallOptions) =>
        instrumentStream("client", method, opts.ctx.tenant, async function* () {
          const { md, deadline } = prepare(opts);
          const call: ClientReadableStream<unknown> = channel.makeServerStreamRequest(
            path(method),
            ser,
            de,
            create(input, req as never),
            md,
            { deadline },
          );
          const onAbort = () => call.cancel();
          opts.signal?.addEventListener("abort", onAbort, { once: true });
          try {
            for await (const msg of call) yield msg;
          } catch (err) {
            throw callError(err, service);
          } finally {
            opts.signal?.removeEventListener("abort", onAbort);
            call.cancel();
          }
        });
    }
  }
  return { client: client as ServiceClient<S>, close: () => channel.close() };
}
