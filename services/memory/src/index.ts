export { createMemoryHandlers } from "./handlers/memory-handlers.js";
export { createSqlMemoryStore } from "./adapters/sql-store.js";
export type { SqlMemoryStoreOptions } from "./adapters/sql-store.js";
export { migrateMemory, pendingMemoryMigrations, MEMORY_MIGRATIONS, MEMORY_PG_EXTENSIONS, MEMORY_SCHEMA } from "./adapters/migrations.js";
export { openMemoryDb } from "./adapters/open-db.js";
export { MEMORY_LIMITS } from "./domain/validation.js";
export { MEMORY_EXPORT_FORMAT } from "./domain/export-format.js";
export type {
  BatchOptions,
  DeletedItems,
  JsonValue,
  MemoryItem,
  MemoryStats,
  MemoryStore,
  RememberInput,
  RetentionResult,
  SearchInput,
  SearchPage,
  StoredItem,
  TagCount,
} from "./domain/memory-store.js";
export { loadMemoryConfig } from "./config.js";
export type { MemoryConfig, MemoryStorageConfig } from "./config.js";
export { startMemoryServer } from "./server.js";
export type { MemoryServerOptions } from "./server.js";
