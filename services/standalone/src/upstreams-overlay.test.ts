import { spawnSync } from "node:child_process";
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { isReadOnlyError, lockReadOnly } from "./upstreams-overlay.js";

const DIST = new URL("../dist/upstreams-overlay.js", import.meta.url).pathname;
/** A user a directory's mode applies to: this one, or — as root, whom modes do not stop — nobody (uid 65534), in a child. */
const asUser = (lock: string): Promise<string | undefined> => {
  if (process.getuid?.() !== 0) return lockReadOnly(lock);
  const script = `import { lockReadOnly } from ${JSON.stringify(DIST)}; process.stdout.write(JSON.stringify((await lockReadOnly(process.argv[1])) ?? null));`;
  const run = spawnSync(process.execPath, ["--input-type=module", "-e", script, lock], { uid: 65534, gid: 65534, encoding: "utf8" });
  if (run.status !== 0) throw new Error(`the check as uid 65534 failed: ${run.stderr}`);
  return Promise.resolve((JSON.parse(run.stdout) as string | null) ?? undefined);
};

describe("where the upstreams lock cannot be written", () => {
  const dir = mkdtempSync(join(tmpdir(), "chaos-core-lock-mode-"));
  chmodSync(dir, 0o755);
  afterAll(() => {
    chmodSync(join(dir, "mounted"), 0o755);
    rmSync(dir, { recursive: true, force: true });
  });

  it("finds a read-only directory (EACCES) whether or not the lock exists, and a writable one writable", async () => {
    mkdirSync(join(dir, "mounted"));
    mkdirSync(join(dir, "kept"));
    writeFileSync(join(dir, "mounted", "upstreams.lock"), "{}");
    chmodSync(join(dir, "mounted"), 0o555);
    chmodSync(join(dir, "kept"), 0o777);
    expect(await asUser(join(dir, "mounted", "upstreams.lock"))).toBe(`${join(dir, "mounted")} cannot be written (EACCES)`);
    expect(await asUser(join(dir, "mounted", "absent.lock"))).toBe(`${join(dir, "mounted")} cannot be written (EACCES)`);
    expect(await asUser(join(dir, "kept", "upstreams.lock"))).toBeUndefined();
  });

  it("takes EROFS, EACCES and EPERM as a lock that cannot be written, nothing else", () => {
    for (const code of ["EROFS", "EACCES", "EPERM"]) expect(isReadOnlyError(Object.assign(new Error(code), { code }))).toBe(true);
    for (const code of ["ENOENT", "ENOSPC", undefined]) expect(isReadOnlyError(Object.assign(new Error("x"), { code }))).toBe(false);
  });
});
