import { createHash, timingSafeEqual } from "node:crypto";
import { readFile, stat } from "node:fs/promises";
import { z } from "zod";
import { assertTenantId, describeZodIssues, watchFile, type Logger } from "@chaos-core/kit";
import { ROLES, type Identity } from "./identity.js";

const SHA256_HEX = /^[0-9a-f]{64}$/;

const ApiKeyEntrySchema = z.object({
  tenant: z.string().superRefine((tenant, ctx) => {
    try {
      assertTenantId(tenant);
    } catch (err) {
      ctx.addIssue({ code: "custom", message: (err as Error).message });
    }
  }),
  principal: z.string().min(1).max(256),
  sha256: z
    .string()
    .transform((s) => s.toLowerCase())
    .refine((s) => SHA256_HEX.test(s), "must be the lowercase hex SHA-256 of the key (64 characters)"),
  roles: z
    .array(z.enum(ROLES))
    .max(ROLES.length)
    .refine((roles) => new Set(roles).size === roles.length, "lists a role twice")
    .optional()
    .describe('Roles granted to the key; only "approver" exists'),
});

const ApiKeyFileSchema = z.array(ApiKeyEntrySchema).min(1, "lists no keys");

/** One operator-issued API key: only its SHA-256 is ever stored. */
export type ApiKeyEntry = z.infer<typeof ApiKeyEntrySchema>;

/** Resolves a bearer key to the identity it was issued to. */
export interface ApiKeyVerifier {
  /** The identity of `key`, or undefined when no entry matches. */
  verify(key: string): Identity | undefined;
}

/** The SHA-256 an API keys file stores for a key (lowercase hex). */
export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}

function identityOf(e: ApiKeyEntry): Identity {
  return Object.freeze({ tenant: e.tenant, principal: e.principal, roles: Object.freeze([...(e.roles ?? [])]) });
}

/**
 * A verifier over a list of hashed keys. Every entry is compared, each in constant time, so
 * the time taken says nothing about which entry (or how much of it) matched.
 */
export function createApiKeyVerifier(entries: readonly ApiKeyEntry[]): ApiKeyVerifier {
  const parsed = ApiKeyFileSchema.parse(entries);
  const hashes = parsed.map((e) => ({ hash: Buffer.from(e.sha256, "hex"), identity: identityOf(e) }));
  return {
    verify(key) {
      const given = createHash("sha256").update(key, "utf8").digest();
      let found: Identity | undefined;
      for (const entry of hashes) {
        if (timingSafeEqual(entry.hash, given) && !found) found = entry.identity;
      }
      return found;
    },
  };
}

/** The entries of an API keys file's text; the error names the file and the bad entry, never a hash. */
function parseApiKeys(path: string, text: string): ApiKeyEntry[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (err) {
    throw new Error(`CHAOS_CORE_API_KEYS_FILE ${path}: cannot be read as JSON (${(err as Error).message})`, {
      cause: err,
    });
  }
  const result = ApiKeyFileSchema.safeParse(raw, { reportInput: true });
  if (!result.success) {
    throw new Error(`CHAOS_CORE_API_KEYS_FILE ${path}: ${describeZodIssues(result.error, ApiKeyFileSchema, "(file)").join("; ")}`);
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

/** An API keys file kept in force while it is edited: see {@link watchApiKeysFile}. */
export interface WatchedApiKeys extends ApiKeyVerifier {
  /**
   * Takes in an edit of the file that is on disk but not yet in force (a cheap `stat` when
   * nothing changed). Called before each verification, so a revoked key is refused on its very
   * next request, even before the file watcher fires. Never rejects.
   */
  refresh(): Promise<void>;
  /** Whether some key in force still resolves to this tenant and principal. */
  holdsIdentity(tenant: string, principal: string): boolean;
  /** Called after each edit that was taken in force. */
  onChange(listener: () => void): void;
  close(): void;
}

/** Options of {@link watchApiKeysFile}. */
export interface WatchApiKeysOptions {
  logger: Logger;
  /** How often the file is re-checked without a change event (default 2 s). */
  pollMs?: number;
  /** How long after a change event the file is read (default 50 ms). */
  debounceMs?: number;
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

/**
 * Loads an API keys file as {@link loadApiKeysFile} does (a bad file at start-up throws) and
 * keeps it in force as it is edited, as `policy.json` is: the file is watched (with a poll as a
 * fallback) and re-checked before every verification, so a key removed from the file is refused
 * on its next request. A malformed, empty or missing file later keeps the last good list in
 * force and logs the problem once, naming the file; a good file replaces it again.
 */
export async function watchApiKeysFile(path: string, options: WatchApiKeysOptions): Promise<WatchedApiKeys> {
  const { logger } = options;
  let seen = await fileSignature(path);
  let entries = parseApiKeys(path, await readApiKeysText(path));
  let current = createApiKeyVerifier(entries);
  let lastError: string | undefined;
  const listeners: Array<() => void> = [];

  async function reload(): Promise<void> {
    const signature = await fileSignature(path);
    if (signature === seen) return;
    seen = signature;
    try {
      entries = parseApiKeys(path, await readApiKeysText(path));
      current = createApiKeyVerifier(entries);
    } catch (err) {
      const message = (err as Error).message;
      // Logged once per distinct problem, not on every poll or request.
      if (message !== lastError) {
        lastError = message;
        logger.error({ path }, `API keys file rejected; the ${entries.length} keys loaded before stay in force: ${message}`);
      }
      return;
    }
    lastError = undefined;
    logger.info({ path, keys: entries.length }, "API keys reloaded");
    for (const listener of listeners) listener();
  }

  // One check at a time, each after the ones before it: a request's check starts after it
  // arrived, so an edit already on disk is always seen, and two checks never both reload.
  let queue: Promise<void> = Promise.resolve();
  const refresh = (): Promise<void> =>
    (queue = queue.then(reload).catch((err: unknown) => logger.error({ err, path }, "reloading the API keys file failed")));

  const watch = watchFile(path, () => void refresh(), {
    logger,
    what: "the API keys file's directory",
    pollMs: options.pollMs ?? 2_000,
    debounceMs: options.debounceMs ?? 50,
  });

  return {
    verify: (key) => current.verify(key),
    refresh,
    holdsIdentity: (tenant, principal) => entries.some((e) => e.tenant === tenant && e.principal === principal),
    onChange: (listener) => void listeners.push(listener),
    close: () => watch.close(),
  };
}
