import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { createLogger } from "@chaos-core/kit";
import { createApiKeyVerifier, hashApiKey, loadApiKeysFile, watchApiKeysFile } from "./api-keys.js";

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

  it("carry the roles the operator granted, and only known ones", async () => {
    const verifier = await loadApiKeysFile(
      file([
        { tenant: "acme", principal: "alice", sha256: hashApiKey("alice-key"), roles: ["approver"] },
        { tenant: "acme", principal: "bot", sha256: hashApiKey("bot-key"), roles: [] },
      ]),
    );
    expect(verifier.verify("alice-key")).toEqual({ tenant: "acme", principal: "alice", roles: ["approver"] });
    expect(verifier.verify("bot-key")).toEqual({ tenant: "acme", principal: "bot", roles: [] });
    await expect(
      loadApiKeysFile(file([{ tenant: "acme", principal: "p", sha256: hashApiKey("x"), roles: ["admin"] }])),
    ).rejects.toThrow(/\[0\]\.roles\[0\]/);
    await expect(
      loadApiKeysFile(file([{ tenant: "acme", principal: "p", sha256: hashApiKey("x"), roles: "approver" }])),
    ).rejects.toThrow(/\[0\]\.roles/);
  });

  it("match by hash only", () => {
    const verifier = createApiKeyVerifier([{ tenant: "acme", principal: "p", sha256: hashApiKey("k") }]);
    expect(verifier.verify(hashApiKey("k"))).toBeUndefined();
  });

  it("keep the last good list in force when the watched file is emptied or deleted, and take the next good one", async () => {
    const path = file([{ tenant: "acme", principal: "p", sha256: hashApiKey("first") }]);
    const keys = await watchApiKeysFile(path, { logger: createLogger("api-keys-test", "silent") });
    try {
      writeFileSync(path, "[]");
      await keys.refresh();
      expect(keys.verify("first")).toMatchObject({ principal: "p" });
      unlinkSync(path);
      await keys.refresh();
      expect(keys.verify("first")).toMatchObject({ principal: "p" });
      expect(keys.holdsIdentity("acme", "p")).toBe(true);
      writeFileSync(path, JSON.stringify([{ tenant: "acme", principal: "q", sha256: hashApiKey("second") }]));
      await keys.refresh();
      expect(keys.verify("first")).toBeUndefined();
      expect(keys.verify("second")).toMatchObject({ principal: "q" });
      expect(keys.holdsIdentity("acme", "p")).toBe(false);
    } finally {
      keys.close();
    }
  });
});
