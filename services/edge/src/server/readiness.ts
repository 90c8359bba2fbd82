import { ChaosError } from "@chaos-core/kit";
import type { EdgeDeps } from "../deps/edge-deps.js";

/** How long a readiness probe waits for each dependency. */
export const READINESS_TIMEOUT_MS = 2000;

/** The outcome of a readiness check: one entry per dependency, with the error code on failure. */
export interface Readiness {
  /** Whether this replica should receive traffic. */
  readonly ready: boolean;
  /**
   * `degraded` when something behind this replica does not answer — the session store, an upstream
   * MCP server's breaker, and for the edge alone a service: the replica still answers every call,
   * those that need what is down with `unavailable` naming it (docs/operations.md, docs/federation.md
   * §7), so it stays in the Service.
   */
  readonly status: "ready" | "degraded" | "not ready";
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
 *
 * What fails decides between `not ready` and `degraded` (docs/operations.md "Readiness"): a probe
 * says whether this pod can serve. The session store (Redis) is shared by every replica, and the
 * services of the edge alone ({@link EdgeDeps.servicesRemote}) run in pods of their own: were
 * their outage to make each replica not ready, Kubernetes would take all of them out of the
 * Service at once, and clients would meet an ingress error instead of the edge's clear
 * `unavailable` naming what is down. So they are `degraded`, still ready. In the standalone the
 * services are this process's own: one that does not answer makes it not ready.
 */
export async function checkReadiness(deps: EdgeDeps): Promise<Readiness> {
  const opts = { ctx: PROBE_CTX, timeoutMs: READINESS_TIMEOUT_MS };
  const ledger = deps.ledger;
  const [policy, memory, cognition, council, sessions, ledgerCheck, upstreams] = await Promise.all([
    probe(() => deps.policy.getPolicy({}, opts)),
    probe(() => deps.memory.stats({}, opts)),
    probe(() => deps.cognition.describeProvider({}, opts)),
    probe(() => deps.council.getBrief({ phase: "decompile" }, opts)),
    probe(() => withDeadline(deps.sessions.ping(), READINESS_TIMEOUT_MS)),
    ledger ? probe(() => ledger.getCheckpoint({}, opts)) : undefined,
    deps.upstreams && deps.upstreams.capabilities().length > 0 ? upstreamsCheck(deps, opts) : undefined,
  ]);
  const checks = { policy, memory, cognition, council, sessions, ...(ledgerCheck ? { ledger: ledgerCheck } : {}), ...(upstreams ? { upstreams } : {}) };
  const { sessions: _sessions, upstreams: _upstreams, ...services } = checks;
  const ownFailing = !deps.servicesRemote && !Object.values(services).every((c) => c.ok);
  const degraded = !Object.values(checks).every((c) => c.ok);
  return { ready: !ownFailing, status: ownFailing ? "not ready" : degraded ? "degraded" : "ready", checks };
}

/**
 * Whether every upstream MCP server cognition fronts answers (docs/federation.md §7): not when a
 * breaker of one is open (or half-open), naming them — `degraded`, never `not ready`, since every
 * other call still works. Cognition out of reach is the cognition check's to say.
 */
async function upstreamsCheck(deps: EdgeDeps, opts: { ctx: typeof PROBE_CTX; timeoutMs: number }): Promise<{ ok: true } | { ok: false; error: string }> {
  try {
    const { upstreams } = await deps.cognition.listUpstreams({ everyUpstream: true }, opts);
    const failing = upstreams.filter((u) => u.breakers.some((b) => b.state !== "closed")).map((u) => u.name);
    return failing.length === 0 ? { ok: true } : { ok: false, error: `breaker open: ${failing.join(", ")}` };
  } catch {
    return { ok: true };
  }
}
