import { chpFloat, contentHash, parseChpJson } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { approveHuman, evaluateGate, type GateResult, type SpendAction, type SpendPolicy } from "./spend-gate.js";

// The DESIGN.md reference policy.
const POLICY: SpendPolicy = {
  version: "test-1",
  max_notional: 500,
  daily_cap: 2500,
  hitl_threshold: 250,
  min_confidence: 0.55,
  allowed_actions: ["LONG", "SHORT"],
  per_asset_limits: { CAKE: 100 },
};

const act = (notional: number, confidence: number | null, extra: Partial<SpendAction> = {}): SpendAction => ({
  action: "LONG",
  asset: "ETH",
  notional,
  confidence,
  ...extra,
});

const rules = (r: GateResult) => r.claims.map((c) => `${c.rule}:${c.passed ? "ok" : "FAIL"}`);

describe("evaluateGate: the DESIGN.md reference vectors", () => {
  it("LONG ETH 100.0 conf 0.8 → LOCKED", () => {
    const r = evaluateGate(act(100, 0.8), POLICY, 0);
    expect(r).toMatchObject({
      state: "LOCKED",
      allowed: true,
      requires_human: false,
      reason: "auto-approved under CHP thresholds",
      failed_rules: [],
      committed_delta: 100,
      content_hash: "4610642fe2682d765c2716a874692b842e00ab9489735d12a135dc1d426633b8",
    });
    expect(r.claims).toEqual([
      { rule: "sane-notional", passed: true, detail: "notional=100.0" },
      { rule: "allowed-action", passed: true, detail: "action LONG" },
      { rule: "per-asset-cap", passed: true, detail: "ETH notional 100.0 vs cap 500.0" },
      { rule: "max-notional", passed: true, detail: "100.0 vs max 500.0" },
      { rule: "daily-cap", passed: true, detail: "projected 100.0 vs daily cap 2500.0" },
      { rule: "min-confidence", passed: true, detail: "confidence 0.8 vs min 0.55" },
    ]);
    expect(contentHash(r.provenance)).toBe(r.content_hash);
  });

  it("LONG ETH 501.0 conf 0.9 → BLOCKED by per-asset-cap and max-notional", () => {
    const r = evaluateGate(act(501, 0.9), POLICY, 0);
    expect(r).toMatchObject({
      state: "BLOCKED",
      allowed: false,
      requires_human: false,
      reason: "blocked: per-asset-cap, max-notional",
      failed_rules: ["max-notional", "per-asset-cap"],
      committed_delta: 0,
      content_hash: "9d41b833af4c77387a6a6eefa7dfcab2958a27dbc8d77bf1da034a12404b9019",
    });
    // No short-circuit: the rules after the failures are still evaluated.
    expect(rules(r)).toEqual([
      "sane-notional:ok",
      "allowed-action:ok",
      "per-asset-cap:FAIL",
      "max-notional:FAIL",
      "daily-cap:ok",
      "min-confidence:ok",
    ]);
  });

  it("LONG ETH 100.0 without confidence → LOCKED with five claims", () => {
    const r = evaluateGate(act(100, null), POLICY, 0);
    expect(r.state).toBe("LOCKED");
    expect(r.claims.map((c) => c.rule)).toEqual(["sane-notional", "allowed-action", "per-asset-cap", "max-notional", "daily-cap"]);
    expect(r.content_hash).toBe("6fb82bd7c57223274452ca9e038fde09047455cdd250725f882f92efe2a9c804");
    // An absent confidence is the reference's default None, not a different decision.
    const { confidence: _omit, ...withoutConfidence } = act(100, null);
    expect(evaluateGate(withoutConfidence, POLICY, 0).content_hash).toBe(r.content_hash);
  });

  it("approve_human by cfo@example.com of LONG ETH 300.0 conf 0.9 → LOCKED", () => {
    expect(evaluateGate(act(300, 0.9), POLICY, 0).state).toBe("HITL_REQUIRED");
    const r = approveHuman(act(300, 0.9), POLICY, 0, "cfo@example.com");
    expect(r).toMatchObject({
      state: "LOCKED",
      allowed: true,
      requires_human: false,
      reason: "human-approved by cfo@example.com",
      claims: [{ rule: "human-approval", passed: true, detail: "approved by cfo@example.com" }],
      failed_rules: [],
      committed_delta: 300,
      content_hash: "822dec6c003ba5d3ff493363b0638b817537624625857797b02baa2f5067dc8c",
    });
  });

  it("hashes the same whether numbers arrive as JS numbers, CHP floats or parsed JSON", () => {
    const parsed = parseChpJson(
      '{"action":{"action":"LONG","asset":"ETH","notional":100.0,"confidence":0.8},"policy":{"version":"test-1","max_notional":500.0,"daily_cap":2500.0,"hitl_threshold":250.0,"min_confidence":0.55,"allowed_actions":["LONG","SHORT"],"per_asset_limits":{"CAKE":100.0}},"committed_today":0}',
    ) as { action: SpendAction; policy: SpendPolicy; committed_today: number };
    expect(evaluateGate(parsed.action, parsed.policy, parsed.committed_today).content_hash).toBe(
      "4610642fe2682d765c2716a874692b842e00ab9489735d12a135dc1d426633b8",
    );
    expect(evaluateGate(act(100, 0.8, { notional: chpFloat(100) }), POLICY, chpFloat(0)).content_hash).toBe(
      "4610642fe2682d765c2716a874692b842e00ab9489735d12a135dc1d426633b8",
    );
  });
});

// Expected hashes: the CHP v1.0 golden vectors for the same policy, and for the derived cases
// Python's json.dumps(sort_keys=True, separators=(",",":"), ensure_ascii=False) of the provenance.
describe("evaluateGate: thresholds, caps and sanity", () => {
  it("notional == hitl_threshold needs a human; just below locks", () => {
    const at = evaluateGate(act(250, 0.9), POLICY, 0);
    expect(at).toMatchObject({
      state: "HITL_REQUIRED",
      allowed: false,
      requires_human: true,
      reason: "human approval required: 250.0 >= HITL threshold 250.0",
      committed_delta: 0,
      content_hash: "77748976a5c0b2ce91f974299ff009858534209dae0ca2ee3cdc8750e3bbb2c9",
    });
    const below = evaluateGate(act(249.99, 0.9), POLICY, 0);
    expect(below).toMatchObject({ state: "LOCKED", committed_delta: 249.99, content_hash: "693c28abd90a0148c1497553dd8d7e372dc3707920abeab8ece7e1e1fdaef694" });
    expect(below.claims[0]!.detail).toBe("notional=249.99");
  });

  it("notional == max_notional passes max-notional (and goes to a human)", () => {
    const r = evaluateGate(act(500, 0.9), POLICY, 0);
    expect(r.failed_rules).toEqual([]);
    expect(r.state).toBe("HITL_REQUIRED");
    expect(r.content_hash).toBe("e142033480b3f5a2b689e62e1635018d07a9fbaed56b2084b1b8c4a9ce5220b3");
  });

  it("a per-asset cap beats the global one, inclusively", () => {
    const over = evaluateGate(act(150, 0.9, { asset: "CAKE" }), POLICY, 0);
    expect(over).toMatchObject({ state: "BLOCKED", reason: "blocked: per-asset-cap", content_hash: "fd385ca0c0107d115d64c5ed5da4956125676675938337fa88ed22e21704777b" });
    expect(over.claims[2]!.detail).toBe("CAKE notional 150.0 vs cap 100.0");
    expect(evaluateGate(act(100, 0.9, { asset: "CAKE" }), POLICY, 0)).toMatchObject({
      state: "LOCKED",
      content_hash: "63deaf1f90ada973c031b77d9fdbfb671ac2e6a9941013bff4cf2ade277bd25a",
    });
    expect(evaluateGate(act(100.01, 0.9, { asset: "CAKE" }), POLICY, 0)).toMatchObject({
      state: "BLOCKED",
      content_hash: "246047864985378b6c728d64bdc9acf74ae505a53aebfe48a9b59fe581ed8fa5",
    });
    // An asset named like an Object.prototype member has no per-asset cap.
    expect(evaluateGate(act(100, 0.9, { asset: "constructor" }), POLICY, 0).claims[2]!.detail).toBe("constructor notional 100.0 vs cap 500.0");
  });

  it("committed + notional == daily cap passes; above it blocks", () => {
    const at = evaluateGate(act(100, 0.9), POLICY, 2400);
    expect(at.state).toBe("LOCKED");
    expect(at.claims[4]).toEqual({ rule: "daily-cap", passed: true, detail: "projected 2500.0 vs daily cap 2500.0" });
    expect(at.content_hash).toBe("b20c74aaab5af3c4faccdba6c561ad319bd6b159f916c8ab7e694a1f8c1b610a");
    const over = evaluateGate(act(100, 0.9), POLICY, 2450);
    expect(over).toMatchObject({ state: "BLOCKED", reason: "blocked: daily-cap", content_hash: "557bcda7b5faf76f89e01037e93fab00452634e2d6697e8f6e75b974ef394bd4" });
    expect(over.claims[4]!.detail).toBe("projected 2550.0 vs daily cap 2500.0");
  });

  it("zero and negative notionals fail sane-notional and count as 0 toward the daily cap", () => {
    const zero = evaluateGate(act(0, 0.9), POLICY, 0);
    expect(zero).toMatchObject({ state: "BLOCKED", reason: "blocked: sane-notional", committed_delta: 0, content_hash: "4ceb04cff7d1c04db6624eec6f9c47a99a7564ed07e97c15874892c59c29ccb0" });
    expect(zero.claims[0]!.detail).toBe("notional=0.0");
    const negative = evaluateGate(act(-50, 0.9), POLICY, 0);
    expect(negative).toMatchObject({ state: "BLOCKED", reason: "blocked: sane-notional", content_hash: "05cc853147720034d0676007aada9814b2a7b3062c27dcbcab3a17229ae59ba8" });
    expect(negative.claims.map((c) => c.detail)).toEqual([
      "notional=-50.0",
      "action LONG",
      "ETH notional -50.0 vs cap 500.0",
      "-50.0 vs max 500.0",
      "projected 0.0 vs daily cap 2500.0",
      "confidence 0.9 vs min 0.55",
    ]);
    // A negative amount cannot create headroom: at 2500 committed the cap still holds exactly.
    expect(evaluateGate(act(-50, 0.9), POLICY, 2500).claims[4]!.detail).toBe("projected 2500.0 vs daily cap 2500.0");
  });

  it("blocks low confidence and reports every failure in claim order, rules sorted", () => {
    expect(evaluateGate(act(100, 0.1), POLICY, 0)).toMatchObject({
      state: "BLOCKED",
      reason: "blocked: min-confidence",
      content_hash: "c475dac78901c5bdbee585d521414d4d264037513b01f8f080ec13c83c9069f1",
    });
    const many = evaluateGate(act(-50, 0.1, { action: "HOLD" }), POLICY, 0);
    expect(many.reason).toBe("blocked: sane-notional, allowed-action, min-confidence");
    expect(many.failed_rules).toEqual(["allowed-action", "min-confidence", "sane-notional"]);
    expect(many.content_hash).toBe("51d51258d58aa4df5e2ec61d1ffce652e29e70e586e362c2f9a1b1613a40b419");
  });

  it("checks allowed_actions only when the policy lists some", () => {
    expect(evaluateGate(act(100, 0.9, { action: "HOLD" }), POLICY, 0)).toMatchObject({
      state: "BLOCKED",
      reason: "blocked: allowed-action",
      content_hash: "c990d34065867d63675fa1a1697fbbae0ecb233da4c65b5c424e0b0bd177af5c",
    });
    const open = evaluateGate(act(100, null, { action: "HOLD" }), { ...POLICY, allowed_actions: [] }, 0);
    expect(open.state).toBe("LOCKED");
    expect(open.claims.map((c) => c.rule)).toEqual(["sane-notional", "per-asset-cap", "max-notional", "daily-cap"]);
    expect(open.content_hash).toBe("851423fa5fb9923da80414980c7c2922382307fd2a121252e22b510038b90a61");
  });
});

describe("approveHuman", () => {
  it("cannot bypass a hard rule: BLOCKED stays BLOCKED and says whose approval was rejected", () => {
    const cases: Array<[SpendAction, number, string, string]> = [
      [act(900, 0.9), 0, "blocked: per-asset-cap, max-notional", "d8364053ecf2f8e3c05d8f39e9855840aab4a767d58a29e9f4f682a1db232ffa"],
      [act(300, 0.1), 0, "blocked: min-confidence", "37aab0d83a29fe02eea5d50b3e478ddee10312a04c755ea257e385287f10aec5"],
      [act(300, 0.9), 2400, "blocked: daily-cap", "c7cfa7ca2fe5a64ddac6d64f3855d335c9f747fd2d092c816c9aceb1a30d2eae"],
    ];
    for (const [action, committed, blocked, hash] of cases) {
      const r = approveHuman(action, POLICY, committed, "cfo@example.com");
      expect(r).toMatchObject({
        state: "BLOCKED",
        allowed: false,
        requires_human: false,
        reason: `approval by cfo@example.com rejected: ${blocked}`,
        committed_delta: 0,
        content_hash: hash,
      });
      expect(r.claims).toHaveLength(6);
    }
  });

  it("locks an action that was already under the threshold too", () => {
    const r = approveHuman(act(100, 0.8), POLICY, 0, "ops@example.com");
    expect(r).toMatchObject({ state: "LOCKED", reason: "human-approved by ops@example.com", committed_delta: 100 });
    // Same provenance as the auto-lock: who approved is in the claims, not the hash.
    expect(r.content_hash).toBe("4610642fe2682d765c2716a874692b842e00ab9489735d12a135dc1d426633b8");
  });
});

describe("input validation", () => {
  const bad: Array<[string, () => unknown, RegExp]> = [
    ["NaN notional", () => evaluateGate(act(Number.NaN, 0.9), POLICY, 0), /^action\.notional: /],
    ["infinite notional", () => evaluateGate(act(Infinity, 0.9), POLICY, 0), /^action\.notional: /],
    ["string confidence", () => evaluateGate({ ...act(1, null), confidence: "high" as unknown as number }, POLICY, 0), /^action\.confidence: /],
    ["unknown action key", () => evaluateGate({ ...act(1, null), notionl: 5 } as SpendAction, POLICY, 0), /^action: .*notionl/],
    ["missing daily_cap", () => evaluateGate(act(1, null), { ...POLICY, daily_cap: undefined } as unknown as SpendPolicy, 0), /^policy\.daily_cap: /],
    ["misspelt policy key", () => evaluateGate(act(1, null), { ...POLICY, per_asset_limit: {} } as SpendPolicy, 0), /^policy: .*per_asset_limit/],
    ["bad per-asset limit", () => evaluateGate(act(1, null), { ...POLICY, per_asset_limits: { CAKE: "100" as unknown as number } }, 0), /^policy\.per_asset_limits\.CAKE: /],
    ["empty version", () => evaluateGate(act(1, null), { ...POLICY, version: "" }, 0), /^policy\.version: must name a concrete version/],
    ["negative committed total", () => evaluateGate(act(1, null), POLICY, -1), /^committed_today: must not be negative/],
    ["blank approver", () => approveHuman(act(1, null), POLICY, 0, "  "), /^approver: /],
  ];
  it.each(bad)("refuses %s naming the field", (_name, call, message) => {
    expect(call).toThrow(expect.objectContaining({ code: "invalid_argument", message: expect.stringMatching(message) }));
  });
});
