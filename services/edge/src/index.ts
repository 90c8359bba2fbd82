export { createChaosCoreServer, SERVER_NAME } from "./server/create-server.js";
export type { CreateServerOptions } from "./server/create-server.js";
export { checkReadiness } from "./server/readiness.js";
export type { Readiness } from "./server/readiness.js";
export { startHttpTransport } from "./transport/http.js";
export type { HttpTransportOptions, RunningHttpTransport } from "./transport/http.js";
export { runStdioTransport } from "./transport/stdio.js";
export type { RunningStdioTransport, StdioTransportOptions } from "./transport/stdio.js";
export { createMemorySessionStore } from "./sessions/memory-store.js";
export { createRedisSessionStore } from "./sessions/redis-store.js";
export type { RedisSessionStoreOptions } from "./sessions/redis-store.js";
export { createMemoryEdgeEvents, createRedisEdgeEvents } from "./events/feeds.js";
export type { EdgeEvents } from "./events/feeds.js";
export { DEFAULT_SESSION_TTL_SECONDS, sessionLimitReached } from "./sessions/session-store.js";
export type {
  NewSessionRecord,
  SessionLimits,
  SessionPatch,
  SessionRecord,
  SessionStore,
  SessionTransport,
} from "./sessions/session-store.js";
export { createApiKeyVerifier, hashApiKey, loadApiKeysFile, watchApiKeysFile } from "./auth/api-keys.js";
export type { ApiKeyEntry, ApiKeyVerifier, WatchApiKeysOptions, WatchedApiKeys } from "./auth/api-keys.js";
export { LOCAL_IDENTITY } from "./auth/identity.js";
export type { Identity } from "./auth/identity.js";
export { DEFAULT_MAX_SESSIONS_PER_KEY, isLoopbackHost, loadEdgeAloneConfig, loadEdgeConfig, MAX_BODY_BYTES } from "./config.js";
export type { EdgeAloneConfig, EdgeConfig } from "./config.js";
export {
  acceptedChannels,
  APPROVAL_CHANNEL_NAMES,
  approvalChannelOptions,
  approveSpendCall,
  channelLines,
  operatorApproveCommand,
  stepApprovalChannels,
  wayLines,
  whyClientNotAsked,
} from "./approvals/channels.js";
export type { ApprovalChannelName, ApprovalChannelOption, ApprovalSubject, ChannelPlace } from "./approvals/channels.js";
export type { OperatorAccess } from "./deps/edge-deps.js";
export { fitsForm, MAX_FORM_MESSAGE_BYTES, renderText } from "./approvals/render-text.js";
export { argumentRows, ledgerEntryView, spendRequestView, stepApprovalView, toolCallView } from "./approvals/view.js";
export type { ApprovalView, ArgumentRow, BoundToolCall, StepApprovalSource, ViewFact } from "./approvals/view.js";
export { createConsoleRouter } from "./console/router.js";
export { NOT_AN_APPROVER } from "./console/sign-in-routes.js";
export type { ConsoleKeys, ConsoleRouterOptions, ConsoleServeOptions } from "./console/options.js";
export { startConsoleListener } from "./transport/console-listener.js";
export type { ConsoleListenerOptions, RunningConsoleListener } from "./transport/console-listener.js";
export { consoleSigningKey } from "./console/csrf.js";
export { CONSOLE_PATH, consoleLink } from "./deps/console-links.js";
export type { ConsoleLinks } from "./deps/console-links.js";
export { createMemoryConsoleSessionStore } from "./console/sessions.js";
export type { ConsoleSession, ConsoleSessionStore } from "./console/sessions.js";
export { createRedisConsoleSessionStore } from "./console/redis-sessions.js";
export type { RedisConsoleSessionStoreOptions } from "./console/redis-sessions.js";
export { createSignInLinks, SIGN_IN_LINK_TTL_SECONDS } from "./console/sign-in-links.js";
export type { IssuedSignInLink, SignInLinks } from "./console/sign-in-links.js";
export { TOOL_DEFINITIONS, TOOLSETS } from "./tools/index.js";
export type { ToolContext, ToolDefinition, ToolHints, Toolset } from "./definitions/tool.js";
export { PROMPT_DEFINITIONS } from "./prompts/index.js";
export { describeSpendRequest } from "./tools/governance/spend-request-text.js";
export type { PromptContext, PromptDefinition } from "./definitions/prompt.js";
export type { EdgeDeps } from "./deps/edge-deps.js";
export type { EdgeSession } from "./sessions/server-scope.js";
export type { CognitionClient, CouncilClient, MemoryClient, PolicyClient } from "./clients/service-clients.js";
export {
  generateMrtrKeyringFile,
  loadMrtrKeyring,
  loadOrCreateMrtrKeyring,
  MRTR_KEYRING_FILE,
  newMrtrKeyringFile,
  parseMrtrKeyring,
} from "./mrtr/keyring.js";
export type { MrtrKeyring, MrtrKeyringFile } from "./mrtr/keyring.js";
export {
  argumentsDigest,
  DEFAULT_REQUEST_STATE_TTL_SECONDS,
  MAX_REQUEST_STATE_TTL_SECONDS,
  openRequestState,
  REQUEST_STATE_REFUSAL_REASONS,
  sealRequestState,
} from "./mrtr/sealed-state.js";
export type { OpenResult, RequestStatePayload, RequestStateRefusal, RequestStateRefusalReason, SealInput } from "./mrtr/sealed-state.js";
export { edgeSurface } from "./contracts/sources.js";
export type { EdgeSurface } from "./contracts/sources.js";
export { attestServedSurface } from "./contracts/attestation.js";
export { checkContractsAtStart } from "./contracts/start.js";
export type { EdgeAttestation } from "./deps/edge-deps.js";
export { createMemoryRateLimiter, createRateLimiter, createRedisRateLimiter, RateLimited } from "./limits/limiter.js";
export type { LimitedCall, RateLimiter } from "./limits/limiter.js";
export { loadRateLimitsFile, NO_RATE_LIMITS, parseRateLimits } from "./limits/limits-file.js";
export type { RateLimit, RateLimits, TenantLimits } from "./limits/limits-file.js";
export { createCredentialDirectory } from "./auth/directory.js";
export type { CredentialDirectory, CredentialDirectoryOptions, CredentialRefusal, KeyAnswer, Recheck, TenantDirectoryClient } from "./auth/directory.js";
export { createUpstreamCatalog, deferredUpstreamCatalog } from "./clients/upstream-catalog.js";
export type { UpstreamCatalog } from "./clients/upstream-catalog.js";
