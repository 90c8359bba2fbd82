import { readdirSync } from "node:fs";
import { open, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import type { Extensions } from "@electric-sql/pglite";
import { assertTenantId } from "../context.js";
import { ChaosError } from "../errors.js";
import { tenantPrelude, type Db, type Queryable, type QueryOptions, type QueryResult } from "./db.js";
import { wireSession, type PreparedCall } from "./pglite-wire.js";

/** Contrib extensions the embedded database can load, by name. */
const CONTRIB: Record<string, () => Promise<Extensions[string]>> = {
  pg_trgm: async () => (await import("@electric-sql/pglite/contrib/pg_trgm")).pg_trgm,
};

/** A WAL segment's file name: timeline, log and segment, 8 hex digits each. */
const WAL_SEGMENT = /^[0-9A-F]{24}$/;

/**
 * Flushes to disk the WAL of a PGlite data directory: PGlite runs Postgres with `fsync` off, and
 * its Node file system writes with `pwrite` and never syncs (checked with strace: not one
 * `fsync` or `fdatasync`, even with `fsync` on), so a committed transaction is in the operating
 * system's cache until this runs. Each flush `fdatasync`s every WAL segment there is (a handful:
 * the one being written, recycled ones that are clean and cost nothing) through handles kept open,
 * and the directory when its segments changed (a new or recycled segment is a new entry). The WAL
 * is one sequence: once it is on disk up to a commit's record, so is every commit before it.
 * Flushes asked for while one runs share the next one (group sync), which starts after every
 * commit its callers made.
 */
function walFlusher(dataDir: string): { flush: () => Promise<void>; close: () => Promise<void> } {
  const walDir = join(dataDir, "pg_wal");
  const handles = new Map<string, FileHandle>();
  let running: Promise<void> | undefined;
  let next: Promise<void> | undefined;

  const once = async () => {
    // Listed on this thread, as PGlite makes all its own file calls: a few µs, where a listing on
    // the thread pool costs ten times that in hand-offs between threads, once per flush.
    const names = readdirSync(walDir).filter((n) => WAL_SEGMENT.test(n));
    let changed = false;
    for (const name of names) {
      if (handles.has(name)) continue;
      handles.set(name, await open(join(walDir, name), "r"));
      changed = true;
    }
    // Every segment held open is synced, one the listing no longer finds (recycled) too.
    await Promise.all([...handles.values()].map((h) => h.datasync()));
    for (const [name, handle] of handles) {
      if (names.includes(name)) continue;
      handles.delete(name);
      await handle.close();
      changed = true;
    }
    if (changed) {
      const dir = await open(walDir, "r");
      try {
        await dir.sync();
      } finally {
        await dir.close();
      }
    }
  };
  const fail = (err: unknown) => {
    throw new ChaosError("unavailable", `the embedded database's write-ahead log could not be flushed to disk (${(err as Error).message})`, { cause: err });
  };
  const request = (): Promise<void> => {
    if (!running) {
      running = once().finally(() => (running = undefined));
      return running.catch(fail);
    }
    // One is running, maybe started before this caller's commit: share the one after it.
    next ??= running.then(
      () => undefined,
      () => undefined,
    ).then(() => {
      next = undefined;
      return request();
    });
    return next;
  };
  let closed = false;
  return {
    flush: () => (closed ? Promise.reject(new ChaosError("unavailable", "the embedded database is closed")) : request()),
    /** Lets the flushes asked for so far finish, then refuses new ones and closes the files. */
    async close() {
      closed = true;
      await Promise.allSettled([running, next]);
      for (const h of handles.values()) await h.close();
      handles.clear();
    },
  };
}

/**
 * An embedded {@link Db} on PGlite (WASM Postgres) with data under `dataDir`, or in memory when
 * it is omitted. PGlite has no cross-process lock: the caller must own `dataDir` exclusively.
 * Every statement and transaction holds the engine to itself (PGlite runs one at a time) and
 * speaks the wire protocol to it directly, in as few exchanges as it allows (./pglite-wire.ts).
 */
export async function createPgliteDb(options: { dataDir?: string; extensions?: string[] } = {}): Promise<Db> {
  const extensions: Extensions = {};
  for (const name of options.extensions ?? []) {
    const load = CONTRIB[name];
    if (!load) throw new Error(`PGlite extension "${name}" is not available`);
    extensions[name] = await load();
  }
  // Loaded on first use: every process that imports kit (an edge, a stdio server answering
  // initialize) would otherwise pay for PGlite's JavaScript before it needs a database.
  const { PGlite } = await import("@electric-sql/pglite");
  const pglite = await PGlite.create(options.dataDir ?? "memory://", { extensions });
  const wal = options.dataDir ? walFlusher(options.dataDir) : undefined;

  const wire = wireSession(pglite);
  let closed = false;
  /** Runs `fn` with the engine to itself (PGlite's lock), refusing once the database is closed. */
  const enqueue = <T>(fn: () => T | Promise<T>): Promise<T> =>
    pglite.runExclusive(async () => {
      if (closed) throw new ChaosError("unavailable", "the embedded database is closed");
      return fn();
    });

  /**
   * Prepared statements asked for in one turn of the event loop, sent to the engine together at
   * its end, each still its own transaction. An engine statement costs a few times more after
   * other work than right after another statement, its code and data evicted from the CPU's
   * caches in between (BENCHMARKS.md "The embedded engine's statements in a busy server"): the
   * first of a batch pays for that, the rest run warm, and the batch is one exchange.
   */
  type Waiting = PreparedCall & { resolve: (r: QueryResult<unknown>) => void; reject: (err: unknown) => void };
  let waiting: Waiting[] = [];
  const sendWaiting = () => {
    if (waiting.length === 0) return;
    const batch = waiting;
    waiting = [];
    enqueue(() => wire.queryPrepared(batch)).then(
      (results) =>
        results.forEach((r, i) => {
          if (r.status === "fulfilled") batch[i]!.resolve(r.value);
          else batch[i]!.reject(r.reason);
        }),
      (err: unknown) => batch.forEach((w) => w.reject(err)),
    );
  };
  /** {@link enqueue} after the statements waiting for the turn's end: the engine sees calls in the order they were made. */
  const exclusive = <T>(fn: () => T | Promise<T>): Promise<T> => {
    sendWaiting();
    return enqueue(fn);
  };

  function inTx<T>(begin: string, fn: (q: Queryable) => Promise<T>): Promise<T> {
    return exclusive(async () => {
      let open = true;
      const check = () => {
        if (!open) throw new Error("the transaction has ended; a statement after it would run outside it");
      };
      try {
        await wire.exec(begin);
        const result = await fn({
          async query<R>(sql: string, params?: unknown[], options?: QueryOptions) {
            check();
            return wire.query<R>(sql, params, options?.name);
          },
          async exec(sql: string) {
            check();
            await wire.exec(sql);
          },
        });
        open = false;
        await wire.exec("COMMIT");
        return result;
      } catch (err) {
        if (open) {
          open = false;
          await wire.exec("ROLLBACK");
        }
        throw err;
      }
    });
  }

  return {
    kind: "pglite",
    tenantTx(tenant, fn) {
      assertTenantId(tenant);
      return inTx(`BEGIN; ${tenantPrelude(tenant)}`, fn);
    },
    adminTx(fn) {
      return inTx("BEGIN", fn);
    },
    statement<R>(sql: string, params: unknown[] = [], options?: QueryOptions) {
      const name = options?.name;
      if (!name || !wire.isPrepared(name, sql)) return exclusive(() => wire.query<R>(sql, params, name));
      return new Promise<QueryResult<R>>((resolve, reject) => {
        waiting.push({ sql, params, name, resolve: resolve as Waiting["resolve"], reject });
        if (waiting.length === 1) setImmediate(sendWaiting);
      });
    },
    flush: wal ? wal.flush : () => Promise.resolve(),
    async close() {
      // Statements already asked for run first; later ones are refused. Then the flushes their
      // callers asked for finish (later ones are refused), and only then the files close.
      sendWaiting();
      await pglite.runExclusive(async () => {
        closed = true;
      });
      await wal?.close();
      await pglite.close();
    },
  };
}
