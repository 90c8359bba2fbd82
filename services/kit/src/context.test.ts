import { createHmac } from "node:crypto";
import { describe, expect, it } from "vitest";
import { askerOfLabel, contextLabel, ContextSigner, sameAsker, type CallContext } from "./context.js";
import type { ChaosError } from "./errors.js";

const KEY = "a".repeat(32);
const signer = new ContextSigner(KEY);

function code(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    return (e as ChaosError).code;
  }
  return undefined;
}

describe("ContextSigner", () => {
  it("round-trips a context", () => {
    const { context, signature } = signer.sign({ tenant: "acme", principal: "p", sessionId: "s" });
    expect(signer.verify(context, signature)).toEqual({ tenant: "acme", principal: "p", sessionId: "s" });
  });

  it("refuses a tampered context", () => {
    const { signature } = signer.sign({ tenant: "acme", principal: "p" });
    const forged = signer.sign({ tenant: "other", principal: "p" }).context;
    expect(code(() => signer.verify(forged, signature))).toBe("unauthenticated");
  });

  it("refuses an expired context", () => {
    const { context, signature } = signer.sign({ tenant: "acme", principal: "p" }, Date.now() - 10 * 60_000);
    expect(code(() => signer.verify(context, signature))).toBe("unauthenticated");
  });

  it("refuses a missing signature", () => {
    const { context } = signer.sign({ tenant: "acme", principal: "p" });
    expect(code(() => signer.verify(context, undefined))).toBe("unauthenticated");
  });

  it("has no usable short key, signing or accepted", () => {
    expect(() => new ContextSigner("short")).toThrow(/at least 32/);
    expect(() => new ContextSigner(KEY, ["short"])).toThrow("the call-context key accepted beside it must be at least 32 characters");
  });

  it("accepts a context signed with an accepted key, and signs only with its own", () => {
    const NEXT = "n".repeat(32);
    const rotating = new ContextSigner(KEY, [NEXT, undefined]);
    const byNext = new ContextSigner(NEXT).sign({ tenant: "acme", principal: "p" });
    expect(rotating.verify(byNext.context, byNext.signature)).toEqual({ tenant: "acme", principal: "p" });
    const own = rotating.sign({ tenant: "acme", principal: "p" });
    expect(signer.verify(own.context, own.signature)).toEqual({ tenant: "acme", principal: "p" });
    expect(code(() => new ContextSigner(NEXT).verify(own.context, own.signature))).toBe("unauthenticated");
    const third = new ContextSigner("t".repeat(32)).sign({ tenant: "acme", principal: "p" });
    expect(code(() => rotating.verify(third.context, third.signature))).toBe("unauthenticated");
  });

  const REF = "AAECAwQFBgcICQoLDA0ODw";
  const wireOf = (context: string) => JSON.parse(Buffer.from(context, "base64url").toString("utf8")) as Record<string, unknown>;
  const reencode = (w: Record<string, unknown>) => Buffer.from(JSON.stringify(w), "utf8").toString("base64url");

  it("round-trips roles (signed sorted as ro) and the tenant generation (g); none of either stays absent", () => {
    const { context, signature } = signer.sign({ tenant: "acme", principal: "p", sessionId: "s", roles: ["support", "approver"], tenantGeneration: 7 });
    expect(wireOf(context)).toMatchObject({ ro: ["approver", "support"], g: 7 });
    expect(signer.verify(context, signature)).toEqual({ tenant: "acme", principal: "p", sessionId: "s", roles: ["approver", "support"], tenantGeneration: 7 });
    const none = signer.sign({ tenant: "acme", principal: "p", roles: [] });
    expect(wireOf(none.context)).not.toHaveProperty("ro");
    expect(wireOf(none.context)).not.toHaveProperty("g");
    expect(signer.verify(none.context, none.signature)).toEqual({ tenant: "acme", principal: "p" });
    expect(signer.verify(...(Object.values(signer.sign({ tenant: "acme", principal: "p", tenantGeneration: 0 })) as [string, string]))).toEqual({
      tenant: "acme",
      principal: "p",
      tenantGeneration: 0,
    });
  });

  it("refuses a context whose roles or generation were added, changed or dropped after signing", () => {
    const signed = signer.sign({ tenant: "acme", principal: "p", roles: ["support"], tenantGeneration: 3 });
    const wire = wireOf(signed.context);
    for (const forged of [
      { ...wire, ro: ["approver", "support"] },
      { ...wire, ro: undefined },
      { ...wire, g: 4 },
      { ...wire, g: undefined },
    ]) {
      expect(code(() => signer.verify(reencode(forged), signed.signature))).toBe("unauthenticated");
    }
    const plain = signer.sign({ tenant: "acme", principal: "p" });
    expect(code(() => signer.verify(reencode({ ...wireOf(plain.context), ro: ["approver"] }), plain.signature))).toBe("unauthenticated");
  });

  it("refuses ill-formed roles or generation: naming the field when signing, unauthenticated when verifying even under a good signature", () => {
    expect(() => signer.sign({ tenant: "acme", principal: "p", roles: ["Support"] })).toThrow(/^roles\[0\]: "Support" is not a role name/);
    expect(() => signer.sign({ tenant: "acme", principal: "p", roles: ["a", "a"] })).toThrow(/roles\[1\]: "a" is listed twice/);
    expect(() => signer.sign({ tenant: "acme", principal: "p", roles: Array.from({ length: 33 }, (_, i) => `r${i}`) })).toThrow(/roles: holds 33 roles; at most 32/);
    expect(() => signer.sign({ tenant: "acme", principal: "p", tenantGeneration: -1 })).toThrow(/tenantGeneration/);
    // Well signed, yet not what the edge signs: refused all the same.
    const base = wireOf(signer.sign({ tenant: "acme", principal: "p" }).context);
    for (const bad of [{ ro: [] }, { ro: ["support", "approver"] }, { ro: ["x x"] }, { ro: "approver" }, { ro: ["a", "a"] }, { g: 1.5 }, { g: "7" }, { g: -2 }]) {
      const context = reencode({ ...base, ...bad });
      const signature = createHmac("sha256", KEY).update(context).digest("hex");
      expect(code(() => signer.verify(context, signature))).toBe("unauthenticated");
    }
  });

  it("round-trips a request ref, signed as r", () => {
    const { context, signature } = signer.sign({ tenant: "acme", principal: "p", requestRef: REF });
    expect(JSON.parse(Buffer.from(context, "base64url").toString("utf8"))).toMatchObject({ t: "acme", p: "p", r: REF });
    expect(signer.verify(context, signature)).toEqual({ tenant: "acme", principal: "p", requestRef: REF });
  });

  it("refuses a context whose request ref was changed or added after signing", () => {
    const { context, signature } = signer.sign({ tenant: "acme", principal: "p", requestRef: REF });
    const wire = JSON.parse(Buffer.from(context, "base64url").toString("utf8")) as Record<string, unknown>;
    const reencode = (w: Record<string, unknown>) => Buffer.from(JSON.stringify(w), "utf8").toString("base64url");
    expect(code(() => signer.verify(reencode({ ...wire, r: "BBECAwQFBgcICQoLDA0ODw" }), signature))).toBe("unauthenticated");
    const plain = signer.sign({ tenant: "acme", principal: "p" });
    const withRef = reencode({ ...(JSON.parse(Buffer.from(plain.context, "base64url").toString("utf8")) as object), r: REF });
    expect(code(() => signer.verify(withRef, plain.signature))).toBe("unauthenticated");
  });

  it("refuses a malformed request ref, or one beside a session, before signing", () => {
    for (const requestRef of ["short", "has space in it ok?", "x".repeat(129), "request:AAECAwQFBgcICQoLDA0ODw"]) {
      expect(() => signer.sign({ tenant: "acme", principal: "p", requestRef })).toThrow(/requestRef must be 16 to 128 base64url/);
    }
    expect(() => signer.sign({ tenant: "acme", principal: "p", sessionId: "s", requestRef: REF })).toThrow(/never both/);
  });

  it("refuses a signed context holding a malformed request ref (a signer of another version)", () => {
    const bad = (r: unknown, s?: string) => {
      const context = Buffer.from(JSON.stringify({ t: "acme", p: "p", r, ...(s ? { s } : {}), iat: Date.now() }), "utf8").toString("base64url");
      const signature = createHmac("sha256", Buffer.from(KEY, "utf8")).update(context).digest("hex");
      return code(() => signer.verify(context, signature));
    };
    expect(bad(42)).toBe("unauthenticated");
    expect(bad("no")).toBe("unauthenticated");
    expect(bad(REF, "s")).toBe("unauthenticated");
    expect(bad(REF)).toBeUndefined();
  });
});

describe("contextLabel", () => {
  it("is the session, request:<ref>, or empty", () => {
    expect(contextLabel({ sessionId: "s-1" })).toBe("s-1");
    expect(contextLabel({ requestRef: "AAECAwQFBgcICQoLDA0ODw" })).toBe("request:AAECAwQFBgcICQoLDA0ODw");
    expect(contextLabel({})).toBe("");
  });

  it("reads back as the asker it was recorded for", () => {
    expect(askerOfLabel("acme", "p", "s-1")).toEqual({ tenant: "acme", principal: "p", sessionId: "s-1" });
    expect(askerOfLabel("acme", "p", "request:AAECAwQFBgcICQoLDA0ODw")).toEqual({ tenant: "acme", principal: "p" });
    expect(askerOfLabel("acme", "p", "")).toEqual({ tenant: "acme", principal: "p" });
  });
});

describe("sameAsker", () => {
  const REF = "AAECAwQFBgcICQoLDA0ODw";
  const verdict = (asked: Parameters<typeof sameAsker>[0], by: CallContext) => {
    const v = sameAsker(asked, by);
    return v.same ? "same" : v.code;
  };

  it("holds a request made in a session to that session", () => {
    const asked = { tenant: "acme", principal: "p", sessionId: "s-1" };
    expect(verdict(asked, { tenant: "acme", principal: "p", sessionId: "s-1" })).toBe("same");
    expect(verdict(asked, { tenant: "acme", principal: "p", sessionId: "s-2" })).toBe("wrong_session");
    // The same principal without the session (a request of the other revision) is not that session.
    expect(verdict(asked, { tenant: "acme", principal: "p", requestRef: REF })).toBe("wrong_session");
    expect(verdict(asked, { tenant: "acme", principal: "p" })).toBe("wrong_session");
    expect(verdict(asked, { tenant: "globex", principal: "p", sessionId: "s-1" })).toBe("wrong_session");
  });

  it("holds a request made without a session to its principal's own requests", () => {
    const asked = { tenant: "acme", principal: "p" };
    expect(verdict(asked, { tenant: "acme", principal: "p", requestRef: REF })).toBe("same");
    expect(verdict(asked, { tenant: "acme", principal: "p", requestRef: "BBECAwQFBgcICQoLDA0ODw" })).toBe("same");
    expect(verdict(asked, { tenant: "acme", principal: "q", requestRef: REF })).toBe("not_requester");
    expect(verdict(asked, { tenant: "globex", principal: "p", requestRef: REF })).toBe("not_requester");
    // Neither a call without a request ref (the operator endpoint) nor a session answers for it.
    expect(verdict(asked, { tenant: "acme", principal: "p" })).toBe("not_requester");
    expect(verdict(asked, { tenant: "acme", principal: "p", sessionId: "s-1" })).toBe("not_requester");
    expect(verdict({ ...asked, sessionId: "" }, { tenant: "acme", principal: "p", sessionId: "" })).toBe("not_requester");
  });

  it("says why in a message that starts from the rule", () => {
    const v = sameAsker({ tenant: "acme", principal: "p" }, { tenant: "acme", principal: "q", requestRef: REF });
    expect(v).toMatchObject({ same: false, code: "not_requester" });
    expect(!v.same && v.problem).toContain("p's own request");
  });
});
