export {
  createKeyring,
  generateKeyringFile,
  generateSigningKey,
  jwkThumbprint,
  KID_RE,
  loadKeyring,
  loadOrCreateKeyring,
  parseKeyring,
  STANDALONE_KEYRING_FILE,
} from "./keys/keyring.js";
export type { Keyring, KeyringFile, KeyringLogger, SigningKey } from "./keys/keyring.js";
export {
  newNonce,
  parseReceipt,
  parseUtcTimestamp,
  RECEIPT_DECISIONS,
  RECEIPT_KINDS,
  RECEIPT_SCHEMA_VERSION,
  receiptFieldsSchema,
  receiptSchema,
  receiptSigningBytes,
  RISKS,
  signReceipt,
  verifyReceiptSignature,
} from "./authz/receipt.js";
export type { Receipt, ReceiptDecision, ReceiptFields, ReceiptKind, Risk, SignatureFailure } from "./authz/receipt.js";
export { mergeHostBound, parseToolPolicy, stepToolPolicy, toolPolicySchema } from "./authz/tool-policy.js";
export type { HostBoundFailure, ToolArguments, ToolPolicy, ToolPolicyDocument, ToolRule } from "./authz/tool-policy.js";
export { inspectCall } from "./authz/inspect-call.js";
export type { InspectedCall, InspectionCode, InspectionFailure, ToolCall } from "./authz/inspect-call.js";
export {
  AUTHORIZATION_CODES,
  FINANCE_REASONS,
  financeReason,
  ANSWER_REFUSAL_CODES,
  ISSUE_REFUSAL_CODES,
  REQUEST_STATE_REFUSAL_REASONS,
  stepOf,
} from "./authz/codes.js";
export type { AuthorizationCode, AuthorizationStep, DenyCode, FinanceReason, IssueRefusalCode, RequestStateRefusalReason } from "./authz/codes.js";
export { checkAuthorization, MAX_CLOCK_SKEW_MS, settleNonce } from "./authz/authorize.js";
export type {
  AuthorizationCheck,
  AuthorizationDecision,
  AuthorizationRecord,
  AuthorizeInput,
  FinalCheck,
  NeedsNonceCheck,
  PostReplayCode,
  PreReplayCode,
} from "./authz/authorize.js";
export {
  APPROVER_ROLE,
  evaluateToolApproval,
  issueReceipt,
  MAX_RECEIPT_TTL_SECONDS,
  MIN_RECEIPT_TTL_SECONDS,
} from "./authz/issue.js";
export type { ActorKind, DecidingActor, DecisionLog, IssueReceiptInput, IssueResult, ToolApprovalEvaluation } from "./authz/issue.js";
export { approveHuman, evaluateGate } from "./domain/spend-gate.js";
export type {
  GateClaim,
  GateNumber,
  GateProvenance,
  GateResult,
  GateRule,
  GateState,
  SpendAction,
  SpendPolicy,
} from "./domain/spend-gate.js";
export {
  parseSpendPolicies,
  REFERENCE_SPEND_POLICIES,
  spendPoliciesSchema,
  spendPolicySchema,
  tighten,
} from "./domain/spend-policies.js";
export type { SpendPolicyConfig } from "./domain/spend-policies.js";
export { APPEND_ONLY_TABLES, LEDGER_MIGRATIONS, LEDGER_SCHEMA, migrateLedger, pendingLedgerMigrations } from "./log/migrations.js";
export { createLedgerStore } from "./log/ledger-store.js";
export type { LedgerSigningKey, LedgerStore, LedgerStoreOptions } from "./log/ledger-store.js";
export type { AppendedEntry, AppendHook, AppendInput, BatchListener } from "./log/batch-writer.js";
export { createLedgerReader } from "./log/ledger-reader.js";
export type { ChainStatus, ConsistencyProof, InclusionProof, LedgerReader, LedgerReaderOptions, LedgerRecord, StoredCheckpoint } from "./log/ledger-reader.js";
export { canonicalEvent, chainEntry, EXPORT_FORMAT } from "./log/entry.js";
export type { LedgerEntry } from "./log/entry.js";
export { Sequencer } from "./log/sequencer.js";
export type { BatchWriter, SequencerStats, Settled } from "./log/sequencer.js";
export {
  ExportFormatError,
  parseExport,
  verifyChainSegment,
  verifyExport,
  verifyParsedExport,
  verifyLedger,
  verifyStoredLedger,
} from "./log/verify.js";
export type { LedgerSource, ParsedExport, VerificationKey, VerifyCheck, VerifyFailure, VerifyOptions, VerifyReport } from "./log/verify.js";
export { isKeySet, keysAt, parseVerificationKeySet } from "./log/verification-keys.js";
export type { PublicKeyInput, VerificationKeySet } from "./log/verification-keys.js";
export {
  checkpointText,
  ed25519KeyHash,
  NoteFormatError,
  NoteVerificationError,
  noteVerifier,
  openCheckpoint,
  openNote,
  parseCheckpointText,
  parseNote,
  parseVerifierKey,
  signCheckpoint,
  signNote,
  verifierKey,
} from "./log/checkpoint.js";
export type { Checkpoint, NoteSigner, NoteVerifier, ParsedNote } from "./log/checkpoint.js";
export {
  consistencyProof,
  emptyRoot,
  hashChildren,
  hashLeaf,
  inclusionProof,
  rootFromInclusionProof,
  rootOf,
  TreeFrontier,
  verifyConsistency,
  verifyInclusion,
} from "./log/merkle.js";
export { createLedgerHandlers } from "./handlers/ledger-handlers.js";
export { LedgerCore, DEFAULT_RECEIPT_TTL_SECONDS } from "./service/ledger-core.js";
export type { AfterAuthorize, AuthorizationOutcome, LedgerCoreDeps, StepBinding } from "./service/ledger-core.js";
export { ToolReceipts } from "./service/tool-receipts.js";
export type { ApprovedVia } from "./service/tool-receipts.js";
export { createLedgerCore } from "./service/create-core.js";
export type { LedgerCoreOptions } from "./service/create-core.js";
export { SpendDesk } from "./service/spend-desk.js";
export { SpendCollection } from "./service/spend-collection.js";
export { FinanceDesk } from "./service/finance-desk.js";
export { REQUEST_STATE_NONCE_PREFIX, RequestStates } from "./service/request-states.js";
export type { ConsumeRequestStateInput, ConsumeRequestStateOutcome, RequestStateRefusalInput } from "./service/request-states.js";
export { loadOperatorPolicies, parseOperatorPolicies, referenceOperatorPolicies } from "./adapters/operator-policies.js";
export { createRegistryOperatorPolicies } from "./adapters/registry-policies.js";
export type { RegistryPoliciesOptions } from "./adapters/registry-policies.js";
export type { OperatorPolicies, TenantPolicies } from "./adapters/operator-policies.js";
export { createMemoryNonceCache, createRedisNonceCache } from "./adapters/nonce-cache.js";
export type { NonceCache } from "./adapters/nonce-cache.js";
export { openLedgerDb } from "./adapters/open-db.js";
export {
  DEFAULT_WEBHOOK_RETRY_SECONDS,
  loadLedgerConfig,
  MAX_WEBHOOK_TIMEOUT_MS,
  originVar,
  requireWebhookSecret,
  WEBHOOK_ENV,
  webhookConfigOf,
} from "./config.js";
export type { LedgerConfig, LedgerStorageConfig, WebhookConfig } from "./config.js";
export { notifies, spendRequestSeqOf, WEBHOOK_EVENT_TYPES, webhookEventOf } from "./webhooks/events.js";
export type { SpendRequestFacts, WebhookEvent, WebhookEventContext, WebhookEventData, WebhookEventType, WebhookOutcome } from "./webhooks/events.js";
export { notifiesUpstream, UPSTREAM_EVENT_TYPES, upstreamEventOf } from "./webhooks/upstream-events.js";
export type { UpstreamDriftEventData, UpstreamDriftState, UpstreamDriftWebhookEvent, UpstreamPinnedTool } from "./webhooks/upstream-events.js";
export { signatureOf, signWebhook, webhookId } from "./webhooks/signature.js";
export type { WebhookHeaders } from "./webhooks/signature.js";
export { createWebhookOutbox } from "./webhooks/outbox.js";
export type { LeasedWebhook, StoredWebhook, WebhookOutbox } from "./webhooks/outbox.js";
export { createWebhookDispatcher, WEBHOOK_BATCH, WEBHOOK_LEASE_SECONDS, WEBHOOK_POLL_MS } from "./webhooks/dispatcher.js";
export type { WebhookDispatcher, WebhookDispatcherOptions } from "./webhooks/dispatcher.js";
export { startLedgerServer } from "./server.js";
export type { LedgerServerOptions } from "./server.js";
export { REFERENCE_TOOL_NAMES, referenceTool } from "./domain/reference-tools.js";
export type { ReferenceTool, ReferenceToolName } from "./domain/reference-tools.js";
export { COSIGNATURE_V1_TYPE, cosign, cosignatureOf, cosignerKeyId, cosignerVerifierKey, parseCosignerKey } from "./witness/cosignature.js";
export type { Cosigner } from "./witness/cosignature.js";
export { createWitness } from "./witness/witness.js";
export type { ForkEvidence, TrustedLog, Witness, WitnessAnswer, WitnessOptions } from "./witness/witness.js";
