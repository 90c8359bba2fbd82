import type { JsonObject } from "@bufbuild/protobuf";
import type { CallContext, Logger, ServiceClient } from "@chaos-core/kit";
import type { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import type { UpstreamDrift, UpstreamDriftEvent } from "./drift.js";

// What a serving process sees of the upstreams it serves, in the audit trail (docs/federation.md
// §4): `upstream.drift` entries carry names, verdicts, sections and digests — never a declaration,
// whose headers and environment may resolve to secrets.

/** The operator's upstreams serve every tenant, so their entries go where the operator's own do: tenant `default`. */
export const UPSTREAMS_LEDGER_TENANT = "default";
/** The principal of what a serving process records on its own (a drift it saw), never a person's. */
export const UPSTREAMS_OBSERVER = "chaos-core";

type LedgerClient = ServiceClient<typeof LedgerService>;

/** The `upstream.drift` entry of a change a serving process saw. */
export function driftEntry(e: UpstreamDriftEvent): JsonObject {
  return {
    type: "upstream.drift",
    upstream: e.upstream,
    tool: e.tool,
    state: e.state,
    ...(e.reason ? { reason: e.reason } : {}),
    ...(e.verdict ? { verdict: e.verdict } : {}),
    sections: [...e.sections],
    ...(e.pinnedDigest ? { pinned_digest: e.pinnedDigest } : {}),
    ...(e.liveDigest ? { live_digest: e.liveDigest } : {}),
  };
}

/** Waits between the attempts to record one change; then it is logged at error and dropped. */
const RETRY_MS = [1_000, 5_000, 30_000];

/**
 * Records each change the drift tracker tells (once per change in this process: drift.ts) in the
 * ledger of `tenant`, in order: the operator's upstreams' in {@link UPSTREAMS_LEDGER_TENANT}'s, a
 * tenant's own registry upstreams' in that tenant's (docs/federation.md §12). The quarantine is in
 * force whether or not its entry is written — it refuses calls, it never allows one — so a ledger
 * that cannot be written is retried, then logged at error naming the change. `settled` resolves
 * once what was told so far is written or given up.
 */
export function ledgerUpstreamDrift(drift: Pick<UpstreamDrift, "onEvent">, ledger: LedgerClient, logger: Logger, tenant = UPSTREAMS_LEDGER_TENANT): { settled(): Promise<void> } {
  const ctx: CallContext = { tenant, principal: UPSTREAMS_OBSERVER };
  let chain: Promise<void> = Promise.resolve();
  drift.onEvent((e) => {
    const event = driftEntry(e);
    chain = chain.then(async () => {
      for (let attempt = 0; ; attempt++) {
        try {
          await ledger.append({ event }, { ctx });
          return;
        } catch (err) {
          const message = err instanceof Error ? err.message : String(err);
          const at = { tenant, upstream: e.upstream, tool: e.tool, state: e.state, err: message };
          if (attempt >= RETRY_MS.length) return logger.error(at, "the upstream drift could not be recorded in the audit ledger; giving up on this entry");
          logger.warn(at, "the upstream drift could not be recorded in the audit ledger yet; retrying");
          await new Promise((r) => setTimeout(r, RETRY_MS[attempt]).unref());
        }
      }
    });
  });
  return { settled: () => chain };
}
