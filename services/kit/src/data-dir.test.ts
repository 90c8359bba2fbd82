import { mkdirSync, mkdtempSync, rmSync, utimesSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { lockDataDir } from "./data-dir.js";

describe("lockDataDir", () => {
  const dir = mkdtempSync(join(tmpdir(), "chaos-core-lock-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("is exclusive while held and free once released", async () => {
    const release = await lockDataDir(dir);
    await expect(lockDataDir(dir)).rejects.toMatchObject({
      code: "failed_precondition",
      message: expect.stringMatching(/in use by another chaos-core process/),
    });
    await release();
    const again = await lockDataDir(dir);
    await again();
  });

  it("takes over a lock its owner stopped refreshing (a crashed process), not a fresh one", async () => {
    const crashed = join(dir, "crashed");
    mkdirSync(join(crashed, ".chaos-core.lock"), { recursive: true });
    await expect(lockDataDir(crashed)).rejects.toMatchObject({ code: "failed_precondition" });
    // A dead owner stops touching its lock, which then ages past the stale limit.
    const old = new Date(Date.now() - 60_000);
    utimesSync(join(crashed, ".chaos-core.lock"), old, old);
    const release = await lockDataDir(crashed);
    await release();
  });
});
