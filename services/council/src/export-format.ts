import type { ExportedSession } from "./session-store.js";

/** The `format` of a council export's header line. */
export const COUNCIL_EXPORT_FORMAT = "chaos-core-council/1";

/** The first line of a council export: what it is and whose. */
export function exportHeaderLine(tenant: string): string {
  return `${JSON.stringify({ type: "header", format: COUNCIL_EXPORT_FORMAT, tenant })}\n`;
}

/**
 * One export line for a stored session. The state goes in as its stored text, so the line holds
 * the exact document the service wrote (compact `JSON.stringify` output, key order included);
 * text with a line break, which only a hand-written row could hold, is re-serialised so the
 * line stays one.
 */
export function exportSessionLine(tenant: string, session: ExportedSession): string {
  const state = /[\n\r]/.test(session.stateJson) ? JSON.stringify(JSON.parse(session.stateJson)) : session.stateJson;
  const head = JSON.stringify({
    type: "council.session",
    tenant,
    id: session.id,
    version: session.version,
    created_at: session.createdAt.toISOString(),
    updated_at: session.updatedAt.toISOString(),
  });
  return `${head.slice(0, -1)},"state":${state}}\n`;
}
