import {
  createHash,
  createPrivateKey,
  createPublicKey,
  generateKeyPairSync,
  type KeyObject,
} from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ChaosError } from "@chaos-core/kit";
import { z } from "zod";

/** The key that signs new receipts and checkpoints, named by its `kid`. */
export interface SigningKey {
  readonly kid: string;
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
}

/**
 * The operator's Ed25519 keys: one active key signs; every listed key (the active one included)
 * verifies what it signed. A kid that is not in the keyring verifies nothing, which is how a key
 * is rotated out.
 */
export interface Keyring {
  readonly active: SigningKey;
  /** The public key for `kid`, or undefined when the keyring does not hold it. */
  verificationKey(kid: string): KeyObject | undefined;
  /** Every kid that verifies, the active one first. */
  kids(): string[];
}

/** Where standalone keeps its generated keyring, inside the data directory. */
export const STANDALONE_KEYRING_FILE = "ledger-keyring.json";

/**
 * What a kid may look like. A kid is written into every receipt and checkpoint and looked up verbatim, so it is kept to a
 * plain token: no spaces or quotes that could be confused in a log or a note line.
 */
export const KID_RE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;

const kidSchema = z
  .string()
  .regex(KID_RE, "must be 1-128 characters of letters, digits, '.', '_', ':' or '-', starting with a letter or digit");

const keyEntrySchema = z
  .strictObject({
    private: z.string().min(1, "must not be empty").optional(),
    public: z.string().min(1, "must not be empty").optional(),
  })
  .refine((e) => e.private !== undefined || e.public !== undefined, 'needs "private" (a signing key) or "public" (verify only)');

const keyringFileSchema = z.strictObject({
  active: kidSchema,
  keys: z.record(kidSchema, keyEntrySchema),
});

/** The JSON an operator writes (a Kubernetes Secret, a file): see {@link loadKeyring}. */
export type KeyringFile = z.infer<typeof keyringFileSchema>;

/** Builds a keyring from keys already in memory. The active key always verifies. */
export function createKeyring(active: SigningKey, verifyOnly: ReadonlyMap<string, KeyObject> = new Map()): Keyring {
  assertEd25519(active.privateKey, `kid ${active.kid}`);
  assertEd25519(active.publicKey, `kid ${active.kid}`);
  if (!createPublicKey(active.privateKey).equals(active.publicKey)) {
    throw new ChaosError("invalid_argument", `kid ${active.kid}: the public key is not the half of the private key`);
  }
  const keys = new Map<string, KeyObject>([[active.kid, active.publicKey]]);
  for (const [kid, key] of verifyOnly) {
    if (kid === active.kid) continue;
    assertEd25519(key, `kid ${kid}`);
    keys.set(kid, key);
  }
  const frozenActive = Object.freeze({ ...active });
  return Object.freeze({
    active: frozenActive,
    verificationKey: (kid: string) => keys.get(kid),
    kids: () => [...keys.keys()],
  });
}

/**
 * A fresh Ed25519 key. Its default kid is `ed25519:` and the RFC 7638 JWK thumbprint of the
 * public key, so the same key always gets the same name and two different keys never share one
 * (the prefix keeps a thumbprint that starts with `-` or `_` a valid kid).
 */
export function generateSigningKey(kid?: string): SigningKey {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  return { kid: kid ?? `ed25519:${jwkThumbprint(publicKey)}`, privateKey, publicKey };
}

/** RFC 7638 thumbprint of an Ed25519 public key, base64url. */
export function jwkThumbprint(publicKey: KeyObject): string {
  const jwk = publicKey.export({ format: "jwk" });
  // RFC 7638: the required members only, in lexicographic order, no whitespace.
  const members = JSON.stringify({ crv: jwk.crv, kty: jwk.kty, x: jwk.x });
  return createHash("sha256").update(members, "utf8").digest("base64url");
}

/**
 * Parses a keyring document (already read from JSON). `source` names it in every message, e.g.
 * `ledger keyring /etc/chaos-core/keyring.json: keys.k2.private: not an Ed25519 key`.
 */
export function parseKeyring(value: unknown, source: string): Keyring {
  const result = keyringFileSchema.safeParse(value);
  if (!result.success) {
    const problems = result.error.issues.map((issue) => {
      const where = issue.path.map(String).join(".");
      const what = issue.code === "unrecognized_keys" ? `unknown field(s) ${issue.keys.join(", ")}` : issue.message;
      return where ? `${where}: ${what}` : what;
    });
    throw keyringError(source, problems.join("; "));
  }
  const file = result.data;
  const entry = file.keys[file.active];
  if (entry === undefined) {
    throw keyringError(source, `active: kid "${file.active}" is not listed under "keys"`);
  }
  if (entry.private === undefined) {
    throw keyringError(source, `keys.${file.active}: the active key needs "private" (it signs), not only "public"`);
  }
  let active: SigningKey | undefined;
  const verifyOnly = new Map<string, KeyObject>();
  for (const [kid, e] of Object.entries(file.keys)) {
    const privateKey = e.private === undefined ? undefined : decodePrivate(e.private, source, `keys.${kid}.private`);
    const publicKey = e.public === undefined ? undefined : decodePublic(e.public, source, `keys.${kid}.public`);
    const derived = privateKey ? createPublicKey(privateKey) : undefined;
    if (derived && publicKey && !derived.equals(publicKey)) {
      throw keyringError(source, `keys.${kid}: "public" is not the public half of "private"`);
    }
    const verifying = publicKey ?? derived;
    if (verifying === undefined) throw keyringError(source, `keys.${kid}: no key`);
    if (kid === file.active && privateKey) active = { kid, privateKey, publicKey: verifying };
    else verifyOnly.set(kid, verifying);
  }
  // Checked above: the active entry exists and has a private key.
  if (active === undefined) throw keyringError(source, `active: kid "${file.active}" has no signing key`);
  return createKeyring(active, verifyOnly);
}

/**
 * Reads the operator's keyring file:
 * `{"active": "<kid>", "keys": {"<kid>": {"private": "<PKCS8 PEM or base64 DER>"}, "<old kid>": {"public": "<SPKI PEM or base64 DER>"}}}`.
 * A public-only entry still verifies what it signed; a kid removed from the file verifies nothing.
 * @throws ChaosError `failed_precondition` naming the file and the problem (missing file, bad JSON,
 *   the active kid missing or without a private key, a malformed or non-Ed25519 key).
 */
export async function loadKeyring(path: string): Promise<Keyring> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "file not found" : `cannot be read (${(err as Error).message})`;
    throw keyringError(path, why, err);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw keyringError(path, `not valid JSON (${(err as Error).message})`, err);
  }
  return parseKeyring(value, path);
}

/**
 * Writes a new keyring file holding one freshly generated key, readable by its owner only
 * (0600), and returns its kid. Refuses (`already_exists`) to overwrite an existing file: that
 * would orphan every receipt and checkpoint the old key signed.
 */
export async function generateKeyringFile(path: string): Promise<string> {
  const key = generateSigningKey();
  const file: KeyringFile = {
    active: key.kid,
    keys: { [key.kid]: { private: key.privateKey.export({ format: "pem", type: "pkcs8" }).toString() } },
  };
  try {
    // "wx" creates the file or fails if it exists, atomically: no check-then-write race.
    await writeFile(path, `${JSON.stringify(file, null, 2)}\n`, { encoding: "utf8", mode: 0o600, flag: "wx" });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") {
      throw new ChaosError("already_exists", `ledger keyring ${path}: already exists; refusing to overwrite a signing key`, {
        cause: err,
      });
    }
    throw keyringError(path, `cannot be written (${(err as Error).message})`, err);
  }
  return key.kid;
}

/** What {@link loadOrCreateKeyring} needs of a logger (a pino logger fits). */
export interface KeyringLogger {
  info(obj: object, msg: string): void;
}

/**
 * Standalone's keyring: `<dataDir>/ledger-keyring.json`, generated on first run (and said so in
 * the log, with the kid and the path to back up), loaded afterwards. Never a built-in key.
 */
export async function loadOrCreateKeyring(dataDir: string, logger: KeyringLogger): Promise<Keyring> {
  const path = join(dataDir, STANDALONE_KEYRING_FILE);
  await mkdir(dataDir, { recursive: true });
  try {
    const kid = await generateKeyringFile(path);
    logger.info(
      { kid, path },
      `generated a new ledger signing key (kid ${kid}) in ${path}; it signs approval receipts and audit checkpoints, so back it up. In production mount an operator keyring instead`,
    );
  } catch (err) {
    // The usual case after the first run: the file is there, so load it.
    if (!(err instanceof ChaosError && err.code === "already_exists")) throw err;
  }
  return loadKeyring(path);
}

function keyringError(source: string, problem: string, cause?: unknown): ChaosError {
  return new ChaosError("failed_precondition", `ledger keyring ${source}: ${problem}`, cause === undefined ? undefined : { cause });
}

/** PEM as is, or base64 (standard or url-safe) DER; anything else is not a key. */
function keyBytes(text: string): { pem: string } | { der: Buffer } | undefined {
  const trimmed = text.trim();
  if (trimmed.startsWith("-----BEGIN ")) return { pem: trimmed };
  // Wrapped base64 (as `base64` prints it, or as pasted into a Secret) is the same key.
  const compact = trimmed.replace(/\s+/g, "");
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(compact)) return undefined;
  return { der: Buffer.from(compact, compact.includes("-") || compact.includes("_") ? "base64url" : "base64") };
}

function decodePrivate(text: string, source: string, field: string): KeyObject {
  const bytes = keyBytes(text);
  if (bytes === undefined) throw keyringError(source, `${field}: neither a PEM block nor base64 DER`);
  let key: KeyObject;
  try {
    key = "pem" in bytes ? createPrivateKey(bytes.pem) : createPrivateKey({ key: bytes.der, format: "der", type: "pkcs8" });
  } catch (err) {
    throw keyringError(source, `${field}: not a PKCS#8 private key (${(err as Error).message})`, err);
  }
  assertEd25519(key, field, source);
  return key;
}

function decodePublic(text: string, source: string, field: string): KeyObject {
  const bytes = keyBytes(text);
  if (bytes === undefined) throw keyringError(source, `${field}: neither a PEM block nor base64 DER`);
  // createPublicKey would quietly derive a public key from a private one; a private key in a
  // verify-only slot is a leak the operator should hear about.
  if ("pem" in bytes && bytes.pem.includes("PRIVATE KEY")) {
    throw keyringError(source, `${field}: holds a private key; write the public key here, or move it to "private"`);
  }
  let key: KeyObject;
  try {
    key = "pem" in bytes ? createPublicKey(bytes.pem) : createPublicKey({ key: bytes.der, format: "der", type: "spki" });
  } catch (err) {
    throw keyringError(source, `${field}: not an SPKI public key (${(err as Error).message})`, err);
  }
  assertEd25519(key, field, source);
  return key;
}

function assertEd25519(key: KeyObject, field: string, source?: string): void {
  if (key.asymmetricKeyType !== "ed25519") {
    const problem = `${field}: not an Ed25519 key (found ${key.asymmetricKeyType ?? key.type})`;
    throw source === undefined ? new ChaosError("invalid_argument", problem) : keyringError(source, problem);
  }
}
