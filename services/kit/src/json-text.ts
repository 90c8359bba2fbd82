/**
 * Reads JSON text without building it and without recursion, for what has to be known before
 * anything recursive (zod, hashing, a parser that recurses) may look at a value from outside:
 * how deep it nests and where, the scalar members of the top-level object (a JSON-RPC `id` and
 * `method`, even when the text is not valid JSON), `NaN`/`Infinity` tokens, and where the text
 * stops inside a string (for naming the field an invalid byte sits in). It is no validator:
 * other syntax errors are left to the parser.
 */

/** A path inside a JSON value: member names and array indexes. */
export type JsonPath = Array<string | number>;

export interface JsonTextScanOptions {
  /** Nesting deeper than this is reported; the outermost object or array is level 1. */
  readonly maxDepth: number;
  /**
   * A path whose nesting problems are reported apart, in {@link JsonTextScan.tooDeepWithin}
   * (e.g. `["params", "arguments"]`, which a later check counts from its own root).
   */
  readonly within?: readonly string[];
}

export interface JsonTextScan {
  /** The first object or array nested deeper than `maxDepth`, outside `within`. */
  readonly tooDeep?: JsonPath;
  /** The same inside `within`. */
  readonly tooDeepWithin?: JsonPath;
  /** The first `NaN`, `Infinity` or `-Infinity` token, which no JSON parser accepts. */
  readonly notJson?: { readonly token: string; readonly path: JsonPath };
  /** String and number members of the top-level object, by name (the last one written wins, as in JSON.parse). */
  readonly top: ReadonlyMap<string, string | number>;
  /** Where the text ended inside a string: the value (or, with `inKey`, the member name) being read. */
  readonly unterminated?: { readonly path: JsonPath; readonly inKey: boolean };
}

interface Frame {
  readonly array: boolean;
  /** The next array index, or the member name being read. */
  index: number;
  key: string | undefined;
  expectKey: boolean;
  /** Where this container sits in its parent. */
  readonly at: string | number | undefined;
}

const NUMBER = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/;
const NOT_JSON = /^[+-]?(NaN|Infinity)$/;
const DELIMITERS = new Set([",", ":", "[", "]", "{", "}", '"', " ", "\t", "\n", "\r"]);

function unquote(raw: string): string | undefined {
  if (!raw.includes("\\")) return raw.slice(1, -1);
  try {
    return JSON.parse(raw) as string;
  } catch {
    return undefined;
  }
}

/** Scans JSON text once, iteratively; see the module comment for what it reports. */
export function scanJsonText(text: string, options: JsonTextScanOptions): JsonTextScan {
  // Frames beyond maxDepth + 1 are only counted: a 4 MiB run of "[" must not become 4 M objects.
  const frames: Frame[] = [];
  let uncounted = 0;
  const top = new Map<string, string | number>();
  let tooDeep: JsonPath | undefined;
  let tooDeepWithin: JsonPath | undefined;
  let notJson: JsonTextScan["notJson"];

  const position = (): string | number | undefined => {
    const f = frames[frames.length - 1];
    if (!f || uncounted > 0) return undefined;
    return f.array ? f.index : f.key;
  };
  const pathOf = (extra?: string | number): JsonPath => {
    const path: JsonPath = [];
    for (const f of frames.slice(1)) if (f.at !== undefined) path.push(f.at);
    if (extra !== undefined) path.push(extra);
    return path;
  };
  const isWithin = (path: JsonPath) => options.within !== undefined && options.within.every((k, i) => path[i] === k);

  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text[i]!;
    if (c === "{" || c === "[") {
      if (frames.length <= options.maxDepth) {
        frames.push({ array: c === "[", index: 0, key: undefined, expectKey: c === "{", at: position() });
        // Every branch that goes too deep passes through this level first, so this is where it is named.
        if (frames.length > options.maxDepth) {
          const path = pathOf();
          if (isWithin(path)) tooDeepWithin ??= path;
          else tooDeep ??= path;
        }
      } else {
        uncounted++;
      }
      i++;
    } else if (c === "}" || c === "]") {
      if (uncounted > 0) uncounted--;
      else frames.pop();
      i++;
    } else if (c === ",") {
      const f = frames[frames.length - 1];
      if (f && uncounted === 0) {
        if (f.array) f.index++;
        else f.expectKey = true;
      }
      i++;
    } else if (c === '"') {
      let j = i + 1;
      while (j < n && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      const f = uncounted === 0 ? frames[frames.length - 1] : undefined;
      const inKey = f !== undefined && !f.array && f.expectKey;
      if (j >= n) return { tooDeep, tooDeepWithin, notJson, top, unterminated: { path: inKey ? pathOf() : pathOf(position()), inKey } };
      const raw = text.slice(i, j + 1);
      if (inKey) {
        f.key = unquote(raw);
        f.expectKey = false;
      } else if (frames.length === 1 && uncounted === 0 && f?.key !== undefined && raw.length <= 1024) {
        const value = unquote(raw);
        if (value !== undefined) top.set(f.key, value);
      }
      i = j + 1;
    } else if (c === ":" || c === " " || c === "\t" || c === "\n" || c === "\r") {
      i++;
    } else {
      let j = i;
      while (j < n && !DELIMITERS.has(text[j]!)) j++;
      const token = text.slice(i, j);
      if (NOT_JSON.test(token)) notJson ??= { token, path: pathOf(position()) };
      else if (frames.length === 1 && uncounted === 0 && NUMBER.test(token)) {
        const key = frames[0]!.key;
        if (key !== undefined && !frames[0]!.array) top.set(key, Number(token));
      }
      i = Math.max(j, i + 1);
    }
  }
  return { tooDeep, tooDeepWithin, notJson, top };
}
