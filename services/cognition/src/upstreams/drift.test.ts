import type { Tool } from "@modelcontextprotocol/client";
import { describe, expect, it } from "vitest";
import { entryDigest, upstreamContracts, type ContractSet } from "@chaos-core/contracts";
import { createLogger, parseUpstreamsFile } from "@chaos-core/kit";
import { createUpstreamDrift, type UpstreamDriftEvent } from "./drift.js";
import { definitionOf } from "./pin.js";

// A pure unit: the drift tracker fed tool lists by hand, as the pool feeds it (on connect, on
// list_changed, every 5 minutes); what it tells its listeners is what the ledger records.
const [decl] = parseUpstreamsFile(JSON.stringify({ upstreams: [{ name: "changing", command: "node", args: ["server.mjs"] }] }), "test");
const echo = (description: string, required = ["message"]): Tool => ({
  name: "echo",
  description,
  inputSchema: { type: "object", properties: { message: { type: "string" }, to: { type: "string" } }, required },
  annotations: { readOnlyHint: true, openWorldHint: false },
});
const ping: Tool = { name: "ping", description: "Answers pong.", inputSchema: { type: "object", properties: {} }, annotations: { readOnlyHint: true, openWorldHint: false } };
const pinOf = (...tools: Tool[]): Map<string, ContractSet> => new Map([["changing", upstreamContracts("changing", tools.map(definitionOf))]]);
const digestOf = (tool: Tool) => entryDigest(upstreamContracts("changing", [definitionOf(tool)]).tools[tool.name]!);

function tracker(pins = pinOf(echo("Echoes its message back"), ping)) {
  const drift = createUpstreamDrift(pins, createLogger("drift-test", "silent"));
  const events: UpstreamDriftEvent[] = [];
  let changes = 0;
  drift.onEvent((e) => events.push(e));
  drift.onChange(() => changes++);
  return { drift, events, changes: () => changes };
}

describe("upstream drift: what is told, once per change", () => {
  it("tells nothing while the upstream lists what was pinned, however often it is read", () => {
    const { drift, events, changes } = tracker();
    for (let i = 0; i < 3; i++) drift.observe(decl!, [echo("Echoes its message back"), ping]);
    expect(events).toEqual([]);
    expect(changes()).toBe(0);
    expect(drift.driftOf("changing", "echo")).toBeUndefined();
  });

  it("tells a quarantine once with its verdict, sections and digests; the periodic re-read and a reconnection do not tell it again", () => {
    const { drift, events, changes } = tracker();
    const changed = echo("Echoes its message back", ["message", "to"]);
    drift.observe(decl!, [changed, ping]);
    drift.observe(decl!, [changed, ping]);
    drift.observe(decl!, [ping, changed]);
    expect(events).toEqual([
      { upstream: "changing", tool: "echo", state: "quarantined", verdict: "BREAKING", sections: ["surface"], pinnedDigest: digestOf(echo("Echoes its message back")), liveDigest: digestOf(changed) },
    ]);
    expect(changes()).toBe(1);
    expect(drift.driftOf("changing", "echo")).toBe("upstreams/changing/echo (surface): BREAKING");
    expect(drift.driftOf("changing", "ping")).toBeUndefined();
  });

  it("tells it again when the tool drifts to something else while quarantined", () => {
    const { drift, events } = tracker();
    drift.observe(decl!, [echo("Echoes its message back", ["message", "to"]), ping]);
    drift.observe(decl!, [echo("Echoes its message back", ["to"]), ping]);
    drift.observe(decl!, [echo("Echoes its message back", ["to"]), ping]);
    expect(events.map((e) => [e.state, e.liveDigest])).toEqual([
      ["quarantined", digestOf(echo("Echoes its message back", ["message", "to"]))],
      ["quarantined", digestOf(echo("Echoes its message back", ["to"]))],
    ]);
  });

  it("records a COSMETIC change once, served; a further cosmetic change is a new one", () => {
    const { drift, events, changes } = tracker();
    drift.observe(decl!, [echo("Echoes the message it is given"), ping]);
    drift.observe(decl!, [echo("Echoes the message it is given"), ping]);
    expect(events).toEqual([expect.objectContaining({ tool: "echo", state: "served", verdict: "COSMETIC", sections: ["surface"] })]);
    expect(drift.driftOf("changing", "echo")).toBeUndefined();
    expect(changes()).toBe(0);
    drift.observe(decl!, [echo("Echoes whatever it is given"), ping]);
    expect(events).toHaveLength(2);
    expect(events[1]).toMatchObject({ state: "served", liveDigest: digestOf(echo("Echoes whatever it is given")) });
  });

  it("tells a tool the upstream no longer lists as a BREAKING change of its entry, once", () => {
    const { drift, events } = tracker();
    drift.observe(decl!, [echo("Echoes its message back")]);
    drift.observe(decl!, [echo("Echoes its message back")]);
    expect(events).toEqual([{ upstream: "changing", tool: "ping", state: "quarantined", verdict: "BREAKING", sections: ["entry"], pinnedDigest: digestOf(ping) }]);
  });

  it("tells a release once, re-pinned when an operator approved the new contract", () => {
    const { drift, events, changes } = tracker();
    const changed = echo("Echoes its message back", ["message", "to"]);
    drift.observe(decl!, [changed, ping]);
    drift.setPins(pinOf(changed, ping));
    drift.setPins(pinOf(changed, ping));
    drift.observe(decl!, [changed, ping]);
    expect(events.slice(1)).toEqual([
      { upstream: "changing", tool: "echo", state: "released", reason: "re-pinned", sections: [], pinnedDigest: digestOf(changed), liveDigest: digestOf(changed) },
    ]);
    expect(changes()).toBe(2);
    expect(drift.driftOf("changing", "echo")).toBeUndefined();
  });

  it("tells a release as reverted when the upstream goes back to its pin, and unpinned when the pin drops the tool", () => {
    const { drift, events } = tracker();
    drift.observe(decl!, [echo("Echoes its message back", ["to"])]);
    drift.observe(decl!, [echo("Echoes its message back"), ping]);
    expect(events.filter((e) => e.state === "released").map((e) => [e.tool, e.reason])).toEqual([
      ["echo", "reverted"],
      ["ping", "reverted"],
    ]);
    drift.observe(decl!, [echo("Echoes its message back")]);
    drift.setPins(pinOf(echo("Echoes its message back")));
    expect(events.at(-1)).toEqual({ upstream: "changing", tool: "ping", state: "released", reason: "unpinned", sections: [] });
  });

  it("keeps telling the other listeners when one throws", () => {
    const { drift, events } = tracker();
    drift.onEvent(() => {
      throw new Error("boom");
    });
    const seen: string[] = [];
    drift.onEvent((e) => seen.push(e.state));
    drift.observe(decl!, [echo("Echoes its message back", ["to"]), ping]);
    expect(events).toHaveLength(1);
    expect(seen).toEqual(["quarantined"]);
  });
});
