import type { UpstreamCatalog } from "../clients/upstream-catalog.js";
import type { RateLimiter } from "../limits/limiter.js";
import type { ContractHistory, ContractSet } from "@chaos-core/contracts";
import type { Logger } from "@chaos-core/kit";
import type { CognitionClient, CouncilClient, LedgerClient, MemoryClient, PolicyClient } from "../clients/service-clients.js";
import type { ConsoleLinks } from "./console-links.js";
import type { EdgeEvents } from "../events/feeds.js";
import type { MrtrKeyring } from "../mrtr/keyring.js";
import type { SessionStore } from "../sessions/session-store.js";

/**
 * Everything the edge needs from outside, chosen at composition time: the edge alone wires
 * gRPC clients, standalone wires in-process ones. The edge holds no domain logic of its own.
 */
export interface EdgeDeps {
  readonly policy: PolicyClient;
  readonly memory: MemoryClient;
  readonly cognition: CognitionClient;
  /**
   * The tools of upstream MCP servers cognition serves (docs/federation.md §6): listed as MCP
   * tools beside the edge's own and run as one executor step each. Unset: none.
   */
  readonly upstreams?: UpstreamCatalog;
  /**
   * The audit ledger, receipts and spend gate. Optional while the processes that compose the
   * edge are being wired to it: without it the governance and finance-reference tools fail
   * closed (`unavailable`), never answering with an unrecorded decision.
   */
  readonly ledger?: LedgerClient;
  readonly council: CouncilClient;
  readonly sessions: SessionStore;
  /**
   * Set by the edge alone, whose services run in pods of their own: one that does not answer makes
   * `/readyz` `degraded`, never `not ready` (docs/operations.md "Readiness"). Readiness says whether
   * this pod can serve; an outage behind it must not take every edge replica out of its Service,
   * where clients would meet an ingress error instead of the edge's `unavailable` naming the
   * service. Unset (the standalone): the services are this process's own, and one that does not
   * answer makes it not ready.
   */
  readonly servicesRemote?: boolean;
  /** JSON on stderr (kit's logger): under stdio, stdout belongs to JSON-RPC. */
  readonly logger: Logger;
  /** Reported as the server's version at initialize. */
  readonly version: string;
  /**
   * Set by standalone (`chaos-core serve` / `stdio`), whose admin endpoint answers approvals as
   * the operator: approval answers then name the exact `chaos-core approvals` command.
   */
  readonly operator?: OperatorAccess;
  /**
   * Where the approval console is reached, set by whatever serves it (the HTTP transport that
   * mounts it, `chaos-core stdio`'s loopback listener); absent when the console is off. Approval
   * answers then link to it (`ToolContext.consoleUrl`).
   */
  readonly console?: ConsoleLinks;
  /**
   * How long a call that asked its client's user to open the console (URL-mode elicitation)
   * waits for a person's answer, in seconds (`CHAOS_CORE_APPROVAL_WAIT_SECONDS`); 300 when unset.
   */
  readonly approvalWaitSeconds?: number;
  /**
   * The keyring that seals and opens multi-round-trip `requestState` (docs/protocol.md §7): the
   * edge alone loads `CHAOS_CORE_MRTR_KEYS_FILE`, standalone generates one into its data
   * directory. A 2026-07-28 request's `requestState.verify` opens states with it and `ask` seals
   * them (server/mrtr-round.ts); without it no state is sealed, so no 2026-07-28 client is asked
   * (its elicitation is reported as absent) and every echoed state is refused.
   */
  readonly mrtrKeyring?: MrtrKeyring;
  /** How long a sealed state opens, in seconds (`CHAOS_CORE_MRTR_TTL_SECONDS`); 600 when unset. */
  readonly mrtrTtlSeconds?: number;
  /**
   * The SSE event store and the per-tenant change-event buses (docs/protocol.md §9, §10): on
   * Redis where the sessions are (`createRedisEdgeEvents`), so every replica resumes every
   * stream and hears every change; the HTTP transport makes in-process ones when absent.
   */
  readonly events?: EdgeEvents;
  /**
   * Set by a transport that sends the tenant's change events to its clients (the HTTP transport:
   * listen streams and 2025-11-25 GET streams). Only then do its servers advertise
   * `resources.listChanged` (and, on 2026-07-28, `resources.subscribe`): a capability is promised
   * only where it is kept. stdio does not deliver them yet.
   */
  readonly deliversChangeEvents?: boolean;
  /**
   * What the start-time contract check found (docs/contracts.md §7): the server digest, whether
   * the signed note verified and with which keys, and the note itself. Told to clients in
   * `initialize` / `server/discover` results' `_meta` (`dev.chaoscore/contracts`) and as the
   * `chaoscore://contracts/attestation` resource. Absent where no check ran (tests composing a server).
   */
  readonly contracts?: EdgeAttestation;
  /**
   * The toolsets the tenant registry enables for a tenant (docs/tenants.md), read when the server
   * lists or dispatches a tool: a tool of another toolset is not listed and its calls are refused.
   * Unset, or undefined / empty for a tenant: the default toolsets (kit's `DEFAULT_TOOLSETS`:
   * finance-reference is served only where an operator enabled it).
   */
  readonly enabledToolsets?: (tenant: string) => readonly string[] | undefined;
  /** The quota gate in front of every tool call and every read, prompt and completion (`limits/limiter.ts`); no limits when unset. */
  readonly limiter?: RateLimiter;
}

// The two records below are carried by EdgeDeps but made and read above it (OperatorAccess by the
// approval channels, approvals/channels.ts; EdgeAttestation by the start-time check,
// contracts/attestation.ts): declared here, below both, so the record imports neither.

/** The standalone operator's command line, when this edge runs inside `chaos-core serve` or `stdio`. */
export interface OperatorAccess {
  /**
   * The data directory the running server uses, when it is not the default one `chaos-core
   * approvals` finds by itself: the command then names it with `--data-dir`.
   */
  readonly dataDir?: string;
}

/** What the edge may tell clients about the surface it serves (docs/contracts.md §7). */
export interface EdgeAttestation {
  /** True only when the signed note verified with a configured public key. */
  readonly attested: boolean;
  readonly serverDigest: string;
  /** The configured keys whose signatures verified. */
  readonly keyNames: readonly string[];
  /** The signed note as shipped, to expose to clients; absent when none was given. */
  readonly note?: string;
  /** The pinned contracts (the parsed lock), for the run-time guard (`contracts/guard.ts`); never shown to clients. */
  readonly lock: ContractSet;
  /** Tool contracts earlier locks pinned, by digest (`chaoscore.lock.history`), to explain a client's older pin; never shown whole. */
  readonly history: ContractHistory;
}
