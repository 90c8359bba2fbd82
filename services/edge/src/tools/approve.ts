import { z } from "zod";
import { ChaosError } from "@chaos-core/kit";
import { ApprovalChannel } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import { executeCall } from "../approvals/channels.js";
import { defineTool } from "../definitions/tool.js";

/**
 * `chaoscore_approve`: a person holding the approver role answers a pending approval of their
 * tenant (channel `approver`). The role comes from the request's verified API key only;
 * cognition refuses an approver answering their own request and an approval whose policy does
 * not accept the approver channel (`channel_not_allowed`), and an approval of another tenant is
 * not found.
 */
export const approveTool = defineTool({
  name: "chaoscore_approve",
  toolset: "core",
  title: "Approve",
  description:
    "Answer a pending approval (approve or reject), once, as a person holding the approver role, which the operator " +
    "grants to an API key, never an argument. Not for a step you requested yourself. Approving runs nothing: the " +
    "requesting agent then runs the step with chaoscore_execute {approval_id}.",
  input: z.object({
    approval_id: z.string().min(1).max(64).describe("The approval_id of a pending_approval step result"),
    approve: z.boolean().describe("false rejects it: it never runs"),
  }),
  output: z.object({
    approval_id: z.string(),
    status: z.enum(["approved", "rejected"]),
    resolved_by: z.string(),
    next_step: z.string(),
  }),
  annotations: {
    readOnlyHint: false,
    // Recording an answer runs nothing and replaces nothing.
    destructiveHint: false,
    // An approval is answered once: a second answer is refused.
    idempotentHint: false,
    openWorldHint: false,
  },
  async run(args, ctx) {
    if (!ctx.roles.has("approver")) {
      throw new ChaosError(
        "permission_denied",
        "chaoscore_approve needs the approver role, which the operator grants to an API key; this credential does not hold it. " +
          `A person with the role must answer, or the operator; ${executeCall(args.approval_id)} lists every way to approve it here.`,
      );
    }
    const res = await ctx.deps.cognition.resolveApproval(
      { approvalId: args.approval_id, approve: args.approve, channel: ApprovalChannel.APPROVER },
      { ctx: ctx.call, signal: ctx.signal },
    );
    const status: "approved" | "rejected" = res.status === "approved" ? "approved" : "rejected";
    return {
      approval_id: args.approval_id,
      status,
      resolved_by: res.resolvedBy,
      next_step:
        status === "approved"
          ? `Approved. The requesting agent runs the step, once, with ${executeCall(args.approval_id)}.`
          : "Rejected. The step will not run.",
    };
  },
});
