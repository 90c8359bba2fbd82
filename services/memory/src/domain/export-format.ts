import type { StoredItem } from "./memory-store.js";

/** The `format` of a memory export's header line. */
export const MEMORY_EXPORT_FORMAT = "chaos-core-memory/1";

/** Keys the cognitive core's own bookkeeping uses (cognition's memory-records.ts owns them). */
export const EPISODE_KEY_PREFIX = "episode:";
export const PROCEDURE_KEY_PREFIX = "procedure:";

/** The first line of a memory export: what it is and whose. */
export function exportHeaderLine(tenant: string): string {
  return `${JSON.stringify({ type: "header", format: MEMORY_EXPORT_FORMAT, tenant })}\n`;
}

/**
 * One export line for a stored item. The value goes in as its stored text, so the line holds the
 * exact JSON that was remembered (the service stores compact `JSON.stringify` output); text with a
 * line break, which only a hand-written row could hold, is re-serialised so the line stays one.
 */
export function exportItemLine(tenant: string, item: StoredItem): string {
  const value = /[\n\r]/.test(item.valueJson) ? JSON.stringify(JSON.parse(item.valueJson)) : item.valueJson;
  const head = JSON.stringify({ type: "memory.item", tenant, key: item.key });
  const tail = JSON.stringify({
    tags: item.tags,
    created_at: item.createdAt.toISOString(),
    updated_at: item.updatedAt.toISOString(),
    expires_at: item.expiresAt ? item.expiresAt.toISOString() : null,
  });
  return `${head.slice(0, -1)},"value":${value},${tail.slice(1)}\n`;
}
