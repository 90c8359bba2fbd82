import { chpFloat, contentHash, parseChpJson } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { approveHuman, evaluateGate } from "./spend-gate.js";
import { gatePolicy, missingConfidence, parseSpendPolicies, REFERENCE_SPEND_POLICIES, tighten, type SpendPolicyConfig } from "./spend-policies.js";

const { equity, wire, rebalance } = REFERENCE_SPEND_POLICIES;
const CAKE_EQUITY: SpendPolicyConfig = { ...equity, per_asset_limits: { CAKE: 100 } };

describe("the reference spend policies", () => {
  it("are valid operator configuration with concrete versions", () => {
    expect(parseSpendPolicies(REFERENCE_SPEND_POLICIES)).toEqual(REFERENCE_SPEND_POLICIES);
    expect([equity.version, wire.version, rebalance.version]).toEqual(["equity-1", "wire-1", "rebalance-1"]);
  });

  it("gate as documented: equity auto-locks small buys, every wire needs a human, rebalance above 1000 does", () => {
    expect(evaluateGate({ action: "BUY", asset: "AAPL", notional: 100, confidence: 0.6 }, equity, 0).state).toBe("LOCKED");
    expect(evaluateGate({ action: "SHORT", asset: "AAPL", notional: 100, confidence: 0.6 }, equity, 0).reason).toBe("blocked: allowed-action");
    expect(evaluateGate({ action: "BUY", asset: "AAPL", notional: 600, confidence: 0.6 }, equity, 0).reason).toBe("blocked: per-asset-cap, max-notional");
    expect(evaluateGate({ action: "WIRE", asset: "USD", notional: 1, confidence: 0.9 }, wire, 0).state).toBe("HITL_REQUIRED");
    expect(evaluateGate({ action: "WIRE", asset: "USD", notional: 20_000, confidence: 0.9 }, wire, 10_000).reason).toBe(
      "blocked: per-asset-cap, max-notional, daily-cap",
    );
    expect(evaluateGate({ action: "REBALANCE", asset: "P1", notional: 999, confidence: 0.6 }, rebalance, 0).state).toBe("LOCKED");
    expect(evaluateGate({ action: "REBALANCE", asset: "P1", notional: 1000, confidence: 0.59 }, rebalance, 0).reason).toBe("blocked: min-confidence");
  });

  it("refuses bad operator configuration naming the field", () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ equity: { ...equity, daily_cap: -1 } }, /^spend_policies\.equity\.daily_cap: /],
      [{ equity: { ...equity, version: " " } }, /^spend_policies\.equity\.version: must name a concrete version/],
      [{ equity: { ...equity, min_confidence: 1.5 } }, /^spend_policies\.equity\.min_confidence: /],
      [{ equity: { ...equity, per_asset_limit: {} } }, /^spend_policies\.equity: .*per_asset_limit/],
      [{ equity: { ...equity, allowed_actions: ["BUY", "BUY"] } }, /^spend_policies\.equity\.allowed_actions: must not repeat/],
      [{ Equity: equity }, /^spend_policies\.Equity: /],
    ];
    for (const [raw, message] of cases) {
      expect(() => parseSpendPolicies(raw)).toThrow(expect.objectContaining({ code: "invalid_argument", message: expect.stringMatching(message) }));
    }
  });
});

describe("tighten: an agent may only tighten", () => {
  it("accepts a stricter policy field by field and keeps the operator's version, suffixed", () => {
    const t = tighten(CAKE_EQUITY, {
      version: "agent-made-up",
      max_notional: 200,
      daily_cap: 1000,
      hitl_threshold: 100,
      min_confidence: 0.8,
      allowed_actions: ["BUY"],
      per_asset_limits: { CAKE: 50, AAPL: 150 },
    });
    expect(t).toMatchObject({
      max_notional: 200,
      daily_cap: 1000,
      hitl_threshold: 100,
      min_confidence: 0.8,
      allowed_actions: ["BUY"],
      per_asset_limits: { CAKE: 50, AAPL: 150 },
    });
    expect(t.version).toMatch(/^equity-1\+agent-[0-9a-f]{12}$/);
    // Different tightenings are different versions; the same one is stable.
    expect(tighten(CAKE_EQUITY, { max_notional: 200 }).version).not.toBe(tighten(CAKE_EQUITY, { max_notional: 300 }).version);
    expect(tighten(CAKE_EQUITY, { max_notional: 200 }).version).toBe(tighten(CAKE_EQUITY, { max_notional: 200 }).version);
    // The tightened policy is what the gate then applies.
    expect(evaluateGate({ action: "BUY", asset: "AAPL", notional: 160, confidence: 0.9 }, t, 0).reason).toBe("blocked: per-asset-cap");
  });

  it("keeps the operator's value for a field the agent leaves out, and equal values are accepted", () => {
    const t = tighten(CAKE_EQUITY, { daily_cap: 2500, min_confidence: 0.55 });
    expect({ ...t, version: "" }).toEqual({ ...CAKE_EQUITY, version: "" });
    expect(t.version.startsWith("equity-1+agent-")).toBe(true);
  });

  it("accepts numbers parsed from JSON text, floats included", () => {
    const t = tighten(CAKE_EQUITY, parseChpJson('{"max_notional":400.0,"min_confidence":0.6,"per_asset_limits":{"CAKE":100}}'));
    expect(t).toMatchObject({ max_notional: 400, min_confidence: 0.6, per_asset_limits: { CAKE: 100 } });
    expect(tighten(CAKE_EQUITY, { hitl_threshold: chpFloat(10) }).hitl_threshold).toBe(10);
  });

  const looser: Array<[string, unknown, RegExp]> = [
    ["a higher max_notional", { max_notional: 500.01 }, /^policy\.max_notional: 500\.01 is above the operator's 500/],
    ["a higher daily_cap", { daily_cap: 3000 }, /^policy\.daily_cap: /],
    ["a higher hitl_threshold", { hitl_threshold: 251 }, /^policy\.hitl_threshold: /],
    ["a lower min_confidence", { min_confidence: 0.5 }, /^policy\.min_confidence: 0\.5 is below the operator's 0\.55/],
    ["an action the operator does not allow", { allowed_actions: ["BUY", "SHORT"] }, /^policy\.allowed_actions: SHORT is not allowed/],
    ["an empty action list (any action)", { allowed_actions: [] }, /^policy\.allowed_actions: an empty list allows any action/],
    ["a removed per-asset limit", { per_asset_limits: { AAPL: 10 } }, /^policy\.per_asset_limits\.CAKE: removes the operator's limit/],
    ["a higher per-asset limit", { per_asset_limits: { CAKE: 101 } }, /^policy\.per_asset_limits\.CAKE: 101 is above the operator's cap 100/],
    ["a new per-asset limit above max_notional", { per_asset_limits: { CAKE: 100, BTC: 600 } }, /^policy\.per_asset_limits\.BTC: 600 is above the operator's cap 500/],
  ];
  it.each(looser)("refuses %s, naming the field", (_name, agent, message) => {
    expect(() => tighten(CAKE_EQUITY, agent)).toThrow(expect.objectContaining({ code: "policy_denied", message: expect.stringMatching(message) }));
  });

  it("lets an agent narrow an operator's 'any action' to a list", () => {
    expect(tighten(wire, { allowed_actions: ["WIRE"] }).allowed_actions).toEqual(["WIRE"]);
  });

  it("refuses a malformed agent policy as invalid_argument naming the field", () => {
    for (const [agent, message] of [
      [{ max_notional: "100" }, /^policy\.max_notional: /],
      [{ daily_cap: Number.NaN }, /^policy\.daily_cap: /],
      [{ max_notionall: 1 }, /^policy: .*max_notionall/],
      ["tight", /^policy: /],
    ] as const) {
      expect(() => tighten(equity, agent)).toThrow(expect.objectContaining({ code: "invalid_argument", message: expect.stringMatching(message) }));
    }
  });
});

describe("require_confidence: a Chaos Core check before the CHP gate", () => {
  // The DESIGN.md reference policy, with the operator's requirement on top.
  const REFERENCE_TEST_1: SpendPolicyConfig = {
    version: "test-1",
    max_notional: 500,
    daily_cap: 2500,
    hitl_threshold: 250,
    min_confidence: 0.55,
    allowed_actions: ["LONG", "SHORT"],
    per_asset_limits: { CAKE: 100 },
  };
  const REQUIRING: SpendPolicyConfig = { ...REFERENCE_TEST_1, require_confidence: true };

  it("is operator configuration, validated like every other field", () => {
    expect(parseSpendPolicies({ equity: { ...equity, require_confidence: true } }).equity?.require_confidence).toBe(true);
    expect(() => parseSpendPolicies({ equity: { ...equity, require_confidence: "yes" } })).toThrow(
      expect.objectContaining({ code: "invalid_argument", message: expect.stringMatching(/^spend_policies\.equity\.require_confidence: .*boolean/) }),
    );
  });

  it("names what is missing when the policy requires a confidence and none is given, and only then", () => {
    expect(missingConfidence(REQUIRING, undefined, "action.confidence")).toMatch(/^the spend policy \(version test-1\) requires action\.confidence, a number from 0 to 1, and none was given; the gate did not run$/);
    expect(missingConfidence(REQUIRING, null, "action.confidence")).toBeDefined();
    expect(missingConfidence(REQUIRING, 0, "action.confidence")).toBeUndefined();
    expect(missingConfidence(REFERENCE_TEST_1, undefined, "action.confidence")).toBeUndefined();
  });

  it("never reaches the gate: under it the DESIGN reference vectors keep their claims and hashes", () => {
    const gate = gatePolicy(REQUIRING);
    expect(gate).toEqual(REFERENCE_TEST_1);
    const long = (notional: number, confidence: number | null) => ({ action: "LONG", asset: "ETH", notional, confidence });
    expect(evaluateGate(long(100, 0.8), gate, 0).content_hash).toBe("4610642fe2682d765c2716a874692b842e00ab9489735d12a135dc1d426633b8");
    expect(evaluateGate(long(501, 0.9), gate, 0)).toMatchObject({
      reason: "blocked: per-asset-cap, max-notional",
      content_hash: "9d41b833af4c77387a6a6eefa7dfcab2958a27dbc8d77bf1da034a12404b9019",
    });
    // The gate itself still skips min-confidence without one: refusing is Chaos Core's check, not a CHP claim.
    const unconfident = evaluateGate(long(100, null), gate, 0);
    expect(unconfident.claims).toHaveLength(5);
    expect(unconfident.content_hash).toBe("6fb82bd7c57223274452ca9e038fde09047455cdd250725f882f92efe2a9c804");
    expect(approveHuman(long(300, 0.9), gate, 0, "cfo@example.com").content_hash).toBe("822dec6c003ba5d3ff493363b0638b817537624625857797b02baa2f5067dc8c");
  });

  it("survives an agent's tightening, may be added by the agent, and cannot be dropped by it", () => {
    expect(tighten(REQUIRING, { max_notional: 100 }).require_confidence).toBe(true);
    expect(tighten(REFERENCE_TEST_1, { require_confidence: true }).require_confidence).toBe(true);
    expect(() => tighten(REQUIRING, { require_confidence: false })).toThrow(
      expect.objectContaining({ code: "policy_denied", message: expect.stringMatching(/^policy\.require_confidence: /) }),
    );
    // A policy without the requirement tightens to the same version as before the option existed.
    const t = tighten(CAKE_EQUITY, { max_notional: 200 });
    expect(t).not.toHaveProperty("require_confidence");
    const { version: _v, ...limits } = { ...CAKE_EQUITY, max_notional: 200 };
    expect(t.version).toBe(`equity-1+agent-${contentHash(limits).slice(0, 12)}`);
  });
});
