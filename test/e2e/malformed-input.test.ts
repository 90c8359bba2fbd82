/**
 * Malformed input against a real `chaos-core serve` and a real `chaos-core stdio`, generated from
 * the tool list each one publishes: for every tool and every field a wrong type, a missing
 * required field, an unknown field and an oversized value; then the envelope (non-object
 * arguments, unknown tool), deep nesting, huge strings, NUL bytes, `__proto__`, invalid UTF-8
 * and NaN/Infinity. Every answer must be a JSON-RPC error or an `isError` result that names the
 * field, none `internal`, and the server must answer `ping` afterwards.
 */
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MCP_HEADERS, openSession, PROTOCOL_VERSION, readJsonRpc } from "../support/mcp-http.js";
import { seedDataDir } from "../support/data-dir-template.js";
import { removeDir, startServe, tempDir, type ServeProcess } from "../support/processes.js";
import { startStdioLines, type StdioLines } from "../support/stdio-lines.js";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Path = Array<string | number>;

interface JsonSchema {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: boolean | JsonSchema;
  items?: JsonSchema;
  anyOf?: JsonSchema[];
  enum?: Json[];
  const?: Json;
  maxLength?: number;
  pattern?: string;
  maximum?: number;
  exclusiveMaximum?: number;
  maxItems?: number;
}

interface Tool {
  name: string;
  inputSchema: JsonSchema;
}

/** What an answer must be: a tool result refusing the arguments, or a JSON-RPC error; each naming `names`. */
type Expected = { kind: "tool"; names: string } | { kind: "rpc"; code: number; names?: string };

interface Case {
  readonly what: string;
  readonly id: string;
  readonly body: string | Buffer;
  readonly expected: Expected;
}

interface Reply {
  readonly status?: number;
  readonly message: Record<string, unknown>;
}

/** The path as the server spells it: `action.notional`, `claims[0].text`. */
function spell(path: Path): string {
  let out = "";
  for (const key of path) out += typeof key === "number" ? `[${key}]` : out ? `.${key}` : key;
  return out;
}

function setAt(path: Path, value: Json): Json {
  if (path.length === 0) return value;
  const [head, ...rest] = path;
  const inner = setAt(rest, value);
  return typeof head === "number" ? [inner] : { [head!]: inner };
}

/** Every field of a published input schema, nested objects and list items included. */
function fieldsOf(schema: JsonSchema, path: Path = [], out: Array<{ path: Path; schema: JsonSchema; required: boolean }> = []) {
  for (const [name, child] of Object.entries(schema.properties ?? {})) {
    const at = [...path, name];
    out.push({ path: at, schema: child, required: schema.required?.includes(name) ?? false });
    descend(child, at, out);
  }
  return out;
}

function descend(schema: JsonSchema, path: Path, out: Array<{ path: Path; schema: JsonSchema; required: boolean }>) {
  if (schema.properties) fieldsOf(schema, path, out);
  if (schema.items) descend(schema.items, [...path, 0], out);
  for (const alternative of schema.anyOf ?? []) if (alternative.properties) fieldsOf(alternative, path, out);
}

/**
 * Objects with named fields, with their paths (the arguments object is the empty path): each must
 * refuse a field it does not name, so a misspelt field is never dropped silently.
 */
function objectsWithFields(schema: JsonSchema, path: Path = [], out: Path[] = []): Path[] {
  if (schema.properties) out.push(path);
  for (const [name, child] of Object.entries(schema.properties ?? {})) objectsWithFields(child, [...path, name], out);
  if (schema.items) objectsWithFields(schema.items, [...path, 0], out);
  for (const alternative of schema.anyOf ?? []) objectsWithFields(alternative, path, out);
  return out;
}

const JSON_TYPES = ["string", "number", "integer", "boolean", "null", "array", "object"];

/** The JSON types a schema accepts, or undefined when it accepts any value (or says too little to tell). */
function acceptedTypes(schema: JsonSchema): Set<string> | undefined {
  const types = new Set<string>();
  if (schema.type) for (const t of [schema.type].flat()) types.add(t);
  for (const v of schema.enum ?? []) types.add(v === null ? "null" : Array.isArray(v) ? "array" : typeof v);
  if (schema.const !== undefined) types.add(typeof schema.const);
  for (const alternative of schema.anyOf ?? []) {
    const inner = acceptedTypes(alternative);
    if (!inner) return undefined;
    inner.forEach((t) => types.add(t));
  }
  if (types.has("integer")) types.add("number");
  return types.size === 0 || JSON_TYPES.every((t) => types.has(t)) ? undefined : types;
}

function wrongTypeValue(schema: JsonSchema): Json | undefined {
  const accepted = acceptedTypes(schema);
  if (!accepted) return undefined;
  const candidates: Array<[string, Json]> = [
    ["boolean", true],
    ["number", 12345],
    ["string", "not-the-right-type"],
    ["array", []],
    ["object", {}],
  ];
  return candidates.find(([type]) => !accepted.has(type))?.[1];
}

function oversizedValue(schema: JsonSchema): Json | undefined {
  if (schema.maxLength !== undefined) return "x".repeat(schema.maxLength + 1);
  if (schema.pattern !== undefined) return "~".repeat(300);
  if (schema.maximum !== undefined) return schema.maximum + 1;
  if (schema.exclusiveMaximum !== undefined) return schema.exclusiveMaximum;
  if (schema.maxItems !== undefined) {
    const item: Json = schema.items?.type === "string" ? "x" : schema.items?.type === "number" || schema.items?.type === "integer" ? 1 : {};
    return Array.from({ length: schema.maxItems + 1 }, () => item);
  }
  return undefined;
}

function toolCall(id: string, name: string, args: unknown): string {
  return JSON.stringify({ jsonrpc: "2.0", id, method: "tools/call", params: { name, arguments: args } });
}

/** The cases generated from the tool list: every tool, every field, four ways each. */
function schemaCases(tools: readonly Tool[]): Case[] {
  const cases: Case[] = [];
  let n = 0;
  const add = (tool: Tool, what: string, args: Json, names: string) => {
    const id = `schema-${++n}`;
    cases.push({ what: `${tool.name}: ${what}`, id, body: toolCall(id, tool.name, args), expected: { kind: "tool", names } });
  };
  for (const tool of tools) {
    for (const field of fieldsOf(tool.inputSchema)) {
      const at = spell(field.path);
      const wrong = wrongTypeValue(field.schema);
      if (wrong !== undefined) add(tool, `${at} of the wrong type`, setAt(field.path, wrong), `${at}: expected`);
      // The field's parents stay (a list keeps one item), only the field itself is left out.
      if (field.required) add(tool, `${at} missing`, setAt(field.path.slice(0, -1), {}), `${at}: required`);
      const big = oversizedValue(field.schema);
      if (big !== undefined) add(tool, `${at} oversized`, setAt(field.path, big), `${at}: `);
    }
    for (const object of objectsWithFields(tool.inputSchema)) {
      const at = spell([...object, "zz_unknown_field"]);
      add(tool, `unknown field ${at}`, setAt([...object, "zz_unknown_field"], 1), `${at}: unknown field`);
    }
  }
  return cases;
}

const nest = (n: number, inner = "1") => "[".repeat(n) + inner + "]".repeat(n);

/** A search cursor minted by hand for a key no item can have; its digest is no secret. */
function forgedCursor(key: string): string {
  const d = createHash("sha256").update(JSON.stringify([1, key, "", []])).digest("base64url").slice(0, 22);
  return Buffer.from(JSON.stringify({ v: 1, k: key, d })).toString("base64url");
}

const raw = (id: string, name: string, argsJson: string) =>
  `{"jsonrpc":"2.0","id":"${id}","method":"tools/call","params":{"name":"${name}","arguments":${argsJson}}}`;

/** The envelope and the byte-level cases; the same for both transports. */
function specialCases(): Case[] {
  const tool = (names: string): Expected => ({ kind: "tool", names });
  const rpc = (code: number, names?: string): Expected => ({ kind: "rpc", code, ...(names ? { names } : {}) });
  return [
    // The envelope (MCP 2025-11-25, SEP-1303).
    { what: "arguments null", id: "env-null", body: toolCall("env-null", "chp_version", null), expected: rpc(-32602, "arguments") },
    { what: "arguments a list", id: "env-list", body: toolCall("env-list", "chaoscore_remember", []), expected: rpc(-32602, "arguments") },
    { what: "arguments a string", id: "env-str", body: toolCall("env-str", "chaoscore_remember", ""), expected: rpc(-32602, "arguments") },
    {
      what: "an unknown tool",
      id: "env-tool",
      body: toolCall("env-tool", "no_such_tool", {}),
      expected: rpc(-32602, "Unknown tool: no_such_tool"),
    },
    {
      what: "no tool name",
      id: "env-name",
      body: JSON.stringify({ jsonrpc: "2.0", id: "env-name", method: "tools/call", params: { arguments: {} } }),
      expected: rpc(-32602, "name"),
    },
    { what: "not a JSON-RPC message", id: "env-rpc", body: '{"jsonrpc":"2.0","id":"env-rpc"}', expected: rpc(-32700) },
    // Deep nesting, inside tool arguments (a tool error) and outside them (a protocol error).
    { what: "a value nested 10 000 deep", id: "deep-1", body: raw("deep-1", "chp_content_hash", `{"value":${nest(10_000)}}`), expected: tool("value[0]") },
    {
      what: "call arguments nested 10 000 deep",
      id: "deep-2",
      body: raw("deep-2", "evaluate_tool_approval", `{"call":{"tool":"t","resource":"r","arguments":{"a":${nest(10_000)}}}}`),
      expected: tool("call.arguments.a[0]"),
    },
    { what: "JSON text nested 10 000 deep", id: "deep-3", body: toolCall("deep-3", "chp_content_hash", { json: nest(10_000) }), expected: tool("json") },
    {
      what: "_meta nested 10 000 deep",
      id: "deep-4",
      body: `{"jsonrpc":"2.0","id":"deep-4","method":"ping","params":{"_meta":{"m":${nest(10_000)}}}}`,
      expected: rpc(-32602, "params._meta.m[0]"),
    },
    // Huge strings (within the 4 MiB body limit; beyond it see the test below).
    {
      what: "a 2 MiB value",
      id: "huge-1",
      body: toolCall("huge-1", "chaoscore_remember", { key: "huge", value: "x".repeat(2 * 1024 * 1024) }),
      expected: tool("value"),
    },
    // NUL bytes.
    { what: "a NUL in a key", id: "nul-1", body: toolCall("nul-1", "chaoscore_remember", { key: "a\u0000b", value: 1 }), expected: tool("key") },
    { what: "a NUL in a tag", id: "nul-2", body: toolCall("nul-2", "chaoscore_remember", { key: "k", value: 1, tags: ["a\u0000"] }), expected: tool("tag") },
    {
      what: "a forged cursor with a NUL in its key",
      id: "nul-3",
      body: toolCall("nul-3", "chaoscore_recall", { cursor: forgedCursor("a\u0000b") }),
      expected: tool("cursor"),
    },
    { what: "a raw NUL byte in a string", id: "nul-4", body: raw("nul-4", "chaoscore_remember", '{"key":"k","value":"a\u0000b"}'), expected: rpc(-32700) },
    // __proto__, which object parsing would turn into a prototype and drop.
    {
      what: "__proto__ inside a value",
      id: "proto-1",
      body: raw("proto-1", "chaoscore_remember", '{"key":"proto","value":{"ok":1,"__proto__":{"polluted":true}}}'),
      expected: tool("value.__proto__"),
    },
    { what: "__proto__ as an argument", id: "proto-2", body: raw("proto-2", "chp_version", '{"__proto__":{}}'), expected: tool("__proto__") },
    {
      what: "__proto__ in call arguments",
      id: "proto-3",
      body: raw("proto-3", "evaluate_tool_approval", '{"call":{"tool":"t","resource":"r","arguments":{"__proto__":{"x":1}}}}'),
      expected: tool("call.arguments.__proto__"),
    },
    // Invalid UTF-8, which decoding would turn into U+FFFD.
    {
      what: "invalid UTF-8 in a value",
      id: "utf8-1",
      body: Buffer.concat([
        Buffer.from('{"jsonrpc":"2.0","id":"utf8-1","method":"tools/call","params":{"name":"chaoscore_remember","arguments":{"key":"utf8","value":"a'),
        Buffer.from([0xff, 0xfe]),
        Buffer.from('b"}}}'),
      ]),
      expected: rpc(-32700, "params.arguments.value"),
    },
    {
      what: "invalid UTF-8 in a key",
      id: "utf8-2",
      body: Buffer.concat([
        Buffer.from('{"jsonrpc":"2.0","id":"utf8-2","method":"tools/call","params":{"name":"chaoscore_remember","arguments":{"value":1,"key":"k'),
        Buffer.from([0xc3, 0x28]),
        Buffer.from('"}}}'),
      ]),
      expected: rpc(-32700, "params.arguments.key"),
    },
    {
      what: "invalid UTF-8 in a field name",
      id: "utf8-3",
      body: Buffer.concat([
        Buffer.from('{"jsonrpc":"2.0","id":"utf8-3","method":"tools/call","params":{"name":"chp_version","arguments":{"'),
        Buffer.from([0xed, 0xa0, 0x80]),
        Buffer.from('":1}}}'),
      ]),
      expected: rpc(-32700, "a field name in params.arguments"),
    },
    // NaN and Infinity cannot be in JSON; numbers JSON can hold must not break hashing.
    { what: "NaN", id: "num-1", body: raw("num-1", "chp_content_hash", '{"value":NaN}'), expected: rpc(-32700, "params.arguments.value") },
    { what: "Infinity", id: "num-2", body: raw("num-2", "chp_content_hash", '{"value":[1,Infinity]}'), expected: rpc(-32700, "params.arguments.value[1]") },
    {
      what: "-Infinity",
      id: "num-3",
      body: raw("num-3", "evaluate_spend_gate", '{"policy":"equity","action":{"action":"BUY","asset":"X","notional":-Infinity}}'),
      expected: rpc(-32700, "params.arguments.action.notional"),
    },
    {
      what: "1e400, which overflows a double",
      id: "num-4",
      body: raw("num-4", "evaluate_spend_gate", '{"policy":"equity","action":{"action":"BUY","asset":"X","notional":1e400}}'),
      expected: tool("action.notional"),
    },
    { what: "1e400 in JSON text", id: "num-5", body: toolCall("num-5", "chp_content_hash", { json: "[1e400]" }), expected: tool("json") },
  ];
}

/** Calls that are not malformed but sit at the edges: they must succeed, exactly. */
async function checkEdgesSucceed(send: (c: { id: string; body: string }) => Promise<Reply>) {
  const hashed = await send({ id: "ok-1", body: toolCall("ok-1", "chp_content_hash", { value: { big: 1e308, tiny: 5e-324 } }) });
  // A JSON value arrives parsed, so 1e308 is the integer it denotes, every digit spelled (as Python's int would).
  expect(hashed.message.result).toMatchObject({ structuredContent: { canonical_json: `{"big":${BigInt(1e308)},"tiny":5e-324}` } });
  const gate = await send({
    id: "ok-2",
    body: toolCall("ok-2", "evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "X", notional: 1.7976931348623157e308 } }),
  });
  expect(gate.message.result).toMatchObject({ structuredContent: { state: "BLOCKED" } });
  // A NUL inside a value is JSON like any other character: stored and read back exactly.
  const stored = await send({ id: "ok-3", body: toolCall("ok-3", "chaoscore_remember", { key: "nul-value", value: { "a\u0000b": "c\u0000d" } }) });
  expect((stored.message.result as { isError?: boolean }).isError).toBeFalsy();
  const recalled = await send({ id: "ok-4", body: toolCall("ok-4", "chaoscore_recall", { key: "nul-value" }) });
  expect(recalled.message.result).toMatchObject({ structuredContent: { items: [{ value: { "a\u0000b": "c\u0000d" } }] } });
  // Nothing refused was stored in any form.
  for (const key of ["utf8", "proto", "huge"]) {
    const gone = await send({ id: `ok-gone-${key}`, body: toolCall(`ok-gone-${key}`, "chaoscore_recall", { key }) });
    expect(gone.message.result, key).toMatchObject({ structuredContent: { items: [] } });
  }
}

/** Checks one answer against what its case expects, and against what no answer may be (softly: every case is reported). */
function checkAnswer(c: Case, reply: Reply) {
  const label = `${c.what} → ${JSON.stringify(reply.message).slice(0, 400)}`;
  const text = JSON.stringify(reply.message);
  expect.soft(text, label).not.toMatch(/Maximum call stack|"internal"|-32603/);
  expect.soft(reply.message.id, label).toBe(c.id);
  if (c.expected.kind === "tool") {
    const result = reply.message.result as { isError?: boolean; structuredContent?: { error?: { code: string; message: string } } } | undefined;
    expect.soft(result?.isError, label).toBe(true);
    expect.soft(result?.structuredContent?.error?.code, label).toBe("invalid_argument");
    expect.soft(result?.structuredContent?.error?.message, label).toContain(c.expected.names);
  } else {
    const error = reply.message.error as { code: number; message: string } | undefined;
    expect.soft(error?.code, label).toBe(c.expected.code);
    if (c.expected.names) expect.soft(error?.message, label).toContain(c.expected.names);
  }
}

/** Runs `items` through `fn`, a few at a time. */
async function inBatches<T, R>(items: readonly T[], size: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = [];
  for (let i = 0; i < items.length; i += size) out.push(...(await Promise.all(items.slice(i, i + size).map(fn))));
  return out;
}

// One process per transport, started together (each takes seconds to open its stores).
const dirs = [tempDir(), tempDir()];
let serve: ServeProcess;
let session: string;
let stdio: StdioLines;

beforeAll(async () => {
  await Promise.all(dirs.map(seedDataDir));
  stdio = startStdioLines({ CHAOS_CORE_DATA_DIR: dirs[1] });
  stdio.send(
    JSON.stringify({
      jsonrpc: "2.0",
      id: "init",
      method: "initialize",
      params: { protocolVersion: PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: "malformed", version: "0" } },
    }),
  );
  const [started] = await Promise.all([startServe({ CHAOS_CORE_DATA_DIR: dirs[0] }), stdio.reply("init")]);
  serve = started;
  session = await openSession(serve.url);
  stdio.send(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }));
});

afterAll(async () => {
  await Promise.all([serve?.stop(), stdio?.stop()]);
  dirs.forEach(removeDir);
});

describe("malformed input over Streamable HTTP", () => {

  const post = async (body: string | Buffer): Promise<Reply> => {
    const res = await fetch(serve.url, {
      method: "POST",
      headers: { ...MCP_HEADERS, "mcp-protocol-version": PROTOCOL_VERSION, "mcp-session-id": session },
      body,
    });
    return { status: res.status, message: (await readJsonRpc(res)) ?? {} };
  };

  async function tools(): Promise<Tool[]> {
    const listed = await post(JSON.stringify({ jsonrpc: "2.0", id: "list", method: "tools/list" }));
    return (listed.message.result as { tools: Tool[] }).tools;
  }

  it("answers a wrong type, a missing, an unknown and an oversized field of every tool with an error naming it", async () => {
    const cases = schemaCases(await tools());
    expect(cases.length).toBeGreaterThan(150);
    const replies = await inBatches(cases, 8, (c) => post(c.body));
    cases.forEach((c, i) => checkAnswer(c, replies[i]!));
    expect((await post(JSON.stringify({ jsonrpc: "2.0", id: "after", method: "ping" }))).message).toMatchObject({ id: "after", result: {} });
  });

  it("answers bad envelopes, deep nesting, huge strings, NUL, __proto__, invalid UTF-8 and NaN with an error naming the field", async () => {
    const cases = specialCases();
    const replies = await inBatches(cases, 4, (c) => post(c.body));
    cases.forEach((c, i) => {
      checkAnswer(c, replies[i]!);
      // Refused on its bytes (400) or by the tool-argument check (200): never a server error.
      expect([200, 400], c.what).toContain(replies[i]!.status);
    });
    await checkEdgesSucceed((c) => post(c.body));
    // Beyond the body limit the body is not parsed: 413, with the id read from its first bytes.
    const tooLarge = await post(toolCall("huge-2", "chaoscore_remember", { key: "k", value: "x".repeat(5 * 1024 * 1024) }));
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.message).toMatchObject({ id: "huge-2", error: { code: -32000 } });
    expect((await post(JSON.stringify({ jsonrpc: "2.0", id: "after", method: "ping" }))).message).toMatchObject({ id: "after", result: {} });
  });
});

describe("malformed input over stdio", () => {

  /** Writes every case at once and collects the answers by id. */
  async function run(cases: readonly Pick<Case, "id" | "body">[]): Promise<Reply[]> {
    for (const c of cases) stdio.send(c.body);
    return Promise.all(cases.map(async (c) => ({ message: await stdio.reply(c.id) })));
  }

  async function tools(): Promise<Tool[]> {
    const [listed] = await run([{ id: "list", body: JSON.stringify({ jsonrpc: "2.0", id: "list", method: "tools/list" }) }]);
    return (listed!.message.result as { tools: Tool[] }).tools;
  }

  it("answers a wrong type, a missing, an unknown and an oversized field of every tool with an error naming it", async () => {
    const cases = schemaCases(await tools());
    expect(cases.length).toBeGreaterThan(150);
    const replies = await run(cases);
    cases.forEach((c, i) => checkAnswer(c, replies[i]!));
    const [pong] = await run([{ id: "after", body: JSON.stringify({ jsonrpc: "2.0", id: "after", method: "ping" }) }]);
    expect(pong!.message).toMatchObject({ id: "after", result: {} });
  });

  it("answers bad envelopes, deep nesting, huge strings, NUL, __proto__, invalid UTF-8 and NaN with an error naming the field", async () => {
    const cases = specialCases();
    const replies = await run(cases);
    cases.forEach((c, i) => checkAnswer(c, replies[i]!));
    await checkEdgesSucceed(async (c) => (await run([c]))[0]!);
    // A line beyond the SDK's 10 MiB is refused, as HTTP refuses such a body, and the session goes on (it used to end).
    stdio.send(toolCall("huge-2", "chaoscore_remember", { key: "k", value: "x".repeat(11 * 1024 * 1024) }));
    expect((await stdio.reply(null)).error).toMatchObject({ code: -32000 });
    const [pong] = await run([{ id: "after", body: JSON.stringify({ jsonrpc: "2.0", id: "after", method: "ping" }) }]);
    expect(pong!.message).toMatchObject({ id: "after", result: {} });
  });
});
