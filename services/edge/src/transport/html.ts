/** Markup that is already safe: the result of {@link html}, never a raw string. */
export class SafeHtml {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ENTITIES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/**
 * The one way the edge writes HTML: a tagged template that escapes every interpolated value
 * (for element content and quoted attribute values alike) unless it is markup this function
 * made. Arrays are joined, so lists of fragments need no hand-written escaping either.
 */
export function html(strings: TemplateStringsArray, ...values: ReadonlyArray<SafeHtml | string | number | readonly SafeHtml[]>): SafeHtml {
  let out = strings[0]!;
  values.forEach((value, i) => {
    const parts = Array.isArray(value) ? value : [value];
    for (const part of parts) {
      out += part instanceof SafeHtml ? part.text : String(part).replace(/[&<>"']/g, (c) => ENTITIES[c]!);
    }
    out += strings[i + 1]!;
  });
  return new SafeHtml(out);
}
