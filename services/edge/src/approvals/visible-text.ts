// A person approving a call must read exactly what runs. Some characters display as nothing, as
// a plain space, or reorder the text around them (a right-to-left override makes "exe.txt" read
// "txt.exe"), and an ANSI escape can rewrite a terminal line: each such character is written as
// a JSON `\u` escape instead, and named, so the text shown is the text that runs.

/**
 * Characters that never display as themselves: controls (C0, DEL, C1: ANSI escapes, newlines),
 * format characters (bidirectional marks, embeddings, overrides and isolates, zero-width
 * characters, the BOM, tag characters), line and paragraph separators, every space but U+0020,
 * private-use and unassigned code points, unpaired surrogates, and the other default-ignorable
 * code points (variation selectors, Hangul fillers, the combining grapheme joiner).
 */
const HIDDEN = /^(?:[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Co}\p{Cn}\p{Cs}\p{Default_Ignorable_Code_Point}]|(?!\x20)\p{Zs})$/u;

/** JSON's own short escapes for the controls it has them for. */
const SHORT: Readonly<Record<string, string>> = { "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r" };

const NAMES: ReadonlyMap<number, string> = new Map([
  [0x09, "tab"],
  [0x0a, "line feed"],
  [0x0d, "carriage return"],
  [0x1b, "escape (starts ANSI terminal sequences)"],
  [0x7f, "delete"],
  [0x9b, "control sequence introducer (ANSI)"],
  [0xa0, "no-break space"],
  [0xad, "soft hyphen"],
  [0x034f, "combining grapheme joiner"],
  [0x061c, "arabic letter mark"],
  [0x180e, "mongolian vowel separator"],
  [0x200b, "zero-width space"],
  [0x200c, "zero-width non-joiner"],
  [0x200d, "zero-width joiner"],
  [0x200e, "left-to-right mark"],
  [0x200f, "right-to-left mark"],
  [0x2028, "line separator"],
  [0x2029, "paragraph separator"],
  [0x202a, "left-to-right embedding"],
  [0x202b, "right-to-left embedding"],
  [0x202c, "pop directional formatting"],
  [0x202d, "left-to-right override"],
  [0x202e, "right-to-left override"],
  [0x2060, "word joiner"],
  [0x2066, "left-to-right isolate"],
  [0x2067, "right-to-left isolate"],
  [0x2068, "first strong isolate"],
  [0x2069, "pop directional isolate"],
  [0xfeff, "zero-width no-break space (byte order mark)"],
]);

/** What kind of character `cp` is, for one without a name of its own. */
function kindOf(ch: string, cp: number): string {
  if (/\p{Cc}/u.test(ch)) return "control character";
  if (/\p{Zs}/u.test(ch)) return "space other than U+0020";
  if (/\p{Cs}/u.test(ch)) return "unpaired surrogate";
  if (/\p{Co}/u.test(ch)) return "private-use character";
  if (/\p{Cn}/u.test(ch)) return "unassigned code point";
  if (cp >= 0xe0000 && cp <= 0xe007f) return "tag character (invisible)";
  if ((cp >= 0xfe00 && cp <= 0xfe0f) || (cp >= 0xe0100 && cp <= 0xe01ef)) return "variation selector (invisible)";
  return "invisible formatting character";
}

/** `U+202E right-to-left override`: how an escaped character is named to the person. */
export function describeCodePoint(ch: string): string {
  const cp = ch.codePointAt(0)!;
  const hex = cp.toString(16).toUpperCase().padStart(4, "0");
  return `U+${hex} ${NAMES.get(cp) ?? kindOf(ch, cp)}`;
}

function unicodeEscapes(ch: string): string {
  // One `\uXXXX` per UTF-16 unit (a surrogate pair above U+FFFF), so the text stays valid JSON
  // that parses back to the exact string.
  let out = "";
  for (let i = 0; i < ch.length; i++) out += `\\u${ch.charCodeAt(i).toString(16).padStart(4, "0")}`;
  return out;
}

/** A string as the person reads it. */
export interface VisibleString {
  /** The string with every hidden character written as an escape (quoted as a JSON string literal by {@link visibleJsonString}). */
  readonly text: string;
  /** Each distinct hidden character it held, described (`U+202E right-to-left override`), in order of first appearance. */
  readonly escaped: readonly string[];
}

function visible(s: string, quoted: boolean): VisibleString {
  const parts: string[] = quoted ? ['"'] : [];
  const escaped = new Map<number, string>();
  // for…of walks code points; an unpaired surrogate comes as a unit of its own.
  for (const ch of s) {
    if (quoted && ch === '"') parts.push('\\"');
    else if (quoted && ch === "\\") parts.push("\\\\");
    else if (HIDDEN.test(ch)) {
      parts.push(SHORT[ch] ?? unicodeEscapes(ch));
      const cp = ch.codePointAt(0)!;
      if (!escaped.has(cp)) escaped.set(cp, describeCodePoint(ch));
    } else parts.push(ch);
  }
  if (quoted) parts.push('"');
  return { text: parts.join(""), escaped: [...escaped.values()] };
}

/**
 * Quotes `s` as JSON text in which nothing is hidden: `"` and `\` escaped as JSON does, and every
 * character that does not display as itself (see `HIDDEN`) written as `\n`, `\t`, … or `\uXXXX`
 * and listed in `escaped`. The text parses back (JSON.parse) to exactly `s`. Nothing is cut.
 */
export function visibleJsonString(s: string): VisibleString {
  return visible(s, true);
}

/**
 * `s` unquoted, for text that is not an argument (a policy reason, a principal), with the same
 * hidden characters escaped and listed as {@link visibleJsonString} does.
 */
export function visibleText(s: string): VisibleString {
  return visible(s, false);
}
