import { generateKeyPairSync } from "node:crypto";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { AttestationError, signAttestation } from "@chaos-core/contracts";
import { verifierKey } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { attestServedSurface } from "./attestation.js";

const lockText = readFileSync(fileURLToPath(new URL("../../../../chaoscore.lock", import.meta.url)), "utf8");
const { privateKey, publicKey } = generateKeyPairSync("ed25519");
const release = { name: "chaos-core-release", privateKey, publicKey };
const vkey = verifierKey(release.name, publicKey);
const note = signAttestation(lockText, release);

describe("the edge's start-time attestation hook", () => {
  it("attests the committed lock and the definitions it serves with the public key alone", () => {
    const a = attestServedSurface({ lockText, note, verifierKeys: [vkey] });
    expect(a).toMatchObject({ attested: true, keyNames: ["chaos-core-release"], note });
    expect(a.serverDigest).toBe((JSON.parse(lockText) as { integrityDigest: string }).integrityDigest);
  });

  it("refuses a tampered lockfile, naming the tool", () => {
    const tampered = lockText.replace('"title": "Remember"', '"title": "Remember it"');
    expect(tampered).not.toBe(lockText);
    expect(() => attestServedSurface({ lockText: tampered, note, verifierKeys: [vkey] })).toThrow(/the lockfile was edited: tools\/chaoscore_remember \(surface\)/);
  });

  it("refuses a history whose entry does not hash to its digest (docs/contracts.md §9)", () => {
    const digest = `sha256:${"1".repeat(64)}`;
    const { tools } = JSON.parse(lockText) as { tools: Record<string, Record<string, unknown>> };
    const { surface, behavior, tokenEconomics, entitlements } = tools.chaoscore_remember!;
    const historyText = JSON.stringify({ historyVersion: 1, tools: { [digest]: { surface, behavior, tokenEconomics, entitlements } } });
    expect(() => attestServedSurface({ lockText, verifierKeys: [], historyText })).toThrow(`chaoscore.lock.history: tools.${digest}: the entry hashes to`);
  });

  it("refuses a wrong signature", () => {
    const other = generateKeyPairSync("ed25519").publicKey;
    expect(() => attestServedSurface({ lockText, note, verifierKeys: [verifierKey(release.name, other)] })).toThrow(AttestationError);
    expect(() => attestServedSurface({ lockText, verifierKeys: [vkey] })).toThrow("verifier keys are configured but no signed note");
  });

  it("without a key nothing is attested, but a lock that does not match what is served still refuses", () => {
    expect(attestServedSurface({ lockText, verifierKeys: [] })).toMatchObject({ attested: false, keyNames: [] });
    const doc = JSON.parse(lockText) as { tools: Record<string, unknown> };
    delete doc.tools.chaoscore_remember;
    try {
      attestServedSurface({ lockText: JSON.stringify(doc), verifierKeys: [] });
      expect.unreachable();
    } catch (err) {
      expect((err as AttestationError).drifted).toEqual(["tools/chaoscore_remember (not in the lock)"]);
    }
  });
});
