import { z } from "zod";
import { defineTool } from "../../definitions/tool.js";
import { ledgerCall, ledgerOf } from "../../definitions/ledger-access.js";
import { jsonObjectOutput } from "./shapes.js";

/** `chp_version`: what a verifier needs to know about this server's protocol. */
export const chpVersionTool = defineTool({
  name: "chp_version",
  toolset: "governance",
  title: "CHP version",
  description:
    "Describe the governance protocol this server speaks: server and CHP versions, every stable reason code (spend " +
    "gate, authorization, receipt issuing, finance detail codes) with its meaning, the receipt schema, the public keys " +
    "that verify receipts and ledger checkpoints, and your tenant's spend policies with their limits (caps, " +
    "thresholds, min_confidence, allowed actions, per-asset limits, require_confidence). Read-only.",
  input: z.strictObject({}),
  output: z.object({
    edge_version: z.string(),
    info: jsonObjectOutput.describe("From the ledger: versions, reason codes, receipt schema, keys, this tenant's spend policies"),
  }),
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  async run(_args, ctx) {
    const res = await ledgerOf(ctx).getInfo({}, ledgerCall(ctx));
    return { edge_version: ctx.deps.version, info: res.info ?? {} };
  },
});
