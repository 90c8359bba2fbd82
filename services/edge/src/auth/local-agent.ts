import { createHash, timingSafeEqual } from "node:crypto";
import { isLoopbackHost } from "@chaos-core/kit";

/**
 * The local agent's credential (docs/protocol.md §16): a random token the standalone server
 * publishes in its data directory (`agent.json`, mode 0600) for `chaos-core stdio` processes that
 * relay their host's connection through it. It authenticates as the local user — tenant
 * `default`, principal `local`, no roles — exactly what stdio itself serves as, and nothing more:
 * it is no API key, so no approver path (chaoscore_approve, the console's sign-in) and no operator
 * path (the admin endpoint's own token) takes it.
 */
export interface LocalAgentCredential {
  /** The bearer token; at least 32 characters. */
  readonly token: string;
  /**
   * Accept this credential alone: no request without it, no other key (the listener a stdio
   * owner opens only for its relays).
   */
  readonly only?: boolean;
}

/** Whether a presented bearer is the local agent's, from a loopback peer: a relay runs on this machine. */
export function localAgentMatcher(credential: LocalAgentCredential): (presented: string, remoteAddress: string | undefined) => boolean {
  if (credential.token.length < 32) throw new Error("the local agent's token must be at least 32 characters");
  const expected = createHash("sha256").update(credential.token, "utf8").digest();
  return (presented, remoteAddress) => {
    if (remoteAddress === undefined || !isLoopbackHost(remoteAddress.replace(/^::ffff:/, ""))) return false;
    return timingSafeEqual(createHash("sha256").update(presented, "utf8").digest(), expected);
  };
}
