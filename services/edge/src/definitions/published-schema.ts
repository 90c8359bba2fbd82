import { isObject } from "@chaos-core/kit";

/** zod bounds every integer to the safe range; the bound is no limit of ours. */
const SAFE = Number.MAX_SAFE_INTEGER;

/** Keywords whose value is a map of names to subschemas, a list of subschemas, or one subschema (or a draft-07 tuple). */
const SCHEMA_MAPS = new Set(["properties", "patternProperties", "definitions", "$defs", "dependentSchemas"]);
const SCHEMA_LISTS = new Set(["anyOf", "allOf", "oneOf", "prefixItems"]);
const SCHEMA_ONE = new Set(["items", "additionalItems", "additionalProperties", "propertyNames", "contains", "not", "if", "then", "else"]);

type Schema = Record<string, unknown>;

/**
 * A tool's JSON Schema as `tools/list` publishes it: zod's draft-07 conversion without what
 * constrains nothing, so clients and models read fewer bytes for the same schema (issue 30
 * holds the default list to 48 KB: test/e2e/tool-surface.test.ts). Left out:
 * - `$schema`: absent means JSON Schema 2020-12 (MCP 2025-11-25), and what zod writes for
 *   draft-07 here (`$ref` wrapped in `allOf`, `definitions`, one schema in `items`) means the
 *   same in 2020-12, so a validator of either dialect reads it alike;
 * - `propertyNames: {type: "string"}` (every JSON member name is a string), and `items: {}`
 *   (any items, the default); `additionalProperties: {}` stays, as it says what a map is: an
 *   object of any members, not one whose fields are described elsewhere;
 * - `minimum` / `maximum` of ±(2^53 − 1), which zod adds to every integer;
 * - zod's recursive definition of a JSON value (`z.json()`), which admits whatever JSON can
 *   carry: a reference to it is any value (`{}`), and its definition goes.
 * Walks subschemas only (a property named `propertyNames` is a property); values (`enum`,
 * `const`, `default`) are copied as they are.
 */
export function compactSchema(schema: Schema): Schema {
  const definitions = isObject(schema["definitions"]) ? schema["definitions"] : {};
  const anyJson = new Set(Object.keys(definitions).filter((name) => isJsonValueDefinition(definitions[name], `#/definitions/${name}`)).map((name) => `#/definitions/${name}`));
  const out = compact(schema, anyJson) as Schema;
  if (isObject(out["definitions"])) {
    const kept = Object.fromEntries(Object.entries(out["definitions"]).filter(([name]) => !anyJson.has(`#/definitions/${name}`)));
    if (Object.keys(kept).length > 0) out["definitions"] = kept;
    else delete out["definitions"];
  }
  return out;
}

/**
 * A tool's result schema as `tools/list` publishes it (of a {@link compactSchema}): what a
 * result holds, not what it may not hold. The result's own fields with their type, enum,
 * description and whether required; each object among them (or array of objects) as its type
 * only, its fields the tool's to describe in words; `error`, kit's error shape the schema's
 * `anyOf` admits instead of a result, with its two fields. No `additionalProperties: false`: a
 * client checks what is declared, and a successful result is checked against the whole schema
 * before it is sent (the SDK runs the tool's zod schema). Every result schema published whole
 * made the default list weigh twice its budget (issue 30).
 */
export function publishedResultSchema(schema: Schema): Schema {
  const { additionalProperties, ...compacted } = schema;
  const properties = isObject(compacted["properties"]) ? compacted["properties"] : {};
  return {
    ...compacted,
    ...(additionalProperties === undefined || additionalProperties === false ? {} : { additionalProperties }),
    properties: Object.fromEntries(Object.entries(properties).map(([name, field]) => [name, name === "error" ? declared(field) : typeOnly(field)])),
  };
}

/** An object's declared fields without `additionalProperties: false`. */
function declared(field: unknown): unknown {
  if (!isObject(field) || field["additionalProperties"] !== false) return field;
  const { additionalProperties: _closed, ...rest } = field;
  return rest;
}

/**
 * A field as its type alone when it holds objects with fields of their own: an object, or an
 * array of them. A map (any members) is published as it is.
 */
function typeOnly(field: unknown): unknown {
  if (!isObject(field)) return field;
  const { properties, required: _required, additionalProperties: _closed, ...rest } = field;
  if (properties !== undefined) return { ...rest, type: "object" };
  const items = field["items"];
  if (isObject(items) && items["properties"] !== undefined) return { ...rest, items: { type: "object" } };
  return field;
}

function compact(node: unknown, anyJson: ReadonlySet<string>): unknown {
  if (!isObject(node)) return node;
  if (typeof node["$ref"] === "string" && anyJson.has(node["$ref"])) return {};
  const out: Schema = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === "$schema") continue;
    if ((key === "minimum" && value === -SAFE) || (key === "maximum" && value === SAFE)) continue;
    let kept: unknown;
    if (SCHEMA_MAPS.has(key) && isObject(value)) kept = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, compact(sub, anyJson)]));
    else if (SCHEMA_LISTS.has(key) && Array.isArray(value)) kept = value.map((sub) => compact(sub, anyJson));
    else if (SCHEMA_ONE.has(key)) kept = Array.isArray(value) ? value.map((sub) => compact(sub, anyJson)) : compact(value, anyJson);
    else kept = value;
    if (key === "propertyNames" && isObject(kept) && Object.keys(kept).length === 1 && kept["type"] === "string") continue;
    if (key === "items" && isObject(kept) && Object.keys(kept).length === 0) continue;
    // What is left of `allOf: [{$ref: <a JSON value>}]` (zod's wrapping of a described reference).
    if (key === "allOf" && Array.isArray(kept) && kept.every((sub) => isObject(sub) && Object.keys(sub).length === 0)) continue;
    out[key] = kept;
  }
  return out;
}

/** zod's `z.json()` in draft-07: any of string, number, boolean, null, an array of itself, an object of itself. */
function isJsonValueDefinition(definition: unknown, self: string): boolean {
  if (!isObject(definition) || !Array.isArray(definition["anyOf"]) || Object.keys(definition).length !== 1) return false;
  const branches = definition["anyOf"] as unknown[];
  // Itself, referenced plainly or (where zod carries metadata beside a reference) wrapped in allOf.
  const selfRef = (v: unknown): boolean =>
    isObject(v) && Object.keys(v).length === 1 && (v["$ref"] === self || (Array.isArray(v["allOf"]) && v["allOf"].length === 1 && selfRef(v["allOf"][0])));
  const found = new Set<string>();
  for (const b of branches) {
    if (!isObject(b)) return false;
    const type = b["type"];
    const keys = Object.keys(b).filter((k) => !(k === "propertyNames" && isObject(b[k]) && b[k]["type"] === "string"));
    if (typeof type !== "string") return false;
    if (["string", "number", "boolean", "null"].includes(type) && keys.length === 1) found.add(type);
    else if (type === "array" && keys.length === 2 && selfRef(b["items"])) found.add(type);
    else if (type === "object" && keys.length === 2 && selfRef(b["additionalProperties"])) found.add(type);
    else return false;
  }
  return branches.length === 6 && found.size === 6;
}
