import { create, fromJson, toJson, type DescMessage, type DescMethod, type JsonValue } from "@bufbuild/protobuf";
import { ChaosError, type AnyService, type CallOptions, type ServiceClient } from "@chaos-core/kit";
import { adminRequest, type AdminFile } from "./admin-client.js";

/** Where the admin endpoint answers a service's unary RPCs as JSON: `POST /v1/rpc/<service>/<Method>`. */
export const ADMIN_RPC_PREFIX = "/v1/rpc/";

/** JSON as the proto3 JSON mapping writes it, with field names as in the .proto (snake_case). */
const JSON_OPTIONS = { useProtoFieldName: true } as const;

/** The unary method `name` of `service`, or undefined. */
function unaryMethod(service: AnyService, name: string): DescMethod | undefined {
  return service.methods.find((m) => m.name === name && m.methodKind === "unary");
}

/**
 * Answers one RPC of `service` through `client` with JSON in and out (the proto3 JSON mapping,
 * as a Connect unary call over HTTP carries it): the standalone admin endpoint's way of serving
 * the same API a cluster serves over gRPC, so `chaos-core tenants` speaks one API to both. A body
 * that is not the request message is `invalid_argument`, naming the field.
 */
export async function answerAdminRpc<S extends AnyService>(
  service: S,
  client: ServiceClient<S>,
  methodName: string,
  body: unknown,
  opts: CallOptions,
): Promise<JsonValue> {
  const method = unaryMethod(service, methodName);
  if (!method) throw new ChaosError("not_found", `${service.typeName} has no method ${methodName}`);
  let request;
  try {
    request = fromJson(method.input as DescMessage, body as JsonValue);
  } catch (err) {
    // protobuf-es names the message and field ("cannot decode field chaoscore.admin.v1.X.y from JSON: ...").
    throw new ChaosError("invalid_argument", `body: ${(err as Error).message}`);
  }
  const call = (client as Record<string, (req: unknown, opts: CallOptions) => Promise<unknown>>)[method.localName]!;
  const response = await call(request, opts);
  return toJson(method.output as DescMessage, response as never, JSON_OPTIONS);
}

/**
 * A client of `service` that calls a running standalone's admin endpoint ({@link answerAdminRpc}):
 * the same typed client `chaos-core tenants` uses over gRPC in a cluster. Unary RPCs only.
 */
export function adminRpcClient<S extends AnyService>(service: S, admin: AdminFile): ServiceClient<S> {
  const client: Record<string, unknown> = {};
  for (const method of service.methods) {
    if (method.methodKind !== "unary") continue;
    client[method.localName] = async (req: object) => {
      const body = toJson(method.input as DescMessage, create(method.input as DescMessage, req as never), JSON_OPTIONS) as Record<string, unknown>;
      const res = await adminRequest(admin, "POST", `${ADMIN_RPC_PREFIX}${service.typeName}/${method.name}`, body);
      return fromJson(method.output as DescMessage, (await res.json()) as JsonValue);
    };
  }
  return client as ServiceClient<S>;
}
