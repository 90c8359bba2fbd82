import { openServiceDb, type Db } from "@chaos-core/kit";
import type { MemoryStorageConfig } from "../config.js";
import { MEMORY_PG_EXTENSIONS } from "./migrations.js";

/**
 * Opens the memory service's database: Postgres, or PGlite (with the extensions the migrations
 * need) in `<dataDir>/memory` behind the data-directory lock.
 */
export function openMemoryDb(storage: MemoryStorageConfig): Promise<Db> {
  return openServiceDb(storage, "memory", { extensions: MEMORY_PG_EXTENSIONS });
}
