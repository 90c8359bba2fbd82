import { describe, expect, it } from "vitest";
import { parseUpstreamsFile } from "@chaos-core/kit";
import { upstreamRisk } from "./risk.js";

const decl = (extra: Record<string, unknown> = {}) => parseUpstreamsFile(JSON.stringify({ upstreams: [{ name: "files", command: "x", ...extra }] }), "f")[0]!;

describe("an upstream tool's risk", () => {
  it("follows its pinned annotations with the MCP spec's defaults", () => {
    expect(upstreamRisk(decl(), "read", { readOnly: true, destructive: false, openWorld: false })).toBe("low");
    expect(upstreamRisk(decl(), "fetch", { readOnly: true, destructive: false, openWorld: true })).toBe("medium");
    expect(upstreamRisk(decl(), "mkdir", { readOnly: false, destructive: false, openWorld: false })).toBe("medium");
    expect(upstreamRisk(decl(), "write", { readOnly: false, destructive: true, openWorld: false })).toBe("high");
  });

  it("takes the operator's risk over any annotation, and none at all from an upstream it does not trust", () => {
    const readOnly = { readOnly: true, destructive: false, openWorld: false };
    expect(upstreamRisk(decl({ risk: { tools: { "get-env": "critical" } } }), "get-env", readOnly)).toBe("critical");
    expect(upstreamRisk(decl({ risk: { default: "medium" } }), "other", readOnly)).toBe("medium");
    expect(upstreamRisk(decl({ trustAnnotations: false }), "get-env", readOnly)).toBe("high");
  });
});
