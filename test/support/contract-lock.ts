import { generateKeyPairSync } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { signAttestation } from "@chaos-core/contracts";
import { verifierKey } from "@chaos-core/kit";

/** The committed lock, as the edge reads it by default. */
export const LOCK_TEXT = readFileSync(new URL("../../chaoscore.lock", import.meta.url), "utf8");

export interface SignedLocks {
  /** The release key's verifier key (public), for CHAOS_CORE_CONTRACT_KEYS. */
  readonly vkey: string;
  /** The committed lock with its note signed by the release key. */
  readonly good: string;
  /** A lock edited after signing (chaoscore_remember's title), with the good note. */
  readonly tampered: string;
  /** The committed lock with a note signed by another key under the release key's name. */
  readonly wrongSignature: string;
}

/** Writes three lockfiles (each with its `.sig`) under `dir`; returns their paths. */
export function writeSignedLocks(dir: string): SignedLocks {
  const release = { name: "chaos-core-release", ...generateKeyPairSync("ed25519") };
  const impostor = { name: "chaos-core-release", ...generateKeyPairSync("ed25519") };
  const note = signAttestation(LOCK_TEXT, release);
  const tamperedText = LOCK_TEXT.replace('"title": "Remember"', '"title": "Remember it"');
  if (tamperedText === LOCK_TEXT) throw new Error("the tampering found nothing to change in chaoscore.lock");
  const write = (name: string, lock: string, sig: string) => {
    mkdirSync(join(dir, name), { recursive: true });
    const file = join(dir, name, "chaoscore.lock");
    writeFileSync(file, lock);
    writeFileSync(`${file}.sig`, sig);
    return file;
  };
  return {
    vkey: verifierKey(release.name, release.publicKey),
    good: write("good", LOCK_TEXT, note),
    tampered: write("tampered", tamperedText, note),
    wrongSignature: write("wrong-signature", LOCK_TEXT, signAttestation(LOCK_TEXT, impostor)),
  };
}
