import { describe, expect, it } from "vitest";
import { approveHuman, evaluateGate, type SpendAction, type SpendPolicy } from "./spend-gate.js";
import { blockedOnlyToday, decisionInWords } from "./spend-limits.js";

// The DESIGN.md reference policy: the words must sit beside CHP's reference decisions unchanged.
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

function words(action: SpendAction, committedToday = 0): string | undefined {
  return decisionInWords(evaluateGate(action, POLICY, committedToday), { policyName: "crypto", policy: POLICY, action, committedToday });
}

describe("decisionInWords: the caps that decided a gate result, with their values", () => {
  it("names max_notional once for the reference vector LONG ETH 501.0, whose per-asset cap falls back to it", () => {
    const gate = evaluateGate(act(501, 0.9), POLICY, 0);
    // CHP's reason and hash are the reference vector's; the words are beside them.
    expect(gate).toMatchObject({ reason: "blocked: per-asset-cap, max-notional", content_hash: "9d41b833af4c77387a6a6eefa7dfcab2958a27dbc8d77bf1da034a12404b9019" });
    expect(words(act(501, 0.9))).toBe("501.0 exceeds max_notional 500.0 (spend policy crypto, version test-1)");
  });

  it("names an asset's own limit by its key", () => {
    expect(words(act(150, 0.9, { asset: "CAKE" }))).toBe("150.0 exceeds per_asset_limits.CAKE 100.0 (spend policy crypto, version test-1)");
  });

  it("names every failed rule in CHP's claim order", () => {
    expect(words(act(-50, 0.1, { action: "HODL" }), 2600)).toBe(
      "notional -50.0 is not a positive amount, action HODL is not in allowed_actions [LONG, SHORT], " +
        "2600.0 committed today exceeds daily_cap 2500.0 and confidence 0.1 is below min_confidence 0.55 (spend policy crypto, version test-1)",
    );
  });

  it("counts today's total toward the daily cap, and says when only the day blocks it", () => {
    expect(words(act(200, 0.9), 2400)).toBe("2400.0 committed today + 200.0 = 2600.0 exceeds daily_cap 2500.0 (spend policy crypto, version test-1)");
    expect(blockedOnlyToday(evaluateGate(act(200, 0.9), POLICY, 2400))).toBe(true);
    expect(blockedOnlyToday(evaluateGate(act(600, 0.9), POLICY, 2400))).toBe(false);
    expect(blockedOnlyToday(evaluateGate(act(200, 0.9), POLICY, 0))).toBe(false);
  });

  it("names the threshold that holds a spend for a person, and nothing for a locked one", () => {
    expect(words(act(300, 0.9))).toBe("300.0 is at or above hitl_threshold 250.0 (spend policy crypto, version test-1)");
    expect(words(act(100, 0.8))).toBeUndefined();
    const approved = approveHuman(act(300, 0.9), POLICY, 0, "cfo@example.com");
    expect(decisionInWords(approved, { policyName: "crypto", policy: POLICY, action: act(300, 0.9), committedToday: 0 })).toBeUndefined();
  });
});
