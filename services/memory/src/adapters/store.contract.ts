import { ChaosError, type Db } from "@chaos-core/kit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { exportHeaderLine, exportItemLine } from "../domain/export-format.js";
import type { MemoryStore, StoredItem } from "../domain/memory-store.js";
import { MEMORY_LIMITS } from "../domain/validation.js";
import { migrateMemory } from "./migrations.js";
import { createSqlMemoryStore, type SqlMemoryStoreOptions } from "./sql-store.js";

/** A clock tests move by hand, so expiry is exercised without sleeping. */
class ManualClock {
  private t = Date.parse("2030-01-01T00:00:00.000Z");
  now(): Date {
    return new Date(this.t);
  }
  advance(seconds: number): void {
    this.t += seconds * 1000;
  }
}

async function expectInvalid(promise: Promise<unknown>, message: RegExp): Promise<void> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "expected the call to fail").toBeInstanceOf(ChaosError);
  expect((err as ChaosError).code).toBe("invalid_argument");
  expect((err as ChaosError).message).toMatch(message);
}

/**
 * The behaviour every {@link MemoryStore} over a kit `Db` must show. Registers `describe`
 * blocks; `open` returns a fresh, empty database (migrated here), `close` disposes of it.
 */
export function describeMemoryStoreContract(name: string, open: () => Promise<{ db: Db; close(): Promise<void> }>): void {
  describe(`MemoryStore contract: ${name}`, () => {
    let db: Db;
    let close: () => Promise<void>;
    let tenants = 0;

    beforeAll(async () => {
      ({ db, close } = await open());
      expect(await migrateMemory(db)).toEqual(["0001_items", "0002_items_updated", "0003_one_statement_calls", "0004_search_words"]);
    });
    afterAll(async () => {
      await close?.();
    });

    /** Each test gets its own tenant (so tests never see each other's rows) and its own clock. */
    function fresh(options: Omit<SqlMemoryStoreOptions, "now"> = {}) {
      const clock = new ManualClock();
      const store = createSqlMemoryStore(db, { ...options, now: () => clock.now() });
      tenants += 1;
      return { store, clock, tenant: `tenant-${tenants}` };
    }

    async function rememberAll(store: MemoryStore, tenant: string, keys: string[], tags: string[] = []) {
      for (const key of keys) await store.remember(tenant, { key, value: { key }, tags });
    }

    async function allPages(store: MemoryStore, tenant: string, input: { query?: string; tags?: string[]; limit: number }) {
      const pages: string[][] = [];
      let cursor: string | undefined;
      do {
        const page = await store.search(tenant, { ...input, ...(cursor ? { cursor } : {}) });
        pages.push(page.items.map((i) => i.key));
        cursor = page.nextCursor;
        expect(pages.length).toBeLessThan(1000);
      } while (cursor);
      return pages;
    }

    it("migrations are idempotent", async () => {
      expect(await migrateMemory(db)).toEqual([]);
    });

    describe("remember and recall", () => {
      it("stores an item and recalls it as stored", async () => {
        const { store, clock, tenant } = fresh();
        const item = await store.remember(tenant, { key: "user/prefs", value: { theme: "dark", n: 3 }, tags: ["ui", "prefs"] });
        expect(item).toEqual({
          key: "user/prefs",
          value: { theme: "dark", n: 3 },
          tags: ["ui", "prefs"],
          createdAt: clock.now(),
          updatedAt: clock.now(),
          expiresAt: null,
        });
        expect(await store.recall(tenant, "user/prefs")).toEqual(item);
      });

      it("recalls nothing for an unknown key", async () => {
        const { store, tenant } = fresh();
        expect(await store.recall(tenant, "nope")).toBeUndefined();
      });

      it("round-trips every kind of JSON value exactly", async () => {
        const { store, tenant } = fresh();
        const values: unknown[] = [
          null,
          true,
          false,
          0,
          -12.5,
          1e300,
          "",
          "plain",
          'quotes " and \\ backslash',
          "nul \u0000 and newline \n and tab \t",
          "unicode é 漢字 🎉",
          [],
          {},
          [1, "two", null, { three: [3] }],
          { nested: { deeper: { list: [true, false] } }, "key with spaces": "v" },
        ];
        for (const [i, value] of values.entries()) {
          await store.remember(tenant, { key: `v${i}`, value });
          expect((await store.recall(tenant, `v${i}`))?.value, `value ${i}`).toEqual(value);
        }
      });

      it("accepts keys up to 512 characters of any script", async () => {
        const { store, tenant } = fresh();
        const longKey = "é".repeat(MEMORY_LIMITS.keyMaxChars);
        await store.remember(tenant, { key: longKey, value: 1 });
        expect((await store.recall(tenant, longKey))?.key).toBe(longKey);
        const emoji = "🎉".repeat(MEMORY_LIMITS.keyMaxChars); // 512 code points, 1024 UTF-16 units
        await store.remember(tenant, { key: emoji, value: 2 });
        expect((await store.recall(tenant, emoji))?.value).toBe(2);
      });

      it("drops repeated tags and keeps their order", async () => {
        const { store, tenant } = fresh();
        const item = await store.remember(tenant, { key: "k", value: 1, tags: ["b", "a", "b", "c", "a"] });
        expect(item.tags).toEqual(["b", "a", "c"]);
      });

      it("replaces value, tags and TTL of an existing key and keeps created_at", async () => {
        const { store, clock, tenant } = fresh();
        const first = await store.remember(tenant, { key: "k", value: "old", tags: ["x"], ttlSeconds: 60 });
        clock.advance(30);
        const second = await store.remember(tenant, { key: "k", value: { new: true }, tags: ["y", "z"] });
        expect(second).toEqual({
          key: "k",
          value: { new: true },
          tags: ["y", "z"],
          createdAt: first.createdAt,
          updatedAt: clock.now(),
          expiresAt: null,
        });
        expect(await store.recall(tenant, "k")).toEqual(second);
        // The old 60 s TTL is gone with the replacement.
        clock.advance(3600);
        expect(await store.recall(tenant, "k")).toEqual(second);
      });

      it("stores a value of exactly 1 MiB of JSON", async () => {
        const { store, tenant } = fresh();
        const value = "m".repeat(MEMORY_LIMITS.valueMaxBytes - 2); // plus the two quotes
        await store.remember(tenant, { key: "big", value });
        expect((await store.recall(tenant, "big"))?.value).toBe(value);
        expect((await store.stats(tenant)).valueBytes).toBe(MEMORY_LIMITS.valueMaxBytes);
      });

      it("takes concurrent writes to one key and to many keys", async () => {
        const { store, tenant } = fresh();
        await Promise.all(Array.from({ length: 10 }, (_, i) => store.remember(tenant, { key: "same", value: i })));
        await Promise.all(Array.from({ length: 10 }, (_, i) => store.remember(tenant, { key: `k${i}`, value: i, ttlSeconds: 1 })));
        expect(typeof (await store.recall(tenant, "same"))?.value).toBe("number");
        expect((await store.stats(tenant)).items).toBe(11);
      });
    });

    describe("expiry", () => {
      it("never returns an expired item from recall, search or stats", async () => {
        const { store, clock, tenant } = fresh();
        const item = await store.remember(tenant, { key: "short", value: "lived", tags: ["t"], ttlSeconds: 10 });
        await store.remember(tenant, { key: "forever", value: "stays", tags: ["t"] });
        expect(item.expiresAt).toEqual(new Date(clock.now().getTime() + 10_000));

        clock.advance(9);
        expect(await store.recall(tenant, "short")).toEqual(item);
        expect((await store.search(tenant, { query: "lived" })).items.map((i) => i.key)).toEqual(["short"]);

        clock.advance(1); // exactly at expires_at: gone
        expect(await store.recall(tenant, "short")).toBeUndefined();
        expect((await store.search(tenant, { query: "lived" })).items).toEqual([]);
        expect((await store.search(tenant, { tags: ["t"] })).items.map((i) => i.key)).toEqual(["forever"]);
        const stats = await store.stats(tenant);
        expect(stats.items).toBe(1);
        expect(stats.expired).toBe(1);
        expect(stats.topTags).toEqual([{ tag: "t", count: 1 }]);
      });

      it("purges expired rows on writes, a bounded batch at a time, and never on reads", async () => {
        const { store, clock, tenant } = fresh({ purgeBatch: 2 });
        for (let i = 0; i < 5; i++) await store.remember(tenant, { key: `e${i}`, value: i, ttlSeconds: 5 });
        clock.advance(5);
        await store.recall(tenant, "e0");
        await store.search(tenant, {});
        await store.stats(tenant);
        expect((await store.stats(tenant)).expired).toBe(5);

        await store.remember(tenant, { key: "w1", value: 1 });
        expect((await store.stats(tenant)).expired).toBe(3);
        await store.remember(tenant, { key: "w2", value: 2 });
        await store.remember(tenant, { key: "w3", value: 3 });
        expect(await store.stats(tenant)).toMatchObject({ items: 3, expired: 0 });
      });

      it("treats remembering an expired key as a new item", async () => {
        const { store, clock, tenant } = fresh({ purgeBatch: 0 });
        await store.remember(tenant, { key: "k", value: 1, ttlSeconds: 1 });
        clock.advance(2);
        const again = await store.remember(tenant, { key: "k", value: 2 });
        expect(again.createdAt).toEqual(clock.now());
        expect(again.updatedAt).toEqual(clock.now());
      });
    });

    describe("forget", () => {
      it("deletes a live item and says whether it did", async () => {
        const { store, tenant } = fresh();
        await store.remember(tenant, { key: "k", value: 1 });
        expect(await store.forget(tenant, "k")).toBe(true);
        expect(await store.recall(tenant, "k")).toBeUndefined();
        expect(await store.forget(tenant, "k")).toBe(false);
        expect(await store.forget(tenant, "never-there")).toBe(false);
      });

      it("reports an expired item as not deleted, and removes its row", async () => {
        const { store, clock, tenant } = fresh();
        await store.remember(tenant, { key: "k", value: 1, ttlSeconds: 1 });
        clock.advance(1);
        expect(await store.forget(tenant, "k")).toBe(false);
        expect((await store.stats(tenant)).expired).toBe(0);
      });
    });

    describe("search", () => {
      it("matches a case-insensitive substring of the key or of the value", async () => {
        const { store, tenant } = fresh();
        await store.remember(tenant, { key: "Project/Alpha", value: { note: "kickoff" } });
        await store.remember(tenant, { key: "project/beta", value: { note: "The ALPHA test" } });
        await store.remember(tenant, { key: "other", value: "nothing here" });
        const keys = async (query: string) => (await store.search(tenant, { query })).items.map((i) => i.key);
        expect(await keys("alpha")).toEqual(["Project/Alpha", "project/beta"]);
        expect(await keys("ALPHA")).toEqual(["Project/Alpha", "project/beta"]);
        expect(await keys("KICKOFF")).toEqual(["Project/Alpha"]);
        expect(await keys("project/")).toEqual(["Project/Alpha", "project/beta"]);
        expect(await keys("zzz")).toEqual([]);
        expect(await keys("")).toEqual(["Project/Alpha", "other", "project/beta"]);
      });

      it("matches the compact JSON text of the value", async () => {
        const { store, tenant } = fresh();
        await store.remember(tenant, { key: "a", value: { status: "done", n: 42 } });
        expect((await store.search(tenant, { query: '"status":"done"' })).items.map((i) => i.key)).toEqual(["a"]);
        expect((await store.search(tenant, { query: '"n":42' })).items.map((i) => i.key)).toEqual(["a"]);
      });

      it("matches a query of several words only where they stand together, exactly as given", async () => {
        // The index is asked for each word of 3+ characters; the exact pattern still decides.
        const { store, tenant } = fresh();
        await store.remember(tenant, { key: "hit", value: { ref: "zq-needle-007" } });
        await store.remember(tenant, { key: "apart", value: { a: "needle 007", b: "zq" } });
        await store.remember(tenant, { key: "other-number", value: { ref: "zq-needle-008" } });
        await store.remember(tenant, { key: "other-sep", value: { ref: "zq_needle_007" } });
        const keys = async (query: string) => (await store.search(tenant, { query })).items.map((i) => i.key);
        expect(await keys("ZQ-Needle-007")).toEqual(["hit"]);
        expect(await keys("needle-00")).toEqual(["hit", "other-number"]);
        expect(await keys("zq_needle")).toEqual(["other-sep"]);
        expect(await keys("e 00")).toEqual(["apart"]);
      });

      it("treats %, _ and \\ in the query literally", async () => {
        const { store, tenant } = fresh();
        await store.remember(tenant, { key: "percent", value: "100% sure" });
        await store.remember(tenant, { key: "under", value: "snake_case" });
        await store.remember(tenant, { key: "slash", value: "C:\\temp" });
        await store.remember(tenant, { key: "plain", value: "100 sure snakeXcase C:temp" });
        const keys = async (query: string) => (await store.search(tenant, { query })).items.map((i) => i.key);
        expect(await keys("%")).toEqual(["percent"]);
        expect(await keys("0% s")).toEqual(["percent"]);
        expect(await keys("_")).toEqual(["under"]);
        expect(await keys("e_c")).toEqual(["under"]);
        // The JSON text of C:\temp holds an escaped backslash: C:\\temp.
        expect(await keys("\\")).toEqual(["slash"]);
        expect(await keys("c:\\\\temp")).toEqual(["slash"]);
      });

      it("filters by tags: an item must carry every tag given", async () => {
        const { store, tenant } = fresh();
        await store.remember(tenant, { key: "a", value: "note", tags: ["red", "round"] });
        await store.remember(tenant, { key: "b", value: "note", tags: ["red"] });
        await store.remember(tenant, { key: "c", value: "other", tags: ["red", "round", "big"] });
        const keys = async (query: string, tags: string[]) => (await store.search(tenant, { query, tags })).items.map((i) => i.key);
        expect(await keys("", ["red"])).toEqual(["a", "b", "c"]);
        expect(await keys("", ["red", "round"])).toEqual(["a", "c"]);
        expect(await keys("", ["round", "red", "big"])).toEqual(["c"]);
        expect(await keys("note", ["round"])).toEqual(["a"]);
        expect(await keys("", ["Red"])).toEqual([]);
        expect(await keys("", ["missing"])).toEqual([]);
      });

      it("pages through every match once, in key order, with no trailing empty page", async () => {
        const { store, tenant } = fresh();
        const keys = Array.from({ length: 45 }, (_, i) => `item-${String(i).padStart(3, "0")}`);
        // Written out of order, so ordering comes from the store.
        await rememberAll(store, tenant, [...keys].reverse(), ["p"]);
        await store.remember(tenant, { key: "unrelated", value: 0 });

        const pages = await allPages(store, tenant, { query: "item-", tags: ["p"], limit: 10 });
        expect(pages.map((p) => p.length)).toEqual([10, 10, 10, 10, 5]);
        expect(pages.flat()).toEqual(keys);

        const exact = await allPages(store, tenant, { query: "item-", limit: 15 });
        expect(exact.map((p) => p.length)).toEqual([15, 15, 15]);
        expect(exact.flat()).toEqual(keys);
      });

      it("neither repeats nor skips items when others are written between pages", async () => {
        const { store, tenant } = fresh();
        await rememberAll(store, tenant, ["b", "d", "f", "h"]);
        const first = await store.search(tenant, { limit: 2 });
        expect(first.items.map((i) => i.key)).toEqual(["b", "d"]);
        await store.remember(tenant, { key: "a", value: 0 }); // before the cursor: not seen again
        await store.remember(tenant, { key: "e", value: 0 }); // after it: seen
        await store.remember(tenant, { key: "b", value: 1 }); // updated behind the cursor: not repeated
        const second = await store.search(tenant, { limit: 2, cursor: first.nextCursor as string });
        const third = await store.search(tenant, { limit: 2, cursor: second.nextCursor as string });
        expect([...second.items, ...third.items].map((i) => i.key)).toEqual(["e", "f", "h"]);
        expect(third.nextCursor).toBeUndefined();
      });

      it("serves 20 items by default and at most 100", async () => {
        const { store, tenant } = fresh();
        await rememberAll(store, tenant, Array.from({ length: 105 }, (_, i) => `k${String(i).padStart(3, "0")}`));
        expect((await store.search(tenant, {})).items).toHaveLength(MEMORY_LIMITS.defaultLimit);
        expect((await store.search(tenant, { limit: 0 })).items).toHaveLength(MEMORY_LIMITS.defaultLimit);
        const big = await store.search(tenant, { limit: 1000 });
        expect(big.items).toHaveLength(MEMORY_LIMITS.maxLimit);
        expect(big.nextCursor).toBeDefined();
        expect((await store.search(tenant, { limit: 3 })).items).toHaveLength(3);
      });

      it("refuses a cursor used with another query or other tags, or tampered with", async () => {
        const { store, tenant } = fresh();
        await rememberAll(store, tenant, ["a1", "a2", "a3"], ["t"]);
        const page = await store.search(tenant, { query: "a", tags: ["t"], limit: 1 });
        const cursor = page.nextCursor as string;
        expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
        // Same search (case and tag order aside): accepted.
        expect((await store.search(tenant, { query: "A", tags: ["t"], limit: 1, cursor })).items.map((i) => i.key)).toEqual(["a2"]);
        await expectInvalid(store.search(tenant, { query: "a1", tags: ["t"], cursor }), /cursor does not belong to this search/);
        await expectInvalid(store.search(tenant, { query: "a", cursor }), /cursor does not belong to this search/);
        await expectInvalid(store.search(tenant, { query: "a", tags: ["t", "u"], cursor }), /cursor does not belong/);

        const middle = Math.floor(cursor.length / 2);
        const flipped = cursor.slice(0, middle) + (cursor[middle] === "A" ? "B" : "A") + cursor.slice(middle + 1);
        await expectInvalid(store.search(tenant, { query: "a", tags: ["t"], cursor: flipped }), /cursor/);
        await expectInvalid(store.search(tenant, { query: "a", tags: ["t"], cursor: "not a cursor!" }), /cursor is not valid/);
        const forged = Buffer.from(JSON.stringify({ v: 1, k: "a2", d: "x".repeat(22) })).toString("base64url");
        await expectInvalid(store.search(tenant, { query: "a", tags: ["t"], cursor: forged }), /cursor/);
      });
    });

    describe("stats", () => {
      it("summarises live items, expired items, bytes, update times and top tags", async () => {
        const { store, clock, tenant } = fresh({ purgeBatch: 0 });
        expect(await store.stats(tenant)).toEqual({ items: 0, expired: 0, valueBytes: 0, topTags: [] });

        const first = clock.now();
        await store.remember(tenant, { key: "a", value: { x: "é" }, tags: ["common", "t01"] });
        clock.advance(10);
        await store.remember(tenant, { key: "b", value: [1, 2], tags: ["common", "t02", "t03"] });
        await store.remember(tenant, { key: "gone", value: "xxxxxxxx", tags: ["common"], ttlSeconds: 5 });
        for (let i = 4; i <= 14; i++) {
          await store.remember(tenant, { key: `c${i}`, value: i, tags: ["common", `t${String(i).padStart(2, "0")}`, ...(i % 2 ? ["odd"] : [])] });
        }
        clock.advance(10);
        const last = clock.now();
        await store.remember(tenant, { key: "d", value: null, tags: ["odd"] });

        const live = [{ x: "é" }, [1, 2], ...Array.from({ length: 11 }, (_, i) => i + 4), null];
        const stats = await store.stats(tenant);
        expect(stats.items).toBe(14);
        expect(stats.expired).toBe(1);
        expect(stats.valueBytes).toBe(live.reduce<number>((n, v) => n + Buffer.byteLength(JSON.stringify(v)), 0));
        expect(stats.oldestUpdate).toEqual(first);
        expect(stats.newestUpdate).toEqual(last);
        expect(stats.topTags).toEqual([
          { tag: "common", count: 13 },
          { tag: "odd", count: 6 },
          ...["t01", "t02", "t03", "t04", "t05", "t06", "t07", "t08"].map((tag) => ({ tag, count: 1 })),
        ]);
      });
    });

    describe("export, delete and retention", () => {
      async function exported(store: MemoryStore, tenant: string): Promise<StoredItem[]> {
        const items: StoredItem[] = [];
        for await (const item of store.exportItems(tenant)) items.push(item);
        return items;
      }

      /** A Db that counts the tenant transactions run through it, on the contract's database. */
      function counting(): { db: Db; tx: () => number } {
        let n = 0;
        return {
          db: { ...db, kind: db.kind, tenantTx: (t, fn) => (n++, db.tenantTx(t, fn)), adminTx: (fn) => db.adminTx(fn) },
          tx: () => n,
        };
      }

      it("exports every stored item of the caller's tenant, all columns, in key order, and none of another tenant's", async () => {
        const { store, clock, tenant: a } = fresh({ purgeBatch: 0, exportPage: { rows: 3, bytes: 1 << 20 } });
        const { tenant: b } = fresh();
        const t0 = clock.now();
        await store.remember(a, { key: "note", value: { text: "naïve — 漢字", n: 1.5 }, tags: ["x", "y"] });
        await store.remember(b, { key: "note", value: "b's own note" });
        await store.remember(b, { key: "b-only", value: 1 });
        await store.remember(a, { key: "episode:sig:2030", value: { status: "ok" }, tags: ["chaoscore.episode"], ttlSeconds: 3600 });
        await store.remember(a, { key: "procedure:sig", value: { capabilities: ["a.b"] }, tags: ["chaoscore.procedure"] });
        await store.remember(a, { key: "short", value: null, ttlSeconds: 5 });
        clock.advance(10); // "short" has expired and is not purged yet: it is still stored, so it is exported
        const t1 = clock.now();
        await store.remember(a, { key: "note", value: { text: "naïve — 漢字", n: 2 }, tags: ["x", "y"] });
        for (let i = 0; i < 4; i++) await store.remember(a, { key: `k${i}`, value: [i] });

        const items = await exported(store, a);
        expect(items.map((i) => i.key)).toEqual(["episode:sig:2030", "k0", "k1", "k2", "k3", "note", "procedure:sig", "short"]);
        expect(items.find((i) => i.key === "note")).toEqual({
          key: "note",
          valueJson: '{"text":"naïve — 漢字","n":2}',
          tags: ["x", "y"],
          createdAt: t0,
          updatedAt: t1,
          expiresAt: null,
        });
        expect(items.find((i) => i.key === "short")).toMatchObject({ valueJson: "null", expiresAt: new Date(t0.getTime() + 5000) });
        expect((await exported(store, b)).map((i) => [i.key, i.valueJson])).toEqual([
          ["b-only", "1"],
          ["note", '"b\'s own note"'],
        ]);
        expect(await exported(store, fresh().tenant)).toEqual([]);

        // The lines carry the tenant, every column and the value exactly as stored.
        const lines = [exportHeaderLine(a), ...items.map((i) => exportItemLine(a, i))];
        expect(lines[0]).toBe(`{"type":"header","format":"chaos-core-memory/1","tenant":"${a}"}\n`);
        const note = lines.find((l) => l.includes('"key":"note"')) as string;
        expect(note).toBe(
          `{"type":"memory.item","tenant":"${a}","key":"note","value":{"text":"naïve — 漢字","n":2},"tags":["x","y"],` +
            `"created_at":"${t0.toISOString()}","updated_at":"${t1.toISOString()}","expires_at":null}\n`,
        );
        for (const line of lines) {
          expect(line.endsWith("\n") && !line.slice(0, -1).includes("\n")).toBe(true);
          expect(JSON.parse(line).tenant).toBe(a);
        }
      });

      it("reads a page at a time, bounded in rows and in value bytes, and stops reading when the reader stops", async () => {
        const { db: countingDb, tx } = counting();
        const tenant = fresh().tenant;
        const rowsPaged = createSqlMemoryStore(countingDb, { exportPage: { rows: 4, bytes: 1 << 20 } });
        const keys = Array.from({ length: 10 }, (_, i) => `k${String(i).padStart(2, "0")}`);
        for (const key of keys) await rowsPaged.remember(tenant, { key, value: "v".repeat(98) }); // 100 bytes as JSON
        let before = tx();
        expect((await exported(rowsPaged, tenant)).map((i) => i.key)).toEqual(keys);
        expect(tx() - before).toBe(4); // 4 + 4 + 2, then the empty page that ends it

        // 250 bytes a page: two 100-byte values and the one that crosses the line; always at least one.
        const bytesPaged = createSqlMemoryStore(countingDb, { exportPage: { rows: 100, bytes: 250 } });
        before = tx();
        expect((await exported(bytesPaged, tenant)).map((i) => i.key)).toEqual(keys);
        expect(tx() - before).toBe(5); // 3 + 3 + 3 + 1 + empty
        const oneByte = createSqlMemoryStore(countingDb, { exportPage: { rows: 100, bytes: 1 } });
        before = tx();
        expect(await exported(oneByte, tenant)).toHaveLength(10);
        expect(tx() - before).toBe(11);

        before = tx();
        for await (const item of rowsPaged.exportItems(tenant)) if (item.key === "k01") break;
        expect(tx() - before).toBe(1);
      });

      it("neither repeats nor skips items written between pages", async () => {
        const { store, tenant } = fresh({ exportPage: { rows: 2, bytes: 1 << 20 } });
        await rememberAll(store, tenant, ["b", "d", "f", "h"]);
        const seen: string[] = [];
        for await (const item of store.exportItems(tenant)) {
          seen.push(item.key);
          if (item.key === "d") {
            await store.remember(tenant, { key: "a", value: 0 }); // behind the cursor: not seen
            await store.remember(tenant, { key: "b", value: 1 }); // updated behind it: not repeated
            await store.remember(tenant, { key: "e", value: 0 }); // ahead of it: seen
          }
        }
        expect(seen).toEqual(["b", "d", "e", "f", "h"]);
      });

      it("deletes every item of the caller's tenant, counted per kind, in batches, and nothing of another tenant's", async () => {
        const { store, clock, tenant: a } = fresh({ purgeBatch: 0, deleteBatch: 2 });
        const { tenant: b } = fresh();
        await rememberAll(store, a, ["n1", "n2", "n3", "episode:s:1", "episode:s:2", "procedure:s"]);
        await store.remember(a, { key: "gone", value: 1, ttlSeconds: 1 });
        clock.advance(2); // an expired row is still data of the tenant's: deleted and counted
        await rememberAll(store, b, ["n1", "episode:s:1"]);

        expect(await store.deleteAll(a)).toEqual({ items: 7, episodes: 2, procedures: 1 });
        expect(await exported(store, a)).toEqual([]);
        expect(await store.stats(a)).toEqual({ items: 0, expired: 0, valueBytes: 0, topTags: [] });
        expect((await exported(store, b)).map((i) => i.key)).toEqual(["episode:s:1", "n1"]);
        expect(await store.deleteAll(a)).toEqual({ items: 0, episodes: 0, procedures: 0 });
        // The tenant can write again afterwards: deletion is of data, not of the keyspace.
        await store.remember(a, { key: "n1", value: "again" });
        expect((await store.recall(a, "n1"))?.value).toBe("again");
      });

      it("stops between batches once its signal aborts, and a second call finishes the job", async () => {
        const { store, tenant } = fresh({ deleteBatch: 2 });
        await rememberAll(store, tenant, ["a", "b", "c", "d", "e"]);
        const controller = new AbortController();
        controller.abort();
        const err = await store.deleteAll(tenant, { signal: controller.signal }).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(ChaosError);
        expect((err as ChaosError).code).toBe("cancelled");
        expect((err as ChaosError).message).toMatch(/call again to finish/);
        expect(await exported(store, tenant)).toHaveLength(5);
        expect((await store.deleteAll(tenant)).items).toBe(5);
      });

      it("retention deletes only the caller's items last written longer ago than the age, and keeps one written again", async () => {
        const { store, clock, tenant: a } = fresh({ purgeBatch: 0, deleteBatch: 2 });
        const { tenant: b } = fresh();
        await rememberAll(store, a, ["old1", "old2", "old3", "rewritten"]);
        await rememberAll(store, b, ["old1", "old2"]);
        clock.advance(100);
        await store.remember(a, { key: "edge", value: 1 }); // exactly max_age old at the run: kept
        clock.advance(50);
        await store.remember(a, { key: "rewritten", value: "new" }); // created long ago, written again lately
        await store.remember(a, { key: "young", value: 1 });
        clock.advance(50);

        const result = await store.applyRetention(a, 150);
        expect(result).toEqual({ deleted: 3, cutoff: new Date(clock.now().getTime() - 150_000) });
        expect((await exported(store, a)).map((i) => i.key)).toEqual(["edge", "rewritten", "young"]);
        expect((await exported(store, b)).map((i) => i.key)).toEqual(["old1", "old2"]);
        expect((await store.applyRetention(a, 150)).deleted).toBe(0);
        expect((await store.applyRetention(a, 1)).deleted).toBe(3);
      });

      it("refuses a retention age that is not a whole number of seconds above 0, naming max_age_seconds, and deletes nothing", async () => {
        const { store, clock, tenant } = fresh();
        await store.remember(tenant, { key: "k", value: 1 });
        clock.advance(1000);
        for (const bad of [0, -1, 1.5, Number.NaN, 2 ** 32]) {
          await expectInvalid(store.applyRetention(tenant, bad), /^max_age_seconds must be a whole number of seconds from 1 to 4294967295/);
        }
        expect(await store.recall(tenant, "k")).toBeDefined();
      });

      it("finds the rows retention deletes through its index, under row-level security", async () => {
        const { tenant } = fresh();
        const plan = await db.tenantTx(tenant, async (q) => {
          await q.query("SET LOCAL enable_seqscan = off");
          const res = await q.query<{ "QUERY PLAN": string }>(
            "EXPLAIN SELECT key FROM memory.items WHERE tenant_id = $1 AND updated_at < now() ORDER BY updated_at LIMIT 10",
            [tenant],
          );
          return res.rows.map((r) => r["QUERY PLAN"]).join("\n");
        });
        expect(plan).toMatch(/Index (Only )?Scan using items_updated/);
      });
    });

    describe("tenant isolation", () => {
      it("never shows one tenant's items to another", async () => {
        const { store, tenant: a } = fresh();
        const { tenant: b } = fresh();
        await store.remember(a, { key: "secret", value: "for a only", tags: ["private"] });
        expect(await store.recall(b, "secret")).toBeUndefined();
        expect((await store.search(b, { query: "for a" })).items).toEqual([]);
        expect((await store.search(b, { tags: ["private"] })).items).toEqual([]);
        expect(await store.stats(b)).toEqual({ items: 0, expired: 0, valueBytes: 0, topTags: [] });
        expect(await store.forget(b, "secret")).toBe(false);

        await store.remember(b, { key: "secret", value: "b's own" });
        expect((await store.recall(a, "secret"))?.value).toBe("for a only");
        expect((await store.recall(b, "secret"))?.value).toBe("b's own");
      });

      it("row-level security alone refuses another tenant's rows", async () => {
        const { store, tenant: a } = fresh();
        const { tenant: b } = fresh();
        await store.remember(a, { key: "secret", value: 1 });
        await db.tenantTx(b, async (q) => {
          // No tenant filter in these statements: only the policy stands between b and a's row.
          const seen = await q.query<{ n: unknown }>("SELECT count(*) AS n FROM memory.items WHERE key = 'secret'");
          expect(Number(seen.rows[0]?.n)).toBe(0);
          const updated = await q.query(`UPDATE memory.items SET value = '"stolen"' WHERE tenant_id = '${a}'`);
          expect(updated.rowCount).toBe(0);
          const deleted = await q.query("DELETE FROM memory.items");
          expect(deleted.rowCount).toBe(0);
        });
        await expect(
          db.tenantTx(b, (q) =>
            q.query(
              `INSERT INTO memory.items (tenant_id, key, value, created_at, updated_at) VALUES ('${a}', 'planted', '1', now(), now())`,
            ),
          ),
        ).rejects.toThrow(/row-level security/);
        expect((await store.recall(a, "secret"))?.value).toBe(1);
        expect(await store.recall(a, "planted")).toBeUndefined();
      });
      it("forces row-level security, so it would bind even the table's owner", async () => {
        const res = await db.adminTx((q) =>
          q.query<{ relrowsecurity: boolean; relforcerowsecurity: boolean }>(
            "SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = 'memory.items'::regclass",
          ),
        );
        expect(res.rows).toEqual([{ relrowsecurity: true, relforcerowsecurity: true }]);
      });

      it("the search function takes its tenant only from the transaction, and none outside one", async () => {
        const { store, clock, tenant: a } = fresh();
        const { tenant: b } = fresh();
        await store.remember(a, { key: "mine", value: "needle" });
        const call = "SELECT key FROM memory.search_items('needle', '{}', NULL, $1::timestamptz, 10)";
        const inB = await db.tenantTx(b, (q) => q.query(call, [clock.now().toISOString()]));
        expect(inB.rows).toEqual([]);
        const inA = await db.tenantTx(a, (q) => q.query(call, [clock.now().toISOString()]));
        expect(inA.rows).toEqual([{ key: "mine" }]);
        await expect(db.adminTx((q) => q.query(call, [clock.now().toISOString()]))).rejects.toThrow(/app\.tenant_id is not set/);
      });

      it("recall and remember scope themselves to the tenant they are given, and the application role cannot call them", async () => {
        const { store, clock, tenant: a } = fresh();
        const { tenant: b } = fresh();
        await store.remember(a, { key: "k", value: "a's" });
        await store.remember(b, { key: "k", value: "b's" });
        const at = clock.now().toISOString();
        // As the connecting role, each names its tenant and sees that tenant's row only.
        const read = (t: string) =>
          db.adminTx((q) => q.query<{ value_json: string }>("SELECT value_json FROM memory.recall_item($1, 'k', $2::timestamptz)", [t, at]));
        expect((await read(a)).rows).toEqual([{ value_json: '"a\'s"' }]);
        expect((await read(b)).rows).toEqual([{ value_json: '"b\'s"' }]);
        // Inside a tenant transaction (the application role) neither may be called: it could name another tenant.
        for (const call of [
          `SELECT * FROM memory.recall_item('${a}', 'k', now())`,
          `SELECT * FROM memory.remember_item('${a}', now(), 'k', '"stolen"', '{}', NULL, 0)`,
        ]) {
          await expect(db.tenantTx(b, (q) => q.query(call)), call).rejects.toThrow(/permission denied/);
        }
        expect((await store.recall(a, "k"))?.value).toBe("a's");
      });
    });

    describe("bad input", () => {
      it("refuses bad keys, naming the problem", async () => {
        const { store, tenant } = fresh();
        await expectInvalid(store.remember(tenant, { key: "", value: 1 }), /key must not be empty/);
        await expectInvalid(store.remember(tenant, { key: "x".repeat(513), value: 1 }), /key is 513 characters; the limit is 512/);
        await expectInvalid(store.remember(tenant, { key: "line\nbreak", value: 1 }), /key must not contain control characters/);
        await expectInvalid(store.remember(tenant, { key: "bad\ud800", value: 1 }), /unpaired surrogates/);
        await expectInvalid(store.recall(tenant, ""), /key must not be empty/);
        await expectInvalid(store.forget(tenant, "tab\there"), /key must not contain control characters/);
      });

      it("refuses values that are missing, not JSON, too deep or over 1 MiB", async () => {
        const { store, tenant } = fresh();
        await expectInvalid(store.remember(tenant, { key: "k", value: undefined }), /value is required/);
        await expectInvalid(store.remember(tenant, { key: "k", value: { n: Number.NaN } }), /value\.n is NaN/);
        await expectInvalid(store.remember(tenant, { key: "k", value: [1, Infinity] }), /value\[1\] is Infinity/);
        await expectInvalid(store.remember(tenant, { key: "k", value: new Date() }), /not a plain JSON object/);
        let deep: unknown = 1;
        for (let i = 0; i < 101; i++) deep = [deep];
        await expectInvalid(store.remember(tenant, { key: "k", value: deep }), /deeper than 100 levels/);
        await expectInvalid(
          store.remember(tenant, { key: "k", value: "m".repeat(MEMORY_LIMITS.valueMaxBytes - 1) }),
          /value is 1048577 bytes as JSON; the limit is 1048576 bytes \(1 MiB\)/,
        );
        expect(await store.recall(tenant, "k")).toBeUndefined();
      });

      it("refuses bad tags, TTLs, limits and queries", async () => {
        const { store, tenant } = fresh();
        const tags33 = Array.from({ length: 33 }, (_, i) => `t${i}`);
        await expectInvalid(store.remember(tenant, { key: "k", value: 1, tags: tags33 }), /33 tags given; the limit is 32/);
        await expectInvalid(store.remember(tenant, { key: "k", value: 1, tags: ["ok", ""] }), /tag 2 must not be empty/);
        await expectInvalid(store.remember(tenant, { key: "k", value: 1, tags: ["x".repeat(65)] }), /tag 1 is 65 characters; the limit is 64/);
        await expectInvalid(store.remember(tenant, { key: "k", value: 1, ttlSeconds: -1 }), /ttl_seconds must be a whole number/);
        await expectInvalid(store.remember(tenant, { key: "k", value: 1, ttlSeconds: 1.5 }), /ttl_seconds/);
        await expectInvalid(store.search(tenant, { limit: -1 }), /limit must be a whole number/);
        await expectInvalid(store.search(tenant, { query: "a\u0000b" }), /query must not contain control characters/);
        await expectInvalid(store.search(tenant, { tags: ["\n"] }), /tag 1 must not contain control characters/);
        // 32 tags of 64 characters are fine.
        const max = Array.from({ length: 32 }, (_, i) => `${i}`.padEnd(64, "x"));
        expect((await store.remember(tenant, { key: "k", value: 1, tags: max })).tags).toEqual(max);
      });
    });
  });
}
