export {
  continueSession,
  createSession,
  personaBrief,
  PHASES,
  recallSession,
  RULESET,
  saveOutput,
  scoreSession,
  verifyClaims,
} from "./domain/engine.js";
export type { CouncilSession, Phase, PersonaBrief } from "./domain/engine.js";
export type { PhaseRecord, Ruleset } from "./domain/engine.js";
export { MIGRATION_OUTPUTS, MIGRATION_TASK, MIGRATION_TITLE, VERIFY_REJECT_OUTPUT } from "./domain/examples.js";
export { createCouncilHandlers } from "./handlers/council-handlers.js";
export type { CouncilHandlerOptions } from "./handlers/council-handlers.js";
export { createSqlCouncilStore } from "./adapters/sql-store.js";
export type { SqlCouncilStoreOptions } from "./adapters/sql-store.js";
export { COUNCIL_MIGRATIONS, COUNCIL_SCHEMA, migrateCouncil, pendingCouncilMigrations } from "./adapters/migrations.js";
export { openCouncilDb } from "./adapters/open-db.js";
export { isSessionId, isSessionIdPrefix, SESSION_LIST_MAX, SESSION_MAX_AGE_SECONDS_MAX, SESSION_STATE_MAX_BYTES } from "./session-store.js";
export type {
  CouncilSessionStore,
  ExportedSession,
  Modification,
  SessionBatchOptions,
  SessionListing,
  SessionRetentionResult,
  SessionState,
  StoredSession,
} from "./session-store.js";
export { COUNCIL_EXPORT_FORMAT } from "./export-format.js";
export { COUNCIL_DEFAULT_PORT, loadCouncilConfig } from "./config.js";
export type { CouncilConfig, CouncilStorageConfig } from "./config.js";
export { startCouncilServer } from "./server.js";
export type { CouncilServerOptions } from "./server.js";
