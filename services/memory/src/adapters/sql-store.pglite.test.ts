import { createPgliteDb } from "@chaos-core/kit";
import { MEMORY_PG_EXTENSIONS } from "./migrations.js";
import { describeMemoryStoreContract } from "./store.contract.js";

// Embedded PGlite in memory: the adapter standalone mode runs on.
describeMemoryStoreContract("PGlite", async () => {
  const db = await createPgliteDb({ extensions: [...MEMORY_PG_EXTENSIONS] });
  return { db, close: () => db.close() };
});
