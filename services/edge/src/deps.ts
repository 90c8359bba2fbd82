import type { Logger, ServiceClient } from "@chaos-core/kit";
import type { CognitionService } from "@chaos-core/proto/gen/chaoscore/cognition/v1/cognition_pb.js";
import type { MemoryService } from "@chaos-core/proto/gen/chaoscore/memory/v1/memory_pb.js";
import type { PolicyService } from "@chaos-core/proto/gen/chaoscore/policy/v1/policy_pb.js";
import type { SessionStore } from "./sessions/session-store.js";

/** The typed policy client, whatever transport (gRPC or in-process) is under it. */
export type PolicyClient = ServiceClient<typeof PolicyService>;
/** The typed memory client, whatever transport (gRPC or in-process) is under it. */
export type MemoryClient = ServiceClient<typeof MemoryService>;
/** The typed cognition client, whatever transport (gRPC or in-process) is under it. */
export type CognitionClient = ServiceClient<typeof CognitionService>;

/**
 * Everything the edge needs from outside, chosen at composition time: the edge alone wires
 * gRPC clients, standalone wires in-process ones. The edge holds no domain logic of its own.
 */
export interface EdgeDeps {
  readonly policy: PolicyClient;
  readonly memory: MemoryClient;
  readonly cognition: CognitionClient;
  readonly sessions: SessionStore;
  /** JSON on stderr (kit's logger): under stdio, stdout belongs to JSON-RPC. */
  readonly logger: Logger;
  /** Reported as the server's version at initialize. */
  readonly version: string;
}

/** One MCP session as the server factory sees it: who it belongs to, and its id. */
export interface EdgeSession {
  readonly id: string;
  readonly tenant: string;
  readonly principal: string;
}
