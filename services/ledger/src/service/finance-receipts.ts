import { ChaosError, type CallContext } from "@chaos-core/kit";
import { MAX_RECEIPT_TTL_SECONDS, MIN_RECEIPT_TTL_SECONDS } from "../authz/issue.js";
import { newNonce, signReceipt, type Receipt } from "../authz/receipt.js";
import type { ToolPolicyDocument } from "../authz/tool-policy.js";
import type { ReferenceTool } from "../domain/reference-tools.js";
import type { SpendPolicyConfig } from "../domain/spend-policies.js";
import type { Keyring } from "../keys/keyring.js";
import { receiptTtl } from "./ledger-core.js";

// The `authorization` receipts a finance reference call runs on: the window a caller asks for,
// the tool policy a receipt is checked against, and a receipt signed now.

/**
 * `ttl_seconds` as ApproveSpend, CollectSpendApproval or RequestAuthorization take it: 0 or unset
 * is the default window ({@link receiptTtl}); a window outside 1..3600 s is `invalid_argument`.
 */
export function checkedReceiptTtl(ttlSeconds: number | undefined): number {
  const ttl = receiptTtl(ttlSeconds);
  if (!Number.isInteger(ttl) || ttl < MIN_RECEIPT_TTL_SECONDS || ttl > MAX_RECEIPT_TTL_SECONDS) {
    throw new ChaosError("invalid_argument", `ttl_seconds: must be a whole number from ${MIN_RECEIPT_TTL_SECONDS} to ${MAX_RECEIPT_TTL_SECONDS}`);
  }
  return ttl;
}

/** The tool policy a finance receipt is checked against: the tool, its scope, the spend policy's version. */
export function financeToolPolicy(tool: ReferenceTool, policy: SpendPolicyConfig): ToolPolicyDocument {
  return { version: policy.version, tools: { [tool.name]: { risk: tool.risk, resources: [tool.scope] } } };
}

/** An `authorization` receipt for a finance call, signed now. */
export function signFinanceAuthorization(keyring: Keyring, call: CallContext, tool: ReferenceTool, bind: { actor: string; argsHash: string; policyVersion: string; ttl: number; now: Date }): Receipt {
  return signReceipt(
    {
      kind: "authorization",
      schema_version: 1,
      tenant: call.tenant,
      actor: bind.actor,
      tool: tool.name,
      resource: tool.scope,
      args_hash: bind.argsHash,
      policy_version: bind.policyVersion,
      risk: tool.risk,
      issued_at: bind.now.toISOString(),
      expiry: new Date(bind.now.getTime() + bind.ttl * 1000).toISOString(),
      decision: "allow",
      nonce: newNonce(),
    },
    keyring,
  );
}
