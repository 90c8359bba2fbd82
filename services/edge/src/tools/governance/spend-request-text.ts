import type { SpendRequest } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";

/**
 * A stored spend request as a person reads it before answering: what it is, who asked and
 * when, every argument of the call exactly as it will run (the wire's beneficiary and memo, the
 * amounts), never a summary and never cut, and the hashes that bind it to the ledger. The one
 * place the approval prompt (elicitation) and `chaos-core approvals list` get this text from, so
 * the shared renderer (approvals.md §5) replaces it in one swap.
 */
export function describeSpendRequest(request: SpendRequest): string {
  const what = request.tool ? `${request.tool} under spend policy ${request.policy}` : `a spend under spend policy ${request.policy}`;
  const gate = request.gate ?? {};
  const reason = typeof gate["reason"] === "string" ? gate["reason"] : "";
  return [
    `Spend request at ledger entry ${request.requestSeq} (${what}, version ${request.policyVersion}), ${request.state}.`,
    `Requested by ${request.requestedBy}${request.requestedInSession ? ` in session ${request.requestedInSession}` : ""} at ${request.createdAt}; it can be answered until ${request.expiresAt}.`,
    `Every argument of the call, exactly as it will run:`,
    JSON.stringify(request.arguments ?? {}, null, 2),
    ...(reason ? [`The spend gate held it for a person: ${reason}.`] : []),
    `args_hash ${request.argsHash} (${request.argumentsVerified ? "the arguments above hash to it, as the ledger entry recorded" : "THE ARGUMENTS ABOVE DO NOT HASH TO WHAT THE LEDGER ENTRY RECORDED: do not approve"}); content_hash of the ledger entry ${request.contentHash}.`,
  ].join("\n");
}
