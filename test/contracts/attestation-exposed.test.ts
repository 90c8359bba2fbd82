import { generateKeyPairSync } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { signAttestation, verifyAttestationNote } from "@chaos-core/contracts";
import { openNote, parseVerifierKey, verifierKey } from "@chaos-core/kit";
import { attestServedSurface } from "../../services/edge/src/contracts/attestation.js";
import { createMemorySessionStore } from "../../services/edge/src/sessions/memory-store.js";
import { CONTRACTS_META_KEY } from "../../services/edge/src/server/create-server.js";
import { initializeBody, MCP_HEADERS, readJsonRpc } from "../../services/edge/src/test-support/http.js";
import { startTestServices, type TestServices } from "../../services/edge/src/test-support/services.js";
import { startHttpTransport, type RunningHttpTransport } from "../../services/edge/src/transport/http.js";
import { runContractsCommand } from "../../services/standalone/src/contracts-command.js";
import { LOCK_TEXT } from "../support/contract-lock.js";

// What a client is shown of the served contracts (docs/contracts.md §7), and that it verifies
// the signed digest with the release's public key alone.

const release = { name: "chaos-core-release", ...generateKeyPairSync("ed25519") };
const vkey = verifierKey(release.name, release.publicKey);
const note = signAttestation(LOCK_TEXT, release);
const digest = (JSON.parse(LOCK_TEXT) as { integrityDigest: string }).integrityDigest;

let services: TestServices;
let edge: RunningHttpTransport;
let unattested: RunningHttpTransport;

function sink() {
  let text = "";
  return { write: (chunk: string) => ((text += chunk), true), text: () => text };
}

beforeAll(async () => {
  services = await startTestServices("contracts_exposed");
  const contracts = attestServedSurface({ lockText: LOCK_TEXT, note, verifierKeys: [vkey] });
  edge = await startHttpTransport({ ...services.deps(createMemorySessionStore()), contracts }, { host: "127.0.0.1", port: 0 });
  const bare = attestServedSurface({ lockText: LOCK_TEXT, verifierKeys: [] });
  unattested = await startHttpTransport({ ...services.deps(createMemorySessionStore()), contracts: bare }, { host: "127.0.0.1", port: 0 });
});

afterAll(async () => {
  await edge?.close();
  await unattested?.close();
  await services?.close();
});

describe("the attestation a client is shown", () => {
  it("initialize and server/discover results carry the note, the server digest and the key names in _meta", async () => {
    const init = await readJsonRpc(await fetch(edge.url, { method: "POST", headers: MCP_HEADERS, body: JSON.stringify(initializeBody()) }));
    const initMeta = (init?.result as { _meta?: Record<string, unknown> })._meta;
    expect(initMeta?.[CONTRACTS_META_KEY]).toEqual({ serverDigest: digest, attested: true, keyNames: ["chaos-core-release"], note });

    const res = await fetch(edge.url, {
      method: "POST",
      headers: { ...MCP_HEADERS, "mcp-protocol-version": "2026-07-28", "mcp-method": "server/discover" },
      body: JSON.stringify({
        jsonrpc: "2.0",
        id: 3,
        method: "server/discover",
        params: {
          _meta: {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": { name: "raw-modern", version: "0" },
          },
        },
      }),
    });
    const discover = (await readJsonRpc(res))?.result as { _meta?: Record<string, unknown>; supportedVersions?: string[] };
    expect(discover.supportedVersions).toContain("2026-07-28");
    // The SDK's own serverInfo stamp stays beside ours.
    expect(Object.keys(discover._meta ?? {})).toContain("io.modelcontextprotocol/serverInfo");
    expect(discover._meta?.[CONTRACTS_META_KEY]).toEqual({ serverDigest: digest, attested: true, keyNames: ["chaos-core-release"], note });
  });

  it("a client reads chaoscore://contracts/attestation and verifies the signed digest with the public key alone", async () => {
    const client = new Client({ name: "contracts-verifier", version: "1" });
    await client.connect(new StreamableHTTPClientTransport(new URL(edge.url)));
    const read = await client.readResource({ uri: "chaoscore://contracts/attestation" });
    await client.close();
    const shown = JSON.parse((read.contents[0] as { text: string }).text) as { server_digest: string; attested: boolean; key_names: string[]; note: string };
    expect(shown).toMatchObject({ server_digest: digest, attested: true, key_names: ["chaos-core-release"] });
    // The few lines of docs/contracts.md §6: open the note with the verifier key, read its digest line.
    const text = openNote(shown.note, [parseVerifierKey(vkey)]);
    expect(text).toBe(`chaos-core/contracts\n${shown.server_digest}\n`);
    expect(verifyAttestationNote(shown.note, [parseVerifierKey(vkey)])).toEqual({ serverDigest: digest, keyNames: ["chaos-core-release"] });
    // Another key under the same name does not verify it.
    const impostor = verifierKey(release.name, generateKeyPairSync("ed25519").publicKey);
    expect(() => verifyAttestationNote(shown.note, [parseVerifierKey(impostor)])).toThrow(/the contracts signature does not verify/);
  });

  it("`chaos-core contracts verify --url` verifies a running server with the public key alone", async () => {
    const out = sink();
    const err = sink();
    expect(await runContractsCommand(["verify", "--key", vkey, "--url", edge.url], { stdout: out, stderr: err }), err.text()).toBe(0);
    expect(out.text()).toBe(`verified ${digest} served at ${edge.url}, signed by chaos-core-release\n`);

    const impostor = verifierKey(release.name, generateKeyPairSync("ed25519").publicKey);
    const bad = sink();
    expect(await runContractsCommand(["verify", "--key", impostor, "--url", edge.url], { stdout: sink(), stderr: bad })).toBe(1);
    expect(bad.text()).toContain("the contracts signature does not verify");

    // A server running without keys shows its digest but no note: nothing to verify, and it says so.
    const none = sink();
    expect(await runContractsCommand(["verify", "--key", vkey, "--url", unattested.url], { stdout: sink(), stderr: none })).toBe(1);
    expect(none.text()).toContain(`the server at ${unattested.url} shows no signed note for its contracts (attested: false`);
  });
});
