/**
 * The one place tool arguments are checked, for every tool and every transport (MCP 2025-11-25,
 * SEP-1303): a `tools/call` that cannot name a tool or whose `arguments` is not an object is a
 * JSON-RPC `-32602 Invalid params`; a well-formed call whose arguments the tool cannot take is
 * a tool result with `isError: true`, code `invalid_argument` and one short line per field, so
 * a model can correct itself. Only calls that pass reach the SDK and the tool.
 *
 * It sits in front of the SDK's own dispatch (see {@link guardToolCalls}) because the SDK answers
 * a non-object `arguments` with `-32603` and zod's raw issue dump, an unknown tool with a tool
 * result, and a schema failure in its own words; and because zod validation is recursive, so
 * depth must be refused before it runs.
 */
import { z } from "zod";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, isJSONRPCRequest, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { ChaosError, describeZodIssues, formatIssuePath, toMcpErrorResult } from "@chaos-core/kit";
import { MAX_JSON_DEPTH } from "../config.js";
import type { ToolDefinition } from "../tools/define.js";

const strict = new WeakMap<z.ZodObject, z.ZodObject>();

/**
 * The schema a tool's arguments are held to and published as: its input with unknown fields
 * refused (`additionalProperties: false`), so a misspelt field is named instead of dropped.
 */
export function argumentsSchema(input: z.ZodObject): z.ZodObject {
  let schema = strict.get(input);
  if (!schema) {
    schema = input.strict();
    const meta = z.globalRegistry.get(input);
    if (meta) schema = schema.meta(meta);
    strict.set(input, schema);
  }
  return schema;
}

const shortPath = (path: readonly PropertyKey[]) => formatIssuePath(path, "arguments", 8);

/**
 * What no schema can be trusted to see: nesting beyond {@link MAX_JSON_DEPTH} (zod and every
 * reader after it recurse), a `__proto__` field (zod's object parsing assigns it, which sets the
 * prototype instead of storing the field, so the value would silently change), and a number JSON
 * text overflowed to Infinity (`1e400`). Iterative, so it cannot overflow the stack itself.
 */
export function structuralProblems(args: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const stack: Array<{ value: unknown; path: PropertyKey[]; depth: number }> = [{ value: args, path: [], depth: 1 }];
  while (stack.length > 0 && problems.length < 10) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === "number" && !Number.isFinite(value)) {
      problems.push(`${shortPath(path)}: the number is out of range (at most about ±1.8e308)`);
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    if (depth > MAX_JSON_DEPTH) {
      problems.push(`${shortPath(path)}: nests deeper than ${MAX_JSON_DEPTH} levels`);
      break;
    }
    const children: Array<[PropertyKey, unknown]> = Array.isArray(value)
      ? value.map((v, i) => [i, v])
      : Object.keys(value).map((k) => [k, (value as Record<string, unknown>)[k]]);
    for (const [key] of children) {
      if (key === "__proto__") problems.push(`${shortPath([...path, key])}: "__proto__" is not accepted as a field name`);
    }
    // Reversed onto the stack, so problems come out in the order the fields were written.
    for (let i = children.length - 1; i >= 0; i--) {
      const [key, child] = children[i]!;
      if (key !== "__proto__") stack.push({ value: child, path: [...path, key], depth: depth + 1 });
    }
  }
  return problems;
}

/** The problems of `args` for `tool`, one line each; empty when the tool can take them. */
export function argumentProblems(tool: ToolDefinition, args: Record<string, unknown>): string[] {
  const structural = structuralProblems(args);
  if (structural.length > 0) return structural;
  const schema = argumentsSchema(tool.input);
  const parsed = schema.safeParse(args, { reportInput: true });
  return parsed.success ? [] : describeZodIssues(parsed.error, schema, "arguments");
}

/** {@link argumentProblems}, or none when the schema cannot be checked synchronously (the SDK's own check then decides). */
function syncArgumentProblems(tool: ToolDefinition, args: Record<string, unknown>): string[] {
  try {
    return argumentProblems(tool, args);
  } catch {
    return [];
  }
}

function typeOf(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
}

function quotedName(name: string): string {
  return name.length > 100 ? `${name.slice(0, 100)}…` : name;
}

/**
 * The reply that takes the place of a `tools/call` request its tool must not see, or undefined
 * when the call may go on. Protocol problems are JSON-RPC errors (`-32602`): params without a
 * tool name, an unknown tool (`Unknown tool: NAME`, as the MCP specification words it), and
 * `arguments` that is not an object (`Invalid params: arguments: expected object, got null`).
 * Argument problems are a tool result with `isError: true` and code `invalid_argument`, its
 * message one `field: problem` line per problem joined by `; `.
 */
export function toolCallRefusal(
  message: JSONRPCMessage,
  tools: ReadonlyMap<string, ToolDefinition>,
): JSONRPCMessage | undefined {
  if (!isJSONRPCRequest(message) || message.method !== "tools/call") return undefined;
  const invalidParams = (text: string): JSONRPCMessage => ({
    jsonrpc: "2.0",
    id: message.id,
    error: { code: ErrorCode.InvalidParams, message: text },
  });
  const params = message.params as Record<string, unknown> | undefined;
  const name = params?.name;
  if (name === undefined) return invalidParams("Invalid params: name: required, expected the tool's name (string)");
  if (typeof name !== "string") return invalidParams(`Invalid params: name: expected the tool's name (string), got ${typeOf(name)}`);
  const tool = tools.get(name);
  if (!tool) return invalidParams(`Unknown tool: ${quotedName(name)}`);
  // Absent arguments are no arguments, as the SDK reads them; null is not.
  const args = params?.arguments === undefined ? {} : params.arguments;
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    return invalidParams(`Invalid params: arguments: expected object, got ${typeOf(args)}`);
  }
  const problems = syncArgumentProblems(tool, args as Record<string, unknown>);
  if (problems.length === 0) return undefined;
  return {
    jsonrpc: "2.0",
    id: message.id,
    result: toMcpErrorResult(new ChaosError("invalid_argument", problems.join("; "))),
  };
}

/**
 * Makes every message `transport` delivers pass {@link toolCallRefusal} first: a refused call
 * is answered on the same transport and never dispatched. Call it once the server is connected
 * (connecting sets the `onmessage` this wraps).
 */
export function guardToolCalls(transport: Transport, tools: ReadonlyMap<string, ToolDefinition>): void {
  const dispatch = transport.onmessage;
  transport.onmessage = (message, extra) => {
    const refusal = toolCallRefusal(message, tools);
    if (!refusal) return dispatch?.(message, extra);
    transport.send(refusal).catch((err: unknown) => transport.onerror?.(err instanceof Error ? err : new Error(String(err))));
  };
}
