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
import { isJSONRPCRequest, ProtocolErrorCode } from "@modelcontextprotocol/server";
import type { Transport, JSONRPCMessage } from "@modelcontextprotocol/server";
import { ChaosError, describeZodIssues, formatIssuePath, toMcpErrorResult } from "@chaos-core/kit";
import { MAX_ARGUMENT_VALUES, MAX_JSON_DEPTH } from "../config.js";
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

/** One value still to look at; its path is rebuilt from the parents only when a problem names it. */
interface Pending {
  readonly value: unknown;
  readonly key: PropertyKey | undefined;
  readonly parent: Pending | undefined;
  readonly depth: number;
}

function pathOf(entry: Pending, last?: PropertyKey): PropertyKey[] {
  const path: PropertyKey[] = last === undefined ? [] : [last];
  for (let e: Pending | undefined = entry; e?.key !== undefined; e = e.parent) path.push(e.key);
  return path.reverse();
}

/**
 * What no schema can be trusted to see: nesting beyond {@link MAX_JSON_DEPTH} (zod and every
 * reader after it recurse), more than {@link MAX_ARGUMENT_VALUES} values (zod, the SDK's own
 * check and hashing each walk them all), a `__proto__` field (zod's object parsing assigns it,
 * which sets the prototype instead of storing the field, so the value would silently change),
 * and a number JSON text overflowed to Infinity (`1e400`). Iterative and allocation-light: a
 * body at the size limit is walked in milliseconds and cannot overflow the stack.
 */
export function structuralProblems(args: Record<string, unknown>): string[] {
  const problems: string[] = [];
  const stack: Pending[] = [{ value: args, key: undefined, parent: undefined, depth: 1 }];
  let values = 0;
  while (stack.length > 0 && problems.length < 10) {
    const entry = stack.pop()!;
    const { value, depth } = entry;
    if (typeof value === "number") {
      problems.push(`${shortPath(pathOf(entry))}: the number is out of range (at most about ±1.8e308)`);
      continue;
    }
    if (depth > MAX_JSON_DEPTH) {
      problems.push(`${shortPath(pathOf(entry))}: nests deeper than ${MAX_JSON_DEPTH} levels`);
      break;
    }
    // Only objects and out-of-range numbers are pushed: nothing else can hold a problem.
    const push = (child: unknown, key: PropertyKey) => {
      if ((child !== null && typeof child === "object") || (typeof child === "number" && !Number.isFinite(child))) {
        stack.push({ value: child, key, parent: entry, depth: depth + 1 });
      }
    };
    const keys = Array.isArray(value) ? undefined : Object.keys(value as object);
    values += keys ? keys.length : (value as unknown[]).length;
    // Counted before the members are looked at: an array of a million zeros costs nothing.
    if (values > MAX_ARGUMENT_VALUES) {
      problems.push(`arguments: more than ${MAX_ARGUMENT_VALUES} values (objects, arrays and their members); send less at once`);
      break;
    }
    if (!keys) {
      const items = value as unknown[];
      // Reversed onto the stack, so problems come out in the order the fields were written.
      for (let i = items.length - 1; i >= 0; i--) push(items[i], i);
    } else {
      for (const key of keys) {
        if (key === "__proto__") problems.push(`${shortPath(pathOf(entry, key))}: "__proto__" is not accepted as a field name`);
      }
      for (let i = keys.length - 1; i >= 0; i--) {
        const key = keys[i]!;
        if (key !== "__proto__") push((value as Record<string, unknown>)[key], key);
      }
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
    error: { code: ProtocolErrorCode.InvalidParams, message: text },
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
  const problems = argumentProblems(tool, args as Record<string, unknown>);
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
    let refusal: JSONRPCMessage | undefined;
    try {
      refusal = toolCallRefusal(message, tools);
    } catch (err) {
      // A check that cannot run must not wave the call through to the SDK's own (raw) check.
      transport.onerror?.(err instanceof Error ? err : new Error(String(err)));
      if (!isJSONRPCRequest(message)) return;
      refusal = { jsonrpc: "2.0", id: message.id, result: toMcpErrorResult(new ChaosError("internal", "the arguments could not be checked")) };
    }
    if (!refusal) return dispatch?.(message, extra);
    transport.send(refusal).catch((err: unknown) => transport.onerror?.(err instanceof Error ? err : new Error(String(err))));
  };
}
