import { z } from "zod";
import { ProtocolError, ProtocolErrorCode } from "@modelcontextprotocol/server";
import type { McpServer, GetPromptResult, ServerContext } from "@modelcontextprotocol/server";
import { ATTR, ChaosError, withSpan } from "@chaos-core/kit";
import { isModernScope, type EdgeDeps, type EdgeSession, type ServerScope } from "../deps.js";
import { mintRequestRef } from "./register-tools.js";
import type { PromptContext, PromptDefinition } from "../prompts/define.js";

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
 * Registers every prompt of `prompts` on `server`: the one place a definition becomes an MCP
 * prompt. Identical on every transport, like the tools.
 */
export function registerPrompts(server: McpServer, prompts: readonly PromptDefinition[], deps: EdgeDeps, scope: ServerScope): void {
  const sessionId = isModernScope(scope) ? undefined : (scope as EdgeSession).id;
  for (const prompt of prompts) {
    const log = deps.logger.child({ tenant: scope.tenant, principal: scope.principal, ...(sessionId ? { session: sessionId } : {}), prompt: prompt.name });
    const render = (args: Record<string, string>, extra: Extra): Promise<GetPromptResult> => {
      // 2026-07-28: no session; each request its own ref (docs/protocol.md §5).
      const scoped: { sessionId: string } | { requestRef: string } = sessionId !== undefined ? { sessionId } : { requestRef: mintRequestRef() };
      return withSpan(
        `chaoscore.prompt ${prompt.name}`,
        { [ATTR.tenant]: scope.tenant, ...("sessionId" in scoped ? { [ATTR.session]: scoped.sessionId } : { [ATTR.requestRef]: scoped.requestRef }) },
        async () => {
          const ctx: PromptContext = {
            call: { tenant: scope.tenant, principal: scope.principal, ...scoped },
            deps,
            signal: extra.mcpReq.signal,
          };
          try {
            return await prompt.get(args as never, ctx);
          } catch (err) {
            const mapped = toMcpError(err);
            if (mapped.code === ProtocolErrorCode.InternalError) log.error({ err }, "prompt failed");
            else log.info({ outcome: ChaosError.from(err).code }, "prompt refused");
            throw mapped;
          }
        },
        { carrier: extra.mcpReq._meta },
      );
    };
    // Always with an argument schema (empty for none), a zod object of our own zod (SDK v2's
    // raw-shape form is deprecated and wraps with the SDK's copy of zod).
    server.registerPrompt(
      prompt.name,
      { title: prompt.title, description: prompt.description, argsSchema: z.object(prompt.args ?? {}) },
      (args, ctx) => render(args as Record<string, string>, ctx),
    );
  }
}
