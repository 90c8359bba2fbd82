import type { McpServer, CallToolResult, RegisteredTool, ClientCapabilities, ElicitResult, InputRequiredResult, LoggingLevel, ServerContext } from "@modelcontextprotocol/server";
import { ATTR, ChaosError, inRequestSpan, isObject, recordToolCall, toMcpErrorResult, type CallContext, type Logger } from "@chaos-core/kit";
import { rolesOf } from "../auth/identity.js";
import { consoleLink } from "../deps/console-links.js";
import type { ContractGuard } from "../contracts/guard.js";
import { explainAgainstPinned, pinnedDigestOf, TOOL_CONTRACT_META_KEY } from "../contracts/pinned.js";
import { servedWhile } from "../contracts/served-while.js";
import { RateLimited, RETRY_AFTER_META_KEY } from "../limits/limiter.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import { isModernScope, type EdgeSession, type ModernScope, type ServerScope } from "../sessions/server-scope.js";
import { InputRequiredSignal, isInputRequired, type ClientElicitation, type HumanAsk, type ModernRequest, type ResumedRound, type ToolContext, type ToolDefinition } from "../definitions/tool.js";
import { answerOf, askResult, questionDigest, resumeRound } from "./mrtr-round.js";
import { logAtMcpLevel, reachesClient } from "./logging.js";
import { publishedArguments, publishedResult, publishedUpstreamArguments, withErrorAlternative } from "../definitions/tool-schemas.js";
import { checkToolArguments, type ArgumentScreen } from "./tool-arguments.js";
import { credentialFacts, mintRequestRef, withCredentialSubject } from "./scope.js";

type Extra = ServerContext;

/** How long a person has to answer an elicitation before the call gives up. */
const ELICIT_TIMEOUT_MS = 10 * 60_000;

const LOG_LEVELS: ReadonlySet<string> = new Set(["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]);

/**
 * What a 2026-07-28 request's own `_meta` envelope says about its client (the SDK validated its
 * shape): servers "MUST NOT infer capabilities from prior requests", so nothing else counts.
 */
export function modernRequestOf(extra: Extra, requestRef: string): ModernRequest {
  // The SDK's published type of the envelope is empty; its ladder checked the fields' shapes.
  const envelope = (extra.mcpReq.envelope ?? {}) as Record<string, unknown>;
  const level = envelope["io.modelcontextprotocol/logLevel"];
  const version = envelope["io.modelcontextprotocol/protocolVersion"];
  const record = (v: unknown): Record<string, unknown> => (isObject(v) ? { ...v } : {});
  return {
    requestRef,
    protocolVersion: typeof version === "string" ? version : "2026-07-28",
    clientInfo: record(envelope["io.modelcontextprotocol/clientInfo"]),
    clientCapabilities: record(envelope["io.modelcontextprotocol/clientCapabilities"]),
    ...(typeof level === "string" && LOG_LEVELS.has(level) ? { logLevel: level as LoggingLevel } : {}),
  };
}

/**
 * The signed call context of one call: the session's (2025-11-25) or a fresh request ref
 * (2026-07-28), with the roles and tenant generation of the request's credential (scope.ts).
 */
function callOf(scope: ServerScope, modern: ModernRequest | undefined, extra: Extra): CallContext {
  const auth = extra.http?.authInfo;
  const facts = credentialFacts(auth, scope);
  if (modern) return withCredentialSubject({ tenant: scope.tenant, principal: scope.principal, requestRef: modern.requestRef, ...facts }, auth, scope);
  return withCredentialSubject({ tenant: scope.tenant, principal: scope.principal, sessionId: (scope as EdgeSession).id, ...facts }, auth, scope);
}

function toolContext(
  server: McpServer,
  deps: EdgeDeps,
  scope: ServerScope,
  log: Logger,
  extra: Extra,
  modern: ModernRequest | undefined,
  resumed: ResumedRound | undefined,
): ToolContext {
  // 2025-11-25: the level lives in the session store, not in this process: the client may have
  // set it through another replica. As the record read when this request was resolved said it,
  // or else read once per call, and only when something is logged.
  const seen = (scope as EdgeSession).levelSeen;
  let minimum: Promise<LoggingLevel | undefined> | undefined = seen ? Promise.resolve(seen.logLevel) : undefined;
  const clientLevel = () =>
    (minimum ??= deps.sessions.get(scope.tenant, (scope as EdgeSession).id).then(
      (r) => r?.logLevel,
      () => undefined,
    ));
  // 2026-07-28: the request's envelope names the level; without one the server "MUST NOT send
  // any notifications/message".
  const sendsAt = async (level: LoggingLevel) =>
    modern ? modern.logLevel !== undefined && reachesClient(level, modern.logLevel) : reachesClient(level, await clientLevel());
  return {
    call: callOf(scope, modern, extra),
    deps,
    signal: extra.mcpReq.signal,
    ...(modern ? { modern } : {}),
    async log(level, message, data = {}) {
      logAtMcpLevel(log, level, data, message);
      if (!(await sendsAt(level))) return;
      await extra.mcpReq.notify({
        method: "notifications/message",
        params: { level, logger: "chaos-core", data: { message, ...data } },
      });
    },
    async progress(progress, total, message) {
      const progressToken = extra.mcpReq._meta?.progressToken;
      if (progressToken === undefined) return;
      await extra.mcpReq.notify({
        method: "notifications/progress",
        params: { progressToken, progress, ...(total !== undefined ? { total } : {}), ...(message ? { message } : {}) },
      });
    },
    progressRequested: extra.mcpReq._meta?.progressToken !== undefined,
    roles: rolesOf(extra.http?.authInfo, scope),
    client: modern ? modernElicitation(deps, modern) : legacyElicitation(server.server.getClientCapabilities()),
    resumed,
    answer: (key) => answerOf(extra, resumed, key),
    ask: async (question) => {
      if (!modern) return askInSession(extra, question);
      // 2026-07-28: an answer counts only in the round that resumed this exact question.
      const digest = questionDigest(question);
      if (resumed && resumed.key === question.key && resumed.question === digest) {
        const answer = answerOf(extra, resumed, question.key);
        if (answer.kind !== "missing") return { action: answer.kind, ...(answer.content ? { content: answer.content as ElicitResult["content"] } : {}) };
      }
      throw new InputRequiredSignal(question, digest);
    },
    // 2026-07-28 has no elicitation id: the retried call's result ends the interaction.
    notifyElicitationComplete: (elicitationId) =>
      modern ? Promise.resolve() : extra.mcpReq.notify({ method: "notifications/elicitation/complete", params: { elicitationId } }),
    // The Host of this call's HTTP request (none over stdio); the transport that serves the
    // console says, in deps.console, whether that Host was validated.
    consoleUrl: (path) => consoleLink(deps.console, path, extra.http?.req?.headers.get("host") ?? undefined),
  };
}

/** The elicitation modes a client declared. */
export interface ElicitModes {
  readonly form: boolean;
  readonly url: boolean;
}

/**
 * The elicitation modes a client declared (`capabilities.elicitation`): none without the
 * capability; an empty object is form mode (the spec's backwards-compatible reading, which the
 * SDK applies at initialize too); otherwise each mode it names.
 */
export function elicitModes(capabilities: ClientCapabilities | undefined): ElicitModes {
  const e = capabilities?.elicitation;
  if (!e) return { form: false, url: false };
  const form = e.form !== undefined;
  const url = e.url !== undefined;
  return { form: form || !url, url };
}

/** The elicitation modes of a 2025-11-25 session: what its client declared at initialize. */
function legacyElicitation(capabilities: ClientCapabilities | undefined): ClientElicitation {
  const modes = elicitModes(capabilities);
  return { formElicitation: modes.form, urlElicitation: modes.url };
}

/**
 * The elicitation modes of a 2026-07-28 request: what its own envelope declares, asked through
 * multi-round-trip results, which need a keyring to seal their state (none → never asked).
 */
function modernElicitation(deps: EdgeDeps, modern: ModernRequest): ClientElicitation {
  if (!deps.mrtrKeyring) return { formElicitation: false, urlElicitation: false };
  const modes = elicitModes(modern.clientCapabilities as ClientCapabilities);
  return { formElicitation: modes.form, urlElicitation: modes.url };
}

/**
 * 2025-11-25: asks through an `elicitation/create` request on the call's own channel (over HTTP,
 * the POST's event stream), not the session's standalone stream, which the client may never
 * have opened.
 */
function askInSession(extra: Extra, q: HumanAsk): Promise<ElicitResult> {
  if (q.mode === "form") {
    return extra.mcpReq.send(
      { method: "elicitation/create", params: { mode: "form", message: q.message, requestedSchema: q.requestedSchema } },
      { signal: extra.mcpReq.signal, timeout: ELICIT_TIMEOUT_MS },
    );
  }
  return extra.mcpReq.send(
    { method: "elicitation/create", params: { mode: "url", elicitationId: q.elicitationId, url: q.url, message: q.message } },
    { signal: extra.mcpReq.signal, timeout: Math.max(1, Math.min(q.timeoutMs ?? ELICIT_TIMEOUT_MS, ELICIT_TIMEOUT_MS)) },
  );
}

/**
 * Registers every tool of `tools` on `server`: the one place a definition becomes an MCP tool.
 * Results carry `structuredContent` and the same JSON as text; errors are mapped once, by kit's
 * `toMcpErrorResult`, to `isError` results with a stable code. Arguments reach `run` only after
 * `tool-arguments.ts` accepted them (unknown fields are refused: the published schema says so);
 * `screen` holds what the connection's guard found in the raw arguments.
 */
export function registerTools(
  server: McpServer,
  tools: readonly ToolDefinition[],
  deps: EdgeDeps,
  scope: ServerScope,
  screen: ArgumentScreen,
  guard?: ContractGuard,
  unserved?: (tool: ToolDefinition) => string | undefined,
  drift?: (tool: ToolDefinition) => string | undefined,
): Map<string, RegisteredTool> {
  const modernScope = isModernScope(scope);
  const done = new Map<string, RegisteredTool>();
  for (const tool of tools) {
    const log = deps.logger.child({
      tenant: scope.tenant,
      principal: scope.principal,
      ...(modernScope ? {} : { session: (scope as EdgeSession).id }),
      tool: tool.name,
    });
    // An upstream's tool is held to upstreams.lock (docs/federation.md §4), never to chaoscore.lock.
    const toolGuard = tool.upstream ? undefined : guard;
    const contractDigest = toolGuard?.pinnedDigest(tool.name);
    const registered = server.registerTool(
      tool.name,
      {
        title: tool.title,
        description: tool.description,
        // Published strict; checked below, in the handler (the SDK's own check accepts anything).
        // An upstream's tool: the schema it published and its pin holds; its content has no output schema.
        ...(tool.upstream
          ? { inputSchema: publishedUpstreamArguments(tool.upstream.inputSchema) }
          : { inputSchema: publishedArguments(tool.input), outputSchema: publishedResult(withErrorAlternative(tool.output)) }),
        // The title once, at the top: annotations.title would only repeat it (MCP reads `title` first).
        annotations: { ...tool.annotations },
        // The digest a client pins and may send back with its calls (docs/contracts.md §9).
        ...(contractDigest ? { _meta: { [TOOL_CONTRACT_META_KEY]: { digest: contractDigest } } } : {}),
      },
      async (raw: unknown, extra: Extra): Promise<CallToolResult | InputRequiredResult> => {
        // The tenant's quotas first (issue 13 item 7): a call over its limit, garbage or not, runs nothing.
        if (deps.limiter) {
          try {
            await deps.limiter.admit({ tenant: scope.tenant, principal: scope.principal, tool: tool.name, readOnly: tool.annotations.readOnlyHint });
          } catch (err) {
            log.info({ outcome: ChaosError.from(err).code }, "tool call refused before it ran: rate limit");
            // When to retry, for a client to act on without reading the message.
            return err instanceof RateLimited ? { ...toMcpErrorResult(err), _meta: { [RETRY_AFTER_META_KEY]: err.retryAfterMs } } : toMcpErrorResult(err);
          }
        }
        let checked: ReturnType<typeof checkToolArguments>;
        try {
          checked = checkToolArguments(tool, raw, screen.take(extra.mcpReq.id));
        } catch (err) {
          // A check that cannot run must not wave the call through.
          log.error({ err }, "checking a tool call's arguments failed");
          return toMcpErrorResult(new ChaosError("internal", "the arguments could not be checked"));
        }
        // Refused arguments never reached a tool: no span, no tool-call log line, as before the check moved here.
        if ("refusal" in checked) {
          // Built against an older contract? Then the refusal says what changed since (item 8).
          const pinned = contractDigest ? pinnedDigestOf(extra.mcpReq._meta as Record<string, unknown> | undefined) : undefined;
          const since = pinned !== undefined ? guard?.sincePinned(tool.name, pinned) : undefined;
          return since && pinned && contractDigest ? explainAgainstPinned(checked.refusal, pinned, contractDigest, since) : checked.refusal;
        }
        const { args } = checked;
        // 2026-07-28: a retried round's state is bound to this tool and these arguments, and
        // consumed once, before anything runs (docs/protocol.md §7); the retry carries its flow's ref.
        const start = modernScope ? await resumeRound(deps, scope as ModernScope, extra, tool.name, raw, log) : ({ kind: "fresh" } as const);
        if (start.kind === "refused") return start.result;
        const resumed = start.kind === "resumed" ? start.resumed : undefined;
        const modern = modernScope ? modernRequestOf(extra, resumed?.flow ?? mintRequestRef()) : undefined;
        const callLog = modern ? log.child({ request_ref: modern.requestRef }) : log;
        // The call is part of its request's span (server/telemetry.ts: `tools/call <tool>`, joined
        // to the client's trace from _meta); service calls made by the tool become its children.
        return inRequestSpan(
          modern ? { [ATTR.requestRef]: modern.requestRef } : {},
          async (span) => {
            const started = performance.now();
            const ctx = toolContext(server, deps, scope, callLog, extra, modern, resumed);
            let outcome = "ok";
            try {
              const out = (await tool.run(args as never, ctx)) as Record<string, unknown>;
              callLog.info({ outcome, ms: Math.round(performance.now() - started), ...(resumed ? { resumed: true } : {}) }, "tool call");
              // An upstream's answer goes back as the upstream sent it.
              if (tool.upstream) return out as CallToolResult;
              return { content: [{ type: "text", text: JSON.stringify(out) }], structuredContent: out };
            } catch (thrown) {
              let err = thrown;
              if (modern && isInputRequired(thrown)) {
                outcome = "input_required";
                try {
                  const asked = askResult(deps, scope as ModernScope, tool.name, raw, modern.requestRef, thrown);
                  callLog.info({ outcome, ms: Math.round(performance.now() - started), key: thrown.question.key }, "tool call asks the client's user");
                  return asked;
                } catch (sealErr) {
                  // A state that cannot be sealed is a failed call, never an unsealed question.
                  err = sealErr;
                }
              }
              const e = ChaosError.from(err);
              outcome = e.code;
              const fields = { outcome, ms: Math.round(performance.now() - started) };
              if (e.code === "internal") callLog.error({ ...fields, err }, "tool call failed");
              else callLog.info(fields, "tool call refused");
              return toMcpErrorResult(e);
            } finally {
              span.setAttributes({ [ATTR.outcome]: outcome });
              recordToolCall(tool.name, outcome, performance.now() - started);
            }
          },
        );
      },
    );
    // The run-time rug-pull guard (docs/contracts.md §7): the SDK lists only enabled tools and
    // reads this at each tools/list, so a definition that drifted from its pinned contract is
    // left out of the listing from then on (the check is cached per definition object); its
    // calls are refused with contract_drift before the SDK dispatches them (tool-arguments.ts).
    // The tenant's enabled toolsets (docs/tenants.md) are read the same way, at each listing.
    // An upstream's tool is listed while cognition serves it (not quarantined).
    if (drift || unserved) servedWhile(registered, () => drift?.(tool) === undefined && unserved?.(tool) === undefined);
    done.set(tool.name, registered);
  }
  return done;
}
