import { describe, expect, it } from "vitest";
import { ContextSigner } from "./context.js";
import type { ChaosError } from "./errors.js";

const signer = new ContextSigner("a".repeat(32));

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

  it("has no usable short key", () => {
    expect(() => new ContextSigner("short")).toThrow(/at least 32/);
  });
});
