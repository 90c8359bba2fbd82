import { describe, expect, it } from "vitest";
import type { LedgerEntry } from "../log/entry.js";
import { notifies, webhookEventOf } from "./events.js";

const TS = "2026-03-01T12:00:00.000Z";
const D1 = `sha256:${"1".repeat(64)}`;
const D2 = `sha256:${"2".repeat(64)}`;

function entry(seq: number, event: Record<string, unknown>, principal = "chaos-core", tenant = "default"): LedgerEntry {
  return { seq, ts: TS, tenant, session: "upstreams", principal, event, content_hash: "h", prev_sig: "p", sig: "s" };
}

describe("webhookEventOf: an upstream (upstream.drift)", () => {
  it("a quarantine: the upstream, tool, verdict, sections and both digests", () => {
    const ev = { type: "upstream.drift", upstream: "changing", tool: "echo", state: "quarantined", verdict: "BREAKING", sections: ["surface"], pinned_digest: D1, live_digest: D2 };
    expect(notifies(ev)).toBe(true);
    expect(webhookEventOf(entry(7, ev))).toEqual({
      type: "upstream.drift",
      timestamp: TS,
      data: { tenant: "default", ledger_seq: 7, upstream: "changing", state: "quarantined", tool: "echo", verdict: "BREAKING", sections: ["surface"], pinned_digest: D1, live_digest: D2 },
    });
  });

  it("a release says why; a cosmetic change is served", () => {
    expect(webhookEventOf(entry(8, { type: "upstream.drift", upstream: "changing", tool: "echo", state: "released", reason: "re-pinned", sections: [], pinned_digest: D2 }))?.data).toEqual({
      tenant: "default",
      ledger_seq: 8,
      upstream: "changing",
      state: "released",
      tool: "echo",
      reason: "re-pinned",
      sections: [],
      pinned_digest: D2,
    });
    expect(webhookEventOf(entry(9, { type: "upstream.drift", upstream: "changing", tool: "echo", state: "served", verdict: "COSMETIC", sections: ["surface"] }))?.data).toMatchObject({ state: "served", verdict: "COSMETIC" });
  });

  it("an operator's approval and lock: who, and each tool's new digest", () => {
    const approved = { type: "upstream.approved", upstream: "changing", tool: "echo", verdict: "BREAKING", by: "alice", tools: [{ tool: "echo", change: "changed", digest: D2 }] };
    expect(webhookEventOf(entry(10, approved, "operator"))).toEqual({
      type: "upstream.drift",
      timestamp: TS,
      data: { tenant: "default", ledger_seq: 10, upstream: "changing", state: "approved", tool: "echo", verdict: "BREAKING", by: "alice", tools: [{ tool: "echo", change: "changed", digest: D2 }] },
    });
    // Recorded as an overlay where the lock is read-only: said so; `true` only, nothing else passes.
    expect(webhookEventOf(entry(12, { ...approved, overlay: true }, "operator"))?.data).toMatchObject({ state: "approved", overlay: true });
    expect(webhookEventOf(entry(13, { ...approved, overlay: "yes" }, "operator"))?.data).not.toHaveProperty("overlay");
    const pinned = { type: "upstream.pinned", upstream: "files", by: "alice", tools: [{ tool: "read_file", change: "added", digest: D1 }, { tool: "gone", change: "removed" }] };
    expect(webhookEventOf(entry(14, { ...pinned, overlay: true }, "operator"))?.data).not.toHaveProperty("overlay");
    expect(webhookEventOf(entry(11, pinned, "operator"))?.data).toEqual({
      tenant: "default",
      ledger_seq: 11,
      upstream: "files",
      state: "pinned",
      by: "alice",
      tools: [{ tool: "read_file", change: "added", digest: D1 }, { tool: "gone", change: "removed" }],
    });
  });

  it("a tenant's own registry upstream: its drift and its approval name that tenant, from the entry's ledger", () => {
    const drift = { type: "upstream.drift", upstream: "wiki", tool: "search", state: "quarantined", verdict: "RISKY", sections: ["behavior"], pinned_digest: D1, live_digest: D2 };
    expect(webhookEventOf(entry(3, drift, "chaos-core", "acme"))?.data).toEqual({
      tenant: "acme",
      ledger_seq: 3,
      upstream: "wiki",
      state: "quarantined",
      tool: "search",
      verdict: "RISKY",
      sections: ["behavior"],
      pinned_digest: D1,
      live_digest: D2,
    });
    const approved = { type: "upstream.approved", upstream: "wiki", tool: "search", verdict: "RISKY", by: "alice", integrityDigest: D1, tools: [{ tool: "search", change: "changed", digest: D2 }] };
    expect(webhookEventOf(entry(4, approved, "operator", "acme"))?.data).toEqual({
      tenant: "acme",
      ledger_seq: 4,
      upstream: "wiki",
      state: "approved",
      tool: "search",
      verdict: "RISKY",
      by: "alice",
      tools: [{ tool: "search", change: "changed", digest: D2 }],
    });
  });

  it("picks fields by name: nothing else an entry holds reaches the body, and a malformed value is left out", () => {
    const ev = {
      type: "upstream.drift",
      upstream: "github",
      tool: "create_issue",
      state: "quarantined",
      verdict: "WHATEVER",
      sections: ["surface"],
      pinned_digest: "not a digest",
      headers: { Authorization: "Bearer ghp_secret" },
      env: { TOKEN: "s3cr3t" },
    };
    const body = JSON.stringify(webhookEventOf(entry(12, ev)));
    expect(body).not.toMatch(/ghp_secret|s3cr3t|Authorization|WHATEVER|not a digest/);
    expect(JSON.parse(body).data).toEqual({ tenant: "default", ledger_seq: 12, upstream: "github", state: "quarantined", tool: "create_issue", sections: ["surface"] });
  });

  it("no event without an upstream, or a drift without its tool or a known state", () => {
    expect(webhookEventOf(entry(13, { type: "upstream.drift", tool: "echo", state: "quarantined" }))).toBeUndefined();
    expect(webhookEventOf(entry(14, { type: "upstream.drift", upstream: "changing", state: "quarantined" }))).toBeUndefined();
    expect(webhookEventOf(entry(15, { type: "upstream.drift", upstream: "changing", tool: "echo", state: "on fire" }))).toBeUndefined();
    expect(notifies({ type: "upstream.listed", upstream: "changing" })).toBe(false);
  });
});
