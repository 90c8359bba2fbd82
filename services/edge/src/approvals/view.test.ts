import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { parseChpJson } from "@chaos-core/kit";
import { GetApprovalResponseSchema } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { EntrySchema } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { fitsForm, MAX_FORM_MESSAGE_BYTES, renderText } from "./render-text.js";
import { argumentRows, ledgerEntryView, stepApprovalView } from "./view.js";

// What a person approving a call reads: every argument, whole, with nothing able to hide text.

const rowsOf = (value: unknown) => Object.fromEntries(argumentRows(value).map((r) => [r.path, r.value]));

// Characters that display as nothing, as a space, reorder text or drive a terminal.
const HIDDEN_IN_OUTPUT = /[\p{Cc}\u00a0\u00ad\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]|\u{E0041}/u;

function step(input: Record<string, unknown>) {
  return create(GetApprovalResponseSchema, {
    approvalId: "0b6f1e0c-7d3e-4a43-9d59-2c0e5f1d9a11",
    capability: "http.request",
    input: input as never,
    argsHash: "ab".repeat(32),
    policyVersion: 3n,
    matchedRule: "requireConfirmationFor",
    reason: "http.request needs a person",
    risk: "high",
    status: "pending",
    requestedBy: "agent",
    requestedInSession: "s-1",
    expiresAt: timestampFromDate(new Date("2030-01-02T03:04:05.000Z")),
  });
}

describe("argumentRows", () => {
  it("shows every nested leaf with its path, empty objects and arrays included", () => {
    const rows = rowsOf({
      beneficiary: { name: "ACME Ltd", iban: "DE89370400440532013000" },
      memo: "invoice 42",
      targets: [{ asset: "ETH", weight: 0.6 }, { asset: "BTC", weight: 0.4, tags: [] }],
      headers: { "x-api-key": "k", "a.b": 1 },
      options: {},
      dry_run: false,
      note: null,
    });
    expect(rows).toEqual({
      "beneficiary.iban": '"DE89370400440532013000"',
      "beneficiary.name": '"ACME Ltd"',
      dry_run: "false",
      'headers["a.b"]': "1",
      'headers["x-api-key"]': '"k"',
      memo: '"invoice 42"',
      note: "null",
      options: "{}",
      "targets[0].asset": '"ETH"',
      "targets[0].weight": "0.6",
      "targets[1].asset": '"BTC"',
      "targets[1].tags": "[]",
      "targets[1].weight": "0.4",
    });
    // A scalar or empty input is one row for the whole value.
    expect(argumentRows({})).toEqual([{ path: "", value: "{}", escaped: [] }]);
    expect(argumentRows("x")).toEqual([{ path: "", value: '"x"', escaped: [] }]);
  });

  it("lists the same arguments in the same order whatever order their keys arrived in", () => {
    const a = argumentRows({ z: 1, a: { y: [3, { d: 1, c: 2 }], b: 2 }, m: "x" });
    const b = argumentRows({ m: "x", a: { b: 2, y: [3, { c: 2, d: 1 }] }, z: 1 });
    expect(b).toEqual(a);
    expect(a.map((r) => r.path)).toEqual(["a.b", "a.y[0]", "a.y[1].c", "a.y[1].d", "m", "z"]);
  });

  it("keeps numbers as the JSON text wrote them: 100.0 stays a float, 100 an integer, big integers whole", () => {
    const rows = rowsOf(parseChpJson('{"amount": 100.0, "count": 100, "big": 12345678901234567890, "ratio": 5e-1, "none": null, "list": [1, "1", true, null]}'));
    expect(rows).toEqual({
      amount: "100.0",
      big: "12345678901234567890",
      count: "100",
      "list[0]": "1",
      "list[1]": '"1"',
      "list[2]": "true",
      "list[3]": "null",
      none: "null",
      ratio: "0.5",
    });
  });

  it("writes bidi, zero-width, control and ANSI characters as escapes that parse back, and names each", () => {
    const memo = "pay \u202Egnp.exe\u202C now";
    const rows = argumentRows({
      memo,
      beneficiary: "ACME\u200B Ltd\u00A0",
      banner: "\u001b[2K\u001b[1Aapproved",
      note: "line one\nline two\r\tend",
      tagged: "ok\u{E0041}",
      "key\u2067": "v",
    });
    const byPath = Object.fromEntries(rows.map((r) => [r.path, r]));
    expect(byPath["memo"]).toEqual({
      path: "memo",
      value: '"pay \\u202egnp.exe\\u202c now"',
      escaped: ["U+202E right-to-left override", "U+202C pop directional formatting"],
    });
    expect(JSON.parse(byPath["memo"]!.value)).toBe(memo);
    expect(byPath["beneficiary"]!.escaped).toEqual(["U+200B zero-width space", "U+00A0 no-break space"]);
    expect(byPath["banner"]!.value).toBe('"\\u001b[2K\\u001b[1Aapproved"');
    expect(byPath["banner"]!.escaped).toEqual(["U+001B escape (starts ANSI terminal sequences)"]);
    expect(byPath["note"]!.value).toBe('"line one\\nline two\\r\\tend"');
    expect(byPath["tagged"]!.escaped).toEqual(["U+E0041 tag character (invisible)"]);
    // A hidden character in a key is escaped in the path and named on its row.
    expect(byPath['["key\\u2067"]']!.escaped).toEqual(["U+2067 right-to-left isolate"]);
    for (const r of rows) expect(`${r.path} ${r.value}`).not.toMatch(HIDDEN_IN_OUTPUT);

    const text = renderText(stepApprovalView(step({ memo, url: "https://pay.example/\u200Bx" })));
    // Only the line breaks between rows remain: each line is free of hidden characters.
    for (const line of text.split("\n")) expect(line).not.toMatch(HIDDEN_IN_OUTPUT);
    expect(text).toContain("WARNING: 2 value(s) below hold characters that would display differently from what runs");
    expect(text).toContain(
      '  memo = "pay \\u202egnp.exe\\u202c now"\n    ^ hidden characters, written above as escapes: U+202E right-to-left override, U+202C pop directional formatting',
    );
    expect(text).toContain('  url = "https://pay.example/\\u200bx"\n    ^ hidden characters, written above as escapes: U+200B zero-width space');
  });

  it("renders a 100 KiB input whole, and many leaves each on its own line", () => {
    const long = Array.from({ length: 100 * 1024 }, (_, i) => String.fromCharCode(97 + (i % 26))).join("");
    const amounts = Array.from({ length: 3000 }, (_, i) => i);
    const text = renderText(stepApprovalView(step({ memo: long, amounts })));
    expect(text).toContain(`  memo = "${long}"\n`);
    for (const i of [0, 1500, 2999]) expect(text).toContain(`  amounts[${i}] = ${i}\n`);
    expect(text).toContain("(3001 value(s)");
    expect(text).not.toMatch(/cut|…/);
  });

  it("walks deep nesting without overflowing the stack", () => {
    let deep: unknown = "bottom";
    for (let i = 0; i < 20_000; i++) deep = [deep];
    const [row] = argumentRows(deep);
    expect(row!.path).toBe("[0]".repeat(20_000));
    expect(row!.value).toBe('"bottom"');
  });

  it("refuses a value that is not JSON instead of showing something else", () => {
    expect(() => argumentRows({ amount: Number.NaN })).toThrow(/not a JSON number/);
  });
});

describe("views and their text", () => {
  it("shows a step with its input, policy decision, requester, expiry and hash", () => {
    const text = renderText(stepApprovalView(step({ url: "https://api.example/v1", method: "POST" })));
    expect(text.split("\n")).toEqual([
      "Capability: http.request (risk high)",
      "Input, exactly as it would run (2 value(s), each as JSON text, strings in quotes):",
      '  method = "POST"',
      '  url = "https://api.example/v1"',
      "Why approval is needed: policy rule requireConfirmationFor: http.request needs a person (policy version 3)",
      "Requested by: agent in session s-1",
      "Approval: 0b6f1e0c-7d3e-4a43-9d59-2c0e5f1d9a11 (pending, expires 2030-01-02T03:04:05.000Z)",
      `SHA-256 of the canonical input: ${"ab".repeat(32)}`,
    ]);
  });

  it("names the channels policy accepts for a step, and the rule that chose them", () => {
    const view = stepApprovalView({ ...step({ amount: 1 }), channels: ["approver", "operator", "console"], channelsRule: "approvalChannels.byRisk.high" });
    expect(renderText(view).split("\n")).toContain("Who may approve it (policy's channels): approver, operator, console (rule approvalChannels.byRisk.high)");
  });

  it("shows every field of a recorded ledger event", () => {
    const entry = create(EntrySchema, {
      seq: 7n,
      ts: "2030-01-01T00:00:00.000Z",
      principal: "agent",
      session: "s-2",
      event: { type: "finance.requested", arguments: { beneficiary: "ACME Ltd", memo: "INV-104", amount: 2500 } },
      contentHash: "cd".repeat(32),
    });
    expect(renderText(ledgerEntryView(entry)).split("\n")).toEqual([
      "Ledger entry 7 (finance.requested)",
      "The event, exactly as recorded (4 value(s), each as JSON text, strings in quotes):",
      "  arguments.amount = 2500",
      '  arguments.beneficiary = "ACME Ltd"',
      '  arguments.memo = "INV-104"',
      '  type = "finance.requested"',
      "Recorded: 2030-01-01T00:00:00.000Z for agent in session s-2",
      `content_hash of the event: ${"cd".repeat(32)}`,
    ]);
  });

  it("says where a request was made from its context label: a session, a request without one, or nothing", () => {
    const requestedBy = (label: string) => renderText(stepApprovalView({ ...step({ amount: 1 }), requestedInSession: label })).split("\n").find((l) => l.startsWith("Requested by"));
    expect(requestedBy("s-1")).toBe("Requested by: agent in session s-1");
    expect(requestedBy("request:AAECAwQFBgcICQoLDA0ODw")).toBe("Requested by: agent in request AAECAwQFBgcICQoLDA0ODw");
    expect(requestedBy("")).toBe("Requested by: agent");
    const recorded = (session: string) =>
      renderText(ledgerEntryView(create(EntrySchema, { seq: 1n, ts: "2030-01-01T00:00:00.000Z", principal: "agent", session, event: { type: "x" } })))
        .split("\n")
        .find((l) => l.startsWith("Recorded"));
    expect(recorded("request:AAECAwQFBgcICQoLDA0ODw")).toBe("Recorded: 2030-01-01T00:00:00.000Z for agent in request AAECAwQFBgcICQoLDA0ODw");
    expect(recorded("")).toBe("Recorded: 2030-01-01T00:00:00.000Z for agent");
  });

  it("fits a form up to 16 KiB of UTF-8, counted in bytes", () => {
    expect(MAX_FORM_MESSAGE_BYTES).toBe(16 * 1024);
    expect(fitsForm("a".repeat(MAX_FORM_MESSAGE_BYTES))).toBe(true);
    expect(fitsForm("a".repeat(MAX_FORM_MESSAGE_BYTES + 1))).toBe(false);
    // "é" is two bytes: half as many characters fill the form.
    expect(fitsForm("é".repeat(MAX_FORM_MESSAGE_BYTES / 2 + 1))).toBe(false);
  });
});
