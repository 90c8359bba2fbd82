import { serializeLock, upstreamContracts } from "@chaos-core/contracts";
import { describe, expect, it } from "vitest";
import { registryUpstreams } from "./registry.js";

const pinOf = (name: string) => serializeLock(upstreamContracts(name, [{ name: "search", inputSchema: { type: "object" } }]), name);
const wiki = { name: "wiki", url: "https://wiki.example.com/mcp", headers: { Authorization: { env: "CHAOS_CORE_UPSTREAM_SECRET_WIKI" } }, timeoutMs: 20000, trustAnnotations: true };

describe("a tenant's registry upstreams, as the serving step takes them", () => {
  it("gives the declarations and pins the operator's file gives", () => {
    const { declarations, pins } = registryUpstreams("acme", [{ declaration: wiki, pin: pinOf("wiki") }]);
    expect(declarations).toEqual([{ ...wiki, transport: "http", disabled: false }]);
    expect(Object.keys(pins.get("wiki")!.tools)).toEqual(["search"]);
  });

  it("fails the whole read on an entry that no longer parses, naming the tenant, upstream and field", () => {
    expect(() => registryUpstreams("acme", [{ declaration: { ...wiki, command: "sh" }, pin: pinOf("wiki") }])).toThrow(/^tenant "acme" registry upstream \[0\]: declaration: give url .* not both/);
    expect(() => registryUpstreams("acme", [{ declaration: wiki, pin: pinOf("jira") }])).toThrow(/upstreams\.wiki\.serverName: must be "wiki"/);
    const tampered = JSON.parse(pinOf("wiki")) as { tools: { search: { surface: { description: string } } } };
    tampered.tools.search.surface.description = "something else";
    expect(() => registryUpstreams("acme", [{ declaration: wiki, pin: JSON.stringify(tampered) }])).toThrow(/its digests do not match its contracts/);
    // Pinned by a direct AddUpstream: two tools that would be one capability are never served.
    const colliding = serializeLock(upstreamContracts("wiki", [{ name: "getPage", inputSchema: { type: "object" } }, { name: "get_page", inputSchema: { type: "object" } }]), "wiki");
    expect(() => registryUpstreams("acme", [{ declaration: wiki, pin: colliding }])).toThrow(/tools "getPage" and "get_page" both map to wiki\.get_page/);
  });
});
