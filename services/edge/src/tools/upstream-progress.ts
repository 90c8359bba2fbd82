import { ChaosError } from "@chaos-core/kit";
import type { ExecuteResponse } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { RUN_TIMEOUT_MS } from "./cognition-shapes.js";
import type { ExecuteSteps } from "./run-capability.js";

/**
 * Runs an upstream tool's step so that what the upstream reports about the call reaches the MCP
 * caller (docs/federation.md §7). When the caller asked for progress, through ExecuteStream: each
 * line the step reports (`files: 3/10`, `files: [info] …`) goes on as `notifications/progress`,
 * numbered by this call — an upstream's own numbers and its log lines interleave, and the value
 * must increase. Otherwise the unary Execute, as for every other capability.
 */
export const executeWithProgress: ExecuteSteps = async (ctx, request) => {
  const options = { ctx: ctx.call, signal: ctx.signal, timeoutMs: RUN_TIMEOUT_MS };
  if (!ctx.progressRequested) return ctx.deps.cognition.execute(request, options);
  let sent = 0;
  let result: ExecuteResponse | undefined;
  for await (const res of ctx.deps.cognition.executeStream({ execute: request }, options)) {
    if (res.event.case === "progress") await ctx.progress(++sent, undefined, res.event.value.message);
    else if (res.event.case === "result") result = res.event.value;
  }
  if (!result) throw new ChaosError("internal", "cognition ended the steps' stream without their results");
  return result;
};
