import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createPgliteDb, type Db } from "@chaos-core/kit";

/** The embedded database standalone runs on, in a fresh temporary folder that `close` removes. */
export async function openTempPglite(prefix: string): Promise<{ db: Db; close(): Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), prefix));
  const db = await createPgliteDb({ dataDir: dir });
  return {
    db,
    close: async () => {
      await db.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
