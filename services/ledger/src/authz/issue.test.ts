import { contentHash } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { createKeyring, generateSigningKey } from "../keys/keyring.js";
import { AUTHORIZATION_CODES, FINANCE_REASONS, financeReason, ISSUE_REFUSAL_CODES, type DenyCode } from "./codes.js";
import { evaluateToolApproval, issueReceipt, type IssueReceiptInput } from "./issue.js";
import { parseReceipt, verifyReceiptSignature } from "./receipt.js";

const keyring = createKeyring(generateSigningKey("k1"));
const NOW = new Date("2025-01-31T12:00:00.000Z");

const POLICY = {
  version: "7",
  tools: {
    "stripe.create_charge": { risk: "high", resources: ["acct_live_acme"] },
    "search.azure_ai": { risk: "low", resources: ["tenant:acme"], host_bound_fields: ["tenant_id", "index_name"] },
  },
  host_context: { tenant_id: "acme", index_name: "prod-docs" },
};
const CHARGE = { tool: "stripe.create_charge", resource: "acct_live_acme", arguments: { amount: 2500, currency: "usd", customer: "cus_123" } };
const SEARCH = { tool: "search.azure_ai", resource: "tenant:acme", arguments: { query: "Q3 revenue", top_k: 5 } };

const base: IssueReceiptInput = {
  call: CHARGE,
  policy: POLICY,
  decision: "allow",
  actor: { principal: "bob@example.com", roles: ["approver"] },
  requester: "agent-1",
  actorKind: "approver",
  ttlSeconds: 120,
  now: NOW,
  tenant: "acme",
};

describe("issueReceipt", () => {
  it("signs a receipt bound to the exact call, and a decision log", () => {
    const result = issueReceipt(base, keyring);
    if (!result.issued) throw new Error(result.problem);
    const { receipt, decisionLog } = result;
    expect(parseReceipt(receipt)).toEqual({ ok: true, receipt });
    expect(verifyReceiptSignature(receipt, keyring)).toEqual({ ok: true });
    expect(receipt).toMatchObject({
      kind: "chaoscore.tool_approval_receipt",
      schema_version: 1,
      kid: "k1",
      tenant: "acme",
      actor: "bob@example.com",
      tool: CHARGE.tool,
      resource: CHARGE.resource,
      args_hash: contentHash(CHARGE.arguments),
      policy_version: "7",
      risk: "high",
      issued_at: "2025-01-31T12:00:00.000Z",
      expiry: "2025-01-31T12:02:00.000Z",
      decision: "allow",
    });
    expect(decisionLog).toEqual({ actor: "bob@example.com", decision: "allow", args_hash: receipt.args_hash, nonce: receipt.nonce });
  });

  it("gives every receipt its own nonce", () => {
    const a = issueReceipt(base, keyring);
    const b = issueReceipt(base, keyring);
    expect(a.issued && b.issued && a.receipt.nonce !== b.receipt.nonce).toBe(true);
  });

  it("binds the host values into args_hash", () => {
    const result = issueReceipt({ ...base, call: SEARCH }, keyring);
    expect(result.issued && result.receipt.args_hash).toBe(contentHash({ ...SEARCH.arguments, tenant_id: "acme", index_name: "prod-docs" }));
  });

  it("signs a deny decision too, and the finance kind on request", () => {
    expect(issueReceipt({ ...base, decision: "deny" }, keyring)).toMatchObject({ issued: true, receipt: { decision: "deny" } });
    expect(issueReceipt({ ...base, kind: "authorization" }, keyring)).toMatchObject({ issued: true, receipt: { kind: "authorization" } });
  });

  it("takes a human's answer through elicitation without a role, marked as such", () => {
    const result = issueReceipt({ ...base, actorKind: "human_elicitation", actor: { principal: "agent-1", roles: [] } }, keyring);
    expect(result).toMatchObject({ issued: true, receipt: { actor: "elicitation:agent-1" }, decisionLog: { actor: "elicitation:agent-1" } });
  });

  it.each([
    ["self-approval", { actor: { principal: "agent-1", roles: ["approver"] } }, "self_approval", /agent-1 requested this call/],
    ["self-approval of a deny", { decision: "deny" as const, actor: { principal: "agent-1", roles: ["approver"] } }, "self_approval", /agent-1/],
    ["an actor without the approver role", { actor: { principal: "carol", roles: [] } }, "not_an_approver", /carol does not hold the approver role/],
    ["a wildcard actor", { actor: { principal: "*", roles: ["approver"] } }, "ambiguous_actor", /actor "\*" is a wildcard/],
    ["an empty requester", { requester: "" }, "ambiguous_actor", /requester is empty/],
    ["a zero ttl", { ttlSeconds: 0 }, "invalid_ttl", /from 1 to 3600, got 0/],
    ["a ttl over an hour", { ttlSeconds: 3601 }, "invalid_ttl", /got 3601/],
    ["a fractional ttl", { ttlSeconds: 1.5 }, "invalid_ttl", /got 1.5/],
    ["an ambiguous policy", { policy: { ...POLICY, version: "latest" } }, "ambiguous_policy", /version/],
    ["a missing policy", { policy: undefined }, "ambiguous_policy", /^no tool-approval policy is configured for this tenant/],
    ["a wildcard resource", { call: { ...CHARGE, resource: "*" } }, "ambiguous_call", /resource/],
    ["missing arguments", { call: { tool: CHARGE.tool, resource: CHARGE.resource } }, "ambiguous_call", /arguments: missing/],
    ["an unlisted tool", { call: { ...CHARGE, tool: "stripe.refund" } }, "tool_not_allowlisted", /stripe\.refund/],
    [
      "a host-bound override",
      { call: { ...SEARCH, arguments: { ...SEARCH.arguments, index_name: "other-index" } } },
      "host_bound_override",
      /index_name/,
    ],
    ["a missing host value", { policy: { ...POLICY, host_context: { tenant_id: "acme" } }, call: SEARCH }, "ambiguous_policy", /index_name/],
  ])("refuses %s", (_what, changes, code, problem) => {
    const result = issueReceipt({ ...base, ...changes }, keyring);
    expect(result).toMatchObject({ issued: false, code });
    expect(result.issued ? "" : result.problem).toMatch(problem);
  });
});

describe("evaluateToolApproval", () => {
  it("says an allowlisted call still needs a receipt, with the hash the receipt must bind", () => {
    expect(evaluateToolApproval(CHARGE, POLICY)).toEqual({
      status: "RECEIPT_REQUIRED",
      deny_code: "allowlist_is_not_authorization",
      args_hash: contentHash(CHARGE.arguments),
      policy_version: "7",
      risk: "high",
    });
  });

  it("denies with the inspection code", () => {
    expect(evaluateToolApproval({ ...CHARGE, resource: "*" }, POLICY)).toMatchObject({ status: "DENIED", deny_code: "ambiguous_call", policy_version: "7" });
    expect(evaluateToolApproval(CHARGE, { ...POLICY, version: "" })).toMatchObject({ status: "DENIED", deny_code: "ambiguous_policy", policy_version: null });
    expect(evaluateToolApproval({ ...SEARCH, arguments: { index_name: "x" } }, POLICY)).toMatchObject({ status: "DENIED", deny_code: "host_bound_override" });
  });
});

describe("codes", () => {
  it("maps every denial to one of the finance short codes", () => {
    const denials = AUTHORIZATION_CODES.map((c) => c.code).filter((c): c is DenyCode => c !== "AUTHORIZED");
    const reasons = new Set(denials.map(financeReason));
    for (const reason of reasons) expect(FINANCE_REASONS).toContain(reason);
    // policy_deny is also the spend gate's BLOCKED; every other short code has a denial behind it.
    expect([...reasons].sort()).toEqual([...FINANCE_REASONS].sort());
  });

  it("maps the CHP table's cases", () => {
    expect(financeReason("expired_receipt")).toBe("expired");
    expect(financeReason("replayed_receipt")).toBe("replay");
    expect(financeReason("changed_arguments")).toBe("args_changed");
    expect(financeReason("binding_mismatch")).toBe("args_changed");
    expect(financeReason("allowlist_is_not_authorization")).toBe("missing_receipt");
    expect(financeReason("bad_signature")).toBe("missing_receipt");
    expect(financeReason("resource_not_allowlisted")).toBe("ambiguous_policy");
    expect(financeReason("tool_not_allowlisted")).toBe("ambiguous_policy");
    expect(financeReason("human_denied")).toBe("policy_deny");
  });

  it("gives every code a one-line meaning", () => {
    for (const { meaning } of [...AUTHORIZATION_CODES, ...ISSUE_REFUSAL_CODES]) {
      expect(meaning.length).toBeGreaterThan(10);
      expect(meaning).not.toContain("\n");
    }
  });
});
