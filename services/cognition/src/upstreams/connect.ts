import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { Client, StreamableHTTPClientTransport, type CallToolResult, type Tool } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { ChaosError, resolveSecretRef, type SecretSources, type UpstreamDeclaration } from "@chaos-core/kit";
import type { UpstreamFetch } from "./guarded-fetch.js";

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
}

/** What a caller hears of one connection. */
export interface UpstreamConnectHooks {
  /** The upstream said its tool list changed (`notifications/tools/list_changed`): its tools now. */
  readonly onToolsChanged?: (tools: Tool[]) => void;
}

/** An open connection to one upstream. */
export interface UpstreamConnection {
  /** Every tool it lists, every page. */
  listTools(signal?: AbortSignal): Promise<Tool[]>;
  /** Calls one of its tools under its timeout; `signal` cancels the call upstream too. */
  callTool(name: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<CallToolResult>;
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
 * no client capability, so an upstream cannot ask it for sampling, elicitation or roots. The SDK
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
  let transport: StdioClientTransport | StreamableHTTPClientTransport;
  if (decl.transport === "stdio") {
    const home = join(options.workDir, decl.name);
    const cwd = decl.cwd ? join(home, decl.cwd) : home;
    await mkdir(cwd, { recursive: true });
    transport = new StdioClientTransport({ command: decl.command, args: [...decl.args], env: await stdioEnvironment(decl, cwd, options.secrets), cwd, stderr: "ignore" });
  } else {
    const headers: Record<string, string> = {};
    for (const [name, ref] of Object.entries(decl.headers)) headers[name] = await resolveSecretRef(ref, options.secrets);
    transport = new StreamableHTTPClientTransport(new URL(decl.url), { requestInit: { headers }, ...(options.fetch ? { fetch: options.fetch } : {}) });
  }
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
    async callTool(name, args, signal) {
      return (await client.callTool({ name, arguments: args }, { timeout: decl.timeoutMs, ...(signal ? { signal } : {}) })) as CallToolResult;
    },
    close: () => client.close(),
  };
}
