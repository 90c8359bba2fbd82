import { describe, expect, it } from "vitest";
import { ChaosError } from "./errors.js";
import { exposureOfTool, upstreamOffer, upstreamOfferWithAnyRoles } from "./upstream-exposure.js";
import { parseUpstreamsFile } from "./upstreams.js";

const alice = { tenant: "acme", principal: "alice" };
const bob = { tenant: "acme", principal: "bob" };
const carol = { tenant: "bravo", principal: "carol" };

describe("upstream exposure", () => {
  it("offers the local tenant only when a declaration says nothing", () => {
    const grants = exposureOfTool(undefined, "echo");
    expect(upstreamOffer(grants, { tenant: "default", principal: "local" })).toBe("tools");
    expect(upstreamOffer(grants, alice)).toBeUndefined();
  });

  it("grants by tenant, principal and tool; rules add up and tools wins over planner", () => {
    const rules = [
      { tenants: ["acme"], as: "planner" as const },
      { tenants: ["acme"], principals: ["alice"], tools: ["write"] },
      { tenants: ["*"], tools: ["ping"] },
    ];
    expect(upstreamOffer(exposureOfTool(rules, "write"), alice)).toBe("tools");
    expect(upstreamOffer(exposureOfTool(rules, "write"), bob)).toBe("planner");
    expect(upstreamOffer(exposureOfTool(rules, "write"), carol)).toBeUndefined();
    expect(upstreamOffer(exposureOfTool(rules, "ping"), carol)).toBe("tools");
    expect(upstreamOffer(exposureOfTool(rules, "read"), bob)).toBe("planner");
    expect(upstreamOffer(exposureOfTool([], "read"), alice)).toBeUndefined();
  });

  it("grants by role: a rule naming roles holds only for a caller holding one of them, and its tenants and principals too", () => {
    const rules = [
      { tenants: ["acme"], roles: ["support", "oncall"], tools: ["refund"] },
      { tenants: ["acme"], principals: ["bob"], roles: ["support"], tools: ["close"] },
      { tenants: ["acme"], roles: ["support"], tools: ["lookup"], as: "planner" as const },
      { tenants: ["acme"], tools: ["lookup"] },
    ];
    expect(exposureOfTool(rules, "refund")).toEqual([{ tenants: ["acme"], roles: ["support", "oncall"] }]);
    expect(upstreamOffer(exposureOfTool(rules, "refund"), { ...alice, roles: ["support"] })).toBe("tools");
    expect(upstreamOffer(exposureOfTool(rules, "refund"), { ...alice, roles: ["approver", "oncall"] })).toBe("tools");
    // Same tenant, without the role (none, another, or one that only looks like it): nothing.
    expect(upstreamOffer(exposureOfTool(rules, "refund"), alice)).toBeUndefined();
    expect(upstreamOffer(exposureOfTool(rules, "refund"), { ...alice, roles: [] })).toBeUndefined();
    expect(upstreamOffer(exposureOfTool(rules, "refund"), { ...alice, roles: ["approver", "supports"] })).toBeUndefined();
    // The role does not carry a caller of another tenant, nor another principal past `principals`.
    expect(upstreamOffer(exposureOfTool(rules, "refund"), { ...carol, roles: ["support"] })).toBeUndefined();
    expect(upstreamOffer(exposureOfTool(rules, "close"), { ...alice, roles: ["support"] })).toBeUndefined();
    expect(upstreamOffer(exposureOfTool(rules, "close"), { ...bob, roles: ["support"] })).toBe("tools");
    expect(upstreamOffer(exposureOfTool(rules, "close"), bob)).toBeUndefined();
    // Rules still add up: the role's planner grant beside everyone's tools grant.
    expect(upstreamOffer(exposureOfTool(rules, "lookup"), alice)).toBe("tools");
    // What a session registers: the offer under every role its rules name.
    expect(upstreamOfferWithAnyRoles(exposureOfTool(rules, "refund"), alice)).toBe("tools");
    expect(upstreamOfferWithAnyRoles(exposureOfTool(rules, "refund"), carol)).toBeUndefined();
    expect(upstreamOfferWithAnyRoles(exposureOfTool(rules, "close"), alice)).toBeUndefined();
  });

  it("is refused in a declaration naming the field at its depth", () => {
    const refusal = (exposure: unknown) => {
      try {
        parseUpstreamsFile(JSON.stringify({ upstreams: [{ name: "files", command: "x", exposure }] }), "upstreams.json");
      } catch (err) {
        expect(err).toBeInstanceOf(ChaosError);
        return (err as Error).message;
      }
      throw new Error("accepted");
    };
    expect(refusal([{ tenants: [] }])).toContain('upstreams[0].exposure[0].tenants: must name at least one tenant, or "*" for every tenant');
    expect(refusal([{ tenants: ["Acme Corp"] }])).toContain("upstreams[0].exposure[0].tenants[0]: must be a tenant id");
    expect(refusal([{ tenants: ["acme"], as: "hidden" }])).toMatch(/upstreams\[0\]\.exposure\[0\]\.as: /);
    expect(refusal([{ tenants: ["acme"], tool: ["x"] }])).toMatch(/upstreams\[0\]\.exposure\[0\]\.tool: unknown field/);
    expect(refusal({ tenants: ["acme"] })).toMatch(/upstreams\[0\]\.exposure: /);
    expect(refusal([{ tenants: ["acme"], roles: [] }])).toContain("upstreams[0].exposure[0].roles: must name at least one role");
    expect(refusal([{ tenants: ["acme"], roles: ["support", "Support Team"] }])).toContain("upstreams[0].exposure[0].roles[1]: must be a role name: a role name is a lowercase letter");
  });
});
