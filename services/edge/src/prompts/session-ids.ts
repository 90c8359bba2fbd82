import type { CallContext } from "@chaos-core/kit";
import type { EdgeDeps } from "../deps/edge-deps.js";

/** The most values one completion returns (the MCP limit). */
export const COMPLETION_MAX = 100;

const ID_PREFIX = /^[0-9a-f-]{0,36}$/;

/**
 * The caller's tenant's council session ids that start with `value`, newest first, at most 100:
 * what every session id completion offers (the `council_phase_brief` prompt's `sessionId`, the
 * `{id}` of both council resource templates). A value no id can start with completes to nothing.
 */
export async function completeSessionId(value: string, ctx: { call: CallContext; deps: EdgeDeps; signal: AbortSignal }): Promise<string[]> {
  if (!ID_PREFIX.test(value)) return [];
  const res = await ctx.deps.council.listSessions({ prefix: value, limit: COMPLETION_MAX }, { ctx: ctx.call, signal: ctx.signal });
  return res.sessions.map((s) => s.sessionId);
}
