import { describe, expect, it } from "vitest";
import { approvalChannelsFor, approvalChannelWarnings, clientElicitationOptIns } from "./channel-choice.js";
import { validatePolicyDocument, type PolicyDocumentJson } from "./policy-document.js";

function doc(approvalChannels: unknown = {}): PolicyDocumentJson {
  return validatePolicyDocument({ approvalChannels }, "test");
}

const PERSON = ["approver", "operator", "console"];
const ANY = ["client_elicitation", ...PERSON];

describe("approvalChannelsFor a capability step", () => {
  it("takes the channels of the step's risk by default: the client's own answer only below high", () => {
    for (const [risk, channels] of [
      ["low", ANY],
      ["medium", ANY],
      ["high", PERSON],
      ["critical", PERSON],
    ] as const) {
      expect(approvalChannelsFor({ kind: "capability", name: "x.y", risk }, doc())).toEqual({
        channels,
        matchedRule: `approvalChannels.byRisk.${risk}`,
      });
    }
  });

  it("counts an unspecified risk as critical", () => {
    const policy = doc({ byRisk: { critical: ["operator"], high: ["approver"] } });
    expect(approvalChannelsFor({ kind: "capability", name: "x.y", risk: "unspecified" }, policy)).toEqual({
      channels: ["operator"],
      matchedRule: "approvalChannels.byRisk.critical",
    });
    expect(approvalChannelsFor({ kind: "tool", tool: "deploy", risk: "unspecified" }, policy).matchedRule).toBe(
      "approvalChannels.byRisk.critical",
    );
  });

  it("lets a capability's own entry win over its risk", () => {
    const policy = doc({ capabilities: { "http.request": ["console"] }, byRisk: { low: ["approver"] } });
    expect(approvalChannelsFor({ kind: "capability", name: "http.request", risk: "low" }, policy)).toEqual({
      channels: ["console"],
      matchedRule: "approvalChannels.capabilities.http.request",
    });
    expect(approvalChannelsFor({ kind: "capability", name: "http.other", risk: "low" }, policy).matchedRule).toBe(
      "approvalChannels.byRisk.low",
    );
  });

  it("finds only the operator's own entries, never a name inherited by every object", () => {
    const d = approvalChannelsFor({ kind: "capability", name: "constructor", risk: "high" }, doc());
    expect(d).toEqual({ channels: PERSON, matchedRule: "approvalChannels.byRisk.high" });
    const spend = approvalChannelsFor({ kind: "spend", spendPolicy: "constructor", tool: "to_string" }, doc());
    expect(spend.matchedRule).toBe("approvalChannels.spend.default");
  });
});

describe("approvalChannelsFor a tool receipt", () => {
  it("takes the channels of the tool policy's risk, not a capability entry of the same name", () => {
    const policy = doc({ capabilities: { deploy: ["client_elicitation"] } });
    expect(approvalChannelsFor({ kind: "tool", tool: "deploy", risk: "high" }, policy)).toEqual({
      channels: PERSON,
      matchedRule: "approvalChannels.byRisk.high",
    });
  });
});

describe("approvalChannelsFor a spend", () => {
  const policy = doc({
    spend: {
      default: ["approver"],
      policies: { wire: ["operator", "console"], equity: ["client_elicitation", "approver"] },
      tools: { wire_treasury_transfer: ["console"] },
    },
  });

  it("takes the finance tool's entry first, then the spend policy's, then the default", () => {
    expect(approvalChannelsFor({ kind: "spend", spendPolicy: "wire", tool: "wire_treasury_transfer" }, policy)).toEqual({
      channels: ["console"],
      matchedRule: "approvalChannels.spend.tools.wire_treasury_transfer",
    });
    expect(approvalChannelsFor({ kind: "spend", spendPolicy: "wire", tool: "place_equity_order" }, policy)).toEqual({
      channels: ["operator", "console"],
      matchedRule: "approvalChannels.spend.policies.wire",
    });
    expect(approvalChannelsFor({ kind: "spend", spendPolicy: "rebalance", tool: "rebalance_portfolio" }, policy)).toEqual({
      channels: ["approver"],
      matchedRule: "approvalChannels.spend.default",
    });
  });

  it("matches a plain spend-gate spend, which has no tool, by its spend policy", () => {
    expect(approvalChannelsFor({ kind: "spend", spendPolicy: "equity" }, policy)).toEqual({
      channels: ["client_elicitation", "approver"],
      matchedRule: "approvalChannels.spend.policies.equity",
    });
  });

  it("lets no spend be approved by the client's own answer by default", () => {
    for (const tool of [undefined, "wire_treasury_transfer"]) {
      expect(approvalChannelsFor({ kind: "spend", spendPolicy: "wire", tool }, doc())).toEqual({
        channels: PERSON,
        matchedRule: "approvalChannels.spend.default",
      });
    }
  });
});

describe("clientElicitationOptIns", () => {
  it("finds nothing in the default document", () => {
    expect(clientElicitationOptIns(doc())).toEqual([]);
    expect(approvalChannelWarnings(doc())).toEqual([]);
  });

  it("lists every entry that lets the client's own answer approve what the default keeps for a person", () => {
    const policy = doc({
      byRisk: { low: ["client_elicitation"], high: ["client_elicitation", "approver"] },
      capabilities: { "memory.write": ["client_elicitation"], "memory.read": ["console"] },
      spend: { default: ["client_elicitation"], policies: { wire: ["client_elicitation"] }, tools: { x_tool: ["console"] } },
    });
    expect(clientElicitationOptIns(policy)).toEqual([
      "approvalChannels.byRisk.high",
      "approvalChannels.capabilities.memory.write",
      "approvalChannels.spend.default",
      "approvalChannels.spend.policies.wire",
    ]);
    const [first] = approvalChannelWarnings(policy);
    expect(first).toMatch(/^approvalChannels\.byRisk\.high lists client_elicitation: the requesting client's own form answer/);
  });
});
