export { APPROVAL_CHANNELS, defaultApprovalChannels, isApprovalChannel, orderChannels } from "./domain/approval-channels.js";
export type { ApprovalChannel, ApprovalChannelsJson } from "./domain/approval-channels.js";
export { approvalChannelsFor, approvalChannelWarnings, clientElicitationOptIns } from "./domain/channel-choice.js";
export type { ApprovalChannelsDecision, ApprovalSubject, ChannelsRule } from "./domain/channel-choice.js";
export { evaluatePolicy } from "./domain/engine.js";
export type { Decision, EvaluationInput, MatchedRule, PolicyDecision, RequestFacts } from "./domain/engine.js";
export {
  capabilityNameProblem,
  defaultPolicyDocument,
  financeToolNameProblem,
  formatPolicyDocument,
  parsePolicyDocument,
  PolicyDocumentError,
  policyDocumentSchema,
  SPEND_POLICY_NAME_RE,
  spendPolicyNameProblem,
  validatePolicyDocument,
} from "./domain/policy-document.js";
export type { PolicyDocumentJson, PolicyIssue, PolicyRuleJson, RiskRulesJson } from "./domain/policy-document.js";
export { effectiveRisk, isAtOrAbove, RISK_LEVELS, RISK_THRESHOLDS } from "./domain/risk.js";
export type { Risk, RiskLevel, RiskThreshold } from "./domain/risk.js";
export type { PolicySnapshot, PolicyStore } from "./domain/policy-store.js";
export { createSqlPolicyStore, migratePolicy, pendingPolicyMigrations } from "./adapters/sql-store.js";
export { createFilePolicyStore, STANDALONE_TENANT } from "./adapters/file-store.js";
export type { FilePolicyStore, FilePolicyStoreOptions } from "./adapters/file-store.js";
export { createPolicyHandlers, decide, type DecisionCaller } from "./handlers/policy-handlers.js";
export {
  approvalChannelsFromProto,
  approvalChannelsToProto,
  decisionFromProto,
  decisionToProto,
  policyDocumentFromProto,
  policyDocumentToProto,
  riskFromProto,
  riskToProto,
} from "./handlers/policy-proto.js";
export { loadPolicyConfig } from "./config.js";
export type { PolicyConfig, PolicyStoreConfig } from "./config.js";
export { createPolicyServer } from "./server.js";
export type { PolicyServerOptions, RunningPolicyServer } from "./server.js";
export { checkSettings, checkTenantId, DEFAULT_TENANT_SETTINGS, keyStatus, TOOLSETS, unregisteredTenants } from "./domain/tenants.js";
export type {
  ApiKeyRecord,
  KeyStatus,
  ResolvedKey,
  TenantRecord,
  TenantRegistry,
  TenantSettings,
  TenantState,
  TenantStatus,
} from "./domain/tenants.js";
export { createSqlTenantRegistry } from "./adapters/tenant-registry.js";
export { createSqlTenantUpstreams } from "./adapters/tenant-upstreams.js";
export { checkPin, checkTenantUpstreamDeclaration, checkUpstreamName, declarationJson, unregisteredUpstreams } from "./domain/tenant-upstreams.js";
export type { CheckedPin, TenantUpstreamDeclaration, TenantUpstreamRecord, TenantUpstreamRegistry, TenantUpstreamStatus } from "./domain/tenant-upstreams.js";
export { createTenantAdminHandlers, createTenantDirectoryHandlers } from "./handlers/tenant-handlers.js";
export { createSqlUpstreamApprovals, UPSTREAM_APPROVALS_MIGRATION } from "./adapters/upstream-approvals.js";
export { checkApproval, noUpstreamApprovals } from "./domain/upstream-approvals.js";
export type { ApprovalInput, CheckedApproval, UpstreamApprovalRecord, UpstreamApprovals } from "./domain/upstream-approvals.js";
export { createUpstreamApprovalHandlers } from "./handlers/upstream-approval-handlers.js";
export type { UpstreamAdminOptions } from "./handlers/upstream-handlers.js";
export { createUpstreamUrlCheck } from "./adapters/upstream-address.js";
export type { UpstreamUrlCheck } from "./adapters/upstream-address.js";
export { operatorUpstreamNames } from "./adapters/operator-upstreams.js";
export { createRoutedPolicyStore } from "./adapters/routed-store.js";
export { announcePolicyChanges } from "./adapters/announcing-store.js";
export { explainDecision, parsePolicyTests, runPolicyTests } from "./domain/policy-tests.js";
export type { CapabilityFacts, Explanation, ExplainRequest, PolicyTestCase, PolicyTestResult, PolicyTestRun } from "./domain/policy-tests.js";
export type { RuleTrace } from "./domain/rules.js";
export { entryMatches } from "./domain/capability-match.js";
export { readsArgs, ruleArgsProblem, ruleArgsProblems } from "./domain/rule-args.js";
export type { PinnedTool, RuleArgsProblem } from "./domain/rule-args.js";
