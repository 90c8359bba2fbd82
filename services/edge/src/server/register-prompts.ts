import { z } from "zod";
import { completable, ProtocolError, ProtocolErrorCode } from "@modelcontextprotocol/server";
import type { McpServer, GetPromptResult, ServerContext } from "@modelcontextprotocol/server";
import { ChaosError, inRequestSpan, type Logger } from "@chaos-core/kit";
import { servedWhile } from "../contracts/served-while.js";
import type { EdgeDeps } from "../deps/edge-deps.js";
import type { ServerScope } from "../sessions/server-scope.js";
import type { PromptArgs, PromptContext, PromptDefinition } from "../definitions/prompt.js";
import { scopedCall, scopeLogFields } from "./scope.js";

type Extra = ServerContext;

/**
 * A prompt has no `isError` result: a failure is a JSON-RPC error. Bad arguments and an unknown
 * session are the caller's to fix (invalid params); anything else is an internal error whose
 * message is kit's normalised one, so unexpected details never leave the process.
 */
function toMcpError(err: unknown): ProtocolError {
  const e = ChaosError.from(err);
  const code = e.code === "invalid_argument" || e.code === "not_found" ? ProtocolErrorCode.InvalidParams : ProtocolErrorCode.InternalError;
  return new ProtocolError(code, `${e.code}: ${e.message}`, { code: e.code });
}

/**
 * The prompt's argument schemas, those with a completion made completable for this server.
 * `completable` marks the schema object itself, so each server gets its own copy (`clone`);
 * the SDK passes the callback no request context, so the tenant is the server's scope's.
 */
function completableArgs(prompt: PromptDefinition, deps: EdgeDeps, scope: ServerScope, log: Logger): PromptArgs {
  const args: PromptArgs = { ...(prompt.args ?? {}) };
  for (const [name, complete] of Object.entries(prompt.complete ?? {})) {
    const schema = args[name];
    if (!schema || !complete) continue;
    args[name] = completable(schema.clone(), async (value: string | undefined) => {
      const ctx: PromptContext = { call: scopedCall(scope).call, deps, signal: new AbortController().signal };
      try {
        return await complete(value ?? "", ctx);
      } catch (err) {
        // A completion is a hint: a failure completes to nothing rather than failing the client's input.
        log.warn({ err, argument: name }, "completion failed");
        return [];
      }
    }) as typeof schema;
  }
  return args;
}

/**
 * Registers every prompt of `prompts` on `server`: the one place a definition becomes an MCP
 * prompt. Identical on every transport, like the tools.
 */
export function registerPrompts(
  server: McpServer,
  prompts: readonly PromptDefinition[],
  deps: EdgeDeps,
  scope: ServerScope,
  drift?: (prompt: PromptDefinition) => string | undefined,
): void {
  for (const prompt of prompts) {
    const log = deps.logger.child({ ...scopeLogFields(scope), prompt: prompt.name });
    const render = (args: Record<string, string>, extra: Extra): Promise<GetPromptResult> => {
      // 2026-07-28: no session; each request its own ref (docs/protocol.md §5).
      const { call, spanAttrs } = scopedCall(scope, extra.http?.authInfo);
      return inRequestSpan(
        spanAttrs,
        async () => {
          const ctx: PromptContext = { call, deps, signal: extra.mcpReq.signal };
          try {
            return await prompt.get(args as never, ctx);
          } catch (err) {
            const mapped = toMcpError(err);
            if (mapped.code === ProtocolErrorCode.InternalError) log.error({ err }, "prompt failed");
            else log.info({ outcome: ChaosError.from(err).code }, "prompt refused");
            throw mapped;
          }
        },
      );
    };
    // Always with an argument schema (empty for none), a zod object of our own zod (SDK v2's
    // raw-shape form is deprecated and wraps with the SDK's copy of zod).
    const registered = server.registerPrompt(
      prompt.name,
      { title: prompt.title, description: prompt.description, argsSchema: z.object(completableArgs(prompt, deps, scope, log)) },
      (args, ctx) => render(args as Record<string, string>, ctx),
    );
    // The run-time rug-pull guard (docs/contracts.md §7): the SDK lists only enabled prompts and
    // reads this at each prompts/list, so a drifted prompt is left out; its prompts/get is
    // refused with contract_drift before the SDK dispatches it (create-server.ts).
    if (drift) servedWhile(registered, () => drift(prompt) === undefined);
  }
}
