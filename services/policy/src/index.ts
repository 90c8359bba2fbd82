export { evaluatePolicy } from "./domain/engine.js";
export type { Decision, EvaluationInput, MatchedRule, PolicyDecision, RequestFacts } from "./domain/engine.js";
export {
  CAPABILITY_NAME_RE,
  capabilityNameProblem,
  defaultPolicyDocument,
  formatPolicyDocument,
  parsePolicyDocument,
  PolicyDocumentError,
  policyDocumentSchema,
  validatePolicyDocument,
} from "./domain/policy-document.js";
export type { PolicyDocumentJson, PolicyIssue, RiskRulesJson } from "./domain/policy-document.js";
export { effectiveRisk, isAtOrAbove, RISK_LEVELS, RISK_THRESHOLDS } from "./domain/risk.js";
export type { Risk, RiskLevel, RiskThreshold } from "./domain/risk.js";
export type { PolicySnapshot, PolicyStore } from "./domain/policy-store.js";
export { createSqlPolicyStore, migratePolicy } from "./adapters/sql-store.js";
export { createFilePolicyStore, STANDALONE_TENANT } from "./adapters/file-store.js";
export type { FilePolicyStore, FilePolicyStoreOptions } from "./adapters/file-store.js";
export { createPolicyHandlers } from "./handlers/policy-handlers.js";
export {
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
export type { PolicyServerOptions } from "./server.js";
