import { createPostgresDb } from "@chaos-core/kit";
import { createTestDatabase } from "../../../../test/support/postgres.js";
import { describeCouncilStoreContract } from "./store.contract.js";

// A fresh database on the local Postgres: the adapter Kubernetes runs on.
describeCouncilStoreContract("Postgres", async () => {
  const database = await createTestDatabase("chaoscore_council");
  const db = createPostgresDb({ connectionString: database.url });
  return {
    db,
    async close() {
      await db.close();
      await database.drop();
    },
  };
});
