/**
 * Where the approval console is reached from the place an agent's call came in, so the answers
 * agents get can link to it (docs/approvals.md §2, "Links"). Set on {@link EdgeDeps.console} by
 * whatever serves the console: the HTTP transport that mounts it, or `chaos-core stdio` with
 * its loopback listener. Absent: the console is off, and no answer names it.
 */
export interface ConsoleLinks {
  /**
   * `CHAOS_CORE_PUBLIC_URL` (no trailing slash, may carry a path prefix): when set, every link
   * starts with it, whatever Host the call came in with.
   */
  readonly publicUrl?: string;
  /**
   * Links may be built from an MCP request's own Host (`http://` + Host): that Host passed the
   * same check the console serves behind, so it names this server, not one an attacker chose.
   */
  readonly fromRequestHost?: boolean;
  /** The console listener's own URL (`http://127.0.0.1:<port>`), for a call with no Host (stdio). */
  readonly listenerUrl?: () => string | undefined;
}

/** The path the console is mounted at, on every listener that serves it. */
export const CONSOLE_PATH = "/approvals";

/**
 * The console URL of `path` (under {@link CONSOLE_PATH}: `/step/<id>`, `/spend/<seq>`, `""` for the
 * list) for a call that came in with `requestHost` (the HTTP Host header; undefined over stdio):
 * `CHAOS_CORE_PUBLIC_URL` when set, else the request's validated Host, else the listener's URL.
 * Undefined when the console is off or cannot be reached from here.
 */
export function consoleLink(links: ConsoleLinks | undefined, path: string, requestHost: string | undefined): string | undefined {
  if (!links) return undefined;
  const base = links.publicUrl ?? (links.fromRequestHost && requestHost ? `http://${requestHost}` : links.listenerUrl?.());
  return base ? `${base}${CONSOLE_PATH}${path}` : undefined;
}

/** The console path of a step approval. */
export function stepPath(approvalId: string): string {
  return `/step/${encodeURIComponent(approvalId)}`;
}

/** The console path of a spend request. */
export function spendPath(requestSeq: number | bigint): string {
  return `/spend/${String(requestSeq)}`;
}
