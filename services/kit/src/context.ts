import { createHmac, timingSafeEqual } from "node:crypto";
import { ChaosError } from "./errors.js";

/**
 * Who a call is for. The edge derives it from a verified credential (never from a header,
 * an argument or a session id) and every service call carries it.
 */
export interface CallContext {
  readonly tenant: string;
  readonly principal: string;
  /** The MCP session the call belongs to, when there is one. */
  readonly sessionId?: string;
}

const TENANT_RE = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** Checks that a tenant id is safe to use as a key prefix and row label. */
export function assertTenantId(tenant: string): void {
  if (!TENANT_RE.test(tenant)) {
    throw new ChaosError(
      "invalid_argument",
      `tenant "${tenant}" is not a valid tenant id (lowercase letters, digits, - and _, at most 63)`,
    );
  }
}

export const CONTEXT_HEADER = "chaoscore-context";
export const CONTEXT_SIG_HEADER = "chaoscore-context-sig";

/** How long a signed context stays acceptable, to bound replay inside the cluster. */
const MAX_AGE_MS = 5 * 60_000;
const MIN_KEY_LENGTH = 32;

interface WireContext {
  t: string;
  p: string;
  s?: string;
  iat: number;
}

/**
 * Signs and verifies the call context with a shared HMAC key, so a service only acts for a
 * tenant the edge vouched for. There is no default key: a service without one refuses to start.
 */
export class ContextSigner {
  private readonly key: Buffer;

  constructor(key: string) {
    if (key.length < MIN_KEY_LENGTH) {
      throw new ChaosError(
        "failed_precondition",
        `the call-context key must be at least ${MIN_KEY_LENGTH} characters`,
      );
    }
    this.key = Buffer.from(key, "utf8");
  }

  sign(ctx: CallContext, now = Date.now()): { context: string; signature: string } {
    const wire: WireContext = { t: ctx.tenant, p: ctx.principal, iat: now };
    if (ctx.sessionId) wire.s = ctx.sessionId;
    const context = Buffer.from(JSON.stringify(wire), "utf8").toString("base64url");
    return { context, signature: this.mac(context) };
  }

  verify(context: string | undefined, signature: string | undefined, now = Date.now()): CallContext {
    if (!context || !signature) {
      throw new ChaosError("unauthenticated", "the call carries no signed call context");
    }
    const expected = Buffer.from(this.mac(context), "hex");
    const given = Buffer.from(signature, "hex");
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
      throw new ChaosError("unauthenticated", "the call context signature is not valid");
    }
    let wire: WireContext;
    try {
      wire = JSON.parse(Buffer.from(context, "base64url").toString("utf8")) as WireContext;
    } catch {
      throw new ChaosError("unauthenticated", "the call context is not readable");
    }
    if (typeof wire.iat !== "number" || Math.abs(now - wire.iat) > MAX_AGE_MS) {
      throw new ChaosError("unauthenticated", "the call context has expired");
    }
    assertTenantId(wire.t);
    return { tenant: wire.t, principal: wire.p, ...(wire.s ? { sessionId: wire.s } : {}) };
  }

  private mac(data: string): string {
    return createHmac("sha256", this.key).update(data).digest("hex");
  }
}
