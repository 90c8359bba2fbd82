import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { REFERENCE_SPEND_POLICIES } from "../domain/spend-policies.js";
import { loadOperatorPolicies, parseOperatorPolicies } from "./operator-policies.js";

const EXAMPLE = new URL("../../../../deploy/examples/ledger-policy.json", import.meta.url);

describe("operator policies", () => {
  it("loads the documented example: defaults for every tenant, a tool policy for acme", async () => {
    const policies = await loadOperatorPolicies(EXAMPLE.pathname);
    expect(Object.keys((await policies.forTenant("other")).spendPolicies)).toEqual(["equity", "wire", "rebalance"]);
    expect((await policies.forTenant("other")).toolPolicy).toBeUndefined();
    expect((await policies.forTenant("acme")).toolPolicy?.version).toBe("acme-tools-3");
    expect((await policies.forTenant("acme")).spendPolicies.wire?.hitl_threshold).toBe(0);
    // A wire without the agent's confidence is refused before the gate; the other policies let the gate skip min-confidence.
    expect((await policies.forTenant("acme")).spendPolicies.wire?.require_confidence).toBe(true);
    expect((await policies.forTenant("acme")).spendPolicies.equity?.require_confidence).toBeUndefined();
  });

  it("uses the reference spend policies without a file", async () => {
    const policies = await loadOperatorPolicies(undefined);
    expect((await policies.forTenant("any")).spendPolicies).toEqual(REFERENCE_SPEND_POLICIES);
    expect(policies.source).toMatch(/reference/);
  });

  it("refuses a malformed document at start, naming the field", async () => {
    const example = JSON.parse(await readFile(EXAMPLE, "utf8")) as { tenants: { acme: { tool_approval: { tools: Record<string, { resources: string[] }> } } } };
    example.tenants.acme.tool_approval.tools["stripe.create_charge"]!.resources = ["*"];
    expect(() => parseOperatorPolicies(example, "policy.json")).toThrow(/policy\.json: tenants\.acme\.tool_approval: .*resources/);
    expect(() => parseOperatorPolicies({ tenant: {} }, "p.json")).toThrow(/p\.json: .*tenant/);
    expect(() => parseOperatorPolicies({ defaults: { spend_policies: { equity: { version: "" } } } }, "p.json")).toThrow(/spend_policies\.equity/);
    const wire = { ...REFERENCE_SPEND_POLICIES.wire, require_confidence: "yes" };
    expect(() => parseOperatorPolicies({ defaults: { spend_policies: { wire } } }, "p.json")).toThrow(/p\.json: defaults\.spend_policies\.wire\.require_confidence: .*boolean/);
  });
});
