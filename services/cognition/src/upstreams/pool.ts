import { SdkError, SdkErrorCode, type CallToolResult } from "@modelcontextprotocol/client";
import { metrics } from "@opentelemetry/api";
import { ChaosError, outsideTrace, startMcpClientSpan, subjectTokenOf, type CallContext, type Logger, type UpstreamDeclaration } from "@chaos-core/kit";
import { answerOverCap, DEFAULT_MAX_RESULT_BYTES } from "./answer-cap.js";
import type { UpstreamFetch } from "./guarded-fetch.js";
import { connectUpstream, type UpstreamConnectHooks, type UpstreamConnectOptions, type UpstreamConnection } from "./connect.js";
import type { UpstreamDrift } from "./drift.js";
import type { UpstreamNotice } from "./notices.js";
import { actsAsCaller, createUpstreamTokens, type TokenCaller } from "./upstream-auth.js";
import { breakerKey, type UpstreamBoard } from "./upstream-board.js";

/** When a breaker opens, and for how long (docs/federation.md §7). */
export interface BreakerSettings {
  /** Consecutive failures (timeouts, transport errors, garbage) that open it. */
  readonly failures: number;
  /** How long it rejects at once before letting one probe through. */
  readonly openMs: number;
}

export const DEFAULT_BREAKER: BreakerSettings = { failures: 5, openMs: 15_000 };

/** How long an unused connection stays open. */
const IDLE_MS = 5 * 60_000;

/**
 * The most connections one upstream that acts as the calling person (`token_exchange`) holds open
 * per pool scope, one per principal: past it the least recently used one not in a call is closed.
 */
export const MAX_PERSON_CONNECTIONS = 64;

/** A breaker's state, as `chaoscore_inspect` and the metrics show it. */
export interface BreakerState {
  readonly upstream: string;
  /** `shared`, or the tenant of a per-tenant connection. */
  readonly scope: string;
  readonly state: "closed" | "open" | "half-open";
  readonly consecutiveFailures: number;
  /** While open: when the next probe may go through (ISO 8601). */
  readonly retryAt?: string;
}

/** Upstream connections of this process, opened on first use, one breaker each. */
export interface UpstreamPool {
  /**
   * Calls `tool` of the upstream for `caller` (its tenant, and its principal and subject token for
   * an upstream that acts as the calling person); the caller's `signal` cancels it upstream. A
   * failure names the upstream: `unavailable` (unreachable, breaker open), `deadline_exceeded`,
   * `resource_exhausted` (an answer over the size cap: cut while it arrives, or refused once whole,
   * either way a failure of the upstream). A result with `isError` is the tool's own
   * answer and counts as a success of the upstream. `onNotice` hears what the upstream reports
   * about this call while it runs (its progress; its log lines where only this call can own them).
   */
  call(
    decl: UpstreamDeclaration,
    caller: Pick<CallContext, "tenant" | "principal">,
    tool: string,
    args: Record<string, unknown>,
    signal?: AbortSignal,
    onNotice?: (notice: UpstreamNotice) => void,
  ): Promise<CallToolResult>;
  breakers(): BreakerState[];
  close(): Promise<void>;
}

export interface UpstreamPoolOptions {
  readonly connect: UpstreamConnectOptions;
  readonly logger: Logger;
  readonly breaker?: BreakerSettings;
  readonly maxResultBytes?: number;
  /** The clock (tests). */
  readonly now?: () => number;
  /** How a connection is opened (tests); {@link connectUpstream} by default. */
  readonly open?: (decl: UpstreamDeclaration, options: UpstreamConnectOptions, hooks: UpstreamConnectHooks) => Promise<UpstreamConnection>;
  /**
   * Compares what an upstream lists with its pin (drift.ts): told its tools when a connection
   * opens (before its first call), whenever the upstream says they changed, and every
   * {@link REREAD_MS}; a tool it holds drifted is refused here too.
   */
  readonly drift?: Pick<UpstreamDrift, "observe" | "driftOf">;
  /**
   * The fetch an upstream's OAuth discovery and token requests go through, when its calls' is
   * chosen per declaration (`open`): a tenant's, address-guarded. Default `connect.fetch`.
   */
  readonly tokenFetch?: (decl: UpstreamDeclaration) => UpstreamFetch;
  /** The longest an upstream's OAuth token is used (`CHAOS_CORE_UPSTREAM_TOKEN_MAX_SECONDS`; upstream-auth.ts). */
  readonly tokenMaxSeconds?: number;
  /**
   * Every connection is the calling tenant's own (a tenant's registry upstreams, docs/federation.md
   * §12): keyed by the tenant, never `shared`, whatever the declaration says.
   */
  readonly perTenant?: boolean;
  /**
   * Where the cognition replicas share their open breakers (upstream-board.ts): a breaker one
   * opens is open in all, and closes in all when one's probe gets through. Without it (one
   * replica, the standalone) each breaker is this process's alone.
   */
  readonly board?: Pick<UpstreamBoard, "breakers" | "openBreaker" | "closeBreaker">;
}

const breakerGauge = metrics.getMeter("chaoscore.upstreams").createObservableGauge("chaoscore.upstream.breaker.state", {
  description: "An upstream connection's circuit breaker: 0 closed, 1 half-open (one probe may go through), 2 open (calls fail at once)",
});

/** How often an open connection's tools are read again, for an upstream that changes them silently. */
const REREAD_MS = 5 * 60_000;

/** One upstream's breaker in one pool scope. */
interface Breaker {
  failures: number;
  openUntil?: number;
  probing: boolean;
  /** When the shared breaker it follows was opened (the board's record), while it follows one. */
  shared?: number;
  /** The board's record this replica closed (a probe got through here): not followed again while it lingers. */
  closed?: number;
  readonly upstream: string;
  readonly scope: string;
}

/** One connection: the breaker's own, or (an upstream acting as the caller) one person's under it. */
interface Entry {
  connection?: Promise<UpstreamConnection>;
  reread?: NodeJS.Timeout;
  idle?: NodeJS.Timeout;
  readonly breaker: Breaker;
  readonly key: string;
  /** The person it is for (`token_exchange`: tenant and principal), with their latest subject token, which its requests are authorised with. */
  caller?: TokenCaller;
  calls: number;
  lastUsed: number;
}

/**
 * The pool (docs/federation.md §2): keyed by upstream and isolation — one connection shared by
 * every tenant, or one per tenant for a stdio upstream declared `isolation: tenant`. A connection
 * that fails is dropped and opened again on the next call; the breaker is the backoff. One
 * upstream's entry never touches another's.
 */
export function createUpstreamPool(options: UpstreamPoolOptions): UpstreamPool {
  const breaker = options.breaker ?? DEFAULT_BREAKER;
  const maxBytes = options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
  const now = options.now ?? Date.now;
  const open = options.open ?? connectUpstream;
  const breakers = new Map<string, Breaker>();
  const entries = new Map<string, Entry>();
  // An upstream declared with `auth`: its tokens, requested through the same fetch as its calls.
  const tokens = createUpstreamTokens({
    secrets: options.connect.secrets,
    ...(options.tokenFetch || options.connect.fetch ? { fetchFor: (decl: UpstreamDeclaration) => (options.tokenFetch?.(decl) ?? options.connect.fetch) as typeof fetch } : {}),
    ...(options.tokenMaxSeconds !== undefined ? { maxSeconds: options.tokenMaxSeconds } : {}),
    ...(options.now ? { now: options.now } : {}),
  });

  const drop = (entry: Entry) => {
    // One person's connection goes with its connection; the breaker's own entry stays, to connect again.
    if (entry.caller && entries.get(entry.key) === entry) entries.delete(entry.key);
    const connection = entry.connection;
    entry.connection = undefined;
    if (entry.idle) clearTimeout(entry.idle);
    if (entry.reread) clearInterval(entry.reread);
    void connection?.then((c) => c.close()).catch(() => {});
  };

  /** Opens a connection whose tools are compared with the pin before it serves a call, and again as they change. */
  const openWatched = async (decl: UpstreamDeclaration, entry: Entry): Promise<UpstreamConnection> => {
    const drift = options.drift;
    const { scope } = entry.breaker;
    const hooks = { logger: options.logger, logsBelongToCalls: scope !== "shared" || entry.caller !== undefined };
    const authed = decl.transport === "http" && decl.auth ? { ...decl, auth: decl.auth } : undefined;
    const machine: TokenCaller = { tenant: scope, principal: "chaos-core" };
    const authProvider = authed && {
      token: () => tokens.token(authed, scope, entry.caller ?? machine),
      onUnauthorized: () => Promise.resolve(tokens.invalidate(authed, scope, entry.caller ?? machine)),
    };
    const connectOptions = { ...options.connect, maxResultBytes: maxBytes, ...(authProvider ? { authProvider } : {}) };
    const connection = await open(decl, connectOptions, drift ? { ...hooks, onToolsChanged: (tools) => drift.observe(decl, tools) } : hooks);
    if (drift) {
      // When each read was asked for: what another replica found before it is older than this read.
      const reread = () => {
        const askedAt = Date.now();
        return connection.listTools().then((tools) => drift.observe(decl, tools, askedAt));
      };
      await reread();
      entry.reread = setInterval(() => void reread().catch(() => {}), REREAD_MS).unref();
    }
    return connection;
  };

  /**
   * Brings a breaker to what the board says: open while another replica's (or this one's, read
   * back) record is open longer, closed once that record is gone (a probe got through somewhere).
   */
  const follow = (b: Breaker) => {
    const shared = options.board?.breakers().get(breakerKey(b.upstream, b.scope));
    if (shared && shared.at !== b.closed && (b.openUntil === undefined || shared.openUntil >= b.openUntil)) {
      if (b.shared !== shared.at) b.probing = false;
      b.openUntil = shared.openUntil;
      b.failures = Math.max(b.failures, shared.failures);
      b.shared = shared.at;
    } else if ((!shared || shared.at === b.closed) && b.shared !== undefined) {
      b.shared = undefined;
      b.openUntil = undefined;
      b.failures = 0;
      b.probing = false;
    }
  };

  /** Counts a failure of the upstream (the breaker opens after enough in a row) and drops the connection, unless `keep`. */
  const failed = (entry: Entry, err: unknown, keep = false): never => {
    const b = entry.breaker;
    b.failures += 1;
    b.probing = false;
    if (!keep) drop(entry);
    if (b.failures >= breaker.failures) {
      b.openUntil = now() + breaker.openMs;
      options.logger.warn({ upstream: b.upstream, scope: b.scope, failures: b.failures }, "upstream breaker opened");
      void options.board?.openBreaker({ upstream: b.upstream, scope: b.scope, openUntil: b.openUntil, failures: b.failures, at: now() });
    }
    throw err;
  };

  /**
   * The connection a call goes on: the breaker's own, or for an upstream acting as the caller the
   * caller's (opened on first use, at most {@link MAX_PERSON_CONNECTIONS} per breaker).
   */
  const entryFor = (decl: UpstreamDeclaration, b: Breaker, caller: TokenCaller | undefined): Entry => {
    const key = `${b.upstream}\u0000${b.scope}${caller ? `\u0000${caller.tenant}\u0000${caller.principal}` : ""}`;
    let entry = entries.get(key);
    if (entry) {
      if (caller) entry.caller = caller;
      return entry;
    }
    if (caller) {
      const people = [...entries.values()].filter((e) => e.breaker === b);
      if (people.length >= MAX_PERSON_CONNECTIONS) {
        const idle = people.filter((e) => e.calls === 0).sort((x, y) => x.lastUsed - y.lastUsed)[0];
        if (!idle) throw new ChaosError("resource_exhausted", `upstream "${decl.name}" has ${people.length} people's connections open, each in a call; try again when one ends`);
        drop(idle);
      }
    }
    entries.set(key, (entry = { breaker: b, key, calls: 0, lastUsed: now(), ...(caller ? { caller } : {}) }));
    return entry;
  };

  /** One upstream call: its connection (opened on first use), its breaker, its size cap. */
  const callOnce: UpstreamPool["call"] = async (decl, callerCtx, tool, args, signal, onNotice) => {
    const { tenant, principal } = callerCtx;
    const scope = options.perTenant === true || (decl.transport === "stdio" && decl.isolation === "tenant") ? tenant : "shared";
    const key = breakerKey(decl.name, scope);
    let b = breakers.get(key);
    if (!b) breakers.set(key, (b = { failures: 0, probing: false, upstream: decl.name, scope }));
    follow(b);
    // An upstream acting as the caller: the caller's own connection, with the token they came with.
    const caller = decl.transport === "http" && actsAsCaller(decl) ? { tenant, principal, subjectToken: subjectTokenOf(callerCtx) } : undefined;
    // The upstream's token first (before the breaker's probe is taken): a refusal by its authorization server is not the upstream's
    // failure, so it fails this call `permission_denied` without counting against the breaker.
    if (decl.transport === "http" && decl.auth) await tokens.token({ ...decl, auth: decl.auth }, scope, caller ?? { tenant, principal });
    if (b.openUntil !== undefined) {
      if (now() < b.openUntil || b.probing) {
        throw new ChaosError("unavailable", `upstream "${decl.name}" failed ${b.failures} times in a row; its breaker is open until ${new Date(b.openUntil).toISOString()}`);
      }
      b.probing = true;
    }
    const entry = entryFor(decl, b, caller);
    let connection: UpstreamConnection;
    entry.calls += 1;
    entry.lastUsed = now();
    try {
      // A connection outlives the call that opened it (its re-reads, its GET stream): not part of that call's trace.
      entry.connection ??= outsideTrace(() => openWatched(decl, entry));
      connection = await entry.connection;
    } catch (err) {
      entry.calls -= 1;
      return failed(entry, err instanceof ChaosError ? err : new ChaosError("unavailable", `upstream "${decl.name}" could not be reached`, { cause: err }));
    }
    try {
      return await callOn(connection, entry, decl, tenant, tool, args, signal, onNotice);
    } finally {
      entry.calls -= 1;
    }
  };

  /** The call on its open connection: a drifted tool refused, failures counted, the size cap applied. */
  const callOn = async (
    connection: UpstreamConnection,
    entry: Entry,
    decl: UpstreamDeclaration,
    tenant: string,
    tool: string,
    args: Record<string, unknown>,
    signal: AbortSignal | undefined,
    onNotice: ((notice: UpstreamNotice) => void) | undefined,
  ): Promise<CallToolResult> => {
    if (entry.idle) clearTimeout(entry.idle);
    entry.idle = setTimeout(() => drop(entry), IDLE_MS).unref();
    // A definition found changed on opening the connection (or since) is not called.
    const drifted = options.drift?.driftOf(decl.name, tool);
    if (drifted) throw new ChaosError("contract_drift", `${drifted}: this upstream tool no longer matches its pin and is not run; an operator approves the new contract with chaos-core upstreams approve ${decl.name} ${tool}${options.perTenant ? ` --tenant ${tenant}` : ""}`);
    let result: CallToolResult;
    try {
      result = await connection.callTool(tool, args, signal, onNotice);
    } catch (err) {
      if (signal?.aborted) throw new ChaosError("cancelled", `the call to upstream "${decl.name}" was cancelled`, { cause: err });
      // What the connection already named (an answer cut for its size) stays as it said; the
      // connection is dropped (a cut HTTP stream may be resumed, a stdio one is closed).
      if (err instanceof ChaosError) return failed(entry, err);
      const message = err instanceof Error ? err.message : String(err);
      const timedOut = err instanceof SdkError && err.code === SdkErrorCode.RequestTimeout;
      return failed(
        entry,
        new ChaosError(timedOut ? "deadline_exceeded" : "unavailable", `upstream "${decl.name}" ${timedOut ? `did not answer within ${decl.timeoutMs} ms` : `failed: ${message}`}`, { cause: err }),
      );
    }
    const bytes = Buffer.byteLength(JSON.stringify(result));
    // Over the cap but within the framing allowance the connection reads whole: a failure of the
    // upstream as a cut answer is, but the connection is sound and kept.
    if (bytes > maxBytes) return failed(entry, answerOverCap(decl.name, maxBytes), true);
    const b = entry.breaker;
    // A probe got through: closed here, and for every replica following the same shared breaker.
    const shared = b.openUntil !== undefined ? options.board?.breakers().get(breakerKey(b.upstream, b.scope)) : undefined;
    if (shared) {
      b.closed = shared.at;
      void options.board?.closeBreaker(b.upstream, b.scope, shared.at);
    }
    b.failures = 0;
    b.openUntil = undefined;
    b.probing = false;
    b.shared = undefined;
    return result;
  };

  const breakerStates = (): BreakerState[] => {
    // An upstream another replica found failing shows open here too, called here or not.
    for (const shared of options.board?.breakers().values() ?? []) {
      const key = breakerKey(shared.upstream, shared.scope);
      if (!breakers.has(key)) breakers.set(key, { failures: 0, probing: false, upstream: shared.upstream, scope: shared.scope });
    }
    for (const b of breakers.values()) follow(b);
    return [...breakers.values()].map((e) => {
      const open = e.openUntil !== undefined;
      return {
        upstream: e.upstream,
        scope: e.scope,
        state: !open ? "closed" : now() < e.openUntil! ? "open" : "half-open",
        consecutiveFailures: e.failures,
        ...(open ? { retryAt: new Date(e.openUntil!).toISOString() } : {}),
      };
    });
  };
  // Each breaker's state as a metric (docs/federation.md §7), the operator's pool and every tenant's alike: 0 closed, 1 half-open, 2 open.
  const observeBreakers = (result: { observe(value: number, attributes: Record<string, string>): void }) => {
    for (const b of breakerStates()) result.observe(b.state === "open" ? 2 : b.state === "half-open" ? 1 : 0, { upstream: b.upstream, scope: b.scope });
  };
  breakerGauge.addCallback(observeBreakers);

  return {
    /** One upstream call in its CLIENT span under the step's (docs/federation-platform.md §5), refusals by an open breaker included. */
    async call(decl, tenant, tool, args, signal, onNotice) {
      const span = startMcpClientSpan({ upstream: decl.name, toolName: tool, transport: decl.transport === "stdio" ? "pipe" : "tcp", url: decl.transport === "http" ? decl.url : undefined });
      try {
        const result = await span.run(() => callOnce(decl, tenant, tool, args, signal, onNotice));
        span.end(result.isError === true ? "tool_error" : undefined);
        return result;
      } catch (err) {
        span.end(ChaosError.from(err).code);
        throw err;
      }
    },
    breakers: breakerStates,
    async close() {
      breakerGauge.removeCallback(observeBreakers);
      for (const entry of [...entries.values()]) drop(entry);
      entries.clear();
      breakers.clear();
    },
  };
}
