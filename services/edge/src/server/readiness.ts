import { ChaosError } from "@chaos-core/kit";
import type { EdgeDeps } from "../deps.js";

/** How long a readiness probe waits for each dependency. */
export const READINESS_TIMEOUT_MS = 2000;

/** The outcome of a readiness check: one entry per dependency, with the error code on failure. */
export interface Readiness {
  readonly ready: boolean;
  readonly checks: Record<string, { ok: true } | { ok: false; error: string }>;
}

/** The context readiness probes call services with: the local tenant, a named principal. */
const PROBE_CTX = { tenant: "default", principal: "edge-readiness" } as const;

async function probe(fn: () => Promise<unknown>): Promise<{ ok: true } | { ok: false; error: string }> {
  try {
    await fn();
    return { ok: true };
  } catch (err) {
    const e = ChaosError.from(err);
    return { ok: false, error: e.code };
  }
}

/** The session store has no deadline of its own (service clients do). */
function withDeadline<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ChaosError("deadline_exceeded", `no answer within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Whether the edge can serve: policy answers GetPolicy, memory answers Stats, cognition answers
 * DescribeProvider, council answers GetBrief, the ledger (when this edge has one) answers
 * GetCheckpoint from its database, and the session store answers a ping, each within
 * {@link READINESS_TIMEOUT_MS}. Cheap enough for a probe.
 */
export async function checkReadiness(deps: EdgeDeps): Promise<Readiness> {
  const opts = { ctx: PROBE_CTX, timeoutMs: READINESS_TIMEOUT_MS };
  const ledger = deps.ledger;
  const [policy, memory, cognition, council, sessions, ledgerCheck] = await Promise.all([
    probe(() => deps.policy.getPolicy({}, opts)),
    probe(() => deps.memory.stats({}, opts)),
    probe(() => deps.cognition.describeProvider({}, opts)),
    probe(() => deps.council.getBrief({ phase: "decompile" }, opts)),
    probe(() => withDeadline(deps.sessions.ping(), READINESS_TIMEOUT_MS)),
    ledger ? probe(() => ledger.getCheckpoint({}, opts)) : undefined,
  ]);
  const checks = { policy, memory, cognition, council, sessions, ...(ledgerCheck ? { ledger: ledgerCheck } : {}) };
  return { ready: Object.values(checks).every((c) => c.ok), checks };
}
