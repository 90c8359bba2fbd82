import type { ServiceClient } from "@chaos-core/kit";
import type { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { LedgerService } from "@chaos-core/proto/gen/chaoscore/ledger/v1/ledger_pb.js";
import type { CouncilService } from "@chaos-core/proto/gen/chaoscore/council/v1/council_pb.js";
import type { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import type { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";

/** The typed policy client, whatever transport (gRPC or in-process) is under it. */
export type PolicyClient = ServiceClient<typeof PolicyService>;
/** The typed memory client, whatever transport (gRPC or in-process) is under it. */
export type MemoryClient = ServiceClient<typeof MemoryService>;
/** The typed cognition client, whatever transport (gRPC or in-process) is under it. */
export type CognitionClient = ServiceClient<typeof CognitionService>;
/** The typed ledger client, whatever transport (gRPC or in-process) is under it. */
export type LedgerClient = ServiceClient<typeof LedgerService>;
/** The typed council client, whatever transport (gRPC or in-process) is under it. */
export type CouncilClient = ServiceClient<typeof CouncilService>;
