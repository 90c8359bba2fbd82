import { createHash } from "node:crypto";
import { ChaosError } from "@chaos-core/kit";
import { validateKey } from "./validation.js";

/**
 * Search cursors: opaque base64url text carrying the last key of a page and a digest that
 * binds it to that key and to the search (query and tags) it came from.
 *
 * The digest is not a secret MAC: a cursor only positions a search inside the caller's own
 * keyspace (the tenant comes from the verified call context), so forging one gains nothing.
 * What it buys is a clear `invalid_argument` for a corrupted, truncated or hand-edited cursor,
 * and for a cursor reused with another query or other tags, instead of a silently wrong page.
 */

const VERSION = 1;

interface WireCursor {
  v: number;
  /** The last key of the previous page. */
  k: string;
  /** Digest of version, key and search. */
  d: string;
}

/** The search a cursor belongs to. Case and tag order do not change results, so neither binds. */
export interface CursorScope {
  query: string;
  tags: readonly string[];
}

function digest(lastKey: string, scope: CursorScope): string {
  const tags = [...new Set(scope.tags)].sort();
  return createHash("sha256")
    .update(JSON.stringify([VERSION, lastKey, scope.query.toLowerCase(), tags]))
    .digest("base64url")
    .slice(0, 22);
}

/** Makes the cursor that continues a search after `lastKey`. */
export function encodeCursor(lastKey: string, scope: CursorScope): string {
  const wire: WireCursor = { v: VERSION, k: lastKey, d: digest(lastKey, scope) };
  return Buffer.from(JSON.stringify(wire), "utf8").toString("base64url");
}

const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** Returns the last key a cursor carries, or throws `invalid_argument` if it does not belong to `scope`. */
export function decodeCursor(cursor: string, scope: CursorScope): string {
  const bad = () => new ChaosError("invalid_argument", "cursor is not valid: pass next_cursor from a previous page unchanged");
  if (!BASE64URL.test(cursor)) throw bad();
  const bytes = Buffer.from(cursor, "base64url");
  // Base64 decoding ignores stray trailing bits; only the canonical spelling is accepted.
  if (bytes.toString("base64url") !== cursor) throw bad();
  let wire: Partial<WireCursor>;
  try {
    wire = JSON.parse(bytes.toString("utf8")) as Partial<WireCursor>;
  } catch {
    throw bad();
  }
  if (typeof wire !== "object" || wire === null || wire.v !== VERSION || typeof wire.k !== "string" || typeof wire.d !== "string") {
    throw bad();
  }
  if (wire.d !== digest(wire.k, scope)) {
    // Either edited, or minted for a different search: say which is likelier to help.
    throw new ChaosError(
      "invalid_argument",
      "cursor does not belong to this search: reuse a cursor only with the same query and tags",
    );
  }
  // The digest is no secret, so a forged cursor can carry a key no item could have (a NUL,
  // 10 000 characters); the store must never be asked for it.
  try {
    return validateKey(wire.k);
  } catch {
    throw bad();
  }
}
