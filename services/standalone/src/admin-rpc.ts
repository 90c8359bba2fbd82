import { createInterface } from "node:readline";
import { Readable } from "node:stream";
import type { ReadableStream as WebReadableStream } from "node:stream/web";
import { create, fromJson, toJson, type DescMessage, type DescMethod, type JsonValue } from "@bufbuild/protobuf";
import { ChaosError, type AnyService, type CallOptions, type ServiceClient } from "@chaos-core/kit";
import { adminRequest, type AdminFile } from "./admin-client.js";

/**
 * Where the admin endpoint answers a service's RPCs as JSON: `POST /v1/rpc/<service>/<Method>?tenant=T`.
 * A unary answer is one JSON object; a server stream is NDJSON, one message a line.
 */
export const ADMIN_RPC_PREFIX = "/v1/rpc/";

/** JSON as the proto3 JSON mapping writes it, with field names as in the .proto (snake_case). */
const JSON_OPTIONS = { useProtoFieldName: true } as const;

/** One service the admin endpoint bridges, and which of its methods (all when unset). */
export interface BridgedService<S extends AnyService = AnyService> {
  readonly service: S;
  readonly client: ServiceClient<S>;
  readonly methods?: readonly string[];
}

/** What a bridged call answers: one message, or a stream of them. */
export type AdminRpcAnswer = { readonly kind: "unary"; readonly message: JsonValue } | { readonly kind: "stream"; readonly messages: AsyncIterable<JsonValue> };

/** The method `name` of a bridged service, or a `not_found` naming what exists. */
function bridgedMethod(bridged: BridgedService, name: string): DescMethod {
  const method = bridged.service.methods.find((m) => m.name === name && (bridged.methods ?? [m.name]).includes(m.name));
  if (!method) throw new ChaosError("not_found", `${bridged.service.typeName} has no method ${name} on the admin endpoint`);
  return method;
}

/**
 * Answers one RPC of a bridged service through its client with JSON in and out (the proto3 JSON
 * mapping, as a Connect call over HTTP carries it): the standalone admin endpoint's way of serving
 * the APIs a cluster serves over gRPC, so `chaos-core tenants` speaks one API to both. A body that
 * is not the request message is `invalid_argument`, naming the field.
 */
export async function answerAdminRpc(bridged: BridgedService, methodName: string, body: unknown, opts: CallOptions): Promise<AdminRpcAnswer> {
  const method = bridgedMethod(bridged, methodName);
  let request;
  try {
    request = fromJson(method.input as DescMessage, body as JsonValue);
  } catch (err) {
    // protobuf-es names the message and field ("cannot decode field chaoscore.admin.v1.X.y from JSON: ...").
    throw new ChaosError("invalid_argument", `body: ${(err as Error).message}`);
  }
  const output = method.output as DescMessage;
  const call = (bridged.client as Record<string, (req: unknown, opts: CallOptions) => unknown>)[method.localName]!;
  if (method.methodKind === "unary") {
    return { kind: "unary", message: toJson(output, (await call(request, opts)) as never, JSON_OPTIONS) };
  }
  const stream = call(request, opts) as AsyncIterable<unknown>;
  return {
    kind: "stream",
    messages: (async function* () {
      for await (const m of stream) yield toJson(output, m as never, JSON_OPTIONS);
    })(),
  };
}

/**
 * A client of `service` that calls a running standalone's admin endpoint ({@link answerAdminRpc}):
 * the same typed client `chaos-core tenants` uses over gRPC in a cluster. The call's tenant travels
 * as `?tenant=`; the endpoint calls as the operator of that tenant.
 */
export function adminRpcClient<S extends AnyService>(service: S, admin: AdminFile): ServiceClient<S> {
  const client: Record<string, unknown> = {};
  for (const method of service.methods) {
    const input = method.input as DescMessage;
    const output = method.output as DescMessage;
    const post = (req: object, opts: CallOptions) =>
      adminRequest(
        admin,
        "POST",
        `${ADMIN_RPC_PREFIX}${service.typeName}/${method.name}?tenant=${encodeURIComponent(opts.ctx.tenant)}`,
        toJson(input, create(input, req as never), JSON_OPTIONS) as Record<string, unknown>,
      );
    client[method.localName] =
      method.methodKind === "unary"
        ? async (req: object, opts: CallOptions) => fromJson(output, (await (await post(req, opts)).json()) as JsonValue)
        : async function* (req: object, opts: CallOptions) {
            const res = await post(req, opts);
            if (!res.body) return;
            const lines = createInterface({ input: Readable.fromWeb(res.body as WebReadableStream), crlfDelay: Infinity });
            for await (const line of lines) {
              if (line === "") continue;
              const parsed = JSON.parse(line) as { error?: { code?: string; message?: string } } & Record<string, unknown>;
              // An error after the stream began comes as its last line.
              if (parsed.error && Object.keys(parsed).length === 1) throw new Error(`${parsed.error.code ?? "error"}: ${parsed.error.message ?? "the stream failed"}`);
              yield fromJson(output, parsed as JsonValue);
            }
          };
  }
  return client as ServiceClient<S>;
}
