import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ChaosError, type ServiceImpl } from "@chaos-core/kit";
import type { UpstreamApprovalService } from "@chaos-core/proto/gen/chaoscore/policy/v1/upstream_approvals_pb.js";
import { checkApproval, type UpstreamApprovalRecord, type UpstreamApprovals } from "../domain/upstream-approvals.js";

const OPERATOR = "operator";

function approvalToProto(a: UpstreamApprovalRecord) {
  return {
    tenant: a.tenant,
    upstream: a.upstream,
    tool: a.tool,
    entry: a.entry,
    replacesDigest: a.replacesDigest,
    digest: a.digest,
    approvedBy: a.approvedBy,
    approvedAt: timestampFromDate(a.approvedAt),
  };
}

/**
 * UpstreamApprovalService (docs/federation.md §4). RecordApproval is answered only for the
 * principal `operator`, like the tenant admin API, and only where `record` is true: the policy
 * service's admin port, which only the operator's pods reach (on its main port it is refused, so a
 * caller there holding the context key still cannot approve a contract). The approval is checked
 * first, naming the field, its contract's digests recomputed. ListApprovals answers the signed
 * context's tenant — never another's.
 */
export function createUpstreamApprovalHandlers(approvals: UpstreamApprovals, options: { record: boolean }): ServiceImpl<typeof UpstreamApprovalService> {
  return {
    async recordApproval(req, ctx) {
      if (!options.record) throw new ChaosError("permission_denied", "RecordApproval is answered on the policy service's admin port only (CHAOS_CORE_ADMIN_PORT), where only the operator's pods reach");
      if (ctx.call.principal !== OPERATOR) throw new ChaosError("permission_denied", `RecordApproval answers only the operator, not "${ctx.call.principal}"`);
      const checked = checkApproval({
        tenant: req.tenant,
        upstream: req.upstream,
        tool: req.tool,
        entry: req.entry,
        replacesDigest: req.replacesDigest,
        approvedBy: req.approvedBy,
      });
      const { approval, generation } = await approvals.recordApproval(checked);
      return { approval: approvalToProto(approval), generation: BigInt(generation) };
    },
    async listApprovals(_req, ctx) {
      const { approvals: list, generation } = await approvals.listApprovals(ctx.call.tenant);
      return { approvals: list.map(approvalToProto), generation: BigInt(generation) };
    },
  };
}
