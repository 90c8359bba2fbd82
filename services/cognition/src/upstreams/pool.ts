import { SdkError, SdkErrorCode, type CallToolResult } from "@modelcontextprotocol/client";
import { metrics } from "@opentelemetry/api";
import { ChaosError, outsideTrace, startMcpClientSpan, type Logger, type UpstreamDeclaration } from "@chaos-core/kit";
import { answerOverCap, DEFAULT_MAX_RESULT_BYTES } from "./answer-cap.js";
import type { UpstreamFetch } from "./guarded-fetch.js";
import { connectUpstream, type UpstreamConnectHooks, type UpstreamConnectOptions, type UpstreamConnection } from "./connect.js";
import type { UpstreamDrift } from "./drift.js";
import type { UpstreamNotice } from "./notices.js";
import { createUpstreamTokens } from "./upstream-auth.js";

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
   * Calls `tool` of the upstream for `tenant`; the caller's `signal` cancels it upstream. A
   * failure names the upstream: `unavailable` (unreachable, breaker open), `deadline_exceeded`,
   * `resource_exhausted` (an answer over the size cap: cut while it arrives, or refused once whole,
   * either way a failure of the upstream). A result with `isError` is the tool's own
   * answer and counts as a success of the upstream. `onNotice` hears what the upstream reports
   * about this call while it runs (its progress; its log lines where only this call can own them).
   */
  call(
    decl: UpstreamDeclaration,
    tenant: string,
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
}

const breakerGauge = metrics.getMeter("chaoscore.upstreams").createObservableGauge("chaoscore.upstream.breaker.state", {
  description: "An upstream connection's circuit breaker: 0 closed, 1 half-open (one probe may go through), 2 open (calls fail at once)",
});

/** How often an open connection's tools are read again, for an upstream that changes them silently. */
const REREAD_MS = 5 * 60_000;

interface Entry {
  connection?: Promise<UpstreamConnection>;
  reread?: NodeJS.Timeout;
  failures: number;
  openUntil?: number;
  probing: boolean;
  idle?: NodeJS.Timeout;
  readonly upstream: string;
  readonly scope: string;
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
  const entries = new Map<string, Entry>();
  // An upstream declared with `auth`: its tokens, requested through the same fetch as its calls.
  const tokens = createUpstreamTokens({
    secrets: options.connect.secrets,
    ...(options.tokenFetch || options.connect.fetch ? { fetchFor: (decl: UpstreamDeclaration) => (options.tokenFetch?.(decl) ?? options.connect.fetch) as typeof fetch } : {}),
    ...(options.tokenMaxSeconds !== undefined ? { maxSeconds: options.tokenMaxSeconds } : {}),
    ...(options.now ? { now: options.now } : {}),
  });

  const drop = (entry: Entry) => {
    const connection = entry.connection;
    entry.connection = undefined;
    if (entry.idle) clearTimeout(entry.idle);
    if (entry.reread) clearInterval(entry.reread);
    void connection?.then((c) => c.close()).catch(() => {});
  };

  /** Opens a connection whose tools are compared with the pin before it serves a call, and again as they change. */
  const openWatched = async (decl: UpstreamDeclaration, entry: Entry): Promise<UpstreamConnection> => {
    const drift = options.drift;
    const hooks = { logger: options.logger, logsBelongToCalls: entry.scope !== "shared" };
    const authed = decl.transport === "http" && decl.auth ? { ...decl, auth: decl.auth } : undefined;
    const authProvider = authed && {
      token: () => tokens.token(authed, entry.scope),
      onUnauthorized: () => Promise.resolve(tokens.invalidate(authed, entry.scope)),
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

  /** Counts a failure of the upstream (the breaker opens after enough in a row) and drops the connection, unless `keep`. */
  const failed = (entry: Entry, err: unknown, keep = false): never => {
    entry.failures += 1;
    entry.probing = false;
    if (!keep) drop(entry);
    if (entry.failures >= breaker.failures) {
      entry.openUntil = now() + breaker.openMs;
      options.logger.warn({ upstream: entry.upstream, scope: entry.scope, failures: entry.failures }, "upstream breaker opened");
    }
    throw err;
  };

  /** One upstream call: its connection (opened on first use), its breaker, its size cap. */
  const callOnce: UpstreamPool["call"] = async (decl, tenant, tool, args, signal, onNotice) => {
    const scope = options.perTenant === true || (decl.transport === "stdio" && decl.isolation === "tenant") ? tenant : "shared";
    const key = `${decl.name}\u0000${scope}`;
    let entry = entries.get(key);
    if (!entry) entries.set(key, (entry = { failures: 0, probing: false, upstream: decl.name, scope }));
    // The upstream's token first (before the breaker's probe is taken): a refusal by its authorization server is not the upstream's
    // failure, so it fails this call `permission_denied` without counting against the breaker.
    if (decl.transport === "http" && decl.auth) await tokens.token({ ...decl, auth: decl.auth }, scope);
    if (entry.openUntil !== undefined) {
      if (now() < entry.openUntil || entry.probing) {
        throw new ChaosError("unavailable", `upstream "${decl.name}" failed ${entry.failures} times in a row; its breaker is open until ${new Date(entry.openUntil).toISOString()}`);
      }
      entry.probing = true;
    }
    let connection: UpstreamConnection;
    try {
      // A connection outlives the call that opened it (its re-reads, its GET stream): not part of that call's trace.
      entry.connection ??= outsideTrace(() => openWatched(decl, entry));
      connection = await entry.connection;
    } catch (err) {
      return failed(entry, err instanceof ChaosError ? err : new ChaosError("unavailable", `upstream "${decl.name}" could not be reached`, { cause: err }));
    }
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
    entry.failures = 0;
    entry.openUntil = undefined;
    entry.probing = false;
    return result;
  };

  const breakers = (): BreakerState[] =>
    [...entries.values()].map((e) => {
      const open = e.openUntil !== undefined;
      return {
        upstream: e.upstream,
        scope: e.scope,
        state: !open ? "closed" : now() < e.openUntil! ? "open" : "half-open",
        consecutiveFailures: e.failures,
        ...(open ? { retryAt: new Date(e.openUntil!).toISOString() } : {}),
      };
    });
  // Each breaker's state as a metric (docs/federation.md §7), the operator's pool and every tenant's alike: 0 closed, 1 half-open, 2 open.
  const observeBreakers = (result: { observe(value: number, attributes: Record<string, string>): void }) => {
    for (const b of breakers()) result.observe(b.state === "open" ? 2 : b.state === "half-open" ? 1 : 0, { upstream: b.upstream, scope: b.scope });
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
    breakers,
    async close() {
      breakerGauge.removeCallback(observeBreakers);
      for (const entry of entries.values()) drop(entry);
      entries.clear();
    },
  };
}
