export { ChaosError, ERROR_CODES, toGrpcError, toMcpErrorResult } from "./errors.js";
export type { ErrorCode, McpErrorResult } from "./errors.js";
export {
  askerOfLabel,
  assertRequestRef,
  assertTenantId,
  contextLabel,
  ContextSigner,
  CONTEXT_HEADER,
  CONTEXT_SIG_HEADER,
  REQUEST_LABEL_PREFIX,
  sameAsker,
} from "./context.js";
export type { Asker, CallContext, SameAsker } from "./context.js";
export { MAX_SUBJECT_TOKEN_LENGTH, SUBJECT_TOKEN_HEADER, subjectTokenOf, withSubjectToken } from "./subject-token.js";
export {
  ConfigError,
  DEFAULT_SHUTDOWN_GRACE_SECONDS,
  envVars,
  GRPC_TLS_VARS,
  isLoopbackHost,
  loadGrpcTransportConfig,
  loadLifecycleConfig,
  parseEnv,
  requireStorage,
} from "./config.js";
export type { ConfigIssue, Env, GrpcTlsConfig, GrpcTransportConfig, LifecycleConfig } from "./config.js";
export { GRPC_TLS_REFRESH_MS, openGrpcTls, openGrpcTransport } from "./rpc/tls.js";
export type { GrpcTls, GrpcTransport } from "./rpc/tls.js";
export { describeZodIssues, formatIssuePath, likelyMeant, withIssueNote, zodProblems } from "./zod-issues.js";
export type { ZodIssueWording, ZodProblem } from "./zod-issues.js";
export { CAPABILITY_NAME_RE } from "./capability-name.js";
export { scanJsonText } from "./json-text.js";
export { isObject, isPlainObject } from "./objects.js";
export type { JsonPath, JsonTextScan, JsonTextScanOptions } from "./json-text.js";
export { createLogger, LOG_LEVELS } from "./logger.js";
export type { Logger } from "./logger.js";
export { onShutdown } from "./lifecycle.js";
export { ATTR, MCP_DURATION_BUCKETS, SEMCONV } from "./telemetry/attributes.js";
export { inRequestSpan, outsideTrace, recordToolCall, withSpan } from "./telemetry/spans.js";
export { startMcpServerSpan } from "./telemetry/mcp.js";
export { startMcpClientSpan, traceContextMeta } from "./telemetry/mcp-client.js";
export type { McpClientCallInfo, McpClientSpan } from "./telemetry/mcp-client.js";
export type { McpMessageInfo, McpOutcome, McpServerSpan } from "./telemetry/mcp.js";
export type { StepSpan } from "./telemetry/spans.js";
export { instrument, recordError } from "./rpc/instrument.js";
export { raceSignal } from "./rpc/abort.js";
export { allowCidrs, blockedAddressClass, parseAddress } from "./net/address.js";
export type { AllowAddress } from "./net/address.js";
export { ALLOWED_ADDRESSES_VARIABLE, parseAllowedAddresses, resolveVetted, systemLookup } from "./net/vetted-host.js";
export type { HostLookup, ResolvedAddress, VettingDeps } from "./net/vetted-host.js";
export { createDeferredClient, START_WAIT_MS } from "./rpc/deferred.js";
export { createInProcessClient } from "./rpc/in-process.js";
export { addGrpcService, createGrpcClient, grpcServiceDefinition } from "./rpc/grpc.js";
export type { GrpcClient, GrpcClientOptions } from "./rpc/grpc.js";
export { LIVENESS_HEALTH_SERVICE, register, startGrpcServer } from "./rpc/server.js";
export {
  CLIENT_KEEPALIVE_MS,
  defaultChannelOptions,
  DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS,
  GRPC_SERVER_CONNECTION_AGE_MS,
  GRPC_SERVICE_CONFIG,
  GRPC_TARGET_FORMS,
  parseGrpcTarget,
  RECONNECT_BACKOFF_MS,
} from "./rpc/target.js";
export type { GrpcTargetKind, ParsedGrpcTarget } from "./rpc/target.js";
export type { Registration, RunningGrpcServer } from "./rpc/server.js";
export { DEFAULT_TIMEOUT_MS } from "./rpc/types.js";
export type { AnyService, CallOptions, HandlerContext, ServiceClient, ServiceImpl } from "./rpc/types.js";
export { APP_ROLE } from "./db/db.js";
export type { Db, QueryOptions, Queryable, QueryResult } from "./db/db.js";
export { createPostgresDb } from "./db/postgres.js";
export { createPgliteDb } from "./db/pglite.js";
export { openServiceDb, serviceStorage } from "./db/open.js";
export type { ServiceStorage } from "./db/open.js";
export { DATABASE_CHECK_TIMEOUT_MS, DATABASE_WATCH_MS, migrate, pendingMigrations, schemaGate } from "./db/migrate.js";
export type { Migration, SchemaGate, ServingSwitch } from "./db/migrate.js";
export { checkGrpcHealth } from "./rpc/health-client.js";
export { isDataDirInUse, isDataDirLocked, lockDataDir } from "./data-dir.js";
export { APP_PACKAGE_NAME, appRoot } from "./app-root.js";
export { ChpFloat, chpFloat, isChpFloat, pythonFloatRepr } from "./chp/float.js";
export { type AuditEntryFields, auditEntryChainHash, canonicalJson, canonicalJsonAndHash, chainHash, contentHash } from "./chp/canonical-json.js";
export { parseChpJson } from "./chp/parse.js";
export { canonicalJsonRfc8785, sha256Rfc8785 } from "./rfc8785/canonical-json.js";
export {
  decodeBase64,
  ed25519KeyHash,
  NoteFormatError,
  NoteVerificationError,
  noteVerifier,
  openNote,
  parseNote,
  parseVerifierKey,
  rawEd25519PublicKey,
  signNote,
  verifierKey,
} from "./signed-note.js";
export type { NoteSigner, NoteVerifier, ParsedNote } from "./signed-note.js";
export { failClosedOnRedisOutage, isRedisOutage, redisUnavailable } from "./redis-errors.js";
export { tenantKeyPrefix } from "./redis-keys.js";
export { watchFile } from "./file-watch.js";
export type { FileWatch, WatchFileOptions } from "./file-watch.js";
export { hashApiKey, ISSUED_KEY_PREFIX, issuedKeyId, newIssuedKey, principalProblem, RESERVED_PRINCIPALS, reservedPrincipalProblem } from "./api-keys.js";
export { APPROVER_ROLE, MAX_ROLES, ROLE_NAME_RE, ROLE_NAME_RULE, roleNameProblem, rolesProblem } from "./roles.js";
export { createMemoryChangeCounters, createRedisChangeCounters } from "./change-counters.js";
export type { ChangeCounters } from "./change-counters.js";
export { announcedChange, createMemoryTenantGenerations, createRedisTenantGenerations, publishedGeneration } from "./tenant-generations.js";
export type { TenantChangeListener, TenantGenerations } from "./tenant-generations.js";
export { parseTenantLimits, rateLimitSchema, tenantLimitsSchema } from "./rate-limits.js";
export { DEFAULT_TOOLSETS, servedToolsets, TOOLSET_NAMES } from "./toolsets.js";
export type { ToolsetName } from "./toolsets.js";
export type { RateLimit, TenantLimits } from "./rate-limits.js";
export {
  ambiguityProblem,
  concreteName,
  hostValueProblem,
  ledgerPolicySectionSchema,
  parseLedgerPolicySection,
  parseToolPolicy,
  RISKS,
  spendPoliciesSchema,
  spendPolicySchema,
  toolPolicySchema,
} from "./ledger-policy.js";
export type { LedgerPolicySection, Risk, SpendPolicyConfig, ToolPolicy, ToolPolicyDocument, ToolRule } from "./ledger-policy.js";
export {
  DEFAULT_UPSTREAM_TIMEOUT_MS,
  describeSecretRef,
  parseUpstreamsFile,
  RESERVED_UPSTREAM_NAMES,
  resolveSecretRef,
  secretRefSchema,
  UPSTREAM_NAME_RE,
  UPSTREAM_SECRET_ENV_PREFIX,
  upstreamDeclarationSchema,
  upstreamsFileSchema,
} from "./upstreams.js";
export type { HttpUpstreamDeclaration, SecretRef, SecretSources, StdioUpstreamDeclaration, UpstreamAuth, UpstreamDeclaration } from "./upstreams.js";
export { authorizationServerMetadataUrls, fetchAuthorizationServerMetadata } from "./oauth-metadata.js";
export { DEFAULT_UPSTREAM_EXPOSURE, exposureOfTool, upstreamExposureSchema, upstreamOffer, upstreamOfferWithAnyRoles } from "./upstream-exposure.js";
export type { ExposureSubject, UpstreamExposureRule, UpstreamGrant, UpstreamOffer } from "./upstream-exposure.js";
