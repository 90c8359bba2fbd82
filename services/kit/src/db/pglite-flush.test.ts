/**
 * PGlite's commits reach the disk only through `Db.flush` (docs/ledger.md "Known limits"):
 * observed from outside with strace, which lists every `fdatasync`/`fsync` a process makes and
 * the file it was made on. A process that commits and closes syncs nothing under `pg_wal`; one
 * that flushes after its commit `fdatasync`s the WAL segment the commit was written to.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";

const PGLITE_JS = new URL("../../dist/db/pglite.js", import.meta.url).pathname;
const straceAvailable = spawnSync("strace", ["-V"]).status === 0;
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** The WAL syncs a child makes that commits one row and then, with `flush`, calls `Db.flush`. */
function walSyncs(flush: boolean): string[] {
  const dir = mkdtempSync(join(tmpdir(), "chaos-core-pglite-flush-"));
  dirs.push(dir);
  const trace = join(dir, "strace.txt");
  const script = `
    const { createPgliteDb } = await import(${JSON.stringify(PGLITE_JS)});
    const db = await createPgliteDb({ dataDir: ${JSON.stringify(join(dir, "pg"))} });
    await db.adminTx((q) => q.exec("CREATE TABLE t (n int)"));
    await db.adminTx((q) => q.query("INSERT INTO t VALUES (1)"));
    ${flush ? "await db.flush();" : ""}
    await db.close();`;
  const run = spawnSync("strace", ["-f", "-y", "-e", "trace=fdatasync,fsync", "-o", trace, process.execPath, "--input-type=module", "-e", script], {
    encoding: "utf8",
    timeout: 120_000,
  });
  expect(run.status, run.stderr).toBe(0);
  return readFileSync(trace, "utf8")
    .split("\n")
    .filter((l) => /(fdatasync|fsync)\(\d+<[^>]*\/pg_wal\//.test(l));
}

describe.skipIf(!straceAvailable)("PGlite durability (strace)", () => {
  it("a commit alone syncs nothing to disk; Db.flush fdatasyncs the WAL segment it was written to", () => {
    expect(walSyncs(false)).toEqual([]);
    const synced = walSyncs(true);
    expect(synced.length).toBeGreaterThan(0);
    expect(synced.some((l) => /fdatasync\(\d+<[^>]*\/pg_wal\/[0-9A-F]{24}>\)/.test(l))).toBe(true);
  });
});
