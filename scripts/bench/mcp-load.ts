import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { setMaxListeners } from "node:events";

// Each request of a client's transport is a `fetch` that adds an abort listener to the transport's
// one AbortSignal; undici removes it only once the request is garbage collected, so a busy client
// passes Node's warning threshold (1,500) between collections and the bench's output drowned in
// MaxListenersExceededWarning lines. Not a leak of the server under test; no limit for the driver's targets.
setMaxListeners(0);

export interface LoadResult {
  calls: number;
  seconds: number;
  p50: number;
  p99: number;
  throughput: number;
}

export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

/**
 * Drives `tools/call` over Streamable HTTP with `concurrency` real SDK clients (one session
 * each), each calling in a loop for `seconds` after a short warm-up. Latency is per call,
 * throughput is calls per second over the wall time.
 */
export async function runLoad(options: {
  url: string;
  tool: string;
  args: Record<string, unknown>;
  concurrency: number;
  seconds: number;
  warmupCalls?: number;
}): Promise<LoadResult> {
  const clients: Client[] = [];
  const transports: StreamableHTTPClientTransport[] = [];
  for (let i = 0; i < options.concurrency; i++) {
    const client = new Client({ name: "bench", version: "0.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL(options.url));
    await client.connect(transport);
    clients.push(client);
    transports.push(transport);
  }
  const call = async (client: Client) => {
    const res = await client.callTool({ name: options.tool, arguments: options.args });
    if (res.isError) throw new Error(`tool error: ${JSON.stringify(res.content)}`);
  };
  for (const client of clients) for (let i = 0; i < (options.warmupCalls ?? 50); i++) await call(client);

  const latencies: number[] = [];
  const start = performance.now();
  const end = start + options.seconds * 1000;
  await Promise.all(
    clients.map(async (client) => {
      while (performance.now() < end) {
        const t0 = performance.now();
        await call(client);
        latencies.push(performance.now() - t0);
      }
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  // End each session (HTTP DELETE), as a well-behaved client does: closing alone leaves it open
  // until it idles out, and the rounds would reach the sessions-per-key cap.
  await Promise.all(transports.map((t) => t.terminateSession().catch(() => undefined)));
  await Promise.all(clients.map((c) => c.close()));
  latencies.sort((a, b) => a - b);
  return {
    calls: latencies.length,
    seconds,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    throughput: latencies.length / seconds,
  };
}
