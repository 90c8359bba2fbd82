import { describe, expect, it } from "vitest";
import { ChaosError } from "./errors.js";
import { exposureOfTool, upstreamOffer } from "./upstream-exposure.js";
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
  });
});
