import { generateKeyPairSync } from "node:crypto";
import { noteVerifier, parseVerifierKey, verifierKey, type NoteSigner } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { AttestationError, countersign, signAttestation, verifyAttestation, type LiveSurface } from "./attestation.js";
import { contractSet, NO_ENTITLEMENTS, NO_GATES, toolContract, type ToolSource } from "./contract.js";
import { serializeLock } from "./lockfile.js";

function signer(name: string): NoteSigner {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  return { name, privateKey, publicKey };
}

const tool = (patch: Partial<ToolSource> = {}): ToolSource => ({
  name: "lookup",
  title: "Look up",
  description: "Looks a key up",
  toolset: "core",
  inputSchema: { type: "object", properties: { key: { type: "string" } }, required: ["key"] },
  outputSchema: { type: "object", properties: { value: { type: "string" } } },
  annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false },
  ...patch,
});
const gates = { ...NO_GATES, executor: true };
const lockText = serializeLock(contractSet({ tools: [toolContract(tool(), { gates, entitlements: NO_ENTITLEMENTS })], prompts: [], resources: [], capabilities: [] }));
const live = (patch: Partial<ToolSource> = {}): LiveSurface => ({ tools: [tool(patch)], prompts: [], resources: [] });
const release = signer("chaos-core-release");

describe("contract attestation: a C2SP signed note over the lock's server digest", () => {
  it("a client verifies the signed digest with the public key alone (the verifier-key string)", () => {
    const note = signAttestation(lockText, release);
    const digest = (JSON.parse(lockText) as { integrityDigest: string }).integrityDigest;
    expect(note.startsWith(`chaos-core/contracts\n${digest}\n\n\u2014 chaos-core-release `)).toBe(true);
    const vkey = verifierKey(release.name, release.publicKey);
    expect(verifyAttestation({ lockText, note, verifiers: [parseVerifierKey(vkey)], live: live() })).toEqual({ serverDigest: digest, keyNames: ["chaos-core-release"] });
  });

  it("refuses a wrong signature (another key, or a note of another digest)", () => {
    const note = signAttestation(lockText, signer("chaos-core-release"));
    expect(() => verifyAttestation({ lockText, note, verifiers: [noteVerifier(release.name, release.publicKey)] })).toThrow(AttestationError);
    const forged = note.replace(/sha256:[0-9a-f]{4}/, "sha256:0000");
    expect(() => verifyAttestation({ lockText, note: forged, verifiers: [noteVerifier(release.name, release.publicKey)] })).toThrow(/does not verify/);
  });

  it("refuses a tampered lockfile: an edited section, with or without its stated digests", () => {
    const note = signAttestation(lockText, release);
    const verifiers = [noteVerifier(release.name, release.publicKey)];
    const edited = lockText.replace('"readOnly": true', '"readOnly": false');
    expect(() => verifyAttestation({ lockText: edited, note, verifiers })).toThrow("the lockfile was edited: tools/lookup (behavior) do not hash to the digests it states");
    // Re-locked consistently after the edit: consistent in itself, but not what was signed.
    const relocked = serializeLock(JSON.parse(JSON.stringify(contractSet({ tools: [toolContract(tool({ annotations: { ...tool().annotations, readOnlyHint: false } }), { gates, entitlements: NO_ENTITLEMENTS })], prompts: [], resources: [], capabilities: [] }))));
    expect(() => verifyAttestation({ lockText: relocked, note, verifiers })).toThrow(/but the signature is for sha256:/);
  });

  it("names the tools whose live definitions drifted from the signed lock, and their sections", () => {
    const note = signAttestation(lockText, release);
    const verifiers = [noteVerifier(release.name, release.publicKey)];
    try {
      verifyAttestation({ lockText, note, verifiers, live: { tools: [tool({ description: "Now different" }), tool({ name: "extra" })], prompts: [], resources: [] } });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(AttestationError);
      expect((err as AttestationError).drifted).toEqual(["tools/extra (not in the lock)", "tools/lookup (surface)"]);
    }
  });

  it("an operator countersigns: either key verifies, and both are named", () => {
    const operator = signer("acme-ops");
    const note = countersign(signAttestation(lockText, release), operator);
    expect(verifyAttestation({ lockText, note, verifiers: [noteVerifier(operator.name, operator.publicKey)] }).keyNames).toEqual(["acme-ops"]);
    const both = [noteVerifier(operator.name, operator.publicKey), noteVerifier(release.name, release.publicKey)];
    expect(verifyAttestation({ lockText, note, verifiers: both }).keyNames).toEqual(["acme-ops", "chaos-core-release"]);
  });
});
