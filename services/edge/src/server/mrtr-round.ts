/**
 * Multi-round-trip requests (MRTR, 2026-07-28) in the edge's MCP layer (docs/protocol.md §7):
 * the SDK's `requestState.verify` hook, the binding and single-use checks a retried round passes
 * before its tool runs, and the sealed `input_required` result a round that asks ends with. Tool
 * code never sees any of it: it calls `ctx.ask` and gets an answer.
 */
import { createHash } from "node:crypto";
import { canonicalJson, ChaosError, toMcpErrorResult, type CallContext, type Logger } from "@chaos-core/kit";
import { inputRequired, inputResponse, type CallToolResult, type InputRequiredResult, type ServerContext } from "@modelcontextprotocol/server";
import type { EdgeDeps } from "../deps/edge-deps.js";
import type { ModernScope } from "../sessions/server-scope.js";
import { argumentsDigest, checkRequestStateTarget, openRequestState, sealRequestState, type RequestStatePayload } from "../mrtr/sealed-state.js";
import { consumeRequestState, recordRequestStateRefusal } from "../mrtr/single-use.js";
import type { HumanAnswerView, HumanAsk, InputRequiredSignal, ResumedRound } from "../definitions/tool.js";
import { mintRequestRef } from "./scope.js";

/** `CHAOS_CORE_MRTR_TTL_SECONDS` when the composition root did not set it. */
export const DEFAULT_MRTR_TTL_SECONDS = 600;

/** Carried fields sit beside the state's own under this prefix, so no name of a tool's can clash with one. */
const CARRY_PREFIX = "c_";

/** What the verify hook hands the handler through `ctx.mcpReq.requestState()`. */
export interface VerifiedState {
  readonly verified: true;
  readonly kid: string;
  readonly payload: RequestStatePayload;
}

function isVerifiedState(value: unknown): value is VerifiedState {
  return value !== null && typeof value === "object" && (value as { verified?: unknown }).verified === true;
}

/**
 * Hex SHA-256 of what the person is shown and asked: the mode, the message, and the form's schema
 * or the page's URL. A retry's answer counts only for the question its state was sealed with.
 */
export function questionDigest(q: HumanAsk): string {
  const shown = q.mode === "form" ? { mode: q.mode, message: q.message, schema: q.requestedSchema } : { mode: q.mode, message: q.message, url: q.url };
  return createHash("sha256").update(canonicalJson(shown), "utf8").digest("hex");
}

/** Records a refusal, logging (never throwing) when the ledger cannot take it: the state is refused either way. */
async function recordRefusal(deps: EdgeDeps, call: CallContext, refusal: Parameters<typeof recordRequestStateRefusal>[2], log: Logger): Promise<void> {
  try {
    await recordRequestStateRefusal(deps.ledger, call, refusal);
  } catch (err) {
    log.error({ err, reason: refusal.reason }, "the ledger did not record a refused requestState");
  }
}

/**
 * The `ServerOptions.requestState.verify` hook of a 2026-07-28 request's server: opens the
 * sealed state with the keyring and checks it belongs to this credential's tenant and principal,
 * has not expired and was sealed for this method. A refusal is recorded in the ledger
 * (`mrtr.state_refused {reason}`), logged, and thrown: the SDK then answers its frozen `-32602
 * "Invalid or expired requestState"` and nothing runs. The tool and arguments are checked later,
 * by {@link resumeRound} (the hook does not see the params).
 */
export function requestStateVerifier(deps: EdgeDeps, scope: ModernScope, log: Logger): (state: string, ctx: ServerContext) => Promise<VerifiedState> {
  return async (state, ctx) => {
    const keyring = deps.mrtrKeyring;
    const refusedCall: CallContext = { tenant: scope.tenant, principal: scope.principal, requestRef: mintRequestRef() };
    if (!keyring) {
      await recordRefusal(deps, refusedCall, { ok: false, reason: "unknown_kid", problem: "this edge has no MRTR keyring" }, log);
      log.warn({ reason: "unknown_kid" }, "requestState refused: this edge has no MRTR keyring (CHAOS_CORE_MRTR_KEYS_FILE)");
      throw new Error("requestState refused (unknown_kid): this edge has no MRTR keyring");
    }
    const opened = openRequestState(keyring, state, { tenant: scope.tenant, principal: scope.principal, method: ctx.mcpReq.method });
    if (!opened.ok) {
      await recordRefusal(deps, refusedCall, opened, log);
      log.warn({ reason: opened.reason, problem: opened.problem, method: ctx.mcpReq.method }, "requestState refused");
      throw new Error(`requestState refused (${opened.reason}): ${opened.problem}`);
    }
    return { verified: true, kid: opened.kid, payload: opened.payload };
  };
}

/** How a retried round starts: as a fresh call, resumed from a consumed state, or refused. */
export type RoundStart =
  | { readonly kind: "fresh" }
  | { readonly kind: "resumed"; readonly resumed: ResumedRound }
  | { readonly kind: "refused"; readonly result: CallToolResult };

/**
 * A 2026-07-28 round, before its tool runs: no state → a fresh call; a state the hook verified →
 * bound to this tool and these exact arguments (else refused, recorded), then consumed once
 * through the ledger (a second presentation, or no ledger, is refused: nothing runs).
 */
export async function resumeRound(
  deps: EdgeDeps,
  scope: ModernScope,
  extra: ServerContext,
  tool: string,
  rawArguments: unknown,
  log: Logger,
): Promise<RoundStart> {
  const state = extra.mcpReq.requestState();
  if (state === undefined) return { kind: "fresh" };
  // Without a verified state (the hook is always installed on this era; this is belt and braces) nothing runs.
  if (!isVerifiedState(state)) {
    return { kind: "refused", result: toMcpErrorResult(new ChaosError("failed_precondition", "this requestState was not verified: nothing ran; call again without it")) };
  }
  const { payload, kid } = state;
  const call: CallContext = { tenant: scope.tenant, principal: scope.principal, requestRef: payload.flow };
  const target = checkRequestStateTarget(payload, { name: tool, digest: argumentsDigest(rawArguments) });
  if (!target.ok) {
    await recordRefusal(deps, call, { ...target, kid, jti: payload.jti, flow: payload.flow, name: payload.n }, log);
    log.warn({ reason: target.reason, flow: payload.flow }, "requestState refused");
    return {
      kind: "refused",
      result: toMcpErrorResult(
        new ChaosError("failed_precondition", `this requestState belongs to another call (${target.reason === "name" ? "another tool" : "other arguments"}): nothing ran; call again without it`),
      ),
    };
  }
  let consumed;
  try {
    consumed = await consumeRequestState(deps.ledger, call, payload, extra.mcpReq.signal);
  } catch (err) {
    const e = ChaosError.from(err);
    log.error({ err, flow: payload.flow }, "consuming a requestState failed");
    return { kind: "refused", result: toMcpErrorResult(new ChaosError(e.code, `this requestState could not be used once (${e.message}): nothing ran`, { cause: err })) };
  }
  if (!consumed.consumed) {
    log.warn({ reason: consumed.code, flow: payload.flow, entry_seq: Number(consumed.entrySeq) }, "requestState refused");
    const why = consumed.code === "expired" ? "this requestState has expired" : "this requestState was already used";
    return {
      kind: "refused",
      result: toMcpErrorResult(
        new ChaosError(
          "failed_precondition",
          `${why} (recorded in ledger entry ${consumed.entrySeq}): nothing ran; call ${tool} again with the same arguments, without it, to be asked again`,
        ),
      ),
    };
  }
  const carried: Record<string, string> = {};
  for (const [field, value] of Object.entries(payload)) {
    if (field.startsWith(CARRY_PREFIX) && typeof value === "string") carried[field.slice(CARRY_PREFIX.length)] = value;
  }
  return { kind: "resumed", resumed: { flow: payload.flow, key: payload.phase, question: String(payload["q"] ?? ""), carried } };
}

/** The client's answer to `key` in a resumed round ({@link ToolContext.answer}). */
export function answerOf(extra: ServerContext, resumed: ResumedRound | undefined, key: string): HumanAnswerView {
  if (!resumed || resumed.key !== key) return { kind: "missing" };
  const view = inputResponse(extra.mcpReq.inputResponses, key);
  if (view.kind !== "elicit") return { kind: "missing" };
  return { kind: view.action, ...(view.content ? { content: view.content } : {}) };
}

/**
 * Ends a round that asks: the question as an embedded elicitation and a state sealed for this
 * tenant, principal, tool, these arguments, this flow and this question, living
 * `CHAOS_CORE_MRTR_TTL_SECONDS`.
 */
export function askResult(deps: EdgeDeps, scope: ModernScope, tool: string, rawArguments: unknown, flow: string, signal: InputRequiredSignal): InputRequiredResult {
  const keyring = deps.mrtrKeyring;
  // The context reports no elicitation without a keyring, so no tool asks; this is the last guard.
  if (!keyring) throw new ChaosError("failed_precondition", "this edge has no MRTR keyring (CHAOS_CORE_MRTR_KEYS_FILE): the client's user cannot be asked");
  const q = signal.question;
  const { state } = sealRequestState(
    keyring,
    { tenant: scope.tenant, principal: scope.principal, method: "tools/call", name: tool, digest: argumentsDigest(rawArguments), flow, phase: q.key, fields: { ...Object.fromEntries(Object.entries(q.carry ?? {}).map(([k, v]) => [`${CARRY_PREFIX}${k}`, v])), q: signal.digest } },
    { ttlSeconds: deps.mrtrTtlSeconds ?? DEFAULT_MRTR_TTL_SECONDS },
  );
  const request =
    q.mode === "form"
      ? inputRequired.elicit({ mode: "form", message: q.message, requestedSchema: q.requestedSchema })
      : inputRequired.elicitUrl({ url: q.url, message: q.message });
  return inputRequired({ inputRequests: { [q.key]: request }, requestState: state });
}
