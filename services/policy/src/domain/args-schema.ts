/**
 * A tool's pinned input schema (JSON Schema) as the type of `args` in a condition
 * (docs/policy-conditions.md §5 "args against the pins"): the fields it declares become the only
 * fields a condition may name, so a misspelt argument (`args.pth`) is refused where the pin is
 * known instead of failing closed on every call.
 *
 * Deliberately loose where CEL's static types would refuse what works dynamically: numbers stay
 * `dyn` (JSON numbers are CEL doubles at run time, and `args.n == 3` must keep holding for an
 * integer field), and so does anything the converter cannot state (unions, `$ref`, a missing
 * type). Declared strings, bools and lists of them are typed; objects with properties recurse;
 * objects without properties (free-form maps) are `map`.
 */

/** The cel-js schema of a variable: a type name, or nested fields. */
export type CelSchema = string | { readonly [field: string]: CelSchema };

/** The declared fields of `args`. */
export type ArgsFields = { readonly [field: string]: CelSchema };

/** How deep nested objects are typed; below it, `dyn`. */
const MAX_DEPTH = 8;

type Json = Record<string, unknown>;

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The one JSON type a schema states, or undefined (none, or several). */
function typeOf(schema: Json): string | undefined {
  const t = schema["type"];
  if (typeof t === "string") return t;
  // `["string", "null"]`: nullable, which CEL cannot state; the value may be null, so dyn.
  return undefined;
}

/** The element type of a list: a scalar CEL can state, else dyn. */
function elementType(items: unknown): string {
  if (!isObject(items)) return "dyn";
  const t = typeOf(items);
  if (t === "string") return "string";
  if (t === "boolean") return "bool";
  return "dyn";
}

function fieldSchema(schema: unknown, depth: number): CelSchema {
  if (!isObject(schema) || depth > MAX_DEPTH) return "dyn";
  switch (typeOf(schema)) {
    case "string":
      return "string";
    case "boolean":
      return "bool";
    case "array":
      return `list<${elementType(schema["items"])}>`;
    case "object":
      return objectSchema(schema, depth) ?? "map";
    default:
      return "dyn";
  }
}

/** An object's declared fields, or undefined when it declares none (a free-form map). */
function objectSchema(schema: Json, depth: number): { [field: string]: CelSchema } | undefined {
  const properties = schema["properties"];
  if (!isObject(properties) || Object.keys(properties).length === 0) return undefined;
  return Object.fromEntries(Object.entries(properties).map(([name, sub]) => [name, fieldSchema(sub, depth + 1)]));
}

/**
 * The type of `args` for a tool's input schema: its declared fields (none for `properties: {}`, a
 * tool that takes no arguments), or undefined when the schema states no `properties` at all (a
 * free-form object: any argument may come, so nothing can be checked).
 */
export function argsSchemaOf(inputSchema: unknown): ArgsFields | undefined {
  if (!isObject(inputSchema) || typeOf(inputSchema) !== "object" || !isObject(inputSchema["properties"])) return undefined;
  return objectSchema(inputSchema, 0) ?? {};
}

/** Two types of one field as one: nested fields merged, the same type kept, anything else `dyn`. */
function mergeField(a: CelSchema, b: CelSchema): CelSchema {
  if (typeof a === "object" && typeof b === "object") return mergeArgsFields(a, b);
  return a === b ? a : "dyn";
}

/** The fields either declares: what a rule naming several tools may read of `args`. */
export function mergeArgsFields(a: ArgsFields, b: ArgsFields): ArgsFields {
  const merged: { [field: string]: CelSchema } = { ...a };
  for (const [name, type] of Object.entries(b)) merged[name] = name in merged ? mergeField(merged[name]!, type) : type;
  return merged;
}
