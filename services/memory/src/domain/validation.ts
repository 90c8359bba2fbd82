import { ChaosError, isPlainObject } from "@chaos-core/kit";
import type { JsonValue, RememberInput, SearchInput } from "./memory-store.js";

/** The limits every memory call is held to; the edge mirrors them in its tool schemas. */
export const MEMORY_LIMITS = {
  keyMaxChars: 512,
  tagMaxChars: 64,
  maxTags: 32,
  /** 1 MiB of UTF-8 JSON text. */
  valueMaxBytes: 1024 * 1024,
  /** Deeper values are refused rather than risking the stack of every reader. */
  valueMaxDepth: 100,
  defaultLimit: 20,
  maxLimit: 100,
  /** What uint32 `ttl_seconds` can carry on the wire. */
  maxTtlSeconds: 2 ** 32 - 1,
} as const;

function invalid(message: string): ChaosError {
  return new ChaosError("invalid_argument", message);
}

// Control characters have no business in a key or tag, and an unpaired surrogate cannot be
// stored as UTF-8 (drivers would silently replace it, so the stored key would differ).
const FORBIDDEN_CHARS = /[\p{Cc}\p{Cs}]/u;

function charCount(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

function checkText(what: string, value: unknown, maxChars: number): string {
  if (typeof value !== "string") throw invalid(`${what} must be a string`);
  const n = charCount(value);
  if (n === 0) throw invalid(`${what} must not be empty`);
  if (n > maxChars) throw invalid(`${what} is ${n} characters; the limit is ${maxChars}`);
  if (FORBIDDEN_CHARS.test(value)) {
    throw invalid(`${what} must not contain control characters or unpaired surrogates`);
  }
  return value;
}

/** Checks a key: 1..512 characters, no control characters. */
export function validateKey(key: unknown): string {
  return checkText("key", key, MEMORY_LIMITS.keyMaxChars);
}

/** Checks a tag list (at most 32 tags of 1..64 characters) and drops repeats, keeping order. */
export function validateTags(tags: readonly unknown[] | undefined): string[] {
  const list = tags ?? [];
  if (!Array.isArray(list)) throw invalid("tags must be a list of strings");
  const distinct = [...new Set(list.map((t, i) => checkText(`tag ${i + 1}`, t, MEMORY_LIMITS.tagMaxChars)))];
  if (distinct.length > MEMORY_LIMITS.maxTags) {
    throw invalid(`${distinct.length} tags given; the limit is ${MEMORY_LIMITS.maxTags}`);
  }
  return distinct;
}

/** Checks a TTL in whole seconds; 0 means no expiry. */
export function validateTtlSeconds(ttl: unknown): number {
  const value = ttl ?? 0;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0 || value > MEMORY_LIMITS.maxTtlSeconds) {
    throw invalid(`ttl_seconds must be a whole number of seconds from 0 to ${MEMORY_LIMITS.maxTtlSeconds}`);
  }
  return value;
}

/** Checks a retention age: whole seconds above 0 that uint32 `max_age_seconds` can carry. */
export function validateMaxAgeSeconds(maxAge: unknown): number {
  if (typeof maxAge !== "number" || !Number.isInteger(maxAge) || maxAge < 1 || maxAge > MEMORY_LIMITS.maxTtlSeconds) {
    throw invalid(
      `max_age_seconds must be a whole number of seconds from 1 to ${MEMORY_LIMITS.maxTtlSeconds} (items last written longer ago are deleted); got ${String(maxAge)}`,
    );
  }
  return maxAge;
}

/**
 * Resolves a page size: 0 or absent means the default; above the maximum it is served as
 * the maximum (AIP-158), so a generous caller still gets results.
 */
export function resolveLimit(limit: unknown): number {
  const value = limit ?? 0;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
    throw invalid("limit must be a whole number, 0 for the default");
  }
  if (value === 0) return MEMORY_LIMITS.defaultLimit;
  return Math.min(value, MEMORY_LIMITS.maxLimit);
}

/** Checks a search query: any text without control characters; empty matches everything. */
export function validateQuery(query: unknown): string {
  const value = query ?? "";
  if (typeof value !== "string") throw invalid("query must be a string");
  // Keys and stored JSON text hold no control characters, so such a query could only ever
  // match across the key/value boundary of the search text: refuse it instead.
  if (FORBIDDEN_CHARS.test(value)) {
    throw invalid("query must not contain control characters or unpaired surrogates");
  }
  return value;
}

/** Throws unless `value` is plain JSON (no NaN, undefined, class instances, or deep nesting). */
function assertJson(value: unknown, depth: number, path: string): asserts value is JsonValue {
  if (depth > MEMORY_LIMITS.valueMaxDepth) {
    throw invalid(`value nests deeper than ${MEMORY_LIMITS.valueMaxDepth} levels`);
  }
  switch (typeof value) {
    case "string":
    case "boolean":
      return;
    case "number":
      if (!Number.isFinite(value)) throw invalid(`value${path} is ${value}, which JSON cannot represent`);
      return;
    case "object":
      if (value === null) return;
      if (Array.isArray(value)) {
        value.forEach((v, i) => assertJson(v, depth + 1, `${path}[${i}]`));
        return;
      }
      if (!isPlainObject(value)) throw invalid(`value${path} is not a plain JSON object`);
      for (const [k, v] of Object.entries(value)) assertJson(v, depth + 1, `${path}.${k}`);
      return;
    default:
      if (value === undefined && path === "") throw invalid("value is required (JSON null is a value)");
      throw invalid(`value${path} is ${typeof value}, which is not JSON`);
  }
}

/**
 * Checks that `value` is plain JSON within the size limit and returns its compact JSON
 * text, which is what is stored, searched and counted as value bytes.
 */
export function serializeValue(value: unknown): string {
  assertJson(value, 0, "");
  const text = JSON.stringify(value);
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > MEMORY_LIMITS.valueMaxBytes) {
    throw invalid(`value is ${bytes} bytes as JSON; the limit is ${MEMORY_LIMITS.valueMaxBytes} bytes (1 MiB)`);
  }
  return text;
}

/** A `remember` call after validation: what the store writes. */
export interface ValidRemember {
  key: string;
  valueJson: string;
  tags: string[];
  ttlSeconds: number;
}

/** Validates a `remember` call as a whole. */
export function validateRemember(input: RememberInput): ValidRemember {
  return {
    key: validateKey(input.key),
    valueJson: serializeValue(input.value),
    tags: validateTags(input.tags),
    ttlSeconds: validateTtlSeconds(input.ttlSeconds),
  };
}

/** A `search` call after validation. The cursor is still opaque here; see cursor.ts. */
export interface ValidSearch {
  query: string;
  tags: string[];
  limit: number;
  cursor: string;
}

/** Validates a `search` call as a whole. */
export function validateSearch(input: SearchInput): ValidSearch {
  const cursor = input.cursor ?? "";
  if (typeof cursor !== "string") throw invalid("cursor must be a string");
  return {
    query: validateQuery(input.query),
    tags: validateTags(input.tags),
    limit: resolveLimit(input.limit),
    cursor,
  };
}

/** Escapes `%`, `_` and `\` so user text matches literally inside a LIKE pattern. */
export function escapeLike(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`);
}
