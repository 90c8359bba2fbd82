import { entryDigest, upstreamContracts, upstreamToolEntryText, type ContractSet } from "@chaos-core/contracts";
import { describe, expect, it } from "vitest";
import { overlayApprovals, type UpstreamApprovalEntry } from "./approval-overlay.js";

const echo = (required: string[]) => upstreamContracts("changing", [{ name: "echo", inputSchema: { type: "object", properties: { message: { type: "string" }, to: { type: "string" } }, required } }]).tools.echo!;
const ping = upstreamContracts("changing", [{ name: "ping", inputSchema: { type: "object" } }]).tools.ping!;
const v1 = echo(["message"]);
const v2 = echo(["message", "to"]);
const v3 = echo(["to"]);
const lockOf = (tools: ContractSet["tools"]) => new Map<string, ContractSet>([["changing", { tools, prompts: {}, resources: {}, capabilities: {} }]]);
const approval = (tool: string, contract: typeof v1, replaces: string): UpstreamApprovalEntry => ({
  upstream: "changing",
  tool,
  entry: upstreamToolEntryText("changing", tool, contract),
  replacesDigest: replaces,
  digest: entryDigest(contract),
  approvedBy: "alice",
});

describe("overlayApprovals", () => {
  it("serves an approval while the lock pins what it replaced; moot once the lock pins it; the lock wins over anything else", () => {
    const a = approval("echo", v2, entryDigest(v1));
    const inForce = overlayApprovals(lockOf({ echo: v1, ping }), [a]);
    expect(entryDigest(inForce.pins.get("changing")!.tools.echo!)).toBe(entryDigest(v2));
    expect(inForce.pins.get("changing")!.tools.ping).toBe(ping);
    expect(inForce.outcomes).toMatchObject([{ tool: "echo", state: "in-force", lockDigest: entryDigest(v1) }]);

    const moot = overlayApprovals(lockOf({ echo: v2, ping }), [a]);
    expect(entryDigest(moot.pins.get("changing")!.tools.echo!)).toBe(entryDigest(v2));
    expect(moot.outcomes[0]!.state).toBe("moot");

    const lockWins = overlayApprovals(lockOf({ echo: v3, ping }), [a]);
    expect(entryDigest(lockWins.pins.get("changing")!.tools.echo!)).toBe(entryDigest(v3));
    expect(lockWins.outcomes[0]!.state).toBe("overridden");
  });

  it("adds a tool the lock does not pin only when the approval replaced none", () => {
    const added = overlayApprovals(lockOf({ ping }), [approval("echo", v2, "")]);
    expect(Object.keys(added.pins.get("changing")!.tools).sort()).toEqual(["echo", "ping"]);
    // An approval that replaced a pin the lock no longer has: the lock (which unpinned it) wins.
    const unpinned = overlayApprovals(lockOf({ ping }), [approval("echo", v2, entryDigest(v1))]);
    expect(unpinned.pins.get("changing")!.tools.echo).toBeUndefined();
    expect(unpinned.outcomes[0]!.state).toBe("overridden");
  });

  it("never serves an entry whose digests do not match, nor one whose stated digest is not its own", () => {
    const tampered = approval("echo", v2, entryDigest(v1));
    const entry = JSON.parse(tampered.entry) as { behavior: { readOnly: boolean } };
    entry.behavior.readOnly = !entry.behavior.readOnly;
    const lock = lockOf({ echo: v1 });
    for (const bad of [{ ...tampered, entry: JSON.stringify(entry) }, { ...tampered, digest: entryDigest(v3) }]) {
      const merged = overlayApprovals(lock, [bad]);
      expect(merged.pins.get("changing")!.tools.echo).toBe(v1);
      expect(merged.outcomes[0]).toMatchObject({ state: "invalid", problem: expect.stringMatching(/approval of changing\/echo/) });
    }
  });
});
