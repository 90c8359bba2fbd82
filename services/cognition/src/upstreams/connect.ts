import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { Client, ProtocolError, ProtocolErrorCode, StreamableHTTPClientTransport, type AuthProvider, type CallToolResult, type Tool } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { ChaosError, resolveSecretRef, traceContextMeta, type Logger, type SecretSources, type UpstreamDeclaration } from "@chaos-core/kit";
import { answerOverCap, cappedFetch, DEFAULT_MAX_RESULT_BYTES, FRAMING_ALLOWANCE, progressTokensOf } from "./answer-cap.js";
import type { UpstreamFetch } from "./guarded-fetch.js";
import { refusalOf, type UpstreamNotice } from "./notices.js";

/** The least time an upstream is given to start and answer `initialize`, whatever its call timeout. */
const CONNECT_TIMEOUT_MS = 30_000;

/** Where and as what Chaos Core connects to upstreams. */
export interface UpstreamConnectOptions {
  /** Where secret references are read. */
  readonly secrets: SecretSources;
  /** The folder stdio upstreams run in, one sub-folder each (`<dataDir>/upstreams`). */
  readonly workDir: string;
  /** The version Chaos Core names itself with to upstreams. */
  readonly version: string;
  /**
   * How a Streamable HTTP upstream is reached; the platform's fetch when unset (the operator's
   * file). A tenant's upstream is reached only through `guardedUpstreamFetch` (guarded-fetch.ts).
   */
  readonly fetch?: UpstreamFetch;
  /**
   * The largest answer accepted (`CHAOS_CORE_UPSTREAM_MAX_RESULT_BYTES`; the pool passes its own):
   * one message over it and {@link FRAMING_ALLOWANCE} is cut while it arrives (answer-cap.ts).
   */
  readonly maxResultBytes?: number;
  /** A Streamable HTTP upstream declared with `auth`: the bearer token on every request (upstream-auth.ts). */
  readonly authProvider?: AuthProvider;
}

/** What a caller hears of one connection. */
export interface UpstreamConnectHooks {
  /** The upstream said its tool list changed (`notifications/tools/list_changed`): its tools now. */
  readonly onToolsChanged?: (tools: Tool[]) => void;
  /** Where a refused request from the upstream is logged, naming it. */
  readonly logger?: Logger;
  /**
   * Whether the connection is one tenant's, so a log line the upstream sends while exactly one
   * call is in flight can only be that call's and is passed to it (docs/federation.md §7).
   */
  readonly logsBelongToCalls?: boolean;
}

/** An open connection to one upstream. */
export interface UpstreamConnection {
  /** Every tool it lists, every page. */
  listTools(signal?: AbortSignal): Promise<Tool[]>;
  /**
   * Calls one of its tools under its timeout; `signal` cancels the call upstream too. `onNotice`
   * hears the progress the upstream reports for this call, and its log lines where they can only
   * be this call's.
   */
  callTool(name: string, args: Record<string, unknown>, signal?: AbortSignal, onNotice?: (notice: UpstreamNotice) => void): Promise<CallToolResult>;
  close(): Promise<void>;
}

/**
 * The environment a stdio upstream starts with: what the operator listed (references resolved)
 * over `HOME` set to its own folder. The SDK adds only its fixed base of non-secret variables
 * (`PATH`, `SHELL`, `TERM`, `USER`, `LOGNAME`, and `HOME`, which this overrides): never Chaos
 * Core's own environment (database URLs, keys).
 */
async function stdioEnvironment(decl: Extract<UpstreamDeclaration, { transport: "stdio" }>, cwd: string, secrets: SecretSources): Promise<Record<string, string>> {
  const env: Record<string, string> = { HOME: cwd };
  for (const [name, value] of Object.entries(decl.env)) env[name] = typeof value === "string" ? value : await resolveSecretRef(value, secrets);
  return env;
}

/**
 * Connects to an upstream as its declaration says (docs/federation.md §2): a stdio upstream is
 * started in `<workDir>/<name>` (or its declared `cwd` inside it) with only its own environment;
 * a Streamable HTTP one is reached with its headers, references resolved now. Chaos Core declares
 * no client capability; a request for sampling, elicitation or roots sent anyway is refused by
 * name (docs/federation.md §7). What the upstream reports about a call — its progress, and its
 * log lines where only that call can own them — goes to that call's `onNotice`. The SDK
 * negotiates the revision the upstream speaks. A failure names the upstream, never a secret.
 */
export async function connectUpstream(decl: UpstreamDeclaration, options: UpstreamConnectOptions, hooks: UpstreamConnectHooks = {}): Promise<UpstreamConnection> {
  const onToolsChanged = hooks.onToolsChanged;
  const client = new Client(
    { name: "chaos-core", version: options.version },
    {
      capabilities: {},
      // The SDK re-reads the list when the upstream says it changed (where the upstream advertises it).
      ...(onToolsChanged ? { listChanged: { tools: { onChanged: (error: Error | null, tools: Tool[] | null) => void (!error && tools && onToolsChanged(tools)) } } } : {}),
    },
  );
  refuseRequests(client, decl.name, hooks.logger);
  // The calls in flight, by the progress token each sent. Chaos Core hears progress itself rather
  // than through the SDK's onprogress, which drops a notification that arrives just before the
  // response (it removes the handler on the response, before the queued notification runs).
  const inFlight = new Map<string, InFlightCall>();
  let tokens = 0;
  client.setNotificationHandler("notifications/progress", (n) => {
    const { progressToken, progress, total, message } = n.params;
    inFlight.get(String(progressToken))?.notice({ kind: "progress", progress, ...(total !== undefined ? { total } : {}), ...(message ? { message } : {}) });
  });
  client.setNotificationHandler("notifications/message", (n) => {
    const [only] = inFlight.values();
    if (hooks.logsBelongToCalls && inFlight.size === 1 && only) only.notice({ kind: "log", level: n.params.level, data: n.params.data });
    // Its text stays out of Chaos Core's log: it may be anything the upstream knows.
    else hooks.logger?.debug({ upstream: decl.name, level: n.params.level, callsInFlight: inFlight.size }, "upstream log line not attributable to one call; not passed on");
  });
  // One message may be the cap and its framing, read as it arrives (docs/federation.md §7).
  const cap = options.maxResultBytes ?? DEFAULT_MAX_RESULT_BYTES;
  const limit = cap + FRAMING_ALLOWANCE;
  let transport: StdioClientTransport | StreamableHTTPClientTransport;
  if (decl.transport === "stdio") {
    const home = join(options.workDir, decl.name);
    const cwd = decl.cwd ? join(home, decl.cwd) : home;
    await mkdir(cwd, { recursive: true });
    // The SDK's reader holds at most `maxBufferSize` of a message not yet whole; past it, it
    // reports the error (below) and closes the connection.
    transport = new StdioClientTransport({ command: decl.command, args: [...decl.args], env: await stdioEnvironment(decl, cwd, options.secrets), cwd, stderr: "ignore", maxBufferSize: limit });
  } else {
    const headers: Record<string, string> = {};
    for (const [name, ref] of Object.entries(decl.headers)) headers[name] = await resolveSecretRef(ref, options.secrets);
    // Every body is counted as it streams; a cut answer to a call fails that call at once. A cut
    // on the standalone GET stream answers no call: the SDK reconnects it (a few times at most).
    const fetch = cappedFetch(options.fetch ?? globalThis.fetch, limit, ({ method, requestBody }) => {
      const tokens = progressTokensOf(requestBody);
      for (const token of tokens) inFlight.get(token)?.cut(answerOverCap(decl.name, cap));
      if (tokens.length === 0) hooks.logger?.warn({ upstream: decl.name, method, limit }, `upstream "${decl.name}" sent a message over ${limit} bytes; its response was cut`);
    });
    transport = new StreamableHTTPClientTransport(new URL(decl.url), { requestInit: { headers }, fetch, ...(options.authProvider ? { authProvider: options.authProvider } : {}) });
  }
  // An answer over the stdio reader's limit closes the connection: the SDK says so only here (the
  // call would see "Connection closed" once the process has gone), so every call on it fails now.
  // The SDK ends the process's stdin and gives it 2 s; it is stopped at once instead, so it does
  // not go on sending the rest of its answer into a reader that drops it.
  client.onerror = (err) => {
    if (!/^ReadBuffer exceeded maximum size of \d+ bytes$/.test(err.message)) return;
    for (const call of inFlight.values()) call.cut(answerOverCap(decl.name, cap, err));
    const pid = transport instanceof StdioClientTransport ? transport.pid : null;
    if (pid === null) return;
    try {
      process.kill(pid, "SIGTERM");
    } catch {
      // It has gone already.
    }
  };
  try {
    // Starting a process (or npx fetching a package) takes longer than a call may: at least 30 s.
    await client.connect(transport, { timeout: Math.max(decl.timeoutMs, CONNECT_TIMEOUT_MS) });
  } catch (err) {
    await client.close().catch(() => {});
    throw new ChaosError("unavailable", `upstream "${decl.name}" could not be reached: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  return {
    async listTools(signal) {
      const tools: Tool[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: decl.timeoutMs, ...(signal ? { signal } : {}) });
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor !== undefined);
      return tools;
    },
    async callTool(name, args, signal, onNotice) {
      // Every call carries a progress token, so the upstream may report progress for it.
      const progressToken = `chaos-core-${++tokens}`;
      // Aborted, with the refusal as its reason, when this call's answer is cut for its size.
      const cut = new AbortController();
      inFlight.set(progressToken, { notice: onNotice ?? (() => {}), cut: (err) => cut.abort(err) });
      try {
        // The call's trace context too (the pool's CLIENT span is active): an upstream that reads it joins the trace.
        const params = { name, arguments: args, _meta: { ...traceContextMeta(), progressToken } };
        return (await client.callTool(params, { timeout: decl.timeoutMs, signal: signal ? AbortSignal.any([signal, cut.signal]) : cut.signal })) as CallToolResult;
      } catch (err) {
        if (cut.signal.aborted) throw cut.signal.reason;
        throw err;
      } finally {
        inFlight.delete(progressToken);
      }
    },
    close: () => client.close(),
  };
}

/** A call in flight on a connection, by its progress token. */
interface InFlightCall {
  /** Hears what the upstream reports about it. */
  readonly notice: (notice: UpstreamNotice) => void;
  /** Ends it at once with this error (its answer was cut for its size). */
  readonly cut: (err: ChaosError) => void;
}

/**
 * Chaos Core declares no client capability, so an upstream should ask it for nothing; a request
 * sent anyway — sampling, elicitation, roots or any other — is answered with an error naming the
 * method and saying Chaos Core does not support it (the SDK alone says only "Method not found"),
 * and logged naming the upstream.
 */
function refuseRequests(client: Client, upstream: string, logger: Logger | undefined): void {
  client.fallbackRequestHandler = async (request) => {
    logger?.warn({ upstream, method: request.method }, `upstream "${upstream}" sent ${request.method} to Chaos Core during a call; refused: Chaos Core does not support it`);
    throw new ProtocolError(ProtocolErrorCode.MethodNotFound, refusalOf(request.method));
  };
}
