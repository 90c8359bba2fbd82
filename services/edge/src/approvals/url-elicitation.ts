/**
 * URL-mode elicitation to the approval console (docs/approvals.md §3). When a pending approval
 * accepts the console, the console is on and the client declared URL mode (MCP 2025-11-25), the
 * call asks the client to have its user open the approval's console page, and then waits for a
 * person's answer there: the answer comes from the page (or any other channel a person uses),
 * never from the client. `accept` only means the user agreed to open the page; `decline` and
 * `cancel` resolve nothing (a client's answer is nobody's decision).
 *
 * While waiting the call polls cognition (`GetApproval`) or the ledger (`GetSpendRequest`), every
 * second backing off to two, so it works from any edge replica (approvals live in Redis and the
 * ledger, not in this process). It tells the client what it waits for: one `notifications/message`
 * (info) and, when the request carries a progress token, `notifications/progress` at once and
 * every 10 s, so a client that resets its timeout on progress keeps waiting. Once a person
 * answered it sends `notifications/elicitation/complete {elicitationId}` and the tool carries on
 * as if the answer had been given in the call. It gives up after `CHAOS_CORE_APPROVAL_WAIT_SECONDS`
 * (never past the approval's expiry) or when the client cancels the call: the approval stays
 * pending, and the agent's next call picks up whatever a person decided meanwhile.
 *
 * The URL is the console's own page for that one approval, never pre-authenticated (no token):
 * a person signs in there with their own approver credential (the MCP spec's "Safe URL Handling").
 */
import { randomUUID } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { GetApprovalResponse } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { SpendRequest } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { spendPath, stepPath } from "../deps/console-links.js";
import { isInputRequired, type ToolContext } from "../definitions/tool.js";
import { ledgerCall, ledgerOf } from "../definitions/ledger-access.js";
import { acceptedChannels, operatorConsoleCommand } from "./channels.js";

/** `CHAOS_CORE_APPROVAL_WAIT_SECONDS` when the composition root did not set it. */
export const DEFAULT_APPROVAL_WAIT_SECONDS = 300;
/** The longest wait, whatever the configuration says. */
const MAX_APPROVAL_WAIT_SECONDS = 3600;
/** The first poll interval, and the one it backs off to. */
const FIRST_POLL_MS = 1000;
const LONGEST_POLL_MS = 2000;
const POLL_STEP_MS = 250;
/** How often a waiting call tells a client that asked for progress that it is still waiting. */
export const PROGRESS_EVERY_MS = 10_000;
/**
 * How long before the approval's expiry the wait ends at the latest: the call gives up while the
 * approval is still pending, so its answer (and the attempt cognition records) is about a live one.
 */
const EXPIRY_MARGIN_MS = 1000;

/** What a console page is about: a cognition step approval or a ledger spend request. */
export type ConsoleSubject = { readonly kind: "step"; readonly approvalId: string } | { readonly kind: "spend"; readonly requestSeq: number };

/**
 * The console page to send this client's user to for `subject`, or undefined when URL mode does
 * not apply: policy's `channels` must list `console`, the console must be reachable from this
 * call (`ctx.consoleUrl`), and the client must have declared URL-mode elicitation. The caller
 * asks only about an approval that is still pending.
 */
export function consolePageFor(ctx: ToolContext, subject: ConsoleSubject, channels: readonly string[]): string | undefined {
  if (!acceptedChannels(channels).includes("console")) return undefined;
  if (!ctx.client.urlElicitation) return undefined;
  return ctx.consoleUrl(subject.kind === "step" ? stepPath(subject.approvalId) : spendPath(subject.requestSeq));
}

/** How a URL-mode ask ended. */
export type ConsoleWait<T> =
  /** A person answered (the poll returned the answered record); the completion was sent. */
  | { readonly answered: true; readonly value: T; readonly elicitationId: string }
  /**
   * Nobody answered in this call. `why` is a clause for "… has not been answered, and <why>";
   * `cancelled` when the client cancelled the call (nothing more may be sent for it).
   */
  | { readonly answered: false; readonly why: string; readonly cancelled: boolean };

/** One URL-mode ask, as {@link waitForConsoleAnswer} runs it. */
export interface ConsoleAsk<T> {
  readonly url: string;
  /** What the client shows its user next to the link. */
  readonly message: string;
  /** When the approval stops being answerable; the wait never goes past it. */
  readonly expiresAt?: Date;
  /** Names what is waited for in the log line and progress ("approval <id>", "spend request 7"). */
  readonly what: string;
  /** Log fields naming it (`approvalId`, `requestSeq`). */
  readonly fields: Record<string, unknown>;
  /** The answered record once a person answered, undefined while it is pending. */
  poll(): Promise<T | undefined>;
  /** Sealed into a 2026-07-28 round's state for the retry (`HumanAsk.carry`). */
  readonly carry?: Readonly<Record<string, string>>;
}

/** How long this call may wait for a person, in milliseconds. */
function waitMs(ctx: ToolContext): number {
  const seconds = ctx.deps.approvalWaitSeconds ?? DEFAULT_APPROVAL_WAIT_SECONDS;
  return Math.min(Math.max(seconds, 1), MAX_APPROVAL_WAIT_SECONDS) * 1000;
}

/** Waits `ms`, or less when the call is cancelled (then it returns at once, without throwing). */
async function pause(ms: number, signal: AbortSignal): Promise<void> {
  await sleep(ms, undefined, { signal }).catch(() => undefined);
}

const cancelled = <T>(url: string): ConsoleWait<T> => ({
  answered: false,
  cancelled: true,
  why: `the call was cancelled while it waited for a person at ${url}; it stays pending.`,
});

/**
 * Sends the URL elicitation and waits for a person's answer ({@link ConsoleAsk.poll}), as the
 * module comment says. Errors of the poll (a service down) are thrown: nothing is decided then.
 */
export async function waitForConsoleAnswer<T>(ctx: ToolContext, ask: ConsoleAsk<T>): Promise<ConsoleWait<T>> {
  const started = Date.now();
  const budget = waitMs(ctx);
  const lastMoment = ask.expiresAt ? ask.expiresAt.getTime() - EXPIRY_MARGIN_MS : Number.POSITIVE_INFINITY;
  const byExpiry = lastMoment < started + budget;
  const deadline = Math.min(started + budget, lastMoment);
  const expiry = ask.expiresAt?.toISOString();
  if (deadline <= started) {
    return { answered: false, cancelled: false, why: `it expires at ${expiry}, too soon to wait for a person at ${ask.url}.` };
  }
  const elicitationId = randomUUID();
  let reply;
  try {
    reply = await ctx.ask({
      mode: "url",
      key: "console",
      elicitationId,
      url: ask.url,
      message: ask.message,
      timeoutMs: deadline - started,
      ...(ask.carry ? { carry: ask.carry } : {}),
    });
  } catch (err) {
    // A 2026-07-28 round that asks ends here; the client's retry (its user's consent) waits below.
    if (isInputRequired(err)) throw err;
    if (ctx.signal.aborted) return cancelled(ask.url);
    const detail = err instanceof Error ? err.message : String(err);
    return {
      answered: false,
      cancelled: false,
      why: `the client did not answer the request to have its user open ${ask.url} (${detail}); nothing was resolved.`,
    };
  }
  if (reply.action === "decline") {
    return {
      answered: false,
      cancelled: false,
      why: `your user declined to open the approval page (${ask.url}): a client's answer is nobody's decision, so nothing was resolved and it stays pending.`,
    };
  }
  if (reply.action === "cancel") {
    return {
      answered: false,
      cancelled: false,
      why: `your user dismissed the request to open the approval page (${ask.url}) without answering: nothing was resolved and it stays pending.`,
    };
  }

  // Accepted: the user agreed to open the page. What counts is what a person does there.
  const waiting = `waiting for a person at ${ask.url}`;
  const waitStart = Date.now();
  const totalSeconds = Math.max(1, Math.ceil((deadline - waitStart) / 1000));
  await ctx.log("info", `${waiting} to answer ${ask.what} (for up to ${totalSeconds} s)`, { ...ask.fields, url: ask.url, waitSeconds: totalSeconds });
  let nextProgress = waitStart;
  let delay = FIRST_POLL_MS;
  for (;;) {
    if (ctx.signal.aborted) return cancelled(ask.url);
    const now = Date.now();
    if (now >= nextProgress) {
      // Seconds waited so far, of at most totalSeconds: increasing, as progress must.
      await ctx.progress(Math.floor((now - waitStart) / 1000), totalSeconds, waiting);
      nextProgress += PROGRESS_EVERY_MS;
    }
    let value: T | undefined;
    try {
      value = await ask.poll();
    } catch (err) {
      if (ctx.signal.aborted) return cancelled(ask.url);
      throw err;
    }
    if (value !== undefined) {
      await ctx.notifyElicitationComplete(elicitationId);
      return { answered: true, value, elicitationId };
    }
    const left = deadline - Date.now();
    if (left <= 0) {
      const why = byExpiry
        ? `no person answered it at ${ask.url} before it expires (at ${expiry}); it stays pending until then.`
        : `no person answered it at ${ask.url} within ${budget / 1000} s; it stays pending.`;
      return { answered: false, cancelled: false, why };
    }
    await pause(Math.min(delay, left), ctx.signal);
    delay = Math.min(delay + POLL_STEP_MS, LONGEST_POLL_MS);
  }
}

/** How a person signs in on the page, for the message next to the link. */
function signInLine(ctx: ToolContext): string {
  const operator = ctx.deps.operator
    ? ` (or the operator of this Chaos Core, with the one-time link ${operatorConsoleCommand(ctx.call.tenant, ctx.deps.operator)} prints)`
    : "";
  return (
    `A person holding the approver role, not the agent that asked, must answer it: open the page and sign in with your own approver API key${operator}. ` +
    "The page shows every argument of the call; the answer is given there, not in this client."
  );
}

/** What the client shows next to a step approval's console link. */
export function stepConsoleMessage(ctx: ToolContext, view: GetApprovalResponse): string {
  return [
    `Approval ${view.approvalId} waits for a person: an AI agent (${view.requestedBy || "unknown"}) asks to run ${view.capability} (risk ${view.risk || "unspecified"}), which policy holds for approval.`,
    signInLine(ctx),
  ].join("\n");
}

/** What the client shows next to a spend request's console link. */
export function spendConsoleMessage(ctx: ToolContext, request: SpendRequest): string {
  const what = request.tool ? `${request.tool} under spend policy ${request.policy}` : `a spend under spend policy ${request.policy}`;
  return [
    `Spend request ${String(request.requestSeq)} waits for a person: an AI agent (${request.requestedBy || "unknown"}) asks for ${what}, which the spend gate holds for approval (HITL_REQUIRED).`,
    signInLine(ctx),
  ].join("\n");
}

/**
 * Asks the client's user to open the console page of a pending step approval and waits for a
 * person's answer: the answered approval (`approved`, `rejected`, or `consumed` when a concurrent
 * call ran it), read from cognition.
 */
export function waitForStepAnswer(ctx: ToolContext, view: GetApprovalResponse, url: string): Promise<ConsoleWait<GetApprovalResponse>> {
  return waitForConsoleAnswer(ctx, {
    url,
    message: stepConsoleMessage(ctx, view),
    ...(view.expiresAt ? { expiresAt: timestampDate(view.expiresAt) } : {}),
    what: `approval ${view.approvalId}`,
    fields: { approvalId: view.approvalId, capability: view.capability },
    carry: { approval_id: view.approvalId },
    poll: async () => {
      const now = await ctx.deps.cognition.getApproval({ approvalId: view.approvalId }, { ctx: ctx.call, signal: ctx.signal });
      return now.status === "pending" ? undefined : now;
    },
  });
}

/**
 * Asks the client's user to open the console page of a pending spend request and waits for a
 * person's answer: the request once it is no longer PENDING, read from the ledger.
 */
export function waitForSpendAnswer(ctx: ToolContext, request: SpendRequest, url: string): Promise<ConsoleWait<SpendRequest>> {
  const ledger = ledgerOf(ctx);
  const expiresAt = request.expiresAt ? new Date(request.expiresAt) : undefined;
  return waitForConsoleAnswer(ctx, {
    url,
    message: spendConsoleMessage(ctx, request),
    ...(expiresAt && !Number.isNaN(expiresAt.getTime()) ? { expiresAt } : {}),
    what: `spend request ${String(request.requestSeq)}`,
    fields: { requestSeq: Number(request.requestSeq), ...(request.tool ? { tool: request.tool } : {}) },
    poll: async () => {
      const res = await ledger.getSpendRequest({ requestSeq: request.requestSeq }, ledgerCall(ctx));
      return res.request && res.request.state !== "PENDING" ? res.request : undefined;
    },
  });
}
