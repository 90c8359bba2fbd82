export {
  cachedPerDefinition,
  capabilityContract,
  CONTRACT_KINDS,
  contractSet,
  digestOf,
  entryDigest,
  NO_ENTITLEMENTS,
  NO_GATES,
  promptContract,
  resourceContract,
  sectionDigests,
  sectionDrift,
  serverDigest,
  toolContract,
  violationsOf,
} from "./contract.js";
export type {
  CapabilityContract,
  CapabilitySource,
  ContractKind,
  ContractSet,
  Entitlements,
  Gates,
  PromptContract,
  PromptSource,
  ResourceContract,
  ResourceSource,
  ToolBehavior,
  ToolContract,
  ToolSource,
  ToolSurface,
} from "./contract.js";
export { diffContracts, formatDiff, graver, VERDICT_ORDER } from "./diff.js";
export type { ContractChange, ContractDiff, Verdict } from "./diff.js";
export { changesSincePinned, EMPTY_HISTORY, extendHistory, HISTORY_FILE, HISTORY_VERSION, parseHistory, relock, serializeHistory } from "./history.js";
export type { ContractHistory, Relocked, SincePinned } from "./history.js";
export { checkLock, defaultLockFile, deterministicJson, LOCKFILE_NAME, LOCKFILE_VERSION, parseLock, SECTIONS, serializeLock } from "./lockfile.js";
export type { LockCheck, Lockfile } from "./lockfile.js";
export { HIGH_FIELD_COUNT, MEDIUM_FIELD_COUNT, tokenEconomics } from "./token-economics.js";
export type { InflationRisk, TokenEconomics } from "./token-economics.js";
export type { JsonSchema } from "./json-schema.js";
export { ATTESTATION_ORIGIN, AttestationError, attestationText, countersign, driftFromLock, SIGNATURE_FILE, signAttestation, verifyAttestation, verifyAttestationNote } from "./attestation.js";
export type { Attestation, LiveSurface } from "./attestation.js";
export { parseUpstreamsLock, parseUpstreamToolEntry, serializeUpstreamsLock, upstreamToolEntryText, upstreamContracts, upstreamToolSource, UPSTREAMS_LOCK_NAME, UPSTREAMS_LOCK_VERSION } from "./upstreams-lock.js";
export type { UpstreamToolDefinition, UpstreamToolEntry } from "./upstreams-lock.js";
