import type { Logger } from "@chaos-core/kit";
import { approvalChannelWarnings } from "../domain/channel-choice.js";
import type { PolicyDocumentJson } from "../domain/policy-document.js";

/**
 * Logs, once for the version a store has just put in force, every place where the document
 * lets `client_elicitation` approve what the default keeps for a person. The operator may mean
 * it; it is said out loud so nobody opts in by accident.
 */
export function warnOfOptIns(logger: Logger, document: PolicyDocumentJson, fields: Record<string, unknown>): void {
  const warnings = approvalChannelWarnings(document);
  if (warnings.length === 0) return;
  logger.warn({ ...fields, warnings }, "the policy lets the client's own form answer (client_elicitation) approve decisions the default keeps for a person");
}
