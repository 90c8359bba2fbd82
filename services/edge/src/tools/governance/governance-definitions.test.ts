import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ContextSigner, createGrpcClient } from "@chaos-core/kit";
import { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import type { EdgeDeps } from "../../deps/edge-deps.js";
import { connectInMemory, uniqueTenant, withEveryToolset, type Connected } from "../../test-support/in-memory.js";
import { startTestServices, type TestServices } from "../../test-support/services.js";
import type { ToolDefinition } from "../../definitions/tool.js";
import { TOOL_DEFINITIONS, TOOLSETS } from "../index.js";
import { ok, refused } from "../../test-support/results.js";

// The governance and finance-reference tools as definitions: where they are listed, what they
// admit, what they promise, and that they fail closed without a ledger.

const GOVERNANCE = [
  "evaluate_spend_gate",
  "approve_spend",
  "evaluate_tool_approval",
  "issue_approval_receipt",
  "authorize_tool_call",
  "request_authorization",
  "inspect_audit_ledger",
  "chp_content_hash",
  "chp_version",
];
const FINANCE = ["place_equity_order", "wire_treasury_transfer", "rebalance_portfolio"];
const READ_ONLY = ["inspect_audit_ledger", "chp_content_hash", "chp_version"];

function tool(name: string): ToolDefinition {
  const found = TOOL_DEFINITIONS.find((t) => t.name === name);
  if (!found) throw new Error(`no tool ${name}`);
  return found;
}

/** The dotted paths of the issues a tool's input schema reports for `args`. */
function rejected(name: string, args: unknown): string[] {
  const result = tool(name).input.safeParse(args);
  expect(result.success, `${name} accepted ${JSON.stringify(args)}`).toBe(false);
  return result.error!.issues.map((i) => (i.code === "unrecognized_keys" ? [...i.path, ...i.keys] : i.path).join("."));
}

function accepted(name: string, args: unknown): void {
  const result = tool(name).input.safeParse(args);
  expect(result.success, JSON.stringify(result.error?.issues)).toBe(true);
}

const call = { tool: "stripe.create_charge", resource: "acct_live_acme", arguments: { amount: 2500, currency: "usd" } };
const equity = { symbol: "AAPL", side: "BUY", quantity: 10, notional: 300, confidence: 0.9 };

describe("the governance and finance-reference toolsets", () => {
  it("list exactly the DESIGN tools, each once and in its own toolset", () => {
    expect(TOOLSETS.governance?.map((t) => t.name)).toEqual(GOVERNANCE);
    expect(TOOLSETS["finance-reference"]?.map((t) => t.name)).toEqual(FINANCE);
    for (const t of TOOLSETS.governance ?? []) expect(t.toolset).toBe("governance");
    for (const t of TOOLSETS["finance-reference"] ?? []) expect(t.toolset).toBe("finance-reference");
    const names = TOOL_DEFINITIONS.map((t) => t.name);
    expect(new Set(names).size).toBe(names.length);
  });

  it("state honest annotations", () => {
    for (const name of [...GOVERNANCE, ...FINANCE]) {
      const a = tool(name).annotations;
      // Nothing here reaches outside Chaos Core: the finance tools are synthetic.
      expect(a.openWorldHint, name).toBe(false);
      expect(a.readOnlyHint, name).toBe(READ_ONLY.includes(name));
      // Everything that writes appends a new ledger entry, so a repeat is never a no-op.
      expect(a.idempotentHint, name).toBe(READ_ONLY.includes(name));
    }
    // Consuming a single-use receipt cannot be undone.
    for (const name of ["authorize_tool_call", ...FINANCE]) expect(tool(name).annotations.destructiveHint, name).toBe(true);
    for (const name of ["evaluate_spend_gate", "approve_spend", "issue_approval_receipt", "request_authorization"]) {
      expect(tool(name).annotations.destructiveHint, name).toBe(false);
    }
  });

  it("say the finance tools are synthetic and that a wire always needs a person", () => {
    for (const name of FINANCE) expect(tool(name).description).toMatch(/no real venue or bank/);
    expect(tool("wire_treasury_transfer").description).toMatch(/always needs a person/);
    expect(tool("place_equity_order").description).toMatch(/request_authorization/);
  });
});

describe("input schemas", () => {
  it("refuse garbage in evaluate_spend_gate, naming the field", () => {
    expect(rejected("evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: "lots" } })).toEqual([
      "action.notional",
    ]);
    expect(rejected("evaluate_spend_gate", { policy: "../equity", action: { action: "BUY", asset: "AAPL", notional: 1 } })).toEqual([
      "policy",
    ]);
    expect(
      rejected("evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: 1, confidence: 3 } }),
    ).toEqual(["action.confidence"]);
    expect(
      rejected("evaluate_spend_gate", {
        policy: "equity",
        action: { action: "BUY", asset: "AAPL", notional: 1 },
        agent_policy: { max_notional: 100, daily_cap_override: 1e9 },
      }),
    ).toEqual(["agent_policy.daily_cap_override"]);
    // A non-positive notional is the gate's to block and record, not a schema error.
    accepted("evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: -50 } });
  });

  it("never take an approval from an argument", () => {
    expect(rejected("approve_spend", { request_seq: 7, approved: true })).toEqual(["approved"]);
    expect(rejected("approve_spend", { request_seq: 7, approver: "cfo@example.com" })).toEqual(["approver"]);
    expect(rejected("issue_approval_receipt", { request_seq: 7, call, decision: "allow", confirmed: true })).toEqual(["confirmed"]);
    // The cognition step binding is the cognition service's alone.
    expect(
      rejected("issue_approval_receipt", { request_seq: 7, call, decision: "allow", step: { policy_version: "1", risk: "low" } }),
    ).toEqual(["step"]);
    expect(rejected("authorize_tool_call", { call, step: { policy_version: "1", risk: "low" } })).toEqual(["step"]);
  });

  it("bound sequence numbers, lifetimes and decisions", () => {
    expect(rejected("approve_spend", { request_seq: 0 })).toEqual(["request_seq"]);
    expect(rejected("approve_spend", { request_seq: 1.5 })).toEqual(["request_seq"]);
    expect(rejected("approve_spend", { request_seq: 1, ttl_seconds: 86_400 })).toEqual(["ttl_seconds"]);
    expect(rejected("issue_approval_receipt", { request_seq: 7, call, decision: "maybe" })).toEqual(["decision"]);
    expect(rejected("inspect_audit_ledger", { limit: 5000 })).toEqual(["limit"]);
    expect(rejected("inspect_audit_ledger", { proof: { seq: -1 } })).toEqual(["proof.seq"]);
  });

  it("refuse host-bound values and oversized arguments in a call", () => {
    expect(rejected("evaluate_tool_approval", { call: { ...call, host_bound: { tenant_id: "acme" } } })).toEqual(["call.host_bound"]);
    expect(rejected("evaluate_tool_approval", { call: { ...call, arguments: { blob: "x".repeat(70_000) } } })).toEqual([
      "call.arguments",
    ]);
    expect(rejected("evaluate_tool_approval", { call: { tool: "", resource: "r", arguments: {} } })).toEqual(["call.tool"]);
    expect(rejected("authorize_tool_call", { call, receipt: "a-token" })).toEqual(["receipt"]);
    expect(rejected("authorize_tool_call", { call, receipt: { signature: "x".repeat(9000) } })).toEqual(["receipt"]);
  });

  it("take a call without a receipt: that is a recorded denial, not a schema error", () => {
    accepted("authorize_tool_call", { call });
    for (const name of FINANCE.slice(0, 1)) accepted(name, equity);
    accepted("wire_treasury_transfer", { beneficiary: "ACME Ltd", amount: 1200, currency: "USD" });
    accepted("rebalance_portfolio", { portfolio_id: "p1", targets: [{ asset: "ETH", weight: 1 }], notional: 500 });
  });

  it("mirror the reference tools' argument schemas, strictly", () => {
    expect(rejected("place_equity_order", { ...equity, side: "HOLD" })).toEqual(["side"]);
    expect(rejected("place_equity_order", { ...equity, symbol: "aapl" })).toEqual(["symbol"]);
    expect(rejected("place_equity_order", { ...equity, approver: "cfo@example.com" })).toEqual(["approver"]);
    expect(rejected("wire_treasury_transfer", { beneficiary: "ACME", amount: 5, currency: "dollars" })).toEqual(["currency"]);
    expect(
      rejected("rebalance_portfolio", { portfolio_id: "p1", targets: [{ asset: "ETH", weight: 0.5 }], notional: 500 }),
    ).toEqual(["targets"]);
    expect(rejected("request_authorization", { tool: "buy_bitcoin", args: equity })).toContain("tool");
    expect(rejected("request_authorization", { tool: "place_equity_order", args: { ...equity, quantity: 2.5 } })).toEqual([
      "args.quantity",
    ]);
    expect(rejected("request_authorization", { tool: "place_equity_order", args: { ...equity, receipt: {} } })).toEqual([
      "args.receipt",
    ]);
    accepted("request_authorization", { tool: "place_equity_order", args: equity, ttl_seconds: 60 });
  });

  it("ask chp_content_hash for exactly one of value or json", () => {
    expect(rejected("chp_content_hash", {})).toEqual(["value"]);
    expect(rejected("chp_content_hash", { value: 1, json: "1" })).toEqual(["value"]);
    accepted("chp_content_hash", { value: null });
  });
});

describe("through an MCP client", () => {
  let services: TestServices;
  let deps: EdgeDeps;
  const open: Connected[] = [];

  async function connect(withDeps: EdgeDeps): Promise<Connected> {
    const c = await connectInMemory(withDeps, { tenant: uniqueTenant("gov-def"), principal: "agent" });
    open.push(c);
    return c;
  }

  beforeAll(async () => {
    services = await startTestServices("governance_definitions");
    // No ledger at all: the fail-closed path. Every toolset enabled: the finance tools are opt-in.
    deps = withEveryToolset(services.deps());
  });

  afterAll(async () => {
    for (const c of open) await c.close();
    await services?.close();
  });

  it("publishes input and output schemas for every tool", async () => {
    const c = await connect(deps);
    const { tools } = await c.client.listTools();
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    for (const name of [...GOVERNANCE, ...FINANCE]) {
      expect(byName[name], name).toBeDefined();
      expect(byName[name]!.outputSchema?.properties, name).toHaveProperty("error");
      expect(byName[name]!.annotations?.openWorldHint, name).toBe(false);
    }
    expect(byName.approve_spend!.inputSchema.required).toEqual(["request_seq"]);
    expect(byName.approve_spend!.inputSchema).toMatchObject({ additionalProperties: false });
    expect(byName.authorize_tool_call!.inputSchema.required).toEqual(["call"]);
    expect(byName.place_equity_order!.inputSchema.required).toEqual(["symbol", "side", "quantity", "notional"]);
  });

  it("answers garbage with an error that names the field", async () => {
    const c = await connect(deps);
    const res = await c.call("evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: "lots" } });
    expect(res.isError).toBe(true);
    expect(JSON.stringify(res.content)).toMatch(/notional/);
  });

  it("computes CHP canonical JSON and content_hash, keeping floats written as text", async () => {
    const c = await connect(deps);
    // DESIGN's canonical vector.
    expect(ok(await c.call("chp_content_hash", { value: { b: 1, a: 2 } }))).toEqual({
      canonical_json: '{"a":2,"b":1}',
      content_hash: "d3626ac30a87e6f7a6428233b3c68299976865fa5508e4267c5415c76af7a772",
    });
    const asText = ok<{ canonical_json: string }>(await c.call("chp_content_hash", { json: '{"notional": 100.0, "ü": "ß"}' }));
    expect(asText.canonical_json).toBe('{"notional":100.0,"ü":"ß"}');
    const asValue = ok<{ canonical_json: string }>(await c.call("chp_content_hash", { value: { notional: 100.0 } }));
    expect(asValue.canonical_json).toBe('{"notional":100}');
    const bad = refused(await c.call("chp_content_hash", { json: '{"a": 1, "a": 2}' }));
    expect(bad.code).toBe("invalid_argument");
    expect(bad.message).toMatch(/^json: /);
    expect(refused(await c.call("chp_content_hash", { value: "\ud800" })).message).toMatch(/^value: .*surrogate/);
  });

  it("fails closed with unavailable when no ledger is configured", async () => {
    const c = await connect(deps);
    const calls: Array<[string, Record<string, unknown>]> = [
      ["evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: 100 } }],
      ["authorize_tool_call", { call }],
      ["place_equity_order", equity],
      ["inspect_audit_ledger", {}],
      ["chp_version", {}],
    ];
    for (const [name, args] of calls) {
      const error = refused(await c.call(name, args));
      expect(error.code, name).toBe("unavailable");
      expect(error.message, name).toMatch(/LEDGER_ADDR.*fails closed/);
    }
  });

  it("fails closed with unavailable when the ledger cannot be reached", async () => {
    // A port that was just free: nothing listens there.
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const unreachable = createGrpcClient(LedgerService, `127.0.0.1:${port}`, new ContextSigner("k".repeat(32)), { timeoutMs: 5000 });
    try {
      const c = await connect({ ...deps, ledger: unreachable.client });
      const gate = refused(await c.call("evaluate_spend_gate", { policy: "equity", action: { action: "BUY", asset: "AAPL", notional: 100 } }));
      expect(gate.code).toBe("unavailable");
      const run = refused(await c.call("place_equity_order", equity));
      expect(run.code).toBe("unavailable");
    } finally {
      unreachable.close();
    }
  });
});
