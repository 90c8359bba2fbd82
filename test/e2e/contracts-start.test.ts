import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { writeSignedLocks } from "../support/contract-lock.js";
import { removeDir, runToExit, stdioClient, tempDir } from "../support/processes.js";

// chaos-core's start-time contract check (docs/contracts.md §7): the definitions it serves against
// the lock, the lock against its signed note, with the public key alone.

describe("chaos-core refuses to start on a contract it cannot attest", () => {
  const dir = tempDir();
  const locks = writeSignedLocks(dir);
  const dataDirs: string[] = [];
  const dataDir = () => {
    const d = tempDir();
    dataDirs.push(d);
    return d;
  };
  afterAll(() => {
    for (const d of [dir, ...dataDirs]) removeDir(d);
  });

  it("refuses a tampered lockfile (serve and stdio), naming the tool and section", async () => {
    for (const command of ["serve", "stdio"]) {
      const run = await runToExit([command], { CHAOS_CORE_DATA_DIR: dataDir(), PORT: "0", CHAOS_CORE_CONTRACT_KEYS: locks.vkey, CHAOS_CORE_CONTRACT_LOCK_FILE: locks.tampered });
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toContain(`chaos-core: ${locks.tampered}: the lockfile was edited: tools/chaoscore_remember (surface)`);
      expect(run.stdout).toBe("");
    }
  });

  it("refuses a wrong signature, and a configured key with no signed note", async () => {
    const wrong = await runToExit(["stdio"], { CHAOS_CORE_DATA_DIR: dataDir(), CHAOS_CORE_CONTRACT_KEYS: locks.vkey, CHAOS_CORE_CONTRACT_LOCK_FILE: locks.wrongSignature });
    expect(wrong.code, wrong.stderr).toBe(1);
    expect(wrong.stderr).toContain(`chaos-core: ${locks.wrongSignature}: the contracts signature does not verify`);
    // The committed lock has no .sig beside it: with a key configured that refuses too.
    const unsigned = await runToExit(["stdio"], { CHAOS_CORE_DATA_DIR: dataDir(), CHAOS_CORE_CONTRACT_KEYS: locks.vkey });
    expect(unsigned.code, unsigned.stderr).toBe(1);
    expect(unsigned.stderr).toContain("verifier keys are configured but no signed note was given for the lock");
  });

  it("without keys, refuses a lock that cognition's capabilities drifted from, naming the capability (serve and stdio)", async () => {
    const doc = JSON.parse(readFileSync(locks.good, "utf8")) as { capabilities: Record<string, { surface: { description: string } }> };
    doc.capabilities["memory.recall"]!.surface.description = "Recalls, and sends a copy elsewhere.";
    const drifted = join(dir, "capability-drift.lock");
    writeFileSync(drifted, JSON.stringify(doc));
    for (const command of ["serve", "stdio"]) {
      const run = await runToExit([command], { CHAOS_CORE_DATA_DIR: dataDir(), PORT: "0", CHAOS_CORE_CONTRACT_LOCK_FILE: drifted });
      expect(run.code, run.stderr).toBe(1);
      expect(run.stderr).toContain(`chaos-core: ${drifted}: the registered capabilities drifted from the lock: capabilities/memory.recall (surface)`);
      expect(run.stdout).toBe("");
    }
  });

  it("refuses a bad verifier key in CHAOS_CORE_CONTRACT_KEYS, naming the variable", async () => {
    const run = await runToExit(["stdio"], { CHAOS_CORE_DATA_DIR: dataDir(), CHAOS_CORE_CONTRACT_KEYS: `${locks.vkey},not-a-key` });
    expect(run.code).not.toBe(0);
    expect(run.stderr).toMatch(/CHAOS_CORE_CONTRACT_KEYS: key 2 of the list: a verifier key is <name>\+<hex key hash>\+<base64 key>/);
  });

  it("starts with a good signed lock", async () => {
    const { client } = await stdioClient({ CHAOS_CORE_DATA_DIR: dataDir(), CHAOS_CORE_CONTRACT_KEYS: locks.vkey, CHAOS_CORE_CONTRACT_LOCK_FILE: locks.good });
    expect(client.getServerVersion()?.name).toBe("chaos-core");
    expect((await client.listTools()).tools.length).toBeGreaterThan(0);
    await client.close();
  });
});
