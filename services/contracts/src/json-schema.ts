import { isObject } from "@chaos-core/kit";

/** A JSON Schema as published (draft-07 from zod), walked structurally. */
export type JsonSchema = { readonly [key: string]: unknown };

/** Keywords that only explain: a change to them is cosmetic. */
export const COSMETIC_KEYWORDS: ReadonlySet<string> = new Set(["description", "title", "examples", "$comment"]);

/** Keywords that bound a value: adding one narrows what is accepted or produced. */
export const LIMIT_KEYWORDS: ReadonlySet<string> = new Set([
  "maxLength",
  "minLength",
  "maxItems",
  "minItems",
  "maxProperties",
  "minProperties",
  "maximum",
  "minimum",
  "exclusiveMaximum",
  "exclusiveMinimum",
  "multipleOf",
  "pattern",
  "uniqueItems",
]);

/** Keywords that say what a value is: changing one is a change of type. */
export const TYPE_KEYWORDS: ReadonlySet<string> = new Set(["type", "enum", "const", "format", "$ref"]);

/** Keywords holding sub-schemas, walked by {@link children}, not compared as values. */
const STRUCTURE_KEYWORDS: ReadonlySet<string> = new Set([
  "properties",
  "items",
  "additionalProperties",
  "anyOf",
  "oneOf",
  "allOf",
  "required",
  "definitions",
  "$defs",
]);

export function isSchema(v: unknown): v is JsonSchema {
  return isObject(v);
}

/** JSON Pointer escaping (RFC 6901) of one reference token. */
function token(s: string): string {
  return s.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** The sub-schemas of `schema`, each with its JSON Pointer below `at`. */
export function children(schema: JsonSchema, at: string): Array<[string, JsonSchema]> {
  const out: Array<[string, JsonSchema]> = [];
  const props = schema.properties;
  if (isSchema(props)) for (const [k, v] of Object.entries(props)) if (isSchema(v)) out.push([`${at}/properties/${token(k)}`, v]);
  if (isSchema(schema.items)) out.push([`${at}/items`, schema.items]);
  if (Array.isArray(schema.items)) schema.items.forEach((v, i) => isSchema(v) && out.push([`${at}/items/${i}`, v]));
  if (isSchema(schema.additionalProperties)) out.push([`${at}/additionalProperties`, schema.additionalProperties]);
  for (const key of ["anyOf", "oneOf", "allOf"] as const) {
    const list = schema[key];
    if (Array.isArray(list)) list.forEach((v, i) => isSchema(v) && out.push([`${at}/${key}/${i}`, v]));
  }
  for (const key of ["definitions", "$defs"] as const) {
    const defs = schema[key];
    if (isSchema(defs)) for (const [k, v] of Object.entries(defs)) if (isSchema(v)) out.push([`${at}/${key}/${token(k)}`, v]);
  }
  return out;
}

/** Every keyword of `schema` that is a value, not a sub-schema. */
export function valueKeywords(schema: JsonSchema): string[] {
  return Object.keys(schema).filter((k) => !STRUCTURE_KEYWORDS.has(k));
}

/** Number of properties at every depth. */
export function fieldCount(schema: JsonSchema): number {
  let n = isSchema(schema.properties) ? Object.keys(schema.properties).length : 0;
  for (const [, child] of children(schema, "")) n += fieldCount(child);
  return n;
}

/** One collection a schema lets grow without bound. */
export interface UnboundedCollection {
  readonly pointer: string;
  /** Whether its items are objects (each may carry many fields). */
  readonly objectItems: boolean;
}

function typesOf(schema: JsonSchema): string[] {
  const t = schema.type;
  return typeof t === "string" ? [t] : Array.isArray(t) ? t.filter((x): x is string => typeof x === "string") : [];
}

/**
 * Arrays without `maxItems` and maps (an `additionalProperties` schema, or a `propertyNames`
 * constraint) without `maxProperties`, at every depth, by JSON Pointer.
 */
export function unboundedCollections(schema: JsonSchema, at = ""): UnboundedCollection[] {
  const out: UnboundedCollection[] = [];
  const types = typesOf(schema);
  if (types.includes("array") && schema.maxItems === undefined) {
    const items = isSchema(schema.items) ? schema.items : undefined;
    out.push({ pointer: at === "" ? "/" : at, objectItems: items !== undefined && (typesOf(items).includes("object") || isSchema(items.properties)) });
  }
  const isMap = isSchema(schema.additionalProperties) || schema.propertyNames !== undefined;
  if (types.includes("object") && isMap && schema.maxProperties === undefined) {
    const values = isSchema(schema.additionalProperties) ? schema.additionalProperties : undefined;
    out.push({ pointer: at === "" ? "/" : at, objectItems: values !== undefined && typesOf(values).includes("object") });
  }
  for (const [pointer, child] of children(schema, at)) out.push(...unboundedCollections(child, pointer));
  return out;
}

/** The schema without its cosmetic keywords, at every depth (what a model's calls depend on). */
export function withoutCosmetics(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutCosmetics);
  if (!isSchema(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (COSMETIC_KEYWORDS.has(k) && typeof v !== "object") continue;
    // `properties` holds names, not keywords: a property called "description" is kept.
    out[k] = k === "properties" && isSchema(v) ? Object.fromEntries(Object.entries(v).map(([p, s]) => [p, withoutCosmetics(s)])) : withoutCosmetics(v);
  }
  return out;
}
