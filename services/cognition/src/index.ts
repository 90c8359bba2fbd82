export { describeProvider } from "./providers/ai-provider.js";
export type {
  AIProvider,
  JsonRequest,
  JsonResult,
  ProviderDescription,
  TextRequest,
  TextResult,
} from "./providers/ai-provider.js";
export { loadProviderConfig, PROVIDER_IDS } from "./providers/config.js";
export type { ProviderConfig, ProviderId, ProviderSelection } from "./providers/config.js";
export { HeuristicProvider, NO_MODEL, rankCapabilities, tokenize } from "./providers/heuristic.js";
export type { CapabilityDescriptor, RankedCapability } from "./providers/heuristic.js";
export { keyFromPhrase, NEEDS_MODEL, parseObjective } from "./providers/objective-parser.js";
export type { ParsedObjective, ParsedStep } from "./providers/objective-parser.js";
export { resolveReferences, stepReference, STEP_REF_KEY } from "./plans/step-reference.js";
export type { StepReference } from "./plans/step-reference.js";
export { createProvider } from "./providers/index.js";
export type { ProviderLimits } from "./providers/index.js";
export { PROVIDER_MAX_RETRIES, PROVIDER_TIMEOUT_MS } from "./providers/openai-client.js";
export { OPENAI_DEFAULT_BASE_URL, OpenAIProvider } from "./providers/openai.js";
export type { OpenAIProviderOptions } from "./providers/openai.js";
export { OpenAICompatibleProvider } from "./providers/openai-compatible.js";
export type { OpenAICompatibleProviderOptions } from "./providers/openai-compatible.js";
export { generateValidated, stripJsonFence } from "./providers/validated-json.js";
export type { ValidatedJson } from "./providers/validated-json.js";
export type {
  Capability,
  CapabilityAnnotations,
  CapabilityContext,
  CapabilityFacts,
  CapabilityRisk,
} from "./capabilities/capability.js";
export { defineCapability } from "./capabilities/capability.js";
export { createCapabilityRegistry, offeredCapability } from "./capabilities/registry.js";
export { CapabilityGuard, capabilitySource } from "./capabilities/contract.js";
export { pinCapabilities, pinCapabilitiesAtStart } from "./capabilities/pin.js";
export { createPolicySnapshots, DEFAULT_SNAPSHOT_BOUND_MS } from "./executor/policy-snapshots.js";
export type { PolicySnapshots } from "./executor/policy-snapshots.js";
export type { CapabilityInfo, CapabilityRegistry } from "./capabilities/registry.js";
export { BUILT_IN_CAPABILITIES } from "./capabilities/index.js";
export { generateTextCapability } from "./capabilities/generate-text.js";
export { memoryRememberCapability } from "./capabilities/memory-remember.js";
export { memoryRecallCapability } from "./capabilities/memory-recall.js";
export { memoryForgetCapability } from "./capabilities/memory-forget.js";
export { MAX_BOOKKEEPING_VALUE_BYTES, memoryEpisodeCapability } from "./capabilities/memory-episode.js";
export { DEFAULT_STEP_TIMEOUT_MS } from "./executor/executor-deps.js";
export type { ExecutorDeps } from "./executor/executor-deps.js";
export { executeStep } from "./executor/step-run.js";
export type { ExecuteStepOptions } from "./executor/step-run.js";
export { executeSteps } from "./executor/plan-run.js";
export type { PlanOrigin } from "./executor/plan-run.js";
export { executeApproved, executeApprovedPlan } from "./executor/approved-run.js";
export type { ApprovedPlanRun } from "./executor/approved-run.js";
export { resolveApproval } from "./executor/approval-resolution.js";
export type { ResolveApprovalDeps, ResolvedApproval } from "./executor/approval-resolution.js";
export type {
  ApprovalChannel,
  AuditCall,
  ExecutableStep,
  ImpliedDecision,
  PendingApproval,
  PlanContinuation,
  PolicyVerdict,
  StepResult,
  StepStatus,
  StoredStep,
} from "./executor/step-types.js";
export { evaluateOutput, stepCheckSchema } from "./executor/evaluate.js";
export type { Evaluation, StepCheck } from "./executor/evaluate.js";
export { argsHash, canonicalJson } from "./executor/canonical-json.js";
export { createInMemoryAuditSink } from "./executor/audit.js";
export { createLedgerAuditSink, createLedgerStepReceipts } from "./executor/ledger.js";
export type { LedgerClient, StepReceipts } from "./executor/ledger.js";
export type {
  ApprovalRefusedEvent,
  ApprovalResolutionEvent,
  AuditEvent,
  AuditSink,
  InMemoryAuditSink,
  StepDecisionEvent,
  StepOutcomeEvent,
} from "./executor/audit.js";
export {
  APPROVAL_CHANNELS,
  channelsOf,
  checkResolver,
  createMemoryApprovalStore,
  DEFAULT_APPROVAL_TTL_SECONDS,
  DEFAULT_MEMORY_MAX_APPROVALS,
  DEFAULT_MEMORY_MAX_APPROVALS_PER_TENANT,
  isApprovalId,
  LEGACY_CHANNELS,
  OPERATOR_PRINCIPAL,
  resolverRefusal,
} from "./executor/approvals.js";
export type {
  ApprovalResolution,
  ApprovalSink,
  ApprovalStatus,
  ApprovalStore,
  ApprovalStoreOptions,
  InMemoryApprovalStore,
  MemoryApprovalStoreOptions,
  ResolveApprovalInput,
  ResolverRefusal,
  StoredApproval,
} from "./executor/approvals.js";
export { createRedisApprovalStore } from "./executor/redis-approval-store.js";
export type { RedisApprovalStoreOptions } from "./executor/redis-approval-store.js";
export { httpRequestCapability, createHttpRequestCapability } from "./capabilities/http-request.js";
export type { HttpRequestOptions } from "./capabilities/http-request.js";
export type { JsonObject, JsonValue, NewPlan, PlanStep, StoredPlan } from "./plans/plan.js";
export {
  DEFAULT_PLAN_TTL_SECONDS,
  MAX_PLAN_BYTES,
  MAX_PLAN_STEPS,
  MAX_PLAN_TTL_SECONDS,
} from "./plans/plan-store.js";
export type { PlanStore, PlanStoreOptions } from "./plans/plan-store.js";
export {
  createMemoryPlanStore,
  DEFAULT_MEMORY_MAX_BYTES,
  DEFAULT_MEMORY_MAX_PLANS,
  DEFAULT_MEMORY_MAX_TOTAL_BYTES,
} from "./plans/memory-plan-store.js";
export type { MemoryPlanStoreOptions } from "./plans/memory-plan-store.js";
export { createRedisPlanStore } from "./plans/redis-plan-store.js";
export type { RedisPlanStoreOptions } from "./plans/redis-plan-store.js";
export { checkObjective, MAX_CONTEXT_CHARS, MAX_OBJECTIVE_CHARS, NO_MODEL_NOTE, reason, usesModel } from "./brain/intent.js";
export type { Intent, ReasonDeps } from "./brain/intent.js";
export { plan } from "./brain/planner.js";
export type { Plan, PlanDeps, PlanOptions, PlanSource, ReplanInput } from "./brain/planner.js";
export { DEFAULT_MAX_REPLANS, MAX_REPLANS_LIMIT, runCognitiveCore } from "./brain/brain.js";
export type { BrainContext, BrainDeps, BrainStage, BrainStatus, CognitiveRequest, CognitiveTrace, StageListener } from "./brain/brain.js";
export { keyWords, objectiveSignature } from "./brain/signature.js";
export { EPISODE_TAG, PROCEDURE_TAG, procedureKey, signatureTag } from "./brain/memory-records.js";
export type { BookkeepingWrite, PastEpisode, RecalledMemory } from "./brain/memory-records.js";
export { createCognitionHandlers } from "./handlers/cognition-handlers.js";
export type { CognitionDeps } from "./handlers/cognition-handlers.js";
export { loadCognitionConfig } from "./config.js";
export type { CognitionConfig } from "./config.js";
export { createDefaultCognitionDeps, startCognitionServer } from "./server.js";
export type { CognitionServerOptions, DefaultCognitionDepsOptions } from "./server.js";
export { connectUpstream } from "./upstreams/connect.js";
export type { UpstreamConnectOptions, UpstreamConnection } from "./upstreams/connect.js";
export { readUpstreamContracts } from "./upstreams/pin.js";
export { guardedUpstreamFetch } from "./upstreams/guarded-fetch.js";
export type { GuardedFetchOptions, UpstreamFetch } from "./upstreams/guarded-fetch.js";
export { toolSegment, upstreamToolNames } from "./upstreams/names.js";
export type { UpstreamToolNames } from "./upstreams/names.js";
export { upstreamRisk } from "./upstreams/risk.js";
export { upstreamCapabilities } from "./capabilities/upstream-tools.js";
export { createUpstreamPool, DEFAULT_BREAKER } from "./upstreams/pool.js";
export { DEFAULT_MAX_RESULT_BYTES } from "./upstreams/answer-cap.js";
export type { BreakerSettings, BreakerState, UpstreamPool, UpstreamPoolOptions } from "./upstreams/pool.js";
export { loadUpstreams } from "./upstreams/load.js";
export { registryUpstreams } from "./upstreams/registry.js";
export type { RegistryUpstreamEntry } from "./upstreams/registry.js";
export type { UpstreamFiles } from "./upstreams/load.js";
export { createUpstreamDrift } from "./upstreams/drift.js";
export type { UpstreamDrift, UpstreamDriftEvent } from "./upstreams/drift.js";
export { driftEntry, ledgerUpstreamDrift, UPSTREAMS_LEDGER_TENANT, UPSTREAMS_OBSERVER } from "./upstreams/drift-ledger.js";
export { APPROVALS_POLL_MS, serveUpstreams } from "./capabilities/served-upstreams.js";
export type { ApprovalOverlayOptions } from "./capabilities/served-upstreams.js";
export { overlayApprovals } from "./upstreams/approval-overlay.js";
export type { ApprovalOutcome, ApprovalState, UpstreamApprovalEntry } from "./upstreams/approval-overlay.js";
export type { ServedUpstreams } from "./capabilities/served-upstreams.js";
export { upstreamsConfigOf, upstreamSecretsOf } from "./upstreams/config.js";
export { createTenantUpstreams, TENANT_UPSTREAMS_MAX_AGE_MS } from "./capabilities/tenant-upstreams.js";
export type { TenantUpstreams, TenantUpstreamsOptions } from "./capabilities/tenant-upstreams.js";
export type { CallerUpstreams } from "./capabilities/registry.js";
export type { UpstreamsConfig } from "./upstreams/config.js";
