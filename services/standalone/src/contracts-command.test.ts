import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { contractSet, NO_ENTITLEMENTS, NO_GATES, serializeLock, toolContract, type ToolSource } from "@chaos-core/contracts";
import { afterAll, describe, expect, it } from "vitest";
import { appRoot } from "@chaos-core/kit";
import { runContractsCommand } from "./contracts-command.js";

function sink() {
  let text = "";
  return { write: (chunk: string) => ((text += chunk), true), text: () => text };
}

async function run(args: string[]) {
  const stdout = sink();
  const stderr = sink();
  const code = await runContractsCommand(args, { stdout, stderr });
  return { code, stdout: stdout.text(), stderr: stderr.text() };
}

const dir = mkdtempSync(join(tmpdir(), "chaos-contracts-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const source = (patch: Partial<ToolSource> = {}): ToolSource => ({
  name: "lookup",
  title: "Look up",
  description: "Looks a key up",
  toolset: "core",
  inputSchema: { type: "object", properties: { key: { type: "string" } }, required: ["key"] },
  outputSchema: { type: "object", properties: { value: { type: "string" } } },
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  ...patch,
});

function lockFile(name: string, ...tools: ToolSource[]): string {
  const path = join(dir, name);
  const set = contractSet({ tools: tools.map((t) => toolContract(t, { gates: NO_GATES, entitlements: NO_ENTITLEMENTS })), prompts: [], resources: [], capabilities: [] });
  writeFileSync(path, serializeLock(set));
  return path;
}

describe("chaos-core contracts diff OLD NEW", () => {
  it("prints the gravest verdict, then one line per change", async () => {
    const before = lockFile("a.lock", source());
    const after = lockFile("b.lock", source({ description: "Looks it up" }), source({ name: "other" }));
    expect(await run(["diff", before, after])).toEqual({
      code: 0,
      stdout: "SAFE\nSAFE     tools/other entry: added\nCOSMETIC tools/lookup surface description: description changed\n",
      stderr: "",
    });
    expect((await run(["diff", before, before])).stdout).toBe("no changes\n");
  });

  it("refuses a malformed lockfile naming the field, and a wrong command line with exit 2", async () => {
    const bad = join(dir, "bad.lock");
    writeFileSync(bad, '{"lockfileVersion": 1, "serverName": "x", "integrityDigest": 3}');
    expect(await run(["diff", bad, bad])).toMatchObject({ code: 1, stderr: "chaos-core contracts: chaoscore.lock: integrityDigest: must be sha256:<64 hex digits>\n" });
    expect((await run(["diff", bad])).code).toBe(2);
    expect((await run(["lock", "--nope"])).code).toBe(2);
    expect((await run(["sign"])).stderr).toContain("sign needs --key FILE");
    expect((await run(["nope"])).stderr).toContain('unknown command "nope"');
  });
});

describe("chaos-core contracts keygen, sign, verify", () => {
  it("signs the committed lock; verify checks it with the verifier key alone and against the served definitions", async () => {
    const root = join(dir, "repo");
    mkdirSync(root);
    copyFileSync(join(appRoot(), "chaoscore.lock"), join(root, "chaoscore.lock"));
    const key = join(dir, "release.pem");
    const keygen = await run(["keygen", "--out", key]);
    expect(keygen.code).toBe(0);
    const vkey = keygen.stdout.trim();
    expect(vkey).toMatch(/^chaos-core-release\+[0-9a-f]{8}\+[A-Za-z0-9+/=]+$/);
    const signed = await run(["sign", "--key", key, "--root", root]);
    expect(signed).toMatchObject({ code: 0, stderr: "" });
    expect(readFileSync(join(root, "chaoscore.lock.sig"), "utf8")).toMatch(/^chaos-core\/contracts\nsha256:[0-9a-f]{64}\n\n\u2014 chaos-core-release /);
    const ok = await run(["verify", "--key", vkey, "--root", root]);
    expect(ok).toMatchObject({ code: 0, stderr: "" });
    expect(ok.stdout).toMatch(/^verified sha256:[0-9a-f]{64}, signed by chaos-core-release; the served definitions match the lock\n$/);

    const otherKey = join(dir, "other.pem");
    const other = (await run(["keygen", "--out", otherKey, "--name", "chaos-core-release"])).stdout.trim();
    expect(await run(["verify", "--key", other, "--root", root])).toMatchObject({ code: 1, stderr: expect.stringContaining("the contracts signature does not verify") as string });

    const lock = readFileSync(join(root, "chaoscore.lock"), "utf8");
    writeFileSync(join(root, "chaoscore.lock"), lock.replace('"description": "Store a JSON value', '"description": "Store any JSON value'));
    const tampered = await run(["verify", "--key", vkey, "--root", root]);
    expect(tampered.code).toBe(1);
    expect(tampered.stderr).toContain("the lockfile was edited: tools/chaoscore_remember (surface)");
  });
});
