import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "@chaos-core/kit";
import { API_KEYS_RECHECK_MS, createApiKeyVerifier, hashApiKey, loadApiKeysFile, watchApiKeysFile } from "./api-keys.js";

const dir = mkdtempSync(join(tmpdir(), "edge-keys-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(content: unknown): string {
  const path = join(dir, `${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(path, typeof content === "string" ? content : JSON.stringify(content));
  return path;
}

describe("API keys", () => {
  it("resolve a key to the tenant and principal it was issued to", async () => {
    const verifier = await loadApiKeysFile(
      file([
        { tenant: "acme", principal: "ci-bot", sha256: hashApiKey("acme-key") },
        { tenant: "globex", principal: "ops", sha256: hashApiKey("globex-key").toUpperCase() },
      ]),
    );
    expect(verifier.verify("acme-key")).toEqual({ tenant: "acme", principal: "ci-bot", roles: [] });
    expect(verifier.verify("globex-key")).toEqual({ tenant: "globex", principal: "ops", roles: [] });
    expect(verifier.verify("acme-key ")).toBeUndefined();
    expect(verifier.verify("")).toBeUndefined();
  });

  it("refuse a bad file, naming the entry and field without echoing it", async () => {
    const notAHash = "my-plaintext-key";
    await expect(loadApiKeysFile(file([{ tenant: "acme", principal: "p", sha256: notAHash }]))).rejects.toThrow(
      /CHAOS_CORE_API_KEYS_FILE .*: \[0\]\.sha256: must be the lowercase hex SHA-256/,
    );
    await expect(loadApiKeysFile(file([{ tenant: "acme", principal: "p", sha256: notAHash }]))).rejects.not.toThrow(notAHash);
    await expect(loadApiKeysFile(file([{ tenant: "Not Valid", principal: "p", sha256: hashApiKey("x") }]))).rejects.toThrow(
      /\[0\]\.tenant/,
    );
    await expect(loadApiKeysFile(file([]))).rejects.toThrow(/lists no keys/);
    await expect(loadApiKeysFile(file("{nope"))).rejects.toThrow(/cannot be read as JSON/);
    await expect(loadApiKeysFile(join(dir, "missing.json"))).rejects.toThrow(/CHAOS_CORE_API_KEYS_FILE/);
  });

  it("refuse keys issued to the reserved principals operator and local", async () => {
    for (const principal of ["operator", "local"]) {
      await expect(loadApiKeysFile(file([{ tenant: "acme", principal, sha256: hashApiKey("x"), roles: ["approver"] }]))).rejects.toThrow(
        new RegExp(`\\[0\\]\\.principal: "${principal}" is reserved`),
      );
      expect(() => createApiKeyVerifier([{ tenant: "acme", principal, sha256: hashApiKey("x") }])).toThrow(/is reserved/);
    }
    // Other names that merely contain them are fine.
    expect(createApiKeyVerifier([{ tenant: "acme", principal: "operator-2", sha256: hashApiKey("x") }]).verify("x")?.principal).toBe("operator-2");
  });

  it("resolve a key's SHA-256 to its identity, as a console session re-reads it", () => {
    const verifier = createApiKeyVerifier([{ tenant: "acme", principal: "alice", sha256: hashApiKey("alice-key").toUpperCase(), roles: ["approver"] }]);
    expect(verifier.identityOfDigest(hashApiKey("alice-key"))).toEqual({ tenant: "acme", principal: "alice", roles: ["approver"] });
    expect(verifier.identityOfDigest(hashApiKey("other"))).toBeUndefined();
    expect(verifier.identityOfDigest("not-a-digest")).toBeUndefined();
    expect(verifier.identityOfDigest("")).toBeUndefined();
  });

  it("carry the roles the operator granted (approver and names of its own, sorted), and only well-formed ones", async () => {
    const verifier = await loadApiKeysFile(
      file([
        { tenant: "acme", principal: "alice", sha256: hashApiKey("alice-key"), roles: ["approver"] },
        { tenant: "acme", principal: "bot", sha256: hashApiKey("bot-key"), roles: [] },
        { tenant: "acme", principal: "sam", sha256: hashApiKey("sam-key"), roles: ["support", "billing_ops", "approver"] },
      ]),
    );
    expect(verifier.verify("alice-key")).toEqual({ tenant: "acme", principal: "alice", roles: ["approver"] });
    expect(verifier.verify("bot-key")).toEqual({ tenant: "acme", principal: "bot", roles: [] });
    expect(verifier.verify("sam-key")).toEqual({ tenant: "acme", principal: "sam", roles: ["approver", "billing_ops", "support"] });
    const entry = (roles: unknown) => file([{ tenant: "acme", principal: "p", sha256: hashApiKey("x"), roles }]);
    await expect(loadApiKeysFile(entry(["support", "Support Team"]))).rejects.toThrow(/\[0\]\.roles\[1\]: must be a role name: a role name is a lowercase letter/);
    await expect(loadApiKeysFile(entry(["9lives"]))).rejects.toThrow(/\[0\]\.roles\[0\]: must be a role name/);
    await expect(loadApiKeysFile(entry(["support", "support"]))).rejects.toThrow(/\[0\]\.roles: lists a role twice/);
    await expect(loadApiKeysFile(entry(Array.from({ length: 33 }, (_, i) => `r${i}`)))).rejects.toThrow(/\[0\]\.roles: /);
    await expect(
      loadApiKeysFile(file([{ tenant: "acme", principal: "p", sha256: hashApiKey("x"), roles: "approver" }])),
    ).rejects.toThrow(/\[0\]\.roles/);
  });

  it("match by hash only", () => {
    const verifier = createApiKeyVerifier([{ tenant: "acme", principal: "p", sha256: hashApiKey("k") }]);
    expect(verifier.verify(hashApiKey("k"))).toBeUndefined();
  });

  it("refuse every key once the watched file is emptied, deleted or malformed, and take the next good one", async () => {
    const path = file([{ tenant: "acme", principal: "p", sha256: hashApiKey("first") }]);
    const silent = createLogger("api-keys-test", "silent");
    // No throttle: each refresh reads what is on disk, so each step below is the file's effect alone.
    const keys = await watchApiKeysFile(path, { logger: silent, recheckMs: 0 });
    let changes = 0;
    keys.onChange(() => changes++);
    const good = (key: string, principal: string) => JSON.stringify([{ tenant: "acme", principal, sha256: hashApiKey(key) }]);
    try {
      writeFileSync(path, "[]");
      await keys.refresh();
      expect(keys.verify("first")).toBeUndefined();
      expect(keys.unreadable()).toBe(false);
      expect(keys.holdsIdentity("acme", "p")).toBe(false);
      expect(keys.identityOfDigest(hashApiKey("first"))).toBeUndefined();
      expect(changes).toBe(1);

      writeFileSync(path, good("first", "p"));
      await keys.refresh();
      expect(keys.verify("first")).toMatchObject({ principal: "p" });
      expect(keys.identityOfDigest(hashApiKey("first"))).toEqual({ tenant: "acme", principal: "p", roles: [] });
      unlinkSync(path);
      await keys.refresh();
      expect(keys.verify("first")).toBeUndefined();
      expect(keys.unreadable()).toBe(false);
      expect(changes).toBe(3);

      for (const malformed of ["[{", JSON.stringify([{ tenant: "acme", principal: "p", sha256: "nope" }])]) {
        writeFileSync(path, good("first", "p"));
        await keys.refresh();
        writeFileSync(path, malformed);
        await keys.refresh();
        expect(keys.verify("first")).toBeUndefined();
        expect(keys.unreadable()).toBe(true);
        expect(keys.identityOfDigest(hashApiKey("first"))).toBeUndefined();
      }
      // A malformed file changes nothing anyone could act on: no listener runs for it.
      expect(changes).toBe(5);

      writeFileSync(path, good("second", "q"));
      await keys.refresh();
      expect(keys.unreadable()).toBe(false);
      expect(keys.verify("first")).toBeUndefined();
      expect(keys.verify("second")).toMatchObject({ principal: "q" });
      expect(keys.holdsIdentity("acme", "q")).toBe(true);
    } finally {
      keys.close();
    }
  });

  it("still refuse to start on an empty, malformed or missing file", async () => {
    const silent = createLogger("api-keys-test", "silent");
    await expect(watchApiKeysFile(file([]), { logger: silent })).rejects.toThrow(/lists no keys/);
    await expect(watchApiKeysFile(file("[{"), { logger: silent })).rejects.toThrow(/cannot be read as JSON/);
    await expect(watchApiKeysFile(join(dir, "missing.json"), { logger: silent })).rejects.toThrow(/cannot be read/);
  });

  it("let concurrent requests share one check of the file, and check it at most every recheckMs", async () => {
    const path = file([{ tenant: "acme", principal: "p", sha256: hashApiKey("first") }]);
    // No change event or poll within the test: only requests check the file.
    const quiet = { logger: createLogger("api-keys-test", "silent"), pollMs: 600_000, debounceMs: 600_000 };
    const throttled = await watchApiKeysFile(path, { ...quiet, recheckMs: 600_000 });
    const prompt = await watchApiKeysFile(path, quiet);
    try {
      const burst = Array.from({ length: 20 }, () => prompt.refresh());
      expect(new Set(burst).size).toBe(1);
      await Promise.all(burst);

      writeFileSync(path, JSON.stringify([{ tenant: "acme", principal: "q", sha256: hashApiKey("second") }]));
      // Within the window a request is checked against the last check, not the disk...
      await Promise.all(Array.from({ length: 20 }, () => throttled.refresh()));
      expect(throttled.verify("first")).toMatchObject({ principal: "p" });
      // ...and an edit as old as the window is in force for every request after it.
      await new Promise((r) => setTimeout(r, API_KEYS_RECHECK_MS + 10));
      await prompt.refresh();
      expect(prompt.verify("first")).toBeUndefined();
    } finally {
      throttled.close();
      prompt.close();
    }
  });
});
