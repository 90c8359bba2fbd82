/** Only {@link html} holds this: nothing outside this module can make a {@link SafeHtml}. */
const MINT: unique symbol = Symbol("chaoscore.html");

/**
 * Markup that is already safe: only ever the result of {@link html}. There is no way to wrap a
 * raw string as one (the constructor refuses every caller but `html`, and an object made to
 * look like one, `Object.create(SafeHtml.prototype)` say, lacks the private field and is
 * escaped as text), so data can never reach a page unescaped.
 */
export class SafeHtml {
  readonly #text: string;

  /** @internal Callable by {@link html} only; any other caller gets a TypeError. */
  constructor(mint: typeof MINT, text: string) {
    if (mint !== MINT) throw new TypeError("SafeHtml is made by the html template only");
    this.#text = text;
  }

  /** The markup. */
  get text(): string {
    return this.#text;
  }

  toString(): string {
    return this.#text;
  }

  /** Whether `value` is markup `html` made (a brand check on the private field, not `instanceof`). */
  static is(value: unknown): value is SafeHtml {
    return typeof value === "object" && value !== null && #text in value;
  }
}

/** What a template may interpolate: text (escaped), markup `html` made, or a list of either. */
export type HtmlValue = SafeHtml | string | number | bigint | boolean | null | undefined | ReadonlyArray<SafeHtml | string | number>;

const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Text as HTML: safe in element content and in a quoted attribute value alike. */
function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ENTITIES[c]!);
}

function part(value: unknown): string {
  if (SafeHtml.is(value)) return value.text;
  // null and undefined write nothing, as an absent optional part should.
  if (value === null || value === undefined) return "";
  return escape(String(value));
}

/**
 * The one way the edge writes HTML: a tagged template that escapes every interpolated value
 * (`& < > " '`, so element content and quoted attribute values alike) unless it is markup this
 * function made. Arrays are joined, each item escaped the same way, so lists of fragments need
 * no hand-written escaping either. There is no raw escape hatch: markup comes only from the
 * template's own literal text. Attribute values must be quoted in the template, and no value
 * may be placed inside a `<script>` or `<style>` (the console has neither) or as a URL scheme.
 */
export function html(strings: TemplateStringsArray, ...values: readonly HtmlValue[]): SafeHtml {
  // A template's strings are a frozen array with a frozen `raw`; an array built from data and
  // passed as one would smuggle markup in, so anything else is refused.
  if (!Object.isFrozen(strings) || !Array.isArray(strings.raw) || !Object.isFrozen(strings.raw) || strings.length !== values.length + 1) {
    throw new TypeError("html is a template tag: call it as html`...`, never with an array of strings");
  }
  let out = strings[0]!;
  values.forEach((value, i) => {
    out += Array.isArray(value) ? value.map(part).join("") : part(value);
    out += strings[i + 1]!;
  });
  return new SafeHtml(MINT, out);
}
