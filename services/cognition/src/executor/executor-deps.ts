import type { CallContext, ServiceClient } from "@chaos-core/kit";
import type { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import type { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import type { CapabilityRegistry } from "../capabilities/registry.js";
import type { AIProvider } from "../providers/ai-provider.js";
import type { ApprovalStore } from "./approvals.js";
import type { AuditSink } from "./audit.js";
import type { StepReceipts } from "./ledger.js";
import type { RuleArgsGuard } from "./rule-args-guard.js";

// What every part of the executor is given for one caller's steps.

/** How long a handler may run when the deps name no deadline. */
export const DEFAULT_STEP_TIMEOUT_MS = 30_000;

/** Everything the executor needs for one caller's steps. */
export interface ExecutorDeps {
  readonly registry: CapabilityRegistry;
  readonly policy: ServiceClient<typeof PolicyService>;
  readonly memory: ServiceClient<typeof MemoryService>;
  readonly provider: AIProvider;
  readonly audit: AuditSink;
  readonly approvals: ApprovalStore;
  /**
   * Receipts from the ledger: when set, an approved step runs only after the ledger authorizes
   * the receipt issued for its approval (burning its nonce). Unset only where no ledger runs.
   */
  readonly receipts?: StepReceipts;
  /**
   * Rules' conditions checked against the pins served (docs/policy-conditions.md §5): a rule
   * reading an argument the pinned tools it names do not declare denies them. Set by the default
   * deps; unset only in tests of other things.
   */
  readonly ruleArgs?: RuleArgsGuard;
  /** Who the steps run for (tenant, principal, session), from the verified call context. */
  readonly call: CallContext;
  /** The caller's cancellation; aborting it fails the running step with `cancelled`. */
  readonly signal?: AbortSignal;
  /** Per-step deadline for the handler, in milliseconds. */
  readonly stepTimeoutMs?: number;
  /** Hears the lines a running step reports, when the caller asked for progress (ExecuteStream). */
  readonly onProgress?: (progress: StepProgress) => void;
}

/** One line a running step reported (its handler's `progress`). */
export interface StepProgress {
  readonly stepId: string;
  readonly capability: string;
  readonly message: string;
}
