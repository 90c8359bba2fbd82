/** Something an upstream reported about one call while it ran (docs/federation.md §7). */
export type UpstreamNotice =
  | { readonly kind: "progress"; readonly progress: number; readonly total?: number; readonly message?: string }
  | { readonly kind: "log"; readonly level: string; readonly data: unknown };

/** The longest line of an upstream's own text passed on to the caller. */
export const NOTICE_MAX_CHARS = 300;

/** What an upstream asked Chaos Core for, in words, by method. */
const ASKED_FOR: Readonly<Record<string, string>> = {
  "sampling/createMessage": "a model's completion (sampling)",
  "elicitation/create": "input from a person (elicitation)",
  "roots/list": "its roots (the folders it may use)",
};

/**
 * The answer to a request an upstream sent back to Chaos Core during a call: it names the method
 * and says Chaos Core does not support it, so the upstream's author (and its logs) can tell why.
 */
export function refusalOf(method: string): string {
  const what = ASKED_FOR[method];
  return what
    ? `${method} is not supported by Chaos Core: an upstream cannot ask it for ${what}`
    : `${method} is not supported by Chaos Core: it answers no requests from an upstream`;
}

/** Text of a log line's `data`, which may be any JSON: a string as it is, anything else as JSON. */
function dataText(data: unknown): string {
  if (typeof data === "string") return data;
  try {
    return JSON.stringify(data) ?? String(data);
  } catch {
    return String(data);
  }
}

/**
 * One line for the caller of the call a notice belongs to, naming the upstream: `files: 3/10`,
 * `files: 3/10 copying a.txt`, `files: [info] copied a.txt`. Control characters become spaces and the
 * upstream's text is cut at {@link NOTICE_MAX_CHARS}: it is a stranger's, passed on, not trusted.
 */
export function noticeLine(upstream: string, notice: UpstreamNotice): string {
  const text =
    notice.kind === "log"
      ? `[${notice.level}] ${dataText(notice.data)}`
      : [notice.total !== undefined ? `${notice.progress}/${notice.total}` : "", notice.message ?? ""].filter(Boolean).join(" ") || String(notice.progress);
  // eslint-disable-next-line no-control-regex
  const flat = text.replace(/[\u0000-\u001f\u007f]+/g, " ").trim();
  return `${upstream}: ${flat.length > NOTICE_MAX_CHARS ? `${flat.slice(0, NOTICE_MAX_CHARS)}…` : flat}`;
}
