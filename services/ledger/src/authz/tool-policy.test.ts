import { contentHash } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { inspectCall } from "./inspect-call.js";
import { mergeHostBound, parseToolPolicy, stepToolPolicy, type ToolPolicy } from "./tool-policy.js";

const policyDoc = {
  version: "7",
  tools: {
    "stripe.create_charge": { risk: "high", resources: ["acct_live_acme"] },
    "search.azure_ai": { risk: "low", resources: ["tenant:acme"], host_bound_fields: ["tenant_id", "index_name"] },
  },
  host_context: { tenant_id: "acme", index_name: "prod-docs", unused: { nested: [1, 2] } },
};

function policy(doc: unknown = policyDoc): ToolPolicy {
  const parsed = parseToolPolicy(doc);
  if (!parsed.ok) throw new Error(parsed.problem);
  return parsed.policy;
}

function problemOf(doc: unknown): string {
  const parsed = parseToolPolicy(doc);
  expect(parsed.ok).toBe(false);
  return parsed.ok ? "" : parsed.problem;
}

const charge = { tool: "stripe.create_charge", resource: "acct_live_acme", arguments: { amount: 2500, currency: "usd", customer: "cus_123" } };

describe("parseToolPolicy", () => {
  it("accepts a concrete policy", () => {
    expect(policy().tools["search.azure_ai"]!.host_bound_fields).toEqual(["tenant_id", "index_name"]);
  });

  const tool = policyDoc.tools["stripe.create_charge"];
  it.each([
    ["a wildcard resource", { ...policyDoc, tools: { t: { ...tool, resources: ["*"] } } }, /tools\.t\.resources\[0\]: "\*" is a wildcard/],
    ["a partial wildcard resource", { ...policyDoc, tools: { t: { ...tool, resources: ["acct_*"] } } }, /"acct_\*" is a wildcard/],
    ["a resource named all", { ...policyDoc, tools: { t: { ...tool, resources: ["ALL"] } } }, /"ALL" names a set/],
    ["an empty resource", { ...policyDoc, tools: { t: { ...tool, resources: [""] } } }, /resources\[0\]: is empty/],
    ["no resources", { ...policyDoc, tools: { t: { ...tool, resources: [] } } }, /lists no resource/],
    ["a wildcard tool name", { ...policyDoc, tools: { "*": tool } }, /tools: field name "\*": "\*" is a wildcard/],
    ["a tool named any", { ...policyDoc, tools: { any: tool } }, /names a set/],
    ["no version", { tools: policyDoc.tools, host_context: policyDoc.host_context }, /version: /],
    ["an empty version", { ...policyDoc, version: " " }, /version: is empty/],
    ["a floating version", { ...policyDoc, version: "latest" }, /"latest" is not a concrete version/],
    ["a numeric version", { ...policyDoc, version: 7 }, /version: /],
    ["an unknown risk", { ...policyDoc, tools: { t: { ...tool, risk: "severe" } } }, /tools\.t\.risk/],
    ["an unknown key", { ...policyDoc, deny_on_ambiguity: false }, /deny_on_ambiguity: unknown field; accepted fields: version, tools, host_context/],
    [
      "a host-bound field with no host value",
      { ...policyDoc, host_context: { tenant_id: "acme" } },
      /tools\.search\.azure_ai\.host_bound_fields\[1\]: "index_name" is host-bound but host_context has no value/,
    ],
    ["a null host value", { ...policyDoc, host_context: { tenant_id: "acme", index_name: null } }, /"index_name" is host-bound but/],
    ["a wildcard host value", { ...policyDoc, host_context: { tenant_id: "*", index_name: "x" } }, /host_context\.tenant_id "\*" is a wildcard/],
    ["no host_context at all", { version: "7", tools: { s: policyDoc.tools["search.azure_ai"] } }, /"tenant_id" is host-bound/],
    ["a host-bound field listed twice", { ...policyDoc, tools: { s: { ...tool, host_bound_fields: ["tenant_id", "tenant_id"] } } }, /lists a field twice/],
    ["not an object", "policy", /expected object/],
  ])("refuses %s", (_what, doc, problem) => {
    expect(problemOf(doc)).toMatch(problem);
  });

  it("builds a cognition step's policy from the policy service's decision", () => {
    const step = policy(stepToolPolicy({ capability: "http.request", tenant: "acme", policyVersion: "12", risk: "medium" }));
    expect(step).toEqual({ version: "12", tools: { "http.request": { risk: "medium", resources: ["acme"] } } });
  });
});

describe("mergeHostBound", () => {
  const host = { tenant_id: "acme", index_name: "prod-docs", filter: { a: 1, b: [1, 2] } };

  it("adds the host values to the model's arguments", () => {
    expect(mergeHostBound({ query: "Q3 revenue", top_k: 5 }, host, ["tenant_id", "index_name"])).toEqual({
      ok: true,
      merged: { query: "Q3 revenue", top_k: 5, tenant_id: "acme", index_name: "prod-docs" },
    });
  });

  it("refuses a model value that differs from the host value", () => {
    expect(mergeHostBound({ query: "q", index_name: "other-index" }, host, ["tenant_id", "index_name"])).toMatchObject({
      ok: false,
      code: "host_bound_override",
      field: "index_name",
    });
    // A different type is a different value.
    expect(mergeHostBound({ filter: '{"a":1,"b":[1,2]}' }, host, ["filter"])).toMatchObject({ ok: false, code: "host_bound_override" });
  });

  it("does not count a model value equal to the host value (any key order) as an override", () => {
    const merged = mergeHostBound({ q: 1, index_name: "prod-docs", filter: { b: [1, 2], a: 1 } }, host, ["index_name", "filter"]);
    expect(merged).toEqual({ ok: true, merged: { q: 1, index_name: "prod-docs", filter: host.filter } });
  });

  it("refuses a declared field without a host value", () => {
    expect(mergeHostBound({ q: 1 }, host, ["region"])).toMatchObject({ ok: false, code: "ambiguous_policy", field: "region" });
    expect(mergeHostBound({ q: 1 }, undefined, ["tenant_id"])).toMatchObject({ ok: false, code: "ambiguous_policy" });
  });

  it("keeps a __proto__ argument as data", () => {
    const args = JSON.parse('{"__proto__": {"polluted": true}, "q": 1}') as Record<string, unknown>;
    const merged = mergeHostBound(args, host, ["tenant_id"]);
    expect(merged.ok && Object.hasOwn(merged.merged, "__proto__")).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe("inspectCall", () => {
  it("hashes host-bound ∪ model arguments, not the model's alone", () => {
    const result = inspectCall({ tool: "search.azure_ai", resource: "tenant:acme", arguments: { query: "Q3 revenue", top_k: 5 } }, policy());
    expect(result).toMatchObject({ ok: true, merged: { query: "Q3 revenue", top_k: 5, tenant_id: "acme", index_name: "prod-docs" } });
    expect(result.ok && result.argsHash).toBe(contentHash({ index_name: "prod-docs", query: "Q3 revenue", tenant_id: "acme", top_k: 5 }));
    expect(result.ok && result.argsHash).not.toBe(contentHash({ query: "Q3 revenue", top_k: 5 }));
  });

  it.each([
    ["missing arguments", { tool: charge.tool, resource: charge.resource }, "ambiguous_call", /arguments: missing/],
    ["null arguments", { ...charge, arguments: null }, "ambiguous_call", /arguments: must be a JSON object/],
    ["array arguments", { ...charge, arguments: [1] }, "ambiguous_call", /arguments: must be a JSON object/],
    ["non-JSON arguments", { ...charge, arguments: { amount: Number.NaN } }, "ambiguous_call", /arguments: .*NaN/],
    ["a wildcard resource", { ...charge, resource: "*" }, "ambiguous_call", /resource: "\*" is a wildcard/],
    ["an empty resource", { ...charge, resource: "" }, "ambiguous_call", /resource: is empty/],
    ["a resource named all", { ...charge, resource: "all" }, "ambiguous_call", /names a set/],
    ["a wildcard tool", { ...charge, tool: "stripe.*" }, "ambiguous_call", /tool: "stripe\.\*" is a wildcard/],
    ["a tool that is not a string", { ...charge, tool: 1 }, "ambiguous_call", /tool: must be a string/],
    ["host values supplied by the caller", { ...charge, host_bound: { tenant_id: "x" } }, "ambiguous_call", /unknown field\(s\) host_bound/],
    ["no call at all", undefined, "ambiguous_call", /must be an object/],
    ["an unlisted tool", { ...charge, tool: "stripe.refund" }, "tool_not_allowlisted", /"stripe\.refund" is not in policy 7/],
    ["a tool named like an Object property", { ...charge, tool: "constructor" }, "tool_not_allowlisted", /constructor/],
    ["an unlisted resource", { ...charge, resource: "acct_live_other" }, "resource_not_allowlisted", /"acct_live_other" is not allowed/],
    [
      "a model-chosen host value",
      { tool: "search.azure_ai", resource: "tenant:acme", arguments: { query: "q", index_name: "other-index" } },
      "host_bound_override",
      /index_name/,
    ],
  ])("denies %s", (_what, call, code, problem) => {
    const result = inspectCall(call, policy());
    expect(result).toMatchObject({ ok: false, code });
    expect(result.ok ? "" : result.problem).toMatch(problem);
  });
});
