import { status as GrpcStatus, Metadata, type ServiceError } from "@grpc/grpc-js";

/**
 * Stable, machine-readable error codes. They travel unchanged from a domain error through
 * gRPC (as a trailer beside the status) to an MCP tool result, so a client can branch on them.
 */
export const ERROR_CODES = [
  "invalid_argument",
  "not_found",
  "already_exists",
  "permission_denied",
  "unauthenticated",
  "policy_denied",
  "approval_required",
  "failed_precondition",
  "conflict",
  "resource_exhausted",
  "deadline_exceeded",
  "unavailable",
  "cancelled",
  "unimplemented",
  "internal",
  // A served definition no longer matches its pinned contract (docs/contracts.md §7).
  "contract_drift",
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];

const TO_GRPC: Record<ErrorCode, GrpcStatus> = {
  invalid_argument: GrpcStatus.INVALID_ARGUMENT,
  not_found: GrpcStatus.NOT_FOUND,
  already_exists: GrpcStatus.ALREADY_EXISTS,
  permission_denied: GrpcStatus.PERMISSION_DENIED,
  unauthenticated: GrpcStatus.UNAUTHENTICATED,
  policy_denied: GrpcStatus.PERMISSION_DENIED,
  approval_required: GrpcStatus.FAILED_PRECONDITION,
  failed_precondition: GrpcStatus.FAILED_PRECONDITION,
  conflict: GrpcStatus.ABORTED,
  resource_exhausted: GrpcStatus.RESOURCE_EXHAUSTED,
  deadline_exceeded: GrpcStatus.DEADLINE_EXCEEDED,
  unavailable: GrpcStatus.UNAVAILABLE,
  cancelled: GrpcStatus.CANCELLED,
  unimplemented: GrpcStatus.UNIMPLEMENTED,
  internal: GrpcStatus.INTERNAL,
  contract_drift: GrpcStatus.FAILED_PRECONDITION,
};

const FROM_GRPC: Partial<Record<GrpcStatus, ErrorCode>> = {
  [GrpcStatus.INVALID_ARGUMENT]: "invalid_argument",
  [GrpcStatus.NOT_FOUND]: "not_found",
  [GrpcStatus.ALREADY_EXISTS]: "already_exists",
  [GrpcStatus.PERMISSION_DENIED]: "permission_denied",
  [GrpcStatus.UNAUTHENTICATED]: "unauthenticated",
  [GrpcStatus.FAILED_PRECONDITION]: "failed_precondition",
  [GrpcStatus.ABORTED]: "conflict",
  [GrpcStatus.RESOURCE_EXHAUSTED]: "resource_exhausted",
  [GrpcStatus.DEADLINE_EXCEEDED]: "deadline_exceeded",
  [GrpcStatus.UNAVAILABLE]: "unavailable",
  [GrpcStatus.CANCELLED]: "cancelled",
  [GrpcStatus.UNIMPLEMENTED]: "unimplemented",
};

/** Trailer that carries the stable code across a gRPC hop. */
export const CODE_TRAILER = "chaoscore-error-code";

function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === "string" && (ERROR_CODES as readonly string[]).includes(value);
}

/**
 * The one error type of Chaos Core. Domain code throws it; boundaries normalise anything
 * else with {@link ChaosError.from} and map it exactly once.
 */
export class ChaosError extends Error {
  override readonly name = "ChaosError";

  constructor(
    readonly code: ErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  /** Normalises any thrown value; unknown errors become `internal` without leaking details. */
  static from(err: unknown): ChaosError {
    if (err instanceof ChaosError) return err;
    if (isServiceError(err)) return fromServiceError(err);
    if (err instanceof Error && err.name === "AbortError") {
      return new ChaosError("cancelled", "the call was cancelled", { cause: err });
    }
    return new ChaosError("internal", "internal error", { cause: err });
  }
}

function isServiceError(err: unknown): err is ServiceError {
  return (
    err instanceof Error &&
    typeof (err as Partial<ServiceError>).code === "number" &&
    (err as Partial<ServiceError>).metadata instanceof Metadata
  );
}

function fromServiceError(err: ServiceError): ChaosError {
  const carried = err.metadata.get(CODE_TRAILER)[0];
  const code = isErrorCode(carried) ? carried : (FROM_GRPC[err.code] ?? "internal");
  return new ChaosError(code, err.details || err.message, { cause: err });
}

/** Maps an error to the object grpc-js sends as a status, carrying the stable code. */
export function toGrpcError(err: unknown): Partial<ServiceError> {
  const e = ChaosError.from(err);
  const metadata = new Metadata();
  metadata.set(CODE_TRAILER, e.code);
  return { code: TO_GRPC[e.code], details: e.message, metadata };
}

/** The shape of an MCP tool result for a failed tool call. */
export interface McpErrorResult {
  [key: string]: unknown;
  isError: true;
  content: Array<{ type: "text"; text: string }>;
  structuredContent: { error: { code: ErrorCode; message: string } };
}

/**
 * Maps an error to an MCP tool result with `isError: true`: a message a model can act on,
 * and the stable code in `structuredContent.error.code`.
 */
export function toMcpErrorResult(err: unknown): McpErrorResult {
  const e = ChaosError.from(err);
  return {
    isError: true,
    content: [{ type: "text", text: `${e.code}: ${e.message}` }],
    structuredContent: { error: { code: e.code, message: e.message } },
  };
}
