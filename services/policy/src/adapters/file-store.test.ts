import { mkdtemp, readdir, readFile, rename, rm, unlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createLogger, type Logger } from "@chaos-core/kit";
import { afterEach, describe, expect, it } from "vitest";
import { recordingLogger } from "../../../../test/support/logger.js";
import {
  defaultPolicyDocument,
  formatPolicyDocument,
  PolicyDocumentError,
  validatePolicyDocument,
} from "../domain/policy-document.js";
import type { PolicySnapshot, PolicyStore } from "../domain/policy-store.js";
import { createFilePolicyStore, type FilePolicyStore } from "./file-store.js";
import { CHANGE_TIMEOUT_MS, policyStoreContract, within } from "./policy-store.contract.js";

const silent = createLogger("policy-test", "silent");
const dirs: string[] = [];
const stores: PolicyStore[] = [];

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "chaoscore-policy-file-"));
  dirs.push(dir);
  return dir;
}

async function openStore(path: string, logger: Logger = silent, pollMs = 200): Promise<FilePolicyStore> {
  const store = await createFilePolicyStore({ path, logger, pollMs });
  stores.push(store);
  return store;
}

afterEach(async () => {
  for (const store of stores.splice(0)) await store.close();
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

/** Polls `read` until `accept` holds, for changes that arrive through file events or polls. */
async function eventually<T>(read: () => Promise<T>, accept: (value: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + CHANGE_TIMEOUT_MS;
  for (;;) {
    const value = await read();
    if (accept(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last value ${JSON.stringify(value)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** How an editor that saves by replacing the file writes it. */
async function replaceFile(path: string, text: string): Promise<void> {
  await writeFile(`${path}.swp`, text);
  await rename(`${path}.swp`, path);
}

const EDITED = validatePolicyDocument(
  { deniedCapabilities: ["shell.exec"], httpAllowedDomains: ["api.example.com"] },
  "test",
);

describe("file policy store contract", () => {
  policyStoreContract(
    async () => {
      const store = await createFilePolicyStore({ path: join(await tempDir(), "policy.json"), logger: silent });
      return { store, tenant: "default", otherTenant: "acme", close: () => store.close() };
    },
    { tenants: "one" },
  );
});

describe("file policy store", () => {
  it("creates policy.json with the safe defaults on first run, at version 1", async () => {
    const dir = join(await tempDir(), "nested", "data");
    const path = join(dir, "policy.json");
    const store = await openStore(path);
    const text = await readFile(path, "utf8");
    expect(text).toBe(formatPolicyDocument(defaultPolicyDocument()));
    expect(JSON.parse(text)).toMatchObject({
      requireConfirmationFor: ["http.request"],
      approvalChannels: { byRisk: { high: ["approver", "operator", "console"] }, spend: { default: ["approver", "operator", "console"] } },
    });
    expect(text.endsWith("}\n")).toBe(true);
    const snap = await store.get("default");
    expect(snap).toMatchObject({ version: 1, source: `file:${path}`, document: defaultPolicyDocument() });
    expect(JSON.parse(await readFile(join(dir, "policy.state.json"), "utf8"))).toMatchObject({ version: 1 });
  });

  it("picks up an edit of the file with a new version, through get", async () => {
    const path = join(await tempDir(), "policy.json");
    const store = await openStore(path);
    await writeFile(path, JSON.stringify(EDITED));
    const snap = await eventually(() => store.get("default"), (s) => s.version === 2, "version 2");
    expect(snap.document).toEqual(EDITED);
    expect(snap.lastError).toBeUndefined();
  });

  it("picks up a file replaced by an editor, through watch", async () => {
    const path = join(await tempDir(), "policy.json");
    const store = await openStore(path);
    const controller = new AbortController();
    const it = store.watch("default", controller.signal)[Symbol.asyncIterator]();
    expect((await within(it.next(), "the first snapshot")).value).toMatchObject({ version: 1 });
    const next = it.next();
    await replaceFile(path, formatPolicyDocument(EDITED));
    const changed = await within(next, "the edited version");
    expect(changed.value).toMatchObject({ version: 2, document: EDITED });
    controller.abort();
  });

  it("picks up a changed approvalChannels section with a new version, and warns once of a client_elicitation opt-in", async () => {
    const path = join(await tempDir(), "policy.json");
    const { logger, lines } = recordingLogger();
    const store = await openStore(path, logger);
    const written = JSON.parse(await readFile(path, "utf8")) as { approvalChannels: { byRisk: Record<string, string[]> } };
    written.approvalChannels.byRisk["high"] = ["client_elicitation", "console"];
    await writeFile(path, JSON.stringify(written, null, 2));
    const snap = await eventually(() => store.get("default"), (s) => s.version === 2, "version 2");
    expect(snap.document.approvalChannels.byRisk.high).toEqual(["client_elicitation", "console"]);
    expect(snap.document.approvalChannels.byRisk.critical).toEqual(["approver", "operator", "console"]);
    // Polls that find the same bytes log nothing more.
    await new Promise((r) => setTimeout(r, 3 * 200));
    const warned = lines.filter((l) => l["level"] === 40);
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ path, version: 2 });
    expect(String((warned[0]?.["warnings"] as string[])[0])).toMatch(/^approvalChannels\.byRisk\.high lists client_elicitation/);
  });

  it("finds an edit by polling even when no file event is delivered", async () => {
    const path = join(await tempDir(), "policy.json");
    // A debounce far longer than the test holds every file event back, so only the poll can
    // notice the edit in time.
    const store = await createFilePolicyStore({ path, logger: silent, pollMs: 50, debounceMs: 60_000 });
    stores.push(store);
    await writeFile(path, JSON.stringify(EDITED));
    const snap = await eventually(() => store.get("default"), (s) => s.version === 2, "the poll to reload");
    expect(snap.document).toEqual(EDITED);
  });

  it("keeps the version of an unchanged file across restarts and bumps it for a file changed while stopped", async () => {
    const path = join(await tempDir(), "policy.json");
    const first = await openStore(path);
    await first.put("default", EDITED);
    await first.put("default", defaultPolicyDocument());
    expect((await first.get("default")).version).toBe(3);
    const storedAt = (await first.get("default")).updatedAt;
    await first.close();

    const second = await openStore(path);
    expect(await second.get("default")).toMatchObject({ version: 3, updatedAt: storedAt });
    await second.close();

    await writeFile(path, formatPolicyDocument(EDITED));
    const third = await openStore(path);
    expect(await third.get("default")).toMatchObject({ version: 4, document: EDITED });
  });

  it("refuses to start on a malformed file, naming the file and the field", async () => {
    const path = join(await tempDir(), "policy.json");
    await writeFile(path, JSON.stringify({ deniedCapabilities: ["shell.exec", 42] }));
    const started = createFilePolicyStore({ path, logger: silent });
    await expect(started).rejects.toBeInstanceOf(PolicyDocumentError);
    await expect(started).rejects.toThrow(`${path}: deniedCapabilities[1]: expected string, got number`);
  });

  it("refuses to start on an unknown key rather than ignoring it", async () => {
    const path = join(await tempDir(), "policy.json");
    await writeFile(path, JSON.stringify({ deniedCapabilites: ["shell.exec"] }));
    await expect(createFilePolicyStore({ path, logger: silent })).rejects.toThrow(
      `${path}: deniedCapabilites: unknown field (did you mean "deniedCapabilities"?)`,
    );
  });

  it("keeps serving the last good version after a malformed edit, reports and logs it, and recovers", async () => {
    const path = join(await tempDir(), "policy.json");
    const { logger, lines } = recordingLogger();
    const store = await openStore(path, logger);
    await store.put("default", EDITED);

    await writeFile(path, '{ "httpAllowedDomains": ["https://api.example.com/"] }');
    // writeFile truncates first, so a reload may briefly see an empty file: wait for the real error.
    const broken = await eventually(
      () => store.get("default"),
      (s) => s.lastError?.includes("httpAllowedDomains") === true,
      "the error",
    );
    expect(broken.version).toBe(2);
    expect(broken.document).toEqual(EDITED);
    expect(broken.lastError).toContain(`${path}: httpAllowedDomains[0]: "https://api.example.com/" is a URL`);
    // Several polls later the same problem is still logged once, not on every poll.
    await new Promise((r) => setTimeout(r, 4 * 200));
    const logged = lines.filter((l) => l["level"] === 50 && String(l["msg"]).includes("httpAllowedDomains[0]"));
    expect(logged).toHaveLength(1);
    expect(String(logged[0]?.["msg"])).toContain("version 2 stays in force");

    await writeFile(path, '{ "httpAllowedDomains": ["api.example.com"] }');
    const fixed = await eventually(() => store.get("default"), (s) => s.version === 3, "the fixed version");
    expect(fixed.lastError).toBeUndefined();
    expect(fixed.document.httpAllowedDomains).toEqual(["api.example.com"]);
  });

  it("keeps the last good version after an edit whose rule does not compile, naming the rule, the position and the expression", async () => {
    const path = join(await tempDir(), "policy.json");
    const store = await openStore(path);
    await store.put("default", EDITED);
    await writeFile(path, JSON.stringify({ rules: [{ capability: "files.write", effect: "deny", when: "args.a.all(x, args.b.all(y, args.c.all(z, z == x)))" }] }));
    const broken = await eventually(
      () => store.get("default"),
      (s) => s.lastError?.includes("rules[0]") === true,
      "the error",
    );
    expect(broken).toMatchObject({ version: 2, document: EDITED });
    expect(broken.lastError).toBe(
      `${path}: rules[0].when: comprehensions are nested 3 deep, over the bound of 2 at 1:29 in "args.a.all(x, args.b.all(y, args.c.all(z, z == x)))"`,
    );
  });

  it("keeps the last good version when the file is deleted, without recreating defaults over it", async () => {
    const path = join(await tempDir(), "policy.json");
    const store = await openStore(path);
    await store.put("default", EDITED);
    await unlink(path);
    const snap = await eventually(() => store.get("default"), (s) => s.lastError !== undefined, "the error");
    expect(snap).toMatchObject({ version: 2, document: EDITED });
    expect(snap.lastError).toContain("the file is missing");
    await expect(readFile(path, "utf8")).rejects.toThrow(/ENOENT/);
  });

  it("does not stream a rejected edit: watch yields only good versions", async () => {
    const path = join(await tempDir(), "policy.json");
    const store = await openStore(path);
    const controller = new AbortController();
    const seen: PolicySnapshot[] = [];
    const consumer = (async () => {
      for await (const snap of store.watch("default", controller.signal)) {
        seen.push(snap);
        if (snap.version === 2) return;
      }
    })();
    await writeFile(path, "{ not json");
    await eventually(() => store.get("default"), (s) => s.lastError !== undefined, "the error");
    await writeFile(path, formatPolicyDocument(EDITED));
    await within(consumer, "version 2 on the stream");
    expect(seen.map((s) => s.version)).toEqual([1, 2]);
    expect(seen[1]?.document).toEqual(EDITED);
    controller.abort();
  });

  it("writes a put atomically as a pretty-printed file and leaves no temporary files", async () => {
    const dir = await tempDir();
    const path = join(dir, "policy.json");
    const store = await openStore(path);
    expect(await store.put("default", EDITED, 1)).toBe(2);
    expect(await readFile(path, "utf8")).toBe(formatPolicyDocument(EDITED));
    expect((await readdir(dir)).sort()).toEqual(["policy.json", "policy.state.json"]);
  });

  it("refuses to start when the version sidecar is corrupt, naming it", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, "policy.state.json"), "{ broken");
    await expect(createFilePolicyStore({ path: join(dir, "policy.json"), logger: silent })).rejects.toThrow(
      `${join(dir, "policy.state.json")}: not a valid policy state file`,
    );
  });
});
