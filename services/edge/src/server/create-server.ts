import { isJSONRPCRequest, McpServer, ProtocolError, ProtocolErrorCode, SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/server";
import type { AuthInfo, ServerOptions, Transport, Implementation } from "@modelcontextprotocol/server";
import { rolesOf } from "../auth/identity.js";
import { servedToolsets } from "@chaos-core/kit";
import { guardFor } from "../contracts/guard.js";
import type { EdgeAttestation, EdgeDeps } from "../deps/edge-deps.js";
import { isModernScope, type ServerScope } from "../sessions/server-scope.js";
import type { PromptDefinition } from "../definitions/prompt.js";
import { PROMPT_DEFINITIONS } from "../prompts/index.js";
import type { ToolDefinition } from "../definitions/tool.js";
import { TOOL_DEFINITIONS } from "../tools/index.js";
import { upstreamToolDefinition } from "../tools/upstream-tools.js";
import type { Capability } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { mostOfferOf, offerOf } from "../clients/upstream-catalog.js";
import { RESOURCE_DEFINITIONS } from "../resources/index.js";
import type { ResourceDefinition } from "../definitions/resource.js";
import { registerPrompts } from "./register-prompts.js";
import { registerResources, resourceAt } from "./register-resources.js";
import { requestStateVerifier } from "./mrtr-round.js";
import { registerTools } from "./register-tools.js";
import { limitRequests } from "./request-limits.js";
import { traceMcpMessages } from "./telemetry.js";
import { ArgumentScreen, guardToolCalls } from "./tool-arguments.js";

/** The stateless revision served beside 2025-11-25 (docs/protocol.md §1). */
export const MODERN_PROTOCOL_VERSION = "2026-07-28";

/**
 * How long a 2026-07-28 client may keep each cacheable result (SEP-2549, docs/protocol.md §9):
 * `tools/list` is private (toolsets are per tenant), the prompts and discover are the same for
 * everyone; the resource lists change with the tenant's data. `resources/read` takes each
 * resource's own hint. 2025-11-25 answers carry none (the SDK adds them on the 2026 codec only).
 */
export const CACHE_HINTS = {
  "server/discover": { ttlMs: 300_000, cacheScope: "public" },
  "tools/list": { ttlMs: 60_000, cacheScope: "private" },
  "prompts/list": { ttlMs: 300_000, cacheScope: "public" },
  "resources/list": { ttlMs: 0, cacheScope: "private" },
  "resources/templates/list": { ttlMs: 300_000, cacheScope: "public" },
} as const satisfies ServerOptions["cacheHints"];

/** The `_meta` key of `initialize` and `server/discover` results that carries the contract attestation. */
export const CONTRACTS_META_KEY = "dev.chaoscore/contracts";

/** What clients are told about the served contracts (docs/contracts.md §7): public data only. */
export function contractsMeta(a: EdgeAttestation): Record<string, unknown> {
  return { serverDigest: a.serverDigest, attested: a.attested, keyNames: [...a.keyNames], ...(a.note !== undefined ? { note: a.note } : {}) };
}

/**
 * Adds the attestation to the `_meta` of the SDK's own `initialize` and `server/discover`
 * results. SDK v2 has no option for a result's `_meta` there, and its handlers set private state
 * (the negotiated version, the client's capabilities), so they are wrapped rather than replaced:
 * both registrations call these methods through the instance at request time (`initialize` in the
 * constructor, `server/discover` there or when the HTTP entry installs it for 2026-07-28).
 */
function stampContractsMeta(server: McpServer, attestation: EdgeAttestation): void {
  type Handlers = { _oninitialize(request: unknown): Promise<Record<string, unknown>>; _ondiscover(): Record<string, unknown> };
  const inner = server.server as unknown as Handlers;
  const withMeta = (result: Record<string, unknown>) => ({
    ...result,
    _meta: { ...(result._meta as Record<string, unknown> | undefined), [CONTRACTS_META_KEY]: contractsMeta(attestation) },
  });
  const initialize = inner._oninitialize.bind(inner);
  const discover = inner._ondiscover.bind(inner);
  inner._oninitialize = async (request) => withMeta(await initialize(request));
  inner._ondiscover = () => withMeta(discover());
}

/**
 * Why a tool is not served to `tenant`: its toolset is not among those the tenant's operator
 * enabled (`chaos-core tenants settings --toolsets`), or, where none were chosen (no registry,
 * or an empty list), not a default one (finance-reference is opt-in). Read at each listing and call.
 */
function toolsetRefusal(deps: EdgeDeps, tenant: string): (tool: ToolDefinition) => string | undefined {
  return (tool) => {
    // An upstream's tool is offered by exposure, not by a toolset.
    if (tool.upstream) return undefined;
    const toolsets = servedToolsets(deps.enabledToolsets?.(tenant));
    if (toolsets.includes(tool.toolset)) return undefined;
    return `${tool.name} belongs to the ${tool.toolset} toolset, which the operator has not enabled for tenant "${tenant}" (enabled: ${toolsets.join(", ")})`;
  };
}

/**
 * Why an upstream tool is not served now, as cognition last said (docs/federation.md §4): it is
 * quarantined (its definition drifted from its pin) or no longer served at all. Read at each
 * listing and call, so a quarantine and an approval reach sessions opened before them.
 */
function upstreamDrift(deps: EdgeDeps, tenant: string, capability: string): string | undefined {
  const current = deps.upstreams?.capabilities(tenant).find((c) => c.name === capability);
  if (!current) return `${capability}: no longer served by cognition`;
  return current.upstream?.quarantined || undefined;
}

/** What a client sees of an upstream tool: when it differs, the session serves the tool anew. */
function upstreamSurface(tool: ToolDefinition): string {
  return JSON.stringify([tool.title, tool.description, tool.annotations, tool.upstream?.inputSchema]);
}

/**
 * Whether a request whose credential is `auth` is offered each tool now (docs/federation.md §6):
 * an upstream tool by its grants as cognition last sent them and the request's own roles (they
 * travel per request, so a session used with two keys of its principal lists and calls what each
 * key's roles are offered); every other tool, yes. A tool cognition no longer serves is left to
 * `upstreamDrift`.
 */
function offeredToRequest(deps: EdgeDeps, scope: ServerScope): (auth: AuthInfo | undefined) => (tool: ToolDefinition) => boolean {
  return (auth) => {
    let current: Map<string, Capability> | undefined;
    const who = { tenant: scope.tenant, principal: scope.principal, roles: [...rolesOf(auth, scope)] };
    return (tool) => {
      if (!tool.upstream) return true;
      current ??= new Map((deps.upstreams?.capabilities(scope.tenant) ?? []).map((c) => [c.name, c]));
      const capability = current.get(tool.upstream.capability);
      return capability === undefined || offerOf(capability, who) === "tools";
    };
  };
}

/**
 * Holds `tools/list` to {@link offeredToRequest}: the SDK's own listing (registered, enabled
 * tools), less the upstream tools this request's credential is not offered. The SDK installs its
 * handler with the first tool registered (none registered: nothing to list); its stored handler
 * is read through the protocol's `_getRequestHandler` — should an SDK upgrade take that away,
 * building a server fails here rather than list every key's tools to every key
 * (transport/sdk-internals.test.ts guards it).
 */
function listOfferedTools(server: McpServer, offeredTo: (auth: AuthInfo | undefined) => (tool: ToolDefinition) => boolean, tools: ReadonlyMap<string, ToolDefinition>): void {
  if (tools.size === 0) return;
  type Handler = (request: unknown, ctx: { http?: { authInfo?: AuthInfo } }) => Promise<{ tools: Array<{ name: string }> }>;
  const inner = server.server as unknown as { _getRequestHandler?(method: string): Handler | undefined };
  const list = inner._getRequestHandler?.("tools/list");
  if (!list) throw new Error("the MCP SDK no longer hands out its tools/list handler (_getRequestHandler): fix listOfferedTools in server/create-server.ts");
  server.server.setRequestHandler("tools/list", async (request, ctx) => {
    const listed = await list(request, ctx);
    const offered = offeredTo(ctx.http?.authInfo);
    const tool = (name: string) => tools.get(name);
    return { ...listed, tools: listed.tools.filter((t) => tool(t.name) === undefined || offered(tool(t.name)!)) } as never;
  });
}

/**
 * Tells a session's client that its tool list changed (`notifications/tools/list_changed`), after
 * adding the upstream tools it does not have yet (registering one already tells the client).
 */
export async function announceToolsChanged(server: McpServer): Promise<void> {
  const added = server instanceof ChaosCoreMcpServer ? (server.addUpstreamTools?.() ?? 0) : 0;
  if (added === 0) await server.server.sendToolListChanged();
}

/** The name clients see in `serverInfo`. */
export const SERVER_NAME = "chaos-core";

const INSTRUCTIONS =
  "Chaos Core is a governed control plane. Policy decides before any tool touches a service: a " +
  "policy_denied or approval_required result is final for that call, not something to retry. " +
  "Use chaoscore_inspect to see the policy and what is available.";

export interface CreateServerOptions {
  /** The tools to serve; every tool of {@link TOOL_DEFINITIONS} by default. */
  readonly tools?: readonly ToolDefinition[];
  /** The prompts to serve; every prompt of {@link PROMPT_DEFINITIONS} by default. */
  readonly prompts?: readonly PromptDefinition[];
  /** The resources to serve; every resource of {@link RESOURCE_DEFINITIONS} by default. */
  readonly resources?: readonly ResourceDefinition[];
}

/**
 * The rug-pull guard's refusals in front of the SDK's dispatch (which would answer "… disabled"):
 * a `prompts/get` of a drifted prompt or a `resources/read` of a drifted resource is a JSON-RPC
 * invalid-params error whose message starts with `contract_drift:` and names the section, as
 * prompt and resource failures are answered (`register-prompts.ts`, `register-resources.ts`).
 */
function refuseDrifted(transport: Transport, drift: ServedDrift): void {
  const dispatch = transport.onmessage;
  transport.onmessage = (message, extra) => {
    if (isJSONRPCRequest(message) && (message.method === "prompts/get" || message.method === "resources/read")) {
      const params = message.params as Record<string, unknown> | undefined;
      const prompt = message.method === "prompts/get";
      const key = prompt ? params?.name : params?.uri;
      const drifted = typeof key !== "string" ? undefined : prompt ? drift.prompt(key) : drift.resource(key);
      if (drifted !== undefined) {
        const what = prompt ? "prompt" : "resource";
        const refusal = {
          jsonrpc: "2.0" as const,
          id: message.id,
          error: {
            code: ProtocolErrorCode.InvalidParams,
            message: `contract_drift: ${drifted}: this ${what} no longer matches its pinned contract and is not served`,
            data: { code: "contract_drift", ...(prompt ? {} : { uri: key }) },
          },
        };
        transport.send(refusal).catch((err: unknown) => transport.onerror?.(err instanceof Error ? err : new Error(String(err))));
        return;
      }
    }
    return dispatch?.(message, extra);
  };
}

/** The guard's answer for a prompt by name and a resource by URI; undefined when it is served (or not ours). */
interface ServedDrift {
  prompt(name: string): string | undefined;
  resource(uri: string): string | undefined;
}

/**
 * An McpServer whose every transport screens tool calls in our one place before the SDK
 * dispatches them; what the screen finds in a call's raw arguments waits in `screen` for the
 * tool's handler (server/tool-arguments.ts).
 */
class ChaosCoreMcpServer extends McpServer {
  readonly screen = new ArgumentScreen();
  /** The run-time guard's answers for prompts and resources (docs/contracts.md §7); unset where no lock was read. */
  servedDrift?: ServedDrift;
  /** Holds reads, prompts and completions to the tenant's limits (request-limits.ts); unset without a limiter. */
  limitRequests?: (transport: Transport) => void;
  /** Registers the upstream tools cognition serves now that this server does not have yet; how many. */
  addUpstreamTools?: () => number;

  constructor(
    info: Implementation,
    options: ServerOptions,
    private readonly toolsByName: Map<string, ToolDefinition>,
    private readonly scope: ServerScope,
    private readonly drift?: (tool: ToolDefinition) => string | undefined,
    private readonly unserved?: (tool: ToolDefinition) => string | undefined,
    private readonly offeredTo?: (auth: AuthInfo | undefined) => (tool: ToolDefinition) => boolean,
  ) {
    super(info, options);
  }

  override async connect(transport: Transport): Promise<void> {
    await super.connect(transport);
    guardToolCalls(transport, this.toolsByName, this.screen, this.drift, this.unserved, this.offeredTo);
    if (this.servedDrift) refuseDrifted(transport, this.servedDrift);
    // Before the guards, as a tool call's limits come before its checks: a request over the limit runs nothing.
    this.limitRequests?.(transport);
    // Outermost, so a refusal the guard sends still ends the request's span.
    traceMcpMessages(transport, this.scope);
  }
}

/**
 * Builds the MCP server of one 2025-11-25 session or of one 2026-07-28 request: the whole tool
 * surface from one list, the prompts from another, the logging capability, and nothing that
 * knows which transport carries it. Both transports (stdio and Streamable HTTP) call this, once
 * per MCP session, and the HTTP transport's 2026-07-28 handler once per request.
 */
export function createChaosCoreServer(deps: EdgeDeps, scope: ServerScope, options: CreateServerOptions = {}): McpServer {
  // The edge's own tools, then the upstream tools cognition serves that this caller is offered as
  // tools (docs/federation.md §6): one it is not offered is not there, and its calls are unknown.
  // Its tenant's own registry upstreams' tools among them (docs/federation.md §12). A 2026-07-28
  // request's server registers what its credential's roles are offered; a session's, what its
  // principal could be offered under any roles, each request then listing and calling only what
  // its own roles are offered (offeredToRequest).
  const registrable = (c: Capability) => (isModernScope(scope) ? offerOf(c, scope) : mostOfferOf(c, scope)) === "tools";
  const offeredTools = () => (deps.upstreams?.capabilities(scope.tenant) ?? []).filter(registrable).map(upstreamToolDefinition);
  const upstreamTools = options.tools ? [] : offeredTools();
  const tools = [...(options.tools ?? TOOL_DEFINITIONS), ...upstreamTools];
  // The run-time rug-pull guard (docs/contracts.md §7), where the start check read a lock; an
  // upstream's tool is held to its own pin instead.
  const guard = deps.contracts ? guardFor(deps.contracts) : undefined;
  const drift = (tool: ToolDefinition) => (tool.upstream ? upstreamDrift(deps, scope.tenant, tool.upstream.capability) : guard?.toolDrift(tool));
  const unserved = toolsetRefusal(deps, scope.tenant);
  const prompts = options.prompts ?? PROMPT_DEFINITIONS;
  const resources = options.resources ?? RESOURCE_DEFINITIONS;
  const modern = isModernScope(scope);
  const delivered = deps.deliversChangeEvents === true;
  const toolsByName = new Map(tools.map((t) => [t.name, t]));
  const offeredTo = offeredToRequest(deps, scope);
  const server = new ChaosCoreMcpServer(
    { name: SERVER_NAME, title: "Chaos Core", version: deps.version },
    // What SDK v1 advertised (its registerTool raised tools.listChanged to true; registerPrompt
    // sets prompts.listChanged, in v1 and v2 alike), so initialize answers as it did.
    {
      // The upstream tools change while serving (docs/federation.md §6): a 2025-11-25 session is
      // told on its stream, a 2026-07-28 client on subscriptions/listen where change events are
      // delivered (Streamable HTTP; not a stateless stdio connection).
      capabilities: { logging: {}, tools: { listChanged: !modern || delivered } },
      instructions: INSTRUCTIONS,
      // A 2026-07-28 server also answers server/discover (the SDK installs it when a modern
      // revision is listed); a session's server stays exactly as it was.
      ...(modern ? { supportedProtocolVersions: [MODERN_PROTOCOL_VERSION, ...SUPPORTED_PROTOCOL_VERSIONS], cacheHints: CACHE_HINTS } : {}),
      // Every echoed requestState is opened with the operator's keyring and bound to this
      // credential before any handler runs (docs/protocol.md §7). A 2025-11-25 session is asked
      // over its own stream and is never handed a state, so it has no hook.
      ...(modern
        ? { requestState: { verify: requestStateVerifier(deps, scope, deps.logger.child({ tenant: scope.tenant, principal: scope.principal })) } }
        : {}),
    },
    toolsByName,
    scope,
    drift,
    unserved,
    offeredTo,
  );
  if (deps.contracts) stampContractsMeta(server, deps.contracts);
  const limiter = deps.limiter;
  if (limiter) server.limitRequests = (transport) => limitRequests(transport, limiter, scope, deps.logger);
  const registered = registerTools(server, tools, deps, scope, server.screen, guard, unserved, drift);
  listOfferedTools(server, offeredTo, toolsByName);
  if (!options.tools) {
    // An upstream tool cognition begins to serve after this server was built (approved, pinned,
    // or read once the stores opened) joins it; one it stops serving is hidden by `drift`; one an
    // approval re-pinned with a new schema, description or annotations is served as pinned now.
    server.addUpstreamTools = () => {
      const offered = offeredTools();
      for (const t of offered) {
        const had = toolsByName.get(t.name);
        if (had?.upstream && upstreamSurface(had) !== upstreamSurface(t)) {
          registered.get(t.name)?.remove();
          registered.delete(t.name);
          toolsByName.delete(t.name);
        }
      }
      const added = offered.filter((t) => !toolsByName.has(t.name));
      for (const t of added) toolsByName.set(t.name, t);
      for (const [name, tool] of registerTools(server, added, deps, scope, server.screen, guard, unserved, drift)) registered.set(name, tool);
      return added.length;
    };
  }
  registerPrompts(server, prompts, deps, scope, guard ? (p) => guard.promptDrift(p) : undefined);
  registerResources(server, resources, deps, scope, guard ? (r) => guard.resourceDrift(r) : undefined);
  if (guard) {
    server.servedDrift = {
      prompt: (name) => {
        const p = prompts.find((x) => x.name === name);
        return p && guard.promptDrift(p);
      },
      resource: (uri) => {
        const r = resourceAt(resources, uri);
        return r && guard.resourceDrift(r);
      },
    };
  }
  if (isModernScope(scope)) {
    // registerPrompt raised prompts.listChanged; the prompt list never changes while serving.
    server.server.registerCapabilities({ prompts: { listChanged: false } });
    return server;
  }
  const session = scope;

  // The SDK keeps the level a client sets in a map inside this process; another replica serving
  // the same session would not see it. The level goes to the session store instead, which the
  // tools read when they log.
  server.server.setRequestHandler("logging/setLevel", async (request) => {
    const updated = await deps.sessions.update(session.tenant, session.id, { logLevel: request.params.level });
    if (!updated) throw new ProtocolError(ProtocolErrorCode.InvalidRequest, "this session has expired; initialize a new one");
    session.levelSeen = { logLevel: updated.logLevel };
    return {};
  });
  return server;
}
