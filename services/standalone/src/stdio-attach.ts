import { setTimeout as sleep } from "node:timers/promises";
import { isDataDirLocked } from "@chaos-core/kit";
import { readAdminFile } from "./admin-client.js";
import { readAgentEndpoint, type AgentFile } from "./agent-endpoint.js";
import { processExists } from "./data-dir-access.js";

/** What a `chaos-core stdio` process that found its data directory held does (docs/protocol.md §16). */
export type Attachment =
  /** Nothing holds the directory any more: take it and serve. */
  | { readonly kind: "free" }
  /** Relay the host's connection to the process that serves it. */
  | { readonly kind: "relay"; readonly endpoint: AgentFile; readonly upstream: string }
  /** Nothing to relay to, and the directory stays held: answer every request with `message`. */
  | { readonly kind: "refuse"; readonly message: string };

const POLL_MS = 200;
const PROBE_TIMEOUT_MS = 2_000;

/** Whether the published endpoint's process lives and its HTTP listener answers. */
async function answers(endpoint: AgentFile): Promise<boolean> {
  if (!processExists(endpoint.pid)) return false;
  try {
    const res = await fetch(new URL("/healthz", endpoint.url), { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
    await res.body?.cancel();
    return res.ok;
  } catch {
    return false;
  }
}

/** Who holds the directory, in words, from what it wrote there. */
async function holderOf(dataDir: string): Promise<string> {
  const admin = await readAdminFile(dataDir).catch(() => undefined);
  if (!admin || !processExists(admin.pid)) return "another chaos-core process (an operator command, or a server that has not opened its stores)";
  return `chaos-core process ${admin.pid} (its operator endpoint ${admin.url}${admin.console_url ? `, approval console ${admin.console_url}` : ""})`;
}

/**
 * Waits, up to `waitMs`, for the data directory another process holds to become usable to a
 * `chaos-core stdio` process: the holder publishes its MCP endpoint for relays (`agent.json`, once
 * its stores are open) → relay; the holder lets go (a version probe that stopped, an operator
 * command that finished) → free; neither → refuse, naming the holder and the way out.
 */
export async function attachToDataDir(dataDir: string, waitMs: number, onWait?: () => void): Promise<Attachment> {
  const deadline = Date.now() + waitMs;
  let told = false;
  for (;;) {
    const endpoint = await readAgentEndpoint(dataDir);
    if (endpoint && (await answers(endpoint))) {
      return { kind: "relay", endpoint, upstream: `chaos-core ${endpoint.mode} (pid ${endpoint.pid}) at ${endpoint.url}` };
    }
    if (!(await isDataDirLocked(dataDir))) return { kind: "free" };
    if (Date.now() >= deadline) {
      const holder = await holderOf(dataDir);
      return {
        kind: "refuse",
        message:
          `chaos-core stdio cannot serve the data directory ${dataDir}: ${holder} holds it and offers no MCP endpoint this process could relay through. ` +
          "Stop that process, or give this MCP server a data directory of its own: set CHAOS_CORE_DATA_DIR (or pass --data-dir DIR) in the host's configuration.",
      };
    }
    if (!told) {
      told = true;
      onWait?.();
    }
    await sleep(POLL_MS);
  }
}

/**
 * Why `chaos-core serve` cannot start on a data directory another process holds, naming that
 * process (pid, what it serves where) and the way out. A server does not relay: it needs the
 * directory's stores itself.
 */
export async function heldAgainstServe(dataDir: string): Promise<string> {
  const endpoint = await readAgentEndpoint(dataDir);
  const live = endpoint && processExists(endpoint.pid) ? endpoint : undefined;
  const admin = await readAdminFile(dataDir).catch(() => undefined);
  const holder = live ? `chaos-core ${live.mode} (pid ${live.pid}) serves it, at ${live.url}` : `${await holderOf(dataDir)} holds it`;
  const reach = admin?.console_url ? `; its approval console is ${admin.console_url}, and \`chaos-core approvals\` reaches it` : "";
  return (
    `the data directory ${dataDir} is in use: ${holder}${reach}. One process serves a data directory: ` +
    "stop that one, or start this server on another --data-dir (CHAOS_CORE_DATA_DIR). A `chaos-core stdio` started on this directory relays through the process that serves it."
  );
}
