/**
 * What both transports check in a message's raw bytes before the SDK decodes it: that it is
 * UTF-8 (decoding would silently turn a bad byte into U+FFFD, and that is what would be stored),
 * that it holds no `NaN`/`Infinity` token, and that it nests at most {@link MAX_JSON_DEPTH}
 * levels. A refusal is the JSON-RPC error to answer, carrying the request's id whenever the
 * bytes let it be read, and the field it is about.
 *
 * Nesting inside a `tools/call`'s `arguments` is left to the tool-argument check, which counts
 * it from the arguments and answers it as an `invalid_argument` tool result; nothing the SDK
 * does before that recurses into arguments.
 */
import { isUtf8 } from "node:buffer";
import { JSONRPCMessageSchema } from "@modelcontextprotocol/core";
import { formatIssuePath, isObject, scanJsonText, type JsonPath } from "@chaos-core/kit";
import { MAX_JSON_DEPTH } from "../config.js";

/** A JSON-RPC request id. */
export type RequestId = string | number;

/** A message refused before the SDK saw it. */
export interface Refusal {
  /** The request's id, or null when the message did not let it be read. */
  readonly id: RequestId | null;
  readonly error: {
    readonly code: number;
    readonly message: string;
    /** The field the refusal is about, as a path from the message (`params.arguments.value`). */
    readonly data?: { readonly code: "invalid_argument"; readonly path: string };
  };
}

/** What screening found: the request's id when it could be read, and a refusal if any. */
export interface Screened {
  readonly id: RequestId | undefined;
  readonly refusal?: Refusal;
}

/**
 * The message a body (HTTP) or line (stdio) over `maxBytes` is refused with: the SDK's own words
 * (its `requestBodyTooLargeMessage`, which v2 no longer exports), so clients see what they saw.
 */
export function payloadTooLargeMessage(maxBytes: number): string {
  return `Payload Too Large: Request body must not exceed ${maxBytes} bytes`;
}

/** The JSON-RPC error response that answers a refusal. */
export function refusalResponse(refusal: Refusal): { jsonrpc: "2.0"; id: RequestId | null; error: Refusal["error"] } {
  return { jsonrpc: "2.0", id: refusal.id, error: refusal.error };
}

const ARGUMENTS: readonly string[] = ["params", "arguments"];

/** Offset of the first byte that does not start a well-formed UTF-8 sequence (Unicode table 3-7), or -1. */
export function firstInvalidUtf8(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length; ) {
    const b = bytes[i]!;
    if (b < 0x80) {
      i++;
      continue;
    }
    const trailing = b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : 0;
    if (trailing === 0) return i;
    // The second byte's range excludes overlong forms, surrogates and code points past U+10FFFF.
    const low = b === 0xe0 ? 0xa0 : b === 0xf0 ? 0x90 : 0x80;
    const high = b === 0xed ? 0x9f : b === 0xf4 ? 0x8f : 0xbf;
    const second = bytes[i + 1];
    if (second === undefined || second < low || second > high) return i;
    for (let k = 2; k <= trailing; k++) {
      const next = bytes[i + k];
      if (next === undefined || next < 0x80 || next > 0xbf) return i;
    }
    i += trailing + 1;
  }
  return -1;
}

function requestId(top: ReadonlyMap<string, string | number>): RequestId | undefined {
  return top.get("id");
}

function where(path: JsonPath): string {
  return formatIssuePath(path, "the message", 8);
}

function invalidUtf8(bytes: Uint8Array): Refusal {
  const offset = firstInvalidUtf8(bytes);
  const byte = `0x${bytes[offset]!.toString(16).toUpperCase().padStart(2, "0")}`;
  // The id may come after the bad byte; replacement characters do not move the structure.
  const id = requestId(scanJsonText(Buffer.from(bytes).toString("utf8"), { maxDepth: MAX_JSON_DEPTH }).top) ?? null;
  const before = Buffer.from(bytes.subarray(0, offset)).toString("utf8");
  const open = scanJsonText(before, { maxDepth: Number.MAX_SAFE_INTEGER }).unterminated;
  const detail = `(byte ${byte} at offset ${offset})`;
  if (!open) return { id, error: { code: -32700, message: `Parse error: the message is not valid UTF-8 ${detail}` } };
  const path = where(open.path);
  const what = open.inKey ? `a field name in ${path}` : path;
  return {
    id,
    error: { code: -32700, message: `Parse error: ${what} is not valid UTF-8 ${detail}`, data: { code: "invalid_argument", path } },
  };
}

/**
 * Screens one message's raw bytes (an HTTP body, a stdio line). Shapes of a refusal:
 * - invalid UTF-8: `-32700 Parse error: params.arguments.value is not valid UTF-8 (byte 0xFF at offset 87)`;
 * - `NaN`/`Infinity`: `-32700 Parse error: NaN at params.arguments.x is not JSON (…)`;
 * - nesting beyond the limit outside tool arguments:
 *   `-32602 Invalid params: params._meta.a[0]… nests deeper than 64 levels` (`-32600 Invalid Request` outside params);
 * each with `data: {code: "invalid_argument", path}` when it names a field.
 */
export function screenMessage(bytes: Uint8Array): Screened {
  if (!isUtf8(bytes)) {
    const refusal = invalidUtf8(bytes);
    return { id: refusal.id ?? undefined, refusal };
  }
  const scan = scanJsonText(Buffer.from(bytes).toString("utf8"), { maxDepth: MAX_JSON_DEPTH, within: ARGUMENTS });
  const id = requestId(scan.top);
  if (scan.notJson) {
    const path = where(scan.notJson.path);
    return {
      id,
      refusal: {
        id: id ?? null,
        error: {
          code: -32700,
          message: `Parse error: ${scan.notJson.token} at ${path} is not JSON (JSON has no NaN or Infinity; send a number or null)`,
          data: { code: "invalid_argument", path },
        },
      },
    };
  }
  const deep = scan.tooDeep ?? (scan.top.get("method") === "tools/call" ? undefined : scan.tooDeepWithin);
  if (deep) {
    const path = where(deep);
    const kind = deep[0] === "params" ? { code: -32602, text: "Invalid params" } : { code: -32600, text: "Invalid Request" };
    return {
      id,
      refusal: {
        id: id ?? null,
        error: {
          code: kind.code,
          message: `${kind.text}: ${path} nests deeper than ${MAX_JSON_DEPTH} levels`,
          data: { code: "invalid_argument", path },
        },
      },
    };
  }
  return { id };
}

const REQUEST_KEYS = new Set(["jsonrpc", "id", "method", "params"]);

/**
 * Whether `m` is a JSON-RPC request the SDK's `JSONRPCMessageSchema` surely accepts, judged
 * without it: every `tools/call` passes through {@link envelopeRefusal} and the SDK validates it
 * again, so the common shape is checked by hand (the schema cost 3 % of the server's CPU under
 * 16 clients). Only `true` is an answer: anything else (a notification, a response, a `_meta`
 * naming a task) goes to the schema. The schema's request is strict (these four keys), its id a
 * string or safe integer, its params an object whose `_meta`, if any, is an object whose
 * `progressToken`, if any, is a string or safe integer.
 */
export function isPlainRequest(m: unknown): boolean {
  if (!isObject(m)) return false;
  for (const key of Object.keys(m)) if (!REQUEST_KEYS.has(key)) return false;
  if (m["jsonrpc"] !== "2.0" || typeof m["method"] !== "string") return false;
  const id = m["id"];
  if (typeof id !== "string" && !Number.isSafeInteger(id)) return false;
  const params = m["params"];
  if (params === undefined) return true;
  if (!isObject(params)) return false;
  const meta = params["_meta"];
  if (meta === undefined) return true;
  if (!isObject(meta) || Object.keys(meta).some((key) => key !== "progressToken")) return false;
  const token = meta["progressToken"];
  return token === undefined || typeof token === "string" || Number.isSafeInteger(token);
}

/**
 * Refuses a parsed body that is not a JSON-RPC message (or a batch of them), in the SDK's own
 * words (`-32700 Parse error: Invalid JSON-RPC message`) but with the request's id.
 */
export function envelopeRefusal(value: unknown, id: RequestId | undefined): Refusal | undefined {
  const messages: unknown[] = Array.isArray(value) ? value : [value];
  if (messages.every((m) => isPlainRequest(m) || JSONRPCMessageSchema.safeParse(m).success)) return undefined;
  return { id: id ?? null, error: { code: -32700, message: "Parse error: Invalid JSON-RPC message" } };
}
