import { createHash, randomBytes } from "node:crypto";
import { mkdir, open, readFile, rename, unlink } from "node:fs/promises";
import { basename, dirname, extname, join, resolve } from "node:path";
import { ChaosError, watchFile, type Logger } from "@chaos-core/kit";
import { z } from "zod";
import {
  defaultPolicyDocument,
  formatPolicyDocument,
  parsePolicyDocument,
  PolicyDocumentError,
  type PolicyDocumentJson,
} from "../domain/policy-document.js";
import type { PolicySnapshot, PolicyStore } from "../domain/policy-store.js";
import { warnOfOptIns } from "./opt-in-log.js";

/** Standalone mode serves one tenant (DESIGN.md, Tenancy). */
export const STANDALONE_TENANT = "default";

/** Options of {@link createFilePolicyStore}. */
export interface FilePolicyStoreOptions {
  /** The policy file, e.g. `<data dir>/policy.json`; created with safe defaults when missing. */
  path: string;
  logger: Logger;
  /**
   * How often the file is re-read even without a change event: editors that replace the file,
   * network file systems and some containers do not deliver `fs.watch` events reliably.
   */
  pollMs?: number;
  /** How long to wait after a change event before reading, so a half-written file is rarely seen. */
  debounceMs?: number;
}

/** The file-backed store; `path` is the absolute path of the policy file. */
export interface FilePolicyStore extends PolicyStore {
  readonly path: string;
}

/** The sidecar that keeps the version counter across restarts. */
const stateSchema = z.object({
  version: z.number().int().nonnegative(),
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  updatedAt: z.iso.datetime(),
});
type PolicyFileState = z.output<typeof stateSchema>;

interface Loaded {
  document: PolicyDocumentJson;
  version: number;
  sha256: string;
  updatedAt: Date;
}

function sha256(text: string): string {
  return createHash("sha256").update(text, "utf8").digest("hex");
}

async function readIfExists(path: string): Promise<string | undefined> {
  try {
    return await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
}

/** Write to a temporary file beside the target, flush, then rename: readers never see half a file. */
async function writeAtomically(path: string, text: string): Promise<void> {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`);
  try {
    const handle = await open(tmp, "w");
    try {
      await handle.writeFile(text, "utf8");
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(tmp, path);
  } catch (err) {
    await unlink(tmp).catch(() => undefined);
    throw err;
  }
}

async function readState(statePath: string): Promise<PolicyFileState | undefined> {
  const text = await readIfExists(statePath);
  if (text === undefined) return undefined;
  try {
    return stateSchema.parse(JSON.parse(text));
  } catch (err) {
    throw new Error(
      `${statePath}: not a valid policy state file (${(err as Error).message}). It only holds the policy ` +
        `version counter; delete it to restart the versions at 1.`,
      { cause: err },
    );
  }
}

/**
 * The standalone {@link PolicyStore}: one tenant (`default`), one JSON file an operator edits.
 *
 * - First run: a missing file is created with the safe defaults (pretty-printed, trailing newline).
 * - Versions: kept in a sidecar `<name>.state.json` (`{version, sha256, updatedAt}`) beside the
 *   file. At start and on every reload, file bytes with a different SHA-256 than the version in
 *   force get the next version; unchanged bytes keep their version across restarts. A `put`
 *   always creates the next version. Versions never go backwards while the sidecar exists.
 * - Reload: `fs.watch` on the directory (editors replace files, so the file itself is not
 *   watched) plus a slow poll as a fallback.
 * - A bad file at start throws a {@link PolicyDocumentError} naming the file and the field. A bad
 *   edit later keeps the last good version in force, logs the error once and reports it as
 *   `lastError` from `get()` until a good file replaces it. A deleted file is treated the same way
 *   (the defaults are only written on a first run, never over a policy that disappeared).
 * - `put` writes the file atomically (temporary file + rename).
 * - A version that lets `client_elicitation` approve what the default keeps for a person is
 *   logged as a warning when it comes into force (and at each start).
 * - Another tenant gets `permission_denied`.
 */
export async function createFilePolicyStore(options: FilePolicyStoreOptions): Promise<FilePolicyStore> {
  const path = resolve(options.path);
  const dir = dirname(path);
  const statePath = join(dir, `${basename(path, extname(path))}.state.json`);
  const source = `file:${path}`;
  const { logger } = options;
  const pollMs = options.pollMs ?? 2_000;
  const debounceMs = options.debounceMs ?? 50;

  await mkdir(dir, { recursive: true });
  const state = await readState(statePath);
  let text = await readIfExists(path);
  if (text === undefined) {
    text = formatPolicyDocument(defaultPolicyDocument());
    await writeAtomically(path, text);
    logger.info({ path }, "created the policy file with safe defaults");
  }
  const initialSha = sha256(text);
  const initialDocument = parsePolicyDocument(text, path);

  let current: Loaded;
  let lastError: string | undefined;
  let closed = false;
  const listeners = new Set<() => void>();

  async function commit(document: PolicyDocumentJson, sha: string, version: number): Promise<void> {
    const updatedAt = new Date();
    const next: PolicyFileState = { version, sha256: sha, updatedAt: updatedAt.toISOString() };
    await writeAtomically(statePath, `${JSON.stringify(next, null, 2)}\n`);
    current = { document, version, sha256: sha, updatedAt };
    lastError = undefined;
    warnOfOptIns(logger, document, { path, version });
    for (const notify of [...listeners]) notify();
  }

  if (state && state.sha256 === initialSha) {
    current = { document: initialDocument, version: state.version, sha256: initialSha, updatedAt: new Date(state.updatedAt) };
    warnOfOptIns(logger, initialDocument, { path, version: state.version });
  } else {
    current = { document: initialDocument, version: 0, sha256: "", updatedAt: new Date(0) };
    await commit(initialDocument, initialSha, (state?.version ?? 0) + 1);
  }
  logger.info({ path, version: current.version }, "policy loaded");

  function reject(message: string): void {
    // Logged once per distinct problem, not on every poll.
    if (message === lastError) return;
    lastError = message;
    logger.error({ path, version: current.version }, `policy file rejected; version ${current.version} stays in force: ${message}`);
  }

  /** Re-reads the file; callers hold the lock. */
  async function reload(): Promise<void> {
    if (closed) return;
    let content: string | undefined;
    try {
      content = await readIfExists(path);
    } catch (err) {
      reject(`${path}: cannot be read (${(err as Error).message})`);
      return;
    }
    if (content === undefined) {
      reject(`${path}: the file is missing; write a valid policy document there`);
      return;
    }
    const sha = sha256(content);
    if (sha === current.sha256) {
      if (lastError !== undefined) logger.info({ path, version: current.version }, "policy file is valid again");
      lastError = undefined;
      return;
    }
    let document: PolicyDocumentJson;
    try {
      document = parsePolicyDocument(content, path);
    } catch (err) {
      if (!(err instanceof PolicyDocumentError)) throw err;
      reject(err.message);
      return;
    }
    await commit(document, sha, current.version + 1);
    logger.info({ path, version: current.version }, "policy reloaded");
  }

  // One operation at a time: a put and a reload racing could otherwise both claim a version.
  let queue: Promise<unknown> = Promise.resolve();
  function serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = queue.then(fn);
    queue = run.catch(() => undefined);
    return run;
  }
  const reloadInBackground = () => {
    serial(reload).catch((err: unknown) => logger.error({ err, path }, "policy reload failed"));
  };

  const watch = watchFile(path, reloadInBackground, { logger, what: "the policy directory", pollMs, debounceMs });

  function checkTenant(tenant: string): void {
    if (tenant !== STANDALONE_TENANT) {
      throw new ChaosError(
        "permission_denied",
        `this standalone policy file serves only tenant "${STANDALONE_TENANT}", not "${tenant}"`,
      );
    }
  }

  function snapshot(): PolicySnapshot {
    return {
      document: current.document,
      version: current.version,
      updatedAt: current.updatedAt,
      source,
      ...(lastError !== undefined ? { lastError } : {}),
    };
  }

  function nextChange(signal: AbortSignal): Promise<void> {
    return new Promise((resolveChange) => {
      if (signal.aborted || closed) return resolveChange();
      const done = () => {
        listeners.delete(done);
        signal.removeEventListener("abort", done);
        resolveChange();
      };
      listeners.add(done);
      signal.addEventListener("abort", done, { once: true });
    });
  }

  return {
    path,

    async get(tenant) {
      checkTenant(tenant);
      return snapshot();
    },

    async put(tenant, document, expectedVersion) {
      checkTenant(tenant);
      return serial(async () => {
        // An edit may be on disk before its change event arrives: take it in first, so the
        // version check compares against what is really in force.
        await reload();
        if (expectedVersion !== undefined && expectedVersion !== current.version) {
          throw new ChaosError(
            "conflict",
            `the policy is at version ${current.version}, not ${expectedVersion}: read it again and reapply the change`,
          );
        }
        const content = formatPolicyDocument(document);
        await writeAtomically(path, content);
        await commit(document, sha256(content), current.version + 1);
        logger.info({ path, version: current.version }, "policy stored");
        return current.version;
      });
    },

    async *watch(tenant, signal) {
      checkTenant(tenant);
      let seen = -1;
      while (!signal.aborted && !closed) {
        if (current.version > seen) {
          const snap = snapshot();
          seen = snap.version;
          yield snap;
          continue;
        }
        await nextChange(signal);
      }
    },

    async close() {
      closed = true;
      watch.close();
      for (const notify of [...listeners]) notify();
      await queue;
    },
  };
}
