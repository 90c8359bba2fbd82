import { describe, expect, it } from "vitest";
import { html, SafeHtml } from "./html.js";

describe("html", () => {
  it("escapes every character that could end text or a quoted attribute", () => {
    const hostile = `<script>alert(1)</script> "><img src=x onerror=alert(1)> ' & done`;
    expect(html`<p title="${hostile}">${hostile}</p>`.text).toBe(
      '<p title="&lt;script&gt;alert(1)&lt;/script&gt; &quot;&gt;&lt;img src=x onerror=alert(1)&gt; &#39; &amp; done">' +
        "&lt;script&gt;alert(1)&lt;/script&gt; &quot;&gt;&lt;img src=x onerror=alert(1)&gt; &#39; &amp; done</p>",
    );
  });

  it("keeps markup html made, once, and escapes each item of a list", () => {
    const cell = html`<td>${"a<b"}</td>`;
    expect(html`<tr>${cell}</tr>`.text).toBe("<tr><td>a&lt;b</td></tr>");
    expect(html`<ul>${["<i>", html`<li>ok</li>`, 3]}</ul>`.text).toBe("<ul>&lt;i&gt;<li>ok</li>3</ul>");
    // Already-escaped text is text: it is escaped again, never taken as markup.
    expect(html`${"&lt;"}`.text).toBe("&amp;lt;");
  });

  it("writes numbers, big integers and booleans as text, and nothing for null and undefined", () => {
    expect(html`${1.5} ${12345678901234567890n} ${false} [${null}${undefined}]`.text).toBe("1.5 12345678901234567890 false []");
  });

  it("has no raw escape hatch: a SafeHtml cannot be made from a string", () => {
    const Mint = SafeHtml as unknown as new (mint: symbol, text: string) => SafeHtml;
    expect(() => new Mint(Symbol("chaoscore.html"), "<script>")).toThrow(TypeError);
    // An object made from SafeHtml's prototype lacks the private field: it is not markup (and,
    // having no text, fails rather than write anything).
    const forged = Object.create(SafeHtml.prototype) as SafeHtml;
    expect(SafeHtml.is(forged)).toBe(false);
    expect(() => html`${forged}`).toThrow(TypeError);
    // One that only looks like it is text, escaped.
    const lookalike = { text: "<script>", toString: () => "<script>" } as unknown as SafeHtml;
    expect(html`${lookalike}`.text).toBe("&lt;script&gt;");
    expect(html`${[lookalike]}`.text).toBe("&lt;script&gt;");
  });

  it("refuses to be called with an array of strings instead of as a template tag", () => {
    const call = html as unknown as (strings: readonly string[], ...values: unknown[]) => SafeHtml;
    expect(() => call(["<script>alert(1)</script>"])).toThrow(/template tag/);
    const dressed = Object.assign(["<script>"], { raw: ["<script>"] });
    expect(() => call(dressed)).toThrow(/template tag/);
  });
});
