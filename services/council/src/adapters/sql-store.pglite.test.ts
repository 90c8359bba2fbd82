import { createPgliteDb } from "@chaos-core/kit";
import { describeCouncilStoreContract } from "./store.contract.js";

// Embedded PGlite in memory: the adapter standalone mode runs on.
describeCouncilStoreContract("PGlite", async () => {
  const db = await createPgliteDb();
  return { db, close: () => db.close() };
});
