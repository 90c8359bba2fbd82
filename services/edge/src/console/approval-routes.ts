import type { Request, Response, Router } from "express";
import { ChaosError, type CallContext } from "@chaos-core/kit";
import { ApprovalChannel } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { Entry } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import {
  acceptedChannels,
  approvalChannelOptions,
  approveSpendCall,
  executeCall,
  type ApprovalChannelOption,
  type ApprovalSubject,
  type ChannelPlace,
} from "../approvals/channels.js";
import { decidedBy, spendRequestView, stepApprovalView } from "../approvals/view.js";
import { spendPath, stepPath } from "../deps/console-links.js";
import type { ConsoleRouterOptions } from "./options.js";
import { answerRefusedPage, answerResultPage, approvalPage, listPage } from "./pages.js";
import { field, type ConsoleReplies, type SignedInLocals } from "./replies.js";
import type { SessionGate } from "./session-gate.js";

/** How many pending approvals, and spend requests, the list shows. */
const LIST_LIMIT = 100;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const REQUEST_SEQ = /^[1-9][0-9]{0,15}$/;

/**
 * The console's approval routes, all signed in: the list of the tenant's pending approvals and
 * spend requests, each one's page, and the answer forms posted on that page.
 */
export function approvalRoutes(router: Router, options: ConsoleRouterOptions, replies: ConsoleReplies, gate: SessionGate): void {
  const { deps } = options;
  const { frame, send, refuse } = replies;
  const { formPost, signedIn, csrfChecked } = gate;

  /** The ways to answer `subject` that exist besides this page, with their exact calls and commands. */
  const otherWays = (call: CallContext, subject: ApprovalSubject, channels: readonly string[]): ApprovalChannelOption[] => {
    const where: ChannelPlace = { tenant: call.tenant, canElicit: false, ...(deps.operator ? { operator: deps.operator } : {}) };
    return approvalChannelOptions(subject, channels, where);
  };

  /** The ledger entry at `seq`, for the result page; undefined without a ledger (or for seq 0: cognition without one). */
  const ledgerEntry = async (ctx: CallContext, seq: bigint): Promise<Entry | undefined> => {
    if (!deps.ledger || seq <= 0n) return undefined;
    const { entries } = await deps.ledger.listEntries({ afterSeq: seq - 1n, limit: 1 }, { ctx });
    return entries[0]?.seq === seq ? entries[0] : undefined;
  };

  /**
   * A refused answer: cognition's or the ledger's refusal (`permission_denied` / `failed_precondition`,
   * the message starting with its code) as a page that says what it means and who else can
   * answer; anything else goes on to the error handler.
   */
  const answerRefused = async (req: Request, res: Response, err: unknown, subject: ApprovalSubject & { kind: "step" | "spend" }): Promise<void> => {
    const e = ChaosError.from(err);
    if (e.code !== "permission_denied" && e.code !== "failed_precondition") throw e;
    const { consoleCall: ctx } = res.locals as SignedInLocals;
    const code = /^([a-z_]+): /.exec(e.message)?.[1] ?? "";
    const what = subject.kind === "step" ? "approval" : "spend request";
    // Who can still answer: read again, since the refusal may be that it was answered meanwhile.
    let channels: readonly string[] | undefined;
    let pending = false;
    try {
      if (subject.kind === "step") {
        const a = await deps.cognition.getApproval({ approvalId: subject.approvalId, channel: ApprovalChannel.CONSOLE }, { ctx });
        channels = a.channels;
        pending = a.status === "pending";
      } else {
        const r = (await deps.ledger?.getSpendRequest({ requestSeq: BigInt(subject.requestSeq) }, { ctx }))?.request;
        channels = r?.channels;
        pending = r?.state === "PENDING";
      }
    } catch {
      // Only the list of other ways is lost; the refusal itself is what the page says.
    }
    const accepted = channels ? acceptedChannels(channels) : undefined;
    const headline =
      code === "self_approval"
        ? "You asked for this; another approver must answer."
        : code === "channel_not_allowed"
          ? `Policy does not accept an answer on the console for this ${what}${accepted ? `: it accepts ${accepted.filter((c) => c !== "console").join(", ") || "no other channel"} (the ways below)` : ""}.`
          : code === "already_answered" || /already resolved|already answered/.test(e.message)
            ? `This ${what} was already answered: an answer is given once.`
            : code === "request_expired"
              ? `This ${what} expired before it was answered; the agent must ask again.`
              : `The answer was refused: nothing was ${subject.kind === "step" ? "approved or rejected" : "approved or declined"}.`;
    const path = subject.kind === "step" ? stepPath(subject.approvalId) : spendPath(subject.requestSeq);
    deps.logger.info({ tenant: ctx.tenant, principal: ctx.principal, [subject.kind === "step" ? "approvalId" : "requestSeq"]: subject.kind === "step" ? subject.approvalId : subject.requestSeq, code: code || e.code }, "console answer refused");
    send(
      res,
      e.code === "permission_denied" ? 403 : 409,
      answerRefusedPage(frame(req, res), {
        headline,
        message: e.message,
        ...(channels && pending ? { ways: otherWays(ctx, subject, channels) } : {}),
        path,
      }),
    );
  };

  /** The form's `decision`: approve → true, reject → false, anything else undefined. */
  const decisionOf = (req: Request): boolean | undefined => {
    const d = field(req, "decision");
    return d === "approve" ? true : d === "reject" ? false : undefined;
  };
  const noDecision = (req: Request, res: Response) =>
    refuse(req, res, 400, "Refused", "This form was refused: decision must be approve or reject.");

  router.get("/", signedIn, async (req, res) => {
    const { consoleCall: ctx } = res.locals as SignedInLocals;
    const [steps, spends] = await Promise.all([
      deps.cognition.listApprovals({ limit: LIST_LIMIT }, { ctx }),
      deps.ledger?.listSpendRequests({ limit: LIST_LIMIT }, { ctx }),
    ]);
    send(res, 200, listPage(frame(req, res), { steps: steps.approvals, ...(spends ? { spends: spends.requests } : {}) }));
  });

  router.get("/step/:approvalId", signedIn, async (req, res) => {
    const { consoleCall: ctx } = res.locals as SignedInLocals;
    const id = String(req.params["approvalId"]);
    if (!UUID.test(id)) return refuse(req, res, 404, "Not found", "There is no approval with this id (an approval id is a UUID).");
    // As a reviewer: every console session holds the approver role (or is the operator's link).
    const a = await deps.cognition.getApproval({ approvalId: id, channel: ApprovalChannel.CONSOLE }, { ctx });
    send(
      res,
      200,
      approvalPage(frame(req, res), stepApprovalView(a), {
        path: stepPath(id),
        pending: a.status === "pending",
        status: a.status,
        ...(a.resolvedBy ? { answered: { by: a.resolvedBy, ...(a.resolutionChannel ? { channel: a.resolutionChannel } : {}) } } : {}),
        channels: acceptedChannels(a.channels),
        ...(a.channelsRule ? { channelsRule: a.channelsRule } : {}),
        ways: otherWays(ctx, { kind: "step", approvalId: id }, a.channels),
        ownRequest: a.requestedBy === ctx.principal,
      }),
    );
  });

  router.post("/step/:approvalId", ...formPost, signedIn, csrfChecked, async (req, res) => {
    const { consoleCall: ctx } = res.locals as SignedInLocals;
    const id = String(req.params["approvalId"]);
    if (!UUID.test(id)) return refuse(req, res, 404, "Not found", "There is no approval with this id (an approval id is a UUID).");
    const approve = decisionOf(req);
    if (approve === undefined) return noDecision(req, res);
    let answered;
    try {
      // Cognition enforces the channels policy accepts, no self-approval and once-only; the
      // console vouches only for the approver role its session holds.
      answered = await deps.cognition.resolveApproval({ approvalId: id, approve, channel: ApprovalChannel.CONSOLE }, { ctx });
    } catch (err) {
      return answerRefused(req, res, err, { kind: "step", approvalId: id });
    }
    deps.logger.info({ tenant: ctx.tenant, principal: ctx.principal, approvalId: id, status: answered.status }, "console answered a step approval");
    const entry = await ledgerEntry(ctx, answered.ledgerSeq);
    const a = await deps.cognition.getApproval({ approvalId: id, channel: ApprovalChannel.CONSOLE }, { ctx }).catch(() => undefined);
    const requester = a ? `its requester, ${a.requestedBy},` : "its requester";
    const requesters = a ? `Its requester's (${a.requestedBy}'s)` : "Its requester's";
    send(
      res,
      200,
      answerResultPage(frame(req, res), {
        headline: `${approve ? "Approved" : "Rejected"} as ${answered.resolvedBy}`,
        lines: approve
          ? [
              `Approval ${id}${a ? ` (${a.capability})` : ""} is approved. It runs when ${requester} calls ${executeCall(id)}, once: ` +
                "a second call is refused, and it runs only if policy still allows it then.",
            ]
          : [`Approval ${id}${a ? ` (${a.capability})` : ""} is rejected: it never runs. ${requesters} next ${executeCall(id)} is told so.`],
        ...(entry ? { entry } : {}),
        path: stepPath(id),
      }),
    );
  });

  router.get("/spend/:requestSeq", signedIn, async (req, res) => {
    const { consoleCall: ctx } = res.locals as SignedInLocals;
    const seq = String(req.params["requestSeq"]);
    if (!REQUEST_SEQ.test(seq)) return refuse(req, res, 404, "Not found", "There is no spend request with this number (a request_seq is a ledger sequence number).");
    if (!deps.ledger) return refuse(req, res, 503, "No ledger", "This server has no audit ledger configured: spend requests cannot be shown.");
    const { request } = await deps.ledger.getSpendRequest({ requestSeq: BigInt(seq) }, { ctx });
    if (!request) return refuse(req, res, 404, "Not found", `There is no spend request ${seq} in this tenant.`);
    send(
      res,
      200,
      approvalPage(frame(req, res), spendRequestView(request), {
        path: spendPath(request.requestSeq),
        pending: request.state === "PENDING",
        status: request.state,
        ...(request.answeredBy
          ? { answered: { by: request.answeredBy, ...(request.answerChannel ? { channel: request.answerChannel } : {}), ...(request.answerSeq ? { ledgerSeq: request.answerSeq } : {}) } }
          : {}),
        channels: acceptedChannels(request.channels),
        ...(request.channelsRule ? { channelsRule: request.channelsRule } : {}),
        ways: otherWays(ctx, { kind: "spend", requestSeq: Number(request.requestSeq) }, request.channels),
        ownRequest: request.requestedBy === ctx.principal,
        argumentsVerified: request.argumentsVerified,
        rejectReason: true,
      }),
    );
  });

  router.post("/spend/:requestSeq", ...formPost, signedIn, csrfChecked, async (req, res) => {
    const { consoleCall: ctx } = res.locals as SignedInLocals;
    const seq = String(req.params["requestSeq"]);
    if (!REQUEST_SEQ.test(seq)) return refuse(req, res, 404, "Not found", "There is no spend request with this number (a request_seq is a ledger sequence number).");
    if (!deps.ledger) return refuse(req, res, 503, "No ledger", "This server has no audit ledger configured: spend requests cannot be answered.");
    const approve = decisionOf(req);
    if (approve === undefined) return noDecision(req, res);
    const reason = field(req, "reason")?.trim() ?? "";
    if (reason.length > 500) return refuse(req, res, 400, "Refused", `This form was refused: reason is ${reason.length} characters, at most 500.`);
    const requestSeq = Number(seq);
    // Read first: another tenant's (or no) request is not found, not answered.
    const { request } = await deps.ledger.getSpendRequest({ requestSeq: BigInt(seq) }, { ctx });
    if (!request) return refuse(req, res, 404, "Not found", `There is no spend request ${seq} in this tenant.`);
    const subject = { kind: "spend", requestSeq } as const;
    const about = request.tool ? `${request.tool} under spend policy ${request.policy}` : `a spend under spend policy ${request.policy}`;
    const requester = request.requestedBy;
    let headline: string;
    let lines: string[];
    let seqOfAnswer: bigint;
    try {
      // The ledger checks policy's channels now, no self-approval, expiry and once-only.
      if (approve) {
        const r = await deps.ledger.approveSpend({ requestSeq: BigInt(seq), approvedVia: "console" }, { ctx });
        seqOfAnswer = r.ledgerSeq;
        headline = `Approved as ${ctx.principal} (${r.channel || "console"})`;
        const gateReason = typeof r.result?.["reason"] === "string" ? r.result["reason"] : "";
        // The caps that blocked it, with their values (the ledger's words beside CHP's reason).
        const caps = decidedBy(r.result);
        lines =
          r.state === "LOCKED"
            ? [
                `Spend request ${seq} (${about}) is approved: the spend gate, run again under the current policy, locked it.`,
                request.kind === "finance"
                  ? `The requester, ${requester}, receives the receipt with their next ${approveSpendCall(requestSeq)}, or the ${request.tool} call itself picks the approval up and runs once.`
                  : `The requester, ${requester}, receives the approval with their next ${approveSpendCall(requestSeq)}, once.`,
              ]
            : [`The answer is recorded, but the spend gate, run again under the current policy, left it ${r.state}${gateReason ? ` (${gateReason})` : ""}${caps ? `: ${caps}` : ""}. Nothing runs on it.`];
      } else {
        const r = await deps.ledger.declineSpend({ requestSeq: BigInt(seq), approvedVia: "console", reason }, { ctx });
        seqOfAnswer = r.ledgerSeq;
        headline = `Rejected as ${ctx.principal} (${r.channel || "console"})`;
        lines = [
          `Spend request ${seq} (${about}) is declined: it never runs.${reason ? ` Your reason, shown to ${requester}: ${reason}` : ""}`,
          `The requester's (${requester}'s) next ${approveSpendCall(requestSeq)}${request.tool ? ` or ${request.tool} call` : ""} is told so.`,
        ];
      }
    } catch (err) {
      return answerRefused(req, res, err, subject);
    }
    deps.logger.info({ tenant: ctx.tenant, principal: ctx.principal, requestSeq, approve }, "console answered a spend request");
    const entry = await ledgerEntry(ctx, seqOfAnswer);
    send(res, 200, answerResultPage(frame(req, res), { headline, lines, ...(entry ? { entry } : {}), path: spendPath(requestSeq) }));
  });
}
