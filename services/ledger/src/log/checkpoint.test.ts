import { createPrivateKey, createPublicKey, generateKeyPairSync } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  NoteFormatError,
  NoteVerificationError,
  checkpointText,
  ed25519KeyHash,
  noteVerifier,
  openCheckpoint,
  openNote,
  parseCheckpointText,
  parseNote,
  parseVerifierKey,
  signCheckpoint,
  signNote,
  verifierKey,
  type NoteSigner,
} from "./checkpoint.js";
import { emptyRoot } from "./merkle.js";

// The example of golang.org/x/mod/sumdb/note (package documentation and tests): Ed25519 is
// deterministic, so signing the same text with the same key must give these exact bytes.
const GO_SIGNER_SEED = "AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"; // base64(0x01 || seed)
const GO_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
const GO_TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n";
const GO_NOTE = `${GO_TEXT}\n\u2014 PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n`;

function goSigner(): NoteSigner {
  const seed = Buffer.from(GO_SIGNER_SEED, "base64").subarray(1);
  // PKCS#8 wrapping of a raw Ed25519 seed (RFC 8410).
  const der = Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), seed]);
  const privateKey = createPrivateKey({ key: der, format: "der", type: "pkcs8" });
  return { name: "PeterNeumann", privateKey, publicKey: createPublicKey(privateKey) };
}

function freshSigner(name = "chaos-core/acme"): NoteSigner {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  return { name, privateKey, publicKey };
}

describe("signed notes (C2SP signed-note)", () => {
  it("reproduces the Go reference note and verifier key byte for byte", () => {
    const signer = goSigner();
    expect(verifierKey(signer.name, signer.publicKey)).toBe(GO_VKEY);
    expect(ed25519KeyHash(signer.name, signer.publicKey).toString("hex")).toBe("c74f20a3");
    expect(signNote(GO_TEXT, signer)).toBe(GO_NOTE);
  });

  it("opens the reference note with only the verifier key, and refuses an edited one", () => {
    const v = parseVerifierKey(GO_VKEY);
    expect(openNote(GO_NOTE, [v])).toBe(GO_TEXT);
    expect(() => openNote(GO_NOTE.replace("cryptography", "cryptographY"), [v])).toThrow(NoteVerificationError);
  });

  it("ignores unknown keys but needs one known signature", () => {
    const other = freshSigner("PeterNeumann");
    // Same name, different key: unknown, so ignored; no known signature remains.
    expect(() => openNote(GO_NOTE, [noteVerifier(other.name, other.publicKey)])).toThrow(/no signature from a known key/);
    const twice = signNote(GO_TEXT, other).replace(/\n$/, "\n" + GO_NOTE.slice(GO_TEXT.length + 1));
    expect(openNote(twice, [parseVerifierKey(GO_VKEY)])).toBe(GO_TEXT);
  });

  it("refuses malformed verifier keys", () => {
    const bad = [
      "",
      "PeterNeumann",
      "PeterNeumann+c74f20a3",
      "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
      "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
      "PeterNeumanN+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
      "PeterNeumann+c74f20a3+AhpcAQcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
      "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10T",
      "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
    ];
    for (const k of bad) expect(() => parseVerifierKey(k), k).toThrow(NoteFormatError);
  });

  it("refuses malformed notes", () => {
    const v = [parseVerifierKey(GO_VKEY)];
    const bad = [
      GO_NOTE.slice(0, -1), // no final newline
      GO_TEXT, // no signatures
      GO_NOTE.replace("\u2014 ", "- "), // ASCII dash
      GO_NOTE.replace("PeterNeumann x08", "PeterNeumann  x08"), // double space
      GO_NOTE.replace("x08go", "x08g"), // broken base64
      GO_NOTE.replace("then", "th\u0007en"), // control character
      `${GO_TEXT}\n\u2014 PeterNeumann AAAA\n`, // signature too short
      `${GO_NOTE}\n`, // trailing blank line
    ];
    for (const note of bad) expect(() => openNote(note, v), JSON.stringify(note)).toThrow(/.+/);
    expect(() => parseNote(GO_NOTE.replace("then", "th\u0007en"))).toThrow(NoteFormatError);
  });

  it("refuses key names with spaces or plus signs", () => {
    expect(() => signNote("x\n", freshSigner("a b"))).toThrow(NoteFormatError);
    expect(() => signNote("x\n", freshSigner("a+b"))).toThrow(NoteFormatError);
    expect(() => signNote("no newline", freshSigner())).toThrow(NoteFormatError);
  });
});

describe("checkpoints (C2SP tlog-checkpoint)", () => {
  const root = Buffer.from("5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328", "hex");

  it("writes origin, size and base64 root, signed by the log key", () => {
    const signer = freshSigner();
    const note = signCheckpoint({ origin: "chaos-core/acme", size: 8, root }, signer);
    expect(note.startsWith("chaos-core/acme\n8\nXcnaeacGWamtVZy3Ad7ZoqudgjqtL0lgz+Nw7/RgQyg=\n\n\u2014 chaos-core/acme ")).toBe(true);
    const v = parseVerifierKey(verifierKey(signer.name, signer.publicKey));
    const cp = openCheckpoint(note, [v], "chaos-core/acme");
    expect(cp.size).toBe(8);
    expect(cp.root.equals(root)).toBe(true);
    expect(() => openCheckpoint(note, [v], "chaos-core/other")).toThrow(NoteVerificationError);
    expect(() => openCheckpoint(note.replace("\n8\n", "\n9\n"), [v])).toThrow(NoteVerificationError);
    const stranger = freshSigner();
    expect(() => openCheckpoint(note, [noteVerifier(stranger.name, stranger.publicKey)])).toThrow(NoteVerificationError);
  });

  it("parses the empty tree and extension lines, and refuses malformed bodies", () => {
    expect(parseCheckpointText(checkpointText({ origin: "o", size: 0, root: emptyRoot() })).size).toBe(0);
    expect(parseCheckpointText("o\n1\n" + root.toString("base64") + "\next\n").extensions).toEqual(["ext"]);
    const b64 = root.toString("base64");
    const bad = [
      `o\n1\n${b64}`,
      `o\n01\n${b64}\n`,
      `o\n-1\n${b64}\n`,
      `o\n1.0\n${b64}\n`,
      `o\n99999999999999999999\n${b64}\n`,
      `\n1\n${b64}\n`,
      `o\n1\n`,
      `o\n1\n${b64.slice(4)}\n`,
      `o\n1\n${b64}\n\n`,
      `o\n1\nnot base64!\n`,
    ];
    for (const text of bad) expect(() => parseCheckpointText(text), JSON.stringify(text)).toThrow(NoteFormatError);
    expect(() => checkpointText({ origin: "o", size: 1, root: Buffer.alloc(31) })).toThrow(NoteFormatError);
  });
});
