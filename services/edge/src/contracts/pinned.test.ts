import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { EMPTY_HISTORY, entryDigest, extendHistory, parseLock, serializeHistory, toolContract } from "@chaos-core/contracts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createMemorySessionStore } from "../sessions/memory-store.js";
import { connectInMemory, uniqueTenant, type Connected } from "../test-support/in-memory.js";
import { startTestServices, type TestServices } from "../test-support/services.js";
import { TOOL_DEFINITIONS } from "../tools/index.js";
import { attestServedSurface } from "./attestation.js";
import { pinnedDigestOf, TOOL_CONTRACT_META_KEY } from "./pinned.js";
import { toolSource } from "./sources.js";

// Contract awareness on errors (issue 15 item 8, docs/contracts.md §9): a call refused for its
// arguments, from a client that pinned an older contract of the tool, says what changed since.
const lockText = readFileSync(fileURLToPath(new URL("../../../../chaoscore.lock", import.meta.url)), "utf8");
const lock = parseLock(lockText).contracts;
const current = lock.tools.chaoscore_remember!;

// The contract an earlier release served: `value` was optional then and the tool was not
// idempotent — so today's contract made a field required (BREAKING) and flipped idempotent (RISKY).
const def = TOOL_DEFINITIONS.find((d) => d.name === "chaoscore_remember")!;
const older = (() => {
  const src = toolSource(def);
  const schema = src.inputSchema as { required?: string[] };
  return toolContract(
    {
      ...src,
      description: "Stores a memory (an earlier wording).",
      inputSchema: { ...src.inputSchema, required: (schema.required ?? []).filter((f) => f !== "value") },
      annotations: { ...src.annotations, idempotentHint: !src.annotations.idempotentHint },
    },
    { gates: current.behavior.gates, entitlements: current.entitlements },
  );
})();
const historyText = serializeHistory(extendHistory(EMPTY_HISTORY, { ...lock, tools: { ...lock.tools, chaoscore_remember: older } }, lock));

let services: TestServices;
let c: Connected;

const errorOf = (r: CallToolResult) => (r.structuredContent as { error?: { code: string; message: string } }).error;
const pinnedCall = (pin: unknown, args: Record<string, unknown>) =>
  c.client.callTool({ name: "chaoscore_remember", arguments: args, _meta: { [TOOL_CONTRACT_META_KEY]: pin } }) as Promise<CallToolResult>;

beforeAll(async () => {
  services = await startTestServices("contract_pinned");
  const contracts = attestServedSurface({ lockText, verifierKeys: [], historyText });
  c = await connectInMemory({ ...services.deps(createMemorySessionStore()), contracts }, { tenant: uniqueTenant("pinned"), principal: "tester" });
});
afterAll(async () => {
  await c?.close();
  await services?.close();
});

describe("contract awareness on errors", () => {
  it("tools/list gives each tool the digest its lock entry pins, to send back with calls", async () => {
    const { tools } = await c.client.listTools();
    for (const t of tools) expect(t._meta?.[TOOL_CONTRACT_META_KEY]).toEqual({ digest: entryDigest(lock.tools[t.name]!) });
  });

  it("a refused call pinned to the older contract carries its BREAKING and RISKY changes, in the message and as data", async () => {
    const refused = await pinnedCall({ digest: entryDigest(older) }, { key: "k" });
    expect(refused.isError).toBe(true);
    const error = errorOf(refused)!;
    expect(error.code).toBe("invalid_argument");
    expect(error.message).toMatch(/^value: required/);
    expect(error.message).toContain("; this tool's contract changed since the digest you pinned (sha256:");
    expect(error.message).toContain("BREAKING surface");
    expect(error.message).toContain("field value became required");
    expect(error.message).toMatch(/RISKY behavior[^;]*idempotent/);
    // The description changed too: cosmetic, not told.
    expect(error.message).not.toMatch(/COSMETIC|description/);
    expect(refused._meta?.[TOOL_CONTRACT_META_KEY]).toEqual({
      pinned: entryDigest(older),
      current: entryDigest(current),
      known: true,
      more: 0,
      changes: [
        expect.objectContaining({ verdict: "BREAKING", section: "surface", reasons: ["field value became required"] }),
        expect.objectContaining({ verdict: "RISKY", section: "behavior" }),
      ],
    });
    const text = (refused.content as Array<{ type: string; text: string }>)[0]!.text;
    expect(text).toBe(`invalid_argument: ${error.message}`);
  });

  it("accepts the loose forms a client writes: the digest as a plain string, the hex without its prefix", async () => {
    const hex = entryDigest(older).slice("sha256:".length);
    expect(pinnedDigestOf({ [TOOL_CONTRACT_META_KEY]: entryDigest(older) })).toBe(entryDigest(older));
    expect(pinnedDigestOf({ [TOOL_CONTRACT_META_KEY]: { digest: hex.toUpperCase() } })).toBe(entryDigest(older));
    expect(errorOf(await pinnedCall(hex, { key: "k" }))!.message).toContain("field value became required");
  });

  it("a current pin, no pin, or a call that passes leave the answer as it was", async () => {
    const plain = errorOf((await c.call("chaoscore_remember", { key: "k" })))!.message;
    expect(plain).not.toContain("pinned");
    expect(errorOf(await pinnedCall({ digest: entryDigest(current) }, { key: "k" }))!.message).toBe(plain);
    const ok = await pinnedCall({ digest: entryDigest(older) }, { key: "pinned-ok", value: "v" });
    expect(ok.isError).toBeFalsy();
    expect(ok._meta?.[TOOL_CONTRACT_META_KEY]).toBeUndefined();
  });

  it("a digest this server never served is said to be unknown, with the current one", async () => {
    const refused = await pinnedCall({ digest: `sha256:${"0".repeat(64)}` }, { key: "k" });
    expect(errorOf(refused)!.message).toContain("is not one this server has served: list the tools again for the current contract");
    expect(refused._meta?.[TOOL_CONTRACT_META_KEY]).toEqual({ pinned: `sha256:${"0".repeat(64)}`, current: entryDigest(current), known: false });
  });
});
