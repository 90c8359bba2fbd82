import { createSecretKey, hkdfSync, randomBytes, type KeyObject } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { ChaosError, describeZodIssues } from "@chaos-core/kit";
import { z } from "zod";

// The operator's keys that seal multi-round-trip `requestState` (docs/protocol.md §7). There is
// no default key: the edge run alone needs CHAOS_CORE_MRTR_KEYS_FILE, standalone generates one
// into its data directory on first run.

/** Where standalone keeps its generated keyring, inside the data directory. */
export const MRTR_KEYRING_FILE = "mrtr-keyring.json";

/**
 * What a kid may look like. It is the second dot-separated part of every sealed state
 * (`cc1.<kid>.<sealed>`) and is authenticated as associated data, so it holds no `.`.
 */
export const MRTR_KID_RE = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

/** The fewest secret bytes a key may have: AES-256 gets no more strength than its input. */
export const MIN_MRTR_SECRET_BYTES = 32;

/** HKDF-SHA256 salt and info prefix of the per-kid key (docs/protocol.md §7). */
const HKDF_SALT = "chaos-core mrtr";
const HKDF_INFO_PREFIX = "requestState v1 ";

/** How a secret is written: base64url (`A-Z a-z 0-9 - _`), padding allowed. */
const BASE64URL_RE = /^[A-Za-z0-9_-]+={0,2}$/;

const kidSchema = z.string().regex(MRTR_KID_RE, "must be 1-64 characters of letters, digits, '_' or '-', starting with a letter or digit");

const secretSchema = z
  .string()
  .refine((s) => BASE64URL_RE.test(s), "must be base64url (A-Z, a-z, 0-9, '-' and '_'; standard base64's '+' and '/' are not base64url)")
  .refine(
    (s) => !BASE64URL_RE.test(s) || Buffer.from(s, "base64url").length >= MIN_MRTR_SECRET_BYTES,
    `must decode to at least ${MIN_MRTR_SECRET_BYTES} bytes (e.g. node -e 'console.log(require("crypto").randomBytes(32).toString("base64url"))')`,
  );

const keyringFileSchema = z.strictObject({
  active: kidSchema,
  keys: z.record(kidSchema, z.strictObject({ secret: secretSchema })),
});

/** The JSON an operator writes (a Kubernetes Secret mounted as a file): see {@link loadMrtrKeyring}. */
export type MrtrKeyringFile = z.infer<typeof keyringFileSchema>;

/**
 * The keys that seal and open `requestState`: the active kid seals, every listed kid opens (a
 * rotation adds a new active kid and keeps the old one at least a TTL, then removes it). Holds
 * only the derived AES-256 keys, never the secrets they came from.
 */
export interface MrtrKeyring {
  /** The kid new states are sealed with. */
  readonly activeKid: string;
  /** The AES-256-GCM key of `kid`, or undefined when the keyring does not hold it. */
  keyFor(kid: string): KeyObject | undefined;
  /** Every kid that opens, the active one first. */
  kids(): string[];
}

/**
 * The AES-256-GCM key of one kid: `HKDF-SHA256(secret, salt "chaos-core mrtr", info
 * "requestState v1 " + kid, 32 bytes)`. Binding the kid into the derivation means two kids
 * that share a secret still seal with different keys.
 */
export function deriveMrtrKey(secret: Uint8Array, kid: string): Buffer {
  return Buffer.from(hkdfSync("sha256", secret, HKDF_SALT, `${HKDF_INFO_PREFIX}${kid}`, 32));
}

/** Builds a keyring from secrets already in memory (kid → secret bytes); `active` must be one of them. */
export function createMrtrKeyring(active: string, secrets: ReadonlyMap<string, Uint8Array>): MrtrKeyring {
  const keys = new Map<string, KeyObject>();
  for (const kid of [active, ...[...secrets.keys()].filter((k) => k !== active)]) {
    if (!MRTR_KID_RE.test(kid)) throw new ChaosError("invalid_argument", `kid "${kid}": not a valid kid`);
    const secret = secrets.get(kid);
    if (secret === undefined) throw new ChaosError("invalid_argument", `active: kid "${active}" has no secret`);
    if (secret.length < MIN_MRTR_SECRET_BYTES) {
      throw new ChaosError("invalid_argument", `kid "${kid}": the secret has ${secret.length} bytes, at least ${MIN_MRTR_SECRET_BYTES} are needed`);
    }
    keys.set(kid, createSecretKey(deriveMrtrKey(secret, kid)));
  }
  return Object.freeze({
    activeKid: active,
    keyFor: (kid: string) => keys.get(kid),
    kids: () => [...keys.keys()],
  });
}

/**
 * Parses a keyring document (already read from JSON). `source` names it in every message, each
 * problem at its field's full path: `mrtr keyring /etc/chaos-core/mrtr.json: keys.k2.secret: must
 * decode to at least 32 bytes …`.
 * @throws ChaosError `failed_precondition` naming the source and every problem.
 */
export function parseMrtrKeyring(value: unknown, source: string): MrtrKeyring {
  const result = keyringFileSchema.safeParse(value, { reportInput: true });
  if (!result.success) {
    throw keyringError(source, describeZodIssues(result.error, keyringFileSchema, "the keyring", { suggest: true }).join("; "));
  }
  const file = result.data;
  if (file.keys[file.active] === undefined) {
    const listed = Object.keys(file.keys);
    throw keyringError(source, `active: kid "${file.active}" is not listed under "keys"${listed.length ? ` (listed: ${listed.join(", ")})` : " (it is empty)"}`);
  }
  return createMrtrKeyring(file.active, new Map(Object.entries(file.keys).map(([kid, e]) => [kid, Buffer.from(e.secret, "base64url")])));
}

/**
 * Reads the operator's keyring file `{"active": "<kid>", "keys": {"<kid>": {"secret": "<base64url, ≥ 32 bytes>"}}}`.
 * @throws ChaosError `failed_precondition` naming the file and the problem (missing, unreadable,
 *   not JSON, a field that is wrong).
 */
export async function loadMrtrKeyring(path: string): Promise<MrtrKeyring> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw keyringError(path, code === "ENOENT" ? "file not found" : `cannot be read (${(err as Error).message})`, err);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw keyringError(path, `not valid JSON (${(err as Error).message})`, err);
  }
  return parseMrtrKeyring(value, path);
}

/** A new keyring document with one random 32-byte secret under a random kid (`mrtr-<12 hex>`, or `kid`). */
export function newMrtrKeyringFile(kid = `mrtr-${randomBytes(6).toString("hex")}`): MrtrKeyringFile {
  if (!MRTR_KID_RE.test(kid)) throw new ChaosError("invalid_argument", `kid "${kid}": not a valid kid`);
  return { active: kid, keys: { [kid]: { secret: randomBytes(32).toString("base64url") } } };
}

/**
 * Writes a new keyring file with one fresh secret, readable by its owner only (0600), and returns
 * its kid. Refuses (`already_exists`) to overwrite a file: every state sealed with it would stop
 * opening, and every replica sharing it would disagree.
 */
export async function generateMrtrKeyringFile(path: string): Promise<string> {
  const file = newMrtrKeyringFile();
  try {
    // "wx" creates the file or fails if it exists, atomically: no check-then-write race.
    await writeFile(path, `${JSON.stringify(file, null, 2)}\n`, { encoding: "utf8", mode: 0o600, flag: "wx" });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") {
      throw new ChaosError("already_exists", `mrtr keyring ${path}: already exists; refusing to overwrite it`, { cause: err });
    }
    throw keyringError(path, `cannot be written (${(err as Error).message})`, err);
  }
  return file.active;
}

/** What {@link loadOrCreateMrtrKeyring} needs of a logger (a pino logger fits). */
export interface MrtrKeyringLogger {
  info(obj: object, msg: string): void;
}

/**
 * Standalone's keyring: `<dataDir>/mrtr-keyring.json`, generated on first run (and said so in
 * the log, with the kid and the path), loaded afterwards. Never a built-in key.
 */
export async function loadOrCreateMrtrKeyring(dataDir: string, logger: MrtrKeyringLogger): Promise<MrtrKeyring> {
  const path = join(dataDir, MRTR_KEYRING_FILE);
  await mkdir(dataDir, { recursive: true });
  try {
    const kid = await generateMrtrKeyringFile(path);
    logger.info(
      { kid, path },
      `generated a new key (kid ${kid}) in ${path} that seals multi-round-trip requestState; every edge that serves the same clients needs the same file`,
    );
  } catch (err) {
    // The usual case after the first run: the file is there, so load it.
    if (!(err instanceof ChaosError && err.code === "already_exists")) throw err;
  }
  return loadMrtrKeyring(path);
}

function keyringError(source: string, problem: string, cause?: unknown): ChaosError {
  return new ChaosError("failed_precondition", `mrtr keyring ${source}: ${problem}`, cause === undefined ? undefined : { cause });
}
