import type { SpendRequest } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import { renderText } from "../../approvals/render-text.js";
import { spendRequestView } from "../../approvals/view.js";

/**
 * A stored spend request as a person reads it before answering (the shared renderer, approvals.md
 * §5): every argument of the call exactly as it will run, hidden characters escaped, never cut.
 * The one place the approval prompt (elicitation) and `chaos-core approvals list` get this text.
 */
export function describeSpendRequest(request: SpendRequest): string {
  return renderText(spendRequestView(request));
}
