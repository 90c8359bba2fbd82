import { ChaosError } from "@chaos-core/kit";
import { describe, expect, it } from "vitest";
import { createHash } from "node:crypto";
import { decodeCursor, encodeCursor } from "./cursor.js";

const scope = { query: "Alpha", tags: ["b", "a"] };

function rejects(fn: () => unknown, message: RegExp): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(ChaosError);
  expect((caught as ChaosError).code).toBe("invalid_argument");
  expect((caught as ChaosError).message).toMatch(message);
}

describe("search cursors", () => {
  it("round-trip the last key, including awkward ones", () => {
    for (const key of ["k", "doc/1", "é 漢字 🎉", 'quote " and \\', "x".repeat(512)]) {
      const cursor = encodeCursor(key, scope);
      expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
      expect(decodeCursor(cursor, scope)).toBe(key);
    }
  });

  it("are bound to the search, ignoring query case and tag order", () => {
    const cursor = encodeCursor("k", scope);
    expect(decodeCursor(cursor, { query: "ALPHA", tags: ["a", "b", "a"] })).toBe("k");
    rejects(() => decodeCursor(cursor, { query: "alph", tags: ["a", "b"] }), /does not belong to this search/);
    rejects(() => decodeCursor(cursor, { query: "alpha", tags: ["a"] }), /does not belong to this search/);
    rejects(() => decodeCursor(cursor, { query: "alpha", tags: [] }), /does not belong to this search/);
  });

  it("refuse anything edited, truncated or made up", () => {
    const cursor = encodeCursor("doc/17", scope);
    // Change the key inside and re-encode: the digest no longer matches.
    const wire = JSON.parse(Buffer.from(cursor, "base64url").toString()) as { k: string };
    wire.k = "doc/99";
    rejects(() => decodeCursor(Buffer.from(JSON.stringify(wire)).toString("base64url"), scope), /does not belong/);
    rejects(() => decodeCursor(cursor.slice(0, -3), scope), /cursor/);
    rejects(() => decodeCursor(`${cursor}A`, scope), /cursor is not valid/);
    rejects(() => decodeCursor("has spaces", scope), /cursor is not valid/);
    rejects(() => decodeCursor(Buffer.from("[1,2]").toString("base64url"), scope), /cursor is not valid/);
    rejects(() => decodeCursor(Buffer.from('{"v":2,"k":"a","d":"x"}').toString("base64url"), scope), /cursor is not valid/);
  });

  it("refuse a forged cursor whose key no item could have, such as one with a NUL", () => {
    // The digest is not secret: anyone can mint a cursor that passes it, as this one does.
    for (const k of ["a\u0000b", "tab\there", "x".repeat(513), ""]) {
      const d = createHash("sha256").update(JSON.stringify([1, k, "alpha", ["a", "b"]])).digest("base64url").slice(0, 22);
      const forged = Buffer.from(JSON.stringify({ v: 1, k, d })).toString("base64url");
      rejects(() => decodeCursor(forged, scope), /cursor is not valid/);
    }
  });
});
