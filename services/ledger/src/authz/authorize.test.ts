import { describe, expect, it } from "vitest";
import { createKeyring, generateSigningKey, type Keyring } from "../keys/keyring.js";
import { checkAuthorization, MAX_CLOCK_SKEW_MS, settleNonce, type AuthorizationDecision, type AuthorizeInput } from "./authorize.js";
import { AUTHORIZATION_CODES, type AuthorizationCode } from "./codes.js";
import { evaluateToolApproval, issueReceipt } from "./issue.js";
import { signReceipt, type Receipt, type ReceiptFields } from "./receipt.js";

const k0 = generateSigningKey("k0");
const k1 = generateSigningKey("k1");
/** k1 signs; k0 is retired and kept public-only, so what it signed still verifies. */
const keyring = createKeyring(k1, new Map([["k0", k0.publicKey]]));

const NOW = new Date("2025-01-31T12:00:00.000Z");
const at = (offsetMs: number) => new Date(NOW.getTime() + offsetMs);

const POLICY = {
  version: "7",
  tools: {
    "stripe.create_charge": { risk: "high", resources: ["acct_live_acme", "acct_live_beta"] },
    "stripe.create_refund": { risk: "high", resources: ["acct_live_acme"] },
    "search.azure_ai": { risk: "low", resources: ["tenant:acme"], host_bound_fields: ["tenant_id", "index_name"] },
  },
  host_context: { tenant_id: "acme", index_name: "prod-docs" },
};

const CHARGE = { tool: "stripe.create_charge", resource: "acct_live_acme", arguments: { amount: 2500, currency: "usd", customer: "cus_123" } };
const SEARCH = { tool: "search.azure_ai", resource: "tenant:acme", arguments: { query: "Q3 revenue", top_k: 5 } };

/** A receipt for `call` issued by approver bob for agent-1's request, as issueReceipt makes it. */
function issued(call: unknown = CHARGE, decision: "allow" | "deny" = "allow", ttlSeconds = 120, ring: Keyring = keyring): Receipt {
  const result = issueReceipt(
    {
      call,
      policy: POLICY,
      decision,
      actor: { principal: "bob@example.com", roles: ["approver"] },
      requester: "agent-1",
      actorKind: "approver",
      ttlSeconds,
      now: NOW,
      tenant: "acme",
    },
    ring,
  );
  if (!result.issued) throw new Error(result.problem);
  return result.receipt;
}

/** A receipt for CHARGE with some fields changed, properly signed. */
function signed(changes: Partial<ReceiptFields>, ring: Keyring = keyring): Receipt {
  const { signature: _s, kid: _k, ...fields } = issued();
  return signReceipt({ ...fields, ...changes }, ring);
}

function check(overrides: Partial<AuthorizeInput> & { receipt?: unknown }) {
  return checkAuthorization({ policy: POLICY, call: CHARGE, tenant: "acme", kind: "chaoscore.tool_approval_receipt", now: NOW, ...overrides }, keyring);
}

/** The nonce store's part, in memory: replayed if used, else record the nonce when the outcome burns it. */
function settle(used: Set<string>, overrides: Partial<AuthorizeInput> & { receipt?: unknown }): AuthorizationDecision | ReturnType<typeof check> {
  const result = check(overrides);
  if (result.stage === "final") return result;
  const decision = settleNonce(result, used.has(result.nonce));
  if (decision.burnNonce) used.add(result.nonce);
  return decision;
}

const codeOf = (overrides: Partial<AuthorizeInput> & { receipt?: unknown }, used = new Set<string>()) => settle(used, overrides).code;

describe("checkAuthorization", () => {
  it("authorizes the exact approved call once, consuming the nonce, and records what it decided", () => {
    const receipt = issued();
    const used = new Set<string>();
    const first = settle(used, { receipt });
    expect(first).toMatchObject({ authorized: true, code: "AUTHORIZED", step: "authorized", burnNonce: true });
    expect(first.record).toEqual({
      tool: CHARGE.tool,
      resource: CHARGE.resource,
      args_hash: receipt.args_hash,
      receipt_kid: "k1",
      receipt_nonce: receipt.nonce,
      receipt_actor: "bob@example.com",
      policy_version: "7",
      code: "AUTHORIZED",
      step: "authorized",
    });
    const again = settle(used, { receipt });
    expect(again).toMatchObject({ authorized: false, code: "replayed_receipt", step: "replay", burnNonce: false });
    expect(again.record.code).toBe("replayed_receipt");
  });

  it("returns needs_nonce for a verified receipt and final for anything decided before the replay step", () => {
    expect(check({ receipt: issued() })).toMatchObject({ stage: "needs_nonce", code: "AUTHORIZED", burnsNonce: true });
    expect(check({})).toMatchObject({ stage: "final", authorized: false, code: "allowlist_is_not_authorization", step: "receipt" });
  });

  describe("denies with a stable code", () => {
    it("ambiguous_policy: no policy, or one that is not concrete", () => {
      expect(codeOf({ policy: undefined, receipt: issued() })).toBe("ambiguous_policy");
      expect(codeOf({ policy: { ...POLICY, version: "" }, receipt: issued() })).toBe("ambiguous_policy");
      expect(codeOf({ policy: { ...POLICY, tools: { ...POLICY.tools, "stripe.create_charge": { risk: "high", resources: ["*"] } } }, receipt: issued() })).toBe(
        "ambiguous_policy",
      );
    });

    it("ambiguous_call: missing arguments, wildcard resource", () => {
      expect(codeOf({ call: { tool: CHARGE.tool, resource: CHARGE.resource }, receipt: issued() })).toBe("ambiguous_call");
      expect(codeOf({ call: { ...CHARGE, resource: "*" }, receipt: issued() })).toBe("ambiguous_call");
    });

    it("tool_not_allowlisted and resource_not_allowlisted, receipt or not", () => {
      expect(codeOf({ call: { ...CHARGE, tool: "stripe.delete_customer" }, receipt: issued() })).toBe("tool_not_allowlisted");
      expect(codeOf({ call: { ...CHARGE, resource: "acct_live_other" }, receipt: issued() })).toBe("resource_not_allowlisted");
    });

    it("host_bound_override: the model picks another index than the host's", () => {
      const receipt = issued(SEARCH);
      const override = { ...SEARCH, arguments: { ...SEARCH.arguments, index_name: "other-index" } };
      expect(codeOf({ call: override, receipt })).toBe("host_bound_override");
      // The host's own value is not an override: it authorizes.
      expect(codeOf({ call: { ...SEARCH, arguments: { ...SEARCH.arguments, index_name: "prod-docs" } }, receipt })).toBe("AUTHORIZED");
    });

    it("allowlist_is_not_authorization: an allowlisted call without a receipt", () => {
      expect(codeOf({})).toBe("allowlist_is_not_authorization");
      expect(codeOf({ receipt: null })).toBe("allowlist_is_not_authorization");
    });

    it("malformed_receipt: an unknown extra key, a partial receipt, not an object", () => {
      expect(codeOf({ receipt: { ...issued(), approved: true } })).toBe("malformed_receipt");
      const { nonce: _nonce, ...withoutNonce } = issued();
      expect(codeOf({ receipt: withoutNonce })).toBe("malformed_receipt");
      expect(codeOf({ receipt: "receipt" })).toBe("malformed_receipt");
      expect(codeOf({ receipt: {} })).toBe("malformed_receipt");
    });

    it("unknown_key: a kid rotated out of the keyring; a retired public-only kid still verifies", () => {
      const byK0 = issued(CHARGE, "allow", 120, createKeyring(k0));
      expect(codeOf({ receipt: byK0 })).toBe("AUTHORIZED");
      const rotatedOut = createKeyring(k1);
      expect(checkAuthorization({ policy: POLICY, call: CHARGE, tenant: "acme", kind: "chaoscore.tool_approval_receipt", now: NOW, receipt: byK0 }, rotatedOut)).toMatchObject({
        code: "unknown_key",
        step: "signature",
      });
    });

    it("bad_signature: a flipped character, a deny edited to allow, a forged signature", () => {
      const receipt = issued();
      const flipped = receipt.signature[10] === "A" ? "B" : "A";
      expect(codeOf({ receipt: { ...receipt, signature: receipt.signature.slice(0, 10) + flipped + receipt.signature.slice(11) } })).toBe("bad_signature");
      expect(codeOf({ receipt: { ...issued(CHARGE, "deny"), decision: "allow" } })).toBe("bad_signature");
      expect(codeOf({ receipt: signed({}, createKeyring({ ...generateSigningKey(), kid: "k1" })) })).toBe("bad_signature");
    });

    it("receipt_not_yet_valid: issued in the future beyond the clock skew, and burns nothing", () => {
      const future = signed({ issued_at: at(MAX_CLOCK_SKEW_MS + 1000).toISOString(), expiry: at(600_000).toISOString() });
      expect(check({ receipt: future })).toMatchObject({ code: "receipt_not_yet_valid", step: "not_before", burnsNonce: false });
      const withinSkew = signed({ issued_at: at(MAX_CLOCK_SKEW_MS - 1000).toISOString(), expiry: at(600_000).toISOString() });
      expect(codeOf({ receipt: withinSkew })).toBe("AUTHORIZED");
    });

    it("expired_receipt: at or after expiry; the nonce burns so a clock set back cannot revive it", () => {
      const receipt = issued(CHARGE, "allow", 30);
      expect(codeOf({ receipt, now: at(29_999) })).toBe("AUTHORIZED");
      const used = new Set<string>();
      expect(settle(used, { receipt, now: at(30_000) })).toMatchObject({ code: "expired_receipt", step: "expiry", burnNonce: true, authorized: false });
      expect(settle(used, { receipt, now: NOW })).toMatchObject({ code: "replayed_receipt" });
    });

    it("human_denied: a deny receipt, every time (it consumes nothing)", () => {
      const receipt = issued(CHARGE, "deny");
      const used = new Set<string>();
      expect(settle(used, { receipt })).toMatchObject({ code: "human_denied", step: "decision", burnNonce: false });
      expect(settle(used, { receipt })).toMatchObject({ code: "human_denied" });
    });

    it("policy_version_mismatch: the policy changed since the human looked", () => {
      expect(codeOf({ receipt: issued(), policy: { ...POLICY, version: "8" } })).toBe("policy_version_mismatch");
    });

    it("tenant_mismatch: another tenant's receipt", () => {
      expect(codeOf({ receipt: signed({ tenant: "globex" }) })).toBe("tenant_mismatch");
      expect(codeOf({ receipt: issued(), tenant: "globex" })).toBe("tenant_mismatch");
    });

    it("binding_mismatch: another kind, tool or resource", () => {
      expect(codeOf({ receipt: signed({ kind: "authorization" }) })).toBe("binding_mismatch");
      expect(codeOf({ receipt: issued(), kind: "authorization" })).toBe("binding_mismatch");
      expect(codeOf({ receipt: issued(), call: { ...CHARGE, tool: "stripe.create_refund" } })).toBe("binding_mismatch");
      expect(codeOf({ receipt: issued(), call: { ...CHARGE, resource: "acct_live_beta" } })).toBe("binding_mismatch");
    });

    it("changed_arguments: any argument changed; key order does not matter", () => {
      const receipt = issued();
      expect(codeOf({ receipt, call: { ...CHARGE, arguments: { ...CHARGE.arguments, amount: 2_500_000 } } })).toBe("changed_arguments");
      expect(codeOf({ receipt, call: { ...CHARGE, arguments: { ...CHARGE.arguments, memo: "x" } } })).toBe("changed_arguments");
      expect(codeOf({ receipt, call: { ...CHARGE, arguments: { customer: "cus_123", amount: 2500, currency: "usd" } } })).toBe("AUTHORIZED");
      // Host-bound calls: changing a model argument after approval is changed_arguments too.
      expect(codeOf({ receipt: issued(SEARCH), call: { ...SEARCH, arguments: { ...SEARCH.arguments, query: "Q4 revenue" } } })).toBe("changed_arguments");
      // A changed host value (operator config) changes the bound hash as well.
      expect(codeOf({ receipt: issued(SEARCH), call: SEARCH, policy: { ...POLICY, host_context: { tenant_id: "acme", index_name: "staging" } } })).toBe(
        "changed_arguments",
      );
    });

    it("risk_mismatch: the receipt carries another risk than the policy's", () => {
      expect(codeOf({ receipt: signed({ risk: "low" }) })).toBe("risk_mismatch");
    });
  });

  describe("order: when two things are wrong, the earlier check decides", () => {
    const wrongArgs = { ...CHARGE, arguments: { ...CHARGE.arguments, amount: 1 } };
    const cases: [string, () => Partial<AuthorizeInput> & { receipt?: unknown }, AuthorizationCode][] = [
      ["ambiguous policy over a missing receipt", () => ({ policy: { ...POLICY, version: "any" } }), "ambiguous_policy"],
      ["ambiguous call over an unlisted tool", () => ({ call: { tool: "nope", resource: "*", arguments: {} } }), "ambiguous_call"],
      ["unlisted tool over an unlisted resource", () => ({ call: { ...CHARGE, tool: "nope", resource: "nope" } }), "tool_not_allowlisted"],
      [
        "host-bound override over a valid receipt",
        () => ({ call: { ...SEARCH, arguments: { ...SEARCH.arguments, tenant_id: "globex" } }, receipt: issued(SEARCH) }),
        "host_bound_override",
      ],
      ["inspection over a malformed receipt", () => ({ call: { ...CHARGE, tool: "nope" }, receipt: { junk: true } }), "tool_not_allowlisted"],
      ["malformed receipt over a bad signature", () => ({ receipt: { ...issued(), actor: "*" } }), "malformed_receipt"],
      ["unknown key over expiry", () => ({ receipt: { ...issued(), kid: "k9" }, now: at(3_600_000) }), "unknown_key"],
      ["bad signature over expiry", () => ({ receipt: { ...issued(), tenant: "globex" }, now: at(3_600_000) }), "bad_signature"],
      [
        "not yet valid over a human deny",
        () => ({ receipt: signed({ decision: "deny", issued_at: at(120_000).toISOString(), expiry: at(240_000).toISOString() }) }),
        "receipt_not_yet_valid",
      ],
      ["expiry over a human deny", () => ({ receipt: issued(CHARGE, "deny"), now: at(3_600_000) }), "expired_receipt"],
      ["human deny over a policy version mismatch", () => ({ receipt: issued(CHARGE, "deny"), policy: { ...POLICY, version: "8" } }), "human_denied"],
      ["policy version over a tenant mismatch", () => ({ receipt: issued(), policy: { ...POLICY, version: "8" }, tenant: "globex" }), "policy_version_mismatch"],
      ["tenant over a binding mismatch", () => ({ receipt: issued(), tenant: "globex", kind: "authorization" }), "tenant_mismatch"],
      ["binding over changed arguments", () => ({ receipt: issued(), call: { ...wrongArgs, resource: "acct_live_beta" } }), "binding_mismatch"],
      ["changed arguments over a risk mismatch", () => ({ receipt: signed({ risk: "low" }), call: wrongArgs }), "changed_arguments"],
    ];
    it.each(cases)("%s", (_what, overrides, code) => {
      expect(codeOf(overrides())).toBe(code);
    });

    it("replay over everything after it (an expired, used receipt is replayed)", () => {
      const receipt = issued();
      const used = new Set([receipt.nonce]);
      expect(settle(used, { receipt, now: at(3_600_000) }).code).toBe("replayed_receipt");
      expect(settle(used, { receipt, tenant: "globex" }).code).toBe("replayed_receipt");
    });
  });

  it("records no unverified nonce or actor, and the kid once the schema passed", () => {
    const receipt = issued();
    expect(check({ receipt: { ...receipt, extra: 1 } }).record).toMatchObject({ receipt_kid: null, receipt_nonce: null, receipt_actor: null });
    expect(check({ receipt: { ...receipt, actor: "mallory" } }).record).toMatchObject({ code: "bad_signature", receipt_kid: "k1", receipt_nonce: null, receipt_actor: null });
    expect(check({ receipt, call: { tool: "x".repeat(1000), resource: "r", arguments: {} } }).record.tool).toHaveLength(257);
  });

  it("refuses a caller tenant that is not a tenant id, or an invalid clock (wiring errors, not denials)", () => {
    expect(() => check({ tenant: "" })).toThrow(/tenant/);
    // An invalid date would compare false against expiry and pass; it must not.
    expect(() => check({ receipt: issued(), now: new Date(Number.NaN) })).toThrow(/now: not a valid date/);
  });

  it("the codes list covers every code the chain returns, in check order", () => {
    expect(AUTHORIZATION_CODES.map((c) => c.code)).toEqual([
      "ambiguous_policy",
      "ambiguous_call",
      "tool_not_allowlisted",
      "resource_not_allowlisted",
      "host_bound_override",
      "allowlist_is_not_authorization",
      "malformed_receipt",
      "unknown_key",
      "bad_signature",
      "replayed_receipt",
      "receipt_not_yet_valid",
      "expired_receipt",
      "human_denied",
      "policy_version_mismatch",
      "tenant_mismatch",
      "binding_mismatch",
      "changed_arguments",
      "risk_mismatch",
      "AUTHORIZED",
    ]);
  });

  it("agrees with evaluateToolApproval's args hash", () => {
    const evaluation = evaluateToolApproval(SEARCH, POLICY);
    expect(evaluation.status === "RECEIPT_REQUIRED" && evaluation.args_hash).toBe(issued(SEARCH).args_hash);
  });
});
