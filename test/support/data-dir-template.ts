import { cpSync, existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { inject } from "vitest";
import { removeDir, startServe } from "./processes.js";

/**
 * A data directory's embedded database as `chaos-core serve` creates it on a first run, made once
 * per test run and copied into a test's data directory, so a test that is not about the first run
 * does not pay for creating a PostgreSQL cluster (initdb, seconds under load) again and again.
 *
 * The template is made by the product itself: `chaos-core serve` (this build) on an empty data
 * directory, stopped once it serves, and only its `pg/` is kept. That database holds the schemas
 * and their migration records and no row besides: the keyrings, the policy file and everything a
 * test then writes are made by the test's own process, as on a first run. What a seeded directory
 * does not exercise is the creation itself; the tests about the first run (stdio-startup,
 * standalone, container, startup.test.ts) start from empty directories and keep doing so.
 */

const POLL_MS = 100;
const WAIT_MS = 180_000;

/** The template's `pg/`, made by the first caller of this run (one worker), awaited by the rest. */
async function templatePg(): Promise<string> {
  const root = inject("dataDirTemplateRoot");
  const pg = join(root, "pg");
  const ready = join(root, "ready");
  const failed = join(root, "failed");
  try {
    // mkdir is atomic: exactly one worker of the run makes the template.
    mkdirSync(join(root, "making"));
  } catch {
    const deadline = Date.now() + WAIT_MS;
    while (!existsSync(ready)) {
      if (existsSync(failed)) throw new Error(`the data directory template could not be made: ${readFileSync(failed, "utf8")}`);
      if (Date.now() > deadline) throw new Error(`the data directory template in ${root} was not made within ${WAIT_MS} ms`);
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
    return pg;
  }
  const work = join(root, "first-run");
  try {
    const serve = await startServe({ CHAOS_CORE_DATA_DIR: work }, WAIT_MS);
    await serve.stop();
    // Complete, as the runtime leaves a created database: PG_VERSION there, no creation marker.
    if (!existsSync(join(work, "pg", "PG_VERSION")) || existsSync(join(work, "pg.creating"))) {
      throw new Error(`chaos-core serve left no complete embedded database in ${work}:\n${serve.stderr()}`);
    }
    renameSync(join(work, "pg"), pg);
    removeDir(work);
    writeFileSync(ready, "");
    return pg;
  } catch (err) {
    writeFileSync(failed, (err as Error).message);
    throw err;
  }
}

/**
 * Puts the template's embedded database into `dataDir` (created when missing), which must not
 * hold one yet. Call it before the first process starts on the directory.
 */
export async function seedDataDir(dataDir: string): Promise<void> {
  const pg = await templatePg();
  if (existsSync(join(dataDir, "pg"))) throw new Error(`${dataDir} holds an embedded database already`);
  mkdirSync(dataDir, { recursive: true });
  cpSync(pg, join(dataDir, "pg"), { recursive: true });
}
