import { parseUpstreamToolEntry } from "@chaos-core/contracts";
import { ChaosError } from "@chaos-core/kit";
import { checkUpstreamName } from "./tenant-upstreams.js";
import { checkTenantId } from "./tenants.js";

/**
 * An operator's approvals of drifted upstream tools, kept in the registry where the upstreams
 * lock cannot be written (a read-only mount; docs/federation.md §4): per tenant, one per tool,
 * each the approved contract (the tool's `upstreams.lock` entry) and the lock digest it replaces.
 * The serving step merges them over the lock's pins while the lock still pins what they replaced.
 */

/** One approval as the registry keeps it. */
export interface UpstreamApprovalRecord {
  readonly tenant: string;
  readonly upstream: string;
  readonly tool: string;
  /** The approved contract: the tool's `upstreams.lock` entry, as the lock writes it. */
  readonly entry: string;
  /** The lock's digest for the tool that this approval replaces; empty when the lock pins no such tool. */
  readonly replacesDigest: string;
  /** The approved contract's entry digest. */
  readonly digest: string;
  /** The operator's OS user who approved it (as its `upstream.approved` ledger entry names). */
  readonly approvedBy: string;
  readonly approvedAt: Date;
}

/** An approval as {@link checkApproval} passed it: the only form the registry stores. */
export type CheckedApproval = Omit<UpstreamApprovalRecord, "approvedAt">;

/** What {@link checkApproval} is given (the RPC's request). */
export interface ApprovalInput {
  readonly tenant: string;
  readonly upstream: string;
  readonly tool: string;
  readonly entry: string;
  readonly replacesDigest: string;
  readonly approvedBy: string;
}

/** The approvals store. Each change raises the tenant's generation and publishes it before it commits. */
export interface UpstreamApprovals {
  /** Stores it, replacing an earlier approval of the same tool; answers it with the tenant's new generation. */
  recordApproval(approval: CheckedApproval): Promise<{ approval: UpstreamApprovalRecord; generation: number }>;
  /** The tenant's approvals by upstream and tool, and the tenant's generation they were read at. */
  listApprovals(tenant: string): Promise<{ approvals: UpstreamApprovalRecord[]; generation: number }>;
}

const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;
/** MCP's own bound on a tool name. */
const MAX_TOOL_NAME = 128;

function invalid(field: string, problem: string): never {
  throw new ChaosError("invalid_argument", `${field}: ${problem}`);
}

/**
 * Checks an approval, naming the field: the tenant, the upstream's name, the tool's, who approved
 * it, the lock digest it replaces (empty, or `sha256:` and 64 hex digits), and the contract — the
 * tool's `upstreams.lock` entry, parsed as the lock's are, its digests recomputed and compared
 * (`parseUpstreamToolEntry`, as `checkPin` does for a pin). An approval of the contract the lock
 * already pins changes nothing and is refused.
 * @throws ChaosError `invalid_argument`
 */
export function checkApproval(input: ApprovalInput): CheckedApproval {
  checkTenantId(input.tenant, "tenant");
  checkUpstreamName(input.upstream, "upstream");
  if (input.tool === "") invalid("tool", "required; pass the tool's name as the upstream lists it");
  if (input.tool.length > MAX_TOOL_NAME) invalid("tool", `at most ${MAX_TOOL_NAME} characters`);
  const by = input.approvedBy.trim();
  if (by === "") invalid("approved_by", "required; pass who approved it (the operator's user)");
  if (by.length > 200) invalid("approved_by", "at most 200 characters");
  if (input.replacesDigest !== "" && !DIGEST_RE.test(input.replacesDigest)) invalid("replaces_digest", "must be empty (the lock pins no such tool) or sha256:<64 hex digits>");
  if (input.entry === "") invalid("entry", "required; pass the approved contract (the tool's upstreams.lock entry as JSON)");
  const parsed = parseUpstreamToolEntry(input.upstream, input.tool, input.entry, "entry");
  if (parsed.digest === input.replacesDigest) invalid("replaces_digest", "is the approved contract's own digest: the lock pins it already, there is nothing to approve");
  return { tenant: input.tenant, upstream: input.upstream, tool: input.tool, entry: parsed.text, replacesDigest: input.replacesDigest, digest: parsed.digest, approvedBy: by };
}

/** Where there is no database (the policy service on a policy file): none kept, and a change refused saying why. */
export function noUpstreamApprovals(): UpstreamApprovals {
  return {
    recordApproval() {
      return Promise.reject(new ChaosError("failed_precondition", "upstream approvals are kept in the tenant registry, which needs the policy service's database (DATABASE_URL)"));
    },
    listApprovals: async () => ({ approvals: [], generation: 0 }),
  };
}
