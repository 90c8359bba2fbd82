import { openServiceDb, type Db } from "@chaos-core/kit";
import type { CouncilStorageConfig } from "../config.js";

/** Opens the council service's database: Postgres, or PGlite in `<dataDir>/council` behind the data-directory lock. */
export function openCouncilDb(storage: CouncilStorageConfig): Promise<Db> {
  return openServiceDb(storage, "council");
}
