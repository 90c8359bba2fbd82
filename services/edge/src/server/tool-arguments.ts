/**
 * The one place tool arguments are checked, for every tool and every transport (MCP 2025-11-25,
 * SEP-1303): a `tools/call` that cannot name a tool or whose `arguments` is not an object is a
 * JSON-RPC `-32602 Invalid params`; a well-formed call whose arguments the tool cannot take is
 * a tool result with `isError: true`, code `invalid_argument` and one short line per field, so
 * a model can correct itself. Only calls that pass reach the tool.
 *
 * Two places, one set of answers:
 * - In front of the SDK's own dispatch ({@link guardToolCalls}), on the message as it arrived:
 *   the protocol refusals (the SDK would answer a non-object `arguments` with zod's raw issue
 *   dump and an unknown tool with its own words) and the structural screen of the raw arguments
 *   ({@link structuralProblems}): zod validation is recursive, so depth must be refused before
 *   any schema runs, and the SDK's own parse of the request (a zod record) drops a top-level
 *   `__proto__` key, so it must be seen before that parse. What the screen finds waits in the
 *   connection's {@link ArgumentScreen} for the call's handler.
 * - In the tool's handler ({@link checkToolArguments}): the screen's findings, then the tool's
 *   strict schema. The SDK is given a pass-through schema (definitions/tool-schemas.ts,
 *   `publishedArguments`): it publishes the strict schema and accepts anything, so the SDK
 *   never answers with its own `Input validation error:` text, and the refusal is an ordinary
 *   result of the handler.
 */
import type { z } from "zod";
import {
  isJSONRPCRequest,
  ProtocolErrorCode,
  type AuthInfo,
  type CallToolResult,
  type JSONRPCMessage,
  type RequestId,
  type Transport,
} from "@modelcontextprotocol/server";
import { ChaosError, describeZodIssues, formatIssuePath, likelyMeant, toMcpErrorResult } from "@chaos-core/kit";
import { MAX_ARGUMENT_VALUES, MAX_JSON_DEPTH } from "../config.js";
import type { ToolDefinition } from "../definitions/tool.js";
import { argumentsSchema } from "../definitions/tool-schemas.js";

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

/** The result that refuses a call's arguments: `invalid_argument`, one `field: problem` per line, joined by `; `. */
function invalidArguments(problems: readonly string[]): CallToolResult {
  return toMcpErrorResult(new ChaosError("invalid_argument", problems.join("; ")));
}

/**
 * The arguments `tool` runs with (its strict schema's output: defaults applied), or the result
 * that refuses them: the problems the guard's structural screen found in the raw message
 * (`structural`), else those of the schema. `args` is what the SDK hands the handler (`{}` for
 * absent arguments, as it reads them).
 */
export function checkToolArguments(
  tool: ToolDefinition,
  args: unknown,
  structural: readonly string[] | undefined,
): { readonly args: Record<string, unknown> } | { readonly refusal: CallToolResult } {
  if (structural && structural.length > 0) return { refusal: invalidArguments(structural) };
  // An upstream's tool: cognition checks the arguments against its pinned schema, as they are.
  if (tool.upstream) return { args: (args ?? {}) as Record<string, unknown> };
  const named = withExactNames(tool.input, args);
  if ("problems" in named) return { refusal: invalidArguments(named.problems) };
  const schema = argumentsSchema(tool.input);
  const parsed = schema.safeParse(named.args, { reportInput: true });
  if (parsed.success) return { args: parsed.data };
  return { refusal: invalidArguments(describeZodIssues(parsed.error, schema, "arguments", { suggest: true })) };
}

/** A field name the way a model may write it: any case, with or without `_` and `-` between words. */
const looseName = (name: string) => name.toLowerCase().replace(/[_-]/g, "");

const looseNames = new WeakMap<z.ZodObject, ReadonlyMap<string, string>>();

/** The tool's field names by their loose form; a loose form two fields share names neither. */
function fieldsByLooseName(input: z.ZodObject): ReadonlyMap<string, string> {
  let names = looseNames.get(input);
  if (!names) {
    const byLoose = new Map<string, string | undefined>();
    for (const field of Object.keys(input.shape)) {
      const loose = looseName(field);
      byLoose.set(loose, byLoose.has(loose) ? undefined : field);
    }
    names = new Map([...byLoose].filter((entry): entry is [string, string] => entry[1] !== undefined));
    looseNames.set(input, names);
  }
  return names;
}

/**
 * The arguments with each top-level field a model wrote loosely — `approvalId`, `TTL_SECONDS`,
 * `Key` — under the tool's own name (`approval_id`, `ttl_seconds`, `key`), as a host that follows
 * the seed's names and one that writes them its own way both succeed; or the problem when a field
 * is given twice that way (`ttlSeconds` beside `ttl_seconds`). A name that matches none is left
 * for the schema, which refuses it as an unknown field and names the one it likely meant.
 */
function withExactNames(input: z.ZodObject, args: unknown): { readonly args: unknown } | { readonly problems: string[] } {
  if (args === null || typeof args !== "object" || Array.isArray(args)) return { args };
  const given = args as Record<string, unknown>;
  const byLoose = fieldsByLooseName(input);
  let renamed: Record<string, unknown> | undefined;
  const problems: string[] = [];
  for (const key of Object.keys(given)) {
    if (Object.hasOwn(input.shape, key)) continue;
    const field = byLoose.get(looseName(key));
    if (field === undefined) continue;
    if (Object.hasOwn(renamed ?? given, field)) {
      problems.push(`${quotedName(key)}: the same field as ${field}; give it once`);
      continue;
    }
    renamed ??= { ...given };
    renamed[field] = given[key];
    delete renamed[key];
  }
  return problems.length > 0 ? { problems } : { args: renamed ?? given };
}

/** Longer than any tool's name: a name this long is no typo of one, and is not compared. */
const MAX_SUGGESTED_NAME = 64;

/**
 * ` (did you mean "chaoscore_remember"?)` for a name two edits or fewer from a tool the caller is
 * served (the tools share prefixes, so a looser guess would offer `chaoscore_recall`); else empty.
 */
function toolMeant(
  name: string,
  tools: ReadonlyMap<string, ToolDefinition>,
  unserved?: (tool: ToolDefinition) => string | undefined,
  offered?: (tool: ToolDefinition) => boolean,
): string {
  if (name.length > MAX_SUGGESTED_NAME) return "";
  const served = [...tools.values()].filter((t) => unserved?.(t) === undefined && offered?.(t) !== false).map((t) => t.name);
  const meant = likelyMeant(name, served, 2);
  return meant === undefined ? "" : ` (did you mean "${meant}"?)`;
}

function typeOf(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
}

function quotedName(name: string): string {
  return name.length > 100 ? `${name.slice(0, 100)}…` : name;
}

/** What {@link toolCallRefusal} makes of a `tools/call`: an answer instead of the call, or the raw arguments' problems. */
export interface ToolCallScreening {
  /** The JSON-RPC error that answers the call instead of the SDK: a protocol problem. */
  readonly refusal?: JSONRPCMessage;
  /** Problems of the raw arguments the tool's handler must answer with (see {@link structuralProblems}). */
  readonly structural?: readonly string[];
}

/**
 * Screens a message before the SDK dispatches it. Protocol problems of a `tools/call` are
 * answered here as JSON-RPC errors (`-32602`): params without a tool name, an unknown tool
 * (`Unknown tool: NAME`, as the MCP specification words it), and `arguments` that is not an
 * object (`Invalid params: arguments: expected object, got null`). The raw arguments' structural
 * problems are returned for the handler, which answers them as an `invalid_argument` result.
 * `offered`: whether this request is offered a tool (an upstream tool by its exposure and the
 * request's roles); one it is not is unknown to it, as if never registered.
 */
export function toolCallRefusal(
  message: JSONRPCMessage,
  tools: ReadonlyMap<string, ToolDefinition>,
  drift?: (tool: ToolDefinition) => string | undefined,
  unserved?: (tool: ToolDefinition) => string | undefined,
  offered?: (tool: ToolDefinition) => boolean,
): ToolCallScreening {
  if (!isJSONRPCRequest(message) || message.method !== "tools/call") return {};
  const invalidParams = (text: string): ToolCallScreening => ({
    refusal: { jsonrpc: "2.0", id: message.id, error: { code: ProtocolErrorCode.InvalidParams, message: text } },
  });
  const params = message.params as Record<string, unknown> | undefined;
  const name = params?.name;
  if (name === undefined) return invalidParams("Invalid params: name: required, expected the tool's name (string)");
  if (typeof name !== "string") return invalidParams(`Invalid params: name: expected the tool's name (string), got ${typeOf(name)}`);
  const tool = tools.get(name);
  if (!tool || offered?.(tool) === false) return invalidParams(`Unknown tool: ${quotedName(name)}${toolMeant(name, tools, unserved, offered)}`);
  // The run-time rug-pull guard (docs/contracts.md §7): a definition that no longer matches its
  // pinned contract is not run, whatever its arguments.
  const drifted = drift?.(tool);
  if (drifted !== undefined) {
    return {
      refusal: {
        jsonrpc: "2.0",
        id: message.id,
        result: toMcpErrorResult(new ChaosError("contract_drift", `${drifted}: this tool no longer matches its pinned contract and is not served`)),
      },
    };
  }
  // A tool of a toolset the tenant's operator did not enable (docs/tenants.md).
  const withheld = unserved?.(tool);
  if (withheld !== undefined) {
    return { refusal: { jsonrpc: "2.0", id: message.id, result: toMcpErrorResult(new ChaosError("permission_denied", withheld)) } };
  }
  // Absent arguments are no arguments, as the SDK reads them; null is not.
  const args = params?.arguments === undefined ? {} : params.arguments;
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    return invalidParams(`Invalid params: arguments: expected object, got ${typeOf(args)}`);
  }
  const structural = structuralProblems(args as Record<string, unknown>);
  return structural.length > 0 ? { structural } : {};
}

/**
 * What the guard of one connection found in the raw arguments of calls its handlers have not
 * answered yet, by JSON-RPC id (ids are unique among a connection's requests in flight).
 */
export class ArgumentScreen {
  private readonly found = new Map<RequestId, readonly string[]>();

  note(id: RequestId, problems: readonly string[]): void {
    this.found.set(id, problems);
  }

  /** The problems noted for `id`, forgotten as they are handed out. */
  take(id: RequestId): readonly string[] | undefined {
    const problems = this.found.get(id);
    if (problems) this.found.delete(id);
    return problems;
  }
}

/**
 * Makes every message `transport` delivers pass {@link toolCallRefusal} first: a call refused for
 * a protocol problem is answered on the same transport and never dispatched; the structural
 * problems of a call's raw arguments go to `screen` for its handler. Call it once the server is
 * connected (connecting sets the `onmessage` this wraps).
 */
export function guardToolCalls(
  transport: Transport,
  tools: ReadonlyMap<string, ToolDefinition>,
  screen: ArgumentScreen,
  drift?: (tool: ToolDefinition) => string | undefined,
  unserved?: (tool: ToolDefinition) => string | undefined,
  offeredTo?: (auth: AuthInfo | undefined) => (tool: ToolDefinition) => boolean,
): void {
  const dispatch = transport.onmessage;
  transport.onmessage = (message, extra) => {
    let screened: ToolCallScreening;
    try {
      // Roles travel per request: the message's own credential says which upstream tools it is offered.
      const offered = offeredTo && isJSONRPCRequest(message) && message.method === "tools/call" ? offeredTo(extra?.authInfo) : undefined;
      screened = toolCallRefusal(message, tools, drift, unserved, offered);
    } catch (err) {
      // A check that cannot run must not wave the call through to the SDK's own (raw) check.
      transport.onerror?.(err instanceof Error ? err : new Error(String(err)));
      if (!isJSONRPCRequest(message)) return;
      screened = {
        refusal: { jsonrpc: "2.0", id: message.id, result: toMcpErrorResult(new ChaosError("internal", "the arguments could not be checked")) },
      };
    }
    if (screened.structural && isJSONRPCRequest(message)) screen.note(message.id, screened.structural);
    if (!screened.refusal) return dispatch?.(message, extra);
    transport.send(screened.refusal).catch((err: unknown) => transport.onerror?.(err instanceof Error ? err : new Error(String(err))));
  };
}
