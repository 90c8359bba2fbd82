import { create } from "@bufbuild/protobuf";
import { ATTR, ChaosError, outsideTrace, withSpan, type CallContext, type ChangeCounters, type Logger, type ServiceClient } from "@chaos-core/kit";
import { decide, decisionFromProto, policyDocumentFromProto, type PolicyDocumentJson } from "@chaos-core/policy";
import { EvaluateRequestSchema, EvaluateResponseSchema, type PolicyDocument, type PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";

type PolicyClient = ServiceClient<typeof PolicyService>;

/** How stale a snapshot may be before a decision re-reads the policy (docs/cognition.md "Policy snapshots"). */
export const DEFAULT_SNAPSHOT_BOUND_MS = 1_000;
/** Tenants whose snapshots are kept (and watched) at once; the least recently used is dropped. */
const MAX_TENANTS = 1_000;
const RETRY_MS = [100, 250, 500, 1_000, 2_000, 5_000];
/**
 * How long one WatchPolicy call runs before it is made again: every call has a deadline (kit's
 * RPC clients), and a watch's is its round. A round that ends at its deadline is reopened at once,
 * as the edge's policy feed does; only a watch that fails otherwise is "broken".
 */
export const DEFAULT_WATCH_ROUND_MS = 10 * 60_000;

interface Snapshot {
  document?: PolicyDocumentJson;
  version: number;
  /** When the watch last delivered, or a re-read last confirmed, the document in force. */
  confirmedAt: number;
  /** The tenant's policy-changes counter as read just before the last re-read (undefined: none read). */
  changes?: number | undefined;
  readonly abort: AbortController;
  retries: number;
}

export interface PolicySnapshots {
  /** The policy client, its `evaluate` answered from the tenant's snapshot. */
  readonly client: PolicyClient;
  /** The version a tenant's snapshot holds, or undefined (for tests and logs). */
  versionOf(tenant: string): number | undefined;
  close(): void;
}

/**
 * A policy snapshot beside the executor (issue 14): each tenant's document is kept in this
 * process, fed by the policy service's WatchPolicy stream, and decisions are made from it with the
 * service's own pure `decide` — no round trip, no store read per step. The bound: a decision is
 * made from a snapshot only when the watch delivered, or a re-read confirmed, the document within
 * the last `boundMs` (1 s); otherwise the decision first re-reads the policy (GetPolicy), and fails
 * — closed — when it cannot. A watch that breaks is reopened with backoff; while it is broken every
 * `boundMs` costs one re-read, never a stale decision. Every answer names the version it used.
 *
 * With `changes` (the policy service's policy-changes counters: Redis across replicas, the
 * process's own in the standalone) a decision also reads the tenant's counter — one Redis GET — and
 * re-reads the policy when it moved since the last re-read: a stored change, a tightening
 * included, is used by the next decision on every replica. A counter that cannot be read leaves
 * the bound in charge.
 */
export function createPolicySnapshots(
  policy: PolicyClient,
  options: { logger: Logger; boundMs?: number; now?: () => number; changes?: ChangeCounters; watchRoundMs?: number },
): PolicySnapshots {
  const boundMs = options.boundMs ?? DEFAULT_SNAPSHOT_BOUND_MS;
  const watchRoundMs = options.watchRoundMs ?? DEFAULT_WATCH_ROUND_MS;
  const now = options.now ?? Date.now;
  const snapshots = new Map<string, Snapshot>();
  let closed = false;

  const take = (s: Snapshot, document: PolicyDocument | undefined, version: bigint) => {
    if (!document) throw new ChaosError("internal", "the policy service answered without a document");
    s.document = policyDocumentFromProto(document, "document");
    s.version = Number(version);
    s.confirmedAt = now();
  };

  const watch = (tenant: string, s: Snapshot) => {
    const ctx: CallContext = { tenant, principal: "chaos-core/cognition" };
    // The watch outlives the decision that opened it: not part of that request's trace.
    void outsideTrace(async () => {
      let roundEnded = false;
      try {
        for await (const msg of policy.watchPolicy({}, { ctx, signal: s.abort.signal, timeoutMs: watchRoundMs })) {
          take(s, msg.document, msg.version);
          s.retries = 0;
        }
      } catch (err) {
        if (s.abort.signal.aborted) return;
        const e = ChaosError.from(err);
        roundEnded = e.code === "deadline_exceeded";
        if (roundEnded) options.logger.debug({ tenant }, "policy watch round ended at its deadline; reopening it");
        else options.logger.warn({ err: e.message, code: e.code, tenant }, "policy watch broke; decisions re-read the policy until it is back");
      }
      if (closed || s.abort.signal.aborted) return;
      if (roundEnded) return watch(tenant, s);
      const delay = RETRY_MS[Math.min(s.retries++, RETRY_MS.length - 1)]!;
      setTimeout(() => {
        if (!closed && !s.abort.signal.aborted) watch(tenant, s);
      }, delay).unref();
    });
  };

  const snapshotOf = (tenant: string): Snapshot => {
    let s = snapshots.get(tenant);
    if (s) {
      // Most recently used last, so the first is the one to drop.
      snapshots.delete(tenant);
      snapshots.set(tenant, s);
      return s;
    }
    s = { version: 0, confirmedAt: -Infinity, abort: new AbortController(), retries: 0 };
    snapshots.set(tenant, s);
    if (snapshots.size > MAX_TENANTS) {
      const [oldest, dropped] = snapshots.entries().next().value as [string, Snapshot];
      dropped.abort.abort();
      snapshots.delete(oldest);
    }
    watch(tenant, s);
    return s;
  };

  /** The tenant's policy-changes counter, or undefined when there are none or it cannot be read. */
  const changesOf = async (tenant: string): Promise<number | undefined> => {
    if (!options.changes) return undefined;
    try {
      return await options.changes.read(tenant);
    } catch (err) {
      options.logger.debug({ err: (err as Error).message, tenant }, "policy-changes counter unreadable; the snapshot bound applies");
      return undefined;
    }
  };

  const client: PolicyClient = {
    ...policy,
    evaluate: (req, opts) =>
      // The same span the policy service makes for a decision, here where it is made.
      withSpan("chaoscore.policy.decide", { [ATTR.capability]: req.capability ?? "", [ATTR.policySource]: "snapshot" }, async (span) => {
        const tenant = opts.ctx.tenant;
        const s = snapshotOf(tenant);
        const changes = await changesOf(tenant);
        const reread = !s.document || now() - s.confirmedAt > boundMs || changes !== s.changes;
        if (reread) {
          // Not confirmed within the bound, or changed since: read the policy in force before deciding (fails closed when it cannot).
          const read = await policy.getPolicy({}, opts);
          take(s, read.document, read.version);
          s.changes = changes;
        }
        const answer = create(EvaluateResponseSchema, decide(create(EvaluateRequestSchema, req), s.document!, s.version, { call: opts.ctx, now: new Date(now()) }));
        span.setAttributes({ [ATTR.decision]: decisionFromProto(answer.decision), [ATTR.policyVersion]: s.version, [ATTR.policyReread]: reread });
        return answer;
      }),
  };

  return {
    client,
    versionOf: (tenant) => (snapshots.get(tenant)?.document ? snapshots.get(tenant)!.version : undefined),
    close() {
      closed = true;
      for (const s of snapshots.values()) s.abort.abort();
      snapshots.clear();
    },
  };
}
