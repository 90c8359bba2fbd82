/**
 * Asks `probe` until it answers something other than undefined, and resolves with that answer;
 * after `timeoutMs` it rejects naming `what`. For state another process or a timer reaches in its
 * own time (a drift seen, a record withdrawn, a ledger entry written).
 */
export async function eventually<T>(
  what: string,
  probe: () => T | undefined | Promise<T | undefined>,
  { timeoutMs = 20_000, intervalMs = 200 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
