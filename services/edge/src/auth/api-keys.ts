import { createHash, timingSafeEqual } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { z } from "zod";
import { assertTenantId, describeZodIssues, hashApiKey, MAX_ROLES, ROLE_NAME_RE, ROLE_NAME_RULE, reservedPrincipalProblem, watchFile, type Logger } from "@chaos-core/kit";
import type { Identity } from "./identity.js";

const SHA256_HEX = /^[0-9a-f]{64}$/;

// One digest and one list of reserved principals for the keys file and the tenant registry (kit).
export { hashApiKey };
export { RESERVED_PRINCIPALS } from "@chaos-core/kit";

const ApiKeyEntrySchema = z.object({
  tenant: z.string().superRefine((tenant, ctx) => {
    try {
      assertTenantId(tenant);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: (err as Error).message });
    }
  }),
  principal: z
    .string()
    .min(1)
    .max(256)
    .superRefine((p, ctx) => {
      const reserved = reservedPrincipalProblem(p);
      if (reserved) ctx.addIssue({ code: "custom", message: reserved });
    }),
  sha256: z
    .string()
    .transform((s) => s.toLowerCase())
    .refine((s) => SHA256_HEX.test(s), "must be the lowercase hex SHA-256 of the key (64 characters)"),
  roles: z
    .array(z.string().regex(ROLE_NAME_RE, `must be a role name: ${ROLE_NAME_RULE}`))
    .max(MAX_ROLES)
    .refine((roles) => new Set(roles).size === roles.length, "lists a role twice")
    .optional()
    .describe('Roles granted to the key: "approver" answers approvals; any other role name means something only where an upstream\'s exposure rule names it'),
});

/** A list an edit may leave empty: every key is then refused. */
const ApiKeyListSchema = z.array(ApiKeyEntrySchema);
/** At start-up a list without keys is a mistake, not a lock-out: the process refuses to start. */
const ApiKeyFileSchema = ApiKeyListSchema.min(1, "lists no keys");

/** One operator-issued API key: only its SHA-256 is ever stored. */
export type ApiKeyEntry = z.infer<typeof ApiKeyEntrySchema>;

/** Resolves a bearer key to the identity it was issued to. */
export interface ApiKeyVerifier {
  /** The identity of `key`, or undefined when no entry matches. */
  verify(key: string): Identity | undefined;
  /**
   * The identity of the key in force whose SHA-256 (as the file stores it, lowercase hex) is
   * `sha256`, if any: how a console session, which keeps only the digest, re-reads its key on
   * every request, so a key removed (or its role withdrawn) ends the session at once.
   */
  identityOfDigest(sha256: string): Identity | undefined;
}

function identityOf(e: ApiKeyEntry): Identity {
  return Object.freeze({ tenant: e.tenant, principal: e.principal, roles: Object.freeze([...(e.roles ?? [])].sort()) });
}

/**
 * A verifier over a list of hashed keys. Every entry is compared, each in constant time, so
 * the time taken says nothing about which entry (or how much of it) matched.
 */
export function createApiKeyVerifier(entries: readonly ApiKeyEntry[]): ApiKeyVerifier {
  return verifierOf(ApiKeyFileSchema.parse(entries));
}

/** {@link createApiKeyVerifier} over entries already parsed, possibly none. */
function verifierOf(entries: readonly ApiKeyEntry[]): ApiKeyVerifier {
  const hashes = entries.map((e) => ({ hash: Buffer.from(e.sha256, "hex"), identity: identityOf(e) }));
  const find = (given: Buffer): Identity | undefined => {
    let found: Identity | undefined;
    for (const entry of hashes) {
      if (timingSafeEqual(entry.hash, given) && !found) found = entry.identity;
    }
    return found;
  };
  return {
    verify: (key) => find(createHash("sha256").update(key, "utf8").digest()),
    identityOfDigest: (sha256) => (SHA256_HEX.test(sha256) ? find(Buffer.from(sha256, "hex")) : undefined),
  };
}

/**
 * The entries of an API keys file's text; the error names the file and the bad entry, never a
 * hash. `schema` says whether an empty list is allowed.
 */
function parseApiKeys(path: string, text: string, schema = ApiKeyFileSchema): ApiKeyEntry[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new Error(`CHAOS_CORE_API_KEYS_FILE ${path}: cannot be read as JSON (${(err as Error).message})`, {
      cause: err,
    });
  }
  const result = schema.safeParse(raw, { reportInput: true });
  if (!result.success) {
    throw new Error(`CHAOS_CORE_API_KEYS_FILE ${path}: ${describeZodIssues(result.error, schema, "(file)").join("; ")}`);
  }
  return result.data;
}

async function readApiKeysText(path: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    throw new Error(`CHAOS_CORE_API_KEYS_FILE ${path}: cannot be read (${(err as Error).message})`, { cause: err });
  }
}

/**
 * Reads an API keys file: a JSON list of `{tenant, principal, sha256, roles?}`. Fails with a message
 * that names the file and the bad entry; never echoes a hash.
 */
export async function loadApiKeysFile(path: string): Promise<ApiKeyVerifier> {
  return createApiKeyVerifier(parseApiKeys(path, await readApiKeysText(path)));
}

/**
 * How stale the list a request is checked against may be: the file is `stat`ed at most this
 * often on behalf of requests, and every request arriving meanwhile shares the last check. So an
 * edit on disk is in force for every request that arrives this long after it was written.
 */
export const API_KEYS_RECHECK_MS = 100;

/** An API keys file kept in force while it is edited: see {@link watchApiKeysFile}. */
export interface WatchedApiKeys extends ApiKeyVerifier {
  /**
   * Takes in an edit of the file that is on disk but not yet in force (a cheap `stat` when
   * nothing changed). Called before each verification. Concurrent calls share one check, and a
   * call within `recheckMs` of the last check started reuses it: an edit written at least that
   * long before the call is always in force when it resolves. Never rejects.
   */
  refresh(): Promise<void>;
  /**
   * Whether the file on disk could not be taken in (bad JSON, a bad entry, unreadable): until a
   * good file replaces it, every key is refused and nothing is in force.
   */
  unreadable(): boolean;
  /** Whether some key in force still resolves to this tenant and principal. */
  holdsIdentity(tenant: string, principal: string): boolean;
  /** Called after each edit that was taken in force, one that leaves no keys included. */
  onChange(listener: () => void): void;
  close(): void;
}

/**
 * Whether the keys file's key with this SHA-256 no longer names `who` — gone from the file, or now
 * another tenant or principal. Never while the file cannot be taken in: which keys remain is then
 * unknown (and every request is refused meanwhile).
 */
export function fileKeyWithdrawn(
  keys: Pick<WatchedApiKeys, "unreadable" | "identityOfDigest">,
  sha256: string,
  who: { readonly tenant: string; readonly principal: string },
): boolean {
  if (keys.unreadable()) return false;
  const holder = keys.identityOfDigest(sha256);
  return holder?.tenant !== who.tenant || holder.principal !== who.principal;
}

/** Options of {@link watchApiKeysFile}. */
export interface WatchApiKeysOptions {
  logger: Logger;
  /** How often the file is re-checked without a change event (default 2 s). */
  pollMs?: number;
  /** How long after a change event the file is read (default 50 ms). */
  debounceMs?: number;
  /** How often requests may cause a check (default {@link API_KEYS_RECHECK_MS}). */
  recheckMs?: number;
}

/** What identifies one version of the file on disk without reading it. */
async function fileSignature(path: string): Promise<string> {
  try {
    const st = await stat(path);
    return `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
  } catch (err) {
    return `error:${(err as NodeJS.ErrnoException).code ?? "unknown"}`;
  }
}

/** A file that is gone holds no keys; any other failure to read it leaves the list unknown. */
function isMissing(err: unknown): boolean {
  return (err as { cause?: NodeJS.ErrnoException }).cause?.code === "ENOENT";
}

/**
 * Loads an API keys file as {@link loadApiKeysFile} does (a bad, empty or missing file at
 * start-up throws) and keeps it in force as it is edited, as `policy.json` is: the file is
 * watched (with a poll as a fallback) and re-checked on behalf of requests (see
 * {@link WatchedApiKeys.refresh}), so a key removed from the file is refused from then on.
 * Later, an empty list or a deleted file holds no keys, and a malformed or unreadable file
 * refuses every key until a good file replaces it: revoking never fails open. Each problem is
 * logged once, naming the file.
 */
export async function watchApiKeysFile(path: string, options: WatchApiKeysOptions): Promise<WatchedApiKeys> {
  const { logger } = options;
  const recheckMs = options.recheckMs ?? API_KEYS_RECHECK_MS;
  let lastCheckAt = performance.now();
  let seen = await fileSignature(path);
  let entries = parseApiKeys(path, await readApiKeysText(path));
  let current = verifierOf(entries);
  let problem: string | undefined;
  let lastLogged: string | undefined;
  const listeners: Array<() => void> = [];

  /** Logged once per distinct problem, not on every poll or request. */
  function logOnce(message: string, log: (message: string) => void): void {
    if (message === lastLogged) return;
    lastLogged = message;
    log(message);
  }

  async function reload(): Promise<void> {
    const signature = await fileSignature(path);
    if (signature === seen) return;
    seen = signature;
    let next: ApiKeyEntry[] = [];
    let missing = false;
    try {
      next = parseApiKeys(path, await readApiKeysText(path), ApiKeyListSchema);
    } catch (err) {
      missing = isMissing(err);
      if (!missing) {
        // Which keys the operator meant to keep is unknown: none is taken on trust.
        problem = (err as Error).message;
        entries = [];
        current = verifierOf(entries);
        logOnce(problem, (m) => logger.error({ path }, `API keys file rejected; every API key is refused until it is fixed: ${m}`));
        return;
      }
    }
    problem = undefined;
    entries = next;
    current = verifierOf(entries);
    if (entries.length === 0) {
      const why = missing ? "is missing" : "lists no keys";
      logOnce(why, () => logger.warn({ path }, `CHAOS_CORE_API_KEYS_FILE ${path} ${why}: every API key is refused`));
    } else {
      lastLogged = undefined;
      logger.info({ path, keys: entries.length }, "API keys reloaded");
    }
    for (const listener of listeners) listener();
  }

  // One check at a time, each after the ones before it, so two checks never both reload. A
  // check queued when a request arrives starts after it arrived, so it sees what is on disk then.
  let queue: Promise<void> = Promise.resolve();
  let lastCheck: Promise<void> = queue;
  const check = (): Promise<void> => {
    lastCheckAt = performance.now();
    return (lastCheck = queue =
      queue.then(reload).catch((err: unknown) => logger.error({ err, path }, "reloading the API keys file failed")));
  };
  const refresh = (): Promise<void> => (performance.now() - lastCheckAt < recheckMs ? lastCheck : check());

  // A change event or the poll always checks: that is how an edit is taken in between requests.
  const watch = watchFile(path, () => void check(), {
    logger,
    what: "the API keys file's directory",
    pollMs: options.pollMs ?? 2_000,
    debounceMs: options.debounceMs ?? 50,
  });

  return {
    verify: (key) => current.verify(key),
    identityOfDigest: (sha256) => current.identityOfDigest(sha256),
    refresh,
    unreadable: () => problem !== undefined,
    holdsIdentity: (tenant, principal) => entries.some((e) => e.tenant === tenant && e.principal === principal),
    onChange: (listener) => void listeners.push(listener),
    close: () => watch.close(),
  };
}
