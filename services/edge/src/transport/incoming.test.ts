import { describe, expect, it } from "vitest";
import { JSONRPCMessageSchema } from "@modelcontextprotocol/core";
import { envelopeRefusal, firstInvalidUtf8, isPlainRequest, screenMessage } from "./incoming.js";

const bytes = (...parts: Array<string | number[]>) => Buffer.concat(parts.map((p) => (typeof p === "string" ? Buffer.from(p) : Buffer.from(p))));
const nest = (n: number) => "[".repeat(n) + "]".repeat(n);

describe("firstInvalidUtf8", () => {
  it("finds the first byte that starts no well-formed sequence", () => {
    expect(firstInvalidUtf8(Buffer.from("plain é 漢 🎉"))).toBe(-1);
    expect(firstInvalidUtf8(bytes("ab", [0xff]))).toBe(2);
    expect(firstInvalidUtf8(bytes("é", [0xc3, 0x28]))).toBe(2); // a lead byte without its continuation
    expect(firstInvalidUtf8(bytes([0xc0, 0xaf]))).toBe(0); // overlong "/"
    expect(firstInvalidUtf8(bytes([0xed, 0xa0, 0x80]))).toBe(0); // an encoded surrogate
    expect(firstInvalidUtf8(bytes([0xf4, 0x90, 0x80, 0x80]))).toBe(0); // beyond U+10FFFF
    expect(firstInvalidUtf8(bytes("x", [0xe2, 0x82]))).toBe(1); // cut short
  });
});

describe("screenMessage", () => {
  it("passes a plain message and reads its id", () => {
    expect(screenMessage(Buffer.from('{"jsonrpc":"2.0","id":"a1","method":"ping"}'))).toEqual({ id: "a1" });
  });

  it("names the field an invalid byte sits in, with the request's id", () => {
    const before = '{"jsonrpc":"2.0","method":"tools/call","params":{"arguments":{"value":"a';
    const screened = screenMessage(bytes(before, [0xff], '"}},"id":9}'));
    expect(before.length).toBe(72);
    expect(screened.refusal).toEqual({
      id: 9,
      error: {
        code: -32700,
        message: "Parse error: params.arguments.value is not valid UTF-8 (byte 0xFF at offset 72)",
        data: { code: "invalid_argument", path: "params.arguments.value" },
      },
    });
    expect(screenMessage(bytes('{"id":1,', [0xff], "}")).refusal?.error.message).toBe(
      "Parse error: the message is not valid UTF-8 (byte 0xFF at offset 8)",
    );
  });

  it("refuses NaN and Infinity by where they are", () => {
    expect(screenMessage(Buffer.from('{"id":3,"method":"tools/call","params":{"arguments":{"n":-Infinity}}}')).refusal).toMatchObject({
      id: 3,
      error: { code: -32700, data: { path: "params.arguments.n" } },
    });
  });

  it("refuses nesting beyond 64 levels outside tool arguments, and leaves tool arguments to the tool check", () => {
    const meta = screenMessage(Buffer.from(`{"id":4,"method":"ping","params":{"_meta":{"a":${nest(100)}}}}`));
    expect(meta.refusal).toMatchObject({ id: 4, error: { code: -32602, data: { code: "invalid_argument" } } });
    expect(meta.refusal?.error.message).toMatch(/^Invalid params: params\._meta\.a\[0\].*… nests deeper than 64 levels$/);
    expect(screenMessage(Buffer.from(`{"id":5,"method":"ping","x":${nest(100)}}`)).refusal?.error.code).toBe(-32600);
    const args = `{"id":6,"method":"tools/call","params":{"name":"t","arguments":{"v":${nest(100)}}}}`;
    expect(screenMessage(Buffer.from(args)).refusal).toBeUndefined();
    // The same arguments under another method are just deep params.
    expect(screenMessage(Buffer.from(args.replace("tools/call", "prompts/get"))).refusal?.error.code).toBe(-32602);
  });
});

describe("envelopeRefusal", () => {
  it("refuses what is not JSON-RPC, in the SDK's words, with the id", () => {
    expect(envelopeRefusal({ jsonrpc: "2.0", id: 1, method: "ping" }, 1)).toBeUndefined();
    expect(envelopeRefusal({ jsonrpc: "2.0", id: 7 }, 7)).toEqual({
      id: 7,
      error: { code: -32700, message: "Parse error: Invalid JSON-RPC message" },
    });
    expect(envelopeRefusal("text", undefined)?.id).toBeNull();
  });
});

describe("isPlainRequest", () => {
  // Parsed from text, as the edge receives them (a "__proto__" key is an own key then).
  const samples: Array<[string, boolean]> = [
    ['{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,{"b":null}]}}}', true],
    ['{"jsonrpc":"2.0","id":"a","method":"ping"}', true],
    ['{"jsonrpc":"2.0","id":-0,"method":"ping","params":{}}', true],
    ['{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":"p"},"name":"x"}}', true],
    ['{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"progressToken":9007199254740991}}}', true],
    // What the schema refuses, or what is left to it:
    ['{"jsonrpc":"2.0","id":1.5,"method":"ping"}', false],
    ['{"jsonrpc":"2.0","id":9007199254740993,"method":"ping"}', false],
    ['{"jsonrpc":"2.0","id":null,"method":"ping"}', false],
    ['{"jsonrpc":"2.0","id":true,"method":"ping"}', false],
    ['{"jsonrpc":"2.0","method":"notifications/initialized"}', false],
    ['{"jsonrpc":"1.0","id":1,"method":"ping"}', false],
    ['{"jsonrpc":"2.0","id":1,"method":7}', false],
    ['{"jsonrpc":"2.0","id":1,"method":"ping","extra":1}', false],
    ['{"jsonrpc":"2.0","id":1,"method":"ping","__proto__":{"x":1}}', false],
    ['{"jsonrpc":"2.0","id":1,"method":"ping","params":[1]}', false],
    ['{"jsonrpc":"2.0","id":1,"method":"ping","params":null}', false],
    ['{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":[]}}', false],
    ['{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"progressToken":1.5}}}', false],
    ['{"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t"}}}}', false],
    ['{"jsonrpc":"2.0","id":1,"result":{}}', false],
    ["[]", false],
    ["null", false],
  ];

  it.each(samples)("%s → %s, and never accepts what the SDK's schema refuses", (text, plain) => {
    const m: unknown = JSON.parse(text);
    expect(isPlainRequest(m)).toBe(plain);
    if (plain) expect(JSONRPCMessageSchema.safeParse(m).success).toBe(true);
  });
});

