import { openServiceDb, type Db } from "@chaos-core/kit";
import type { LedgerStorageConfig } from "../config.js";

/** Opens the ledger service's database: Postgres, or PGlite in `<dataDir>/ledger` behind the data-directory lock. */
export function openLedgerDb(storage: LedgerStorageConfig): Promise<Db> {
  return openServiceDb(storage, "ledger");
}
