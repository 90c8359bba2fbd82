import { chainHash, chpFloat } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { canonicalEvent, chainEntry, signedPart } from "./entry.js";

describe("chainEntry", () => {
  // An append hashes through kit's auditEntryChainHash (awkward values are tested there); verify
  // recomputes the link with chainHash over signedPart. The two must agree on the fields.
  it("hashes what verify's chainHash over signedPart hashes", () => {
    let prev = "";
    const events = [{ kind: "tool.executed", decision: "ALLOW", step: 1 }, { notional: chpFloat(100), nested: { "é": ['"q"'] } }];
    events.forEach((raw, i) => {
      const c = canonicalEvent(raw);
      const fields = { seq: i + 1, ts: "2026-12-06T00:00:00.000Z", tenant: "acme", session: "s-1", principal: "agent@example.com", event: c.event, content_hash: c.hash };
      const e = chainEntry(prev, fields, c.text);
      expect(e.sig).toBe(chainHash(prev, signedPart(fields)));
      expect(e).toEqual({ ...fields, prev_sig: prev, sig: e.sig });
      prev = e.sig;
    });
  });

  it("changes its sig when any signed field changes", () => {
    const c = canonicalEvent({ kind: "x" });
    const fields = { seq: 7, ts: "2026-12-06T00:00:00.000Z", tenant: "t", session: "s", principal: "p", event: c.event, content_hash: c.hash };
    const sig = chainEntry("ab", fields, c.text).sig;
    const other = canonicalEvent({ kind: "y" });
    const variants = [
      chainEntry("ac", fields, c.text),
      chainEntry("ab", { ...fields, seq: 8 }, c.text),
      chainEntry("ab", { ...fields, ts: "2026-12-06T00:00:00.001Z" }, c.text),
      chainEntry("ab", { ...fields, tenant: "u" }, c.text),
      chainEntry("ab", { ...fields, session: "x" }, c.text),
      chainEntry("ab", { ...fields, principal: "q" }, c.text),
      chainEntry("ab", { ...fields, event: other.event, content_hash: other.hash }, other.text),
    ];
    expect(new Set([sig, ...variants.map((v) => v.sig)]).size).toBe(variants.length + 1);
  });
});
